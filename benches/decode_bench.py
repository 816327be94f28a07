"""Decoding speed: gpu_tok against `tokenizers` and transformers 5, same run.

    python benches/decode_bench.py [--mb 2] [--repeats 5] [--json benches/results/decode.json]

For each tokenizer, the corpus (`../shared/corpus/mixed.jsonl`, the first
--mb MB) is encoded once by `tokenizers` (with special tokens); then the
rows of ids, as Python lists of ints, are decoded by
- `tokenizers`: `Tokenizer.decode_batch(rows, skip_special_tokens=True)`;
- gpu_tok, `tokenizers`' name and semantics: `tok.decode_batch(rows)`;
- transformers: `AutoTokenizer.batch_decode(rows, skip_special_tokens=True)`
  (the tokenizer's `clean_up_tokenization_spaces`);
- gpu_tok, transformers' name and semantics: `tok.batch_decode(rows, skip_special_tokens=True)`;
taking turns, medians of --repeats runs after a warm-up. Every gpu_tok
string must equal its peer's (the run fails otherwise). Reported: million
ids per second and the ratio to the peer of the same semantics, measured
side by side. Threads: all cores (both libraries use their own pools).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))
NAMES = ["qwen3", "deepseek_v3", "gpt-oss", "claude", "llama2", "bert-minilm", "unigram-xlmr"]


def folder_of(name: str, tmp: Path) -> Path:
    """The tokenizer's folder (the XLM-R-form fixture is decompressed into `tmp`)."""
    shared = SHARED / "tokenizers" / name
    if (shared / "tokenizer.json").is_file():
        return shared
    fixture = ROOT / "tests" / "fixtures" / name
    out = tmp / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_bytes(lzma.decompress((fixture / "tokenizer.json.xz").read_bytes()))
    (out / "tokenizer_config.json").write_bytes((fixture / "tokenizer_config.json").read_bytes())
    return out


def corpus(mb: float) -> list[str]:
    out, total = [], 0
    with (SHARED / "corpus" / "mixed.jsonl").open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            out.append(text)
            total += len(text.encode("utf-8"))
            if total >= mb * 1e6:
                break
    return out


def timed(call: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def bench(name: str, texts: list[str], repeats: int, tmp: Path) -> dict[str, Any]:
    import gpu_tok
    import tokenizers
    import transformers

    folder = folder_of(name, tmp)
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf = transformers.AutoTokenizer.from_pretrained(str(folder))
    ours = gpu_tok.Tokenizer.from_pretrained(folder)
    rows = [e.ids for e in hf.encode_batch(texts)]
    ids = sum(len(r) for r in rows)
    calls = {
        "tokenizers": lambda: hf.decode_batch(rows, skip_special_tokens=True),
        "gpu_tok decode_batch": lambda: ours.decode_batch(rows),
        "transformers": lambda: tf.batch_decode(rows, skip_special_tokens=True),
        "gpu_tok batch_decode": lambda: ours.batch_decode(rows, skip_special_tokens=True),
    }
    times: dict[str, list[float]] = {k: [] for k in calls}
    results: dict[str, Any] = {}
    for run in range(repeats + 1):
        for label, call in calls.items():
            seconds, results[label] = timed(call)
            if run:
                times[label].append(seconds)
    for ours_label, peer in (("gpu_tok decode_batch", "tokenizers"), ("gpu_tok batch_decode", "transformers")):
        bad = [i for i, (a, b) in enumerate(zip(results[ours_label], results[peer], strict=True)) if a != b]
        if bad:
            raise SystemExit(f"{name}: {ours_label} differs from {peer} on {len(bad)} rows, first {bad[0]}")
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "tokenizer": name,
        "rows": len(rows),
        "ids": ids,
        "mids_per_s": {k: ids / v / 1e6 for k, v in median.items()},
        "median_s": median,
        "ratio_vs_tokenizers": median["tokenizers"] / median["gpu_tok decode_batch"],
        "ratio_vs_transformers": median["transformers"] / median["gpu_tok batch_decode"],
        "identical": True,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--names", default=",".join(NAMES))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import tempfile

    texts = corpus(args.mb)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names.split(","):
            result = bench(name, texts, args.repeats, Path(tmp))
            out.append(result)
            m = result["mids_per_s"]
            print(f"{name:14s} ids={result['ids']:>9,}  tokenizers {m['tokenizers']:6.1f}  gpu_tok "
                  f"{m['gpu_tok decode_batch']:6.1f} Mids/s = {result['ratio_vs_tokenizers']:5.1f}x   "
                  f"transformers {m['transformers']:6.1f}  gpu_tok {m['gpu_tok batch_decode']:6.1f} Mids/s = "
                  f"{result['ratio_vs_transformers']:5.1f}x", flush=True)
    report = {"corpus_mb": args.mb, "repeats": args.repeats, "cpus": os.cpu_count(),
              "load_average": os.getloadavg(), "python": sys.version.split()[0], "results": out}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
