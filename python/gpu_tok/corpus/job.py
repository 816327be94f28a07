"""`gpu-tok tokenize`: a corpus to token shards, in bounded memory, resumable.

The job reads documents (`readers`), encodes them a batch at a time
(`documents.encode_documents`: the library call) and cuts the token stream into
shards of whole documents (`shards`): a shard ends with the first document that
brings it to `shard_tokens` tokens. Where shards end depends only on the
documents and `shard_tokens`, never on batch sizes or timing, so a re-run cuts
the same shards and can skip the finished ones.

`manifest.json` in the output folder is the record of what is done. It is
rewritten (temporary name, then rename) after every finished shard with the
shard's files, sizes and sha256, its documents, tokens and input bytes, and
the input position after its last document. A re-run with the same job skips the shards
it lists (after checking their files' sizes and sha256: the first shard that
differs is redone, with the ones after it), deletes leftover `.tmp` files of
an interrupted shard, and starts reading after the last finished shard.

One run at a time per output folder: a run holds an exclusive `flock` on
`.tokenize.lock` in it from before it reads the manifest until it returns, and
a second run is refused at once, naming the holder's pid. The kernel drops the
lock when its process dies, however it dies, so a killed run never blocks the
next one (the file stays; its content is only the last holder's pid).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import resource
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InvalidInputError
from ..compat.tokenizer import Tokenizer
from . import shards
from .documents import encode_documents, eos_token_id
from .readers import InputFile, TextBatch, describe_inputs, read_ahead, read_batches, refusal

MANIFEST = "manifest.json"
LOCK = ".tokenize.lock"
SCHEMA = "gpu_tok.tokenize/1"
DEFAULT_SHARD_TOKENS = 100_000_000
DEFAULT_BATCH_BYTES = 4_000_000
# Batches in the engine at once. One batch alone leaves engine threads idle
# while its call holds one thread (turning str into UTF-8, packing the ids)
# and while its longest document finishes; a second batch fills those gaps.
ENCODES_IN_FLIGHT = 2


def tokenizer_sha256(tok: Tokenizer) -> str:
    """sha256 of the tokenizer's JSON as the core writes it back (about 0.7 s
    for a 150k vocabulary: pass the file's own digest when you have it)."""
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()


def _job(tok: Tokenizer, digest: str, inputs: list[InputFile], text_field: str, fmt: str, append_eos: bool,
         add_special_tokens: bool, shard_tokens: int) -> dict[str, Any]:
    """Everything that decides the output; a re-run must match it to resume."""
    return {
        "tokenizer_sha256": digest,
        "inputs": [{"path": str(f.path.resolve()), "bytes": f.size} for f in inputs],
        "text_field": text_field,
        "format": fmt,
        "add_special_tokens": add_special_tokens,
        "eos_token_id": eos_token_id(tok) if append_eos else None,
        "shard_tokens": shard_tokens,
        "vocab_size": tok.get_vocab_size(),
    }


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + shards.TMP)
    tmp.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


@contextmanager
def _exclusive(output: Path) -> Iterator[None]:
    """Holds the output folder's lock (see the module docstring) or refuses at once."""
    fd = os.open(output / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise InvalidInputError(
                f"{output} is in use by another gpu-tok tokenize run (pid {holder}); two runs into one output "
                "would damage it: wait for that one to end, or stop it and run again to resume") from None
        except OSError as err:  # a file system without flock: running unprotected could damage the output
            raise InvalidInputError(f"{output}: cannot lock {LOCK} ({err}); use an output folder on a local "
                                    "file system") from None
        pid = f"{os.getpid()}\n".encode("ascii")
        os.pwrite(fd, pid, 0)  # then cut: a reader sees an old pid or this one, never a mix
        os.ftruncate(fd, len(pid))
        yield
    finally:
        os.close(fd)  # releases the lock


def _intact(path: Path, info: dict[str, Any]) -> bool:
    return path.is_file() and path.stat().st_size == info["bytes"] and shards.file_sha256(path) == info["sha256"]


def _finished_shards(output: Path, manifest: dict[str, Any],
                     say: Callable[[str], None]) -> list[dict[str, Any]]:
    """The manifest's shards whose files are all there with their recorded sizes
    and sha256, up to the first one that is not (said, as it is redone). Files
    are hashed in parallel (hashlib releases the GIL)."""
    files = [(shard["name"], output / name, info) for shard in manifest["shards"]
             for name, info in shard["files"].items()]
    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1), thread_name_prefix="gpu_tok-verify") as pool:
        intact = list(pool.map(lambda file: _intact(file[1], file[2]), files))
    bad = next((file for file, ok in zip(files, intact, strict=True) if not ok), None)
    if bad is None:
        return list(manifest["shards"])
    name, path, _ = bad
    problem = "is missing" if not path.is_file() else "does not match its size and sha256 in manifest.json"
    say(f"{path.name} {problem}: redoing {name} and the shards after it")
    return manifest["shards"][:next(i for i, s in enumerate(manifest["shards"]) if s["name"] == name)]


