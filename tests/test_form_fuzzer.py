"""The form fuzzer (issue #33): random tokenizer.json pipelines assembled
from every component the `tokenizers` crate has (tests/form_fuzz.py), each
vocabulary trained small on the corpus sample with the `tokenizers`
trainers. For every pipeline gpu_tok's ids and offsets (with the
post-processor's special tokens, single texts and pairs) are the oracle's,
and where the oracle refuses a text gpu_tok raises.

CI runs 24 pipelines; `GPU_TOK_FORM_FUZZ=N` runs N from seed 0 (a long soak,
`GPU_TOK_FORM_FUZZ_FROM=S` to start elsewhere). benches/form_census.py
counts which stages of the generated pipelines run on the fast engine."""

from __future__ import annotations

import os

import gpu_tok
import pytest
from conftest import corpus_sample, edge_cases, unpadded_oracle
from form_fuzz import describe, random_tokenizer, texts_for

COUNT = int(os.environ.get("GPU_TOK_FORM_FUZZ", "24"))
FIRST = int(os.environ.get("GPU_TOK_FORM_FUZZ_FROM", "0"))


def pipeline(seed: int) -> str:
    """Pipeline `seed`: the first draw from it the trainers accept."""
    training = [text[:2000] for text in corpus_sample()[:40]]
    for attempt in range(50):
        json_text = random_tokenizer(seed * 1000 + attempt, training)
        if json_text is not None:
            return json_text
    raise AssertionError(f"no pipeline the trainers accept from seed {seed}")


def assert_like_the_oracle(json_text: str, texts: list[str]) -> None:
    hf = unpadded_oracle(json_text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    label = describe(json_text)

    def ours(firsts: list[str], seconds: list[str] | None, offsets: bool) -> dict:
        batch = tok.encode_batch(firsts, seconds, padding=False, truncation=False, return_offsets=offsets)
        return batch.to_lists()

    def compare(firsts: list[str], seconds: list[str] | None) -> None:
        rows: list = firsts if seconds is None else list(zip(firsts, seconds, strict=True))
        try:
            expected = hf.encode_batch(rows)
        # Some row fails in the oracle (an error, or a panic of the crate,
        # which pyo3 raises as a BaseException): row by row, it fails here too.
        except (Exception, BaseException) as err:
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            for i in range(len(firsts)):
                if len(firsts) > 1:
                    compare(firsts[i:i + 1], None if seconds is None else seconds[i:i + 1])
                    continue
                with pytest.raises(gpu_tok.GpuTokError):
                    ours(firsts, seconds, False)
            return
        got, ids = ours(firsts, seconds, True), ours(firsts, seconds, False)["input_ids"]
        for i, want in enumerate(expected):
            where = f"{label}\non {rows[i]!r:.300}"
            assert got["input_ids"][i] == want.ids, f"ids differ: {where}"
            assert ids[i] == want.ids, f"ids without offsets differ: {where}"
            assert got["offset_mapping"][i] == [tuple(o) for o in want.offsets], f"offsets differ: {where}"

    compare(texts, None)
    compare(texts[::7], texts[3::7][: len(texts[::7])] + texts[:1] * (len(texts[::7]) - len(texts[3::7])))


@pytest.mark.parametrize("seed", range(FIRST, FIRST + COUNT))
def test_random_pipeline_matches_the_oracle(seed: int) -> None:
    json_text = pipeline(seed)
    assert_like_the_oracle(json_text, texts_for(json_text, edge_cases()[:40], corpus_sample()[40:52]))


def test_the_census_counts_a_text_the_crate_panics_on_as_exact() -> None:
    # Pipeline 123 (Strip, Split + ByteLevel, BPE with affixes, a normalized
    # added token): the crate's added-token split panics on this text, so
    # the oracle does and the exact path raises; the census must count it
    # as not fast, not let the panic through.
    text = "<|endoftext|> <s> [CLS] <0x41> ▁ Ġ ##ing"
    json_text = pipeline(123)
    with pytest.raises(BaseException, match="AddedVocabulary bad split"):
        unpadded_oracle(json_text).encode(text)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    with pytest.raises(gpu_tok.GpuTokError):
        tok.encode_batch([text], padding=False, truncation=False)
    # Its normalized added token "\n\n" normalizes to nothing (Strip): the
    # crate then cuts every text at every character, so no text is fast (the
    # fast path gave "plain words" other ids before).
    assert tok._core.fast_path_share([text, "plain words"], False) == 0.0
    assert tok.encode("plain words") == unpadded_oracle(json_text).encode("plain words").ids
