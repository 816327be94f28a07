"""Pre-tokenizers on the fast engine: compiled patterns (Tekken, p50k,
BLOOM...), every Split behaviour and inversion, and the crate's splitting
pre-tokenizers, against `tokenizers` — word by word (`_core.split_words`)
and as whole tokenizers trained here (ids and offsets), on the CPU and on the
device pipeline (host emulator)."""

from __future__ import annotations

import json
import random
from functools import cache

import gpu_tok
import pytest
import tokenizers
from conftest import corpus_sample, edge_cases
from gpu_tok import _core
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import decoders, models, pre_tokenizers, trainers

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
P50K = GPT2  # tiktoken's p50k_base (and r50k_base) split with GPT-2's pattern
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
          r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BLOOM = r" ?[^(\s|[.,!?…。，、।۔،])]+"
CL100K_TIKTOKEN = (r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"
                   r"|\s++$|\s*[\r\n]|\s+(?!\S)|\s")
BEHAVIORS = ["Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
ENGINES = ["scanner", "compiled", "oniguruma"]


def split(pattern: str, behavior: str = "Isolated", invert: bool = False) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}


PRE_TOKENIZERS = [
    split(P50K), split(TEKKEN), split(BLOOM), split(CL100K_TIKTOKEN),
    *[split(TEKKEN, b, i) for b in BEHAVIORS for i in (False, True)],
    *[split(r"\s+", b, i) for b in BEHAVIORS for i in (False, True)],
    {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
    *[{"type": "Punctuation", "behavior": b} for b in BEHAVIORS],
    {"type": "Digits", "individual_digits": True}, {"type": "Digits", "individual_digits": False},
    {"type": "WhitespaceSplit"}, {"type": "Whitespace"}, {"type": "CharDelimiterSplit", "delimiter": "-"},
    {"type": "BertPreTokenizer"}, {"type": "UnicodeScripts"},
    {"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, {"type": "UnicodeScripts"}]},
    {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                           {"type": "Punctuation", "behavior": "Contiguous"}, split(P50K)]},
]


def crate_words(spec: dict, text: str) -> list[tuple[int, int]]:
    """The crate's words, as byte spans (pre_tokenize_str reports characters)."""
    step = tokenizers.Tokenizer.from_str(json.dumps({
        "version": "1.0", "model": {"type": "WordLevel", "vocab": {}, "unk_token": "?"},
        "pre_tokenizer": spec})).pre_tokenizer
    byte_at = [0]
    for c in text:
        byte_at.append(byte_at[-1] + len(c.encode()))
    return [(byte_at[a], byte_at[b]) for _, (a, b) in step.pre_tokenize_str(text)]


@pytest.mark.parametrize("spec", PRE_TOKENIZERS, ids=lambda s: json.dumps(s)[:60])
def test_words_match_the_crate(spec: dict) -> None:
    texts = edge_cases() + corpus_sample()[:40]
    expected = [crate_words(spec, text) for text in texts]
    for engine in ENGINES:
        for text, got, want in zip(texts, _core.split_words(json.dumps(spec), engine, texts), expected, strict=True):
            assert got == want, (engine, text)


def long_texts() -> list[str]:
    """Hundreds of short ASCII words, now and then a non-ASCII one: the compiled
    scanner reads ASCII runs across word ends (cuda/gt_regex.cuh,
    gt_rx_scan_ascii), so its stops before non-ASCII and its hand-backs (a
    space run before a word) fall after every kind of word."""
    pieces = ["the", " cat", "  ", "   ", "\n", "'s", "'LL", "1", "1234", ".", " (", "\t", "Hello", "é", "東",
              "  x", "\r\n", "\u00a0", "-"]
    rng = random.Random(64)
    return ["".join(rng.choice(pieces) for _ in range(n)) for n in range(50, 400, 9)]


@pytest.mark.parametrize("spec", PRE_TOKENIZERS, ids=lambda s: json.dumps(s)[:60])
def test_words_match_the_crate_across_scan_blocks(spec: dict) -> None:
    texts = long_texts()
    expected = [crate_words(spec, text) for text in texts]
    for text, got, want in zip(texts, _core.split_words(json.dumps(spec), "compiled", texts), expected, strict=True):
        assert got == want, text


TEXT = st.text(st.sampled_from(list(" \t\n\r\u00a0\u3000'sStTlLdDſK\u212aaé東あ1٣²!.,-/😀\u0301")), max_size=30)


@settings(max_examples=20, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=20))
def test_words_match_the_crate_on_generated_text(texts: list[str]) -> None:
    for spec in (split(TEKKEN), split(P50K), split(CL100K_TIKTOKEN, "MergedWithNext", True),
                 {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "Whitespace"}):
        got = _core.split_words(json.dumps(spec), "compiled", texts)
        assert got == [crate_words(spec, text) for text in texts], texts


