"""The Gemma and CLIP forms of issue #33 (benches/make_forms.py builds them
with the `tokenizers` trainers), and the model options they bring to the
fast engine (end_of_word_suffix, continuing_subword_prefix, byte fallback
and the unknown token on byte-level BPE), against the oracle: ids and
offsets."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import gpu_tok
import pytest
import tokenizers
from conftest import corpus_sample, edge_cases, unpadded_oracle
from tokenizers import models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import make_forms  # noqa: E402

FAST = ["fast"] * 3


@cache
def gemma() -> str:
    return make_forms.gemma(corpus_sample()[:150], vocab_size=2500)


@cache
def clip() -> str:
    return make_forms.clip(corpus_sample()[:150], vocab_size=2500)


def texts_with(added: list[str]) -> list[str]:
    """Edge cases, corpus documents, and rows holding added tokens between,
    around and inside words."""
    rows = [f"{a}x{b} y {a}{a}\n{b}" for a, b in zip(added[::97], added[5::97], strict=False)]
    rows += ["<table><tr><td>1</td></tr></table>\n\n\n\t\tdef f():\n    return 1  ", "a  b   c\u3000d",
             "<|startoftext|>A photo of A CAT<|endoftext|>", "I'M here, it's 2024 — DON'T", "▁▁x▁ y"]
    return rows + edge_cases() + [t[:3000] for t in corpus_sample()[150:230]]


def stages(tok: gpu_tok.Tokenizer) -> dict[str, dict[str, str]]:
    return {row["stage"]: row for row in tok.plan}


def assert_matches(json_text: str, texts: list[str], label: str) -> None:
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    expected = hf.encode_batch(texts)
    got = tok.encode_batch(texts, padding=False, truncation=False, return_offsets=True).to_lists()
    for i, enc in enumerate(expected):
        assert got["input_ids"][i] == enc.ids, f"{label}: ids differ on {texts[i]!r:.200}"
        assert got["offset_mapping"][i] == [tuple(o) for o in enc.offsets], f"{label}: offsets of {texts[i]!r:.200}"
    ids = tok.encode_batch(texts, padding=False, truncation=False).to_lists()["input_ids"]
    assert ids == [e.ids for e in expected], label


def test_gemma_form_runs_fast_with_identical_ids_and_offsets() -> None:
    json_text = gemma()
    spec = json.loads(json_text)
    assert len([t for t in spec["added_tokens"] if not t["special"]]) > 6000
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == FAST, plan
    assert "cut between" in plan["pre_tokenize"]["reason"]
    contents = [t["content"] for t in spec["added_tokens"]]
    assert_matches(json_text, texts_with(contents), "gemma")


def test_clip_form_runs_fast_with_identical_ids_and_offsets() -> None:
    json_text = clip()
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == FAST, plan
    assert "affixes" in plan["model"]["reason"]
    assert_matches(json_text, texts_with(["<|startoftext|>", "<|endoftext|>"]), "clip")


@cache
def byte_level(prefix: str, suffix: str, byte_fallback: bool) -> str:
    """A byte-level BPE trained with a subword prefix and/or a word suffix."""
    affixes = {k: v for k, v in (("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix)) if v}
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=byte_fallback, **affixes))
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), **affixes)
    hf.train_from_iterator(corpus_sample()[:60], trainer=trainer)
    return hf.to_str()


def without_tokens(json_text: str, drop: list[str], **model: object) -> str:
    spec = json.loads(json_text)
    for token in drop:
        spec["model"]["vocab"].pop(token, None)
    spec["model"]["merges"] = [m for m in spec["model"]["merges"]
                               if not any(t in drop for t in (m.split(" ") if isinstance(m, str) else m))]
    spec["model"].update(model)
    # ids stay as they were: the crate reads the vocabulary as a map
    return json.dumps(spec)


BYTE_LEVEL = {
    "suffix": lambda: byte_level("", "</w>", False),
    "prefix": lambda: byte_level("##", "", False),
    "prefix-and-suffix": lambda: byte_level("##", "</w>", False),
    # bytes without a token of their own: the unknown token, fused or not
    "missing-bytes-unk": lambda: without_tokens(byte_level("", "", False), ["é", "Ã", "Ċ", "ĉ"], fuse_unk=False),
    "missing-bytes-fused": lambda: without_tokens(byte_level("", "", False), ["é", "Ã", "Ċ"], fuse_unk=True),
    "missing-bytes-no-unk": lambda: without_tokens(byte_level("", "", False), ["é", "Ã", "Ċ"], unk_token=None),
    "suffix-ignore-merges": lambda: without_tokens(byte_level("", "</w>", False), [], ignore_merges=True),
}


@pytest.mark.parametrize("name", list(BYTE_LEVEL))
def test_byte_level_model_options(name: str) -> None:
    json_text = BYTE_LEVEL[name]()
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert plan["model"]["path"] == "fast", plan
    texts = ["Hello world, hello WORLD!", "été ÃÃ Ċ", "a", ""] + edge_cases() + corpus_sample()[60:100]
    assert_matches(json_text, texts, name)


NORMALIZERS = {
    "lowercase-strip-accents": normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                                     normalizers.Lowercase()]),
    "nfkc-replace-regex": normalizers.Sequence([normalizers.NFKC(),
                                                normalizers.Replace(tokenizers.Regex(r"[0-9]+"), "#")]),
    "strip-prepend": normalizers.Sequence([normalizers.Strip(), normalizers.Prepend("^")]),
    "bert": normalizers.BertNormalizer(lowercase=False),
    "nmt-nfkd": normalizers.Sequence([normalizers.Nmt(), normalizers.NFKD()]),
    "byte-level": normalizers.ByteLevel(),
    # composed, more distinct replacements than one table holds: the crate's steps
    "byte-level-twice": normalizers.Sequence([normalizers.ByteLevel(), normalizers.ByteLevel()]),
    "replace-strings": normalizers.Sequence([normalizers.Replace("th", "TH"), normalizers.Replace("e", "")]),
}


@pytest.mark.parametrize("name", list(NORMALIZERS))
def test_byte_level_with_any_normalizer(name: str) -> None:
    """Every kind of normalizer stage before byte-level BPE (which took only
    NFC and NFKC before), with a normalized added token in the mix."""
    hf = tokenizers.Tokenizer.from_str(byte_level("", "", False))
    hf.normalizer = NORMALIZERS[name]
    hf.add_tokens([tokenizers.AddedToken("hello", normalized=True), tokenizers.AddedToken("<sep>")])
    json_text = hf.to_str()
    assert stages(gpu_tok.Tokenizer.from_str(json_text))["normalize"]["path"] == "fast"
    texts = ["Hello hello <sep> HELLO", " the ethe 123 ＡＢＣ\u00e9 "] + edge_cases() + corpus_sample()[60:90]
    assert_matches(json_text, texts, name)


@pytest.mark.parametrize("prefix, suffix", [("@@", ""), ("", "</w>"), ("##", "</w>")])
def test_sentencepiece_bpe_affixes_offsets_around_the_unknown_token(prefix: str, suffix: str) -> None:
    # A word's tokens after its first carry the prefix, its last the suffix:
    # neither is text of the word, so the token spans must not count them
    # (the unknown token took what the affixes over-counted: "b" got (1, 3)).
    vocab = {"<unk>": 0}
    for c in "abc":
        for form in (c, prefix + c, c + suffix, prefix + c + suffix):
            vocab.setdefault(form, len(vocab))
    affixes = {k: v for k, v in [("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix)] if v}
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", fuse_unk=True, **affixes))
    hf.normalizer = normalizers.Replace(tokenizers.Regex(r"\p{P}"), "")
    texts = ["a\u3000b", "a\u3000b\u3000c", "\u3000ab", "ab\u3000", "a,b\u3000", "abc", "\u3000", "x"]
    assert stages(gpu_tok.Tokenizer.from_str(hf.to_str()))["model"]["path"] == "fast"
    assert_matches(hf.to_str(), texts, f"prefix {prefix!r} suffix {suffix!r}")


@pytest.mark.parametrize("normalizer", [None, normalizers.Sequence([])], ids=["none", "empty-sequence"])
def test_normalized_added_tokens_without_a_normalizer_take_the_fast_path(normalizer: object) -> None:
    """DeepSeek-V3's chat tokens (`<｜User｜>`...) are `normalized` added
    tokens under an empty normalizer: the crate matches them on the raw text
    as the fast path's split does, so chat rows holding them stay on the fast
    path (they all took the exact path before), with identical ids and offsets."""
    spec = json.loads(gpu_tok._data.default_tokenizer_json())
    spec["normalizer"] = None  # Qwen3's is NFC
    hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    if normalizer is not None:
        hf.normalizer = normalizer
    hf.add_tokens([tokenizers.AddedToken("<｜User｜>", normalized=True, special=False),
                   tokenizers.AddedToken("<｜Assistant｜>", normalized=True, special=False),
                   tokenizers.AddedToken("<｜User｜>x", normalized=False, special=True)])
    json_text = hf.to_str()
    texts = [f"<｜User｜>{a}<｜Assistant｜>{b}<｜User｜>xy <｜User｜> x" for a, b in
             zip(corpus_sample()[:40], corpus_sample()[40:80], strict=True)] + edge_cases()
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert tok._core.fast_path_share(texts[:40], True) == 1.0
    assert tok._core.fast_path_share(texts[:40], False) == 1.0
    assert_matches(json_text, texts, "normalized added tokens")


def test_a_model_without_a_fast_kernel_is_named_in_the_plan() -> None:
    """WordLevel has no fast kernel: every stage runs in the crate, and
    `tok.plan` says so for the model (it gave the byte-level plan's reason
    about the pre-tokenizer before)."""
    json_text = json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "small": 1, "big": 2}, "unk_token": "[UNK]"},
    })
    tok = gpu_tok.Tokenizer.from_str(json_text)
    rows = {row["stage"]: row for row in tok.plan}
    assert [rows[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == ["exact"] * 3
    assert "WordLevel" in rows["model"]["reason"], rows["model"]
    assert tok.encode("small big, x") == unpadded_oracle(json_text).encode("small big, x").ids


# Issue #33 item 4: pre-tokenizers made of Split steps (Whitespace, BertPreTokenizer, Punctuation with each
# behaviour, Digits, CharDelimiterSplit, Split, Sequences of them, perhaps closed by Metaspace) before a
# BPE over characters or a Unigram: the words are cut by the compiled chain (cuda/gt_chain.cuh).
SPLIT_FORMS = {
    "whitespace": pre_tokenizers.Whitespace,
    "bert": pre_tokenizers.BertPreTokenizer,
    **{f"punctuation-{b}": (lambda b=b: pre_tokenizers.Punctuation(behavior=b))
       for b in ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous")},
    "digits": lambda: pre_tokenizers.Digits(individual_digits=False),
    "digits-individual": lambda: pre_tokenizers.Digits(individual_digits=True),
    "char-delimiter": lambda: pre_tokenizers.CharDelimiterSplit("-"),
    "split-string": lambda: pre_tokenizers.Split(" ", behavior="merged_with_previous"),
    "split-regex-inverted": lambda: pre_tokenizers.Split(tokenizers.Regex(r"\p{L}+|\d"), behavior="removed",
                                                         invert=True),
    # the crate's scripts, read from it: Any (spaces) joins the word before, and is dropped at the start
    "unicode-scripts": pre_tokenizers.UnicodeScripts,
    "scripts-then-whitespace": lambda: pre_tokenizers.Sequence([pre_tokenizers.UnicodeScripts(),
                                                                pre_tokenizers.Whitespace()]),
    "whitespace-twice": lambda: pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.Whitespace()]),
    "steps-then-metaspace-first": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.CharDelimiterSplit("-"), pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Metaspace(prepend_scheme="first")]),
    "punctuation-then-metaspace": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation(), pre_tokenizers.Metaspace(prepend_scheme="always", split=False)]),
}


@cache
def split_form(name: str, family: str) -> str:
    """A BPE over characters (byte fallback, the unknown token) or a Unigram
    trained under the pre-tokenizer SPLIT_FORMS[name], with added tokens."""
    if family == "BPE":
        hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
        trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>"], show_progress=False,
                                      limit_alphabet=150)
    else:
        hf = tokenizers.Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=3000, special_tokens=["<unk>"], unk_token="<unk>",
                                          show_progress=False)
    hf.pre_tokenizer = SPLIT_FORMS[name]()
    hf.train_from_iterator([t[:2000] for t in corpus_sample()[:60]], trainer=trainer)
    hf.add_tokens([tokenizers.AddedToken("<sep>"), tokenizers.AddedToken("mid", single_word=True)])
    return hf.to_str()


SPLIT_TEXTS = ["a-b 12-345 x--y", "Hello, world! (it's 2024)...", " -lead trail- ", "mid mid-mid <sep>-1<sep>",
               "été: 東京タワー 123", "  lead ab東京ー x\u0301y αβγ ", "\U000e0001a", "a  b\t\nc\u3000d", "-", ""]


@pytest.mark.parametrize("family", ["BPE", "Unigram"])
@pytest.mark.parametrize("name", list(SPLIT_FORMS))
def test_split_step_pre_tokenizers_run_fast_with_identical_ids_and_offsets(name: str, family: str) -> None:
    json_text = split_form(name, family)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    plan = stages(tok)
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == FAST, plan
    assert "Split steps (cuda/gt_chain.cuh)" in plan["pre_tokenize"]["reason"], plan["pre_tokenize"]
    texts = SPLIT_TEXTS + edge_cases() + [t[:3000] for t in corpus_sample()[60:100]]
    # The corpus documents take the fast path whole (offsets too), not the crate's.
    assert tok._core.fast_path_share(corpus_sample()[60:100], True) >= 0.9
    assert_matches(json_text, texts, f"{family} {name}")
    assert_device_rows_equal_the_cpu(tok, texts)


def assert_device_rows_equal_the_cpu(tok: gpu_tok.Tokenizer, texts: list[str]) -> None:
    """The device pipeline on the host emulator (the host cuts the words
    where the device cannot) gives the CPU's ids."""
    cpu = tok._core.encode_batch(texts, device="cpu").to_lists()
    for device in ("emulator", "emulator:700"):
        assert tok._core.encode_batch(texts, device=device).to_lists() == cpu, device


