"""Generated text against the oracle: every tokenizer, ids and offsets, with
the characters that break tokenizers (combining marks, emoji, CJK, RTL,
whitespace runs, digits, contractions, `\\r\\n`). Bounded for CI."""

from __future__ import annotations

from functools import cache

import tokenizers
from conftest import TOKENIZER_NAMES, ours, tokenizer_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

PIECES = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "'s", "'S", "'ll", "n't", "I'M", "’s",
    "e\u0301", "\u0301", "é", "ß", "İ", "東京", "の", "한국어", "مرحبا", "שלום", "\u200d", "\u200f",
    "🤷🏽‍♀️", "👨‍👩‍👧", "🇫🇷", "1", "12", "123", "1234", "١٢", "½", "x²", "def", "Hello", "WORLD",
    "<|endoftext|>", "<s>", "[CLS]", "##", "▁", "Ġ", ".", ",", "!?", "...", "--", "$", "\x00", "\ufeff",
    "'ſ", "'LL", "'Re", "\x0b", "\x0c", "\u0085", "/", "//\n", "ǅ", "ʰ", "ABC", "aBc", "ÉCOLE", "一二", "ゟ", "ア",
    "！", "(é", "[x", "\u200b", "\U0001d400", "٣", "Ⅻ", "₂", "\u0e31", "\u0903",
    "ﬁ", "ＡＢＣ", "①", "Å", "ｶﾞ", "㍿", "ǆ", "\u2126", "\u1e9b\u0323",  # NFC/NFKC change these
    # added tokens of the shared tokenizers' chat templates, whole and cut
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|im_", "<｜begin▁of▁sentence｜>", "<｜User｜>",
    "<|start|>", "<|message|>", "<|end|>", "<|channel|>", "</s>", "[SEP]", "[MASK]",
]

texts = st.lists(
    st.one_of(st.sampled_from(PIECES), st.text(max_size=6)),
    max_size=24,
).map("".join)


@cache
def oracle(name: str) -> tokenizers.Tokenizer:
    hf = tokenizers.Tokenizer.from_str(tokenizer_json(name))
    hf.no_truncation()
    hf.no_padding()
    return hf


def _surrogate_free(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(batch=st.lists(texts, min_size=1, max_size=8))
def test_generated_text_matches_tokenizers(batch: list[str]) -> None:
    batch = [_surrogate_free(t) for t in batch]
    for name in TOKENIZER_NAMES:
        expected = oracle(name).encode_batch(batch)
        got = ours(name)(batch, return_offsets_mapping=True, return_token_type_ids=True)
        assert got["input_ids"] == [e.ids for e in expected], name
        assert got["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected], name
        assert got["token_type_ids"] == [e.type_ids for e in expected], name
        assert ours(name)(batch)["input_ids"] == [e.ids for e in expected], f"{name} (fast path)"
        round_trip = ours(name).decode_batch(got["input_ids"])
        assert round_trip == oracle(name).decode_batch([e.ids for e in expected]), name