def _load_manifest(output: Path, job: dict[str, Any], tokenizer_source: str | None,
                   say: Callable[[str], None]) -> dict[str, Any]:
    path = output / MANIFEST
    if not path.is_file():
        return {"schema": SCHEMA, "tokenizer": tokenizer_source, "job": job, "complete": False, "shards": []}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InvalidInputError(f"{path} cannot be read ({err}); remove it to start over") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
        raise InvalidInputError(f"{path} is not a gpu-tok tokenize manifest; use another --output")
    for key, value in job.items():
        if manifest["job"].get(key) != value:
            raise InvalidInputError(
                f"{output} holds the output of a different job ({key}: {manifest['job'].get(key)!r} before, "
                f"{value!r} now); use another --output, or remove it to start over")
    finished = _finished_shards(output, manifest, say)
    if len(finished) < len(manifest["shards"]):
        # Recorded at once: the manifest must never list a shard that is not intact.
        manifest["complete"] = False
        manifest.pop("totals", None)
        manifest["shards"] = finished
        _write_json(path, manifest)
    return manifest


def _remove_leftovers(output: Path) -> None:
    """Temporary files of a shard a killed run left half-written."""
    for path in output.glob(f"shard-*{shards.TMP}"):
        path.unlink()


def _current_rss_mb() -> float:
    """Resident memory now (Linux; 0 elsewhere). The process's peak includes
    loading the tokenizer, so the job also samples its own."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class _Progress:
    """A tqdm bar over the input bytes with tokens/s (when tqdm is installed and
    the output is a terminal), else nothing."""

    def __init__(self, total_bytes: int, enabled: bool) -> None:
        self.bar: Any = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                return
            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="tokenize", disable=None,
                            dynamic_ncols=True, smoothing=0.1)

    def update(self, source_bytes: int, tokens: int, seconds: float) -> None:
        if self.bar is not None:
            self.bar.update(source_bytes)
            self.bar.set_postfix_str(f"{tokens / max(seconds, 1e-9) / 1e6:.2f}M tokens/s", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Job:
    """One run: the open shard, the manifest, and this run's counters.

    A full shard is finished (checksums, renames, manifest) by a background
    thread while this one goes on with the next shard: hashing a 100M-token
    shard (400 MB) takes a quarter of a second or more, during which the
    encoders would otherwise wait. One shard finishes at a time, in order, so
    the manifest grows in order."""

    def __init__(self, tok: Tokenizer, output: Path, manifest: dict[str, Any], device: Any) -> None:
        self.tok, self.output, self.manifest, self.device = tok, output, manifest, device
        job = manifest["job"]
        self.fmt, self.shard_tokens, self.eos_id = job["format"], job["shard_tokens"], job["eos_token_id"]
        self.shard: shards.ShardWriter | None = None
        self.shard_name = ""
        self.next_shard = len(manifest["shards"])  # the manifest lags while a shard is finishing
        self.shard_input_bytes = 0
        self.finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpu_tok-finish")
        self.finishing: Future[None] | None = None
        self.documents = self.tokens = self.input_bytes = self.shards_written = 0
        self.started = time.perf_counter()
        self.max_rss_mb = 0.0  # resident memory sampled after each batch

    def encode(self, batch: TextBatch) -> tuple[np.ndarray, np.ndarray]:
        job = self.manifest["job"]
        try:
            return encode_documents(self.tok, batch.texts, add_special_tokens=job["add_special_tokens"],
                                    eos_id=self.eos_id, device=self.device)
        except ValueError as err:  # a text the engine refuses: name its file and line, not texts[i]
            raise refusal(batch, job["text_field"], err) from None

    def add(self, batch: TextBatch, ids: np.ndarray, offsets: np.ndarray) -> tuple[int, int]:
        """Appends a batch's documents to shards, finishing each shard at its
        fixed end; returns the input position after the batch."""
        rows, start = len(offsets) - 1, 0
        while start < rows:
            if self.shard is None:
                self.shard_name = f"shard-{self.next_shard:05d}"
                self.next_shard += 1
                self.shard = shards.open_writer(self.fmt, self.output, self.shard_name,
                                                self.manifest["job"]["vocab_size"])
            end = shards.reaching(offsets, start, self.shard_tokens - self.shard.tokens)
            self.shard.write(ids[offsets[start]:offsets[end]], offsets[start:end + 1] - offsets[start])
            self.shard_input_bytes += int(batch.record_bytes[start:end].sum())
            start = end
            if self.shard.tokens >= self.shard_tokens:
                self.finish_shard((batch.input_index, batch.first_document + end))
        self.documents += rows
        self.tokens += int(offsets[-1])
        self.input_bytes += batch.input_bytes
        return batch.input_index, batch.first_document + rows

    def finish_shard(self, end: tuple[int, int]) -> None:
        """Hands the open shard to the finisher thread (after the previous one is done)."""
        assert self.shard is not None
        self.wait_finished()  # before letting go of the open shard, which abort() removes if this raises
        shard, self.shard = self.shard, None
        self.finishing = self.finisher.submit(self._publish, shard, self.shard_name, self.shard_input_bytes, end)
        self.shard_input_bytes = 0

    def _publish(self, shard: shards.ShardWriter, name: str, input_bytes: int, end: tuple[int, int]) -> None:
        """(Finisher thread.) Completes the shard's files, then records it."""
        try:
            files = shard.finish()
        except BaseException:
            shard.abort()
            raise
        self.manifest["shards"].append({"name": name, "documents": shard.documents, "tokens": shard.tokens,
                                        "input_bytes": input_bytes, "files": files,
                                        "end": {"input": end[0], "document": end[1]}})
        self.shards_written += 1
        _write_json(self.output / MANIFEST, self.manifest)

    def wait_finished(self) -> None:
        """Waits for the shard being finished; raises its error."""
        finishing, self.finishing = self.finishing, None
        if finishing is not None:
            finishing.result()

    def abort(self) -> None:
        """After a failure: a full shard already handed over still finishes (and
        is recorded, so a re-run keeps it); the open one is removed. The failure
        that stopped the run is the one raised, not the finisher's."""
        self.finisher.shutdown(wait=True)
        self.finishing = None
        if self.shard is not None:
            self.shard.abort()
            self.shard = None

    def _write(self, batch: TextBatch, encoded: Future[tuple[np.ndarray, np.ndarray]],
               bar: _Progress) -> tuple[int, int]:
        position = self.add(batch, *encoded.result())
        bar.update(batch.source_bytes, self.tokens, time.perf_counter() - self.started)
        self.max_rss_mb = max(self.max_rss_mb, _current_rss_mb())
        return position

    def run(self, batches: Iterator[TextBatch], position: tuple[int, int], bar: _Progress) -> None:
        """Encodes and writes every batch, then finishes the last shard. The
        stages overlap: a thread reads and parses the next batches (read_ahead),
        ENCODES_IN_FLIGHT encoder threads encode the following ones (the engine
        releases the GIL), and this thread writes the finished ones, in order.
        Memory holds about read_ahead's depth + ENCODES_IN_FLIGHT + 2 batches."""
        encoder = ThreadPoolExecutor(max_workers=ENCODES_IN_FLIGHT, thread_name_prefix="gpu_tok-encode")
        try:
            # Oldest first. One more than the encoder threads: a batch waits, so an
            # encoder thread starts it the moment the oldest is done, while this
            # thread writes that one.
            pending: deque[tuple[TextBatch, Future[tuple[np.ndarray, np.ndarray]]]] = deque()
            for batch in batches:
                pending.append((batch, encoder.submit(self.encode, batch)))
                if len(pending) > ENCODES_IN_FLIGHT:
                    position = self._write(*pending.popleft(), bar)
            while pending:
                position = self._write(*pending.popleft(), bar)
            if self.shard is not None:
                self.finish_shard(position)
            self.wait_finished()
            self.finisher.shutdown(wait=True)
        except BaseException:
            self.abort()
            raise
        finally:
            encoder.shutdown(wait=True, cancel_futures=True)