@pytest.mark.parametrize("pre, why", [
    # ByteLevel(add_prefix_space=true) after Split steps, then its own regex over each spaced word
    (pre_tokenizers.Sequence([pre_tokenizers.Split(tokenizers.Regex(r"\s+"), "isolated"),
                              pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)]),
     "ByteLevel(add_prefix_space=true, use_regex=true)"),
    # ByteLevel in the middle changes what the steps after it see
    (pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                              pre_tokenizers.Digits(), pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                use_regex=False)]),
     "ByteLevel before other steps"),
    (pre_tokenizers.Sequence([pre_tokenizers.Whitespace(), pre_tokenizers.FixedLength(length=3)]), "FixedLength"),
])
def test_pre_tokenizers_outside_the_chain_say_why(pre: pre_tokenizers.PreTokenizer, why: str) -> None:
    hf = tokenizers.Tokenizer.from_str(byte_level("", "", False))
    hf.pre_tokenizer = pre
    json_text = hf.to_str()
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert plan["pre_tokenize"]["path"] == "exact"
    assert why in plan["pre_tokenize"]["reason"], plan["pre_tokenize"]
    assert_matches(json_text, SPLIT_TEXTS + corpus_sample()[60:70], why)


@pytest.mark.parametrize("normalizer", [None, normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase()])],
                         ids=["none", "nfd-lowercase"])
