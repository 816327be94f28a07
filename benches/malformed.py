"""Malformed tokenizer.json files, made from a real one: cut short, keys
removed, values of the wrong type, garbage bytes, deep nesting, huge numbers.
Loading any of them must raise a typed gpu_tok error, never crash or hang.

    python benches/malformed.py OUT_DIR [--count 80] [--seed 0]

writes OUT_DIR/NNN-<mutation>.json; tests/test_reliability.py loads a bounded
set of them in CI (more with GPU_TOK_MALFORMED_COUNT).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

WRONG_VALUES: list[Any] = [None, 0, -1, 2**64, 1.5, "", "x", [], {}, [1, 2], {"a": 1}, True]
SECTIONS = ["model", "pre_tokenizer", "normalizer", "post_processor", "decoder", "added_tokens", "truncation",
            "padding"]


def _paths(value: Any, prefix: tuple = (), depth: int = 0) -> Iterator[tuple]:
    """Paths to the values of a JSON document (not inside the big vocab/merges)."""
    yield prefix
    if depth > 4:
        return
    if isinstance(value, dict):
        for key, child in value.items():
            if key not in ("vocab", "merges"):
                yield from _paths(child, (*prefix, key), depth + 1)
    elif isinstance(value, list):
        for i, child in enumerate(value[:3]):
            yield from _paths(child, (*prefix, i), depth + 1)


def _set(doc: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


def _delete(doc: Any, path: tuple) -> None:
    for key in path[:-1]:
        doc = doc[key]
    del doc[path[-1]]


def mutants(json_text: str, count: int, seed: int = 0) -> Iterator[tuple[str, bytes]]:
    """`count` malformed variants of `json_text` as (mutation name, file bytes)."""
    rng = random.Random(seed)
    original = json.loads(json_text)
    paths = [p for p in _paths(original) if p]
    data = json_text.encode("utf-8")
    fixed = [
        ("empty", b""),
        ("not-json", b"\x00\xff garbage \xfe"),
        ("not-utf8", data[:100] + b"\xff\xfe" + data[100:]),
        ("a-list", b"[1, 2, 3]"),
        ("no-model", json.dumps({k: v for k, v in original.items() if k != "model"}).encode()),
        ("deep-nesting", b"[" * 100_000 + b"]" * 100_000),
        ("huge-number", json_text.replace('"version"', '"version_"', 1).replace("{", '{"n": 1e999999, ', 1).encode()),
    ]
    yield from fixed[:count]
    for _ in range(count - len(fixed)):
        kind = rng.choice(["truncate", "delete", "wrong-type", "wrong-section-type", "bit-flip"])
        doc = json.loads(json_text)
        if kind == "truncate":
            yield kind, data[: rng.randrange(1, len(data))]
            continue
        if kind == "bit-flip":
            flipped = bytearray(data)
            for _ in range(8):
                at = rng.randrange(len(flipped))
                flipped[at] ^= 1 << rng.randrange(8)
            yield kind, bytes(flipped)
            continue
        if kind == "delete":
            _delete(doc, rng.choice(paths))
        elif kind == "wrong-type":
            _set(doc, rng.choice(paths), rng.choice(WRONG_VALUES))
        else:
            doc[rng.choice(SECTIONS)] = rng.choice(WRONG_VALUES)
        yield kind, json.dumps(doc).encode("utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", help="tokenizer.json to start from (default: the embedded Qwen3)")
    args = parser.parse_args()
    if args.tokenizer:
        text = Path(args.tokenizer).read_text(encoding="utf-8")
    else:
        from gpu_tok import _data

        text = _data.default_tokenizer_json()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for n, (kind, blob) in enumerate(mutants(text, args.count, args.seed)):
        (out / f"{n:03d}-{kind}.json").write_bytes(blob)
    print(f"wrote {args.count} files to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
