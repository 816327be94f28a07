"""Single words of up to a megabyte: the CPU backend, the emulated device
pipeline and `tokenizers`, same run, identical ids asserted.

    python benches/long_words.py [--repeats 3] [--json benches/results/long_words.json]

A word of 2^14 bytes or more is merged in rounds by a block of lanes
(`gt_bpe_rounds`, cuda/gt_bpe.cuh): linear for runs of one symbol, which a
heap merge takes in n log n; on the host one thread runs the lanes (the CPU
backend and the emulator alike). Medians of --repeats; the emulator's time
is its wall time (it runs the device's work on the host).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benches"))


def words() -> dict[str, str]:
    rng = random.Random(7)
    return {
        "x * 10**6": "x" * 10**6,
        "ab * 5*10**5": "ab" * 500_000,
        "CJK, 300 kB": "".join(chr(0x4E00 + rng.randrange(2000)) for _ in range(100_000)),
        "random letters, 100 kB": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(100_000)),
    }


def ids(way: str, tok: Any, oracle: Any, word: str) -> list[int]:
    if way == "tokenizers_s":
        return list(oracle.encode_batch([word])[0].ids)
    device = "cpu" if way == "cpu_s" else "emulator"
    return list(tok.encode_batch([word], device=device).to_lists()["input_ids"][0])


def median_s(way: str, tok: Any, oracle: Any, word: str, repeats: int) -> tuple[float, list[int]]:
    times, out = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        out = ids(way, tok, oracle, word)
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", nargs="+", default=["qwen3", "llama2"])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    import host_cost
    import tokenizers

    report: dict[str, Any] = {"repeats": args.repeats, "results": {}}
    print(f"{'tokenizer':10s} {'word':24s} {'cpu s':>8s} {'emulator s':>11s} {'tokenizers s':>13s} {'ratio':>6s}")
    for name in args.tokenizers:
        tok = host_cost.load(name, Path(args.shared))._core
        oracle = tokenizers.Tokenizer.from_file(str(Path(args.shared) / "tokenizers" / name / "tokenizer.json"))
        oracle.no_padding()
        oracle.no_truncation()
        for label, word in words().items():
            row: dict[str, float] = {}
            want = None
            for way in ("tokenizers_s", "cpu_s", "emulator_s"):
                row[way], got = median_s(way, tok, oracle, word, args.repeats)
                want = got if want is None else want
                assert got == want, f"{name} {label}: {way} differs from tokenizers"
            row["cpu_vs_tokenizers"] = row["tokenizers_s"] / row["cpu_s"]
            report["results"][f"{name}/{label}"] = row
            print(f"{name:10s} {label:24s} {row['cpu_s']:8.3f} {row['emulator_s']:11.3f} "
                  f"{row['tokenizers_s']:13.3f} {row['cpu_vs_tokenizers']:5.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
