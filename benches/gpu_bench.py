"""GPU throughput of gpu_tok: list[str] or Arrow strings to CUDA tensors, against
gpu_tok on the CPU and Hugging Face `tokenizers`, with a parity check.

    python benches/gpu_bench.py [--tokenizers qwen3 llama2 bert-minilm unigram-xlmr gpt-oss]
                                [--shared ../shared] [--mb 256]
                                [--ref-mb 32] [--repeats 3] [--json out.json]

For each tokenizer (from <shared>/tokenizers/<name>, else tests/fixtures/<name>
(the Unigram one lives only there); without a shared folder, the embedded
Qwen3 and the embedded sample corpus) the corpus documents are
repeated to --mb megabytes (10^6 bytes of UTF-8) and measured, medians of
--repeats timed runs after an untimed warm-up:

- cuda list->tensor: `encode_batch(texts, device="cuda")` until the ids are a
  torch (else CuPy) CUDA tensor, device synchronized before the clock stops;
  ragged (padding=None) and padding="longest" + truncation max_length=2048;
- cuda arrow->tensor: the same from a pyarrow string array (built untimed);
- cuda 4 MB chunks: the ragged call with `GPU_TOK_CHUNK_BYTES` = 4 MiB, so the
  multi-chunk path runs (and its cost shows) whatever the GPU's free memory;
- cuda kernels only: the median of `enc.timings["kernels_ms"]` (CUDA events);
- gpu_tok cpu: `encode_batch(texts, device="cpu")`, all cores;
- tokenizers: `Tokenizer.encode_batch(texts)`, all cores, on the first --ref-mb
  of the corpus only (it is slow), as MB/s, so ratios compare rates;
- parity: CUDA ids against `tokenizers`' on that slice (identical documents / total);
- auto crossover: batches of 64 KiB to 16 MiB through `device="auto"`'s two
  ways, the CPU and the GPU with the ids copied back to the host, and the
  smallest size from which the GPU wins at every larger one: what
  `gpu_tok._placement.AUTO_MIN_BYTES` (provisional until measured) should be.

Every timed run gets fresh str objects (copied untimed), so no engine is
handed CPython's cached UTF-8 of a document it saw before.

The first CUDA call (kernel compile or cache load) is reported on its own.
A --time-limit (seconds, whole run) cuts repeats short rather than letting an
outer timeout lose the results; the JSON is rewritten after each tokenizer.
Exit status: 0, or 1 when parity fails or a measurement raised.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gpu_tok
from gpu_tok import _data
from gpu_tok._placement import CHUNK_ENV

CHUNK_BYTES = 4 << 20  # the multi-chunk measurement's GPU_TOK_CHUNK_BYTES

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "gpu_tok.gpu_bench/1"
MAX_LENGTH = 2048


# -- device helpers ------------------------------------------------------------------


class Device:
    """How to take a CUDA gpu_tok Tensor into a framework and wait for the GPU."""

    def __init__(self) -> None:
        self.torch: Any = None
        self.cupy: Any = None
        self.via = "none"
        try:
            import torch

            if torch.cuda.is_available():
                self.torch, self.via = torch, f"torch {torch.__version__}"
        except ImportError:
            pass
        if self.torch is None:
            try:
                import cupy

                self.cupy, self.via = cupy, f"cupy {cupy.__version__}"
            except ImportError:
                pass

    def consume(self, tensor: Any) -> Any:
        if tensor.device == "cpu":
            return tensor
        if self.torch is not None:
            return self.torch.from_dlpack(tensor)
        if self.cupy is not None:
            return self.cupy.from_dlpack(tensor)
        return tensor

    def sync(self) -> None:
        if self.torch is not None:
            self.torch.cuda.synchronize()
        elif self.cupy is not None:
            self.cupy.cuda.Device().synchronize()

    def host_list(self, tensor: Any) -> list:
        """A (flat) tensor's values as a Python list, through the framework when on the GPU."""
        if tensor.device != "cpu" and self.torch is not None:
            return self.torch.from_dlpack(tensor).cpu().tolist()
        if tensor.device != "cpu" and self.cupy is not None:
            return self.cupy.asnumpy(self.cupy.from_dlpack(tensor)).tolist()
        return tensor.tolist()


