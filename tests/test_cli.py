"""The `gpu-tok` command, driven as a user would: subprocesses, exit codes, files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gpu_tok
import pytest
from conftest import tokenizer_config, tokenizer_json


def run(*args: str, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_tok", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bert")
    (folder / "tokenizer.json").write_text(tokenizer_json("bert-minilm"), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config("bert-minilm")), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "tiny.jsonl"
    docs = ["Hello world.", "Grüße aus Köln — 東京 🤷", "def f(x):\n    return x ** 2\n"] * 10
    path.write_text("".join(json.dumps({"body": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def test_default_bench_runs_out_of_the_box(tmp_path: Path) -> None:
    out_json, out_png = tmp_path / "r.json", tmp_path / "r.png"
    done = run("bench", "--repeats", "1", "--compare", "tokenizers,tiktoken",
               "--json", str(out_json), "--plot", str(out_png))
    assert done.returncode == 0, done.stderr
    assert "gpu_tok[cpu]" in done.stdout and "tokenizers" in done.stdout
    # The table says what was measured, and what its columns mean.
    assert "tokenizer: embedded Qwen3 (vocab" in done.stdout and "corpus: embedded 1 MB" in done.stdout
    assert "parity: documents whose ids are identical" in done.stdout and "peak MB:" in done.stdout
    assert f"wrote {out_json}" in done.stdout and f"wrote {out_png}" in done.stdout
    report = json.loads(out_json.read_text())
    assert report["settings"]["batch_sizes"] == [1, 64, 1024]  # a sweep, so the plot has lines
    assert report["tokenizer"]["source"] == "embedded Qwen3"
    assert report["schema"] == "gpu_tok.bench/2"
    assert report["corpus"]["documents"] > 100 and report["corpus"]["bytes"] > 900_000
    engines = {e["name"]: e for e in report["engines"]}
    ours = engines["gpu_tok[cpu]"]
    assert ours["status"] == "ok"
    assert ours["parity"]["identical"] == ours["parity"]["total"] == report["corpus"]["documents"]
    assert ours["tokens"] == engines["tokenizers"]["tokens"] > 0
    result = ours["results"][0]
    assert set(result) >= {"batch_size", "fresh", "repeated", "mb_per_s", "tokens_per_s", "speedup_vs_tokenizers",
                           "vs_fastest_exact_peer", "cores_used"}
    assert result["mb_per_s"] > 0 and result["speedup_vs_tokenizers"] > 0
    assert len(result["fresh"]["seconds"]) == report["settings"]["sets"] == 3
    assert result["vs_fastest_exact_peer"]["peer"] in ("tokenizers", "tiktoken")
    assert [r["batch_size"] for r in ours["results"]] == [1, 64, 1024]
    assert out_png.stat().st_size > 1000 and out_png.read_bytes()[:4] == b"\x89PNG"


def test_bench_on_user_files(model_dir: Path, tiny_corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = run("bench", "--tokenizer", str(model_dir), "--corpus", str(tiny_corpus), "--text-field", "body",
               "--batch-sizes", "1,8", "--repeats", "2", "--threads", "1", "--compare", "tokenizers",
               "--device", "all", "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    assert report["corpus"]["documents"] == 30
    assert report["machine"]["threads"] == 1
    engines = {e["name"]: e for e in report["engines"]}
    assert [r["batch_size"] for r in engines["gpu_tok[cpu]"]["results"]] == [1, 8]
    assert len(engines["gpu_tok[cpu]"]["results"][0]["repeated"]["seconds"]) == 2
    if not gpu_tok.info()["cuda"]["available"]:
        assert engines["gpu_tok[cuda]"]["status"] == "skipped"


def test_encode_and_decode(model_dir: Path) -> None:
    done = run("encode", "--tokenizer", str(model_dir / "tokenizer.json"), "hello world", "--no-special-tokens")
    assert done.returncode == 0, done.stderr
    ids = done.stdout.split()
    tok = gpu_tok.Tokenizer.from_file(model_dir / "tokenizer.json")
    assert [int(i) for i in ids] == tok.encode("hello world", add_special_tokens=False)
    as_json = json.loads(run("encode", "--tokenizer", str(model_dir), "--json", stdin="hello world").stdout)
    assert as_json["tokens"][:3] == ["[CLS]", "hello", "world"] and as_json["offsets"][1] == [0, 5]
    back = run("decode", "--tokenizer", str(model_dir), *ids)
    assert back.returncode == 0 and back.stdout.strip() == "hello world"
    piped = run("decode", "--tokenizer", str(model_dir), stdin=" ".join(ids))
    assert piped.stdout.strip() == "hello world"
    default = run("encode", "Hello")
    expected = [str(i) for i in gpu_tok.Tokenizer.default().encode("Hello")]
    assert default.returncode == 0 and default.stdout.split() == expected


def test_info(model_dir: Path) -> None:
    done = run("info", "--tokenizer", str(model_dir))
    assert done.returncode == 0, done.stderr
    assert gpu_tok.__version__ in done.stdout and "threads" in done.stdout and "CUDA" in done.stdout
    assert "WordPiece" in done.stdout and "exact" in done.stdout
    report = json.loads(run("info", "--json").stdout)
    assert report["version"] == gpu_tok.__version__ and "cuda" in report


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ((), 2, "COMMAND"),
        (("bench", "--batch-sizes", "0"), 2, "positive"),
        (("bench", "--batch-sizes", "a,b"), 2, "integers"),
        (("bench", "--device", "tpu"), 2, "invalid choice"),
        (("bench", "--corpus", "/nonexistent.jsonl"), 2, "no such file"),
        (("bench", "--tokenizer", "/nonexistent"), 2, "no such file"),
        (("decode", "x", "y"), 2, "integers"),
        (("nosuchcommand",), 2, "invalid choice"),
        (("bench", "--compare", "tokenizers,nosuchpeer"), 2, "unknown peer 'nosuchpeer'; known peers: tokenizers"),
        (("encode", "--tokenzier", "x", "hi"), 2, "unknown option --tokenzier (did you mean --tokenizer?)"),
        (("info", "--jsn"), 2, "did you mean --json?"),
        (("decode", "--tokenizer", "/nonexistent", "1"), 2, "or 'default' for the embedded"),
    ],
)
def test_bad_arguments(args: tuple, code: int, message: str) -> None:
    done = run(*args)
    assert done.returncode == code
    assert message in done.stderr
    if args and args[0] in ("bench", "encode", "decode", "info"):
        assert f"usage: gpu-tok {args[0]}" in done.stderr  # the subcommand's own usage


def test_decode_reads_standard_input_for_a_dash() -> None:
    """The synopsis's `gpu-tok decode -`, as `gpu-tok encode -`."""
    ids = " ".join(map(str, gpu_tok.Tokenizer.default().encode("Hello world")))
    for args in (("decode", "-"), ("decode",)):
        done = run(*args, stdin=ids + "\n")
        assert done.returncode == 0 and done.stdout.strip() == "Hello world", (args, done.stderr)
    mixed = run("decode", "-", "9707", stdin=ids)  # a dash among ids is not an id
    assert mixed.returncode == 2 and "integers" in mixed.stderr


