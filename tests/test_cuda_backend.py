"""The CUDA backend without a GPU: its whole batch pipeline (layout, cuts at
safe points, the kernels' per-thread functions, scans, chunking, packing with
the post-processor's template) runs on the host emulator (`device="emulator"`
in the core), and must give the CPU engine's batch value for value — which the
parity suites tie to `tokenizers`. Plus device selection, fallback and errors
with CUDA absent. tests/test_gpu.py runs the same pipeline on a real GPU."""

from __future__ import annotations

import gc
import json
import time

import gpu_tok
import numpy as np
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
from gpu_tok import CudaUnavailableError, _core, _placement
from gpu_tok._core import Padding, Truncation

ALL_FIELDS = {"attention_mask": True, "type_ids": True, "special_tokens_mask": True}
# (truncation, padding) as the core takes them.
SETTINGS = {
    "ragged": (None, None),
    "longest-right": (Truncation(96), Padding(pad_id=7, pad_type_id=3, pad_token="<pad>")),
    "longest-left-multiple": (Truncation(64, "only_first", "left"),
                              Padding(side="left", pad_to_multiple_of=8, pad_id=5, pad_token="<pad>")),
    "fixed-shorter-than-rows": (None, Padding(16, pad_id=1, pad_token="<pad>")),
    "truncate-only": (Truncation(32, stride=4), None),
}


def docs() -> list[str]:
    return corpus_sample()[:120] + edge_cases()


def both(name: str, texts, device: str = "emulator", **kwargs):
    core = ours(name)._core
    return core.encode_batch(texts, device="cpu", **kwargs), core.encode_batch(texts, device=device, **kwargs)


def assert_same(cpu, dev) -> None:
    assert cpu.keys() == dev.keys()
    assert cpu.width == dev.width and cpu.rows == dev.rows
    assert cpu.to_lists() == dev.to_lists()
    assert cpu.lengths().tolist() == dev.lengths().tolist()
    assert cpu.row_offsets().tolist() == dev.row_offsets().tolist()


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("special", [True, False])
@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_emulated_pipeline_equals_cpu(name: str, setting: str, special: bool) -> None:
    truncation, padding = SETTINGS[setting]
    cpu, dev = both(name, docs(), add_special_tokens=special, truncation=truncation, padding=padding, **ALL_FIELDS)
    assert_same(cpu, dev)


@pytest.mark.parametrize("chunk", [1, 700, 1 << 24])
def test_chunking_does_not_change_results(chunk: int) -> None:
    padding = Padding(pad_token="<pad>")
    cpu, dev = both("qwen3", docs(), device=f"emulator:{chunk}", padding=padding, attention_mask=True)
    assert_same(cpu, dev)


def test_long_documents_are_cut_and_match() -> None:
    # ~40-120 kB rows: many 1 kB pieces each, cut only at safe points.
    sample = corpus_sample()
    long_rows = [" ".join(sample[i:i + 40]) for i in range(0, 120, 40)]
    long_rows.append("word " * 30000)
    long_rows.append("x" * 20000 + " tail")  # no safe point for 20 kB: one long piece
    for name in TOKENIZER_NAMES:
        cpu, dev = both(name, long_rows)
        assert_same(cpu, dev)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_long_words_merged_by_a_block_equal_the_cpu_and_tokenizers(name: str) -> None:
    texts = long_words()
    cpu, dev = both(name, texts)
    assert_same(cpu, dev)
    oracle = tokenizers.Tokenizer.from_str(tokenizer_json(name))
    oracle.no_padding()
    oracle.no_truncation()
    assert dev.to_lists()["input_ids"] == [e.ids for e in oracle.encode_batch(texts)]


def byte_level_bpe(merges: list[str]) -> str:
    # A GPT-2-style tokenizer.json: the 256 byte tokens, then each merge's token.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    vocab = {chr(b): i for i, b in enumerate(printable)}
    vocab.update({chr(256 + n): len(printable) + n for n in range(len(others))})
    for merge in merges:
        vocab.setdefault(merge.replace(" ", ""), len(vocab))
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges}})


def test_a_long_word_round_that_makes_a_lower_rank_pair_is_cut_short() -> None:
    # "a bb" ranks before "b b", which makes its "bb": the round merging every
    # "b b" makes pairs "a bb" of lower rank, which the oracle's queue merges
    # first. The block applies that round up to the first such merge only.
    # (tests/test_long_words.py has random merge lists of this kind.)
    merges = ["a bb", "b b", "abb abb", "c c", "cc cc", "cccc cccc", "abb c", "x y"]
    json_text = byte_level_bpe(merges)
    texts = ["abb" * 6000, "abbb" * 4500 + "c" * 3, "c" * 20000, "cc" * 9000 + "abb" * 10, "ab" * 9000]
    dev = gpu_tok.Tokenizer.from_str(json_text)._core.encode_batch(texts, device="emulator")
    expected = [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(texts)]
    assert dev.to_lists()["input_ids"] == expected


