"""Which stages of the form fuzzer's random pipelines (tests/form_fuzz.py)
run on the fast engine: for each of N pipelines, `tok.plan`'s path per
stage, and on the fuzzer's texts the share of documents the fast path
encodes whole (`_core.CoreTokenizer.fast_path_share`). Prints a table for
benches/README.md and writes the rows as JSON.

    python benches/form_census.py [--pipelines 200] [--json benches/results/form_census.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import gpu_tok  # noqa: E402
from conftest import corpus_sample, edge_cases  # noqa: E402
from form_fuzz import random_tokenizer, texts_for  # noqa: E402

STAGES = ("normalize", "pre_tokenize", "model")


def census(count: int) -> list[dict]:
    training = [text[:2000] for text in corpus_sample()[:40]]
    rows = []
    for seed in range(count):
        json_text = next(j for a in range(50) if (j := random_tokenizer(seed * 1000 + a, training)) is not None)
        spec = json.loads(json_text)
        tok = gpu_tok.Tokenizer.from_str(json_text)
        plan = {row["stage"]: row for row in tok.plan}
        texts = texts_for(json_text, edge_cases()[:40], corpus_sample()[40:52])
        rows.append({
            "seed": seed,
            "model": spec["model"]["type"],
            "paths": {stage: plan[stage]["path"] for stage in STAGES},
            "reason": next((plan[s]["reason"] for s in STAGES if plan[s]["path"] == "exact"), ""),
            "fast_documents": tok._core.fast_path_share(texts, False),
            "fast_documents_offsets": tok._core.fast_path_share(texts, True),
        })
    return rows


def report(rows: list[dict]) -> str:
    lines = ["| model | pipelines | normalize fast | pre_tokenize fast | model fast | documents on the fast path "
             "(ids / offsets) |", "|---|---|---|---|---|---|"]
    for model in sorted({r["model"] for r in rows}) + ["all"]:
        group = [r for r in rows if model in ("all", r["model"])]
        share = lambda stage, group=group: (  # noqa: E731
            sum(r["paths"][stage] == "fast" for r in group) / len(group))
        docs = sum(r["fast_documents"] for r in group) / len(group)
        docs_offsets = sum(r["fast_documents_offsets"] for r in group) / len(group)
        lines.append(f"| {model} | {len(group)} | {share('normalize'):.0%} | {share('pre_tokenize'):.0%} | "
                     f"{share('model'):.0%} | {docs:.0%} / {docs_offsets:.0%} |")
    reasons = Counter(r["reason"].split(":")[0][:90] for r in rows if r["reason"])
    lines += ["", "Why the others run in the crate (first reason of each pipeline, most common first):", ""]
    lines += [f"- {n} x {reason}" for reason, n in reasons.most_common(12)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipelines", type=int, default=200)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = census(args.pipelines)
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
