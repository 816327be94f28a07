"""`dtype="int32"`: the same values as int64 in half the bytes, on every
backend and output path, and a clear error where a value does not fit."""

from __future__ import annotations

import json
import pickle

import gpu_tok
import numpy as np
import pytest
from conftest import TOKENIZER_NAMES, corpus_sample, edge_cases, ours
from gpu_tok import _core

FIELDS = dict(attention_mask=True, type_ids=True, special_tokens_mask=True)
DEVICES = ["cpu", "emulator:4096"]


def texts() -> list[str]:
    # Padded to the longest row, a 100k-token edge case would make every row that long.
    return corpus_sample()[:60] + [t for t in edge_cases() if len(t) < 5000]


def assert_same_values(narrow: _core.CoreBatch, wide: _core.CoreBatch) -> None:
    assert narrow.keys() == wide.keys()
    assert narrow.width == wide.width
    for name in wide.keys():
        a, b = narrow.tensor(name), wide.tensor(name)
        assert (a.dtype, b.dtype) == ("int32", "int64")
        assert a.shape == b.shape
        assert np.asarray(a.cpu()).itemsize == 4
        np.testing.assert_array_equal(np.asarray(a.cpu()), np.asarray(b.cpu()), err_msg=name)
    # The row layout stays int64.
    assert narrow.row_offsets().dtype == "int64"
    assert narrow.row_offsets().tolist() == wide.row_offsets().tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_int32_fields_hold_the_int64_values(name: str, device: str) -> None:
    core = ours(name)._core
    for padding in (None, _core.Padding(pad_id=7, pad_type_id=1), _core.Padding(side="left", pad_to_multiple_of=8)):
        runs = [core.encode_batch(texts(), padding=padding, device=device, dtype=dtype, **FIELDS)
                for dtype in ("int32", "int64")]
        assert_same_values(*runs)


@pytest.mark.parametrize("device", DEVICES)
def test_int32_offsets_and_pairs(device: str) -> None:
    core = ours("bert-minilm")._core
    some = texts()[:20]
    for options in (dict(offsets=True), dict(pairs=some[::-1]), dict(offsets=True, padding=_core.Padding())):
        runs = [core.encode_batch(some, device=device, dtype=dtype, **FIELDS, **options)
                for dtype in ("int32", "int64")]
        assert_same_values(*runs)


@pytest.mark.parametrize("kind", ["np", "pt"])
def test_call_and_encode_batch_take_dtype(kind: str) -> None:
    tok = ours("qwen3")
    some = texts()[:12]
    for options in (dict(padding=True), dict(padding=True, return_length=True, return_offsets_mapping=True),
                    dict(is_split_into_words=True, padding=True)):
        inputs = [t.split() or ["x"] for t in some] if options.get("is_split_into_words") else some
        narrow = tok(inputs, return_tensors=kind, dtype="int32", **options)
        wide = tok(inputs, return_tensors=kind, **options)
        assert list(narrow) == list(wide)
        for key in wide:
            a, b = np.asarray(narrow[key]), np.asarray(wide[key])
            assert a.dtype == np.int32 and b.dtype == np.int64, key
            np.testing.assert_array_equal(a, b, err_msg=key)
    ragged = tok(some, return_tensors="np", dtype="int32")["input_ids"]
    assert ragged.dtype == object and all(row.dtype == np.int32 for row in ragged)
    enc = tok.encode_batch(some, dtype="int32")
    assert enc.input_ids.dtype == "int32"
    assert enc.input_ids.tolist() == tok.encode_batch(some).input_ids.tolist()


def test_int32_tensor_exports() -> None:
    enc = ours("qwen3")._core.encode_batch(["hello world", "a"], padding=_core.Padding(), dtype="int32")
    ids = enc.tensor("input_ids")
    view = memoryview(ids)
    assert (view.format, view.itemsize, view.shape, view.strides) == ("i", 4, (2, 2), (8, 4))
    torch = pytest.importorskip("torch")
    as_torch = torch.from_dlpack(ids)
    assert as_torch.dtype == torch.int32 and as_torch.tolist() == ids.tolist()
    assert as_torch.stride() == (2, 1)
    back = pickle.loads(pickle.dumps(ids))
    assert (back.dtype, back.shape, back.tolist()) == ("int32", ids.shape, ids.tolist())
    assert "dtype=int32" in repr(ids)
    with pytest.raises(ValueError, match="shape"):
        _core.Tensor._from_bytes([3], b"\0" * 8, "int32")
    with pytest.raises(ValueError, match="dtype"):
        _core.Tensor._from_bytes([1], b"\0" * 8, "float64")


def test_unknown_dtype_is_a_value_error() -> None:
    tok = ours("qwen3")
    for call in (lambda: tok(["a"], dtype="int16"), lambda: tok.encode_batch(["a"], dtype=np.int32),
                 lambda: tok._core.encode_batch(["a"], dtype="uint8")):
        with pytest.raises(ValueError, match="dtype"):
            call()


def _word_level(big_id: int) -> str:
    """A WordLevel tokenizer whose word "big" has id `big_id`."""
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "small": 1, "big": big_id}, "unk_token": "[UNK]"},
    })


@pytest.mark.parametrize("device", DEVICES)
def test_ids_and_padding_that_int32_cannot_hold_are_refused(device: str) -> None:
    core = gpu_tok.Tokenizer.from_str(_word_level(2**31))._core
    assert core.encode_batch(["small big"], device=device).tensor("input_ids").tolist() == [1, 2**31]
    with pytest.raises(ValueError, match="int32"):
        core.encode_batch(["small big"], device=device, dtype="int32")
    qwen = ours("qwen3")._core
    with pytest.raises(ValueError, match="int32"):
        qwen.encode_batch(["a", "a b c"], padding=_core.Padding(pad_id=2**31), device=device, dtype="int32")
    # A tokenizer whose ids fit gives int32 on the same path.
    small = gpu_tok.Tokenizer.from_str(_word_level(5))._core
    assert small.encode_batch(["small big"], device=device, dtype="int32").tensor("input_ids").tolist() == [1, 5]


def test_documents_come_as_uint32_without_a_conversion() -> None:
    from gpu_tok.documents import encode_documents

    tok = ours("qwen3")
    some = texts()[:30]
    ids, offsets = encode_documents(tok, some)
    assert ids.dtype == np.uint32 and offsets.dtype == np.int64
    expected = tok.encode_batch(some, add_special_tokens=False, padding=False, truncation=False)
    assert ids.tolist() == expected.input_ids.tolist()
    assert offsets.tolist() == expected.row_offsets.tolist()
