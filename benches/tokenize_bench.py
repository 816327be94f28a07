"""`gpu-tok tokenize` against the bare library call, `tokenizers` and a
`datasets.map` baseline, plus peak memory over corpora larger than the batch
memory. Not a test: figures for benches/results/tokenize.json.

    python benches/tokenize_bench.py --threads 2 --json benches/results/tokenize.json

Measured in one run, interleaved (each repeat starts one step further along
the list, so that load from elsewhere falls on every step alike), medians of
`--repeats` (and the fastest of each, the figure least disturbed by such load):
- bare: `encode_batch` on the same 4 MB batches of documents already in memory
  (and on 1024-document batches, the setting of `gpu-tok bench`);
- tokenize: `gpu_tok.corpus.tokenize_corpus` in this process on the .jsonl
  file (reading, JSON parsing, encoding, writing npy shards, checksums,
  manifest), and on the same documents as .parquet (Arrow, no parsing);
  both on the corpus repeated `--scale` times (fixed costs weigh as in real use);
  with the default 100M-token shards the whole output is one shard, whose
  checksum can only start after the last document; so also the .jsonl job
  with `--small-shard-tokens` shards, where, as in a long job, all shards but
  the last are checksummed while encoding goes on;
- the command line in a fresh process (`python -m gpu_tok tokenize`) on the
  corpus and on the corpus repeated `--scale` times: wall time and the
  process's peak RSS (bounded memory: the same peak for both sizes), beside a
  process that only loads the tokenizer;
- peers on the first `--peer-mb` MB: `tokenizers` `encode_batch`,
  `datasets.map(batched=True)` with `tokenizers`, and with gpu_tok's
  `hf_datasets` helper (Arrow in, Arrow out).
MB/s are of UTF-8 text.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=str(SHARED / "tokenizers" / "qwen3"))
    parser.add_argument("--corpus", default=str(SHARED / "corpus" / "mixed.jsonl"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale", type=int, default=4, help="the larger corpus is the corpus this many times")
    parser.add_argument("--peer-mb", type=float, default=4.0, help="MB of documents for the slow peers")
    parser.add_argument("--small-shard-tokens", type=int, default=10_000_000,
                        help="shard size of the tokenize_small_shards step")
    parser.add_argument("--json", dest="json_out")
    return parser.parse_args()


CPU_SECONDS: dict[str, list[float]] = {}


def _timed(fn: Any, name: str | None = None) -> float:
    """Wall seconds of `fn()`; with a name, its CPU seconds (all threads) go to CPU_SECONDS."""
    started, cpu = time.perf_counter(), time.process_time()
    fn()
    if name:
        CPU_SECONDS.setdefault(name, []).append(time.process_time() - cpu)
    return time.perf_counter() - started


def _child(command: list[str]) -> dict[str, Any]:
    """Wall time and output of a child process. (Not its ru_maxrss: a child
    forked from this large process inherits this process's peak.)"""
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr}")
    return {"wall_s": time.perf_counter() - started, "stdout": result.stdout.strip()}


