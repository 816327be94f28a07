"""The typed settings that cross into the core (`_core.Truncation`,
`_core.Padding`): checked when made, readable by name, comparable, picklable,
and what `_settings` resolves user arguments and tokenizer.json into."""

from __future__ import annotations

import pickle

import pytest
from conftest import ours
from gpu_tok import _settings
from gpu_tok._core import Padding, Truncation

BERT = "bert-minilm"  # tokenizer.json carries truncation (128) and padding ([PAD])


def test_truncation_fields_defaults_and_checks() -> None:
    t = Truncation(32)
    assert (t.max_length, t.strategy, t.side, t.stride) == (32, "longest_first", "right", 0)
    t = Truncation(8, "only_second", "left", 2)
    assert (t.max_length, t.strategy, t.side, t.stride) == (8, "only_second", "left", 2)
    with pytest.raises(ValueError, match="strategy"):
        Truncation(8, "shortest")
    with pytest.raises(ValueError, match="side"):
        Truncation(8, side="middle")


def test_padding_fields_defaults_and_checks() -> None:
    p = Padding()
    assert (p.length, p.side, p.pad_to_multiple_of, p.pad_id, p.pad_type_id, p.pad_token) == (
        None, "right", None, 0, 0, "")
    p = Padding(16, "left", 8, 3, 1, "<pad>")
    assert (p.length, p.side, p.pad_to_multiple_of, p.pad_id, p.pad_type_id, p.pad_token) == (
        16, "left", 8, 3, 1, "<pad>")
    with pytest.raises(ValueError, match="pad_to_multiple_of"):
        Padding(pad_to_multiple_of=0)
    with pytest.raises(ValueError, match="side"):
        Padding(side="up")


def test_settings_compare_hash_repr_and_pickle() -> None:
    for value, other in [(Truncation(8, "only_first", "left", 1), Truncation(8, "only_first", "left", 2)),
                         (Padding(4, "left", 2, 5, 1, "[PAD]"), Padding(4, "left", 2, 5, 0, "[PAD]"))]:
        copy = pickle.loads(pickle.dumps(value))
        assert copy == value and hash(copy) == hash(value) and repr(copy) == repr(value)
        assert value != other and value != repr(value)
    assert repr(Truncation(8)) == "Truncation(max_length=8, strategy='longest_first', side='right', stride=0)"


def test_settings_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Truncation(8).max_length = 9  # type: ignore[misc]
    with pytest.raises(AttributeError):
        Padding().pad_id = 1  # type: ignore[misc]


def test_tokenizer_json_settings_come_back_typed() -> None:
    core = ours(BERT)._core
    assert core.file_truncation() == Truncation(128, "longest_first", "right", 0)
    padding = core.file_padding()
    assert isinstance(padding, Padding) and (padding.pad_token, padding.length) == ("[PAD]", 128)


def test_resolution_uses_the_file_then_the_arguments() -> None:
    d = ours(BERT)._defaults
    assert _settings.truncation(d, None, None, None, from_file=True) == Truncation(128)
    assert _settings.truncation(d, None, 16, "left", from_file=True) == Truncation(16, side="left")
    assert _settings.truncation(d, None, None, None, from_file=False) is None
    assert _settings.truncation(d, "only_second", 9, None, from_file=False) == Truncation(9, "only_second")
    pad = _settings.padding(d, "max_length", 20, 8, "left", 7, from_file=False)
    assert pad == Padding(20, "left", 8, 7, 0, "")
    assert _settings.padding(d, False, None, None, None, None, from_file=True) is None
