"""Bad input gets a clear exception or a correct result: never a crash."""

from __future__ import annotations

import gpu_tok
import pytest
import tokenizers
from conftest import ours, tokenizer_json

NAME = "qwen3"


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (None, "list of str"),
        (b"bytes", "list of str"),
        ("a single str", "single str"),
        (["ok", 3], r"texts\[1\] must be str, not int"),
        (["ok", None], r"texts\[1\] must be str, not NoneType"),
        (["ok", b"x"], r"texts\[1\] must be str, not bytes"),
        ([["nested"]], r"texts\[0\] must be str, not list"),
        (42, "list of str"),
    ],
)
def test_wrong_types_raise_type_error(texts, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ours(NAME).encode_batch(texts)


def test_call_rejects_wrong_types() -> None:
    with pytest.raises(TypeError):
        ours(NAME)(None)
    with pytest.raises(TypeError):
        ours(NAME)([1, 2])
    with pytest.raises(TypeError):
        ours(NAME).encode(b"bytes")
    with pytest.raises(TypeError):
        ours(NAME)("a", ["b"])


def test_lone_surrogates_are_a_clear_error() -> None:
    with pytest.raises(gpu_tok.InvalidInputError, match=r"texts\[1\].*surrogate"):
        ours(NAME).encode_batch(["fine", "bad \ud800 text"])
    with pytest.raises(ValueError):
        ours(NAME).encode("\udfff")


def test_empty_inputs() -> None:
    tok = ours(NAME)
    assert tok.encode("") == []
    enc = tok.encode_batch([])
    assert enc.input_ids.shape == (0,) and enc.row_offsets.tolist() == [0]
    assert tok([])["input_ids"] == []
    assert tok([""], padding=True, return_tensors="np")["input_ids"].shape == (1, 0)
    assert tok.encode_batch(iter(["a", "b"])).to_lists()["input_ids"] == [tok.encode("a"), tok.encode("b")]


def test_bad_settings() -> None:
    tok = ours(NAME)
    # max_length=0 and pad_to_multiple_of=0 are accepted, as transformers accepts them (test_compat).
    for kwargs in (dict(max_length=-3), dict(max_length=2.5),
                   dict(padding=True, pad_to_multiple_of=-1), dict(padding="sideways"),
                   dict(padding=True, padding_side="up"), dict(padding=True, pad_token_id=-1),
                   dict(return_tensors="tf")):
        with pytest.raises(ValueError):
            tok(["a"], **kwargs)
    with pytest.raises(TypeError):
        tok.encode("a", add_special_tokens="yes")


def test_bad_ids_for_decode() -> None:
    tok = ours(NAME)
    with pytest.raises(gpu_tok.InvalidInputError):
        tok.decode([1, -5])
    with pytest.raises(TypeError):
        tok.decode(["a"])
    with pytest.raises(TypeError):
        tok.decode("abc")
    with pytest.raises(TypeError):
        tok.decode_batch([[1], None])
    # ids beyond the vocabulary decode as tokenizers does (they are dropped)
    hf = tokenizers.Tokenizer.from_str(tokenizer_json(NAME))
    assert tok.decode([9, 10**9]) == hf.decode([9, 10**9])
    assert tok.id_to_token(10**12) is None and tok.id_to_token(-1) is None


def test_fifty_megabyte_string() -> None:
    tok = ours(NAME)
    unit = "The quick brown fox — 東京 café 123. "
    text = unit * (50_000_000 // len(unit.encode()))
    assert len(text.encode()) > 49_000_000
    ids = tok.encode(text)
    unit_ids = tok.encode(unit * 4)
    assert ids[: len(unit_ids) // 2] == unit_ids[: len(unit_ids) // 2]
    assert len(ids) > 10_000_000