def test_info_shows_the_default_plan_without_tokenizer() -> None:
    """Every command uses the embedded Qwen3 without --tokenizer; info shows its plan too."""
    done = run("info")
    assert done.returncode == 0, done.stderr
    assert done.stdout == run("info", "--tokenizer", "default").stdout
    assert "plan:" in done.stdout and "BPE" in done.stdout
    report = json.loads(run("info", "--json").stdout)
    assert report["plan"] == gpu_tok.Tokenizer.default().plan


def test_decode_refuses_ids_out_of_range() -> None:
    done = run("decode", "9707", "99999999")
    assert done.returncode == 1 and "id 99999999 is out of range" in done.stderr and not done.stdout
    assert run("decode", "9707").stdout.strip() == gpu_tok.Tokenizer.default().decode([9707])


def test_json_that_is_not_a_tokenizer_says_what_is_missing(tmp_path: Path) -> None:
    other = tmp_path / "config.json"
    other.write_text(json.dumps({"vocab": {"a": 0}, "merges": []}), encoding="utf-8")
    done = run("encode", "--tokenizer", str(other), "x")
    assert done.returncode == 1
    assert f"{other}: not a tokenizer.json: the JSON has no `model` (its top-level keys: merges, vocab)" in done.stderr


def test_the_embedded_default_can_be_named() -> None:
    expected = [str(i) for i in gpu_tok.Tokenizer.default().encode("Hello world")]
    for args in (("encode", "Hello world"), ("encode", "--tokenizer", "default", "Hello world")):
        done = run(*args)
        assert done.returncode == 0 and done.stdout.split() == expected, done.stderr
    decoded = run("decode", "--tokenizer", "default", *expected)
    assert decoded.returncode == 0 and decoded.stdout.strip() == "Hello world"
    info = run("info", "--tokenizer", "default")
    assert info.returncode == 0 and "plan:" in info.stdout and "BPE" in info.stdout
    bench = run("bench", "--tokenizer", "default", "--batch-sizes", "64", "--repeats", "1", "--compare", "none")
    assert bench.returncode == 0 and "tokenizer: embedded Qwen3" in bench.stdout, bench.stderr


