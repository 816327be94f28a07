"""`Tokenizer.encode`'s plain case (one str, no pair, no truncation or
padding) runs on the calling thread through `CoreTokenizer.encode_ids`: its
ids must be the batch call's and `tokenizers`' ids, whatever decides them
(added tokens, special tokens, the post-processor, split_special_tokens)."""

from __future__ import annotations

import copy
import dataclasses
import gc

import gpu_tok
import pytest
import tokenizers
from conftest import TOKENIZER_NAMES, corpus_sample, edge_cases, reference, tokenizer_config, tokenizer_json

gpu_tok_core = gpu_tok._core


class CountingCore:
    """A CoreTokenizer that counts `encode_ids` calls (the fast path's)."""

    def __init__(self, core: gpu_tok_core.CoreTokenizer) -> None:
        self.core, self.calls = core, 0

    def encode_ids(self, text: str, add_special_tokens: bool) -> list[int]:
        self.calls += 1
        return self.core.encode_ids(text, add_special_tokens)

    def __getattr__(self, name: str) -> object:
        return getattr(self.core, name)


def counted(tok: gpu_tok.Tokenizer) -> tuple[gpu_tok.Tokenizer, CountingCore]:
    other = copy.copy(tok)
    spy = CountingCore(tok._core)
    other._state = dataclasses.replace(tok._state, core=spy)  # type: ignore[arg-type]
    return other, spy


def ours_fresh(name: str) -> gpu_tok.Tokenizer:
    return gpu_tok.Tokenizer.from_str(tokenizer_json(name), tokenizer_config(name))


def texts_for(tok: gpu_tok.Tokenizer) -> list[str]:
    added = [content for _, content, _ in tok._core.added_tokens()][:20]
    long_doc = " ".join(corpus_sample()[:3])
    return (edge_cases() + corpus_sample()[:30] + [f"x{a} y {a}{a}" for a in added]
            + ["", " ", "\n\n", long_doc, long_doc[:5000]])


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_plain_encode_takes_the_fast_path_with_the_batch_ids(name: str) -> None:
    tok, spy = counted(ours_fresh(name))
    hf = reference(name)
    hf.no_truncation()
    hf.no_padding()
    texts = texts_for(tok)
    for special in (True, False):
        expected = [e.ids for e in hf.encode_batch(texts, add_special_tokens=special)]
        batch = tok(texts, add_special_tokens=special)["input_ids"]  # the call's own path
        before = spy.calls
        fast = [tok.encode(t, add_special_tokens=special) for t in texts]
        assert spy.calls - before == len(texts)
        for i, text in enumerate(texts):
            assert fast[i] == batch[i] == expected[i], f"{name} special={special}: {text!r:.200}"
    assert tok.encode(texts[0]) == tok.encode(texts[0], add_special_tokens=True)


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_other_calls_keep_the_general_path(name: str) -> None:
    """Pairs, truncation, padding, tensors and split_special_tokens go the
    general way, with the oracle's ids."""
    tok, spy = counted(ours_fresh(name))
    hf = reference(name)
    hf.no_truncation()
    hf.no_padding()
    text = corpus_sample()[1][:300]
    assert tok.encode(text, "a pair") == hf.encode(text, "a pair").ids
    assert tok.encode(text, truncation=True, max_length=5) == tok(text, truncation=True, max_length=5)["input_ids"]
    assert len(tok.encode(text, truncation=True, max_length=5)) == 5
    assert tok.encode([text]) == [hf.encode(text).ids]
    assert tok.encode(text, return_tensors="np").tolist() == [hf.encode(text).ids]
    assert spy.calls == 0
    special = [content for _, content, is_special in tok._core.added_tokens() if is_special][:1]
    if special:
        # split_special_tokens: the ids with the special token split as text
        # (the fast path would keep it whole).
        plain = ours_fresh(name)
        glued = f"a{special[0]}b"
        plain.split_special_tokens = True
        hf.encode_special_tokens = True
        split = hf.encode(glued).ids
        assert plain.encode(glued) == split
        plain.split_special_tokens = False
        hf.encode_special_tokens = False
        assert plain.encode(glued) == hf.encode(glued).ids != split


def test_added_tokens_reach_the_fast_path() -> None:
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(TOKENIZER_NAMES[0]))
    before = tok.encode("a zzqqxx b", add_special_tokens=False)
    assert tok.add_tokens(["zzqqxx"]) == 1
    after = tok.encode("a zzqqxx b", add_special_tokens=False)
    assert after != before and tok.convert_tokens_to_ids("zzqqxx") in after
    assert after == tok(["a zzqqxx b"], add_special_tokens=False)["input_ids"][0]


def test_bad_text_fails_as_the_general_path_does() -> None:
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(TOKENIZER_NAMES[0]))
    with pytest.raises(gpu_tok.InvalidInputError, match="lone surrogates") as fast:
        tok.encode("a\ud800b")
    with pytest.raises(gpu_tok.InvalidInputError) as general:
        tok(["a\ud800b"])
    assert str(fast.value) == str(general.value)
    with pytest.raises(TypeError):
        tok.encode(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tok.encode("a", add_special_tokens=1)  # type: ignore[arg-type]


def test_ids_are_shared_ints_that_outlive_their_tokenizer() -> None:
    # Lists of ids hold one int object per id (a tokenizer's own), so a kept
    # list costs no int per token; the ints must stay valid after the
    # tokenizer is gone.
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(TOKENIZER_NAMES[0]))
    texts = corpus_sample()[:4]
    one = [tok.encode(t, add_special_tokens=False) for t in texts]
    again = [tok.encode(t, add_special_tokens=False) for t in texts]
    rows = tok(texts, add_special_tokens=False)["input_ids"]
    assert one == again == rows
    big = [(i, j) for i, row in enumerate(one) for j, v in enumerate(row) if v > 256][:50]
    assert big, "the sample has ids past CPython's small ints"
    assert all(one[i][j] is again[i][j] is rows[i][j] for i, j in big)
    expected = [list(map(int, row)) for row in one]  # new ints, independent of the tokenizer's
    del tok, again, rows
    gc.collect()
    assert [[v + 0 for v in row] for row in one] == expected


def test_ids_past_the_vocabulary_size_are_exact() -> None:
    # A vocabulary with a gap in its ids: the largest id is past the count
    # of tokens, where the tokenizer keeps no shared int.
    oracle = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "hello": 1, "world": 70000},
                                                              unk_token="[UNK]"))
    oracle.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok = gpu_tok.Tokenizer.from_str(oracle.to_str())
    text = "hello world hello zzz world"
    expected = oracle.encode(text).ids
    assert 70000 in expected
    assert tok.encode(text) == expected == tok([text])["input_ids"][0]
