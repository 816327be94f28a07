"""The list-of-str -> UTF-8 route alone, per storage width, against CPython's
encoder in the same process: milliseconds per GB of UTF-8, wall and CPU.

    python benches/str_route_bench.py [--threads 1] [--mb 16] [--repeats 9] [--json out.json]

The corpus's documents (repeated to --mb) are grouped by the width CPython
stores them in (ASCII, Latin-1, two bytes, four bytes per code point). Each
repeat times, interleaved on fresh str objects (no cached UTF-8): CPython's
`str.encode("utf-8")` of every document (what the abi3 build's route costs,
one thread, the GIL held) and the core's route (`host_cost.str_route`: a call
that converts every text, then fails on a lone surrogate before tokenizing).
CPU time is the process's, every thread (the pool's spinning included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_cost import ROOT, corpus, load  # noqa: E402


def width(text: str) -> str:
    if text.isascii():
        return "ascii"
    top = max(map(ord, text))
    return "latin1" if top < 0x100 else "two-byte" if top < 0x10000 else "four-byte"


def timed(work: Any, *args: Any) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    work(*args)
    return time.perf_counter() - start, time.process_time() - cpu


def cpython_encode(batch: list[str]) -> None:
    for text in batch:
        text.encode("utf-8")


def core_route(tok: Any, batch: list[str], pairs: list[str]) -> None:
    import gpu_tok

    try:
        tok._core.encode_batch(batch, pairs, device="cpu")
    except gpu_tok.InvalidInputError:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--mb", type=float, default=16.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--json")
    args = parser.parse_args()
    os.environ["GPU_TOK_NUM_THREADS"] = str(args.threads)  # read when the pool is first built
    import gpu_tok

    texts, _ = corpus(Path(args.shared), args.mb)
    groups: dict[str, list[str]] = {"all": texts}
    for text in texts:
        groups.setdefault(width(text), []).append(text)
    tok = load("qwen3", Path(args.shared))
    stable_abi = gpu_tok.info(probe_cuda=False).get("stable_abi", True)
    report: dict[str, Any] = {"threads": gpu_tok._core.num_threads(), "stable_abi": stable_abi, "groups": {}}
    print(f"{report['threads']} threads, stable_abi={stable_abi}; medians of {args.repeats}, ms per GB of UTF-8")
    print(f"{'width':10s} {'docs':>5s} {'MB':>6s} {'CPython wall':>12s} {'CPU':>6s} {'route wall':>10s} {'CPU':>6s}")
    for name, group in groups.items():
        nbytes = sum(len(t.encode("utf-8")) for t in group)
        pairs = ["x"] * (len(group) - 1) + ["\ud800"]
        runs: dict[str, list[tuple[float, float]]] = {"cpython": [], "route": []}

        for i in range(args.repeats + 1):
            batch = [(t + "\n")[:-1] for t in group]
            cpython = timed(cpython_encode, batch)
            batch = [(t + "\n")[:-1] for t in group]
            ours = timed(core_route, tok, batch, pairs)
            if i:  # the first round warms up
                runs["cpython"].append(cpython)
                runs["route"].append(ours)
        per_gb = 1e3 * 1e9 / nbytes
        row = {key: {"wall_ms_per_gb": statistics.median(r[0] for r in rs) * per_gb,
                     "cpu_ms_per_gb": statistics.median(r[1] for r in rs) * per_gb} for key, rs in runs.items()}
        row |= {"docs": len(group), "mb": nbytes / 1e6}
        report["groups"][name] = row
        print(f"{name:10s} {len(group):5d} {nbytes / 1e6:6.1f} {row['cpython']['wall_ms_per_gb']:12.0f} "
              f"{row['cpython']['cpu_ms_per_gb']:6.0f} {row['route']['wall_ms_per_gb']:10.0f} "
              f"{row['route']['cpu_ms_per_gb']:6.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
