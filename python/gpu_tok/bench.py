"""Benchmark harness: gpu_tok and its peers on the same data, in one run.

For each batch size, every engine encodes the whole corpus `repeats` times,
interleaved (engine order rotates each repeat) so that machine noise hits all
of them alike; the median is reported. Throughput counts UTF-8 input bytes.
Parity is the share of documents whose ids equal `tokenizers`' exactly. Peak
memory is the highest resident set size above the level before the engine's
runs, sampled every few milliseconds (it sees Rust and C allocations too).
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import peers
from .tokenizer import Tokenizer

SCHEMA = "gpu_tok.bench/1"


def read_corpus(path: str | Path, text_field: str = "text", max_bytes: int | None = None) -> list[str]:
    """Documents from .txt (one per line), .jsonl (`text_field` of each record) or .parquet."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as err:
            raise ValueError("reading .parquet needs pyarrow (pip install pyarrow)") from err
        table = pq.read_table(path, columns=[text_field])
        docs: Iterable[str] = (t for t in table.column(text_field).to_pylist() if isinstance(t, str))
    elif suffix in (".jsonl", ".json"):
        docs = _jsonl_texts(path, text_field)
    elif suffix in (".txt", ".text", ""):
        docs = (line for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    else:
        raise ValueError(f"unsupported corpus format {suffix!r}: use .txt, .jsonl or .parquet")
    out: list[str] = []
    total = 0
    for doc in docs:
        size = len(doc.encode("utf-8", "surrogatepass"))
        if max_bytes is not None and total + size > max_bytes and out:
            break
        out.append(doc)
        total += size
    if not out:
        raise ValueError(f"{path} holds no documents")
    return out


def _jsonl_texts(path: Path, text_field: str) -> Iterable[str]:
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n} is not valid JSON: {err}") from None
            if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                raise ValueError(f"{path}:{n} has no string field {text_field!r} (see --text-field)")
            yield record[text_field]


class _PeakRss:
    """Samples this process's resident set size in a background thread."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval, self.peak, self.base = interval, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def rss() -> int:
        try:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __enter__(self) -> _PeakRss:
        self.base = self.peak = self.rss()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.rss())

    @property
    def above_base_mb(self) -> float:
        return max(0, self.peak - self.base) / 2**20


@dataclass
class EngineReport:
    name: str
    version: str = ""
    status: str = "ok"
    reason: str = ""
    identical: int = 0
    total: int = 0
    tokens: int = 0
    peak_rss_mb: float = 0.0
    seconds: dict[int, list[float]] = field(default_factory=dict)


def _batches(texts: Sequence[str], size: int) -> list[Sequence[str]]:
    return [texts[i:i + size] for i in range(0, len(texts), size)]


def run(
    tok: Tokenizer,
    json_text: str,
    texts: list[str],
    *,
    tokenizer_path: str | None = None,
    devices: Sequence[str] = ("cpu",),
    compare: Sequence[str] = ("tokenizers", "tiktoken"),
    batch_sizes: Sequence[int] = (1024,),
    repeats: int = 3,
    threads: int | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Measures every engine; returns the JSON-ready report (see SCHEMA)."""
    threads = threads or peers.default_threads()
    engines: list[peers.Engine] = []
    reports: dict[str, EngineReport] = {}

    def try_load(name: str, load: Callable[[], peers.Engine]) -> None:
        try:
            engine = load()
        except peers.Skipped as why:
            reports[name] = EngineReport(name, status="skipped", reason=str(why))
            return
        engines.append(engine)
        reports[engine.name] = EngineReport(engine.name, engine.version)

    for device in devices:
        try_load(f"gpu_tok[{device}]", functools.partial(peers.gpu_tok_engine, tok, device))
    for name in compare:
        try_load(name, functools.partial(peers.load_peer, name, json_text, tokenizer_path, threads))

    # Parity and token counts: one untimed pass per engine, compared with tokenizers.
    reference = None
    if "tokenizers" in reports and reports["tokenizers"].status == "ok":
        hf = next(e for e in engines if e.name == "tokenizers")
        reference = hf.ids(hf.encode(texts))
    for engine in engines:
        ids = engine.ids(engine.encode(texts))
        report = reports[engine.name]
        report.tokens = sum(len(row) for row in ids)
        report.total = len(texts)
        report.identical = sum(a == b for a, b in zip(ids, reference, strict=True)) if reference else 0

    total_bytes = sum(len(t.encode("utf-8")) for t in texts)
    for size in batch_sizes:
        batches = _batches(texts, size)
        for engine in engines:
            reports[engine.name].seconds[size] = []
        for r in range(repeats):
            order = engines[r % len(engines):] + engines[:r % len(engines)] if engines else []
            for engine in order:
                with _PeakRss() as rss:
                    start = time.perf_counter()
                    for batch in batches:
                        engine.encode(list(batch))
                    elapsed = time.perf_counter() - start
                report = reports[engine.name]
                report.seconds[size].append(elapsed)
                report.peak_rss_mb = max(report.peak_rss_mb, rss.above_base_mb)
                if progress:
                    progress(1)
    return _report(tok, texts, total_bytes, reports, batch_sizes, repeats, threads, devices)


