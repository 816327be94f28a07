"""`gpu-tok tokenize`: the same tokens as the library call for every input
format and shard format, fixed shard ends, resuming after a kill or a failure,
and clear errors for bad inputs."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import HAVE_SHARED, SHARED_CORPUS, SHARED_TOKENIZERS, corpus_sample, ours, tokenizer_json
from gpu_tok import InvalidInputError, cli, corpus, shards

NAME = "qwen3"


def tokenizer_arg(name: str = NAME) -> str:
    return str(SHARED_TOKENIZERS / name) if HAVE_SHARED else "default"


def documents() -> list[str]:
    return corpus_sample()[:120]


def expected(texts: list[str], eos: int | None, name: str = NAME, special: bool = False) -> tuple[np.ndarray, ...]:
    """Flat ids and offsets from the library call, one document at a time."""
    rows = ours(name)(texts, add_special_tokens=special)["input_ids"]
    rows = [row + [eos] for row in rows] if eos is not None else rows
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return np.array([i for r in rows for i in r], dtype=np.uint32), offsets


def write_jsonl(path: Path, texts: list[str]) -> Path:
    lines = (json.dumps({"id": i, "text": t, "meta": {"n": i}}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    data = "".join(lines).encode("utf-8")
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(data))
    elif path.suffix == ".zst":
        with pa.CompressedOutputStream(str(path), "zstd") as out:
            out.write(data)
    else:
        path.write_bytes(data)
    return path


def run_cli(*args: str) -> int:
    return cli.main(["tokenize", "--tokenizer", tokenizer_arg(), *args])


def run(inputs: list[Path], output: Path, **options: object) -> dict:
    """The job in this process with the cached tokenizer (loading it again per
    CLI call costs about a second) and a fixed digest standing for it (computing
    it costs about as much)."""
    options.setdefault("tokenizer_digest", "test-digest")
    return corpus.tokenize_corpus(ours(NAME), inputs, output, **options)  # type: ignore[arg-type]


def assert_tokens(output: Path, want: tuple[np.ndarray, ...]) -> None:
    ids, offsets = corpus.load_tokens(output)
    np.testing.assert_array_equal(offsets, want[1])
    np.testing.assert_array_equal(ids, want[0])


def file_digests(output: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(output.glob("shard-*"))}


def assert_complete_and_intact(output: Path) -> None:
    """The manifest says complete, and every file it lists has its recorded size and sha256."""
    manifest = corpus.read_manifest(output)
    assert manifest["complete"]
    for shard in manifest["shards"]:
        for name, info in shard["files"].items():
            data = (output / name).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (info["bytes"], info["sha256"]), name


@pytest.mark.parametrize("fmt", ["npy", "megatron", "parquet"])
def test_shard_formats_hold_the_library_tokens(tmp_path: Path, fmt: str) -> None:
    texts = documents()
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    out = tmp_path / "out"
    run([source], out, fmt=fmt, append_eos=True, shard_tokens=40000, batch_bytes=200_000)
    assert_tokens(out, expected(texts, ours(NAME).eos_token_id))
    manifest = corpus.read_manifest(out)
    assert manifest["complete"] and len(manifest["shards"]) > 3
    assert manifest["totals"]["documents"] == len(texts)
    for shard in manifest["shards"]:  # sizes and checksums are those of the files
        assert shard["tokens"] >= 40000 or shard is manifest["shards"][-1]
        for name, info in shard["files"].items():
            data = (out / name).read_bytes()
            assert (len(data), hashlib.sha256(data).hexdigest()) == (info["bytes"], info["sha256"])
    assert not list(out.glob("*.tmp"))


def test_megatron_index_layout(tmp_path: Path) -> None:
    """The .idx bytes as Megatron-LM's MMapIndexedDataset reads them; a small
    vocabulary (bert-minilm) gets uint16 ids, as Megatron's optimal_dtype."""
    texts = documents()[:20]
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    name = "bert-minilm" if HAVE_SHARED else NAME
    args = ["--tokenizer", str(SHARED_TOKENIZERS / name) if HAVE_SHARED else "default"]
    assert cli.main(["tokenize", *args, str(source), "--output", str(tmp_path / "out"), "--format", "megatron",
                     "--add-special-tokens"]) == 0
    idx = (tmp_path / "out" / "shard-00000.idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00" and struct.unpack("<Q", idx[9:17]) == (1,)
    code = idx[17]
    assert code == (8 if name == "bert-minilm" else 4)  # uint16 / int32
    sequences, docs = struct.unpack("<QQ", idx[18:34])
    assert (sequences, docs) == (20, 21)
    lengths = np.frombuffer(idx, np.int32, sequences, 34)
    pointers = np.frombuffer(idx, np.int64, sequences, 34 + 4 * sequences)
    document_indices = np.frombuffer(idx, np.int64, docs, 34 + 12 * sequences)
    item = 2 if code == 8 else 4
    np.testing.assert_array_equal(pointers, np.concatenate([[0], np.cumsum(lengths)[:-1]]) * item)
    np.testing.assert_array_equal(document_indices, np.arange(21))
    assert len(idx) == 34 + 12 * sequences + 8 * docs
    bin_ids = np.fromfile(tmp_path / "out" / "shard-00000.bin", np.uint16 if code == 8 else np.int32)
    want = expected(texts, None, name, special=True)
    np.testing.assert_array_equal(bin_ids, want[0])
    np.testing.assert_array_equal(lengths, np.diff(want[1]))


def write_input(tmp_path: Path, kind: str, texts: list[str]) -> list[Path]:
    if kind in ("jsonl", "jsonl.gz", "jsonl.zst"):
        return [write_jsonl(tmp_path / f"docs.{kind}", texts)]
    if kind in ("txt", "txt.gz"):
        path = tmp_path / f"docs.{kind}"
        data = "".join(t + "\n" for t in texts).encode("utf-8")
        path.write_bytes(gzip.compress(data) if kind == "txt.gz" else data)
        return [path]
    if kind in ("parquet", "parquet-large"):
        path = tmp_path / "docs.parquet"
        column = pa.array(texts, type=pa.large_string() if kind == "parquet-large" else pa.string())
        pq.write_table(pa.table({"id": range(len(texts)), "text": column}), path, row_group_size=37)
        return [path]
    assert kind == "several"
    return [write_jsonl(tmp_path / "a.jsonl", texts[:50]), write_jsonl(tmp_path / "b.jsonl.gz", texts[50:90]),
            *write_input(tmp_path, "parquet", texts[90:])]


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "jsonl.zst", "txt", "txt.gz", "parquet", "parquet-large",
                                  "several"])
