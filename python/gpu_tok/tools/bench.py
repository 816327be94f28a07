"""Benchmark harness: gpu_tok and its peers on the same data, in one run.

Fresh text first, as a corpus job sees it. The corpus is split into disjoint
document sets, `sets` for each batch size. Every engine encodes every set of
a batch size exactly once, as new `str` objects decoded from UTF-8 right
before its timed call, so no cache (the engine's own, or a `str`'s cached
UTF-8) has seen those objects, and no engine ever times a set twice. Engines
take turns within a set, in an order that rotates from set to set, so the
machine's noise falls on all of them; the figure is the median over sets.
Words recur across sets as they do across a corpus, so caches keyed by word
content still help where a real job would be helped.

Repeated text second: the first set of each batch size again, `repeats`
times per engine, the same objects every time (the figure earlier versions
reported, with warm caches).

Throughput counts UTF-8 input bytes. Parity is the share of documents whose
ids (from the timed fresh runs) equal `tokenizers`' exactly; without
`tokenizers` there is no oracle and parity is None. Peak memory is the
highest resident set size above the level before a run, sampled every few
milliseconds (it sees Rust and C allocations too).
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import heapq
import json
import os
import platform
import random
import statistics
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compat.tokenizer import Tokenizer
from . import peers

SCHEMA = "gpu_tok.bench/2"
ORACLE = ("tokenizers", "tokenizers[encode]")  # whose ids are right by definition


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
    out = take(docs, max_bytes)
    if not out:
        raise ValueError(f"{path} holds no documents")
    return out


def take(docs: Iterable[str], max_bytes: int | None) -> list[str]:
    """The first documents whose UTF-8 fits in `max_bytes` (at least one; all for None)."""
    out: list[str] = []
    total = 0
    for doc in docs:
        size = len(doc.encode("utf-8", "surrogatepass"))
        if max_bytes is not None and total + size > max_bytes and out:
            break
        out.append(doc)
        total += size
    return out


def split_sets(docs: Sequence[bytes], count: int) -> list[list[bytes]]:
    """`count` disjoint sets of about equal size: each document, in corpus order,
    joins the set with the fewest bytes so far (so a set keeps corpus order)."""
    sets: list[list[bytes]] = [[] for _ in range(count)]
    heap = [(0, i) for i in range(count)]
    for doc in docs:
        size, i = heapq.heappop(heap)
        sets[i].append(doc)
        heapq.heappush(heap, (size + len(doc), i))
    return sets


def fresh_strs(docs: Sequence[bytes]) -> list[str]:
    """New `str` objects for these documents, decoded from UTF-8 now: no engine
    can have cached anything about these objects."""
    return [doc.decode("utf-8", "surrogatepass") for doc in docs]


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
class ModeReport:
    """One engine at one batch size: per fresh set and per repeated run."""

    fresh_bytes: list[int] = field(default_factory=list)
    fresh_seconds: list[float] = field(default_factory=list)
    fresh_cpu_seconds: list[float] = field(default_factory=list)
    tokens: int = 0
    repeated_bytes: int = 0
    repeated_seconds: list[float] = field(default_factory=list)


@dataclass
class PeerReport:
    name: str
    version: str = ""
    status: str = "ok"
    reason: str = ""
    note: str = ""
    identical: int = 0
    total: int = 0
    tokens: int = 0
    peak_rss_mb: float = 0.0
    modes: dict[int, ModeReport] = field(default_factory=dict)


def _rotated(items: list[peers.Peer], by: int) -> list[peers.Peer]:
    if not items:
        return []
    by %= len(items)
    return items[by:] + items[:by]


def _one_per_call(engine: peers.Peer, size: int) -> bool:
    """Batch size 1 uses the library's call for one document, where it has one."""
    return size == 1 and engine.encode_one is not None


def _calls(engine: peers.Peer, texts: list[str], size: int) -> list[Any]:
    """The engine's results for `texts`, `size` documents per call: the timed work."""
    if _one_per_call(engine, size):
        one = engine.encode_one
        assert one is not None
        return [one(text) for text in texts]
    batches = [texts[i:i + size] for i in range(0, len(texts), size)]
    encode = engine.encode
    return [encode(batch) for batch in batches]