def test_engines_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="engine"):
        _core.split_words(json.dumps(split(P50K)), "fastest", ["a"])
    with pytest.raises(ValueError, match="not JSON"):
        _core.split_words("{", "compiled", ["a"])
    with pytest.raises(ValueError, match="not covered"):
        _core.split_words(json.dumps({"type": "FixedLength", "length": 3}), "compiled", ["a"])


def byte_level_after(*steps: pre_tokenizers.PreTokenizer) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])


def regex_split(pattern: str, behavior: str = "isolated", invert: bool = False) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Split(tokenizers.Regex(pattern), behavior=behavior, invert=invert)


# Tokenizer forms whose pre-tokenizer the compiled scanner runs (p50k: GPT-2's
# pattern, which a hand-written scanner also runs: forced compiled below).
FORMS = {
    "tekken": lambda: byte_level_after(regex_split(TEKKEN)),
    "p50k": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "bloom": lambda: byte_level_after(regex_split(BLOOM)),
    "cl100k-tiktoken": lambda: byte_level_after(regex_split(CL100K_TIKTOKEN)),
    "behaviours": lambda: byte_level_after(
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation("contiguous"),
        regex_split(r"\s+", "merged_with_next"), regex_split(TEKKEN, "removed", invert=True)),
}


@cache
def trained(form: str) -> str:
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = FORMS[form]()
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    hf.train_from_iterator(corpus_sample()[:100], trainer=trainer)
    return hf.to_str()


@pytest.mark.parametrize("form", list(FORMS))
def test_trained_tokenizers_match_the_oracle(form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TOK_PRETOKENIZER", "compiled")
    json_text = trained(form)
    hf = tokenizers.Tokenizer.from_str(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    plan = {row["stage"]: row for row in tok.plan}
    assert plan["pre_tokenize"]["path"] == plan["model"]["path"] == "fast"
    assert "compiled DFA" in plan["pre_tokenize"]["reason"]
    assert "Oniguruma" not in plan["pre_tokenize"]["reason"]
    texts = edge_cases() + corpus_sample()[100:160] + ["<|endoftext|> in the middle<|endoftext|>"]
    encodings = hf.encode_batch(texts)
    assert tok(texts)["input_ids"] == [e.ids for e in encodings]
    offsets = tok(texts, return_offsets_mapping=True)["offset_mapping"]
    assert offsets == [[tuple(o) for o in e.offsets] for e in encodings]
    # The device pipeline (host emulator): every row's text goes to the device.
    batch = tok._core.encode_batch(texts, device="emulator:4096")
    assert batch.to_lists()["input_ids"] == [e.ids for e in encodings]
    assert batch.timings()["rows_on_host"] == 0


def test_plan_names_the_engine_of_each_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPU_TOK_PRETOKENIZER", raising=False)
    tok = gpu_tok.Tokenizer.from_str(trained("behaviours"))
    reason = {row["stage"]: row for row in tok.plan}["pre_tokenize"]["reason"]
    assert reason.count("compiled DFA") == 4 and "on the CPU and the device" in reason
    # A pattern the compiler refuses keeps Oniguruma, with the reason.
    spec = json.loads(trained("tekken"))
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"(\p{L})\1|\s+"
    tok = gpu_tok.Tokenizer.from_str(json.dumps(spec))
    reason = {row["stage"]: row for row in tok.plan}["pre_tokenize"]["reason"]
    assert "Oniguruma" in reason and "escape \\1 is not covered" in reason and "CPU" in reason


def test_plan_names_the_ascii_word_loop_where_a_pattern_has_one() -> None:
    # The embedded default splits with Qwen's pattern, which has one; GPT-2's
    # (p50k's ByteLevel) too; tekken's pattern has none.
    for tok, has_loop in [
        (gpu_tok.Tokenizer.default(), True),
        (gpu_tok.Tokenizer.from_str(trained("p50k")), True),
        (gpu_tok.Tokenizer.from_str(trained("tekken")), False),
    ]:
        reason = {row["stage"]: row for row in tok.plan}["pre_tokenize"]["reason"]
        assert ("gt_scan_ascii_words" in reason) == has_loop, reason
