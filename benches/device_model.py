"""Modeled H200 time of the device path, from what the emulator counts.

    python benches/device_model.py [--tokenizers qwen3 llama2 bert-minilm unigram-xlmr]
                                   [--mb 2] [--call-mb 256] [--host-json benches/results/host_cost.json]
                                   [--host-json-1thread FILE] [--json benches/results/device_model.json]
    python benches/device_model.py --remodel benches/results/device_model-before.json [--json FILE]

Each tokenizer encodes --mb of the corpus on the emulator (`device="emulator:..."`)
with `GPU_TOK_DEVICE_COUNTS=1`: per kernel launch the emulator counts the
32-byte sectors its threads read and wrote (each once per warp), atomics and
the most on one word, threads launched and those that did work, and the
longest thread's sectors (see `GtLaneCounts` in cuda/gt_lane_check.h for what
is counted and what is not: the model's tables and merge scratch are not).
The counts, scaled to a --call-mb call in 64 MiB chunks, become time per
stage (kernel) on an H200 with the constants below, each the slowest of:

- memory: sectors x 32 B / HBM bandwidth;
- same-address atomics: the most on one word, serialised in L2;
- dependent-access chains: the resident threads run a chunk's items in
  waves (a thread per item, or a grid-stride thread's items in turn), each
  chain as long as the longest thread's sectors (an upper bound), idle
  threads' waves at IDLE_CHAIN accesses;

plus a launch overhead per launch. Kernels alone: the sum. End to end: host
cost (benches/host_cost.py's ms/GB, scaled from its 2 threads to 16 cores
by the 1 -> 2 thread scaling when a 1-thread run is given) + the text over
PCIe + kernels, added up: below 256 MiB nothing overlaps (engine/offload.rs).

These are models, not measurements: benches/gpu_bench.py prints them beside
what a lent GPU measures, which calibrates them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 64 << 20
SECTOR = 32
# rust/cuda/pipeline.rs STRIDE_THREADS: the grid of the grid-stride kernels
# (per-word kernels, compact), the same for the sample as for a whole chunk:
# their threads do not scale with the text, each thread's work (the tail) does.
STRIDE_THREADS = 132 * 2048
# Dependent accesses of a thread with nothing to do: it reads the count, and
# (the per-byte word threads before issue 32's grid-stride loops) zeroes its slot.
IDLE_CHAIN = 2

# name: (value, what, public source). Estimates are marked so; a GPU run calibrates them.
CONSTANTS: dict[str, tuple[float, str, str]] = {
    "hbm_bytes_per_s": (
        4.8e12,
        "H200 HBM3e bandwidth",
        "NVIDIA H200 product page and datasheet (nvidia.com/en-us/data-center/h200): 4.8 TB/s, 141 GB",
    ),
    "sms": (
        132,
        "streaming multiprocessors (H100/H200 SXM5)",
        "NVIDIA Hopper architecture whitepaper (H100 SXM5: 132 SMs; H200 is the same GH100 die)",
    ),
    "clock_hz": (
        1.98e9,
        "SM boost clock (H100/H200 SXM5)",
        "NVIDIA H100 datasheet / Hopper whitepaper: 1,980 MHz boost",
    ),
    "same_address_atomic_s": (
        1 / 1.98e9,
        "one same-address global atomic (serialised in its L2 slice), about one per clock",
        "estimate: NVIDIA's 'CUDA Pro Tip: Optimized Filtering with Warp-Aggregated Atomics' (same-address "
        "atomics serialise); rate per clock to be calibrated on a GPU",
    ),
    "dependent_access_s": (
        480 / 1.98e9,
        "one dependent global access of a thread (the tail's unit): ~480 cycles",
        "estimate: Luo et al., 'Benchmarking and Dissecting the Nvidia Hopper GPU Architecture' (2024), "
        "global memory latency on H800 ~480 cycles",
    ),
    "resident_threads": (
        132 * 2048,
        "threads resident at once (132 SMs x 2,048): the dependent-access chains run in parallel",
        "NVIDIA Hopper tuning guide / CUDA C Programming Guide, compute capability 9.0: 2,048 resident "
        "threads per SM",
    ),
    "launch_s": (
        3e-6,
        "one kernel launch on a stream (back to back)",
        "estimate: NVIDIA blog 'Getting Started with CUDA Graphs' (launch overheads of a few microseconds)",
    ),
    "pcie_bytes_per_s": (
        50e9,
        "host to device copies, pinned (PCIe Gen5 x16)",
        "NVIDIA H200 datasheet: PCIe Gen5 128 GB/s (both ways) = 64 GB/s each way; ~50 GB/s achieved",
    ),
}

FAMILIES = {
    "qwen3": "byte-level BPE",
    "gpt-oss": "byte-level BPE",
    "llama2": "SentencePiece BPE",
    "bert-minilm": "WordPiece",
    "unigram-xlmr": "Unigram",
}


def c(name: str) -> float:
    return CONSTANTS[name][0]


def count_launches(tok: Any, texts: list[str]) -> list[tuple[str, dict[str, int]]]:
    """One emulator call over texts, counted: (kernel, counts) per launch."""
    from gpu_tok import _core

    _core.emulator_launch_counts()  # start from an empty log
    tok._core.encode_batch(texts, device=f"emulator:{CHUNK}")
    return list(_core.emulator_launch_counts())


def model(launches: list[tuple[str, dict[str, int]]], sample_bytes: int, call_bytes: int) -> dict[str, Any]:
    """Modeled time per stage (kernel name) for a call of call_bytes, from a
    sample's launches (one chunk: the sample is below CHUNK)."""
    scale = call_bytes / sample_bytes
    chunks = max(1, -(-call_bytes // CHUNK))
    per_chunk = min(call_bytes, CHUNK) / sample_bytes  # a chunk's text over the sample's
    stages: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for kernel, n in launches:
        s = stages[kernel]
        s["launches"] += chunks
        s["read_bytes"] += n["read_sectors"] * SECTOR * scale
        s["write_bytes"] += n["write_sectors"] * SECTOR * scale
        s["atomics"] += n["atomics"] * scale
        s["same_address_max"] += n["same_address_max"] * scale
        s["tail_sectors"] = max(s["tail_sectors"], n["tail"])
        if n["threads"] == STRIDE_THREADS:
            # A full grid-stride grid: the same threads for a chunk as for the
            # sample, looping over more items (the sample's took one each).
            s["threads"] += n["threads"] * chunks
            s["items"] += n["working"] * scale
            s["working"] += min(n["working"] * per_chunk, n["threads"]) * chunks
        else:
            s["threads"] += n["threads"] * scale
            s["items"] += n["working"] * scale
            s["working"] += n["working"] * scale
    return {kernel: stage_time(s, chunks) for kernel, s in stages.items()}


def stage_time(s: dict[str, float], chunks: int) -> dict[str, Any]:
    """One stage's modeled time from its counts scaled to the call (s: the
    sums model() makes, or a saved run's stage, to model it again)."""
    memory_ms = (s["read_bytes"] + s["write_bytes"]) / c("hbm_bytes_per_s") * 1e3
    atomic_ms = s["same_address_max"] * c("same_address_atomic_s") * 1e3
    # Dependent accesses: the resident threads run a chunk's items in waves
    # (a thread per item, or a grid-stride thread's items one after the
    # other), each chain taken as long as the longest seen (an upper bound),
    # and the idle threads' waves at IDLE_CHAIN accesses (read the count,
    # maybe write a zero).
    resident = c("resident_threads")
    items = s.get("items", s["working"])  # (a run saved before "items": its working threads)
    idle = max(0.0, s["threads"] - items)
    waves = -(-items / chunks // resident)
    idle_waves = -(-idle / chunks // resident)
    chain = max(1, waves) * s["tail_sectors"] + idle_waves * IDLE_CHAIN
    tail_ms = chain * c("dependent_access_s") * 1e3 * chunks
    launch_ms = s["launches"] * c("launch_s") * 1e3
    bounds = {"memory": memory_ms, "same-address atomics": atomic_ms, "tail": tail_ms}
    bound = max(bounds, key=lambda k: bounds[k])
    counts = ("launches", "read_bytes", "write_bytes", "atomics", "same_address_max", "threads", "working",
              "items", "tail_sectors")
    return {
        **{k: round(s[k], 3) for k in counts if k in s},
        "idle_threads": round(1 - s["working"] / s["threads"], 3) if s["threads"] else 0.0,
        "waves": waves,
        "idle_waves": idle_waves,
        "memory_ms": round(memory_ms, 3),
        "atomic_ms": round(atomic_ms, 3),
        "tail_ms": round(tail_ms, 3),
        "launch_ms": round(launch_ms, 3),
        "bound": bound,
        "ms": round(bounds[bound] + launch_ms, 3),
    }


def host_ms_per_gb(path: str | None, path_1thread: str | None, name: str, source: str) -> dict[str, Any] | None:
    """host_cost.py's ms/GB for name/source, and scaled to 16 cores when a 1-thread run is given."""
    if not path or not Path(path).is_file():
        return None
    two = json.loads(Path(path).read_text())
    entry = two["results"].get(f"{name}/{source}")
    if entry is None:
        return None
    ms = entry["host_ms_per_gb"]
    out: dict[str, Any] = {"threads": two["threads"], "ms_per_gb": ms, "ms_per_gb_16": None}
    if path_1thread and Path(path_1thread).is_file():
        one = json.loads(Path(path_1thread).read_text())["results"].get(f"{name}/{source}")
        if one is not None:
            speedup = one["host_ms_per_gb"] / ms  # 1 -> 2 threads
            # Amdahl from the measured 2-thread speedup: serial fraction f = 2 / speedup - 1.
            f = min(1.0, max(0.0, 2 / speedup - 1))
            out["speedup_1_to_2"] = round(speedup, 3)
            out["ms_per_gb_16"] = one["host_ms_per_gb"] * (f + (1 - f) / 16)
    return out


def totals(entry: dict[str, Any], call_bytes: int) -> None:
    """A tokenizer's kernel and end-to-end totals from its stages (in place)."""
    stages = entry["stages"]
    kernels_ms = sum(s["ms"] for s in stages.values())
    bytes_moved = sum(s["read_bytes"] + s["write_bytes"] for s in stages.values())
    entry["kernels_ms"] = round(kernels_ms, 3)
    entry["kernels_gb_per_s"] = round(call_bytes / kernels_ms / 1e6, 2)
    entry["device_bytes_per_text_byte"] = round(bytes_moved / call_bytes, 2)
    for e in entry["end_to_end"].values():
        total = e["host_ms"] + entry["pcie_ms"] + kernels_ms  # nothing overlaps below 256 MiB
        e["ms"] = round(total, 3)
        e["gb_per_s"] = round(call_bytes / total / 1e6, 2)


def remodel(path: Path, out: str | None) -> int:
    """A saved run's counts through this model (for a before/after with the same model)."""
    results = json.loads(path.read_text())
    call_bytes = results["call_bytes"]
    chunks = max(1, -(-call_bytes // CHUNK))
    for name, entry in results["tokenizers"].items():
        entry["stages"] = {k: stage_time(s, chunks) for k, s in entry["stages"].items()}
        totals(entry, call_bytes)
        print(f"{name:14} kernels {entry['kernels_ms']:8.2f} ms = {entry['kernels_gb_per_s']:6.1f} GB/s")
    if out:
        Path(out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", nargs="+", default=["qwen3", "llama2", "bert-minilm", "unigram-xlmr"])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--mb", type=float, default=2.0, help="text counted on the emulator (below 64 MiB)")
    parser.add_argument("--call-mb", type=float, default=256.0, help="the modeled call's size")
    parser.add_argument("--host-json", default=str(ROOT / "benches" / "results" / "host_cost.json"))
    parser.add_argument("--host-json-1thread")
    parser.add_argument("--json")
    parser.add_argument("--remodel", help="a saved --json run: its stages modeled again with this script's model")
    args = parser.parse_args()
    if args.remodel:
        return remodel(Path(args.remodel), args.json)
    os.environ["GPU_TOK_DEVICE_COUNTS"] = "1"  # before the emulator's first use

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from host_cost import corpus, load

    shared = Path(args.shared)
    texts, nbytes = corpus(shared, args.mb)
    call_bytes = int(args.call_mb * 1e6)
    results: dict[str, Any] = {
        "constants": {k: {"value": v, "what": w, "source": s} for k, (v, w, s) in CONSTANTS.items()},
        "sample_bytes": nbytes,
        "call_bytes": call_bytes,
        "tokenizers": {},
    }
    for name in args.tokenizers:
        tok = load(name, shared)
        stages = model(count_launches(tok, [str(t) for t in texts]), nbytes, call_bytes)
        pcie_ms = call_bytes / c("pcie_bytes_per_s") * 1e3
        entry: dict[str, Any] = {
            "family": FAMILIES.get(name, "?"),
            "stages": stages,
            "pcie_ms": round(pcie_ms, 3),
            "end_to_end": {},
        }
        totals(entry, call_bytes)
        kernels_ms = entry["kernels_ms"]
        for source in ("str", "arrow"):
            host = host_ms_per_gb(args.host_json, args.host_json_1thread, name, source)
            if host is None:
                continue
            per_gb = host["ms_per_gb_16"] or host["ms_per_gb"]
            entry["end_to_end"][source] = {
                "host": host,
                "host_ms": round(per_gb * call_bytes / 1e9, 3),
                "host_cores": 16 if host["ms_per_gb_16"] else host["threads"],
            }
        totals(entry, call_bytes)
        results["tokenizers"][name] = entry
        top = sorted(stages.items(), key=lambda kv: -kv[1]["ms"])[:4]
        print(
            f"{name:14} {entry['family']:18} kernels {kernels_ms:8.2f} ms = {entry['kernels_gb_per_s']:6.1f} GB/s, "
            f"{entry['device_bytes_per_text_byte']:5.1f} B device traffic per text byte"
        )
        for kernel, s in top:
            print(
                f"    {kernel:22} {s['ms']:8.2f} ms ({s['bound']}; idle threads {s['idle_threads']:.0%}, "
                f"same-address max {s['same_address_max']:.0f})"
            )
        for source, e in entry["end_to_end"].items():
            print(
                f"    end to end from {source:5}: {e['gb_per_s']:6.2f} GB/s "
                f"(host {e['host_ms']:.0f} ms on {e['host_cores']} cores)"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
