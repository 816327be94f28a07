"""Thread soak: many threads share one Tokenizer and call it with mixed options
for a while; every result is checked against `tokenizers` (the oracle).

    python benches/soak.py [--threads 32] [--seconds 60] [--json out.json]

Prints (and writes) a JSON summary: threads, seconds, calls, documents,
mismatches, errors, and the process's resident memory before the threads
start and at each fifth of the run (flat after warm-up: nothing leaks). The
test suite runs it briefly (tests/test_reliability.py); docs/RELIABILITY.md
quotes longer runs. Exit code 1 when anything mismatched or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from typing import Any

import gpu_tok
import tokenizers
from gpu_tok import _data

# (name, gpu_tok call arguments, oracle truncation, oracle padding, pairs?)
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any] | None, bool]] = [
    ("ragged", {}, None, None, False),
    ("longest-64", dict(padding=True, truncation=True, max_length=64), dict(max_length=64), {}, False),
    ("left-max_length-128", dict(padding="max_length", truncation=True, max_length=128, padding_side="left"),
     dict(max_length=128), dict(length=128, direction="left"), False),
    ("offsets-32", dict(truncation=True, max_length=32, return_offsets_mapping=True), dict(max_length=32), None,
     False),
    ("no-specials", dict(add_special_tokens=False, padding=True), None, {}, False),
    ("pairs-96", dict(padding=True, truncation="longest_first", max_length=96), dict(max_length=96), {}, True),
]


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return 0.0


def _expected(texts: list[str], json_text: str, pad_id: int, pad_token: str) -> list[dict[str, list]]:
    """For each case, every document's fields as the oracle computes them."""
    out = []
    pairs = texts[1:] + texts[:1]
    hf = tokenizers.Tokenizer.from_str(json_text)
    for _, args, truncation, padding, with_pairs in CASES:
        hf.no_truncation()
        hf.no_padding()
        if truncation is not None:
            hf.enable_truncation(**truncation)
        if padding is not None:
            hf.enable_padding(pad_id=pad_id, pad_token=pad_token, **padding)
        inputs = list(zip(texts, pairs, strict=True)) if with_pairs else texts
        encodings = hf.encode_batch(inputs, add_special_tokens=args.get("add_special_tokens", True))
        fields = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings]}
        if args.get("return_offsets_mapping"):
            fields["offset_mapping"] = [[tuple(o) for o in e.offsets] for e in encodings]
        out.append(fields)
    return out


def soak(threads: int = 8, seconds: float = 5.0, texts: list[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """Runs the soak and returns its summary (see the module docs)."""
    tok = gpu_tok.Tokenizer.default()
    json_text = _data.default_tokenizer_json()
    texts = [t[:3000] for t in (texts or [d["text"] for d in _data.sample_corpus()])]
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    pad_token = tok.id_to_token(pad_id) or ""
    expected = _expected(texts, json_text, pad_id, pad_token)
    pairs = texts[1:] + texts[:1]
    counts = {"calls": 0, "documents": 0, "mismatches": 0, "errors": 0}
    first_problem: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    rss_before = rss_mb()

    def worker(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        calls = documents = mismatches = errors = 0
        while time.monotonic() < deadline:
            case = rng.randrange(len(CASES))
            name, args, _, _, with_pairs = CASES[case]
            start = rng.randrange(len(texts))
            end = min(len(texts), start + rng.randint(1, 64))
            try:
                got = tok(texts[start:end], pairs[start:end] if with_pairs else None, pad_token_id=pad_id,
                          device="cpu", **args)
                for field, rows in expected[case].items():
                    want = rows[start:end]
                    # Padding to the longest row depends on the batch: compare each row unpadded.
                    have = [list(map(tuple, r)) if field == "offset_mapping" else r for r in got[field]]
                    if args.get("padding") is True:
                        have = _unpad(have, got["attention_mask"])
                        want = _unpad(want, expected[case]["attention_mask"][start:end])
                    if have != want:
                        mismatches += 1
                        if not first_problem:
                            first_problem.append(f"{name}: {field} differs for documents {start}..{end}")
                        break
            except Exception as err:  # noqa: BLE001 - counted and reported, never expected
                errors += 1
                if not first_problem:
                    first_problem.append(f"{name}: {type(err).__name__}: {err}")
            calls += 1
            documents += end - start
        with lock:
            for key, value in (("calls", calls), ("documents", documents), ("mismatches", mismatches),
                               ("errors", errors)):
                counts[key] += value

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    began = time.monotonic()
    for t in pool:
        t.start()
    # Resident memory at each fifth of the run: flat after warm-up means no leak.
    samples = []
    for k in range(1, 6):
        time.sleep(max(0.0, began + seconds * k / 5 - time.monotonic()))
        samples.append(round(rss_mb()))
    for t in pool:
        t.join()
    return {"threads": threads, "seconds": round(time.monotonic() - began, 1), **counts,
            "cases": [c[0] for c in CASES], "rss_mb_before": round(rss_before), "rss_mb_during": samples,
            "first_problem": first_problem[0] if first_problem else None}


def _unpad(rows: list, masks: list) -> list:
    """Rows without their padding (the attention mask says which tokens are real)."""
    return [[v for v, m in zip(row, mask, strict=True) if m] for row, mask in zip(rows, masks, strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    summary = soak(args.threads, args.seconds)
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 1 if summary["mismatches"] or summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
