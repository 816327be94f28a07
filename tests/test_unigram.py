"""Unigram (T5, XLM-R, ALBERT form) on the fast engine (cuda/gt_unigram.cuh),
against the oracle: a SentencePiece model converted the way users get their
tokenizer.json (transformers' XLM-R converter: `Precompiled` charsmap
normalizer, `WhitespaceSplit` + `Metaspace`; tests/fixtures/unigram-xlmr),
the same in T5's form, and vocabularies from the `tokenizers` Unigram
trainer with every Metaspace form, normalizers the crate runs, byte fallback
and no unknown token."""

from __future__ import annotations

import json
from functools import cache

import gpu_tok
import pytest
import tokenizers
from conftest import (
    HAVE_SHARED,
    assert_whole_corpus_ids,
    corpus_sample,
    edge_cases,
    tokenizer_json,
    unpadded_oracle,
)
from test_sentencepiece import TRICKY, assert_matches, stages
from tokenizers import models, normalizers, pre_tokenizers, trainers

MARKS = ["▁▁x ▁ y▁", "a\u0301 e\u0301\u0302 ＡＢＣ ﬁ ｶﾞ \r\n x\r y\u200b z\u00a0w", "🇫🇷👨‍👩‍👧 ก่ำ 각 \u1100\u1161"]


@cache
def converted(kind: str) -> str:
    """The converted SentencePiece model as XLM-R ("xlmr": <s> A </s>) or T5
    ("t5": A </s>, sentinel tokens) writes it."""
    spec = json.loads(tokenizer_json("unigram-xlmr"))
    if kind == "t5":
        eos = {"id": "</s>", "type_id": 0}
        spec["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": eos}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": eos},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": eos}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
        vocab = spec["model"]["vocab"]
        for k in range(3):
            spec["added_tokens"].append({"id": len(vocab), "content": f"<extra_id_{k}>", "single_word": False,
                                         "lstrip": False, "rstrip": False, "normalized": False, "special": True})
            vocab.append([f"<extra_id_{k}>", 0.0])
    return json.dumps(spec)


@pytest.mark.parametrize("kind", ["xlmr", "t5"])
def test_converted_sentencepiece_models_run_fast_with_identical_ids(kind: str) -> None:
    json_text = converted(kind)
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == ["fast"] * 3, plan
    assert plan["normalize"]["component"] == "Precompiled"
    assert_matches(json_text, TRICKY + MARKS + ["<extra_id_1> x</s>"] + edge_cases() + corpus_sample(), kind)


def test_every_code_point_through_the_charsmap() -> None:
    """Each code point alone, after a letter, before a combining mark and
    doubled: the charsmap fast path (per character) and the crate's
    per-grapheme rule must agree everywhere, and so must the offsets (the
    crate's alignments of every mapping, removal and grapheme)."""
    json_text = converted("xlmr")
    points = [chr(c) for c in range(0x20, 0x30000) if not 0xD800 <= c < 0xE000]
    texts = ["".join(f"a{c} {c}\u0301 {c}{c} " for c in points[i:i + 64]) for i in range(0, len(points), 64)]
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    expected = hf.encode_batch_fast(texts, add_special_tokens=False)
    got = tok.encode_batch(texts, padding=False, truncation=False, add_special_tokens=False).to_lists()["input_ids"]
    bad = [i for i, (row, enc) in enumerate(zip(got, expected, strict=True)) if row != enc.ids]
    assert not bad, f"{len(bad)} groups differ, first {texts[bad[0]]!r:.300}"
    offsets = tok.encode_batch(texts, padding=False, truncation=False, add_special_tokens=False,
                               return_offsets=True).to_lists()["offset_mapping"]
    with_offsets = hf.encode_batch(texts, add_special_tokens=False)  # encode_batch_fast leaves offsets out
    bad = [i for i, (row, enc) in enumerate(zip(offsets, with_offsets, strict=True))
           if row != [tuple(o) for o in enc.offsets]]
    assert not bad, f"{len(bad)} groups' offsets differ, first {texts[bad[0]]!r:.300}"


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
def test_whole_corpus_ids() -> None:
    assert_whole_corpus_ids(converted("xlmr"), "xlmr")


