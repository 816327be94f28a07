"""Decoding in the core (`engine/decode.rs`: per-id forms for ByteLevel,
Metaspace / Replace+ByteFallback+Fuse+Strip and WordPiece decoders, the
crate's decoder otherwise) against `tokenizers`' `decode_batch`: the corpus's
ids, rows cut anywhere (partial UTF-8 sequences, lone byte-fallback tokens),
random ids including special tokens, ids past the vocabulary and the largest
u32, with and without `skip_special_tokens`; and transformers'
`clean_up_tokenization_spaces` applied on top."""

from __future__ import annotations

import random

import pytest
import tokenizers
from conftest import TOKENIZER_NAMES, corpus_sample, edge_cases, ours, tokenizer_json


def oracle(name: str) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_str(tokenizer_json(name))


def rows_for(name: str, hf: tokenizers.Tokenizer) -> list[list[int]]:
    texts = edge_cases()[::2] + [t[:2000] for t in corpus_sample()[:20]]
    rows = [e.ids for e in hf.encode_batch(texts)]
    rng = random.Random(f"decode-{name}")
    size = hf.get_vocab_size(with_added_tokens=True)
    cut = [row[rng.randrange(len(row) + 1):][:rng.randrange(1, 12)] for row in rows if row]
    noise = [[rng.randrange(size) for _ in range(rng.randrange(0, 16))] for _ in range(200)]
    beyond = [[5, size, size + 7, 2**32 - 1, 6], [size - 1, 0, size - 1]]
    # The first kept token past the first chunk of ids the core gathers at once (32).
    late = [[0] * 40 + rows[0][:50], [size + 1] * 70 + rows[1][:50]]
    return rows + cut + noise + beyond + late


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_decode_batch_is_the_crates(name: str) -> None:
    hf, tok = oracle(name), ours(name)
    hf.no_padding()
    hf.no_truncation()
    rows = rows_for(name, hf)
    for skip in (True, False):
        got = tok.decode_batch(rows, skip_special_tokens=skip)
        expected = hf.decode_batch(rows, skip_special_tokens=skip)
        bad = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
        assert not bad, f"{name} skip={skip}: {len(bad)} rows differ, first {rows[bad[0]]}: " \
                        f"{got[bad[0]]!r} != {expected[bad[0]]!r}"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_clean_up_tokenization_spaces_is_transformers(name: str) -> None:
    transformers = pytest.importorskip("transformers")
    def clean(text: str) -> str:  # an instance method that reads nothing of its instance
        return transformers.PreTrainedTokenizerBase.clean_up_tokenization(None, text)

    hf, tok = oracle(name), ours(name)
    spaced = "He said , \" do n't ! \" it 's ' odd ' ? I 'm , we 've , they 're ."
    rows = rows_for(name, hf)[:80] + [hf.encode(spaced).ids]
    got = tok.batch_decode(rows, skip_special_tokens=True, clean_up_tokenization_spaces=True)
    expected = [clean(t) for t in hf.decode_batch(rows, skip_special_tokens=True)]
    if tok._model_kind == "BPE":  # transformers 5 skips the clean-up for BPE models
        expected = hf.decode_batch(rows, skip_special_tokens=True)
    assert got == expected
