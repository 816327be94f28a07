"""Parity with the PyPI `tokenizers` package, the oracle: ids, attention masks,
token type ids, special-token masks and offsets, on real tokenizers and text,
under tokenizer.json's own settings and under explicit truncation/padding."""

from __future__ import annotations

import lzma
from functools import cache
from pathlib import Path

import gpu_tok
import pytest
import tokenizers
from conftest import (
    EDGE_CASES_FIXTURE,
    FIXTURE_NAMES,
    FIXTURES,
    HAVE_SHARED,
    SHARED_CORPUS,
    SHARED_TOKENIZERS,
    TOKENIZER_NAMES,
    corpus_sample,
    edge_cases,
    ours,
    shared_dependent_names,
    tokenizer_json,
    whole_corpus,
)

FIELDS = {
    "input_ids": "ids",
    "attention_mask": "attention_mask",
    "token_type_ids": "type_ids",
    "special_tokens_mask": "special_tokens_mask",
    "offset_mapping": "offsets",
}


@cache
def pristine(name: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tokenizer_json(name))


@cache
def configurable(name: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tokenizer_json(name))


def assert_same(lists: dict, expected: list[tokenizers.Encoding], texts: list, label: str) -> None:
    assert len(lists["input_ids"]) == len(expected)
    for field, attr in FIELDS.items():
        ours_rows = lists[field]
        for i, (row, enc) in enumerate(zip(ours_rows, expected, strict=True)):
            theirs = getattr(enc, attr)
            if field == "offset_mapping":
                theirs = [tuple(o) for o in theirs]
            assert row == theirs, f"{label}: {field} differs on row {i}: {texts[i]!r:.200}"


def encode_all(name: str, texts: list, pairs: list | None = None, **kwargs) -> dict:
    """Every field, from two calls: without offsets and with them (each on the
    fast engine where the plan allows it, else the exact path). Both must agree."""
    common = dict(return_token_type_ids=True, return_special_tokens_mask=True, **kwargs)
    fast = ours(name).encode_batch(texts, pairs, **common).to_lists()
    with_offsets = ours(name).encode_batch(texts, pairs, return_offsets=True, **common).to_lists()
    for field in fast:
        assert fast[field] == with_offsets[field], f"{name}: {field} differs between the fast and exact paths"
    return with_offsets


@pytest.mark.skipif(not HAVE_SHARED, reason="compares the committed copy with ../shared's edge_cases.jsonl")
def test_committed_edge_cases_are_the_shared_ones() -> None:
    """A clone tests the strings ../shared holds: the fixture is its copy, byte for byte."""
    shared = (SHARED_CORPUS / "edge_cases.jsonl").read_bytes()
    assert lzma.decompress(EDGE_CASES_FIXTURE.read_bytes()) == shared, \
        f"refresh {EDGE_CASES_FIXTURE}: xz -9e -c ../shared/corpus/edge_cases.jsonl > {EDGE_CASES_FIXTURE.name}"


@pytest.mark.skipif(not HAVE_SHARED, reason="compares the committed tokenizer files with ../shared's")
@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_committed_tokenizers_are_the_shared_ones(name: str) -> None:
    """A clone tests the files ../shared holds: tests/fixtures' (and the
    embedded Qwen3's) tokenizer.json and tokenizer_config.json are copies."""
    folder = SHARED_TOKENIZERS / name
    committed = gpu_tok._data.default_tokenizer_json() if name == gpu_tok._data.DEFAULT_TOKENIZER else \
        lzma.decompress((FIXTURES / name / "tokenizer.json.xz").read_bytes()).decode("utf-8")
    assert committed == (folder / "tokenizer.json").read_text(encoding="utf-8"), name
    config = FIXTURES / name / "tokenizer_config.json"
    assert config.read_bytes() == (folder / "tokenizer_config.json").read_bytes(), name


