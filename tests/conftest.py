"""Shared test helpers: which tokenizers and texts the suites run on.

With `../shared` beside the project (developers' machines and CI), the suites
cover the six real tokenizers and the real corpus there. A fresh clone without
it still runs them on the committed fixtures (tests/fixtures: three tokenizers
and the 757 edge cases, a copy of ../shared's) and the package's embedded
default (Qwen3 and a sample corpus). `GPU_TOK_SHARED` names another shared
folder (`GPU_TOK_SHARED=/nonexistent` runs as a fresh clone does).
"""

from __future__ import annotations

import ast
import atexit
import json
import lzma
import os
import random
import shutil
import tempfile
from functools import cache
from pathlib import Path

import gpu_tok
import pytest
import tokenizers
from gpu_tok import _data

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EDGE_CASES_FIXTURE = FIXTURES / "edge_cases.jsonl.xz"
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))
SHARED_TOKENIZERS = SHARED / "tokenizers"
SHARED_CORPUS = SHARED / "corpus"
HAVE_SHARED = (SHARED_TOKENIZERS / "qwen3" / "tokenizer.json").is_file()

# What a test reads that changes without ../shared: the corpus documents, and
# whatever branches on ../shared's presence or paths. The tokenizer files, their
# configs and the edge cases are byte-identical copies (test_parity checks them),
# and TOKENIZER_NAMES is then a subset of the same tokenizers.
SHARED_DEPENDENT_NAMES = frozenset({"corpus_sample", "whole_corpus", "chat_rows", "assert_whole_corpus_ids",
                                    "HAVE_SHARED", "SHARED", "SHARED_TOKENIZERS", "SHARED_CORPUS", "tokenizer_dir"})

SHARED_NAMES = ["qwen3", "deepseek_v3", "gpt-oss", "llama2", "bert-minilm", "claude"]
FIXTURE_NAMES = ["qwen3", "llama2", "bert-minilm"]
# Families ../shared has no tokenizer of: always the committed fixture.
FIXTURE_ONLY = ["unigram-xlmr"]
TOKENIZER_NAMES = (SHARED_NAMES if HAVE_SHARED else FIXTURE_NAMES) + FIXTURE_ONLY


@cache
def tokenizer_json(name: str) -> str:
    if HAVE_SHARED and name not in FIXTURE_ONLY:
        return (SHARED_TOKENIZERS / name / "tokenizer.json").read_text(encoding="utf-8")
    if name == _data.DEFAULT_TOKENIZER:
        return _data.default_tokenizer_json()
    return lzma.decompress((FIXTURES / name / "tokenizer.json.xz").read_bytes()).decode("utf-8")


@cache
def tokenizer_config(name: str) -> dict:
    folder = SHARED_TOKENIZERS / name if HAVE_SHARED and name not in FIXTURE_ONLY else FIXTURES / name
    return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))


