"""The exact path against `tokenizers` (issue #33, item 5: "when the exact
path must run it is never slower than tokenizers' own encode_batch on the
same cores"). For each of the form census's pipelines (benches/form_census.py,
the same seeds) that leaves a stage to the crate: gpu_tok's `encode_batch`
and the crate's `encode_batch` on the same texts, interleaved, batch on all
cores; medians of the repeats and their ratio. Ids are checked equal.

    python benches/exact_path_bench.py [--pipelines 120] [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import gpu_tok  # noqa: E402
from conftest import corpus_sample, unpadded_oracle  # noqa: E402
from form_fuzz import random_tokenizer  # noqa: E402

STAGES = ("normalize", "pre_tokenize", "model")


def refused(count: int) -> list[tuple[int, str, str]]:
    """(seed, first reason, tokenizer.json) of the census's pipelines with an exact stage."""
    training = [text[:2000] for text in corpus_sample()[:40]]
    out = []
    for seed in range(count):
        json_text = next(j for a in range(50) if (j := random_tokenizer(seed * 1000 + a, training)) is not None)
        plan = {row["stage"]: row for row in gpu_tok.Tokenizer.from_str(json_text).plan}
        reason = next((plan[s]["reason"] for s in STAGES if plan[s]["path"] == "exact"), "")
        if reason:
            out.append((seed, reason, json_text))
    return out


def encodes(hf, text: str) -> bool:
    try:
        hf.encode(text)
    except BaseException:  # the crate's panics are PanicException, a BaseException
        return False
    return True


def timed(encode, texts: list[str]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    encode(texts)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelines", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    all_texts = [t for t in corpus_sample()[60:] if t][:400]
    rows = []
    for seed, reason, json_text in refused(args.pipelines):
        hf = unpadded_oracle(json_text)
        tok = gpu_tok.Tokenizer.from_str(json_text)
        # The texts the crate encodes (some random pipelines make it panic on
        # a few, gpu_tok then raising its error): the same set for both.
        texts = [t for t in all_texts if encodes(hf, t)]
        mb = sum(len(t.encode()) for t in texts) / 1e6

        def ours(batch: list[str], tok: gpu_tok.Tokenizer = tok) -> list[list[int]]:
            return tok.encode_batch(batch, padding=False, truncation=False).to_lists()["input_ids"]

        def theirs(batch: list[str], hf=hf) -> list[list[int]]:
            return [e.ids for e in hf.encode_batch(batch)]

        assert ours(texts) == theirs(texts), f"seed {seed}: ids differ"
        times: dict[str, list[tuple[float, float]]] = {"gpu_tok": [], "tokenizers": []}
        for _ in range(args.repeats):
            times["gpu_tok"].append(timed(ours, texts))
            times["tokenizers"].append(timed(theirs, texts))
        wall = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
        cpu = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
        row = {"seed": seed, "reason": reason[:100], "mb": mb,
               "gpu_tok_mb_s": mb / wall["gpu_tok"], "tokenizers_mb_s": mb / wall["tokenizers"],
               "ratio_wall": wall["tokenizers"] / wall["gpu_tok"], "ratio_cpu": cpu["tokenizers"] / cpu["gpu_tok"]}
        rows.append(row)
        print(f"seed {seed:3d}  {row['ratio_wall']:5.2f}x wall  {row['ratio_cpu']:5.2f}x per CPU-s  "
              f"{row['gpu_tok_mb_s']:6.2f} vs {row['tokenizers_mb_s']:6.2f} MB/s  {reason[:70]}", flush=True)
    ratios = [r["ratio_wall"] for r in rows]
    print(f"{len(rows)} pipelines with an exact stage, {mb:.2f} MB each (at most): wall ratio median "
          f"{statistics.median(ratios):.2f}x, min {min(ratios):.2f}x; per CPU-second median "
          f"{statistics.median(r['ratio_cpu'] for r in rows):.2f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