def lines() -> list[str]:
    return [line[:200] for text in corpus_sample()[:80] for line in text.split("\n") if line.strip()][:800]


@cache
def trained(unk: bool) -> str:
    """A Unigram vocabulary from the `tokenizers` trainer (Metaspace words)."""
    hf = tokenizers.Tokenizer(models.Unigram())
    hf.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    # The trainer needs a piece for every character it sees: room for those and 400 longer pieces.
    characters = len(set("".join(lines())) | {"▁"})
    trainer = trainers.UnigramTrainer(vocab_size=characters + 400, special_tokens=["<unk>", "<s>", "</s>"],
                                      unk_token="<unk>" if unk else None, show_progress=False)
    hf.train_from_iterator(lines(), trainer=trainer)
    return hf.to_str()


def variant(byte_fallback: bool = False, unk: bool = True, **changes: object) -> str:
    spec = json.loads(trained(unk))
    if byte_fallback:
        # The Python trainer has no byte fallback: SentencePiece's 256 byte pieces (score 0, as
        # transformers' converter writes them) and the model's flag, as a converted model has them.
        known = {piece for piece, _ in spec["model"]["vocab"]}
        spec["model"]["vocab"] += [[f"<0x{b:02X}>", 0.0] for b in range(256) if f"<0x{b:02X}>" not in known]
        spec["model"]["byte_fallback"] = True
    for key, value in changes.items():
        spec[key] = value
    return json.dumps(spec)


def metaspace(prepend: str, split: bool) -> dict:
    return {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend, "split": split}


VARIANTS = {
    "metaspace-always": {},
    "byte-fallback": dict(byte_fallback=True),
    "prepend-first": dict(pre_tokenizer=metaspace("first", True)),
    "prepend-never-whole": dict(pre_tokenizer=metaspace("never", False)),
    "whole-pieces": dict(pre_tokenizer=metaspace("always", False)),
    "no-pre-tokenizer": dict(pre_tokenizer=None),
    "whitespace-split": dict(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, metaspace("first", True)]}),
    # SentencePieceUnigramTokenizer's normalizer; the crate runs Nmt and NFKC
    "nmt-nfkc-collapse": dict(normalizer=json.loads(normalizers.Sequence([
        normalizers.Nmt(), normalizers.NFKC(),
        normalizers.Replace(tokenizers.Regex(" {2,}"), " ")]).__getstate__())),
    "lowercase": dict(normalizer={"type": "Lowercase"}),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_trained_variants(name: str) -> None:
    json_text = variant(**VARIANTS[name])  # type: ignore[arg-type]
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert plan["model"]["path"] == "fast", plan
    texts = TRICKY + MARKS + ["<s>x</s> y", " <s> lead"] + edge_cases() + [t[:2000] for t in corpus_sample()[80:140]]
    assert_matches(json_text, texts, name)


def test_added_tokens_split_the_text_before_the_first_piece_check() -> None:
    """prepend_scheme "first" prepends only to the piece at the start of the text."""
    spec = json.loads(variant(pre_tokenizer=metaspace("first", True)))
    spec["added_tokens"] = [{"id": 1, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True}]
    assert_matches(json.dumps(spec), ["<s>hello world", "hello<s>world", "<s> x", " x<s>"], "first")


def test_first_after_a_normalizer_stays_exact() -> None:
    json_text = variant(pre_tokenizer=metaspace("first", True), normalizer={"type": "Lowercase"})
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert plan["model"]["path"] == "exact" and "first" in plan["model"]["reason"]
    assert_matches(json_text, TRICKY + ["Hello World"], "first-normalized")