def _report(tok: Tokenizer, texts: list[str], total_bytes: int, reports: dict[str, EngineReport],
            batch_sizes: Sequence[int], repeats: int, threads: int, devices: Sequence[str]) -> dict[str, Any]:
    hf = reports.get("tokenizers")
    engines = []
    for report in reports.values():
        results = []
        for size, seconds in report.seconds.items():
            median = statistics.median(seconds)
            hf_median = statistics.median(hf.seconds[size]) if hf and hf.seconds.get(size) else None
            results.append({
                "batch_size": size,
                "seconds": seconds,
                "median_s": median,
                "mb_per_s": total_bytes / 1e6 / median,
                "tokens_per_s": report.tokens / median,
                "speedup_vs_tokenizers": hf_median / median if hf_median else None,
            })
        engines.append({
            "name": report.name,
            "version": report.version,
            "status": report.status,
            "reason": report.reason,
            "tokens": report.tokens,
            "parity": {"identical": report.identical, "total": report.total} if hf else None,
            "peak_rss_mb": round(report.peak_rss_mb, 1),
            "results": results,
        })
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "threads": threads},
        "corpus": {"documents": len(texts), "bytes": total_bytes},
        "settings": {"batch_sizes": list(batch_sizes), "repeats": repeats, "devices": list(devices),
                     "add_special_tokens": False},
        "tokenizer": {"vocab_size": tok.get_vocab_size()},
        "engines": engines,
    }


def table(report: dict[str, Any]) -> str:
    """The report as a fixed-width text table."""
    header = (f"{'engine':<20} {'batch':>6} {'MB/s':>9} {'Mtok/s':>8} {'vs tokenizers':>14} "
              f"{'parity':>16} {'peak MB':>8}")
    lines = [header, "-" * len(header)]
    for e in report["engines"]:
        if e["status"] != "ok":
            lines.append(f"{e['name']:<20} skipped: {e['reason']}")
            continue
        parity = e["parity"]
        parity_text = (f"{100 * parity['identical'] / parity['total']:.2f}% ({parity['identical']}/{parity['total']})"
                       if parity and parity["total"] else "n/a")
        for r in e["results"]:
            speedup = f"{r['speedup_vs_tokenizers']:.2f}x" if r["speedup_vs_tokenizers"] else "n/a"
            lines.append(f"{e['name']:<20} {r['batch_size']:>6} {r['mb_per_s']:>9.2f} {r['tokens_per_s'] / 1e6:>8.3f} "
                         f"{speedup:>14} {parity_text:>16} {e['peak_rss_mb']:>8.1f}")
    lines.append("")
    lines.append(f"{_subject(report)}; threads: {report['machine']['threads']}; "
                 f"medians of {report['settings']['repeats']} interleaved runs")
    lines.append("parity: documents whose ids are identical to tokenizers' (the oracle)")
    lines.append("peak MB: most resident memory above the level before the engine's runs, sampled every 5 ms "
                 "(a rough guide: allocator caches make it noisy)")
    return "\n".join(lines)


def _subject(report: dict[str, Any]) -> str:
    """'tokenizer: ...; corpus: ...', as far as the report knows them."""
    t, c = report["tokenizer"], report["corpus"]
    tokenizer = f"{t.get('source', 'tokenizer')} (vocab {t['vocab_size']})"
    corpus = f"{c.get('source', 'corpus')}, {c['documents']} documents, {c['bytes'] / 1e6:.2f} MB"
    return f"tokenizer: {tokenizer}; corpus: {corpus}"


def plot(report: dict[str, Any], path: str | Path) -> None:
    """Throughput (MB/s) against batch size, one line per engine."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ValueError("--plot needs matplotlib (pip install 'gpu_tok[bench]')") from err
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for e in report["engines"]:
        if e["status"] == "ok" and e["results"]:
            sizes = [r["batch_size"] for r in e["results"]]
            ax.plot(sizes, [r["mb_per_s"] for r in e["results"]], marker="o", label=e["name"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # engines differ by 10-100x: a log axis keeps every line readable
    ax.set_xlabel("batch size (documents)")
    ax.set_ylabel("throughput (MB/s of UTF-8 input)")
    subject = _subject(report).replace("; corpus:", "\ncorpus:")
    ax.set_title(f"{subject}; {report['machine']['threads']} threads", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