@pytest.mark.parametrize("steps", [
    [pre_tokenizers.Split(tokenizers.Regex(r"\s+"), "merged_with_previous")],
    [pre_tokenizers.Split(tokenizers.Regex(r"\p{L}+|\p{N}+|[^\p{L}\p{N}]+"), "contiguous", invert=True)],
    [pre_tokenizers.Whitespace(), pre_tokenizers.Digits(individual_digits=True)],
    [pre_tokenizers.Split(tokenizers.Regex(r"\s+"), "removed", invert=True)],
    [],
], ids=["merged-with-previous", "contiguous-inverted", "whitespace-digits", "removed-inverted", "alone"])
def test_byte_level_with_a_prefix_space_before_each_word(steps: list, normalizer: object) -> None:
    """A Sequence closed by ByteLevel(add_prefix_space=true, use_regex=false):
    the crate puts a space before every word the steps make (unless it starts
    with one), which takes the word's first character's offsets."""
    hf = tokenizers.Tokenizer.from_str(byte_level("", "", False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([*steps, pre_tokenizers.ByteLevel(add_prefix_space=True,
                                                                                  use_regex=False)])
    if normalizer is not None:
        hf.normalizer = normalizer
    hf.add_tokens([tokenizers.AddedToken("<sep>"), tokenizers.AddedToken("Hello", normalized=True)])
    json_text = hf.to_str()
    tok = gpu_tok.Tokenizer.from_str(json_text)
    plan = stages(tok)
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == FAST, plan
    assert "a space before each word" in plan["pre_tokenize"]["reason"]
    assert tok._core.fast_path_share(corpus_sample()[60:100], True) >= 0.9
    texts = SPLIT_TEXTS + ["  a b  ", "ÉtÉ é\u0301 x<sep>y <sep> Hello hello"] + edge_cases() + corpus_sample()[60:100]
    assert_matches(json_text, texts, "prefix space before each word")
    assert_device_rows_equal_the_cpu(tok, texts)


# Issue #33: WordPiece under any pre-tokenizer of Split steps (not BertPreTokenizer or WhitespaceSplit
# alone, which the kernel's table cuts): the host normalizes each piece, the compiled chain cuts its words,
# the WordPiece kernel reads each word whole.
WORDPIECE_FORMS = {
    "punctuation": pre_tokenizers.Punctuation,
    "bert-then-punctuation": lambda: pre_tokenizers.Sequence([pre_tokenizers.BertPreTokenizer(),
                                                              pre_tokenizers.Punctuation()]),
    "punctuation-then-bert": lambda: pre_tokenizers.Sequence([pre_tokenizers.Punctuation(),
                                                              pre_tokenizers.BertPreTokenizer()]),
    "split-regex-digits": lambda: pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(r"\s+|[^\s\p{L}]"), behavior="isolated"),
        pre_tokenizers.Digits(individual_digits=True)]),
    "unicode-scripts": pre_tokenizers.UnicodeScripts,
    "whitespace-split-punctuation": lambda: pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                                     pre_tokenizers.Punctuation()]),
    "whitespace-split-metaspace": lambda: pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                                   pre_tokenizers.Metaspace()]),
    "metaspace": pre_tokenizers.Metaspace,
    # no pre-tokenizer: each piece between added tokens is one word (long ones the unknown token)
    "none": lambda: None,
}


