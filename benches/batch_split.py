"""How a batch call's documents split over 2 workers, from measured costs (batch9).

Each document of the fresh sets is encoded once on one thread (its own call,
`time.thread_time`, so other jobs on the machine do not count), then two
schedules are played over those costs: rayon's split of `0..n` as main had
it (halves by count; a trace of the pool showed each worker taking exactly
n/2 documents in 7 of 8 calls: the quarter a worker has started is not
stolen) and largest first from a shared counter (`Pool::map_by_size`).
Printed per set: the speedup over one thread each schedule allows (work /
longest worker), 2.00 being perfect.

    GPU_TOK_NUM_THREADS=1 python benches/batch_split.py --tok gpt-oss,qwen3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fresh_engine_bench import SHARED, corpus_sets, cut_by_bytes, tokenizer_json  # noqa: E402


def headline_sets(mb: float = 12, count: int = 5) -> list[list[bytes]]:
    """run_bench.py's sets: the first `mb` MB in corpus order, cut by bytes."""
    docs, total = [], 0
    for line in (SHARED / "corpus" / "mixed.jsonl").open(encoding="utf-8"):
        if total >= mb * 1e6:
            break
        docs.append(json.loads(line)["text"].encode())
        total += len(docs[-1])
    return cut_by_bytes(docs, count)


def halves(costs: list[float]) -> float:
    n = len(costs)
    return max(sum(costs[: n // 2]), sum(costs[n // 2:]))


def largest_first(costs: list[float], sizes: list[int], workers: int = 2) -> float:
    loads = [0.0] * workers
    for i in sorted(range(len(costs)), key=lambda i: -sizes[i]):
        loads[loads.index(min(loads))] += costs[i]
    return max(loads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tok", default="gpt-oss,qwen3")
    args = parser.parse_args()
    os.environ.setdefault("GPU_TOK_NUM_THREADS", "1")
    import gpu_tok

    for name in args.tok.split(","):
        tok = gpu_tok.Tokenizer.from_str(tokenizer_json(name))
        tok.encode_batch(["warm up"], add_special_tokens=False, device="cpu")
        groups = {"fresh_engine_bench (8 shuffled sets)": corpus_sets(SHARED / "corpus" / "mixed.jsonl", 8, 36),
                  "run_bench (5 sets, corpus order)": headline_sets()}
        for label, sets in groups.items():
            split, lpt = [], []
            for docs in sets:
                costs = []
                for doc in docs:
                    text = doc.decode()
                    start = time.thread_time()
                    tok.encode_batch([text], add_special_tokens=False, device="cpu")
                    costs.append(time.thread_time() - start)
                work = sum(costs)
                split.append(work / halves(costs))
                lpt.append(work / largest_first(costs, [len(d) for d in docs]))
            print(f"{name:8s} {label}: halves by count {statistics.median(split):.2f} (worst {min(split):.2f}, "
                  f"{' '.join(f'{x:.2f}' for x in split)}); largest first {statistics.median(lpt):.2f} "
                  f"(worst {min(lpt):.2f})", flush=True)


if __name__ == "__main__":
    main()