def test_the_fresh_clone_run_selects_the_tests_that_read_the_corpus() -> None:
    """CI's run with ../shared hidden (`--shared-dependent`) keeps a test whose
    code reaches the corpus through a helper (test_reliability's texts() reads
    corpus_sample) and leaves out those that read only committed files."""
    tests = Path(__file__).parent
    reliability = shared_dependent_names(tests / "test_reliability.py")
    assert {"texts", "test_dataloader_workers_return_tokenizer_tensors"} <= reliability
    assert "test_thread_soak_matches_the_oracle" not in reliability
    assert not [name for name in shared_dependent_names(tests / "test_kernels_nvrtc.py") if name.startswith("test_")]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_edge_cases_with_file_settings(name: str, add_special_tokens: bool) -> None:
    texts = edge_cases()
    expected = pristine(name).encode_batch(texts, add_special_tokens=add_special_tokens)
    got = encode_all(name, texts, add_special_tokens=add_special_tokens)
    assert_same(got, expected, texts, f"{name} edge cases")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_corpus_with_file_settings(name: str) -> None:
    texts = corpus_sample()
    expected = pristine(name).encode_batch(texts)
    got = encode_all(name, texts)
    assert_same(got, expected, texts, f"{name} corpus")


BYTE_LEVEL = [n for n in TOKENIZER_NAMES if n in ("qwen3", "deepseek_v3", "gpt-oss", "claude")]


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_whole_corpus_ids_on_the_fast_path(name: str) -> None:
    """All of mixed.jsonl (34 MB): ids from the fast engine equal the oracle's."""
    texts = whole_corpus()
    assert {row["path"] for row in ours(name).plan if row["stage"] == "model"} == {"fast"}
    expected = pristine(name).encode_batch_fast(texts, add_special_tokens=False)
    got = ours(name).encode_batch(texts, add_special_tokens=False).to_lists()["input_ids"]
    mismatched = [i for i, (row, enc) in enumerate(zip(got, expected, strict=True)) if row != enc.ids]
    first = texts[mismatched[0]] if mismatched else ""
    assert not mismatched, f"{name}: {len(mismatched)}/{len(texts)} documents differ, first {first!r:.200}"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_single_encode_matches(name: str) -> None:
    hf = configure(name, None, None, 0)  # transformers' encode: tokenizer.json's padding/truncation do not apply
    for text in edge_cases()[::7] + corpus_sample()[:5]:
        assert ours(name).encode(text) == hf.encode(text).ids
        assert ours(name).encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids
    assert ours(name).encode("a", "b") == hf.encode("a", "b").ids


# (our encode_batch arguments, the same as `tokenizers` settings)
CASES = {
    "longest-right": (dict(padding=True, truncation=False, padding_side="right"), None, dict(direction="right")),
    "max_length-left": (
        dict(padding="max_length", truncation=True, max_length=48, padding_side="left"),
        dict(max_length=48), dict(direction="left", length=48),
    ),
    "truncate-left-side": (
        dict(padding=False, truncation=True, max_length=17, truncation_side="left"),
        dict(max_length=17, direction="left"), None,
    ),
    "multiple-of-8": (
        dict(padding=True, truncation=True, max_length=30, pad_to_multiple_of=8, padding_side="right"),
        dict(max_length=30), dict(direction="right", pad_to_multiple_of=8),
    ),
}
PAIR_STRATEGIES = ["longest_first", "only_first", "only_second"]


def configure(name: str, truncation: dict | None, padding: dict | None, pad_id: int) -> tokenizers.Tokenizer:
    hf = configurable(name)
    hf.no_truncation()
    hf.no_padding()
    if truncation is not None:
        hf.enable_truncation(**truncation)
    if padding is not None:
        token = ours(name).id_to_token(pad_id) or ""
        hf.enable_padding(pad_id=pad_id, pad_token=token, **padding)
    return hf


def pad_id_for(name: str) -> int:
    tok = ours(name)
    return tok.pad_token_id if tok.pad_token_id is not None else 0


def short_texts() -> list[str]:
    """Edge cases and documents cut to 2,000 characters: padding to the longest
    row stays small (the full-length ones run in the file-settings tests)."""
    return [t[:2000] for t in edge_cases() + corpus_sample()[:40]]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_explicit_settings(name: str, case: str, add_special_tokens: bool) -> None:
    ours_args, truncation, padding = CASES[case]
    pad_id = pad_id_for(name)
    hf = configure(name, truncation, padding, pad_id)
    texts = short_texts()
    expected = hf.encode_batch(texts, add_special_tokens=add_special_tokens)
    got = encode_all(name, texts, add_special_tokens=add_special_tokens, pad_token_id=pad_id, **ours_args)
    assert_same(got, expected, texts, f"{name} {case}")


PAIR_MAX_LENGTH = 64
PAIR_ROWS = 300


