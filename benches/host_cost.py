"""The host side of a device call, measured without a GPU: milliseconds of
host work per GB of text, the part of the 10 GB/s budget the CPU owns.

    python benches/host_cost.py [--mb 16] [--threads 2] [--repeats 9] [--json benches/results/host_cost.json]

Each tokenizer encodes the corpus (documents repeated to --mb, fresh str
objects per run) with `device="emulator:<64 MiB chunks>"`: the CUDA pipeline
exactly as on a GPU, its kernels run by the host (on the emulator's stream
threads, beside the host's own work, as on a GPU: on 2 cores they compete
with it for the cores). The time the calling thread spent on the device's
behalf (`emulated_device_ms`: waiting for its streams, filling device
memory) is taken out of the wall time; what is left is what
the host does for a GPU call: turning str into UTF-8, preparing rows
(`prepare_ms`: normalizing, cutting words and pieces, host-encoded rows), laying out and
staging the text (`upload_ms`), reading counts, sizing and packing. Medians of
--repeats runs after a warm-up; the figure to beat is 800 ms/GB on 2 cores
(100 ms/GB on 16).

Each tokenizer runs twice: on a list of str, and on the same documents as an
Arrow string array (UTF-8 already: the engine reads it without a copy). The
difference is the str -> UTF-8 conversion: in the abi3 build CPython's, which
holds the GIL (one thread, whatever the pool size; `utf8_ms_per_gb` times it
alone: `str.encode` of fresh strings), in a per-version build the pool's
(`stable_abi` in the JSON says which; benches/abi3_check.sh runs both);
`str_route` times the route alone, wall and CPU.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 64 << 20


def load(name: str, shared: Path) -> Any:
    import gpu_tok

    folder = shared / "tokenizers" / name
    if (folder / "tokenizer.json").is_file():
        return gpu_tok.Tokenizer.from_pretrained(folder)
    fixture = ROOT / "tests" / "fixtures" / name
    json_text = lzma.decompress((fixture / "tokenizer.json.xz").read_bytes()).decode("utf-8")
    return gpu_tok.Tokenizer.from_str(json_text, json.loads((fixture / "tokenizer_config.json").read_text()))


def corpus(shared: Path, mb: float) -> tuple[list[str], int]:
    with (shared / "corpus" / "mixed.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f if line.strip()]
    out, total = [], 0
    while total < mb * 1e6:
        for doc in docs:
            out.append(doc)
            total += len(doc.encode("utf-8"))
            if total >= mb * 1e6:
                break
    return out, total


def measure(tok: Any, texts: Any, nbytes: int, repeats: int) -> dict[str, Any]:
    runs, out = [], None
    for i in range(repeats + 1):
        # The last run's results are freed outside the clock: on a GPU that is
        # a stream-ordered free, on the emulator a host free() of every output.
        del out
        # Fresh str objects (no cached UTF-8); an Arrow array as it is.
        batch = [(t + "\n")[:-1] for t in texts] if isinstance(texts, list) else texts
        start = time.perf_counter()
        out = tok._core.encode_batch(batch, device=f"emulator:{CHUNK}")
        wall_ms = (time.perf_counter() - start) * 1e3
        t = out.timings()
        if i:  # the first run warms caches and uploads the tables
            runs.append({"wall_ms": wall_ms, "host_ms": wall_ms - t["emulated_device_ms"], **t})
    per_gb = 1e9 / nbytes
    med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    return {
        "runs": runs,
        "host_ms_per_gb": med["host_ms"] * per_gb,
        "prepare_ms_per_gb": med["prepare_ms"] * per_gb,
        "upload_ms_per_gb": med["upload_ms"] * per_gb,
        "other_host_ms_per_gb": (med["host_ms"] - med["prepare_ms"] - med["upload_ms"]) * per_gb,
        "emulated_device_ms_per_gb": med["emulated_device_ms"] * per_gb,
        # One 64 MiB chunk at its peak: device memory per byte of text.
        "device_peak_bytes_per_byte": max(r["emulated_peak_bytes"] for r in runs) / min(nbytes, CHUNK),
    }


def str_route(tok: Any, texts: list[str], nbytes: int, repeats: int) -> dict[str, float]:
    """The list-of-str -> UTF-8 route alone, wall and process CPU time per GB:
    a call whose text_pair ends with a lone surrogate converts every text,
    then fails on the pair before any tokenizing."""
    import gpu_tok

    pairs = ["x"] * (len(texts) - 1) + ["\ud800"]
    walls, cpus = [], []
    for i in range(repeats + 1):
        batch = [(t + "\n")[:-1] for t in texts]
        start, cpu = time.perf_counter(), time.process_time()
        try:
            tok._core.encode_batch(batch, pairs, device="cpu")
        except gpu_tok.InvalidInputError:
            pass
        if i:
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - cpu)
    per_gb = 1e3 * 1e9 / nbytes
    return {"wall_ms_per_gb": statistics.median(walls) * per_gb, "cpu_ms_per_gb": statistics.median(cpus) * per_gb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", nargs="+", default=["qwen3", "llama2", "bert-minilm", "unigram-xlmr"])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--mb", type=float, default=16.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ["GPU_TOK_NUM_THREADS"] = str(args.threads)  # read when the pool is first built
    import gpu_tok
    import pyarrow as pa

    shared = Path(args.shared)
    texts, nbytes = corpus(shared, args.mb)
    threads = gpu_tok._core.num_threads()
    fresh = [(t + "\n")[:-1] for t in texts]
    start = time.perf_counter()
    for t in fresh:
        t.encode("utf-8")
    utf8_ms_per_gb = (time.perf_counter() - start) * 1e3 * 1e9 / nbytes
    stable_abi = gpu_tok.info(probe_cuda=False).get("stable_abi", True)  # older cores were all abi3
    route = "abi3 build: str converted under the GIL" if stable_abi else "per-version build: str converted on the pool"
    report: dict[str, Any] = {"mb": nbytes / 1e6, "threads": threads, "chunk_bytes": CHUNK, "stable_abi": stable_abi,
                              "utf8_ms_per_gb": utf8_ms_per_gb, "results": {}}
    print(f"{len(texts)} documents, {nbytes / 1e6:.1f} MB, {args.threads} threads; medians of {args.repeats}; "
          f"CPython str -> UTF-8 alone: {utf8_ms_per_gb:.0f} ms/GB; "
          f"{route}")
    route = str_route(load(args.tokenizers[0], shared), texts, nbytes, args.repeats)
    report["str_route"] = route
    print(f"str -> UTF-8 route alone: {route['wall_ms_per_gb']:.0f} ms/GB wall, "
          f"{route['cpu_ms_per_gb']:.0f} ms/GB of CPU (every thread)")
    print(f"{'tokenizer':14s} {'input':6s} {'host ms/GB':>11s} {'prepare':>9s} {'upload':>8s} {'other':>8s} "
          f"{'device*':>9s} {'B/byte':>7s}")
    for name in args.tokenizers:
        tok = load(name, shared)
        for kind, inputs in (("str", texts), ("arrow", pa.array(texts, type=pa.string()))):
            result = measure(tok, inputs, nbytes, args.repeats)
            report["results"][f"{name}/{kind}"] = result
            print(f"{name:14s} {kind:6s} {result['host_ms_per_gb']:11.0f} {result['prepare_ms_per_gb']:9.0f} "
                  f"{result['upload_ms_per_gb']:8.0f} {result['other_host_ms_per_gb']:8.0f} "
                  f"{result['emulated_device_ms_per_gb']:9.0f} {result['device_peak_bytes_per_byte']:7.1f}")
    print("* the calling thread waiting for the emulated device (a GPU's own time); target: host <= 800 ms/GB. "
          "B/byte: device memory at the peak per byte of text")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