def _check_pyarrow(files: list[InputFile], fmt: str) -> None:
    """Before any work: Parquet (in or out) and .zst need pyarrow, which the
    corpus extra brings."""
    needs = [f"reading {f.path}" for f in files if f.kind == "parquet" or f.compression == "zstd"]
    needs += ["--format parquet"] if fmt == "parquet" else []
    if not needs:
        return
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ImportError(f"{needs[0]} needs pyarrow, which is not installed: from the checkout, "
                          "pip install '.[corpus]'") from None


def tokenize_corpus(tok: Tokenizer, inputs: list[str | Path], output: str | Path, *, text_field: str = "text",
                    fmt: str = "npy", append_eos: bool = False, add_special_tokens: bool = False,
                    device: Any = "auto", shard_tokens: int = DEFAULT_SHARD_TOKENS,
                    batch_bytes: int = DEFAULT_BATCH_BYTES, progress: bool = False,
                    tokenizer_source: str | None = None, tokenizer_digest: str | None = None,
                    log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Tokenizes `inputs` into shards in `output` (see the module docstring) and
    returns a summary. Resumes a job that `output` holds unfinished.

    `tokenizer_digest` identifies the tokenizer in the manifest (the command
    line passes the sha256 of the tokenizer.json file); by default it is
    `tokenizer_sha256(tok)`. A resumed job must have the same one."""
    if fmt not in shards.FORMATS:
        raise ValueError(f"format must be one of {', '.join(shards.FORMATS)}, not {fmt!r}")
    if shard_tokens <= 0 or batch_bytes <= 0:
        raise ValueError("shard_tokens and batch_bytes must be positive")
    say = log or (lambda line: print(line, file=sys.stderr))
    files = describe_inputs(inputs)
    _check_pyarrow(files, fmt)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    digest = tokenizer_digest or tokenizer_sha256(tok)
    job = _job(tok, digest, files, text_field, fmt, append_eos, add_special_tokens, shard_tokens)
    with _exclusive(out):  # held until the summary: no other run may touch the output meanwhile
        manifest = _load_manifest(out, job, tokenizer_source, say)
        _remove_leftovers(out)
        resumed = len(manifest["shards"])
        run = _Job(tok, out, manifest, device)
        if not manifest["complete"]:
            last = manifest["shards"][-1]["end"] if manifest["shards"] else {"input": 0, "document": 0}
            if resumed:
                say(f"resuming: {resumed} finished shards kept, continuing at document {last['document']} "
                    f"of {files[last['input']].path}")
            bar = _Progress(sum(f.size for f in files[last["input"]:]), progress)
            try:
                run.run(read_ahead(read_batches(files, text_field, batch_bytes, (last["input"], last["document"]))),
                        (last["input"], last["document"]), bar)
            finally:
                bar.close()
            manifest["complete"] = True
            manifest["totals"] = {key: sum(s[key] for s in manifest["shards"])
                                  for key in ("documents", "tokens", "input_bytes")}
            manifest["totals"]["shards"] = len(manifest["shards"])
            _write_json(out / MANIFEST, manifest)
        seconds = time.perf_counter() - run.started
        return {
            "output": str(out),
            "format": fmt,
            "shards": len(manifest["shards"]),
            "shards_skipped": resumed,
            "shards_written": run.shards_written,
            "documents": manifest["totals"]["documents"],
            "tokens": manifest["totals"]["tokens"],
            "run": {"documents": run.documents, "tokens": run.tokens, "input_bytes": run.input_bytes,
                    "seconds": seconds, "input_mb_per_s": run.input_bytes / seconds / 1e6,
                    "tokens_per_s": run.tokens / seconds},
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "max_rss_while_tokenizing_mb": run.max_rss_mb,
        }


def summary_lines(summary: dict[str, Any]) -> list[str]:
    run = summary["run"]
    lines = [f"{summary['output']}: {summary['shards']} {summary['format']} shards, "
             f"{summary['documents']:,} documents, {summary['tokens']:,} tokens"]
    if summary["shards_skipped"] == summary["shards"] and not run["documents"]:
        return [*lines, "the job was already complete: nothing to do"]
    if summary["shards_skipped"]:
        lines.append(f"resumed: {summary['shards_skipped']} shards were already finished")
    lines.append(f"this run: {run['documents']:,} documents, {run['input_bytes'] / 1e6:,.1f} MB of input in "
                 f"{run['seconds']:.1f} s: {run['input_mb_per_s']:.1f} MB/s, {run['tokens_per_s'] / 1e6:.2f}M tokens/s")
    lines.append(f"memory: {summary['max_rss_while_tokenizing_mb']:.0f} MB resident while tokenizing, "
                 f"{summary['peak_rss_mb']:.0f} MB peak (loading the tokenizer included)")
    return lines


# -- reading the output back -------------------------------------------------------


def read_manifest(output: str | Path) -> dict[str, Any]:
    return json.loads((Path(output) / MANIFEST).read_text(encoding="utf-8"))


def iter_shards(output: str | Path) -> Any:
    """(ids, offsets) of each finished shard of a tokenize output, in order."""
    manifest = read_manifest(output)
    for shard in manifest["shards"]:
        yield shards.read_shard(manifest["job"]["format"], Path(output), shard["name"])


def load_tokens(output: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """All documents of a tokenize output as one (ids uint32, offsets int64) pair."""
    all_ids, all_offsets, base = [], [np.zeros(1, np.int64)], 0
    for ids, offsets in iter_shards(output):
        all_ids.append(np.asarray(ids, dtype=np.uint32))
        all_offsets.append(offsets[1:] + base)
        base += int(offsets[-1])
    return (np.concatenate(all_ids) if all_ids else np.zeros(0, np.uint32)), np.concatenate(all_offsets)