def _rows(engine: peers.Peer, results: list[Any], size: int) -> list[list[int]]:
    if _one_per_call(engine, size):
        ids_one = engine.ids_one
        assert ids_one is not None
        return [ids_one(r) for r in results]
    return [row for r in results for row in engine.ids(r)]


def _digest(row: Sequence[int]) -> bytes:
    """A short fingerprint of one document's ids: sets of a few MB compare without
    keeping every engine's ids."""
    return hashlib.blake2b(array("q", row).tobytes(), digest_size=16).digest()


def _warm_up_texts(count: int = 64, words: int = 160) -> list[str]:
    """Made-up words (consonants, digits) that real text hardly shares: they start
    thread pools and fault in tables without putting the corpus's words in a cache."""
    rng = random.Random(20250101)
    letters = "bcdfghjklmnpqrstvwxz"
    return [" ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) + str(rng.randint(0, 99))
                     for _ in range(words)) for _ in range(count)]


class _Run:
    """One benchmark: the engines, their reports, and the timed runs."""

    def __init__(self, engines: list[peers.Peer], reports: dict[str, PeerReport],
                 progress: Callable[[int], Any] | None) -> None:
        self.engines, self.reports, self.progress = engines, reports, progress
        self.oracle = next((e for name in ORACLE for e in engines if e.name == name), None)

    def _timed(self, engine: peers.Peer, texts: list[str], size: int) -> tuple[list[Any], float, float] | None:
        """(results, wall seconds, process CPU seconds), or None when the engine
        failed (it is then reported as such and leaves the run)."""
        report = self.reports[engine.name]
        try:
            with _PeakRss() as rss:
                cpu, start = time.process_time(), time.perf_counter()
                results = _calls(engine, texts, size)
                elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        except Exception as err:  # a peer that fails on some text is listed, not fatal
            report.status, report.reason = "failed", f"{type(err).__name__}: {err}"
            self.engines.remove(engine)
            return None
        report.peak_rss_mb = max(report.peak_rss_mb, rss.above_base_mb)
        if self.progress:
            self.progress(1)
        return results, elapsed, cpu

    def warm_up(self, size: int) -> None:
        texts = _warm_up_texts()
        for engine in list(self.engines):
            try:
                _calls(engine, texts[:8] if _one_per_call(engine, size) else texts, size)
            except Exception as err:
                report = self.reports[engine.name]
                report.status, report.reason = "failed", f"{type(err).__name__}: {err}"
                self.engines.remove(engine)

    def fresh(self, size: int, docs: list[bytes], turn: int) -> None:
        """Every engine encodes `docs` once, as new str objects, in rotated order."""
        digests: dict[str, list[bytes]] = {}
        for engine in _rotated(self.engines, turn):
            texts = fresh_strs(docs)
            timed = self._timed(engine, texts, size)
            del texts
            if timed is None:
                continue
            results, elapsed, cpu = timed
            rows = _rows(engine, results, size)
            del results
            mode = self.reports[engine.name].modes.setdefault(size, ModeReport())
            mode.fresh_bytes.append(sum(len(d) for d in docs))
            mode.fresh_seconds.append(elapsed)
            mode.fresh_cpu_seconds.append(cpu)
            mode.tokens += sum(len(row) for row in rows)
            digests[engine.name] = [_digest(row) for row in rows]
        reference = digests.get(self.oracle.name) if self.oracle else None
        for name, got in digests.items():
            report = self.reports[name]
            if reference is not None:
                report.identical += sum(a == b for a, b in zip(got, reference, strict=True))
                report.total += len(got)

    def repeated(self, size: int, docs: list[bytes], repeats: int) -> None:
        """The same str objects, `repeats` times per engine: warm caches."""
        texts = fresh_strs(docs)
        for r in range(repeats):
            for engine in _rotated(self.engines, r):
                timed = self._timed(engine, texts, size)
                if timed is not None:
                    mode = self.reports[engine.name].modes.setdefault(size, ModeReport())
                    mode.repeated_bytes = sum(len(d) for d in docs)
                    mode.repeated_seconds.append(timed[1])