def legal_pairs(name: str, strategy: str) -> tuple[list[str], list[str]]:
    """Pairs that every strategy can truncate to PAIR_MAX_LENGTH: for only_first
    (only_second) the second (first) sequence is a short partner that leaves the
    other room for at least one token, as the oracle measures it."""
    texts = short_texts()[:PAIR_ROWS]
    partners = [t[:24] for t in texts[1:] + texts[:1]]
    if strategy == "longest_first":
        return texts, texts[1:] + texts[:1]
    firsts, seconds = (partners, texts) if strategy == "only_second" else (texts, partners)
    kept_side = firsts if strategy == "only_second" else seconds
    room = PAIR_MAX_LENGTH - pristine(name).num_special_tokens_to_add(True)
    plain = configure(name, None, None, 0)  # lengths without tokenizer.json's truncation and padding
    lengths = [len(e.ids) for e in plain.encode_batch(kept_side, add_special_tokens=False)]
    keep = [i for i, n in enumerate(lengths) if n < room]
    return [firsts[i] for i in keep], [seconds[i] for i in keep]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("strategy", PAIR_STRATEGIES)
@pytest.mark.parametrize("side", ["right", "left"])
def test_pairs_truncation_and_padding(name: str, strategy: str, side: str) -> None:
    firsts, seconds = legal_pairs(name, strategy)
    candidates = len(short_texts()[:PAIR_ROWS])
    assert len(firsts) >= 2 * candidates // 3, f"only {len(firsts)} of {candidates} pairs left to compare"
    pad_id = pad_id_for(name)
    hf = configure(name, dict(max_length=PAIR_MAX_LENGTH, strategy=strategy, direction=side),
                   dict(direction=side), pad_id)
    expected = hf.encode_batch(list(zip(firsts, seconds, strict=True)))
    assert any(e.overflowing for e in expected), "no row was truncated: the case would compare little"
    got = encode_all(name, firsts, seconds, padding=True, truncation=strategy, max_length=PAIR_MAX_LENGTH,
                     truncation_side=side, padding_side=side, pad_token_id=pad_id)
    assert_same(got, expected, firsts, f"{name} pairs {strategy} {side}")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("strategy", ["only_first", "only_second"])
def test_pairs_the_oracle_cannot_truncate_fail_the_same_way(name: str, strategy: str) -> None:
    """Row by row: where `tokenizers` refuses a pair (the sequence to truncate is
    too short), gpu_tok raises with the same message; elsewhere the values agree."""
    # Long documents and short edge cases in turn: (long, short) and (short, long) pairs.
    documents, edges = short_texts()[-30:], edge_cases()[::9][:30]
    texts = [t for two in zip(documents, edges, strict=True) for t in two]
    pairs = list(zip(texts, texts[1:] + texts[:1], strict=True))
    hf = configure(name, dict(max_length=PAIR_MAX_LENGTH, strategy=strategy), None, 0)
    args = dict(truncation=strategy, max_length=PAIR_MAX_LENGTH, padding=False, return_token_type_ids=True,
                return_special_tokens_mask=True, return_offsets=True)
    refused = 0
    for first, second in pairs:
        try:
            expected = hf.encode(first, second)
        except Exception as err:
            refused += 1
            with pytest.raises(gpu_tok.GpuTokError) as ours_err:
                ours(name).encode_batch([first], [second], **args)
            assert str(err) in str(ours_err.value), f"{name}: {ours_err.value!s:.200} vs {err}"
            continue
        got = ours(name).encode_batch([first], [second], **args).to_lists()
        assert_same(got, [expected], [first], f"{name} pair {strategy}")
    assert 0 < refused < len(pairs), f"{name} {strategy}: {refused} of {len(pairs)} refused; both kinds are needed"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