def test_no_unknown_token_fails_like_the_crate() -> None:
    """Without an unknown token, a character with no token is the crate's error."""
    json_text = variant(unk=False)
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert stages(tok)["model"]["path"] == "fast"
    known = "the the the"
    assert tok.encode_batch([known], padding=False, truncation=False).to_lists()["input_ids"][0] == \
        hf.encode(known).ids
    with pytest.raises(Exception, match="unk"):
        hf.encode("\U0001f9ff")
    with pytest.raises(gpu_tok.GpuTokError, match="unk"):
        tok.encode_batch(["fine", "\U0001f9ff"], padding=False, truncation=False)


@pytest.mark.parametrize("name", ["xlmr", "t5", "byte-fallback", "whitespace-split", "no-unk"])
def test_emulated_device_pipeline_equals_cpu(name: str) -> None:
    """The device pipeline (on the host emulator): the device cuts
    WhitespaceSplit + Metaspace words itself (gt_metaspace_words: xlmr, t5,
    byte-fallback), the host cuts the others; the Unigram kernel
    (gt_unigram_words) encodes them; the ids of added tokens come from the
    host, and rows of a model without an unknown token are encoded there."""
    from gpu_tok._core import Padding, Truncation

    if name in ("xlmr", "t5"):
        json_text = converted(name)
    elif name == "no-unk":
        json_text = variant(unk=False)
    else:
        json_text = variant(**VARIANTS[name])  # type: ignore[arg-type]
    core = gpu_tok.Tokenizer.from_str(json_text)._core
    texts = TRICKY + MARKS + ["<s>x</s> y"] + edge_cases() + corpus_sample()[:60]
    if name == "no-unk":
        texts = ["the the", "", "a b c"]
    for options in ({}, {"truncation": Truncation(40), "padding": Padding(pad_id=1, pad_token="<pad>"),
                         "attention_mask": True, "special_tokens_mask": True}):
        cpu = core.encode_batch(texts, device="cpu", **options)
        for device in ("emulator", "emulator:900"):
            dev = core.encode_batch(texts, device=device, **options)
            assert cpu.to_lists() == dev.to_lists(), (name, device, options)


@pytest.mark.parametrize("kind", ["xlmr", "t5"])
def test_the_device_reads_whitespace_words_from_text_it_did_not_copy(kind: str) -> None:
    """On a device, XLM-R's charsmap is not applied to whitespace it maps to
    whitespace ("\\n", "\\t" to " "), nor are spaces collapsed: the words
    are the same. Whitespace of every kind and length before words (each
    word's slot for "▁"), at the ends of pieces and around added tokens."""
    json_text = converted(kind)
    blanks = ["\n", "\t", " ", "  ", "\n\n\t ", "\u00a0", "\u3000", "\u2003\n", "\x0b", "\x0c", "\r\n", "\u0085"]
    words = ["a", "▁b", "x▁y", "，", "ｶﾞ", "<s>", "e\u0301", "日本"]
    texts = [blank.join(words[i:] + words[:i]) + blank for i, blank in enumerate(blanks)]
    texts += [blank + text for blank, text in zip(blanks, texts, strict=True)] + blanks
    texts += ["\n".join(words) * 200, "\t" * 2000 + "a", "a" + "\n" * 1500 + "b" * 1500]
    expected = [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(texts)]
    core = gpu_tok.Tokenizer.from_str(json_text)._core
    for device in ("emulator", "emulator:700"):
        assert core.encode_batch(texts, device=device).to_lists()["input_ids"] == expected, device


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
@pytest.mark.parametrize("name", ["byte-fallback", "nmt-nfkc-collapse"])
def test_trained_variants_on_the_whole_corpus(name: str) -> None:
    assert_whole_corpus_ids(variant(**VARIANTS[name]), name)  # type: ignore[arg-type]


