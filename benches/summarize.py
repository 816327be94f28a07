"""Prints the fresh-text tables of benches/README.md from the results of
benches/run_bench.py (<tokenizer>.json: batch, <tokenizer>-1thread.json).

    python benches/summarize.py [--results DIR] [--tokenizers default,qwen3,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ORDER = ["default", "qwen3", "deepseek_v3", "gpt-oss", "claude", "cl100k", "llama2", "bert-minilm", "unigram"]
PEER_COLUMNS = ["tokenizers", "gigatoken", "fastokens", "tokie", "quicktok", "toktok", "tiktoken", "kitoken",
                "flash-tokenizer", "sentencepiece"]
MODES = {"batch": "", "1 thread": "-1thread"}


def load(folder: Path, name: str, suffix: str) -> dict[str, Any] | None:
    path = folder / f"{name}{suffix}.json"
    if not path.is_file():
        return None
    report = json.loads(path.read_text())
    return report if report.get("schema") == "gpu_tok.bench/2" else None


def parity(engine: dict[str, Any]) -> str:
    p = engine.get("parity")
    if not p or not p["total"]:
        return "n/a"
    share = 100 * p["identical"] / p["total"]
    return "100%" if p["identical"] == p["total"] else f"{min(share, 99.9):.1f}%"


def peer_cell(engine: dict[str, Any] | None) -> str:
    if engine is None:
        return ""
    if engine["status"] == "skipped":
        return "not installed" if "not installed" in engine["reason"] else "cannot load"
    if engine["status"] != "ok" or not engine["results"]:
        return "failed"
    return f"{engine['results'][0]['mb_per_s']:.1f} ({parity(engine)})"


def ours(report: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    engine = next(e for e in report["engines"] if e["name"] == "gpu_tok[cpu]")
    return engine, engine["results"][0]


def headline(folder: Path, names: list[str]) -> list[str]:
    rows = ["| tokenizer | gpu_tok batch | fastest exact peer | ratio | gpu_tok 1 thread | fastest exact peer "
            "| ratio | gpu_tok repeated text (batch / 1 thread) | gpu_tok parity |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        cells, repeated, parities = [], [], []
        for suffix in MODES.values():
            report = load(folder, name, suffix)
            if report is None:
                cells += ["–", "–", "–"]
                repeated.append("–")
                continue
            engine, result = ours(report)
            best = result.get("vs_fastest_exact_peer")
            cells.append(f"{result['mb_per_s']:.1f}")
            if best and best["ratio"]:
                cells += [f"{best['peer']} {best['mb_per_s']:.1f}", f"**{best['ratio']:.2f}x**"]
            else:
                cells += ["none exact", "–"]
            rep = result.get("repeated")
            repeated.append(f"{rep['mb_per_s']:.1f}" if rep and rep.get("mb_per_s") else "–")
            parities.append(f"{engine['parity']['identical']}/{engine['parity']['total']}"
                            if engine["parity"] else "n/a")
        rows.append(f"| {name} | {' | '.join(cells)} | {' / '.join(repeated)} | {', '.join(parities)} |")
    return rows


def peers_table(folder: Path, names: list[str]) -> list[str]:
    rows = ["| tokenizer | mode | gpu_tok | " + " | ".join(PEER_COLUMNS) + " |",
            "|---|---|---" + "|---" * len(PEER_COLUMNS) + "|"]
    for name in names:
        for mode, suffix in MODES.items():
            report = load(folder, name, suffix)
            if report is None:
                continue
            engines = {e["name"]: e for e in report["engines"]}
            cells = [peer_cell(engines.get("gpu_tok[cpu]"))] + [peer_cell(engines.get(p)) for p in PEER_COLUMNS]
            rows.append(f"| {name} | {mode} | " + " | ".join(cells) + " |")
    return rows


def tables(folder: Path, names: list[str] | None = None) -> str:
    names = [n for n in (names or ORDER) if load(folder, n, "") or load(folder, n, "-1thread")]
    return "\n".join(["Fresh text, MB/s of UTF-8 input (ratio: median over the sets of gpu_tok's speed / the peer's)",
                      "", *headline(folder, names), "",
                      "Every peer, fresh text, MB/s (parity: documents with ids identical to tokenizers')", "",
                      *peers_table(folder, names)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--tokenizers", default=",".join(ORDER))
    args = parser.parse_args()
    print(tables(args.results, args.tokenizers.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
