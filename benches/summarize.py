"""Prints the markdown table of benches/README.md from benches/results/*.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
ORDER = ["qwen3", "cl100k", "deepseek_v3", "gpt-oss", "claude", "llama2", "bert-minilm", "qwen3-1threads"]


def cell(engines: dict, name: str, parity: bool = False) -> str:
    e = engines.get(name)
    if not e or e["status"] != "ok":
        return "skipped"
    text = f"{e['results'][0]['mb_per_s']:.2f}"
    if parity and e["parity"]:
        text += f" ({100 * e['parity']['identical'] / e['parity']['total']:.1f}%)"
    return text


def main() -> int:
    print("| tokenizer | threads | gpu_tok MB/s | tokenizers MB/s | ratio | tokenizers[encode] | tiktoken "
          "| tokie (parity) | kitoken (parity) | gpu_tok parity | gpu_tok peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in ORDER:
        path = RESULTS / f"{name}.json"
        if not path.is_file():
            continue
        report = json.loads(path.read_text())
        engines = {e["name"]: e for e in report["engines"]}
        ours = engines["gpu_tok[cpu]"]
        r, p = ours["results"][0], ours["parity"]
        print(f"| {name.replace('-1threads', '')} | {report['machine']['threads']} | **{r['mb_per_s']:.2f}** "
              f"| {cell(engines, 'tokenizers')} | {r['speedup_vs_tokenizers']:.1f}x "
              f"| {cell(engines, 'tokenizers[encode]')} | {cell(engines, 'tiktoken')} "
              f"| {cell(engines, 'tokie', True)} | {cell(engines, 'kitoken', True)} "
              f"| {p['identical']}/{p['total']} | {ours['peak_rss_mb']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