def test_added_tokens_that_strip_spaces_send_only_their_texts_to_the_exact_path() -> None:
    """XLM-R as transformers 4.x saved it: `<mask>` with lstrip. The plan stays
    fast; a text holding `<mask>` is split by the crate (exact path)."""
    spec = json.loads(converted("xlmr"))
    for token in spec["added_tokens"]:
        if token["content"] == "<mask>":
            token["lstrip"] = True
    json_text = json.dumps(spec)
    assert stages(gpu_tok.Tokenizer.from_str(json_text))["model"]["path"] == "fast"
    texts = ["x <mask> y", "<mask>", "a<mask>b  <mask>", "<s>x</s>", "plain text"] + corpus_sample()[:20]
    assert_matches(json_text, texts, "lstrip <mask>")
    core = gpu_tok.Tokenizer.from_str(json_text)._core
    assert core.encode_batch(texts, device="cpu").to_lists() == core.encode_batch(texts, device="emulator").to_lists()


def test_a_token_that_strips_spaces_inside_a_plain_match_is_not_one() -> None:
    """The crate matches every added token with one leftmost-longest
    automaton: a plain token's match hides an lstrip token that overlaps it
    ("s>kx" in "<s>kx", after "<s>"), which then takes no spaces; where it is
    matched, only the exact path splits it."""
    spec = json.loads(converted("xlmr"))
    vocab_size = len(spec["model"]["vocab"])
    spec["added_tokens"].append({"id": vocab_size, "content": "s>kx", "single_word": False, "lstrip": True,
                                 "rstrip": True, "normalized": False, "special": True})
    spec["model"]["vocab"].append(["s>kx", 0.0])
    json_text = json.dumps(spec)
    texts = ["a <s>kx b", "a s>kx b", "<s>kxs>kx", "a <s>s>kx  b <s>kx</s>", "plain"] + corpus_sample()[:10]
    assert_matches(json_text, texts, "an lstrip token inside <s>kx")
    core = gpu_tok.Tokenizer.from_str(json_text)._core
    assert core.encode_batch(texts, device="cpu").to_lists() == core.encode_batch(texts, device="emulator").to_lists()


def test_metaspace_written_before_prepend_scheme() -> None:
    """Old files carry `add_prefix_space` only: the crate reads "always"."""
    spec = json.loads(converted("xlmr"))
    spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "add_prefix_space": True}
    json_text = json.dumps(spec)
    assert stages(gpu_tok.Tokenizer.from_str(json_text))["pre_tokenize"]["path"] == "fast"
    assert_matches(json_text, TRICKY + MARKS + corpus_sample()[:20], "add_prefix_space")


@pytest.mark.parametrize("name", ["metaspace-always", "lowercase", "no-pre-tokenizer"])
def test_normalized_added_tokens_are_looked_for_in_each_normalized_piece(name: str) -> None:
    """The crate matches `normalized` added tokens in each piece after the
    normalizer ("HELLO" is "hello" under Lowercase): the plan takes them (it
    refused the whole tokenizer before), a piece whose normalized text holds
    one going to the exact path, the rest fast."""
    hf = tokenizers.Tokenizer.from_str(variant(**VARIANTS[name]))  # type: ignore[arg-type]
    hf.add_tokens([tokenizers.AddedToken("hello", normalized=True),
                   tokenizers.AddedToken("<mark>", normalized=True),
                   tokenizers.AddedToken("<sep>", normalized=False)])
    json_text = hf.to_str()
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert stages(tok)["model"]["path"] == "fast", stages(tok)
    plain = [t[:2000] for t in corpus_sample()[80:120] if "hello" not in t.lower() and "<mark>" not in t]
    assert tok._core.fast_path_share([t + "<sep>x" for t in plain], False) == 1.0
    texts = ["say HELLO there<sep>Hello", "x <mark> y<mark><sep>", "hello", "x<mark>", "<sep>hello<sep>"]
    assert_matches(json_text, texts + TRICKY + MARKS + edge_cases() + plain, name)
