"""Reliability, as docs/RELIABILITY.md promises it: many threads on one
instance (checked against `tokenizers`), process pools and DataLoader workers
under fork, forkserver and spawn, no abort or untyped error on any argument
(a bounded API fuzzer) or file (a bounded set of malformed tokenizer.json).

Each run here is bounded for CI; longer ones: GPU_TOK_SOAK_SECONDS,
GPU_TOK_FUZZ_EXAMPLES, GPU_TOK_MALFORMED_COUNT.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import gpu_tok
import pytest
import torch
from conftest import corpus_sample, edge_cases, ours, tokenizer_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))
import malformed  # noqa: E402
import soak  # noqa: E402

BPE = "qwen3"
TIMEOUT = 240  # seconds: a hang fails the test instead of stalling CI


def texts() -> list[str]:
    return [t[:2000] for t in corpus_sample()[:64]] + edge_cases()[:64]


# -- threads ---------------------------------------------------------------------


def test_thread_soak_matches_the_oracle() -> None:
    seconds = float(os.environ.get("GPU_TOK_SOAK_SECONDS", "4"))
    summary = soak.soak(threads=8, seconds=seconds)
    assert summary["errors"] == 0 and summary["mismatches"] == 0, summary["first_problem"]
    assert summary["calls"] >= 20, summary  # the soak did run


# -- processes -------------------------------------------------------------------

_INHERITED: gpu_tok.Tokenizer | None = None


def _ids_with(args: tuple[gpu_tok.Tokenizer, list[str]]) -> list[list[int]]:
    tok, batch = args
    return tok.encode_batch(batch, device="cpu").to_lists()["input_ids"]


def _ids_inherited(batch: list[str]) -> list[list[int]]:
    assert _INHERITED is not None
    return _INHERITED.encode_batch(batch, device="cpu").to_lists()["input_ids"]


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_process_pools_after_use_in_the_parent(method: str) -> None:
    """The parent encodes first (its thread pool is running), then workers
    receive the tokenizer pickled (every method) or inherit it (fork)."""
    global _INHERITED
    tok = ours(BPE).with_truncation(256)
    batch = texts()
    expected = tok.encode_batch(batch, device="cpu").to_lists()["input_ids"]
    chunks = [batch[i::4] for i in range(4)]
    want = [row for i in range(4) for row in expected[i::4]]
    ctx = multiprocessing.get_context(method)
    with ctx.Pool(2) as pool:
        got = pool.map_async(_ids_with, [(tok, c) for c in chunks]).get(TIMEOUT)
        assert [row for rows in got for row in rows] == want
    if method == "fork":
        _INHERITED = tok
        with ctx.Pool(2) as pool:
            got = pool.map_async(_ids_inherited, chunks).get(TIMEOUT)
        assert [row for rows in got for row in rows] == want


class _Collate:
    """What users write: the batch as tensors, straight from the tokenizer."""

    def __init__(self, tok: gpu_tok.Tokenizer) -> None:
        self.tok = tok

    def __call__(self, batch: list[str]) -> Any:
        return self.tok(batch, padding=True, truncation=True, max_length=64, return_tensors="pt")


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_dataloader_workers_return_tokenizer_tensors(method: str) -> None:
    tok = ours(BPE)
    batch = texts()
    loader = torch.utils.data.DataLoader(batch, batch_size=16, num_workers=2, collate_fn=_Collate(tok),
                                         multiprocessing_context=method, timeout=TIMEOUT)
    got = list(loader)
    assert len(got) == -(-len(batch) // 16)  # the last batch may be short
    for i, enc in enumerate(got):
        want = tok(batch[16 * i:16 * (i + 1)], padding=True, truncation=True, max_length=64, return_tensors="pt")
        assert torch.equal(enc["input_ids"], want["input_ids"])
        assert torch.equal(enc["attention_mask"], want["attention_mask"])


def test_results_and_tokenizers_pickle() -> None:
    tok = ours(BPE).with_padding(length=8)
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode("hello world") == tok.encode("hello world")
    assert again.encode_batch(["hi"]).input_ids.shape == (1, 8)  # with_padding applies to encode_batch
    enc = tok.encode_batch(["hello world", "hi"], padding=True)
    copy = pickle.loads(pickle.dumps(enc))
    assert {k: v.tolist() for k, v in copy.items()} == {k: v.tolist() for k, v in enc.items()}
    assert copy["input_ids"].shape == enc["input_ids"].shape


# -- arguments: a bounded fuzzer ---------------------------------------------------

TYPED = (gpu_tok.GpuTokError, TypeError, ValueError)
ODD_INTS = st.sampled_from([None, -1, 0, 1, 3, 64, 2**31, 2**40, 2**63 - 1, 2**63, 2**64, True, 1.5, "8"])

call_arguments = st.fixed_dictionaries({}, optional={
    "padding": st.sampled_from([None, False, True, "longest", "max_length", "do_not_pad", "sideways", 1]),
    "truncation": st.sampled_from([None, False, True, "longest_first", "only_first", "only_second", "x", 0]),
    "max_length": ODD_INTS,
    "pad_to_multiple_of": ODD_INTS,
    "pad_token_id": ODD_INTS,
    "padding_side": st.sampled_from([None, "left", "right", "up", 3]),
    "return_tensors": st.sampled_from([None, "np", "pt", "tf", 1]),
    "return_offsets_mapping": st.booleans(),
    "return_special_tokens_mask": st.booleans(),
    "add_special_tokens": st.sampled_from([True, False, None, 1]),
    "device": st.sampled_from(["cpu", "auto", "cuda", "tpu", None, 0]),
})
inputs = st.one_of(
    st.lists(st.text(max_size=40), max_size=6),
    st.text(max_size=40),
    st.lists(st.one_of(st.text(max_size=10), st.integers(), st.none(), st.binary(max_size=4)), max_size=4),
    st.sampled_from([None, 5, b"bytes", ["\ud800 lone surrogate"], [["nested"]]]),
)


@settings(max_examples=int(os.environ.get("GPU_TOK_FUZZ_EXAMPLES", "300")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(text=inputs, pair=st.one_of(st.none(), inputs), kwargs=call_arguments)
def test_any_call_returns_or_raises_a_typed_error(text: Any, pair: Any, kwargs: dict) -> None:
    try:
        ours(BPE)(text, pair, **kwargs)
    except TYPED as err:
        assert "internal error" not in str(err)  # a caught panic is a bug too


@settings(max_examples=int(os.environ.get("GPU_TOK_FUZZ_EXAMPLES", "300")) // 3, deadline=None,
          derandomize=True)
@given(ids=st.one_of(st.lists(st.one_of(st.integers(), st.booleans(), st.none(), st.text(max_size=2),
                                        st.floats()), max_size=8),
                     st.integers(), st.text(max_size=5), st.none()),
       skip=st.sampled_from([True, False, None, "yes"]))
def test_any_decode_returns_or_raises_a_typed_error(ids: Any, skip: Any) -> None:
    for call in (lambda: ours(BPE).decode(ids, skip_special_tokens=skip),
                 lambda: ours(BPE).decode_batch([ids, ids], skip_special_tokens=skip)):
        try:
            call()
        except TYPED as err:
            assert "internal error" not in str(err)


@pytest.mark.parametrize("call", [
    lambda tok: tok(["a"], padding="max_length", max_length=2**40),
    lambda tok: tok(["a"], padding=True, pad_to_multiple_of=2**40),
    lambda tok: tok.with_padding(length=2**40).encode_batch(["a"]),
    lambda tok: tok(["a"], padding="max_length", max_length=2**63 - 1),
    lambda tok: tok(["a"], max_length=2**64),
    lambda tok: tok(["a"], padding=True, pad_token_id=2**32),
])
def test_sizes_too_big_for_memory_are_refused_before_allocating(call: Any) -> None:
    with pytest.raises(gpu_tok.InvalidInputError):
        call(ours(BPE))


def test_a_padding_too_big_in_tokenizer_json_is_refused() -> None:
    import json

    spec = json.loads(tokenizer_json("bert-minilm"))
    spec["padding"]["strategy"] = {"Fixed": 2**40}
    tok = gpu_tok.Tokenizer.from_str(json.dumps(spec))
    with pytest.raises(gpu_tok.InvalidInputError, match="padding length 1099511627776"):
        tok.encode_batch(["a"])


# -- files -----------------------------------------------------------------------


def test_malformed_tokenizer_files_raise_typed_errors(tmp_path: Path) -> None:
    count = int(os.environ.get("GPU_TOK_MALFORMED_COUNT", "60"))
    base = tokenizer_json("bert-minilm")  # small: many variants load quickly
    kinds = set()
    for n, (kind, blob) in enumerate(malformed.mutants(base, count, seed=1)):
        path = tmp_path / f"{n:03d}-{kind}.json"
        path.write_bytes(blob)
        try:
            gpu_tok.Tokenizer.from_file(path).encode("a test")
        except gpu_tok.GpuTokError as err:
            assert "internal error" not in str(err), kind
        kinds.add(kind)
    assert {"truncate", "delete", "wrong-type", "deep-nesting", "not-utf8"} <= kinds


def test_config_files_that_cannot_be_read_raise_typed_errors(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text(tokenizer_json("bert-minilm"), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    with pytest.raises(gpu_tok.InvalidTokenizerError, match="nested too deeply") as err:
        gpu_tok.Tokenizer.from_pretrained(tmp_path)
    assert isinstance(err.value.__cause__, RecursionError)
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "tokenizer.json").symlink_to(loop / "tokenizer.json")
    with pytest.raises(gpu_tok.TokenizerNotFoundError, match="cannot be read") as err:
        gpu_tok.Tokenizer.from_file(loop / "tokenizer.json")
    assert isinstance(err.value.__cause__, OSError)


def test_pickling_keeps_what_the_crate_accepted_and_the_row_layout() -> None:
    import json

    spec = json.loads(tokenizer_json("bert-minilm"))
    spec["truncation"] = {"direction": "Right", "max_length": 6, "strategy": "LongestFirst", "stride": 10}
    tok = gpu_tok.Tokenizer.from_str(json.dumps(spec))  # the crate loads it, then cannot truncate with it
    again = pickle.loads(pickle.dumps(tok))
    for loaded in (tok, again):
        with pytest.raises(gpu_tok.InvalidInputError, match="stride=10 must be smaller than max_length=6"):
            loaded.encode_batch(["one two three four five six seven"])
    assert again.encode("one two", add_special_tokens=False) == tok.encode("one two", add_special_tokens=False)
    ragged = ours(BPE).encode_batch(["hello world", "hi"], padding=False)
    copy = pickle.loads(pickle.dumps(ragged))
    assert copy.is_ragged and copy.lengths.tolist() == ragged.lengths.tolist()
    assert copy.row_offsets.tolist() == ragged.row_offsets.tolist()
