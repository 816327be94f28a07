"""Fresh-text speed of gpu_tok's CPU engine against gigatoken, for engine work.

Each document is encoded once per library (new `str` objects, rebuilt from
bytes before every call), libraries interleaved in one process, the corpus
cut into disjoint document sets that each library meets once, in a rotated
order (round r: library i encodes set (r + i) mod S). Reported: MB/s per
round (median, and all bytes over all time) and gpu_tok / peer ratios of
both, from the same run; also MB per CPU-second of the process
(`process_time`, all its threads: steadier than wall time when other jobs
share the cores, though a pool's spinning threads count too). Parity of every library against `tokenizers` is
checked first on the whole corpus (ids identical, per document).

    python benches/fresh_engine_bench.py --tok qwen3,gpt-oss --mode batch
    GPU_TOK_NUM_THREADS=1 RAYON_NUM_THREADS=1 python benches/fresh_engine_bench.py --mode single

`--mode batch` encodes a set in one call (all cores); `--mode single` one
document per call (set the thread counts to 1 for a one-thread figure).
`--tok` takes the names under ../shared/tokenizers and the committed
fixtures' (tests/fixtures: unigram-xlmr); `--peers tokenizers` adds the
oracle itself (the only exact peer of WordPiece and Unigram forms here).
Results go to stdout as JSON (one object) after the table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SHARED = Path(os.environ.get("GPU_TOK_SHARED", "/work/shared"))


def cut_by_bytes(docs: list[bytes], sets: int) -> list[list[bytes]]:
    """`docs` in order, cut into `sets` runs of about equal bytes."""
    total = sum(map(len, docs))
    out: list[list[bytes]] = [[] for _ in range(sets)]
    at = 0
    for doc in docs:
        out[min(sets - 1, at * sets // total)].append(doc)
        at += len(doc)
    return out


def corpus_sets(path: Path, sets: int, seed: int) -> list[list[bytes]]:
    docs = [json.loads(line)["text"].encode() for line in path.open(encoding="utf-8")]
    random.Random(seed).shuffle(docs)
    return cut_by_bytes(docs, sets)


def tokenizer_json(name: str) -> str:
    if name == "default":
        import gpu_tok

        return gpu_tok.Tokenizer.default()._core.to_json()
    shared = SHARED / "tokenizers" / name / "tokenizer.json"
    if shared.is_file():
        return shared.read_text(encoding="utf-8")
    # A family ../shared has none of (unigram-xlmr): the committed fixture.
    import lzma

    fixture = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / name / "tokenizer.json.xz"
    return lzma.decompress(fixture.read_bytes()).decode("utf-8")


def gpu_tok_engine(module: Any, json_text: str, mode: str) -> Callable[[list[str]], Any]:
    tok = module.Tokenizer.from_str(json_text)
    if mode == "batch":
        return lambda texts: tok.encode_batch(
            texts, add_special_tokens=False, padding=False, truncation=False,
            return_attention_mask=False, return_token_type_ids=False, device="cpu")
    return lambda texts: [tok.encode(t, add_special_tokens=False) for t in texts]


def gpu_tok_module() -> Any:
    """gpu_tok, or the build named by --new (the package `gpu_tok_new`)."""
    if os.environ.get("FRESH_BENCH_NEW"):
        import gpu_tok_new  # type: ignore[import-not-found]

        return gpu_tok_new
    import gpu_tok

    return gpu_tok


def engines(name: str, mode: str, peers: list[str]) -> dict[str, Callable[[list[str]], Any]]:
    gpu_tok = gpu_tok_module()
    json_text = tokenizer_json(name)
    out: dict[str, Callable[[list[str]], Any]] = {"gpu_tok": gpu_tok_engine(gpu_tok, json_text, mode)}
    if "base" in peers:
        # An earlier build of gpu_tok, copied as the package `gpu_tok_base` (--base DIR).
        import gpu_tok_base  # type: ignore[import-not-found]

        out["base"] = gpu_tok_engine(gpu_tok_base, json_text, mode)
    if "gigatoken" in peers:
        try:
            import gigatoken

            g = gigatoken.Tokenizer.from_json(json_text)
            if mode == "batch":
                out["gigatoken"] = lambda texts: g.encode_batch(texts)
            else:
                out["gigatoken"] = lambda texts: [g.encode(t) for t in texts]
        except Exception as err:  # noqa: BLE001 - a peer that cannot load is reported, not fatal
            print(f"# {name}: gigatoken cannot load it: {str(err).splitlines()[0]}", file=sys.stderr)
    if "fastokens" in peers:
        try:
            import fastokens

            ft = fastokens.Tokenizer.from_json_str(json_text)
            ft.no_truncation()
            ft.no_padding()
            if mode == "batch":
                out["fastokens"] = lambda texts: ft.encode_batch_flat(texts, add_special_tokens=False)
            else:
                # `.ids`: its Encoding builds the list of ids only when asked
                # (+45% on a 14k-token text), where gpu_tok returns the list.
                out["fastokens"] = lambda texts: [ft.encode(t, add_special_tokens=False).ids for t in texts]
        except Exception as err:  # noqa: BLE001 - a peer that cannot load is reported, not fatal
            print(f"# {name}: fastokens cannot load it: {str(err).splitlines()[0]}", file=sys.stderr)
    if "tokenizers" in peers:
        import tokenizers

        hf = tokenizers.Tokenizer.from_str(json_text)
        hf.no_padding()
        hf.no_truncation()
        if mode == "batch":
            out["tokenizers"] = lambda texts: hf.encode_batch_fast(texts, add_special_tokens=False)
        else:
            out["tokenizers"] = lambda texts: [hf.encode(t, add_special_tokens=False).ids for t in texts]
    return out


def parity(name: str, sets: list[list[bytes]], peers: list[str]) -> dict[str, str]:
    """Whole-corpus ids of each library against `tokenizers` (batch calls)."""
    import tokenizers

    gpu_tok = gpu_tok_module()
    json_text = tokenizer_json(name)
    hf = tokenizers.Tokenizer.from_str(json_text)
    hf.no_padding()
    hf.no_truncation()
    docs = [d.decode() for s in sets for d in s]
    ref = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    got: dict[str, list[list[int]]] = {}
    tok = gpu_tok.Tokenizer.from_str(json_text)
    got["gpu_tok"] = tok.encode_batch(docs, add_special_tokens=False, padding=False, truncation=False,
                                      device="cpu").to_lists()["input_ids"]
    if "gigatoken" in peers:
        try:
            import gigatoken

            got["gigatoken"] = gigatoken.Tokenizer.from_json(json_text).encode_batch_list(docs)
        except Exception:  # noqa: BLE001 - reported by engines()
            pass
    if "fastokens" in peers:
        try:
            import fastokens

            ft = fastokens.Tokenizer.from_json_str(json_text)
            ft.no_truncation()
            ft.no_padding()
            got["fastokens"] = [e.ids for e in ft.encode_batch(docs, add_special_tokens=False)]
        except Exception:  # noqa: BLE001 - reported by engines()
            pass
    out = {}
    for lib, rows in got.items():
        same = sum(list(a) == list(b) for a, b in zip(ref, rows, strict=True))
        out[lib] = f"{same}/{len(docs)}"
    return out


def run(name: str, mode: str, sets: list[list[bytes]], peers: list[str]) -> dict[str, Any]:
    libs = engines(name, mode, peers)
    names = list(libs)
    times: dict[str, list[float]] = {lib: [] for lib in names}
    cpu_times: dict[str, list[float]] = {lib: [] for lib in names}
    sizes: dict[str, list[int]] = {lib: [] for lib in names}
    # One untimed warm-up call per library on a tiny text (loads tables, spawns pools).
    for lib in names:
        libs[lib](["warm up"])
    for r in range(len(sets)):
        for i, lib in enumerate(names):
            chosen = sets[(r + i) % len(sets)]
            texts = [d.decode() for d in chosen]  # new str objects, no cached UTF-8
            t0, c0 = time.perf_counter(), time.process_time()
            libs[lib](texts)
            times[lib].append(time.perf_counter() - t0)
            cpu_times[lib].append(time.process_time() - c0)
            sizes[lib].append(sum(map(len, chosen)))
    result: dict[str, Any] = {}
    for lib in names:
        rates = [b / t / 1e6 for b, t in zip(sizes[lib], times[lib], strict=True)]
        cpu_rates = [b / t / 1e6 for b, t in zip(sizes[lib], cpu_times[lib], strict=True)]
        result[lib] = {"median_mb_s": statistics.median(rates), "total_mb_s": sum(sizes[lib]) / sum(times[lib]) / 1e6,
                       "rounds_mb_s": [round(x, 1) for x in rates],
                       "median_mb_per_cpu_s": statistics.median(cpu_rates)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tok", default="qwen3,deepseek_v3,gpt-oss,claude,default")
    parser.add_argument("--mode", choices=["batch", "single"], default="batch")
    parser.add_argument("--sets", type=int, default=8)
    parser.add_argument("--mb", type=float, default=0, help="use only the first MB of each set (0: all)")
    parser.add_argument("--peers", default="gigatoken")
    parser.add_argument("--parity", action="store_true")
    parser.add_argument("--seed", type=int, default=36)
    parser.add_argument("--new", help="a folder holding the build to measure as the package gpu_tok_new")
    parser.add_argument("--base", help="a folder holding an earlier build as the package gpu_tok_base (peer 'base')")
    args = parser.parse_args()
    if args.base:
        sys.path.insert(0, args.base)
    if args.new:
        sys.path.insert(0, args.new)
        os.environ["FRESH_BENCH_NEW"] = "1"
    sets = corpus_sets(SHARED / "corpus" / "mixed.jsonl", args.sets, args.seed)
    if args.mb:
        limit = int(args.mb * 1e6)
        trimmed = []
        for s in sets:
            kept, n = [], 0
            for d in s:
                if n >= limit:
                    break
                kept.append(d)
                n += len(d)
            trimmed.append(kept)
        sets = trimmed
    peers = [p for p in args.peers.split(",") if p]
    report: dict[str, Any] = {"mode": args.mode, "sets": args.sets, "threads": os.environ.get("GPU_TOK_NUM_THREADS"),
                              "results": {}}
    for name in args.tok.split(","):
        entry: dict[str, Any] = {}
        if args.parity:
            entry["parity"] = parity(name, sets, peers)
        entry["speed"] = run(name, args.mode, sets, peers)
        speed = entry["speed"]
        line = f"{name:12s}"
        for lib, s in speed.items():
            line += f"  {lib} {s['median_mb_s']:6.1f} ({s['total_mb_s']:6.1f})"
        for peer in peers:
            if peer in speed:
                entry[f"ratio_vs_{peer}"] = {
                    "median": speed["gpu_tok"]["median_mb_s"] / speed[peer]["median_mb_s"],
                    "total": speed["gpu_tok"]["total_mb_s"] / speed[peer]["total_mb_s"],
                    "cpu": speed["gpu_tok"]["median_mb_per_cpu_s"] / speed[peer]["median_mb_per_cpu_s"]}
                ratio = entry[f"ratio_vs_{peer}"]
                line += f"  x{ratio['median']:.2f} (cpu x{ratio['cpu']:.2f}) vs {peer}"
        if "parity" in entry:
            line += f"  parity {entry['parity']}"
        print(line, flush=True)
        report["results"][name] = entry
    print(json.dumps(report))


if __name__ == "__main__":
    main()