def main() -> int:
    args = _args()
    # Before gpu_tok's and tokenizers' pools start.
    os.environ["GPU_TOK_NUM_THREADS"] = os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    import gpu_tok
    import numpy as np
    from gpu_tok import corpus
    from gpu_tok.corpus.readers import describe_inputs, read_batches

    tok = gpu_tok.Tokenizer.from_pretrained(args.tokenizer)
    json_text = (Path(args.tokenizer) / "tokenizer.json").read_text(encoding="utf-8")
    digest = hashlib.sha256(json_text.encode("utf-8")).hexdigest()
    work = Path(tempfile.mkdtemp(prefix="gpu_tok_tokenize_bench_"))
    # Throughput on the corpus repeated --scale times, so that fixed costs (the
    # first batch read, the last shard's checksum) weigh as little as in real use.
    big = work / "big.jsonl"
    with big.open("wb") as f:
        for _ in range(args.scale):
            f.write(Path(args.corpus).read_bytes())
    batches = list(read_batches(describe_inputs([big]), "text", corpus.DEFAULT_BATCH_BYTES))
    texts = [t for b in batches for t in b.texts]
    text_bytes = sum(len(t.encode("utf-8")) for t in texts)
    options = {"add_special_tokens": False, "padding": False, "truncation": False, "return_attention_mask": False}

    fresh: list[list[str]] = []

    def refresh() -> None:
        """New str objects (untimed): gpu_tok caches a str's UTF-8 in it, so texts
        encoded once before would make later bare runs look faster than a first use."""
        fresh[:] = [[t.encode("utf-8").decode("utf-8") for t in b.texts] for b in batches]

    def bare() -> None:
        for b in fresh:
            tok.encode_batch(b, **options)

    def bare_1024() -> None:
        flat = [t for b in fresh for t in b]
        for i in range(0, len(flat), 1024):
            tok.encode_batch(flat[i:i + 1024], **options)

    try:
        def clear_output() -> None:
            """(Untimed.) Deleting the last run's 140 MB of shards is no part of the job."""
            shutil.rmtree(work / "out", ignore_errors=True)

        def tokenize(source: Path, shard_tokens: int = corpus.DEFAULT_SHARD_TOKENS) -> None:
            corpus.tokenize_corpus(tok, [source], work / "out", tokenizer_digest=digest, shard_tokens=shard_tokens)

        # The same documents as Parquet: Arrow strings straight into the engine, no JSON to parse.
        import pyarrow as pa
        import pyarrow.parquet as pq

        big_parquet = work / "big.parquet"
        pq.write_table(pa.table({"text": texts}), big_parquet, row_group_size=1024)

        times: dict[str, list[float]] = {"bare": [], "bare_1024": [], "tokenize": [], "tokenize_parquet": [],
                                         "tokenize_small_shards": []}
        refresh()
        bare()  # warm-up: thread pool, word caches
        steps = [("bare", bare), ("tokenize", lambda: tokenize(big)), ("bare_1024", bare_1024),
                 ("tokenize_parquet", lambda: tokenize(big_parquet)),
                 ("tokenize_small_shards", lambda: tokenize(big, args.small_shard_tokens))]
        load_at_start = os.getloadavg()[0]
        for repeat in range(args.repeats):
            for name, fn in steps[repeat % len(steps):] + steps[:repeat % len(steps)]:
                if name.startswith("bare"):
                    refresh()
                else:
                    clear_output()
                times[name].append(_timed(fn, name))
        clear_output()
        tokenize(big)  # the output checked below
        mbs = {name: text_bytes / statistics.median(t) / 1e6 for name, t in times.items()}
        best = {name: text_bytes / min(t) / 1e6 for name, t in times.items()}

        # Parity: the shards hold the ids of the bare call.
        ids, offsets = corpus.load_tokens(work / "out")
        enc = tok.encode_batch(texts, **options)
        want_ids, want_offsets = np.asarray(enc.input_ids), np.asarray(enc.row_offsets)
        identical = sum(np.array_equal(ids[offsets[i]:offsets[i + 1]], want_ids[want_offsets[i]:want_offsets[i + 1]])
                        for i in range(len(texts)))

        # Memory: fresh processes on the corpus and on the corpus --scale times.
        load = (f"import gpu_tok, gpu_tok.corpus as c; t = gpu_tok.Tokenizer.from_pretrained({args.tokenizer!r}); "
                "t.encode_batch(['warm up the pool']); print(c._current_rss_mb())")
        load_only = _child([sys.executable, "-c", load])
        load_only["rss_after_load_mb"] = float(load_only.pop("stdout"))
        cli = [sys.executable, "-m", "gpu_tok", "tokenize", "--tokenizer", args.tokenizer,
               "--threads", str(args.threads)]
        small_run = _child([*cli, args.corpus, "--output", str(work / "cli-1")])
        big_run = _child([*cli, str(big), "--output", str(work / "cli-big")])
        for run in (small_run, big_run):  # "memory: N MB resident while tokenizing, ..."
            line = next(x for x in run["stdout"].splitlines() if x.startswith("memory:"))
            run["max_rss_while_tokenizing_mb"] = float(line.split()[1])
        big_text_mb = text_bytes / 1e6
        one_text_mb = big_text_mb / args.scale
    finally:
        shutil.rmtree(work, ignore_errors=True)

    peers = _peers(args, tok, texts)
    report = {
        "schema": "gpu_tok.tokenize_bench/1",
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_1m_at_start": load_at_start, "load_average_1m_at_end": os.getloadavg()[0]},
        "gpu_tok": gpu_tok.__version__,
        "tokenizer": args.tokenizer,
        "corpus": {"path": args.corpus, "repeated": args.scale, "documents": len(texts), "text_mb": text_bytes / 1e6,
                   "tokens": len(want_ids)},
        "threads": args.threads,
        "batch_mb": corpus.DEFAULT_BATCH_BYTES / 1e6,
        "repeats": args.repeats,
        "seconds": times,
        "mb_per_s": {"bare_encode_batch": mbs["bare"], "bare_encode_batch_1024_docs": mbs["bare_1024"],
                     "tokenize": mbs["tokenize"], "tokenize_parquet": mbs["tokenize_parquet"],
                     "tokenize_small_shards": mbs["tokenize_small_shards"]},
        "tokens_per_s": {name: len(want_ids) / statistics.median(t) for name, t in times.items()},
        "cpu_seconds": {name: statistics.median(t) for name, t in CPU_SECONDS.items()},
        "tokenize_cpu_vs_bare_cpu": statistics.median(CPU_SECONDS["tokenize"]) / statistics.median(CPU_SECONDS["bare"]),
        "tokenize_vs_bare": mbs["tokenize"] / mbs["bare"],
        "tokenize_parquet_vs_bare": mbs["tokenize_parquet"] / mbs["bare"],
        "small_shard_tokens": args.small_shard_tokens,
        "tokenize_small_shards_vs_bare": mbs["tokenize_small_shards"] / mbs["bare"],
        "tokenize_vs_bare_1024_docs": mbs["tokenize"] / mbs["bare_1024"],
        "best_of_repeats": {"mb_per_s": best, "tokenize_vs_bare": best["tokenize"] / best["bare"],
                            "tokenize_parquet_vs_bare": best["tokenize_parquet"] / best["bare"],
                            "tokenize_small_shards_vs_bare": best["tokenize_small_shards"] / best["bare"]},
        "parity": {"identical": int(identical), "total": len(texts)},
        "cli": {
            "load_tokenizer_only": load_only,
            "corpus": {**small_run, "text_mb": one_text_mb, "mb_per_s_end_to_end": one_text_mb / small_run["wall_s"]},
            f"corpus_x{args.scale}": {**big_run, "text_mb": big_text_mb,
                                      "mb_per_s_end_to_end": big_text_mb / big_run["wall_s"]},
        },
        "peers": peers,
    }
    _print(report)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    return 0


