"""Offsets as Python lists (transformers' default output) on held-out chat
text: gpu_tok against `tokenizers` and transformers 5, same run.

    python benches/offsets_bench.py [--sets 5] [--docs 256] [--json benches/results/offsets_lists.json]

Chat text: conversations made of corpus documents (`../shared/corpus/mixed.jsonl`:
a user turn and an assistant turn, each a document cut to 1,500 characters)
rendered by each tokenizer's own chat template (gpu_tok's
`apply_chat_template(tokenize=False)`), so rows hold the template's added
tokens. Held out: --sets disjoint sets of --docs conversations, each encoded
once per library as new `str` objects (no word cache has seen them),
libraries taking turns on each set, each call after a `gc.collect()` with no
earlier result alive (checked for equality after the timed calls); medians
over the sets. Timed:
- `tokenizers`: `[e.offsets for e in hf.encode_batch(texts)]`;
- gpu_tok: `tok(texts, return_offsets_mapping=True)` (lists of ids, masks and
  (start, end) tuples, as transformers returns them);
- gpu_tok's engine alone: `tok.encode_batch(texts, return_offsets=True)`
  (tensors, no Python objects per token);
- transformers: `AutoTokenizer(texts, return_offsets_mapping=True)`.
Every gpu_tok offset list must equal `tokenizers'` (the run fails otherwise).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))
NAMES = ["qwen3", "deepseek_v3"]


def conversations(count: int) -> list[list[dict[str, str]]]:
    docs = []
    with (SHARED / "corpus" / "mixed.jsonl").open(encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"][:1500])
            if len(docs) >= 2 * count:
                break
    return [[{"role": "user", "content": docs[2 * i]}, {"role": "assistant", "content": docs[2 * i + 1]}]
            for i in range(count)]


def fresh(texts: list[str]) -> list[str]:
    return [(t + "\n")[:-1] for t in texts]


def bench(name: str, sets: int, docs: int) -> dict[str, Any]:
    import gpu_tok
    import tokenizers
    import transformers

    folder = SHARED / "tokenizers" / name
    ours = gpu_tok.Tokenizer.from_pretrained(folder)
    # The engine alone runs on another instance: each thread's word cache belongs to
    # one tokenizer and starts empty when the other one calls, so neither gpu_tok call
    # finds the words of a set the other has just encoded (both see fresh text).
    engine = gpu_tok.Tokenizer.from_pretrained(folder)
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf = transformers.AutoTokenizer.from_pretrained(str(folder))
    chats = conversations(sets * docs)
    texts = ours.apply_chat_template(chats, tokenize=False)
    calls = {
        "tokenizers": lambda t: [e.offsets for e in hf.encode_batch(t)],
        "gpu_tok": lambda t: ours(t, return_offsets_mapping=True),
        "gpu_tok engine": lambda t: engine.encode_batch(t, return_offsets=True, padding=False, truncation=False),
        "transformers": lambda t: tf(t, return_offsets_mapping=True),
    }
    seconds: dict[str, list[float]] = {k: [] for k in calls}
    nbytes = []
    for s in range(sets):
        part = texts[s * docs:(s + 1) * docs]
        nbytes.append(sum(len(t.encode("utf-8")) for t in part))
        for label, call in calls.items():
            batch = fresh(part)
            # Each call starts from the same collector state, no earlier result alive: a
            # full collection set off by another library's objects is not this one's cost.
            gc.collect()
            start = time.perf_counter()
            result = call(batch)
            seconds[label].append(time.perf_counter() - start)
            del result
        if calls["gpu_tok"](part)["offset_mapping"] != calls["tokenizers"](part):
            raise SystemExit(f"{name}: gpu_tok's offsets differ from tokenizers' on set {s}")
    mb_s = {k: statistics.median(b / t / 1e6 for b, t in zip(nbytes, v, strict=True)) for k, v in seconds.items()}
    ratio = {k: statistics.median(p / o for p, o in zip(seconds["tokenizers"], v, strict=True))
             for k, v in seconds.items()}
    return {"tokenizer": name, "sets": sets, "docs_per_set": docs, "mb_per_set": statistics.median(nbytes) / 1e6,
            "mb_per_s": mb_s, "ratio_vs_tokenizers": ratio,
            "gpu_tok_vs_transformers": statistics.median(
                t / o for t, o in zip(seconds["transformers"], seconds["gpu_tok"], strict=True)),
            "identical_offsets": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--names", default=",".join(NAMES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out = []
    for name in args.names.split(","):
        result = bench(name, args.sets, args.docs)
        out.append(result)
        r, m = result["ratio_vs_tokenizers"], result["mb_per_s"]
        print(f"{name:12s} tokenizers {m['tokenizers']:6.2f} MB/s | gpu_tok lists {m['gpu_tok']:6.2f} MB/s = "
              f"{r['gpu_tok']:5.1f}x | engine alone {m['gpu_tok engine']:6.2f} MB/s = {r['gpu_tok engine']:5.1f}x | "
              f"transformers {m['transformers']:6.2f} MB/s (gpu_tok {result['gpu_tok_vs_transformers']:.1f}x)",
              flush=True)
    report = {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "python": sys.version.split()[0],
              "results": out}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