@cache
def tokenizer_dir(name: str) -> Path:
    """A model folder (tokenizer.json and tokenizer_config.json) for
    `from_pretrained`: ../shared's, else one written from the committed files
    into a temporary folder, removed at exit."""
    if HAVE_SHARED and name not in FIXTURE_ONLY:
        return SHARED_TOKENIZERS / name
    folder = Path(tempfile.mkdtemp(prefix=f"gpu_tok-tests-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / "tokenizer.json").write_text(tokenizer_json(name), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(name), ensure_ascii=False),
                                                  encoding="utf-8")
    return folder


@cache
def ours(name: str) -> gpu_tok.Tokenizer:
    return gpu_tok.Tokenizer.from_str(tokenizer_json(name), tokenizer_config(name))


def reference(name: str) -> tokenizers.Tokenizer:
    """A fresh `tokenizers` object (tests mutate its truncation/padding)."""
    return _reference(name)


@cache
def _reference(name: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tokenizer_json(name))


def unpadded_oracle(json_text: str) -> tokenizers.Tokenizer:
    """The oracle for a tokenizer.json, its own truncation and padding off."""
    hf = tokenizers.Tokenizer.from_str(json_text)
    hf.no_truncation()
    hf.no_padding()
    return hf


@cache
def edge_cases() -> list[str]:
    """Short strings that stress tokenizers: ../shared's edge_cases.jsonl, of
    which tests/fixtures/edge_cases.jsonl.xz is a byte-identical copy."""
    if HAVE_SHARED:
        text = (SHARED_CORPUS / "edge_cases.jsonl").read_text(encoding="utf-8")
    else:
        text = lzma.decompress(EDGE_CASES_FIXTURE.read_bytes()).decode("utf-8")
    return [json.loads(line)["text"] for line in text.splitlines() if line]


@cache
def corpus_sample() -> list[str]:
    """Real documents: every 10th of mixed.jsonl (~2.8 MB), else the embedded sample."""
    if HAVE_SHARED:
        with (SHARED_CORPUS / "mixed.jsonl").open(encoding="utf-8") as f:
            return [json.loads(line)["text"] for i, line in enumerate(f) if i % 10 == 0]
    return [doc["text"] for doc in _data.sample_corpus()]


@cache
def whole_corpus() -> list[str]:
    with (SHARED_CORPUS / "mixed.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def assert_whole_corpus_ids(json_text: str, label: str) -> None:
    """Every document of mixed.jsonl (34 MB) gets the oracle's ids."""
    texts = whole_corpus()
    expected = unpadded_oracle(json_text).encode_batch_fast(texts)
    got = gpu_tok.Tokenizer.from_str(json_text).encode_batch(texts, padding=False, truncation=False)
    rows = got.to_lists()["input_ids"]
    bad = [i for i, (row, enc) in enumerate(zip(rows, expected, strict=True)) if row != enc.ids]
    assert not bad, f"{label}: {len(bad)} documents differ, first {texts[bad[0]]!r:.200}"


def chat_rows(name: str) -> list[str]:
    """Corpus documents cut by the tokenizer's own added tokens (special or not,
    any strip flags), at the ends, in the middle, back to back and alone."""
    added = [t["content"] for t in json.loads(tokenizer_json(name))["added_tokens"]][:12]
    rng = random.Random(name)
    rows = []
    for doc in corpus_sample()[:80]:
        words = doc.split(" ")[:60]
        for _ in range(rng.randrange(1, 5)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(added) * rng.randrange(1, 3))
        rows.append(rng.choice(["", " "]).join(words))
    return rows + added + ["".join(added), f" {added[0]} ", f"{added[0]}\n{added[-1]}x"]


def long_words() -> list[str]:
    """Words of 2^14 bytes and more, which a block merges in rounds
    (gt_bpe_rounds): runs of one symbol (merged round after round), CJK and
    random letters (rounds that merge little: the heap finishes), a run of
    one letter after Llama-2's "▁" (its first round cut short: the oracle
    merges "▁" into the run first), both sides of 2^14 bytes."""
    rng = random.Random(7)
    cjk = "".join(chr(rng.randrange(0x4E00, 0x4E00 + 400)) for _ in range(6000))
    letters = "".join(rng.choice("abcdefghij") for _ in range(20000))
    return ["x" * 20000, "x" * 16384, "x" * 16383, "x" * 16385 + " and after " + "y" * 17000,
            "ab" * 10000, "abc" * 7000, "Aa" * 9000, cjk, letters, " " * 20000 + "z", " \n\n" * 7000,
            "\n" * 20000, "\U0001F600" * 5000, "-=" * 10000, "short words, then " + "é" * 9000]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shared-dependent", action="store_true",
                     help="only the tests whose inputs change without ../shared (CI runs them once with "
                          "GPU_TOK_SHARED=/nonexistent, as a fresh clone does)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--shared-dependent"):
        return
    kept = [item for item in items if reads_shared(item)]
    config.hook.pytest_deselected(items=[item for item in items if not reads_shared(item)])
    items[:] = kept


def reads_shared(item: pytest.Item) -> bool:
    """Whether a test's code (its function or class, decorators included, the
    module's fixtures it takes, or a module-wide mark) reaches one of
    SHARED_DEPENDENT_NAMES."""
    names = shared_dependent_names(item.path)
    function = getattr(item, "originalname", item.name)
    own = {function} | ({item.cls.__name__} if getattr(item, "cls", None) else set())
    return bool(names & (own | set(getattr(item, "fixturenames", ())) | {"pytestmark"}))


@cache
def shared_dependent_names(module: Path) -> frozenset[str]:
    """SHARED_DEPENDENT_NAMES and the top-level names of a test module whose
    code reads one of them, directly or through another such name (of the
    module, or imported from a sibling test module)."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    tainted = set(SHARED_DEPENDENT_NAMES)
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "conftest":
            tainted |= {alias.asname or alias.name for alias in node.names if alias.name in SHARED_DEPENDENT_NAMES}
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("test_"):
            sibling = shared_dependent_names(module.with_name(f"{node.module}.py"))
            tainted |= {alias.asname or alias.name for alias in node.names if alias.name in sibling}
    statements = [(_bound(node), _read(node)) for node in tree.body]
    while True:
        grown = {name for bound, read in statements if read & tainted for name in bound} - tainted
        if not grown:
            return frozenset(tainted)
        tainted |= grown


def _bound(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)} | \
        {n.name for n in ast.walk(node) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


def _read(node: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | \
        {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