def _peers(args: argparse.Namespace, tok: Any, texts: list[str]) -> dict[str, Any]:
    """tokenizers and datasets.map on the first --peer-mb MB, gpu_tok beside them."""
    subset, size = [], 0
    for t in texts:
        if size >= args.peer_mb * 1e6:
            break
        subset.append(t)
        size += len(t.encode("utf-8"))
    out: dict[str, Any] = {"documents": len(subset), "text_mb": size / 1e6}
    options = {"add_special_tokens": False, "padding": False, "truncation": False, "return_attention_mask": False}
    out["gpu_tok_encode_batch_mb_per_s"] = size / 1e6 / min(
        _timed(lambda: [tok.encode_batch(subset[i:i + 1024], **options) for i in range(0, len(subset), 1024)])
        for _ in range(3))
    try:
        import tokenizers
    except ImportError:
        out["tokenizers"] = "skipped: not installed"
        return out
    hf = tokenizers.Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    seconds = _timed(lambda: [hf.encode_batch(subset[i:i + 1024], add_special_tokens=False)
                              for i in range(0, len(subset), 1024)])
    out["tokenizers_encode_batch_mb_per_s"] = size / 1e6 / seconds
    try:
        import datasets
        from gpu_tok.hf_datasets import tokenize_dataset
    except ImportError:
        out["datasets"] = "skipped: not installed"
        return out
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_dict({"text": subset})

    def with_tokenizers(batch: dict[str, list[str]]) -> dict[str, list[list[int]]]:
        return {"input_ids": [e.ids for e in hf.encode_batch(batch["text"], add_special_tokens=False)]}

    out["datasets_map_tokenizers_mb_per_s"] = size / 1e6 / _timed(
        lambda: ds.map(with_tokenizers, batched=True, batch_size=1000))
    texts = texts[: len(texts) // args.scale]  # one copy of the corpus
    whole = datasets.Dataset.from_dict({"text": texts})
    whole_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    out["datasets_map_gpu_tok_whole_corpus_mb_per_s"] = whole_mb / min(
        _timed(lambda: tokenize_dataset(whole, tok, batch_size=1000)) for _ in range(3))
    return out


def _print(report: dict[str, Any]) -> None:
    mbs, cli = report["mb_per_s"], report["cli"]
    print(f"the corpus {report['corpus']['repeated']} times: {report['corpus']['text_mb']:.1f} MB, "
          f"{report['corpus']['documents']} documents, "
          f"{report['threads']} threads, medians of {report['repeats']}")
    print(f"  bare encode_batch (4 MB batches)  {mbs['bare_encode_batch']:7.2f} MB/s")
    print(f"  bare encode_batch (1024 docs)     {mbs['bare_encode_batch_1024_docs']:7.2f} MB/s")
    print(f"  tokenize .jsonl                   {mbs['tokenize']:7.2f} MB/s  = {report['tokenize_vs_bare']:.2f}x bare")
    print(f"  tokenize .parquet                 {mbs['tokenize_parquet']:7.2f} MB/s  = "
          f"{report['tokenize_parquet_vs_bare']:.2f}x bare")
    print(f"  tokenize .jsonl, {report['small_shard_tokens'] / 1e6:g}M-token shards "
          f"{mbs['tokenize_small_shards']:7.2f} MB/s  = {report['tokenize_small_shards_vs_bare']:.2f}x bare")
    best = report["best_of_repeats"]
    print(f"  fastest runs: tokenize .jsonl {best['tokenize_vs_bare']:.2f}x, "
          f".parquet {best['tokenize_parquet_vs_bare']:.2f}x, small shards "
          f"{best['tokenize_small_shards_vs_bare']:.2f}x the fastest bare run")
    print("  CPU seconds (all threads): " + ", ".join(f"{k} {v:.2f}" for k, v in report["cpu_seconds"].items())
          + f"; tokenize / bare = {report['tokenize_cpu_vs_bare_cpu']:.2f}")
    print(f"  parity: {report['parity']['identical']}/{report['parity']['total']} documents identical")
    for name, run in cli.items():
        mb = f", {run['mb_per_s_end_to_end']:.1f} MB/s end to end" if "mb_per_s_end_to_end" in run else ""
        rss = run.get("max_rss_while_tokenizing_mb", run.get("rss_after_load_mb"))
        print(f"  {name:<22} resident {rss:6.0f} MB, {run['wall_s']:.1f} s{mb}")
    for key, value in report["peers"].items():
        print(f"  peers: {key} = {value if isinstance(value, str) else round(value, 2)}")


if __name__ == "__main__":
    sys.exit(main())
