"""`Tokenizer.add_tokens` of one token: gpu_tok's core keeps its plan's tables
and builds only the added tokens' split; beside it, in the same run, the way
it added tokens before (tokenizer.json edited and loaded again, the whole
plan rebuilt) and `tokenizers`' own `add_tokens`.

    python benches/add_tokens.py [--tokenizers qwen3 llama2 ...] [--repeats 5] [--json OUT]

A tokenizer name is a folder of ../shared/tokenizers; "qwen3" without
../shared is the embedded default. Each timed call starts from a freshly
loaded tokenizer (not timed) and adds a new token; medians of
--repeats, the three ways interleaved. The results are checked: the same
count and id for the three.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gpu_tok
import tokenizers
from gpu_tok import _core

ROOT = Path(__file__).resolve().parents[1]


def tokenizer_json(name: str, shared: Path) -> str:
    path = shared / "tokenizers" / name / "tokenizer.json"
    if path.is_file():
        return path.read_text(encoding="utf-8")
    if name == "qwen3":
        return gpu_tok._data.default_tokenizer_json()
    raise SystemExit(f"{path} not found")


def reload_with(core: _core.CoreTokenizer, token: str) -> _core.CoreTokenizer:
    """The former add_tokens: the token appended to tokenizer.json's added_tokens, which is loaded again."""
    spec = json.loads(core.to_json())
    next_id = max([core.get_vocab_size(True)] + [t["id"] + 1 for t in spec["added_tokens"]])
    spec["added_tokens"].append({"id": next_id, "content": token, "single_word": False, "lstrip": False,
                                 "rstrip": False, "normalized": True, "special": False})
    return _core.CoreTokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def one_call(way: str, json_text: str, tok: gpu_tok.Tokenizer, token: str) -> tuple[float, int | None]:
    if way == "gpu_tok":
        fresh = gpu_tok.Tokenizer.from_str(json_text)
        start = time.perf_counter()
        fresh.add_tokens([token])
        return time.perf_counter() - start, fresh.token_to_id(token)
    if way == "gpu_tok_reload":
        start = time.perf_counter()
        core = reload_with(tok._core, token)
        return time.perf_counter() - start, core.token_to_id(token)
    other = tokenizers.Tokenizer.from_str(json_text)
    start = time.perf_counter()
    other.add_tokens([token])
    return time.perf_counter() - start, other.token_to_id(token)


def measure(name: str, shared: Path, repeats: int) -> dict[str, Any]:
    json_text = tokenizer_json(name, shared)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    ways = ["gpu_tok", "gpu_tok_reload", "tokenizers"]
    times: dict[str, list[float]] = {way: [] for way in ways}
    for i in range(repeats):
        token = f"<bench_token_{i}>"
        got = {way: one_call(way, json_text, tok, token) for way in ways}
        for way, (seconds, _) in got.items():
            times[way].append(seconds)
        ids = {way: token_id for way, (_, token_id) in got.items()}
        assert len(set(ids.values())) == 1, f"{name}: the ways gave {ids}"
    medians = {way: statistics.median(t) for way, t in times.items()}
    return {"tokenizer": name, "median_s": medians, "runs_s": times,
            "speedup_vs_reload": medians["gpu_tok_reload"] / medians["gpu_tok"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", nargs="+", default=["qwen3"])
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    results = [measure(name, Path(args.shared), args.repeats) for name in args.tokenizers]
    for r in results:
        m = r["median_s"]
        print(f"{r['tokenizer']:>12}: add_tokens {m['gpu_tok']:.3f} s, reload {m['gpu_tok_reload']:.3f} s "
              f"({r['speedup_vs_reload']:.1f}x), tokenizers {m['tokenizers']:.4f} s", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": "gpu_tok.add_tokens_bench/1", "results": results},
                                              indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