def test_rows_the_host_encodes_mix_with_device_rows() -> None:
    # Added-token text, text the normalizer changes, empty rows: the host encodes
    # some rows, the device the others, and packing interleaves them.
    texts = ["plain text", "<|im_start|>user hi<|im_end|>", "", "ﬁ ＡＢＣ café", "more <|endoftext|>", " "]
    for name in TOKENIZER_NAMES:
        cpu, dev = both(name, texts, padding=Padding(side="left", pad_token="<pad>"), **ALL_FIELDS)
        assert_same(cpu, dev)


def test_emulated_ids_equal_tokenizers_directly() -> None:
    texts = docs()
    dev = ours("qwen3")._core.encode_batch(texts, device="emulator")
    expected = [e.ids for e in reference("qwen3").encode_batch(texts, add_special_tokens=True)]
    assert dev.to_lists()["input_ids"] == expected


def test_pairs_and_offsets_take_the_cpu_and_are_copied() -> None:
    texts, pairs = ["a b c", "hello"], ["x", "world and more"]
    cpu, dev = both("qwen3", texts, pairs=pairs, type_ids=True)
    assert_same(cpu, dev)
    cpu, dev = both("qwen3", texts, offsets=True)
    assert_same(cpu, dev)
    # No kernels ran: the host encoded every row.
    assert dev.timings() == {"kernels_ms": 0.0, "upload_ms": 0.0, "prepare_ms": 0.0, "rows_on_host": 2}


def test_empty_batch_and_empty_rows() -> None:
    for texts in ([], [""], ["", ""]):
        cpu, dev = both("qwen3", texts, padding=Padding(pad_token="<pad>"), attention_mask=True)
        assert_same(cpu, dev)


def test_too_short_max_length_is_refused_on_the_device_too() -> None:
    name = next((n for n in TOKENIZER_NAMES if ours(n).num_special_tokens_to_add() > 0), None)
    if name is None:
        pytest.skip("no tokenizer here adds special tokens")
    with pytest.raises(gpu_tok.InvalidInputError, match="max_length"):
        ours(name)._core.encode_batch(["a"], truncation=Truncation(0), device="emulator")


def test_device_tensors_share_memory_and_outlive_the_batch() -> None:
    dev = ours("qwen3")._core.encode_batch(["a b", "c"], device="emulator",
                                           padding=Padding(pad_id=9, pad_token="<pad>"), attention_mask=True)
    ids = dev.tensor("input_ids")
    view = np.from_dlpack(ids)
    assert view.shape == (2, dev.width) and view.dtype == np.int64
    assert np.shares_memory(view, np.asarray(ids))
    expected = view.tolist()
    del dev
    gc.collect()
    assert ids.tolist() == expected == np.from_dlpack(ids).tolist()
    assert ids.device == "cpu"  # emulated device memory is host memory


def test_timings_of_device_and_cpu_calls() -> None:
    tok = ours("qwen3")
    start = time.perf_counter()
    dev = tok._core.encode_batch(docs(), device="emulator")
    wall_ms = (time.perf_counter() - start) * 1e3
    timings = dev.timings()
    assert set(timings) == {"kernels_ms", "upload_ms", "prepare_ms", "rows_on_host", "emulated_device_ms",
                            "emulated_peak_bytes"}
    assert timings["kernels_ms"] > 0 and timings["prepare_ms"] > 0
    # the device's work the emulator did is part of the call (benches/host_cost.py takes it out)
    assert 0 < timings["emulated_device_ms"] < wall_ms
    assert tok._core.encode_batch(["x"]).timings() is None
    enc = tok.encode_batch(["x"], device="cpu")
    assert set(enc.timings) == {"total_ms"} and enc.timings["total_ms"] > 0


def test_device_memory_per_byte_of_text() -> None:
    # Byte-level BPE in one chunk, at its peak (the merge loop): per byte of
    # text, 1 of text, 16 of words and counts, 4 of the words' order of work,
    # 4 of model output and 28 of merge scratch (ids, links, a heap of 2n
    # 8-byte entries); it was 74.
    text_bytes = sum(len(d.encode()) for d in docs())
    timings = ours("qwen3")._core.encode_batch(docs(), device=f"emulator:{1 << 26}").timings()
    assert 49 * text_bytes < timings["emulated_peak_bytes"] <= 54 * text_bytes


