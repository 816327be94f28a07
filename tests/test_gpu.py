"""The CUDA backend on a real device: the same ids as the CPU engine and as
`tokenizers`, tensors that torch and CuPy import without a copy, tensors that
outlive their batch, threads, fork, Arrow input, batches larger than one chunk,
and what `info()` says about the device.

Every test here is marked `gpu` and runs on a lent GPU through
`benches/gpu_check.sh`. Without a usable device the module skips itself, so
CI's plain `pytest` (and `pytest tests/test_gpu.py`) is clean anywhere.
"""

from __future__ import annotations

import ctypes
import gc
import json
import math
import os
import select
import signal
import subprocess
import sys
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from threading import Barrier
from typing import Any

import gpu_tok
import pytest
import tokenizers
from conftest import (
    TOKENIZER_NAMES,
    chat_rows,
    corpus_sample,
    edge_cases,
    long_words,
    ours,
    reference,
    tokenizer_json,
    unpadded_oracle,
)

pytestmark = pytest.mark.gpu


def _cuda_report() -> dict[str, Any]:
    """`info()["cuda"]`, never raising, probed in a child process: collection
    must not fail on a machine (or a build) without CUDA, and must not
    initialise CUDA in this process, whose other modules fork after collection."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        return {"available": False, "reason": f"no CUDA driver ({err})"}
    code = "import gpu_tok, json; print(json.dumps(gpu_tok.info()['cuda'], default=str))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return {"available": False, "reason": "gpu_tok.info() took over 180 s"}
    try:
        cuda = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):  # an old or half-built core: report it, do not error at collection
        return {"available": False, "reason": f"gpu_tok.info() failed: {done.stderr.strip()[-2000:]}"}
    if not isinstance(cuda, dict):
        return {"available": False, "reason": f"gpu_tok.info()['cuda'] is {cuda!r}"}
    return cuda


CUDA = _cuda_report()
if not CUDA.get("available"):
    WHY = f"no usable CUDA device: {CUDA.get('reason', 'unknown reason')}"
    if os.environ.get("GPU_TOK_REQUIRE_CUDA") == "1":  # set by benches/gpu_check.sh: a skip would hide it
        pytest.fail(f"GPU_TOK_REQUIRE_CUDA=1 but {WHY}", pytrace=False)
    if os.environ.get("GPU_TOK_COLLECT_ONLY") != "1":  # gpu_check.sh --dry-run collects what a device would run
        pytest.skip(WHY, allow_module_level=True)

NAME = "qwen3"  # in both the shared and the fixture lists (the embedded default)
MAX_LENGTH = 128


# -- helpers -----------------------------------------------------------------------


def _quiet_import(module: str) -> Any:
    """torch / cupy, skipping the test when missing; import-time warnings (CUDA
    path probes and the like) must not trip the suite's `filterwarnings = error`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pytest.importorskip(module)


def _np() -> Any:
    return _quiet_import("numpy")


def _torch() -> Any:
    torch = _quiet_import("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch cannot see the CUDA device")
    return torch


def _cupy() -> Any:
    return _quiet_import("cupy")


def texts_for_parity() -> list[str]:
    return corpus_sample() + edge_cases()


def pad_id_for(name: str) -> int:
    tok = ours(name)
    return tok.pad_token_id if tok.pad_token_id is not None else 0


@cache
def _configurable(name: str) -> tokenizers.Tokenizer:
    """Our own `tokenizers` object to set truncation/padding on (conftest's
    `reference` is shared by other modules and must stay as the file says)."""
    return tokenizers.Tokenizer.from_str(tokenizer_json(name))


def padded_reference(name: str, side: str, pad_id: int) -> tokenizers.Tokenizer:
    hf = _configurable(name)
    hf.no_truncation()
    hf.no_padding()
    hf.enable_truncation(max_length=MAX_LENGTH)
    hf.enable_padding(direction=side, pad_id=pad_id, pad_token=ours(name).id_to_token(pad_id) or "")
    return hf


