"""WordPiece (BERT-style) on the fast engine: `BertNormalizer` and the
pre-tokenizer as per-code-point tables, WordPiece's greedy longest match
(cuda/gt_wordpiece.cuh). Ids, offsets and type ids against the oracle on the
real BERT tokenizer, every normalizer option, both pre-tokenizers and a
vocabulary trained here (many unknown words and continuing pieces)."""

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
    whole_corpus,
)
from tokenizers import models, normalizers, pre_tokenizers, trainers

BERT = "bert-minilm"
# Text the fast path must get right: accents (composed and not), CJK, case
# that lowercases to two characters, controls, punctuation runs, added tokens.
TRICKY = [
    "Héllo, WORLD!! naïve café — e\u0301t\u0301e\u0301 İstanbul ǅ ß ΐ",
    "東京は晴れ。中文字符测试ok 한국어 テスト",
    "tab\tnew\nline\r\n\x00nul\ufffdrepl \u200bzero\u00a0nbsp \u3000ideo",
    "[CLS] a [SEP]b[MASK]c [mask] [UNK]x",
    "supercalifragilisticexpialidocious" * 4 + " antidisestablishmentarianism",
    "a\U0001d165b \u0f73 \u0345 x\u0323\u0301y",  # a mark NFD reorders: the exact path, same result
    "",
    "   ",
    "!!!???...",
]


def assert_matches(json_text: str, texts: list[str], label: str) -> None:
    """ids, offsets and type ids (with pairs too) equal the oracle's."""
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    expected = hf.encode_batch(texts)
    got = tok.encode_batch(texts, padding=False, truncation=False, return_offsets=True).to_lists()
    for i, (enc, ids, offsets) in enumerate(zip(expected, got["input_ids"], got["offset_mapping"], strict=True)):
        assert ids == enc.ids, f"{label}: ids differ on {texts[i]!r:.200}"
        assert offsets == [tuple(o) for o in enc.offsets], f"{label}: offsets differ on {texts[i]!r:.200}"
    plain = tok.encode_batch(texts, padding=False, truncation=False).to_lists()["input_ids"]
    assert plain == [e.ids for e in expected], f"{label}: ids without offsets"
    pairs = texts[1:] + texts[:1]
    expected_pairs = hf.encode_batch(list(zip(texts, pairs, strict=True)))
    got_pairs = tok.encode_batch(texts, pairs, padding=False, truncation=False, return_token_type_ids=True).to_lists()
    assert got_pairs["input_ids"] == [e.ids for e in expected_pairs], f"{label}: pairs"
    assert got_pairs["token_type_ids"] == [e.type_ids for e in expected_pairs], f"{label}: type ids"


def stages(tok: gpu_tok.Tokenizer) -> dict[str, str]:
    return {row["stage"]: row["path"] for row in tok.plan}


def test_bert_runs_on_the_fast_path_with_identical_results() -> None:
    json_text = tokenizer_json(BERT)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert [stages(tok)[s] for s in ("normalize", "pre_tokenize", "model")] == ["fast"] * 3
    assert_matches(json_text, TRICKY + edge_cases() + corpus_sample(), BERT)


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
def test_whole_corpus_ids_and_offsets() -> None:
    """All of mixed.jsonl (34 MB, many scripts and code): ids and offsets."""
    texts = whole_corpus()
    hf = unpadded_oracle(tokenizer_json(BERT))
    expected = hf.encode_batch_fast(texts)
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(BERT))
    got = tok.encode_batch(texts, padding=False, truncation=False).to_lists()["input_ids"]
    bad = [i for i, (row, enc) in enumerate(zip(got, expected, strict=True)) if row != enc.ids]
    assert not bad, f"{len(bad)} documents differ, first {texts[bad[0]]!r:.200}"
    expected = hf.encode_batch(texts[::10])
    got = tok.encode_batch(texts[::10], padding=False, truncation=False, return_offsets=True).to_lists()
    pairs = zip(got["offset_mapping"], expected, strict=True)
    bad = [i for i, (row, enc) in enumerate(pairs) if row != [tuple(o) for o in enc.offsets]]
    assert not bad, f"{len(bad)} documents' offsets differ"