def test_unknown_core_devices_are_refused() -> None:
    core = ours("qwen3")._core
    for device in ("tpu", "cuda:x", "emulator:-1", "cuda:1:2"):
        with pytest.raises(ValueError, match="device"):
            core.encode_batch(["x"], device=device)


@pytest.mark.skipif(gpu_tok.info()["cuda"]["available"], reason="checks the behaviour without CUDA")
class TestWithoutCuda:
    def test_cuda_raises_with_the_reason(self) -> None:
        tok = ours("qwen3")
        for device in ("cuda", "cuda:0", "cuda:3", "CUDA:1"):
            with pytest.raises(CudaUnavailableError, match="cannot be used"):
                tok.encode_batch(["x"], device=device)

    def test_the_core_refuses_cuda_too(self) -> None:
        with pytest.raises(CudaUnavailableError):
            ours("qwen3")._core.encode_batch(["x"], device="cuda:0")
        with pytest.raises(CudaUnavailableError):
            _core.cuda_device(0)

    def test_auto_uses_the_cpu_even_for_big_batches(self) -> None:
        tok = ours("qwen3")
        big = ["some text " * 1000] * 200  # 2 MB, above the auto threshold
        enc = tok.encode_batch(big, device="auto")
        assert enc.input_ids.device == "cpu" and "kernels_ms" not in enc.timings
        assert enc.to_lists() == tok.encode_batch(big, device="cpu").to_lists()

    def test_info_reports_why(self) -> None:
        report = gpu_tok.info()
        cuda = report["cuda"]
        assert report["backend"] == "cpu" and cuda["available"] is False and cuda["reason"]
        assert cuda["devices"] == [] and cuda["kernel_cache_dir"]
        assert not _core.cuda_initialised_before_fork()