def count_tokens(dev: Device, enc: gpu_tok.BatchEncoding) -> int:
    return int(sum(dev.host_list(enc.lengths)))


# -- inputs --------------------------------------------------------------------------


def find_shared(explicit: str | None) -> Path | None:
    if explicit == "none":
        return None
    if explicit:
        path = Path(explicit)
        if not (path / "tokenizers").is_dir():
            raise SystemExit(f"--shared {explicit}: no tokenizers/ folder there")
        return path
    for candidate in (os.environ.get("GPU_TOK_SHARED"), ROOT.parent / "shared", ROOT / "shared"):
        if candidate and (Path(candidate) / "tokenizers").is_dir():
            return Path(candidate)
    return None


def load_tokenizers(name: str, shared: Path | None) -> tuple[gpu_tok.Tokenizer, Any, str] | None:
    import tokenizers

    if shared is not None and (shared / "tokenizers" / name / "tokenizer.json").is_file():
        folder = shared / "tokenizers" / name
        return (gpu_tok.Tokenizer.from_pretrained(folder),
                tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")), str(folder))
    if name == _data.DEFAULT_TOKENIZER:
        return (gpu_tok.Tokenizer.default(), tokenizers.Tokenizer.from_str(_data.default_tokenizer_json()),
                "embedded default")
    fixture = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / name
    if (fixture / "tokenizer.json.xz").is_file():
        import lzma

        json_text = lzma.decompress((fixture / "tokenizer.json.xz").read_bytes()).decode("utf-8")
        config = json.loads((fixture / "tokenizer_config.json").read_text(encoding="utf-8"))
        return (gpu_tok.Tokenizer.from_str(json_text, config), tokenizers.Tokenizer.from_str(json_text),
                str(fixture))
    return None


def load_documents(shared: Path | None) -> tuple[list[str], str]:
    corpus = shared / "corpus" / "mixed.jsonl" if shared is not None else None
    if corpus is not None and corpus.is_file():
        with corpus.open(encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f if line.strip()], str(corpus)
    return [doc["text"] for doc in _data.sample_corpus()], "embedded sample corpus"


def repeat_to(docs: list[str], sizes: list[int], target: int) -> tuple[list[str], int]:
    """Whole documents, cycling through `docs`, until `target` bytes are reached."""
    out: list[str] = []
    total = 0
    while total < target and docs:
        for doc, size in zip(docs, sizes, strict=True):
            out.append(doc)
            total += size
            if total >= target:
                break
    return out, total


# -- measuring -----------------------------------------------------------------------


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.perf_counter() + seconds

    def left(self) -> float:
        return self.deadline - time.perf_counter()


def measure(run: Callable[[], tuple[float, dict]], repeats: int, budget: Budget) -> dict[str, Any]:
    """`run()` returns (seconds, extras); repeats it while the time limit allows (at least once)."""
    runs: list[float] = []
    extras: list[dict] = []
    for i in range(repeats):
        if i and runs[-1] * 1.2 > budget.left():
            break
        seconds, extra = run()
        runs.append(seconds)
        extras.append(extra)
    return {"runs_s": runs, "median_s": statistics.median(runs), "extras": extras}


def rate(result: dict[str, Any], nbytes: int) -> None:
    median = result["median_s"]
    result["bytes"] = nbytes
    result["mb_per_s"] = nbytes / 1e6 / median if median > 0 else None
    result["gb_per_s"] = nbytes / 1e9 / median if median > 0 else None
    tokens = [e.get("tokens") for e in result["extras"] if e.get("tokens") is not None]
    if tokens:
        result["tokens"] = tokens[0]
        result["tokens_per_s"] = tokens[0] / median if median > 0 else None


def guarded(label: str, errors: list[str], fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A measurement that may raise: the error is recorded and the bench goes on."""
    try:
        return fn()
    except Exception as err:
        errors.append(f"{label}: {err!r}")
        print(f"  {label}: FAILED {err!r}\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        return {"error": repr(err)}


def fresh(texts: Any) -> Any:
    """New str objects with the same text (untimed): CPython caches a str's
    UTF-8 once asked, and the repeated documents of a run would otherwise hand
    the engine that cache instead of the conversion every real input costs.
    Arrow arrays hold UTF-8 already and pass through."""
    return [(text + "\n")[:-1] for text in texts] if isinstance(texts, list) else texts


def cuda_runner(dev: Device, tok: gpu_tok.Tokenizer, texts: Any, **kwargs: Any) -> Callable[[], tuple[float, dict]]:
    def run() -> tuple[float, dict]:
        batch = fresh(texts)
        dev.sync()
        start = time.perf_counter()
        enc = tok.encode_batch(batch, device="cuda", **kwargs)
        imported = [dev.consume(enc[field]) for field in enc]
        dev.sync()
        seconds = time.perf_counter() - start
        timings = dict(getattr(enc, "timings", None) or {})
        tokens = count_tokens(dev, enc)
        del imported, enc
        return seconds, {"timings": timings, "tokens": tokens}

    return run


def cpu_runner(tok: gpu_tok.Tokenizer, texts: list[str]) -> Callable[[], tuple[float, dict]]:
    def run() -> tuple[float, dict]:
        batch = fresh(texts)
        start = time.perf_counter()
        enc = tok.encode_batch(batch, device="cpu")
        seconds = time.perf_counter() - start
        return seconds, {"tokens": int(sum(enc.lengths.tolist())), "timings": dict(getattr(enc, "timings", None) or {})}

    return run


AUTO_SIZES = [64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def crossover(points: list[dict[str, Any]]) -> int | None:
    """The smallest batch size (points sorted by "bytes") from which the GPU
    ("gpu_s") beats the CPU ("cpu_s") at every larger measured size; None
    when it does not win at the largest."""
    threshold = None
    for point in reversed(points):
        if point["gpu_s"] >= point["cpu_s"]:
            break
        threshold = point["bytes"]
    return threshold


def host_result_runner(tok: gpu_tok.Tokenizer, texts: list[str], device: str) -> Callable[[], tuple[float, dict]]:
    """Times one call whose ids end in host memory; notes whether it ran on a device."""
    def run() -> tuple[float, dict]:
        batch = fresh(texts)
        start = time.perf_counter()
        enc = tok.encode_batch(batch, device=device)
        seconds = time.perf_counter() - start
        return seconds, {"offloaded": "kernels_ms" in (getattr(enc, "timings", None) or {})}

    return run


def auto_crossover(tok: gpu_tok.Tokenizer, docs: list[str], repeats: int, budget: Budget,
                   sizes: list[int] | None = None, gpu_core: str | None = None) -> dict[str, Any]:
    """`device="auto"` with its threshold at 0 (the GPU, ids copied back to the
    host) against `device="cpu"`, per batch size: medians of `repeats`, each
    on fresh str objects; `sizes` defaults to AUTO_SIZES. `gpu_core` points
    "auto" at another core device (tests: the host emulator)."""
    from gpu_tok import _placement

    saved = _placement.AUTO_MIN_BYTES, _placement.AUTO_DEVICE
    doc_sizes = [len(d.encode("utf-8")) for d in docs]
    points = []
    try:
        _placement.AUTO_MIN_BYTES = 0
        if gpu_core is not None:
            _placement.AUTO_DEVICE = gpu_core
        for size in sizes or AUTO_SIZES:
            texts, nbytes = repeat_to(docs, doc_sizes, size)
            point: dict[str, Any] = {"bytes": nbytes, "documents": len(texts)}
            for key, device in (("cpu_s", "cpu"), ("gpu_s", "auto")):
                run = host_result_runner(tok, texts, device)
                run()  # untimed: this size's first call
                result = measure(run, repeats, budget)
                point[key] = result["median_s"]
                if key == "gpu_s" and not all(e["offloaded"] for e in result["extras"]):
                    raise RuntimeError(f'device="auto" did not offload a {nbytes}-byte batch')
            points.append(point)
    finally:
        _placement.AUTO_MIN_BYTES, _placement.AUTO_DEVICE = saved
    return {"points": points, "threshold_bytes": crossover(points), "current_bytes": saved[0]}


def modeled(tok: gpu_tok.Tokenizer, texts: list[str], nbytes: int) -> dict[str, Any]:
    """benches/device_model.py's kernel time for this call, from the emulator's
    counts over its first ~2 MB (the model's calibration: printed beside the measured)."""
    import device_model

    sample, size = [], 0
    for text in texts:
        if size >= 2e6:
            break
        sample.append(str(text))
        size += len(text.encode("utf-8"))
    stages = device_model.model(device_model.count_launches(tok, sample), size, nbytes)
    return {"kernels_ms": sum(s["ms"] for s in stages.values()), "stages": stages}


def median_timing(result: dict[str, Any], key: str) -> float | None:
    values = [e["timings"][key] for e in result.get("extras", []) if key in e.get("timings", {})]
    return statistics.median(values) if values else None


# -- one tokenizer -------------------------------------------------------------------


def bench_one(name: str, loaded: tuple[gpu_tok.Tokenizer, Any, str], docs: list[str], args: argparse.Namespace,
              dev: Device, cuda_ok: bool, budget: Budget) -> dict[str, Any]:
    tok, hf, source = loaded
    sizes = [len(d.encode("utf-8")) for d in docs]
    texts, nbytes = repeat_to(docs, sizes, int(args.mb * 1e6))
    ref_texts, ref_bytes = repeat_to(docs, sizes, int(min(args.ref_mb, args.mb) * 1e6))
    out: dict[str, Any] = {"source": source, "corpus": {"documents": len(texts), "bytes": nbytes},
                           "reference_slice": {"documents": len(ref_texts), "bytes": ref_bytes}, "errors": []}
    errors: list[str] = out["errors"]
    print(f"{name}: {source}; {len(texts)} documents, {nbytes / 1e6:.1f} MB "
          f"(tokenizers on the first {ref_bytes / 1e6:.1f} MB)", flush=True)

    if cuda_ok:
        def first_call() -> dict[str, Any]:
            small = texts[:256]
            results: dict[str, Any] = {}
            for label in ("first_call", "second_call"):
                dev.sync()
                start = time.perf_counter()
                enc = tok.encode_batch(small, device="cuda")
                dev.consume(enc.input_ids)
                dev.sync()
                results[f"{label}_ms"] = (time.perf_counter() - start) * 1e3
                results[f"{label}_timings"] = dict(getattr(enc, "timings", None) or {})
            print(f"  first CUDA call (compile or cache load): {results['first_call_ms']:.1f} ms, "
                  f"second: {results['second_call_ms']:.1f} ms", flush=True)
            return results

        out["warmup"] = guarded("warm-up", errors, first_call)
        ragged = cuda_runner(dev, tok, texts)
        out["warmup_full_s"] = guarded("full-size warm-up", errors, lambda: {"seconds": ragged()[0]})

        def cuda_ragged() -> dict[str, Any]:
            result = measure(ragged, args.repeats, budget)
            rate(result, nbytes)
            return result

        out["cuda_ragged"] = guarded("cuda ragged", errors, cuda_ragged)

        def cuda_chunked() -> dict[str, Any]:
            before = os.environ.get(CHUNK_ENV)
            os.environ[CHUNK_ENV] = str(CHUNK_BYTES)
            try:
                result = measure(ragged, max(1, args.repeats // 2), budget)
            finally:
                if before is None:
                    os.environ.pop(CHUNK_ENV, None)
                else:
                    os.environ[CHUNK_ENV] = before
            rate(result, nbytes)
            return result

        out["cuda_chunked"] = guarded("cuda 4 MB chunks", errors, cuda_chunked)

        def cuda_padded() -> dict[str, Any]:
            pad_id = getattr(tok, "pad_token_id", None)  # (set at run time: the stub does not declare it)
            pad_id = pad_id if pad_id is not None else 0
            run = cuda_runner(dev, tok, texts, padding="longest", truncation=True, max_length=MAX_LENGTH,
                              pad_token_id=pad_id)
            run()  # untimed: the padded layout's first use
            result = measure(run, args.repeats, budget)
            rate(result, nbytes)
            return result

        out["cuda_padded"] = guarded(f"cuda longest/{MAX_LENGTH}", errors, cuda_padded)

        def cuda_arrow() -> dict[str, Any]:
            import pyarrow as pa

            start = time.perf_counter()
            kind = pa.large_string() if nbytes >= 2**31 - 1 else pa.string()
            array = pa.array(texts, type=kind)
            built = time.perf_counter() - start
            run = cuda_runner(dev, tok, array)
            run()
            result = measure(run, args.repeats, budget)
            rate(result, nbytes)
            result["arrow_build_s"] = built
            return result

        out["cuda_arrow"] = guarded("cuda arrow", errors, cuda_arrow)
        ragged_result = out["cuda_ragged"]
        kernels_ms = median_timing(ragged_result, "kernels_ms")
        out["cuda_kernels"] = {
            "kernels_ms": kernels_ms,
            "upload_ms": median_timing(ragged_result, "upload_ms"),
            "total_ms": median_timing(ragged_result, "total_ms"),
            "mb_per_s": nbytes / 1e6 / (kernels_ms / 1e3) if kernels_ms else None,
            "gb_per_s": nbytes / 1e9 / (kernels_ms / 1e3) if kernels_ms else None,
        }
        out["cuda_kernels_modeled"] = guarded("device model", errors, lambda: modeled(tok, texts, nbytes))
        measured, predicted = kernels_ms, out["cuda_kernels_modeled"].get("kernels_ms")
        if measured and predicted:
            print(f"  kernels: measured {measured:.1f} ms, modeled {predicted:.1f} ms "
                  f"(benches/device_model.py; measured / modeled {measured / predicted:.2f})", flush=True)

    def cpu() -> dict[str, Any]:
        run = cpu_runner(tok, texts)
        run()
        result = measure(run, args.repeats, budget)
        rate(result, nbytes)
        return result

    out["cpu"] = guarded("gpu_tok cpu", errors, cpu)

    kept: dict[str, Any] = {}

    def reference() -> dict[str, Any]:
        def run() -> tuple[float, dict]:
            batch = fresh(ref_texts)
            start = time.perf_counter()
            encodings = hf.encode_batch(batch)
            seconds = time.perf_counter() - start
            kept["ids"] = [e.ids for e in encodings]
            return seconds, {"tokens": sum(len(ids) for ids in kept["ids"])}

        result = measure(run, args.repeats, budget)
        rate(result, ref_bytes)
        return result

    out["tokenizers"] = guarded("tokenizers", errors, reference)

    if cuda_ok and "ids" in kept:
        def parity() -> dict[str, Any]:
            enc = tok.encode_batch(ref_texts, device="cuda")
            if not enc.is_ragged:  # a tokenizer.json that pads: compare per row
                got = dev.host_list(enc.input_ids)
            else:
                flat, offsets = dev.host_list(enc.input_ids), dev.host_list(enc.row_offsets)
                got = [flat[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]
            identical = sum(1 for a, b in zip(got, kept["ids"], strict=True) if a == b)
            first = next((i for i, (a, b) in enumerate(zip(got, kept["ids"], strict=True)) if a != b), None)
            return {"identical": identical, "total": len(kept["ids"]), "first_mismatch": first}

        out["parity"] = guarded("parity", errors, parity)
    kept.clear()
    if cuda_ok:
        out["auto_crossover"] = guarded("auto crossover", errors,
                                        lambda: auto_crossover(tok, docs, args.repeats, budget))
    return out


# -- report --------------------------------------------------------------------------

ROWS = [
    ("cuda_ragged", "cuda list->tensor (ragged)"),
    ("cuda_padded", f"cuda list->tensor (longest, max {MAX_LENGTH})"),
    ("cuda_chunked", "cuda list->tensor (ragged, 4 MB chunks)"),
    ("cuda_arrow", "cuda arrow->tensor (ragged)"),
    ("cuda_kernels", "cuda kernels only (events)"),
    ("cpu", "gpu_tok cpu"),
    ("tokenizers", "tokenizers encode_batch"),
]


def table(report: dict[str, Any]) -> str:
    threads = report["machine"]["threads"]
    head = (f"{'tokenizer':<12} {'measurement':<36} {'MB/s':>10} {'GB/s':>7} {'vs tokenizers':>14} "
            f"{'vs gpu_tok cpu':>15} {'median':>10}")
    lines = [head, "-" * len(head)]
    for name, r in report["tokenizers"].items():
        if "skipped" in r:
            lines.append(f"{name:<12} skipped: {r['skipped']}")
            continue
        hf = (r.get("tokenizers") or {}).get("mb_per_s")
        cpu = (r.get("cpu") or {}).get("mb_per_s")
        for key, label in ROWS:
            m = r.get(key)
            if m is None:
                continue
            if "error" in m:
                lines.append(f"{name:<12} {label:<36} FAILED {m['error'][:80]}")
                continue
            mbps = m.get("mb_per_s")
            if not mbps:
                lines.append(f"{name:<12} {label:<36} {'n/a':>10}")
                continue
            vs_hf = f"{mbps / hf:.1f}x" if hf else "n/a"
            vs_cpu = f"{mbps / cpu:.1f}x" if cpu else "n/a"
            median = f"{m['median_s'] * 1e3:.1f} ms" if "median_s" in m else f"{m['kernels_ms']:.1f} ms"
            if key == "tokenizers":
                label = f"tokenizers ({threads} thr, {m['bytes'] / 1e6:.0f} MB)"
            elif key == "cpu":
                label = f"gpu_tok cpu ({threads} threads)"
            lines.append(f"{name:<12} {label:<36} {mbps:>10.1f} {mbps / 1e3:>7.2f} {vs_hf:>14} {vs_cpu:>15} "
                         f"{median:>10}")
        warm = r.get("warmup") or {}
        if "first_call_ms" in warm:
            lines.append(f"{name:<12} first CUDA call {warm['first_call_ms']:.1f} ms (compile or cache load), "
                         f"second {warm['second_call_ms']:.1f} ms")
        auto = r.get("auto_crossover") or {}
        if "points" in auto:
            sizes = ", ".join(f"{p['bytes'] >> 10} KiB {p['cpu_s'] / p['gpu_s']:.2f}x" for p in auto["points"])
            found = auto["threshold_bytes"]
            lines.append(f"{name:<12} auto: GPU (ids to host) vs CPU by batch size: {sizes}; GPU wins from "
                         f"{'no measured size' if found is None else f'{found} bytes'} "
                         f"(AUTO_MIN_BYTES is {auto['current_bytes']})")
        p = r.get("parity")
        if p and "identical" in p:
            lines.append(f"{name:<12} parity vs tokenizers: {p['identical']}/{p['total']} documents identical")
    lines.append(f"corpus repeated to {report['config']['mb']} MB (10^6 bytes of UTF-8 input); tokenizers runs on "
                 f"the first {report['config']['ref_mb']} MB and is compared as a rate (MB/s); medians of "
                 f"{report['config']['repeats']}; device sync: {report['machine']['sync_via']}")
    return "\n".join(lines)


def write_json(path: str | None, report: dict[str, Any]) -> None:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # one of each family first (byte-level BPE, SentencePiece BPE, WordPiece, Unigram), as time allows
    families = ["qwen3", "llama2", "bert-minilm", "unigram-xlmr", "gpt-oss"]
    parser.add_argument("--tokenizers", nargs="+", default=families,
                        help="names under <shared>/tokenizers or tests/fixtures (space or comma separated)")
    parser.add_argument("--shared", help="the shared folder (default: $GPU_TOK_SHARED, ../shared, ./shared, "
                                         "else the embedded tokenizer and sample corpus; 'none': the embedded ones)")
    parser.add_argument("--mb", type=float, default=256.0, help="corpus size, MB (documents repeated)")
    parser.add_argument("--ref-mb", type=float, default=32.0, help="MB for tokenizers and the parity check")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--time-limit", type=float, default=180.0,
                        help="seconds for the whole run; repeats are cut short to stay inside it")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if args.mb <= 0 or args.ref_mb <= 0 or args.repeats < 1:
        parser.error("--mb, --ref-mb and --repeats must be positive")
    names = [n for part in args.tokenizers for n in part.split(",") if n]
    budget = Budget(args.time_limit)
    os.environ["GPU_TOK_DEVICE_COUNTS"] = "1"  # the emulator's counts for the model (before its first use)
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    shared = find_shared(args.shared)
    info = gpu_tok.info()
    cuda = info.get("cuda") or {}
    cuda_ok = bool(cuda.get("available"))
    dev = Device()
    if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("false", "0"):
        print("note: TOKENIZERS_PARALLELISM is off, so tokenizers runs on one thread", flush=True)
    devices = cuda.get("devices") or []
    print(f"gpu_tok {gpu_tok.__version__}; cpu threads {info.get('threads')}; CUDA "
          f"{'available' if cuda_ok else 'NOT available: ' + str(cuda.get('reason'))}; "
          f"devices {[(d.get('name'), d.get('sm')) for d in devices]}; driver {cuda.get('driver_version')}; "
          f"nvrtc {cuda.get('nvrtc_version')}; sync via {dev.via}", flush=True)
    cache_dir = cuda.get("kernel_cache_dir")
    cache_files = sum(1 for p in Path(cache_dir).rglob("*") if p.is_file()) if cache_dir and Path(
        cache_dir).is_dir() else 0

    docs, corpus_source = load_documents(shared)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "config": {"mb": args.mb, "ref_mb": args.ref_mb, "repeats": args.repeats, "max_length": MAX_LENGTH,
                   "corpus": corpus_source, "shared": str(shared) if shared else None},
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "threads": info.get("threads"), "cpu_count": os.cpu_count(), "cuda": cuda,
                    "kernel_cache_files_before": cache_files, "sync_via": dev.via,
                    "tokenizers_version": __import__("tokenizers").__version__},
        "tokenizers": {},
    }
    failed = False
    for name in names:
        if budget.left() < 15:
            report["tokenizers"][name] = {"skipped": "out of time (--time-limit)"}
            continue
        start = time.perf_counter()
        loaded = load_tokenizers(name, shared)
        if loaded is None:
            why = f"no {name}/tokenizer.json under {shared}" if shared else "no shared folder; only the embedded qwen3"
            report["tokenizers"][name] = {"skipped": why}
            print(f"{name}: skipped ({why})", flush=True)
            continue
        print(f"{name}: loaded in {time.perf_counter() - start:.1f} s", flush=True)
        result = bench_one(name, loaded, docs, args, dev, cuda_ok, budget)
        report["tokenizers"][name] = result
        p = result.get("parity") or {}
        failed |= bool(result["errors"]) or ("identical" in p and p["identical"] != p["total"])
        write_json(args.json, report)
    print()
    print(table(report))
    write_json(args.json, report)
    if args.json:
        print(f"wrote {args.json}")
    if not cuda_ok:
        print("CUDA was not available: only the CPU engines were measured", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