@pytest.mark.parametrize("skip", [True, False])
def test_decode_round_trip(name: str, skip: bool) -> None:
    hf = pristine(name)
    texts = edge_cases()[::3] + corpus_sample()[:10]
    rows = [e.ids for e in hf.encode_batch(texts)]
    assert ours(name).decode_batch(rows, skip_special_tokens=skip) == hf.decode_batch(rows, skip_special_tokens=skip)
    assert ours(name).decode(rows[0], skip_special_tokens=skip) == hf.decode(rows[0], skip_special_tokens=skip)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_vocabulary_matches(name: str) -> None:
    hf, tok = pristine(name), ours(name)
    assert tok.get_vocab_size() == hf.get_vocab_size()
    assert tok.get_vocab_size(with_added_tokens=False) == hf.get_vocab_size(with_added_tokens=False)
    vocab = hf.get_vocab()
    assert tok.get_vocab() == vocab
    for token, i in list(vocab.items())[:500]:
        assert tok.token_to_id(token) == i
        assert tok.id_to_token(i) == hf.id_to_token(i)
    assert tok.num_special_tokens_to_add(False) == hf.num_special_tokens_to_add(False)
    assert tok.num_special_tokens_to_add(True) == hf.num_special_tokens_to_add(True)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_text_with_added_tokens(name: str) -> None:
    """Chat-style text: the tokenizer's own added tokens (special or not) inside
    documents, glued to words or spaced, at the ends, repeated, half-typed. The
    fast path splits them out exactly as the crate does."""
    import random

    rng = random.Random(7)
    added = [content for _, content, _ in ours(name)._core.added_tokens()]
    words = " ".join(corpus_sample()[:20]).split(" ")
    texts = []
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 12)):
            token = rng.choice(added)
            piece = rng.choice([token, token[:-1], f" {token} ", f"\n{token}\n", token * 2, f"{token} x"])
            parts.append(piece)
            parts.append(" ".join(rng.sample(words, rng.randint(0, 8))))
        texts.append(rng.choice(["", " ", "\n"]).join(parts))
    for special in (True, False):
        expected = configure(name, None, None, 0).encode_batch(texts, add_special_tokens=special)
        got = encode_all(name, texts, add_special_tokens=special, padding=False, truncation=False)
        assert_same(got, expected, texts, f"{name} added tokens")


@pytest.mark.parametrize("name", [n for n in BYTE_LEVEL if n != "claude"])  # claude: ByteLevel alone, no Split
def test_inverted_removed_split_is_recognised_as_isolated(name: str) -> None:
    """A converter's spelling of the same pre-tokenizer, Split(Removed, invert=true)
    over a pattern that matches every character, runs on the fast engine as
    an isolation and gives the oracle's ids (DeepSeek's last step does not
    match digits, so there the spelling means something else: the chain's
    Removed-and-inverted rule, on the CPU and the device alike)."""
    import json

    spec = json.loads(tokenizer_json(name))
    pre = spec["pre_tokenizer"]
    steps = pre["pretokenizers"] if pre.get("type") == "Sequence" else []
    splits = [s for s in steps if s.get("type") == "Split"]
    assert splits
    for step in splits:
        step["behavior"], step["invert"] = "Removed", True
    text = json.dumps(spec)
    tok, hf = gpu_tok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    pre_tokenize = {row["stage"]: row for row in tok.plan}["pre_tokenize"]
    assert pre_tokenize["path"] == "fast", tok.plan
    assert "CPU only" not in pre_tokenize["reason"] and "on the CPU and the device" in pre_tokenize["reason"]
    texts = edge_cases() + corpus_sample()[:100]
    expected = [e.ids for e in hf.encode_batch(texts)]
    assert tok.encode_batch(texts).to_lists()["input_ids"] == expected


