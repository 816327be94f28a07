"""Pre-tokenizer speed alone, per pattern and engine, one thread, same run:
the compiled scanner (cuda/gt_regex.cuh, host build), the hand-written
scanner where the pattern has one (cuda/gt_pretok.cuh), and Oniguruma (the
crate's SysRegex, as the fast path ran it before). Engines alternate within
each repeat; MB/s are medians. Every engine must find the same words.

    python benches/pretokenize_bench.py [--mb 8] [--repeats 7] [--json benches/results/pretokenize.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from gpu_tok import _core, _data

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN = CL100K.replace(r"\p{N}{1,3}", r"\p{N}")
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DS_WORDS = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
            "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CL100K_TIKTOKEN = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
                   r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s")


def split(pattern: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


# (name, pre-tokenizer, has a hand-written scanner)
CASES = [
    ("gpt2 / p50k", split(GPT2), True),
    ("cl100k / llama3", split(CL100K), True),
    ("qwen2", split(QWEN), True),
    ("o200k / gpt-oss", split(O200K), True),
    ("deepseek-v3 digits", split(r"\p{N}{1,3}"), True),
    ("deepseek-v3 cjk", split("[一-龥\u3040-ゟ゠-ヿ]+"), True),
    ("deepseek-v3 words", split(DS_WORDS), True),
    ("deepseek-v3 chain", {"type": "Sequence", "pretokenizers": [
        split(r"\p{N}{1,3}"), split("[一-龥\u3040-ゟ゠-ヿ]+"), split(DS_WORDS)]}, True),
    ("tekken", split(TEKKEN), False),
    ("cl100k (tiktoken, possessive)", split(CL100K_TIKTOKEN), False),
    ("bloom", split(r" ?[^(\s|[.,!?…。，、।۔،])]+"), False),
]


def corpus(mb: float) -> list[str]:
    shared = Path(os.environ.get("GPU_TOK_SHARED", Path(__file__).resolve().parents[1].parent / "shared"))
    path = shared / "corpus" / "mixed.jsonl"
    if path.exists():
        with path.open(encoding="utf-8") as f:
            docs = [json.loads(line)["text"] for line in f]
        source = str(path)
    else:
        docs = [doc["text"] for doc in _data.sample_corpus()]
        source = "embedded sample"
    out, size = [], 0
    while size < mb * 1e6:
        for doc in docs:
            out.append(doc)
            size += len(doc.encode())
            if size >= mb * 1e6:
                break
    print(f"{size / 1e6:.1f} MB from {source}", file=sys.stderr)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "pretokenize.json")
    args = ap.parse_args()
    texts = corpus(args.mb)
    size = sum(len(t.encode()) for t in texts)
    rows = []
    for name, spec, has_scanner in CASES:
        spec_json = json.dumps(spec)
        engines = (["scanner"] if has_scanner else []) + ["compiled", "oniguruma"]
        seconds: dict[str, list[float]] = {e: [] for e in engines}
        words: dict[str, int] = {}
        for _ in range(args.repeats):
            for engine in engines:
                count, took = _core.time_split(spec_json, engine, texts, 1)
                seconds[engine] += took
                words[engine] = count
        if len(set(words.values())) != 1:
            raise SystemExit(f"{name}: engines disagree on the word count: {words}")
        mbps = {e: size / 1e6 / statistics.median(s) for e, s in seconds.items()}
        row = {"pattern": name, "words": words["compiled"], "mb_per_s": {e: round(v, 1) for e, v in mbps.items()},
               "compiled_vs_oniguruma": round(mbps["compiled"] / mbps["oniguruma"], 2)}
        if has_scanner:
            row["compiled_vs_scanner"] = round(mbps["compiled"] / mbps["scanner"], 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    result = {"bytes": size, "repeats": args.repeats, "threads": 1, "statistic": "median", "rows": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    for row in rows:
        cells = " ".join(f"{e} {v:7.1f}" for e, v in row["mb_per_s"].items())
        print(f"{row['pattern']:32} {cells}")


if __name__ == "__main__":
    main()