def encode_cuda(name: str, texts: Any, **kwargs: Any) -> gpu_tok.BatchEncoding:
    """`encode_batch(..., device="cuda")`, checked to live on the device."""
    try:
        enc = ours(name).encode_batch(texts, device="cuda", **kwargs)
    except gpu_tok.UnsupportedTokenizerError as err:
        pytest.skip(f"{name}: the CUDA backend does not run this tokenizer ({err})")
    for field in enc:
        assert_on_device(enc[field], f"{name} {field}")
    assert_on_device(enc.lengths, f"{name} lengths")
    assert_on_device(enc.row_offsets, f"{name} row_offsets")
    return enc


def assert_on_device(tensor: Any, label: str) -> None:
    assert tensor.device == "cuda:0", f"{label}: device {tensor.device!r}"
    assert tuple(tensor.__dlpack_device__()) == (2, 0), f"{label}: dlpack device {tensor.__dlpack_device__()}"


def rows(enc: gpu_tok.BatchEncoding, field: str) -> list[list[int]]:
    """Per-row values read from the tensors themselves (tolist copies a CUDA
    tensor back): `[B, L]` for padded batches, flat + row_offsets for ragged ones."""
    values = enc[field].tolist()
    if not enc.is_ragged:
        return values
    offsets = enc.row_offsets.tolist()
    assert len(offsets) == len(enc.lengths.tolist()) + 1
    return [values[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]


def assert_same_batches(got: gpu_tok.BatchEncoding, expected: gpu_tok.BatchEncoding, label: str) -> None:
    """Same fields, shapes, dtypes, values, lengths and row offsets."""
    assert sorted(got.keys()) == sorted(expected.keys()), label
    assert got.is_ragged == expected.is_ragged, label
    for field in expected:
        assert got[field].dtype == expected[field].dtype, f"{label}: {field} dtype"
        assert tuple(got[field].shape) == tuple(expected[field].shape), f"{label}: {field} shape"
        assert got[field].tolist() == expected[field].tolist(), f"{label}: {field} differs"
    assert got.lengths.tolist() == expected.lengths.tolist(), f"{label}: lengths differ"
    assert got.row_offsets.tolist() == expected.row_offsets.tolist(), f"{label}: row_offsets differ"


def assert_rows_match(got: list[list[int]], expected: list[list[int]], texts: list[str], label: str) -> None:
    assert len(got) == len(expected), label
    bad = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    first = f"first row {bad[0]}: {texts[bad[0]]!r:.200}" if bad else ""
    assert not bad, f"{label}: {len(bad)}/{len(expected)} rows differ, {first}"


def to_host(tensor: Any) -> Any:
    """A CUDA gpu_tok Tensor as a numpy array (through torch or CuPy)."""
    np = _np()
    try:
        torch = _quiet_import("torch")
        return torch.from_dlpack(tensor).cpu().numpy()
    except pytest.skip.Exception:
        pass
    try:
        cupy = _quiet_import("cupy")
        return cupy.asnumpy(cupy.from_dlpack(tensor))
    except pytest.skip.Exception:
        return np.asarray(tensor.tolist())


# -- (a) parity: CUDA == CPU == tokenizers --------------------------------------------


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_ragged_ids_match_cpu_and_tokenizers(name: str, add_special_tokens: bool) -> None:
    """padding=None (tokenizer.json's settings, ragged for all but bert-minilm)."""
    texts = texts_for_parity()
    cuda = encode_cuda(name, texts, add_special_tokens=add_special_tokens)
    cpu = ours(name).encode_batch(texts, add_special_tokens=add_special_tokens, device="cpu")
    assert_same_batches(cuda, cpu, f"{name} cuda vs cpu")
    expected = reference(name).encode_batch(texts, add_special_tokens=add_special_tokens)
    assert_rows_match(rows(cuda, "input_ids"), [e.ids for e in expected], texts, f"{name} ids vs tokenizers")
    assert_rows_match(rows(cuda, "attention_mask"), [e.attention_mask for e in expected], texts,
                      f"{name} attention_mask vs tokenizers")
    assert cuda.lengths.tolist() == [len(e.ids) for e in expected] or not cuda.is_ragged
    lists = cuda.to_lists()
    assert lists["input_ids"] == [e.ids for e in expected], f"{name}: to_lists differs from the tensors"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("add_special_tokens", [True, False])
@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_truncated_ids_match_cpu_and_tokenizers(name: str, add_special_tokens: bool, side: str) -> None:
    texts = texts_for_parity()
    pad_id = pad_id_for(name)
    kwargs = dict(padding="longest", truncation=True, max_length=MAX_LENGTH, padding_side=side,
                  truncation_side="right", pad_token_id=pad_id, add_special_tokens=add_special_tokens)
    cuda = encode_cuda(name, texts, **kwargs)
    cpu = ours(name).encode_batch(texts, device="cpu", **kwargs)
    assert not cuda.is_ragged
    assert tuple(cuda.input_ids.shape)[0] == len(texts)
    assert tuple(cuda.input_ids.shape)[1] <= MAX_LENGTH
    assert_same_batches(cuda, cpu, f"{name} {side} cuda vs cpu")
    expected = padded_reference(name, side, pad_id).encode_batch(texts, add_special_tokens=add_special_tokens)
    assert_rows_match(rows(cuda, "input_ids"), [e.ids for e in expected], texts, f"{name} {side} ids")
    assert_rows_match(rows(cuda, "attention_mask"), [e.attention_mask for e in expected], texts,
                      f"{name} {side} attention_mask")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_long_words_merged_by_a_block_match_cpu_and_tokenizers(name: str) -> None:
    # A block of lanes with barriers merges each word of 2^14 bytes or more
    # (gt_bpe_rounds); the host emulator runs the lanes one phase at a time,
    # shuffled, and checks them for races, but only a GPU runs them at once.
    texts = long_words() + ["x" * 10**6]
    cuda = encode_cuda(name, texts)
    cpu = ours(name).encode_batch(texts, device="cpu")
    assert_same_batches(cuda, cpu, f"{name} long words cuda vs cpu")
    expected = reference(name).encode_batch(texts)  # tokenizer.json's settings, as ours
    assert cuda.to_lists()["input_ids"] == [e.ids for e in expected]


def test_small_and_empty_batches() -> None:
    pad_id = pad_id_for(NAME)
    for texts in ([], [""], ["", "", ""], ["a"], ["", "hello world", ""]):
        for kwargs in (dict(), dict(padding="longest", truncation=True, max_length=8, pad_token_id=pad_id),
                       dict(add_special_tokens=False, padding="longest", padding_side="left", pad_token_id=pad_id)):
            got = encode_cuda(NAME, texts, **kwargs)
            expected = ours(NAME).encode_batch(texts, device="cpu", **kwargs)
            assert_same_batches(got, expected, f"{texts!r} {kwargs}")


def test_device_spellings_agree() -> None:
    texts = corpus_sample()[:50]
    expected = ours(NAME).encode_batch(texts, device="cpu").to_lists()
    assert encode_cuda(NAME, texts).to_lists() == expected
    assert ours(NAME).encode_batch(texts, device="cuda:0").to_lists() == expected
    assert ours(NAME).encode_batch(texts, device="auto").to_lists() == expected
    assert ours(NAME)(texts, device="cuda")["input_ids"] == expected["input_ids"]
    torch = _torch()
    enc = ours(NAME).encode_batch(texts, device=torch.device("cuda", 0))
    assert enc.input_ids.device == "cuda:0"
    assert enc.to_lists() == expected


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_added_token_rows_run_on_the_device(name: str) -> None:
    """Chat-like rows: the text between added tokens is encoded on the device,
    ids as `tokenizers`."""
    rows = chat_rows(name)
    enc = encode_cuda(name, rows, add_special_tokens=False, padding=False, truncation=False)
    expected = unpadded_oracle(tokenizer_json(name)).encode_batch(rows, add_special_tokens=False)
    assert enc.to_lists()["input_ids"] == [e.ids for e in expected]
    assert enc.timings["rows_on_host"] == 0


def test_int32_outputs_on_the_device() -> None:
    texts = corpus_sample()[:64]
    wide = encode_cuda(NAME, texts, padding="longest")
    narrow = encode_cuda(NAME, texts, padding="longest", dtype="int32")
    for field in wide:
        assert narrow[field].dtype == "int32", field
        assert narrow[field].tolist() == wide[field].tolist(), field


# -- (b) DLPack: torch and CuPy, no copy, any stream ---------------------------------


def _padded(texts: list[str], device: str) -> gpu_tok.BatchEncoding:
    return ours(NAME).encode_batch(texts, padding="longest", truncation=True, max_length=MAX_LENGTH,
                                   padding_side="right", pad_token_id=pad_id_for(NAME), device=device)


def test_torch_from_dlpack_is_zero_copy() -> None:
    torch = _torch()
    texts = corpus_sample()[:64] + edge_cases()[:64]
    expected = _padded(texts, "cpu").to_lists()
    enc = _padded(texts, "cuda")
    first, second = torch.from_dlpack(enc.input_ids), torch.from_dlpack(enc.input_ids)
    assert first.is_cuda and first.device.index == 0
    assert first.data_ptr() == second.data_ptr(), "two imports of one tensor must share memory"
    assert tuple(first.shape) == tuple(enc.input_ids.shape)
    assert first.tolist() == expected["input_ids"]
    mask = torch.from_dlpack(enc["attention_mask"])
    assert mask.is_cuda and mask.tolist() == expected["attention_mask"]
    converted = enc.to_torch()
    assert sorted(converted) == sorted(expected)
    for field, value in converted.items():
        assert value.is_cuda, field
        assert value.tolist() == expected[field], field
    assert converted["input_ids"].data_ptr() == first.data_ptr()
    # ragged: flat ids and CSR offsets
    ragged = encode_cuda(NAME, texts)
    flat, offsets = torch.from_dlpack(ragged.input_ids), torch.from_dlpack(ragged.row_offsets)
    assert flat.is_cuda and offsets.is_cuda and flat.ndim == 1
    cpu = ours(NAME).encode_batch(texts, device="cpu")
    assert flat.tolist() == cpu.input_ids.tolist()
    assert offsets.tolist() == cpu.row_offsets.tolist()


def test_cupy_from_dlpack_is_zero_copy() -> None:
    cupy = _cupy()
    texts = corpus_sample()[:64] + edge_cases()[:64]
    expected = _padded(texts, "cpu").to_lists()
    enc = _padded(texts, "cuda")
    first, second = cupy.from_dlpack(enc.input_ids), cupy.from_dlpack(enc.input_ids)
    assert first.data.ptr == second.data.ptr, "two imports of one tensor must share memory"
    assert first.device.id == 0
    assert cupy.asnumpy(first).tolist() == expected["input_ids"]
    try:
        torch = _torch()
    except pytest.skip.Exception:
        torch = None
    if torch is not None:
        assert torch.from_dlpack(enc.input_ids).data_ptr() == first.data.ptr
    converted = enc.to_cupy()
    for field, value in converted.items():
        assert cupy.asnumpy(value).tolist() == expected[field], field
    with cupy.cuda.Stream(non_blocking=True) as stream:
        fresh = _padded(texts, "cuda")
        on_stream = cupy.from_dlpack(fresh.input_ids)
        total = int((on_stream.astype(cupy.int64) + 1).sum())
        stream.synchronize()
    assert total == sum(sum(row) + len(row) for row in expected["input_ids"])
    # The stream must outlive what was exported to it (README): locals die in
    # the order they were first assigned, `stream` before `on_stream`.
    del on_stream, fresh
    gc.collect()
    del stream


def test_torch_on_a_non_default_stream() -> None:
    """The consumer's stream is passed to __dlpack__: work queued on it right
    after the import must see the finished ids, with no explicit sync first."""
    torch = _torch()
    texts = corpus_sample()[:200]
    expected = _padded(texts, "cpu").to_lists()
    want_sum = sum(sum(row) + len(row) for row in expected["input_ids"])
    stream = torch.cuda.Stream()
    for _ in range(3):
        enc = _padded(texts, "cuda")
        with torch.cuda.stream(stream):
            ids = torch.from_dlpack(enc.input_ids)
            mask = torch.from_dlpack(enc["attention_mask"])
            total = (ids.to(torch.int64) + 1).sum()
            tokens = mask.to(torch.int64).sum()
            copied = ids.clone()
        stream.synchronize()
        assert int(total) == want_sum
        assert int(tokens) == sum(map(sum, expected["attention_mask"]))
        assert copied.tolist() == expected["input_ids"]
        # and the ragged form, consumed on the same stream
        ragged = encode_cuda(NAME, texts)
        with torch.cuda.stream(stream):
            flat = torch.from_dlpack(ragged.input_ids).to(torch.int64)
            flat_sum = flat.sum()
        stream.synchronize()
        cpu = ours(NAME).encode_batch(texts, device="cpu")
        assert int(flat_sum) == sum(cpu.input_ids.tolist())


def test_a_dead_tensor_is_not_reused_while_its_side_stream_reads_it() -> None:
    """Exported to a torch side stream that is still busy, then dropped: the
    next call's buffers must not take its memory before the side stream has
    read it (the free waits for an event recorded on the side stream)."""
    torch = _torch()
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("this torch has no torch.cuda._sleep")
    texts = corpus_sample()[:200]
    expected = _padded(texts, "cpu").input_ids.tolist()
    stream = torch.cuda.Stream()
    for _ in range(3):
        enc = _padded(texts, "cuda")
        with torch.cuda.stream(stream):
            ids = torch.from_dlpack(enc.input_ids)
            torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the read
            copied = ids.clone()
        del ids, enc
        gc.collect()
        for _ in range(3):  # calls that would reuse the memory at once
            _padded(corpus_sample()[200:400], "cuda")
        stream.synchronize()
        assert copied.tolist() == expected


# -- (c) lifetimes ------------------------------------------------------------------


def test_tensors_outlive_their_batch() -> None:
    texts = corpus_sample()[:100]
    cpu = ours(NAME).encode_batch(texts, device="cpu")
    enc = encode_cuda(NAME, texts)
    ids, mask, offsets, lengths = enc.input_ids, enc["attention_mask"], enc.row_offsets, enc.lengths
    del enc
    gc.collect()
    churn = [encode_cuda(NAME, corpus_sample()[100:300]) for _ in range(3)]  # reuse any freed memory
    del churn
    gc.collect()
    assert ids.tolist() == cpu.input_ids.tolist()
    assert mask.tolist() == cpu["attention_mask"].tolist()
    assert offsets.tolist() == cpu.row_offsets.tolist()
    assert lengths.tolist() == cpu.lengths.tolist()
    try:
        torch = _torch()
    except pytest.skip.Exception:
        return
    imported = torch.from_dlpack(ids)
    del ids, mask
    gc.collect()
    churn = [encode_cuda(NAME, corpus_sample()[100:300]) for _ in range(3)]
    scratch = torch.full((1 << 24,), 7, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    del churn, scratch
    assert imported.tolist() == cpu.input_ids.tolist(), "a torch tensor must keep the gpu_tok memory alive"


# -- (d) threads --------------------------------------------------------------------

THREAD_SETTINGS: list[dict[str, Any]] = [
    dict(),
    dict(padding="longest", truncation=True, max_length=MAX_LENGTH),
    dict(padding="longest", truncation=True, max_length=64, padding_side="left", add_special_tokens=False),
    dict(padding="max_length", truncation=True, max_length=32),
    dict(add_special_tokens=False),
]


def _thread_texts(seed: int) -> list[str]:
    docs, edges = corpus_sample(), edge_cases()
    return [t[:4000] for t in docs[seed * 7 % len(docs):][:40]] + edges[seed * 11 % len(edges):][:60]


def test_threads_share_one_tokenizer_on_cuda() -> None:
    tok, pad_id = ours(NAME), pad_id_for(NAME)
    jobs = [(seed, THREAD_SETTINGS[seed % len(THREAD_SETTINGS)]) for seed in range(8 * 6)]
    expected = {seed: tok.encode_batch(_thread_texts(seed), device="cpu", pad_token_id=pad_id, **kw).to_lists()
                for seed, kw in jobs}
    barrier = Barrier(8)

    def worker(thread: int) -> list[tuple[int, dict]]:
        barrier.wait(timeout=60)
        out = []
        for seed, kw in jobs[thread::8]:
            enc = tok.encode_batch(_thread_texts(seed), device="cuda", pad_token_id=pad_id, **kw)
            assert enc.input_ids.device == "cuda:0"
            out.append((seed, enc.to_lists()))
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = [r for part in pool.map(worker, range(8), timeout=120) for r in part]
    assert len(results) == len(jobs)
    for seed, got in results:
        assert got == expected[seed], f"job {seed} ({jobs[seed][1]}) differs from the single-threaded CPU call"


def test_auto_computes_big_batches_on_the_gpu_and_returns_host_tensors() -> None:
    from gpu_tok import _placement

    texts = corpus_sample()
    while sum(map(len, texts)) < 2 * _placement.AUTO_MIN_BYTES:
        texts = texts + texts
    enc = ours(NAME).encode_batch(texts, device="auto")
    assert enc.input_ids.device == "cpu" and "kernels_ms" in enc.timings
    assert enc.to_lists() == ours(NAME).encode_batch(texts, device="cpu").to_lists()
    small = ours(NAME).encode_batch(texts[:2], device="auto")
    assert "kernels_ms" not in small.timings


# -- (e) fork -----------------------------------------------------------------------


def _child_checks(texts: list[str], expected: dict) -> str:
    """Runs in the forked child; returns '' when all is well, else what went wrong."""
    tok = ours(NAME)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tok.encode_batch(texts, device="cuda")
            return "device='cuda' in a forked child did not raise CudaUnavailableError"
        except gpu_tok.CudaUnavailableError:
            pass
        caught.clear()
        auto = tok.encode_batch(texts, device="auto")
        runtime = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        if len(runtime) > 1:
            return f"device='auto' warned {len(runtime)} times: {runtime}"
        if auto.input_ids.device != "cpu":
            return f"device='auto' in a forked child gave device {auto.input_ids.device!r}"
        if auto.to_lists() != expected:
            return "device='auto' in a forked child gave different ids"
        again = tok.encode_batch(texts, device="auto").to_lists()
        cpu = tok.encode_batch(texts, device="cpu").to_lists()
        if again != expected or cpu != expected:
            return "repeated / cpu calls in a forked child gave different ids"
    return ""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12: "multi-threaded, use of fork()"
def test_fork_after_cuda_use() -> None:
    texts = corpus_sample()[:40] + edge_cases()[:40]
    expected = ours(NAME).encode_batch(texts, device="cpu").to_lists()
    assert encode_cuda(NAME, texts).to_lists() == expected  # the parent has used CUDA
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report through the pipe and the exit code, never return into pytest
        code = 1
        try:
            os.close(read_end)
            problem = _child_checks(texts, expected)
            code = 0 if not problem else 3
        except BaseException:
            problem = traceback.format_exc()
            code = 4
        try:
            os.write(write_end, problem.encode("utf-8", "replace")[:60000])
            os.close(write_end)
        finally:
            os._exit(code)
    os.close(write_end)
    message, status, deadline = b"", None, time.monotonic() + 120
    try:
        while status is None:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"the forked child hung; it said {message.decode(errors='replace')!r}")
            ready, _, _ = select.select([read_end], [], [], 0.2)
            if ready:
                message += os.read(read_end, 65536)
            done, raw = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(raw)
        while chunk := os.read(read_end, 65536):
            message += chunk
    finally:
        os.close(read_end)
    assert status == 0, f"forked child exited {status}: {message.decode(errors='replace')}"
    assert encode_cuda(NAME, texts).to_lists() == expected, "the parent must keep using CUDA after fork"


# -- (f) Arrow input ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["string", "large_string", "chunked"])
def test_arrow_input_matches_lists(kind: str) -> None:
    pa = _quiet_import("pyarrow")
    texts = corpus_sample()[:300] + edge_cases()
    if kind == "chunked":
        arrow = pa.chunked_array([texts[:100], texts[100:]], type=pa.string())
    else:
        arrow = pa.array(texts, type=getattr(pa, kind)())
    for kwargs in (dict(), dict(padding="longest", truncation=True, max_length=MAX_LENGTH,
                                pad_token_id=pad_id_for(NAME))):
        from_list = encode_cuda(NAME, texts, **kwargs)
        from_arrow = encode_cuda(NAME, arrow, **kwargs)
        assert_same_batches(from_arrow, from_list, f"arrow {kind} {kwargs}")
        assert_same_batches(from_arrow, ours(NAME).encode_batch(texts, device="cpu", **kwargs), f"cpu {kind}")
    if kind != "chunked":
        sliced = arrow.slice(7, 100)  # a non-zero array offset
        assert encode_cuda(NAME, sliced).to_lists() == ours(NAME).encode_batch(texts[7:107], device="cpu").to_lists()


# -- (g) more than one chunk ----------------------------------------------------------


def test_batch_larger_than_one_chunk() -> None:
    """The corpus repeated to ~64 MB: ids, lengths and row offsets equal the
    CPU's, on the device and read back by device="auto" (~128 MB of ids: many
    turns of the two pinned readback buffers)."""
    np = _np()
    docs = corpus_sample() + edge_cases()
    size = sum(len(d.encode("utf-8")) for d in docs)
    texts = docs * max(1, math.ceil(64e6 / max(size, 1)))
    cuda = encode_cuda(NAME, texts, add_special_tokens=False)
    cpu = ours(NAME).encode_batch(texts, add_special_tokens=False, device="cpu")
    assert tuple(cuda.input_ids.shape) == tuple(cpu.input_ids.shape)
    assert np.array_equal(to_host(cuda.row_offsets), np.asarray(cpu.row_offsets))
    assert np.array_equal(to_host(cuda.lengths), np.asarray(cpu.lengths))
    got, want = to_host(cuda.input_ids), np.asarray(cpu.input_ids)
    if not np.array_equal(got, want):
        offsets = np.asarray(cpu.row_offsets)
        first = int(np.argmax(got != want))
        row = int(np.searchsorted(offsets, first, side="right")) - 1
        pytest.fail(f"{len(texts)} documents: ids differ first at token {first} (row {row}: {texts[row]!r:.200})")
    assert np.array_equal(to_host(cuda["attention_mask"]), np.asarray(cpu["attention_mask"]))
    auto = ours(NAME).encode_batch(texts, add_special_tokens=False, device="auto")
    assert auto.input_ids.device == "cpu"
    assert np.array_equal(np.asarray(auto.input_ids), want)
    # the same batch padded and truncated
    pad_id = pad_id_for(NAME)
    kwargs = dict(padding="longest", truncation=True, max_length=MAX_LENGTH, pad_token_id=pad_id)
    padded_cuda = encode_cuda(NAME, texts, **kwargs)
    padded_cpu = ours(NAME).encode_batch(texts, device="cpu", **kwargs)
    assert np.array_equal(to_host(padded_cuda.input_ids), np.asarray(padded_cpu.input_ids))
    assert np.array_equal(to_host(padded_cuda["attention_mask"]), np.asarray(padded_cpu["attention_mask"]))


def test_many_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU_TOK_CHUNK_BYTES forces the multi-chunk path on a small batch."""
    np = _np()
    texts = texts_for_parity()
    cpu = ours(NAME).encode_batch(texts, device="cpu")
    monkeypatch.setenv("GPU_TOK_CHUNK_BYTES", str(64 << 10))
    for kwargs in ({}, dict(padding="longest", truncation=True, max_length=MAX_LENGTH,
                            pad_token_id=pad_id_for(NAME))):
        cuda = encode_cuda(NAME, texts, **kwargs)
        want = cpu if not kwargs else ours(NAME).encode_batch(texts, device="cpu", **kwargs)
        assert np.array_equal(to_host(cuda.input_ids), np.asarray(want.input_ids)), kwargs
        assert np.array_equal(to_host(cuda.row_offsets), np.asarray(want.row_offsets))
        assert np.array_equal(to_host(cuda.lengths), np.asarray(want.lengths))
    # the core's own argument, down to chunks smaller than one text
    for chunk in (4096, 1000):
        core = ours(NAME)._core.encode_batch(texts, device="cuda:0", chunk_bytes=chunk)
        assert core.row_offsets().tolist() == cpu.row_offsets.tolist(), chunk
        assert core.tensor("input_ids").tolist() == cpu.input_ids.tolist(), chunk


def test_idle_pool_is_trimmed_and_out_of_memory_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a big call the pool keeps its working set, and gives it back after
    5 s idle. Then, with torch holding nearly all the rest, "cuda" raises
    CudaOutOfMemoryError and "auto" warns and gives the CPU's results."""
    torch = _torch()
    texts = (corpus_sample() * 40)[:20000]
    encode_cuda(NAME, texts)  # its tensors die here; the pool keeps the memory
    gc.collect()
    kept, _ = torch.cuda.mem_get_info()
    time.sleep(6.5)
    trimmed, _ = torch.cuda.mem_get_info()
    assert trimmed - kept > 64 << 20, (kept, trimmed)

    big = ["some text " * 1000] * 800  # 8 MB: ~0.5 GB of scratch in one chunk
    # one chunk for all of it (sized from free memory, chunks would shrink to fit)
    monkeypatch.setenv("GPU_TOK_CHUNK_BYTES", str(64 << 20))
    hog = torch.empty(trimmed - (256 << 20), dtype=torch.uint8, device="cuda")
    try:
        with pytest.raises(gpu_tok.CudaOutOfMemoryError, match="out of memory"):
            ours(NAME).encode_batch(big, device="cuda")
        with pytest.warns(gpu_tok.CpuFallbackWarning, match="out of memory"):
            enc = ours(NAME).encode_batch(big, device="auto")
    finally:
        del hog
        torch.cuda.empty_cache()
    assert enc.input_ids.device == "cpu"
    assert enc.to_lists() == ours(NAME).encode_batch(big, device="cpu").to_lists()


# -- (h) info and timings ----------------------------------------------------------


def test_the_device_loads_the_prebuilt_kernels_of_its_sm() -> None:
    """A wheel from `make wheel` carries its SM's kernels: no NVRTC compile at set-up."""
    from gpu_tok import _core
    from gpu_tok.tools import _prebuilt

    sm = CUDA["devices"][0]["sm"]
    prebuilt = dict(_core.prebuilt_kernels())
    if sm not in prebuilt:
        why = f"this build has no prebuilt kernels for {sm} (only {sorted(prebuilt)}; make wheel builds them)"
        if os.environ.get("GPU_TOK_REQUIRE_CUDA") == "1" and sm in _prebuilt.ARCHS:
            pytest.fail(why)
        pytest.skip(why)
    device = _core.cuda_device(0)
    assert Path(device["cubin"]) == prebuilt[sm] and device["cubin_from_cache"]


def test_info_reports_the_device() -> None:
    cuda = gpu_tok.info()["cuda"]
    assert cuda["available"] is True
    for key in ("reason", "driver_version", "devices", "nvrtc_version", "kernel_cache_dir"):
        assert key in cuda, f"info()['cuda'] lacks {key!r}: {sorted(cuda)}"
    assert cuda["driver_version"]
    assert cuda["nvrtc_version"]
    devices = cuda["devices"]
    assert isinstance(devices, list) and devices, devices
    device = devices[0]
    assert isinstance(device.get("name"), str) and device["name"].strip(), device
    assert device.get("sm"), device
    try:
        torch = _torch()
    except pytest.skip.Exception:
        return
    assert device["name"] == torch.cuda.get_device_name(0)
    major, minor = torch.cuda.get_device_capability(0)
    sm = device["sm"]
    if isinstance(sm, (tuple, list)):
        assert tuple(sm) == (major, minor), sm
    elif isinstance(sm, int):
        assert sm == major * 10 + minor, sm
    else:
        digits = "".join(ch for ch in str(sm) if ch.isdigit())
        assert digits == f"{major}{minor}", sm


def test_timings_are_reported() -> None:
    texts = corpus_sample()[:100]
    enc = encode_cuda(NAME, texts)
    timings = getattr(enc, "timings", None)
    assert isinstance(timings, dict), f"BatchEncoding.timings is {timings!r}"
    for key in ("total_ms", "kernels_ms", "upload_ms"):
        assert key in timings, f"timings lack {key!r}: {timings}"
    for key, value in timings.items():
        assert isinstance(value, (int, float)) and not isinstance(value, bool), (key, value)
        assert math.isfinite(value) and value >= 0, (key, value)
    assert timings["kernels_ms"] > 0
    cpu = ours(NAME).encode_batch(texts, device="cpu")
    cpu_timings = getattr(cpu, "timings", None)
    assert isinstance(cpu_timings, dict) and "total_ms" in cpu_timings, cpu_timings