FORK_SCRIPT = r"""
import os, sys, warnings
import gpu_tok
from gpu_tok import _core, _placement
tok = gpu_tok.Tokenizer.default()
big = ["some text " * 1000] * 200  # above the auto threshold
_placement.cuda_usable = lambda: True  # as on a GPU machine: auto would pick the GPU
_core.note_cuda_initialised_for_tests()  # as after a CUDA call in this parent
assert not _core.cuda_initialised_before_fork()
pid = os.fork()
if pid == 0:
    code = 0
    try:
        assert _core.cuda_initialised_before_fork()
        try:
            tok.encode_batch(["x"], device="cuda")
            code = 10
        except gpu_tok.CudaUnavailableError as err:
            code = 0 if "fork" in str(err) else 11
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = tok.encode_batch(big, device="auto")
            second = tok.encode_batch(big, device="auto")
        if first.input_ids.device != "cpu" or first.to_lists() != second.to_lists():
            code = 12
        if [w.category for w in caught] != [RuntimeWarning]:
            code = 13
        if not _core.cuda_probe()["reason"].startswith("CUDA was initialised in the parent"):
            code = 14
    except BaseException:
        code = 15
    os._exit(code)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_fork_after_cuda_init_refuses_cuda_and_auto_warns_once() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def test_threads_share_the_emulated_pipeline() -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = docs()
    core = ours("qwen3")._core
    padding = Padding(side="left", pad_token="<pad>")
    expected = core.encode_batch(texts, device="cpu", padding=padding, attention_mask=True).to_lists()
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: core.encode_batch(texts, device="emulator:5000", padding=padding,
                                                            attention_mask=True).to_lists(), range(12)))
    assert all(r == expected for r in results)


def test_host_tensors_convert_to_numpy_without_a_copy() -> None:
    enc = ours("qwen3").encode_batch(["a b", "c"], device="cpu", padding=True)
    ids = enc.input_ids
    assert ids.cpu() is ids
    assert np.shares_memory(enc.to_numpy()["input_ids"], np.asarray(ids))


@pytest.mark.parametrize(("engine", "named"), [("", "compiled DFA"), ("scanner", "hand-written scanner")])
def test_a_chain_without_a_space_step_is_not_cut(engine: str, named: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Qwen3's vocabulary with only DeepSeek's digit step (then byte-level without
    # regex): "ab cd" stays one word, so long rows must not be cut at spaces.
    import json

    from conftest import tokenizer_json

    spec = json.loads(tokenizer_json("qwen3"))
    # A merge across a space ("c" + "Ġ", rank 0), so a wrong cut changes ids.
    new_id = 1 + max([*spec["model"]["vocab"].values(), *(t["id"] for t in spec["added_tokens"])])
    spec["model"]["vocab"]["cĠ"] = new_id
    merges = spec["model"]["merges"]
    merges.insert(0, ["c", "Ġ"] if isinstance(merges[0], list) else "c Ġ")
    spec["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ]}
    text = json.dumps(spec)
    monkeypatch.setenv("GPU_TOK_PRETOKENIZER", engine)
    tok = gpu_tok.Tokenizer.from_str(text)
    assert any(named in step["reason"] for step in tok.plan if step["stage"] == "pre_tokenize")
    rows = ["abc def 123 ghi " * 800, "x y" * 3000, "short 42", "ac " * 3000]
    cpu = tok._core.encode_batch(rows, device="cpu")
    dev = tok._core.encode_batch(rows, device="emulator")
    assert new_id in cpu.to_lists()["input_ids"][0]
    assert_same(cpu, dev)
    import tokenizers

    assert dev.to_lists()["input_ids"] == [e.ids for e in tokenizers.Tokenizer.from_str(text).encode_batch(rows)]


def test_auto_warns_and_uses_the_cpu_when_the_kernels_do_not_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_tok import KernelCompileError

    def broken(ordinal: int) -> dict:
        raise KernelCompileError("NVRTC failed to compile gt_batch.cu for sm_90: error")

    monkeypatch.setattr(_placement, "cuda_usable", lambda: True)
    monkeypatch.setattr(_placement._core, "cuda_device", broken)
    _placement._auto_gpu_ready.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="did not compile.*please report"):
            assert _placement.resolve("auto", 2 << 20) == _placement.Placement("cpu")
    finally:
        _placement._auto_gpu_ready.cache_clear()


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_added_token_rows_run_on_the_device(name: str) -> None:
    rows = chat_rows(name)
    for chunk, (truncation, padding) in [(1 << 20, SETTINGS["ragged"]), (300, SETTINGS["longest-left-multiple"]),
                                         (2000, SETTINGS["longest-right"])]:
        cpu, dev = both(name, rows, device=f"emulator:{chunk}", truncation=truncation, padding=padding,
                        **ALL_FIELDS)
        assert_same(cpu, dev)
    plain = both(name, rows, add_special_tokens=False)
    expected = [e.ids for e in unpadded_oracle(tokenizer_json(name)).encode_batch(rows, add_special_tokens=False)]
    assert plain[1].to_lists()["input_ids"] == expected
    # The text between added tokens went to the device.
    assert plain[1].timings()["rows_on_host"] == 0


# -- consumer streams: a tensor exported to a stream is freed after that stream's work


def _exported_releases(device: str = "emulator", **export: object) -> list[tuple[int, list[int]]]:
    """The releases of a fresh emulated batch whose input_ids were exported with `export`."""
    _core.emulator_releases_for_tests()  # start from an empty log
    dev = ours("qwen3")._core.encode_batch(["a b", "c d e"], device=device, attention_mask=True)
    ids = dev.tensor("input_ids")
    capsules = [ids.__dlpack__(**export), ids.__dlpack__(max_version=(1, 0), **export)]
    del dev, ids, capsules
    gc.collect()
    return _core.emulator_releases_for_tests()


def test_a_tensor_exported_to_a_stream_is_freed_after_that_stream() -> None:
    stream = 0x7F00_1234_5670
    releases = _exported_releases(stream=stream)
    # input_ids, attention_mask, lengths and row offsets; only input_ids went to the stream
    assert len(releases) == 4
    assert sorted(waited for _, waited in releases) == [[], [], [], [stream]]


@pytest.mark.parametrize("stream", [None, -1, 1, 2])
def test_no_stream_or_a_default_stream_needs_no_wait(stream: int | None) -> None:
    # None/-1: no stream given; 1 and 2: the legacy and per-thread default
    # streams, which the free (on the legacy stream) already follows
    releases = _exported_releases(stream=stream)
    assert len(releases) == 4 and all(waited == [] for _, waited in releases)


def test_a_tensor_kept_alive_by_its_capsule_waits_for_every_stream() -> None:
    _core.emulator_releases_for_tests()
    dev = ours("qwen3")._core.encode_batch(["a b"], device="emulator")
    ids = dev.tensor("input_ids")
    capsule = ids.__dlpack__(stream=0x1000)
    ids.__dlpack__(stream=0x2000)
    ids.__dlpack__(stream=0x1000)
    view = np.from_dlpack(ids)  # a consumer without a stream
    del dev, ids
    gc.collect()
    assert all(waited == [] for _, waited in _core.emulator_releases_for_tests())  # the capsule holds input_ids
    del capsule, view
    gc.collect()
    assert [waited for _, waited in _core.emulator_releases_for_tests()] == [[0x1000, 0x2000]]


@pytest.mark.parametrize(("stream", "error", "message"), [
    (0, ValueError, "ambiguous"),
    (-2, ValueError, "not a CUDA stream"),
    (1 << 70, ValueError, "not a CUDA stream"),
    (True, TypeError, "not a bool"),
    ("1", TypeError, "not str"),
    (1.5, TypeError, "not float"),
])
def test_bad_streams_raise(stream: object, error: type[Exception], message: str) -> None:
    device = ours("qwen3")._core.encode_batch(["a b"], device="emulator").tensor("input_ids")
    host = ours("qwen3")._core.encode_batch(["a b"], device="cpu").tensor("input_ids")
    with pytest.raises(error, match=message):
        device.__dlpack__(stream=stream)
    with pytest.raises((ValueError, TypeError)):
        host.__dlpack__(stream=stream)
    for ok in (None, -1):
        host.__dlpack__(stream=ok)
    with pytest.raises(ValueError, match="None or -1 for a CPU tensor"):
        host.__dlpack__(stream=0x1000)


# -- memory: chunk size, out of memory


def test_chunk_bytes_overrides_the_device_chunk() -> None:
    texts = docs()
    cpu = ours("qwen3")._core.encode_batch(texts, device="cpu", attention_mask=True)
    for chunk in (300, 5000):
        assert_same(cpu, ours("qwen3")._core.encode_batch(texts, device="emulator", attention_mask=True,
                                                          chunk_bytes=chunk))
    with pytest.raises(ValueError, match="chunk_bytes"):
        ours("qwen3")._core.encode_batch(["x"], device="emulator", chunk_bytes=0)


def test_chunk_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(_placement.CHUNK_ENV, raising=False)
    assert _placement.chunk_bytes() is None
    monkeypatch.setenv(_placement.CHUNK_ENV, " 65536 ")
    assert _placement.chunk_bytes() == 65536
    monkeypatch.setattr(_placement, "AUTO_DEVICE", "emulator")
    monkeypatch.setattr(_placement, "_auto_wants_gpu", lambda size, packable: True)
    assert _placement.resolve("auto", 2 << 20) == _placement.Placement("emulator", True, 65536)
    assert _placement.resolve("cpu").chunk_bytes is None
    for bad in ("0", "-5", "1.5", "lots"):
        monkeypatch.setenv(_placement.CHUNK_ENV, bad)
        with pytest.raises(ValueError, match="GPU_TOK_CHUNK_BYTES"):
            _placement.resolve("auto", 2 << 20)


def test_out_of_device_memory_is_a_typed_error() -> None:
    with pytest.raises(gpu_tok.CudaOutOfMemoryError, match="out of memory") as caught:
        ours("qwen3")._core.encode_batch(docs(), device="emulator:4096:2000")
    assert isinstance(caught.value, gpu_tok.CudaError)


def test_auto_falls_back_to_the_cpu_when_the_gpu_is_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = ours("qwen3")
    texts = docs()
    monkeypatch.setattr(_placement, "_auto_wants_gpu", lambda size, packable: True)
    monkeypatch.setattr(_placement, "AUTO_DEVICE", "emulator:4096:2000")  # a GPU with 2000 bytes
    with pytest.warns(gpu_tok.CpuFallbackWarning, match="out of memory.*on the CPU"):
        enc = tok.encode_batch(texts, padding="longest", device="auto")
    want = tok.encode_batch(texts, padding="longest", device="cpu")
    assert enc.input_ids.device == "cpu" and "kernels_ms" not in enc.timings
    assert enc.to_lists() == want.to_lists()
    with pytest.warns(gpu_tok.CpuFallbackWarning):
        called = tok(texts, padding=True, return_tensors="np")
    assert called["input_ids"].tolist() == tok(texts, padding=True, device="cpu")["input_ids"]
    # with room, no warning (the suite turns warnings into errors)
    monkeypatch.setattr(_placement, "AUTO_DEVICE", "emulator")
    assert tok.encode_batch(texts, padding="longest", device="auto").to_lists() == want.to_lists()


def test_an_explicit_device_raises_when_out_of_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # as device="cuda" resolves on a GPU machine, with a device that has no room
    monkeypatch.setattr(_placement, "resolve", lambda *a, **k: _placement.Placement("emulator:4096:2000"))
    with pytest.raises(gpu_tok.CudaOutOfMemoryError):
        ours("qwen3").encode_batch(docs(), device="cuda")