@pytest.mark.parametrize("behavior", ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"])
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("pattern", ["scanner", "regex"])
def test_every_split_behavior_on_the_fast_path(behavior: str, invert: bool, pattern: str) -> None:
    """Split with any behaviour, inverted or not, over a pattern a scanner
    knows (Qwen3's own) or one it does not: the CPU fast engine makes the
    crate's pieces (ids and offsets as the oracle's)."""
    import json

    spec = json.loads(tokenizer_json("qwen3"))
    step = spec["pre_tokenizer"]["pretokenizers"][0]
    assert step["type"] == "Split"
    if pattern == "regex":
        step["pattern"] = {"Regex": r" ?\p{N}+|\s+"}
    step["behavior"], step["invert"] = behavior, invert
    text = json.dumps(spec)
    tok, hf = gpu_tok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    assert {row["stage"]: row["path"] for row in tok.plan}["pre_tokenize"] == "fast", tok.plan
    texts = edge_cases()[:200] + corpus_sample()[:40] + ["", " ", "12  34\n\n 5 a", "x <|im_start|>1 2<|im_end|> "]
    expected = hf.encode_batch(texts)
    got = tok.encode_batch(texts, return_offsets=True).to_lists()
    assert got["input_ids"] == [e.ids for e in expected]
    assert got["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected]


def test_byte_level_with_a_prefix_space_on_the_fast_path() -> None:
    """ByteLevel(add_prefix_space=true) (RoBERTa/GPT-2 converters): a space goes
    before every piece of text that lacks one, also between added tokens."""
    import json

    spec = json.loads(tokenizer_json("qwen3"))
    spec["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    text = json.dumps(spec)
    tok, hf = gpu_tok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    assert {row["stage"]: row["path"] for row in tok.plan}["pre_tokenize"] == "fast"
    texts = edge_cases() + corpus_sample()[:60] + [
        "", "x", " x", "<|im_start|>user\nhi<|im_end|>", "a<|endoftext|>b", "<|endoftext|> b", "  two"]
    for special in (True, False):
        expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        assert tok.encode_batch(texts, add_special_tokens=special).to_lists()["input_ids"] == expected
        device = tok._core.encode_batch(texts, add_special_tokens=special, device="emulator").to_lists()
        assert device["input_ids"] == expected


def test_offsets_trimmed_by_a_byte_level_post_processor() -> None:
    """ByteLevel(trim_offsets=true) as post-processor (GPT-2/RoBERTa style) trims
    spaces from offsets by reading token strings: the fast path gives them."""
    import json

    spec = json.loads(tokenizer_json("qwen3"))
    spec["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    text = json.dumps(spec)
    tok, hf = gpu_tok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)
    texts = edge_cases() + corpus_sample()[:60] + ["  a  b  ", "x <|endoftext|>  y"]
    expected = hf.encode_batch(texts)
    got = tok.encode_batch(texts, return_offsets=True).to_lists()
    assert got["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected]
    assert got["input_ids"] == [e.ids for e in expected]


def _variant(change) -> tuple[gpu_tok.Tokenizer, tokenizers.Tokenizer]:
    """Qwen3 with `change(spec)` applied, loaded by gpu_tok and by the oracle."""
    import json

    spec = json.loads(tokenizer_json("qwen3"))
    change(spec)
    text = json.dumps(spec)
    return gpu_tok.Tokenizer.from_str(text), tokenizers.Tokenizer.from_str(text)


OFFSET_TEXTS = ["Hello world", "  a  b  ", "a <|endoftext|> b", "x<|endoftext|>y", "<|endoftext|>  <|im_end|>",
                "日本 語 <|im_start|>  x"]


def test_offsets_trimmed_by_roberta_processing_and_around_stripped_added_tokens() -> None:
    """RobertaProcessing trims offsets from token strings too; an added token that
    takes the spaces around it (lstrip/rstrip) has its split's text as token string."""
    def change(spec: dict) -> None:
        eot = next(t for t in spec["added_tokens"] if t["content"] == "<|endoftext|>")
        eot["lstrip"] = eot["rstrip"] = True
        spec["post_processor"] = {"type": "RobertaProcessing", "sep": ["<|endoftext|>", eot["id"]],
                                  "cls": ["<|endoftext|>", eot["id"]], "trim_offsets": True, "add_prefix_space": False}

    tok, hf = _variant(change)
    texts = OFFSET_TEXTS + edge_cases() + corpus_sample()[:30]
    for special in (True, False):
        expected = hf.encode_batch(texts, add_special_tokens=special)
        got = tok.encode_batch(texts, add_special_tokens=special, return_offsets=True).to_lists()
        assert got["input_ids"] == [e.ids for e in expected]
        assert got["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected]


def test_tokenizer_json_quirks_the_crate_accepts() -> None:
    # pad_to_multiple_of 0 means "none" to the crate.
    def zero_multiple(spec: dict) -> None:
        spec["padding"] = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": 0, "pad_id": 0,
                           "pad_type_id": 0, "pad_token": "<|endoftext|>"}

    tok, hf = _variant(zero_multiple)
    texts = ["a b c", "d"]
    assert tok.encode_batch(texts).to_lists()["input_ids"] == [e.ids for e in hf.encode_batch(texts)]

    # A pair template naming an undefined special token: singles work, pairs
    # without special tokens work, pairs with them are refused (the crate panics).
    def broken_pair(spec: dict) -> None:
        spec["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[NOPE]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {}}

    tok, hf = _variant(broken_pair)
    assert tok.encode("a b") == hf.encode("a b").ids
    assert tok.encode("a", "b", add_special_tokens=False) == hf.encode("a", "b", add_special_tokens=False).ids
    with pytest.raises(gpu_tok.UnsupportedTokenizerError, match="NOPE"):
        tok.encode("a", "b")
    with pytest.raises(gpu_tok.UnsupportedTokenizerError, match="NOPE"):
        tok._core.encode_batch(["a"], ["b"], device="emulator")