def plan_sets(documents: int, batch_sizes: Sequence[int], sets: int) -> int:
    """Sets per batch size: as asked, fewer when the corpus has too few documents
    (every set needs one, and no two batch sizes share a set)."""
    if documents < len(batch_sizes):
        raise ValueError(f"the corpus has {documents} documents, too few for {len(batch_sizes)} batch sizes: "
                         "each batch size needs documents of its own")
    return max(1, min(sets, documents // len(batch_sizes)))


def run(
    tok: Tokenizer,
    json_text: str,
    texts: list[str],
    *,
    tokenizer_path: str | None = None,
    devices: Sequence[str] = ("cpu",),
    compare: Sequence[str] = ("tokenizers", "tiktoken"),
    batch_sizes: Sequence[int] = (1024,),
    sets: int = 3,
    repeats: int = 3,
    threads: int | None = None,
    progress: Callable[[int], Any] | None = None,
) -> dict[str, Any]:
    """Measures every engine; returns the JSON-ready report (see SCHEMA)."""
    threads = threads or peers.default_threads()
    engines: list[peers.Peer] = []
    reports: dict[str, PeerReport] = {}

    def try_load(name: str, load: Callable[[], peers.Peer]) -> None:
        try:
            engine = load()
        except peers.Skipped as why:
            reason = " ".join(str(why).split())  # a peer's multi-line error, on one line
            reports[name] = PeerReport(name, status="skipped", reason=reason[:300])
            return
        engines.append(engine)
        reports[engine.name] = PeerReport(engine.name, engine.version, note=engine.note)

    for device in devices:
        try_load(f"gpu_tok[{device}]", functools.partial(peers.gpu_tok_peer, tok, device))
    for name in compare:
        try_load(name, functools.partial(peers.load_peer, name, json_text, tokenizer_path, threads))

    docs = [t.encode("utf-8", "surrogatepass") for t in texts]
    per_size = plan_sets(len(docs), batch_sizes, sets)
    groups = split_sets(docs, per_size * len(batch_sizes))
    bench = _Run(engines, reports, progress)
    for m, size in enumerate(batch_sizes):
        mine = groups[m * per_size:(m + 1) * per_size]
        bench.warm_up(size)
        for turn, group in enumerate(mine):
            bench.fresh(size, group, turn + m)
        if repeats:
            bench.repeated(size, mine[0], repeats)
    for report in reports.values():
        report.tokens = sum(mode.tokens for mode in report.modes.values())
    settings = {"batch_sizes": list(batch_sizes), "sets": per_size, "repeats": repeats, "devices": list(devices),
                "add_special_tokens": False}
    return _report(tok, docs, groups, reports, settings, threads, bench.oracle is not None)


def _rates(mode: ModeReport) -> list[float]:
    return [b / s / 1e6 for b, s in zip(mode.fresh_bytes, mode.fresh_seconds, strict=True) if s > 0]


def _paired_ratio(ours: ModeReport, theirs: ModeReport) -> float | None:
    """Median over the fresh sets of our speed / theirs: each set's two figures were
    taken moments apart, so machine noise cancels better than in a ratio of medians."""
    ratios = [b / a for a, b in zip(ours.fresh_seconds, theirs.fresh_seconds, strict=False) if a > 0]
    return statistics.median(ratios) if ratios else None


def _exact(report: PeerReport, has_oracle: bool) -> bool:
    return has_oracle and report.status == "ok" and report.total > 0 and report.identical == report.total


def _report(tok: Tokenizer, docs: list[bytes], groups: list[list[bytes]], reports: dict[str, PeerReport],
            settings: dict[str, Any], threads: int, has_oracle: bool) -> dict[str, Any]:
    hf = next((reports[n] for n in ORACLE if n in reports and reports[n].status == "ok"), None)
    engines = []
    for report in reports.values():
        results = []
        for size, mode in report.modes.items():
            rates = _rates(mode)
            if not rates:
                continue
            mb_per_s = statistics.median(rates)
            fresh_bytes = sum(mode.fresh_bytes)
            cores = [c / s for c, s in zip(mode.fresh_cpu_seconds, mode.fresh_seconds, strict=True) if s > 0]
            repeated = None
            if mode.repeated_seconds:
                median = statistics.median(mode.repeated_seconds)
                repeated = {"bytes": mode.repeated_bytes, "seconds": mode.repeated_seconds, "median_s": median,
                            "mb_per_s": mode.repeated_bytes / median / 1e6 if median > 0 else None}
            result: dict[str, Any] = {
                "batch_size": size,
                "mb_per_s": mb_per_s,
                "tokens_per_s": mb_per_s * 1e6 * mode.tokens / fresh_bytes if fresh_bytes else 0.0,
                "cores_used": statistics.median(cores) if cores else None,
                "fresh": {"bytes": mode.fresh_bytes, "seconds": mode.fresh_seconds,
                          "cpu_seconds": mode.fresh_cpu_seconds, "mb_per_s": rates},
                "repeated": repeated,
                "speedup_vs_tokenizers": (_paired_ratio(mode, hf.modes[size])
                                          if hf and size in hf.modes else None),
            }
            if report.name.startswith("gpu_tok"):
                result["vs_fastest_exact_peer"] = _fastest_exact(report, size, reports, has_oracle)
            results.append(result)
        engines.append({
            "name": report.name,
            "version": report.version,
            "status": report.status,
            "reason": report.reason,
            "note": report.note,
            "tokens": report.tokens,
            "parity": {"identical": report.identical, "total": report.total} if has_oracle else None,
            "peak_rss_mb": round(report.peak_rss_mb, 1),
            "results": results,
        })
    return {
        "schema": SCHEMA,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "threads": threads, "load_average": _load_average()},
        "corpus": {"documents": len(docs), "bytes": sum(len(d) for d in docs),
                   "set_bytes": [sum(len(d) for d in g) for g in groups]},
        "settings": settings,
        "tokenizer": {"vocab_size": tok.get_vocab_size()},
        "engines": engines,
    }


def _fastest_exact(ours: PeerReport, size: int, reports: dict[str, PeerReport],
                   has_oracle: bool) -> dict[str, Any] | None:
    """The peer with every document identical to tokenizers' that was fastest at
    this batch size, and our speed over its (median of the per-set ratios)."""
    best, best_rate = None, 0.0
    for report in reports.values():
        if report.name.startswith("gpu_tok") or not _exact(report, has_oracle) or size not in report.modes:
            continue
        rate = statistics.median(_rates(report.modes[size]) or [0.0])
        if rate > best_rate:
            best, best_rate = report, rate
    if best is None:
        return None
    return {"peer": best.name, "mb_per_s": best_rate, "ratio": _paired_ratio(ours.modes[size], best.modes[size])}


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def parity_text(engine: dict[str, Any]) -> str:
    parity = engine["parity"]
    if not parity or not parity["total"]:
        return "n/a"
    return f"{100 * parity['identical'] / parity['total']:.2f}% ({parity['identical']}/{parity['total']})"


def table(report: dict[str, Any]) -> str:
    """The report as a fixed-width text table."""
    header = (f"{'engine':<20} {'batch':>6} {'fresh MB/s':>11} {'repeated':>9} {'Mtok/s':>8} "
              f"{'vs tokenizers':>14} {'cores':>6} {'parity':>22} {'peak MB':>8}")
    lines = [header, "-" * len(header)]
    for e in report["engines"]:
        if e["status"] != "ok":
            lines.append(f"{e['name']:<20} {e['status']}: {e['reason']}")
            continue
        for r in e["results"]:
            speedup = f"{r['speedup_vs_tokenizers']:.2f}x" if r["speedup_vs_tokenizers"] else "n/a"
            repeated = f"{r['repeated']['mb_per_s']:.2f}" if r["repeated"] and r["repeated"]["mb_per_s"] else "-"
            cores = f"{r['cores_used']:.2f}" if r["cores_used"] is not None else "-"
            lines.append(f"{e['name']:<20} {r['batch_size']:>6} {r['mb_per_s']:>11.2f} {repeated:>9} "
                         f"{r['tokens_per_s'] / 1e6:>8.3f} {speedup:>14} {cores:>6} {parity_text(e):>22} "
                         f"{e['peak_rss_mb']:>8.1f}")
        if e["note"]:
            lines.append(f"{'':<20} ({e['note']})")
    lines.append("")
    for e in report["engines"]:
        for r in e["results"]:
            if "vs_fastest_exact_peer" in r:
                best = r["vs_fastest_exact_peer"]
                verdict = (f"{best['ratio']:.2f}x {best['peer']} ({best['mb_per_s']:.2f} MB/s)"
                           if best and best["ratio"] else "no exact peer measured")
                lines.append(f"{e['name']}, batch {r['batch_size']}: vs the fastest exact peer {verdict}")
    settings = report["settings"]
    lines.append("")
    lines.append(f"{_subject(report)}; threads: {report['machine']['threads']}")
    lines.append(f"fresh: each document encoded once per engine as new str objects, medians over "
                 f"{settings['sets']} disjoint document sets per batch size, engines taking turns; "
                 f"repeated: the first set again, median of {settings['repeats']} (warm caches)")
    lines.append("batch 1: the library's call for one document, where it has one")
    lines.append("parity: documents whose ids are identical to tokenizers' (the oracle; n/a without it)")
    lines.append("cores: process CPU time / wall time while encoding fresh text")
    lines.append("peak MB: most resident memory above the level before a run, sampled every 5 ms "
                 "(a rough guide: allocator caches make it noisy)")
    return "\n".join(lines)


def _subject(report: dict[str, Any]) -> str:
    """'tokenizer: ...; corpus: ...', as far as the report knows them."""
    t, c = report["tokenizer"], report["corpus"]
    tokenizer = f"{t.get('source', 'tokenizer')} (vocab {t['vocab_size']})"
    corpus = f"{c.get('source', 'corpus')}, {c['documents']} documents, {c['bytes'] / 1e6:.2f} MB"
    return f"tokenizer: {tokenizer}; corpus: {corpus}"


def figure(report: dict[str, Any]) -> Any:
    """Fresh-text throughput (MB/s) against batch size, one line per engine, its
    parity in the legend; x ticks at the measured sizes; the legend beside the plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError as err:
        raise ValueError("--plot needs matplotlib (pip install '.[bench]')") from err
    fig, ax = plt.subplots(figsize=(9, 4.8))
    sizes: set[int] = set()
    rates: list[float] = []
    for e in report["engines"]:
        if e["status"] == "ok" and e["results"]:
            xs = [r["batch_size"] for r in e["results"]]
            ys = [r["mb_per_s"] for r in e["results"]]
            sizes.update(xs)
            rates.extend(ys)
            ax.plot(xs, ys, marker="o", label=f"{e['name']} (parity {parity_text(e).split(' ')[0]})")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(ticker.FixedLocator(sorted(sizes)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    if rates and max(rates) / max(min(rates), 1e-9) > 10:
        ax.set_yscale("log")  # engines 10-100x apart: a log axis keeps every line readable
        ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(ticker.NullLocator())
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("batch size (documents per call)")
    ax.set_ylabel("fresh text, MB/s of UTF-8 input")
    subject = _subject(report).replace("; corpus:", "\ncorpus:")
    ax.set_title(f"{subject}; {report['machine']['threads']} threads", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)
    fig.tight_layout()
    return fig


def plot(report: dict[str, Any], path: str | Path) -> None:
    """`figure` into a PNG."""
    import matplotlib.pyplot as plt

    fig = figure(report)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
