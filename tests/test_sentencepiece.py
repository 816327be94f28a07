"""SentencePiece-style BPE (Llama-2 / Mistral / Gemma form: no pre-tokenizer,
`Prepend("▁")` + `Replace(" ", "▁")`, BPE over characters with byte
fallback) on the fast engine (cuda/gt_spm.cuh), against the oracle: the real
Mistral-7B tokenizer (`llama2`) and vocabularies trained here with every
model option (byte_fallback, fuse_unk, ignore_merges, no unknown token) and
normalizer form."""

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
from tokenizers import models, pre_tokenizers, trainers

LLAMA = "llama2"
TRICKY = [
    "<s>Hello</s> world <unk>x</s>",
    "  two  spaces  and\ttabs\n\nnewlines ",
    "▁▁literal▁marks▁",
    "naïve café 東京 Привет 🤷🏽‍♀️ \u0000 \U0010ffff \ufffd",
    "x" * 3000,
    "",
    " ",
]


def assert_matches(json_text: str, texts: list[str], label: str) -> None:
    """ids and offsets (both on the fast path where the plan allows) equal the oracle's."""
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    expected = hf.encode_batch(texts)
    got = tok.encode_batch(texts, padding=False, truncation=False).to_lists()["input_ids"]
    for i, (ids, enc) in enumerate(zip(got, expected, strict=True)):
        assert ids == enc.ids, f"{label}: ids differ on {texts[i]!r:.200}"
    with_offsets = tok.encode_batch(texts, padding=False, truncation=False, return_offsets=True).to_lists()
    assert with_offsets["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected], label


def stages(tok: gpu_tok.Tokenizer) -> dict[str, dict[str, str]]:
    return {row["stage"]: row for row in tok.plan}


def test_mistral_runs_on_the_fast_path_with_identical_ids() -> None:
    json_text = tokenizer_json(LLAMA)
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert [plan[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == ["fast"] * 3
    assert "words cut between" in plan["pre_tokenize"]["reason"]
    assert_matches(json_text, TRICKY + edge_cases() + corpus_sample(), LLAMA)


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
def test_whole_corpus_ids() -> None:
    texts = whole_corpus()
    expected = unpadded_oracle(tokenizer_json(LLAMA)).encode_batch_fast(texts)
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(LLAMA))
    got = tok.encode_batch(texts, padding=False, truncation=False).to_lists()["input_ids"]
    bad = [i for i, (row, enc) in enumerate(zip(got, expected, strict=True)) if row != enc.ids]
    assert not bad, f"{len(bad)} documents differ, first {texts[bad[0]]!r:.200}"


def lines() -> list[str]:
    """Short lines of the sample corpus: BPE trains on whole pieces here."""
    return [line[:200] for text in corpus_sample()[:80] for line in text.split("\n") if line.strip()][:600]


@cache
def trained(byte_fallback: bool, fuse_unk: bool) -> str:
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=byte_fallback, fuse_unk=fuse_unk))
    # Trained on words, as SentencePiece trains (no piece has "▁" inside), then
    # saved in the converted form: Prepend + Replace, no pre-tokenizer.
    hf.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                                  limit_alphabet=150)
    hf.train_from_iterator(lines(), trainer=trainer)
    spec = json.loads(hf.to_str())
    spec["pre_tokenizer"] = None
    spec["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    if byte_fallback:  # as SentencePiece converters add them: vocabulary entries, not added tokens
        vocab = spec["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    return json.dumps(spec)


def variant(byte_fallback: bool, fuse_unk: bool, **changes: object) -> str:
    spec = json.loads(trained(byte_fallback, fuse_unk))
    for key, value in changes.items():
        if key in ("normalizer", "pre_tokenizer"):
            spec[key] = value
        elif key == "extra_token":
            spec["model"]["vocab"][value] = len(spec["model"]["vocab"])
        else:
            spec["model"][key] = value
    return json.dumps(spec)


VARIANTS = {
    "byte-fallback": dict(byte_fallback=True, fuse_unk=True),
    "unk-fused": dict(byte_fallback=False, fuse_unk=True),
    "unk-separate": dict(byte_fallback=False, fuse_unk=False),
    "ignore-merges": dict(byte_fallback=True, fuse_unk=True, ignore_merges=True),
    "no-unknown-token": dict(byte_fallback=False, fuse_unk=False, unk_token=None),
    # Gemma's form: spaces replaced, nothing prepended
    "replace-only": dict(byte_fallback=True, fuse_unk=True,
                         normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "▁"}),
    "no-normalizer": dict(byte_fallback=True, fuse_unk=True, normalizer=None),
    # a token with "▁" after another character: no cut between those two
    "token-across-a-space": dict(byte_fallback=True, fuse_unk=True, extra_token="a▁b"),
    # the newer conversions (legacy=False): no normalizer, a Metaspace pre-tokenizer
    "metaspace-first": dict(byte_fallback=True, fuse_unk=True, normalizer=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}),
    "metaspace-always-split": dict(byte_fallback=True, fuse_unk=True, normalizer=None, pre_tokenizer={
        "type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_trained_variants(name: str) -> None:
    json_text = variant(**VARIANTS[name])  # type: ignore[arg-type]
    plan = stages(gpu_tok.Tokenizer.from_str(json_text))
    assert plan["model"]["path"] == "fast", plan
    # ignore_merges looks the whole piece up: it is never cut
    assert ("words cut between" in plan["pre_tokenize"]["reason"]) == (name != "ignore-merges")
    texts = TRICKY + ["xa b a▁b ab▁ a▁▁b", "<s>lead", " <s> x"] + edge_cases()
    texts += [t[:2000] for t in corpus_sample()[80:140]]
    assert_matches(json_text, texts, name)


def test_other_normalizers_run_in_the_crate_per_piece() -> None:
    """NFKC, Strip, Lowercase... run as the crate's own normalizer on each
    piece between added tokens; the words and BPE stay on the fast path."""
    for normalizer in ({"type": "NFKC"}, {"type": "Sequence", "normalizers": [
            {"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "Lowercase"},
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}):
        spec = json.loads(trained(True, True))
        spec["normalizer"] = normalizer
        tok = gpu_tok.Tokenizer.from_str(json.dumps(spec))
        assert stages(tok)["model"]["path"] == "fast"
        assert_matches(json.dumps(spec), TRICKY + ["<s> Lead </s>  X "] + edge_cases()[:60], str(normalizer))


def test_a_pre_tokenizer_outside_the_plan_is_left_to_the_crate() -> None:
    # (Whitespace, the example here before, is a chain of Split steps now: fast.)
    spec = json.loads(trained(True, True))
    spec["pre_tokenizer"] = {"type": "FixedLength", "length": 3}
    tok = gpu_tok.Tokenizer.from_str(json.dumps(spec))
    row = stages(tok)["pre_tokenize"]
    assert row["path"] == "exact", row
    assert "FixedLength" in row["reason"], row
    assert_matches(json.dumps(spec), TRICKY + edge_cases()[:30], "FixedLength")
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    assert stages(gpu_tok.Tokenizer.from_str(json.dumps(spec)))["pre_tokenize"]["path"] == "fast"
    assert_matches(json.dumps(spec), TRICKY + edge_cases()[:30], "Whitespace")


@pytest.mark.parametrize("name", ["byte-fallback", "unk-separate", "ignore-merges", "no-unknown-token",
                                  "metaspace-first", "metaspace-always-split"])
def test_emulated_device_pipeline_equals_cpu(name: str) -> None:
    """The device pipeline (on the host emulator): the host normalizes and
    cuts rows into pieces of ~1 kB, the device cuts them into words
    (gt_spm_cut_words; the host cuts them under a Metaspace pre-tokenizer) and
    the SentencePiece BPE kernel (gt_spm_words) encodes them; the ids of added
    tokens come from the host."""
    from gpu_tok._core import Padding, Truncation

    core = gpu_tok.Tokenizer.from_str(variant(**VARIANTS[name]))._core  # type: ignore[arg-type]
    texts = TRICKY + ["<s>lead", " <s> x"] + edge_cases() + [t[:3000] for t in corpus_sample()[80:120]]
    for options in ({}, {"truncation": Truncation(48, side="left"),
                         "padding": Padding(side="left", pad_id=2, pad_token="</s>"), "attention_mask": True}):
        cpu = core.encode_batch(texts, device="cpu", **options)
        for device in ("emulator", "emulator:700"):
            assert cpu.to_lists() == core.encode_batch(texts, device=device, **options).to_lists(), (name, device)


@pytest.mark.skipif(not HAVE_SHARED, reason="the whole mixed.jsonl lives in ../shared")
@pytest.mark.parametrize("name", ["unk-separate", "metaspace-first"])
def test_trained_variants_on_the_whole_corpus(name: str) -> None:
    assert_whole_corpus_ids(variant(**VARIANTS[name]), name)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["byte-fallback", "metaspace-always-split", "no-normalizer"])
def test_normalized_added_tokens_are_looked_for_in_each_normalized_piece(name: str) -> None:
    """The crate matches `normalized` added tokens in each piece after the
    normalizer (Llama-2's "hello world" is "▁hello▁world" there): the plan
    takes them (it refused the whole tokenizer before), a piece whose
    normalized text holds one going to the exact path, the rest fast."""
    hf = tokenizers.Tokenizer.from_str(variant(**VARIANTS[name]))  # type: ignore[arg-type]
    hf.add_tokens([tokenizers.AddedToken("hello world", normalized=True),
                   tokenizers.AddedToken("<mark>", normalized=True),
                   tokenizers.AddedToken("<sep>", normalized=False)])
    json_text = hf.to_str()
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert stages(tok)["model"]["path"] == "fast", stages(tok)
    plain = [t[:2000] for t in corpus_sample()[80:120] if "hello world" not in t and "<mark>" not in t]
    assert tok._core.fast_path_share([t + "<sep>x" for t in plain], False) == 1.0
    texts = ["say hello world<sep>hello  world", "x <mark> y<mark><sep>", "hello world", "x<mark>",
             "<sep>hello world<sep>"] + TRICKY + edge_cases() + plain
    assert_matches(json_text, texts, name)