def test_input_formats_give_the_library_tokens(tmp_path: Path, kind: str) -> None:
    texts = documents()
    if kind.startswith("txt"):  # one document per line: no line breaks inside, none empty
        texts = [t.replace("\r", " ").replace("\n", " ") for t in texts if t.strip()]
    inputs = write_input(tmp_path, kind, texts)
    run(inputs, tmp_path / "out", batch_bytes=100_000)
    assert_tokens(tmp_path / "out", expected(texts, None))


def test_blank_lines_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"text": "one"}\n\n  \n{"text": "two"}', encoding="utf-8")
    (tmp_path / "b.txt").write_bytes(b"three\r\n\r\n\nfour")
    run([tmp_path / "a.jsonl", tmp_path / "b.txt"], tmp_path / "out")
    assert_tokens(tmp_path / "out", expected(["one", "two", "three", "four"], None))


@pytest.mark.skipif(not HAVE_SHARED, reason="needs ../shared/corpus")
def test_whole_shared_corpus_matches_encode_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = SHARED_CORPUS / "mixed.jsonl"
    assert run_cli(str(source), "--output", str(tmp_path / "out"), "--shard-tokens", "2000000", "--append-eos") == 0
    assert "3,506 documents" in capsys.readouterr().out
    with source.open(encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    enc = ours(NAME).encode_batch(texts, add_special_tokens=False, padding=False, truncation=False)
    ids, offsets = np.asarray(enc.input_ids), np.asarray(enc.row_offsets)
    eos = ours(NAME).eos_token_id
    want_offsets = offsets + np.arange(len(offsets))
    want = np.full(want_offsets[-1], eos, dtype=np.uint32)
    for i in range(len(texts)):  # every document, then its EOS
        want[want_offsets[i]:want_offsets[i + 1] - 1] = ids[offsets[i]:offsets[i + 1]]
    assert_tokens(tmp_path / "out", (want, want_offsets))


def test_shard_ends_do_not_depend_on_batch_size(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    for label, batch in (("small", 20_000), ("large", 50_000_000)):
        run([source], tmp_path / label, shard_tokens=30000, batch_bytes=batch)
    assert file_digests(tmp_path / "small") == file_digests(tmp_path / "large")


def test_rerun_skips_a_finished_job_and_refuses_another(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", documents()[:30])
    out = str(tmp_path / "out")
    # The command line names the tokenizer by its file's sha256; so does this first run.
    cli_digest = hashlib.sha256(tokenizer_json(NAME).encode("utf-8")).hexdigest()
    run([source], Path(out), shard_tokens=20000, tokenizer_digest=cli_digest)
    before = file_digests(tmp_path / "out")
    summary = run([source], Path(out), shard_tokens=20000, tokenizer_digest=cli_digest)
    assert summary["shards_written"] == 0 and summary["shards_skipped"] == len(before) // 2
    assert corpus.summary_lines(summary)[-1] == "the job was already complete: nothing to do"
    capsys.readouterr()
    assert run_cli(str(source), "--output", out, "--shard-tokens", "20000", "--append-eos") == 1
    assert "different job (eos_token_id" in capsys.readouterr().err
    assert file_digests(tmp_path / "out") == before
    with pytest.raises(InvalidInputError, match="different job .tokenizer_sha256"):
        run([source], Path(out), shard_tokens=20000, tokenizer_digest=None)  # the object's digest, not the file's


def test_a_damaged_shard_is_redone(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    out = tmp_path / "out"
    run([source], out, shard_tokens=40000, fmt="parquet")
    before = file_digests(out)
    (out / "shard-00002.parquet").write_bytes(b"truncated")
    summary = run([source], out, fmt="parquet", shard_tokens=40000)
    assert summary["shards_skipped"] == 2 and file_digests(out) == before


@pytest.mark.parametrize(("kind", "fmt"), [("jsonl", "megatron"), ("txt.gz", "npy"), ("parquet", "parquet")])
def test_resume_after_a_failure_mid_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str,
                                          fmt: str) -> None:
    """Every reader's way of skipping the finished documents, every writer's clean-up."""
    texts = [t.replace("\r", " ").replace("\n", " ") for t in documents() if t.strip()]
    [source] = write_input(tmp_path, kind, texts)
    args = {"fmt": fmt, "shard_tokens": 50000, "batch_bytes": 30_000, "append_eos": True}

    real, calls = corpus.job.encode_documents, []

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(corpus.job, "encode_documents", counting)
    run([source], tmp_path / "whole", **args)
    fail_at, calls = len(calls) // 2, []

    def failing(*a, **k):
        calls.append(1)
        if len(calls) == fail_at:
            raise RuntimeError("injected failure")
        return real(*a, **k)

    monkeypatch.setattr(corpus.job, "encode_documents", failing)
    with pytest.raises(RuntimeError, match="injected"):
        run([source], tmp_path / "out", **args)
    done = corpus.read_manifest(tmp_path / "out")
    assert not done["complete"] and 0 < len(done["shards"]) and not list((tmp_path / "out").glob("*.tmp"))
    monkeypatch.setattr(corpus.job, "encode_documents", real)
    summary = run([source], tmp_path / "out", **args)
    assert summary["shards_skipped"] == len(done["shards"]) and summary["shards_written"] > 0
    assert file_digests(tmp_path / "out") == file_digests(tmp_path / "whole")
    assert corpus.read_manifest(tmp_path / "out")["shards"] == corpus.read_manifest(tmp_path / "whole")["shards"]


def test_resume_after_sigkills_mid_shard(tmp_path: Path) -> None:
    """Kill a real run (SIGKILL: no clean-up) while a shard is half-written,
    re-run and kill again (GPU_TOK_CORPUS_KILLS times, 1 by default), then let
    a re-run finish, and compare with an uninterrupted run."""
    kills = int(os.environ.get("GPU_TOK_CORPUS_KILLS", "1"))
    texts = corpus_sample()
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    args = ["--tokenizer", tokenizer_arg(), str(source), "--shard-tokens", "50000", "--batch-mb", "0.05",
            "--format", "npy", "--threads", "1"]
    command = [sys.executable, "-m", "gpu_tok", "tokenize", *args]
    subprocess.run([*command, "--output", str(tmp_path / "whole")], check=True, capture_output=True, timeout=120)
    out, manifest, finished = tmp_path / "out", tmp_path / "out" / "manifest.json", 0
    for _ in range(kills):
        process = subprocess.Popen([*command, "--output", str(out)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            # Wait until this run has finished a shard (the first: two) and is writing the next one.
            while time.monotonic() < deadline and process.poll() is None:
                if (manifest.is_file() and len(json.loads(manifest.read_text())["shards"]) >= max(finished + 1, 2)
                        and list(out.glob("*.tmp"))):
                    break
                time.sleep(0.002)
            process.send_signal(signal.SIGKILL)
        finally:
            process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
        killed = json.loads(manifest.read_text())
        assert not killed["complete"] and list(out.glob("*.tmp"))  # a half-written shard was left behind
        # The dead run's lock file names it; the lock itself died with it (flock), so it blocks nothing.
        assert (out / corpus.LOCK).read_text().split() == [str(process.pid)]
        finished = len(killed["shards"])
    result = subprocess.run([*command, "--output", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr
    assert not list(out.glob("*.tmp"))
    assert file_digests(out) == file_digests(tmp_path / "whole")
    whole = json.loads((tmp_path / "whole" / "manifest.json").read_text())
    assert json.loads(manifest.read_text())["shards"] == whole["shards"]
    print(f"{kills} SIGKILLs mid-shard, then a resume: shards identical to an uninterrupted run")


BAD_LINES = [
    ('{"text": "ok"}\n{"text": "a",}\n', ":2: not valid JSON"),
    ('{"text": "ok"}\n\n{"body": "a"}\n', ":3: no field 'text' (fields: 'body')"),
    ('{"text": 5}\n', ":1: field 'text' is int, not a string"),
    ('{"text": null}\n', ":1: field 'text' is null, not a string"),
    ('["text"]\n', ":1: expected a JSON object, found list"),
]


@pytest.mark.parametrize(("content", "message"), BAD_LINES)
def test_bad_json_lines_name_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError) as error:
        run([path], tmp_path / "out")
    assert f"{path}{message}" in str(error.value)


def test_other_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = []
    cases.append(([str(tmp_path / "missing.jsonl")], "missing.jsonl: no such file"))
    (tmp_path / "bad.txt").write_bytes(b"fine\nnot \xff utf-8\n")
    cases.append(([str(tmp_path / "bad.txt")], "bad.txt:2: not UTF-8"))
    (tmp_path / "data.csv").write_text("a,b\n", encoding="utf-8")
    cases.append(([str(tmp_path / "data.csv")], "unknown input format"))
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "nocol.parquet")
    cases.append(([str(tmp_path / "nocol.parquet")], "no column 'text' (columns: 'body')"))
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "ints.parquet")
    cases.append(([str(tmp_path / "ints.parquet")], "column 'text' holds int64, not strings"))
    pq.write_table(pa.table({"text": ["a", None]}), tmp_path / "nulls.parquet")
    cases.append(([str(tmp_path / "nulls.parquet")], "nulls.parquet: row 2: column 'text' is null"))
    (tmp_path / "gz.jsonl.gz").write_bytes(gzip.compress(b'{"text": "a"}\n{"text": 1}\n'))
    cases.append(([str(tmp_path / "gz.jsonl.gz")], "gz.jsonl.gz:2: field 'text' is int"))
    for inputs, message in cases:
        with pytest.raises(InvalidInputError) as error:
            run(inputs, tmp_path / "out")  # type: ignore[arg-type]
        assert message in str(error.value), (message, str(error.value))
    # The command line prints the same message and exits with 1.
    assert run_cli(str(tmp_path / "bad.txt"), "--output", str(tmp_path / "out")) == 1
    assert "bad.txt:2: not UTF-8" in capsys.readouterr().err


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["tokenize", "x.jsonl"])
    assert exit_info.value.code == 2 and "--output" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["tokenize", "x.jsonl", "--output", "o", "--format", "bin"])
    assert exit_info.value.code == 2


def test_append_eos_needs_an_eos_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A tokenizer.json alone (no tokenizer_config.json) names no EOS; a small one loads fast.
    (tmp_path / "tokenizer.json").write_text(tokenizer_json("bert-minilm" if HAVE_SHARED else NAME), encoding="utf-8")
    source = write_jsonl(tmp_path / "docs.jsonl", ["a"])
    assert cli.main(["tokenize", "--tokenizer", str(tmp_path / "tokenizer.json"), str(source), "--output",
                     str(tmp_path / "out"), "--append-eos"]) == 1
    assert "names no eos_token" in capsys.readouterr().err


def test_reading_ahead_stops_with_the_consumer() -> None:
    from gpu_tok.corpus_readers import read_ahead

    def endless():
        n = 0
        while True:
            n += 1
            yield n

    ahead = read_ahead(endless())  # type: ignore[arg-type]
    assert [next(ahead) for _ in range(3)] == [1, 2, 3]
    ahead.close()  # the reader thread is joined, not left blocked on a full queue


def test_shard_writers_write_nothing_under_final_names_until_done(tmp_path: Path) -> None:
    ids = np.arange(10, dtype=np.uint32)
    offsets = np.array([0, 4, 10])
    for fmt in shards.FORMATS:
        names = shards.file_names(fmt, f"s-{fmt}")
        writer = shards.open_writer(fmt, tmp_path, f"s-{fmt}", 1000)
        writer.write(ids, offsets)
        assert not any((tmp_path / name).exists() for name in names)
        writer.abort()
        assert not list(tmp_path.glob("*.tmp"))
        writer = shards.open_writer(fmt, tmp_path, f"s-{fmt}", 1000)
        writer.write(ids, offsets)
        writer.write(ids[:3], np.array([0, 3]))
        files = writer.finish()
        assert sorted(files) == sorted(shards.file_names(fmt, f"s-{fmt}"))
        got_ids, got_offsets = shards.read_shard(fmt, tmp_path, f"s-{fmt}")
        np.testing.assert_array_equal(got_ids, [*range(10), 0, 1, 2])
        np.testing.assert_array_equal(got_offsets, [0, 4, 10, 13])
    assert not list(tmp_path.glob("*.tmp"))


def test_reading_ahead_keeps_order_and_raises_the_readers_error() -> None:
    from gpu_tok.corpus_readers import read_ahead

    def failing():
        yield from range(5)
        raise InvalidInputError("data.jsonl:6: not valid JSON")

    got = []
    with pytest.raises(InvalidInputError, match="data.jsonl:6: not valid JSON"):
        for item in read_ahead(failing()):  # type: ignore[arg-type]
            got.append(item)
    assert got == [0, 1, 2, 3, 4]  # every batch before the error, in order
    assert not [t for t in threading.enumerate() if t.name == "gpu_tok-reader"]


def slowed_encodes(monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> None:
    """Makes every other encode call slow, so that later batches finish before
    earlier ones; call `fail_at` (counting from 1) fails while the one before is
    still encoding."""
    real, lock, calls = corpus.job.encode_documents, threading.Lock(), [0]

    def slowed(*a, **k):
        with lock:
            calls[0] += 1
            n = calls[0]
        if n == fail_at:
            raise RuntimeError("injected failure")
        if n % 2:
            time.sleep(0.05)
        return real(*a, **k)

    monkeypatch.setattr(corpus.job, "encode_documents", slowed)


@pytest.mark.parametrize("fmt", ["npy", "parquet"])
def test_batches_encoded_out_of_order_are_written_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           fmt: str) -> None:
    texts = documents()
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    args = {"fmt": fmt, "shard_tokens": 30000, "append_eos": True}
    run([source], tmp_path / "whole", **args)  # one batch
    slowed_encodes(monkeypatch)
    run([source], tmp_path / "out", batch_bytes=20_000, **args)
    assert_tokens(tmp_path / "out", expected(texts, ours(NAME).eos_token_id))

    def ends(output: Path) -> list[tuple]:
        return [(s["name"], s["documents"], s["tokens"], s["end"]) for s in corpus.read_manifest(output)["shards"]]

    assert ends(tmp_path / "out") == ends(tmp_path / "whole")
    assert file_digests(tmp_path / "out") == file_digests(tmp_path / "whole")


def test_a_failure_with_batches_in_flight_leaves_only_whole_shards(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    args = {"shard_tokens": 30000, "batch_bytes": 20_000}
    run([source], tmp_path / "whole", **args)
    slowed_encodes(monkeypatch, fail_at=8)
    with pytest.raises(RuntimeError, match="injected"):
        run([source], tmp_path / "out", **args)
    done = corpus.read_manifest(tmp_path / "out")
    assert not done["complete"] and done["shards"] and not list((tmp_path / "out").glob("*.tmp"))
    whole = file_digests(tmp_path / "whole")
    assert {name: whole[name] for name in file_digests(tmp_path / "out")} == file_digests(tmp_path / "out")
    monkeypatch.undo()
    summary = run([source], tmp_path / "out", **args)
    assert summary["shards_skipped"] == len(done["shards"])
    assert file_digests(tmp_path / "out") == whole


def test_a_shard_that_fails_to_finish_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards are finished (hashed, renamed, recorded) in a background thread:
    its error is raised, the shards before it stay recorded, a re-run redoes it."""
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    args = {"shard_tokens": 30000, "batch_bytes": 20_000}
    run([source], tmp_path / "whole", **args)
    real = shards.file_sha256

    def failing(path: Path) -> str:
        if path.name.startswith("shard-00001"):
            raise OSError("no space left on device")
        return real(path)

    monkeypatch.setattr(shards, "file_sha256", failing)
    with pytest.raises(OSError, match="no space left"):
        run([source], tmp_path / "out", **args)
    done = corpus.read_manifest(tmp_path / "out")
    assert [s["name"] for s in done["shards"]] == ["shard-00000"] and not done["complete"]
    assert not list((tmp_path / "out").glob("shard-0000[12]*"))  # nothing of it left, nor of the next one
    monkeypatch.undo()
    run([source], tmp_path / "out", **args)
    assert file_digests(tmp_path / "out") == file_digests(tmp_path / "whole")


# -- one run per output folder, and shards checked on resume --------------------------

# A real `gpu-tok tokenize` process whose first encode waits (until argv[2] exists,
# 60 s at most) after saying so (creating argv[1]): it holds its output meanwhile.
HELD_RUN = """
import sys, time
from pathlib import Path
from gpu_tok import cli, corpus
real = corpus.job.encode_documents
def held(*args, **kwargs):
    Path(sys.argv[1]).touch()
    deadline = time.monotonic() + 60
    while not Path(sys.argv[2]).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return real(*args, **kwargs)
corpus.job.encode_documents = held
sys.exit(cli.main(sys.argv[3:]))
"""


def tokenize_command(source: Path, output: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "gpu_tok", "tokenize", "--tokenizer", tokenizer_arg(), str(source), "--output",
            str(output), "--threads", "1", *options]


def test_a_second_run_is_refused_while_the_first_holds_the_output(tmp_path: Path) -> None:
    """Two real processes: the second is refused at once, naming the first's pid,
    and leaves the first's output alone."""
    texts = documents()
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    out, started, go = tmp_path / "out", tmp_path / "started", tmp_path / "go"
    command = tokenize_command(source, out, "--shard-tokens", "30000", "--batch-mb", "0.02")
    first = subprocess.Popen([sys.executable, "-c", HELD_RUN, str(started), str(go), *command[3:]],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.exists(), "the first run did not start encoding"
        second = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        go.touch()
        _, first_err = first.communicate(timeout=120)
    assert second.returncode == 1, second.stderr
    assert f"is in use by another gpu-tok tokenize run (pid {first.pid})" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.returncode == 0, first_err
    assert_complete_and_intact(out)
    assert_tokens(out, expected(texts, None))


def test_concurrent_runs_into_one_output_leave_it_intact(tmp_path: Path) -> None:
    """Two identical runs started together, GPU_TOK_CORPUS_TRIALS times (2 by
    default): one runs, the other is refused (or, started after the first has
    finished, finds the job complete); the output is always whole and intact."""
    trials = int(os.environ.get("GPU_TOK_CORPUS_TRIALS", "2"))
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    options = ("--shard-tokens", "30000", "--batch-mb", "0.02")
    run([source], tmp_path / "whole", shard_tokens=30000, batch_bytes=20_000)
    refused = 0
    for trial in range(trials):
        out = tmp_path / f"out-{trial}"
        runs = [subprocess.Popen(tokenize_command(source, out, *options), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.pid, *p.communicate(timeout=120), p.returncode) for p in runs]
        assert sorted(r[3] for r in results) in ([0, 0], [0, 1]), results
        for pid, _, err, code in results:
            if code == 1:
                other = next(r[0] for r in results if r[0] != pid)
                assert f"in use by another gpu-tok tokenize run (pid {other})" in err, err
                refused += 1
        assert_complete_and_intact(out)
        assert file_digests(out) == file_digests(tmp_path / "whole")
    print(f"{trials} trials of two concurrent runs: {refused} refused, 0 outputs damaged")


@pytest.mark.parametrize("fmt", ["megatron", "parquet"])
def test_a_shard_changed_after_it_was_finished_is_redone(tmp_path: Path, fmt: str) -> None:
    """Same size, other bytes: the sha256 on resume catches it; the shard and
    those after it are redone, and the job is not reported complete before."""
    source = write_jsonl(tmp_path / "docs.jsonl", documents())
    out = tmp_path / "out"
    run([source], out, fmt=fmt, shard_tokens=40000)
    before = file_digests(out)
    damaged = out / shards.file_names(fmt, "shard-00001")[0]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    said: list[str] = []
    summary = run([source], out, fmt=fmt, shard_tokens=40000, log=said.append)
    assert summary["shards_skipped"] == 1
    assert summary["shards_written"] == len(before) // len(shards.file_names(fmt, "x")) - 1
    said_about_it = f"{damaged.name} does not match its size and sha256 in manifest.json: redoing shard-00001"
    assert any(said_about_it in line for line in said), said
    assert file_digests(out) == before
    assert_complete_and_intact(out)


# -- resumed shards are the same bytes ----------------------------------------------


@pytest.mark.parametrize("fmt", shards.FORMATS)
def test_a_run_interrupted_at_several_points_resumes_to_identical_shards(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        fmt: str) -> None:
    """Each resume restarts mid-way through the whole run's batches (at the first
    document of the interrupted shard); every format's bytes must not depend on it."""
    texts = documents()
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    args = {"fmt": fmt, "shard_tokens": 25000, "batch_bytes": 15_000, "append_eos": True}
    monkeypatch.setattr(shards, "ROW_GROUP_TOKENS", 4000)  # Parquet: several row groups per shard
    run([source], tmp_path / "whole", **args)
    if fmt == "parquet":  # row groups end at the first document reaching 4000 tokens, as shards do
        shard = pq.ParquetFile(tmp_path / "whole" / "shard-00000.parquet")
        groups = [shard.read_row_group(g).column(0).to_pylist() for g in range(shard.num_row_groups)]
        assert len(groups) > 3
        for rows in groups[:-1]:
            assert sum(map(len, rows)) >= 4000 > sum(map(len, rows[:-1]))
    real, out, finished = corpus.job.encode_documents, tmp_path / "out", 0
    for later in (1, 3, 2):  # encode calls after the run's first finished shard

        def failing(*a, later=later, before=finished, since=[0], **k):  # noqa: B006 - a counter per run
            if (out / corpus.MANIFEST).exists() and len(corpus.read_manifest(out)["shards"]) > before:
                since[0] += 1
                if since[0] == later:
                    raise RuntimeError("injected interruption")
            return real(*a, **k)

        monkeypatch.setattr(corpus.job, "encode_documents", failing)
        with pytest.raises(RuntimeError, match="injected"):
            run([source], out, **args)
        now = len(corpus.read_manifest(out)["shards"])
        assert now > finished
        finished = now
    monkeypatch.setattr(corpus.job, "encode_documents", real)
    summary = run([source], tmp_path / "out", **args)
    assert summary["shards_skipped"] == finished and summary["shards_written"] > 0
    assert file_digests(tmp_path / "out") == file_digests(tmp_path / "whole")
    assert corpus.read_manifest(tmp_path / "out")["shards"] == corpus.read_manifest(tmp_path / "whole")["shards"]


# -- damaged and hostile inputs: the file and line, never a traceback -----------------


def damaged_inputs(tmp_path: Path) -> list[tuple[Path, str]]:
    """(input, the start of the message it must give): compressed files that end
    early or are not what their names say, hostile records."""
    lines = [json.dumps({"text": f"document {i} " * 40}) + "\n" for i in range(3000)]
    data = "".join(lines).encode("utf-8")
    cases = []
    packed = gzip.compress(data)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    readable = zlib.decompressobj(31).decompress(packed[: len(packed) // 2])  # what gzip can give before the end
    line = readable.count(b"\n") + 1
    cases.append((cut, f"{cut}:{line}: cannot read the gzip data"))
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_bytes(data)
    cases.append((plain, f"{plain}:1: cannot read the gzip data"))
    zst = tmp_path / "whole.jsonl.zst"
    write_jsonl(zst, [f"document {i} " * 40 for i in range(3000)])
    cut_zst = tmp_path / "cut.jsonl.zst"
    cut_zst.write_bytes(zst.read_bytes()[: zst.stat().st_size // 2])
    cases.append((cut_zst, f"{cut_zst}:<n>: cannot read the zstd data"))
    plain_zst = tmp_path / "plain.jsonl.zst"
    plain_zst.write_bytes(data)
    cases.append((plain_zst, f"{plain_zst}:1: cannot read the zstd data"))
    # 100k levels deep; NaN, which orjson refuses, sends the line to json, whose parser recurses.
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "fine"}\n' + '{"n": NaN, "x": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000
                    + ', "text": "b"}\n', encoding="utf-8")
    cases.append((deep, f"{deep}:2: JSON nested too deeply"))
    surrogate = tmp_path / "surrogate.jsonl"
    records = [json.dumps({"text": f"d{i}"}) for i in range(60)]
    records[50] = '{"text": "a \\ud800 b"}'  # a lone surrogate escape: valid JSON, not text
    surrogate.write_text("\n".join(records[:30]) + "\n\n" + "\n".join(records[30:]) + "\n", encoding="utf-8")
    cases.append((surrogate, f"{surrogate}:52: field 'text' is not valid Unicode"))
    bad_utf8 = tmp_path / "bad-utf8.parquet"
    pq.write_table(pa.table({"text": pa.array([b"ok", b"fine", b"not \xff utf-8"], pa.binary()).view(pa.string())}),
                   bad_utf8)
    cases.append((bad_utf8, f"{bad_utf8}: row 3: column 'text' is not valid UTF-8"))
    return cases


def test_damaged_and_hostile_inputs_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each one an InvalidInputError naming the place (what the command line
    prints, exit 1), never another exception, and no output reported complete."""
    cases = damaged_inputs(tmp_path)
    for source, message in cases:
        out = tmp_path / f"out-{source.name}"
        with pytest.raises(InvalidInputError) as error:
            run([source], out, batch_bytes=10_000)
        assert re.match(re.escape(message).replace(re.escape("<n>"), r"\d+"), str(error.value)), (message, error)
        if (out / corpus.MANIFEST).exists():
            assert not corpus.read_manifest(out)["complete"]
    source, message = cases[0]  # (cli.main lets any other exception escape: a traceback)
    assert run_cli(str(source), "--output", str(tmp_path / "cli")) == 1
    assert capsys.readouterr().err.startswith(f"gpu-tok: error: {message}")


def test_any_other_refusal_of_a_batch_names_its_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"text": "a"}\n\n{"text": "b"}\n{"text": "c"}\n', encoding="utf-8")

    def refusing(*a, **k):
        raise InvalidInputError("a limit of the engine")

    monkeypatch.setattr(corpus.job, "encode_documents", refusing)
    with pytest.raises(InvalidInputError, match=re.escape(f"{source}: lines 1-4: a limit of the engine")):
        run([source], tmp_path / "out")


def test_surrogate_pairs_are_text(tmp_path: Path) -> None:
    """A pair of surrogate escapes is one character (json and orjson agree)."""
    source = tmp_path / "pairs.jsonl"
    source.write_text('{"text": "smile \\ud83d\\ude00 done"}\n', encoding="utf-8")
    run([source], tmp_path / "out")
    assert_tokens(tmp_path / "out", expected(["smile \U0001f600 done"], None))


def test_an_orjson_without_a_depth_limit_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """orjson before 3.9.15 parses any depth and overflows the C stack (a crash,
    CVE-2024-27454): the reader uses json instead."""
    import types

    from gpu_tok import corpus_readers

    for version, fast in (("3.8.3", False), ("3.9.14", False), ("3.9.15", True), ("3.13.0", True)):
        fake = types.ModuleType("orjson")
        fake.__version__ = version  # type: ignore[attr-defined]
        fake.loads = lambda line: None  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "orjson", fake)
        assert (corpus_readers._fast_loads_function() is fake.loads) == fast, version


# -- without the corpus extra, and without orjson -----------------------------------

# Runs the command line with some modules impossible to import (argv[1], comma-separated).
WITHOUT_MODULES = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from gpu_tok import cli
sys.exit(cli.main(sys.argv[2:]))
"""


def run_without(modules: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_MODULES, modules, *args], capture_output=True, text=True,
                          timeout=120)


def test_without_numpy_tokenize_names_the_extra(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "docs.jsonl", ["a"])
    done = run_without("numpy", "tokenize", str(source), "--output", str(tmp_path / "out"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "gpu-tok tokenize needs the corpus extra (from the checkout: pip install '.[corpus]')" in done.stderr
    assert "numpy" in done.stderr


def test_without_orjson_the_json_parser_gives_the_same_shards(tmp_path: Path) -> None:
    texts = documents()[:40]
    source = write_jsonl(tmp_path / "docs.jsonl", texts)
    run([source], tmp_path / "with", shard_tokens=20000)
    done = run_without("orjson", "tokenize", "--tokenizer", tokenizer_arg(), str(source), "--output",
                       str(tmp_path / "without"), "--shard-tokens", "20000", "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert file_digests(tmp_path / "without") == file_digests(tmp_path / "with")


@pytest.mark.parametrize(("content", "message"), [
    *BAD_LINES,
    ('{"text": "ok"}\n{"text": "\\udc00"}\n', ":2: field 'text' is not valid Unicode"),
    ('{"text": "ok"}\n' + "[" * 50_000 + "]" * 50_000 + "\n", ":2: JSON nested too deeply"),
])
def test_the_json_fallback_reads_and_refuses_as_orjson_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            content: str, message: str) -> None:
    """The parser used without orjson: the same texts, the same errors."""
    from gpu_tok import corpus_readers

    monkeypatch.setattr(corpus_readers, "_fast_loads", corpus_readers._json_loads)
    good = write_jsonl(tmp_path / "good.jsonl", documents()[:20])
    run([good], tmp_path / "good")
    assert_tokens(tmp_path / "good", expected(documents()[:20], None))
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInputError) as error:
        run([path], tmp_path / "out")
    assert f"{path}{message}" in str(error.value)


@pytest.mark.parametrize(("kind", "fmt"), [("jsonl.zst", "npy"), ("parquet", "npy"), ("jsonl", "parquet")])
def test_without_pyarrow_what_needs_it_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], kind: str, fmt: str) -> None:
    [source] = write_input(tmp_path, kind, ["a", "b"])
    needs = "--format parquet" if fmt == "parquet" else f"reading {source}"
    for module in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.setitem(sys.modules, module, None)
    assert run_cli(str(source), "--output", str(tmp_path / "out"), "--format", fmt) == 1
    err = capsys.readouterr().err
    assert f"{needs} needs pyarrow" in err and "pip install '.[corpus]'" in err, err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("shard-*"))