def test_info_text_is_plain() -> None:
    done = run("info")
    assert done.returncode == 0, done.stderr
    assert "((" not in done.stdout and "))" not in done.stdout and "features" not in done.stdout
    nvrtc = gpu_tok.info()["cuda"].get("nvrtc_version")
    if nvrtc:
        assert f"NVRTC {nvrtc[0]}.{nvrtc[1]}" in done.stdout and "NVRTC (" not in done.stdout


def test_bench_warns_on_a_loaded_machine(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from gpu_tok import cli

    monkeypatch.setattr(cli.os, "getloadavg", lambda: (999.0, 0.0, 0.0))
    cli._warn_if_loaded()
    assert "figures below are unreliable" in capsys.readouterr().err
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    cli._warn_if_loaded()
    assert capsys.readouterr().err == ""


def test_setup_says_what_it_does_and_needs() -> None:
    root = Path(__file__).resolve().parents[1]
    install = (root / "Makefile").read_text().split("\ninstall:", 1)[1].split("\n\n", 1)[0]
    assert "@echo" in install and "editable" in install and " -q " not in install
    readme = (root / "README.md").read_text()
    for needed in ("rustfmt", "clippy", "C++ compiler", "make", "Python >= 3.11"):
        assert needed in readme.split("## Set up", 1)[1].split("##", 1)[0], needed


def test_unreadable_inputs_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{broken", encoding="utf-8")
    done = run("encode", "--tokenizer", str(bad), "x")
    assert done.returncode == 1 and "invalid JSON" in done.stderr
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "ok"}\nnot json\n', encoding="utf-8")
    done = run("bench", "--corpus", str(corpus), "--repeats", "1", "--compare", "none")
    assert done.returncode == 1 and "c.jsonl:2" in done.stderr
    wrong = tmp_path / "c.csv"
    wrong.write_text("a,b\n", encoding="utf-8")
    done = run("bench", "--corpus", str(wrong), "--compare", "none")
    assert done.returncode == 1 and "unsupported corpus format" in done.stderr


def test_help_reads_well() -> None:
    done = run("--help")
    assert done.returncode == 0 and "gpu-tok bench" in done.stdout
    assert "--batch-sizes" in run("bench", "--help").stdout