def with_components(normalizer: object, pre_tokenizer: object) -> str:
    spec = json.loads(tokenizer_json(BERT))
    spec["normalizer"] = normalizer
    spec["pre_tokenizer"] = pre_tokenizer
    return json.dumps(spec)


BERT_PRE = {"type": "BertPreTokenizer"}
VARIANTS = {
    "cased": ({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
               "strip_accents": None, "lowercase": False}, BERT_PRE),
    "lowercase-keep-accents": ({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                "strip_accents": False, "lowercase": True}, BERT_PRE),
    "strip-accents-only": ({"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
                            "strip_accents": True, "lowercase": False}, BERT_PRE),
    "no-normalizer": (None, BERT_PRE),
    "whitespace-split": ({"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True}, {"type": "WhitespaceSplit"}),
    # any normalizer that maps code points on their own is one table too
    "nfkc-lowercase": ({"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}, BERT_PRE),
    "nfd-strip-accents-replace": ({"type": "Sequence", "normalizers": [
        {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Replace", "pattern": {"String": "-"}, "content": " - "}]},
        {"type": "WhitespaceSplit"}),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_normalizer_options_and_pre_tokenizers(variant: str) -> None:
    json_text = with_components(*VARIANTS[variant])
    assert [stages(gpu_tok.Tokenizer.from_str(json_text))[s] for s in ("normalize", "model")] == ["fast"] * 2
    assert_matches(json_text, TRICKY + edge_cases() + corpus_sample()[:60], variant)


# Normalizers that do not map each code point on its own: the host
# normalizes each piece (plan/normalize/), the kernel splits and encodes it.
HOST_NORMALIZED = {
    "strip-lowercase": ({"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Lowercase"}]}, BERT_PRE),
    "clip-like": ({"type": "Sequence", "normalizers": [
        {"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
        {"type": "Lowercase"}]}, BERT_PRE),
    "prepend-replace": ({"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": " ▁"},
        {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
         "lowercase": True}]}, {"type": "WhitespaceSplit"}),
    "replace-string-strip-right": ({"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "in"}, "content": "IN "}, {"type": "NFD"},
        {"type": "Strip", "strip_left": False, "strip_right": True}]}, BERT_PRE),
}


@pytest.mark.parametrize("variant", list(HOST_NORMALIZED))
def test_normalizers_the_kernel_cannot_take_run_on_the_host(variant: str) -> None:
    """A normalizer that does not map each code point on its own (Strip,
    Prepend, Replace of a string or a regex, NFC): the host normalizes each
    piece with the crate's alignments and the WordPiece kernel splits and
    encodes it; ids and offsets are the crate's."""
    json_text = with_components(*HOST_NORMALIZED[variant])
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert [stages(tok)[s] for s in ("normalize", "pre_tokenize", "model")] == ["fast"] * 3, tok.plan
    plain = [t[:2000] for t in corpus_sample()[:60]]
    assert tok._core.fast_path_share(plain, False) == 1.0
    assert_matches(json_text, TRICKY + edge_cases() + plain, variant)


def test_components_the_plan_does_not_cover_run_exactly() -> None:
    """A pre-tokenizer the WordPiece plan does not cover (FixedLength: not a
    Split step; Metaspace and Split steps are, see test_forms.py): the whole
    tokenizer runs in the crate, and the plan says why."""
    json_text = with_components({"type": "Lowercase"}, {"type": "FixedLength", "length": 3})
    tok = gpu_tok.Tokenizer.from_str(json_text)
    row = next(r for r in tok.plan if r["stage"] == "pre_tokenize")
    assert row["path"] == "exact" and "FixedLength" in row["reason"], row
    assert_matches(json_text, TRICKY + edge_cases()[:40], "exact path")


@pytest.mark.parametrize("variant", ["cased", "strip-lowercase"])
def test_normalized_added_tokens_are_looked_for_in_each_normalized_piece(variant: str) -> None:
    """The crate matches `normalized` added tokens in each piece after the
    normalizer ("Hello World" is "hello world" there under lowercase): the
    plan takes them (it refused the whole tokenizer before), a piece whose
    normalized text holds one going to the exact path, the rest fast."""
    components = (VARIANTS | HOST_NORMALIZED)[variant]
    hf = tokenizers.Tokenizer.from_str(with_components(*components))
    hf.add_tokens([tokenizers.AddedToken("hello world", normalized=True),
                   tokenizers.AddedToken("<mark>", normalized=True),
                   tokenizers.AddedToken("<sep>", normalized=False)])
    json_text = hf.to_str()
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert stages(tok)["model"] == "fast", tok.plan
    plain = [t[:2000] for t in corpus_sample()[80:120] if "hello world" not in t.lower() and "<mark>" not in t]
    assert tok._core.fast_path_share([t + "<sep>x" for t in plain], False) == 1.0
    texts = ["say Hello World<sep>hello  world", "x <MARK> y<mark><sep>", "hello world", "x<mark>",
             "<sep>HELLO WORLD<sep>"] + TRICKY + edge_cases() + plain
    assert_matches(json_text, texts, variant)


@cache
def trained(max_chars: int) -> str:
    """A small WordPiece trained here: many words fall apart into `##` pieces or [UNK]."""
    hf = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=max_chars))
    hf.normalizer = normalizers.BertNormalizer()
    hf.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=600, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"],
                                        show_progress=False)
    hf.train_from_iterator(corpus_sample()[:100], trainer=trainer)
    return hf.to_str()


@pytest.mark.parametrize("max_chars", [100, 6])
def test_trained_vocabulary(max_chars: int) -> None:
    json_text = trained(max_chars)
    assert stages(gpu_tok.Tokenizer.from_str(json_text))["model"] == "fast"
    assert_matches(json_text, TRICKY + edge_cases() + corpus_sample()[100:160], f"trained, max {max_chars}")


def test_missing_unknown_token_fails_as_the_crate_does() -> None:
    """A word no piece covers needs [UNK]; without it in the vocabulary the crate
    refuses the text, and so does gpu_tok (the plan leaves it to the crate)."""
    spec = json.loads(trained(100))
    spec["model"]["unk_token"] = "[NOPE]"
    json_text = json.dumps(spec)
    assert stages(gpu_tok.Tokenizer.from_str(json_text))["model"] == "exact"
    with pytest.raises(Exception, match="(?i)unk"):
        unpadded_oracle(json_text).encode("\u2603\u2603")
    with pytest.raises(gpu_tok.GpuTokError, match="(?i)unk"):
        gpu_tok.Tokenizer.from_str(json_text).encode("\u2603\u2603")


@pytest.mark.parametrize("variant", [*VARIANTS, *HOST_NORMALIZED, "trained-max-6"])
def test_emulated_device_pipeline_equals_cpu(variant: str) -> None:
    """The device pipeline (on the host emulator): the host cuts rows before
    spaces, the WordPiece kernel (gt_wordpiece_words) normalizes, splits and
    encodes each piece; rows with added tokens or exact-path code points are
    encoded by the host."""
    from gpu_tok._core import Padding, Truncation

    components = (VARIANTS | HOST_NORMALIZED).get(variant)
    json_text = with_components(*components) if components else trained(6)
    core = gpu_tok.Tokenizer.from_str(json_text)._core
    texts = TRICKY + ["[CLS] x [SEP]", "a" * 9000 + " b " * 3000] + edge_cases() + corpus_sample()[:40]
    for options in ({}, {"truncation": Truncation(64), "padding": Padding(pad_id=0, pad_token="[PAD]"),
                         "attention_mask": True, "type_ids": True}):
        cpu = core.encode_batch(texts, device="cpu", **options)
        for device in ("emulator", "emulator:2000"):
            assert cpu.to_lists() == core.encode_batch(texts, device=device, **options).to_lists(), (variant, device)


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
def test_trained_vocabulary_on_the_whole_corpus() -> None:
    assert_whole_corpus_ids(trained(100), "trained WordPiece")
