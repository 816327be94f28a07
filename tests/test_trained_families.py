"""Byte-level BPE families without a real model in ../shared: vocabularies
trained here with `tokenizers` on the sample corpus, one per pre-tokenizer
pattern the fast engine covers, checked against the oracle on real text."""

from __future__ import annotations

from functools import cache

import gpu_tok
import pytest
import tokenizers
from conftest import corpus_sample, edge_cases
from tokenizers import decoders, models, pre_tokenizers, trainers

CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _split_then_bytes(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


FAMILIES = {
    "gpt2": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "cl100k": lambda: _split_then_bytes(CL100K),
    "o200k": lambda: _split_then_bytes(O200K),
    # No hand-written scanner knows this pattern; the compiler takes it as it takes the others.
    "custom": lambda: _split_then_bytes(r"\p{L}+|\p{N}+|[^\p{L}\p{N}]+"),
}


@cache
def trained(family: str, ignore_merges: bool) -> str:
    model = models.BPE(ignore_merges=ignore_merges)
    hf = tokenizers.Tokenizer(model)
    hf.pre_tokenizer = FAMILIES[family]()
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    hf.train_from_iterator(corpus_sample()[:120], trainer=trainer)
    return hf.to_str()


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("ignore_merges", [False, True])
def test_trained_family_matches_the_oracle(family: str, ignore_merges: bool) -> None:
    json_text = trained(family, ignore_merges)
    hf = tokenizers.Tokenizer.from_str(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    plan = {row["stage"]: row for row in tok.plan}
    assert plan["model"]["path"] == plan["pre_tokenize"]["path"] == "fast"
    assert "compiled DFA" in plan["pre_tokenize"]["reason"]
    texts = edge_cases() + corpus_sample()[120:220] + ["<|endoftext|> in the middle<|endoftext|>"]
    expected = [e.ids for e in hf.encode_batch(texts)]
    assert tok(texts)["input_ids"] == expected
    offsets = tok(texts, return_offsets_mapping=True)["offset_mapping"]
    assert offsets == [[tuple(o) for o in e.offsets] for e in hf.encode_batch(texts)]