@cache
def wordpiece_form(name: str, lowercase: bool) -> str:
    """A WordPiece trained under the pre-tokenizer WORDPIECE_FORMS[name], with
    BERT's lowercasing normalizer (accents stripped: host alignments) or none,
    and added tokens."""
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    if lowercase:
        hf.normalizer = normalizers.BertNormalizer(lowercase=True)
    pre = WORDPIECE_FORMS[name]()
    # Trained on Whitespace words when the form keeps long words (none, Punctuation): a vocabulary of pieces.
    hf.pre_tokenizer = pre if name not in ("none", "punctuation") else pre_tokenizers.Whitespace()
    trainer = trainers.WordPieceTrainer(vocab_size=1500, special_tokens=["[UNK]"], show_progress=False,
                                        limit_alphabet=200)
    hf.train_from_iterator([t[:2000] for t in corpus_sample()[:60]], trainer=trainer)
    hf.pre_tokenizer = pre
    # "<sep>" plain (split on the fast path, the pieces after it start later), "Hello" normalized
    hf.add_tokens([tokenizers.AddedToken("<sep>", normalized=False), tokenizers.AddedToken("Hello", normalized=True)])
    return hf.to_str()


@pytest.mark.parametrize("lowercase", [False, True], ids=["no-normalizer", "bert-lowercase"])
@pytest.mark.parametrize("name", list(WORDPIECE_FORMS))
def test_wordpiece_with_split_step_pre_tokenizers_runs_fast_with_identical_ids_and_offsets(
        name: str, lowercase: bool) -> None:
    json_text = wordpiece_form(name, lowercase)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    plan = stages(tok)
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == FAST, plan
    assert "on the host only" in plan["pre_tokenize"]["reason"], plan["pre_tokenize"]
    # Rows split at the plain added token take the fast path whole, offsets too.
    added_rows = ["x<sep>", "<sep>", "ÉtÉ, the cat<sep>the DOG's 12 東京<sep> x-y", "a" * 45 + "<sep> b" + "c" * 41]
    assert tok._core.fast_path_share(added_rows, True) == 1.0
    texts = SPLIT_TEXTS + added_rows + ["ÉtÉ é\u0301 x<sep>y <sep> Hello hello HELLO"]
    texts += edge_cases() + [t[:3000] for t in corpus_sample()[60:100]]
    assert tok._core.fast_path_share(corpus_sample()[60:100], True) >= 0.9
    assert tok._core.fast_path_share(corpus_sample()[60:100], False) >= 0.9
    assert_matches(json_text, texts, f"WordPiece {name}")
    assert_device_rows_equal_the_cpu(tok, texts)
