"""Long words (2^14 bytes and more), which a block merges in rounds
(`gt_bpe_rounds`, cuda/gt_bpe.cuh) on the device and which the CPU backend
merges the same way, against `tokenizers` on merge lists whose ranks are not
in training order: a merge can make a token that a lower-ranked merge takes
(a rank inversion, as in lists rebuilt from ranks: gpt-oss's, Mistral's). The
oracle's queue takes such a pair the moment it appears, possibly eating a
symbol another merge of the same rank wanted; the rounds must do the same.

Both schedules run: the host's (a round is applied when it merges at least a
quarter of the symbols) and the GPU's (1/32), on the CPU backend and on the
emulator, so CI covers the schedule a GPU runs too."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from functools import cache

import gpu_tok
import pytest
import tokenizers
from gpu_tok import _core

LONG_WORD = 1 << 14
# (host, device): the shares each backend uses unless a test sets them.
DEFAULT_SHARES = (4, 32)


@pytest.fixture(params=DEFAULT_SHARES, ids=lambda share: f"share-{share}")
def share(request: pytest.FixtureRequest) -> Iterator[int]:
    """Both backends run the rounds with this share, then get their own back."""
    before = _core.long_word_round_shares_for_tests(request.param, request.param)
    try:
        yield request.param
    finally:
        assert _core.long_word_round_shares_for_tests(*before) == (request.param, request.param)


def test_the_default_shares_are_the_hosts_and_the_gpus() -> None:
    assert _core.long_word_round_shares_for_tests() == DEFAULT_SHARES
    for bad in (0, 1 << 20):
        with pytest.raises(ValueError, match="share"):
            _core.long_word_round_shares_for_tests(bad, None)


def byte_level_bpe(merges: list[tuple[str, str]]) -> str:
    """A GPT-2-style tokenizer.json: the 256 byte tokens, then each merge's token."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(256) if b not in printable]
    vocab = {chr(b): i for i, b in enumerate(printable)}
    vocab.update({chr(256 + n): len(printable) + n for n in range(len(others))})
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{left} {right}" for left, right in merges]}})


def sentencepiece_bpe(merges: list[tuple[str, str]], alphabet: str) -> str:
    """A Llama-2-style tokenizer.json (Prepend + Replace, byte fallback) with these merges."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
    for token in ["▁", *alphabet, *(left + right for left, right in merges)]:
        vocab.setdefault(token, len(vocab))
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[left, right] for left, right in merges]}})


def random_merges(rng: random.Random, alphabet: str, n: int) -> list[tuple[str, str]]:
    """About n merges of tokens built from `alphabet`, ranked in random order,
    then pairs of a merge's token with one of its sides (or itself) ranked
    before that merge: inversions. Some merges make a token another makes too."""
    tokens: list[str] = list(alphabet)
    merges: list[tuple[str, str]] = []

    def add(pair: tuple[str, str], at: int) -> None:
        if pair not in merges and len(pair[0] + pair[1]) <= 12:
            merges.insert(at, pair)
            if pair[0] + pair[1] not in tokens:
                tokens.append(pair[0] + pair[1])

    while len(merges) < n:
        add((rng.choice(tokens), rng.choice(tokens)), len(merges))
    rng.shuffle(merges)
    for _ in range(n // 3):
        rank = rng.randrange(len(merges))
        left, right = merges[rank]
        made = left + right
        add(rng.choice([(made, left), (right, made), (made, made), (made, right), (left, made)]),
            rng.randrange(rank + 1))
    return merges


def inversions(merges: list[tuple[str, str]]) -> int:
    """Merges whose token a lower-ranked merge takes as its left or right part."""
    rank = {pair: r for r, pair in enumerate(merges)}
    made = [left + right for left, right in merges]
    return sum(any(rank[pair] < r for pair in rank if made[r] in pair) for r in range(len(merges)))


def random_words(rng: random.Random, merges: list[tuple[str, str]], alphabet: str) -> list[str]:
    """Words on both sides of 2^14 bytes: of tokens the merges make (so that
    rounds merge a lot), runs of one token, and repeats of a short string
    (where merges of one rank meet, which is where inversions bite)."""
    tokens = sorted({left + right for left, right in merges} | set(alphabet))

    def word(length: int, pool: list[str]) -> str:
        out = ""
        while len(out) < length:
            out += rng.choice(pool) * rng.choice([1, 1, 2, 7])
        return out[:length]

    def repeat(length: int) -> str:
        left, right = rng.choice(merges)
        unit = rng.choice([left + right, left + right + left, right + left + right,
                           "".join(rng.choice(alphabet) for _ in range(rng.randrange(2, 6)))])
        return (unit * (length // len(unit) + 1))[:length]

    return [word(LONG_WORD - 1, tokens), word(LONG_WORD + 1, tokens), word(3 * LONG_WORD, rng.sample(tokens, 3)),
            rng.choice(tokens) * (LONG_WORD + 5), repeat(LONG_WORD + rng.randrange(9)), repeat(LONG_WORD - 1),
            repeat(LONG_WORD), repeat(2 * LONG_WORD)]


# (alphabet, merges) of the random cases: few merges over few letters meet
# each other most (about one case in six makes the old rounds go wrong).
SHAPES = [("ab", 3), ("ab", 4), ("abc", 3), ("abc", 4), ("ab", 12), ("abc", 12)]


def byte_level_cases() -> list[tuple[list[tuple[str, str]], list[str]]]:
    rng = random.Random(31)
    cases = [([("ab", "a"), ("a", "b")], ["ab" * 8192, "ab" * 8191, "ab" * 9000 + "a"])]  # issue 31's
    for alphabet, n in SHAPES * 4:
        merges = random_merges(rng, alphabet, n)
        cases.append((merges, random_words(rng, merges, alphabet)))
    return cases


def sentencepiece_cases() -> list[tuple[list[tuple[str, str]], str, list[str]]]:
    rng = random.Random(32)
    cases = []
    for alphabet, n in SHAPES * 2:
        merges = random_merges(rng, "▁" + alphabet, n)
        cases.append((merges, alphabet, random_words(rng, merges, alphabet)))
    return cases


def test_the_random_merge_lists_have_inversions() -> None:
    counts = [inversions(merges) for merges, _ in byte_level_cases()]
    assert sum(count > 0 for count in counts) >= len(counts) // 2, counts


@cache
def oracle(json_text: str, words: tuple[str, ...]) -> list[list[int]]:
    """The oracle's ids (the same for every backend and share)."""
    return [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(list(words))]


def assert_oracles(json_text: str, words: list[str], device: str) -> None:
    want = oracle(json_text, tuple(words))
    got = gpu_tok.Tokenizer.from_str(json_text)._core.encode_batch(words, device=device).to_lists()["input_ids"]
    assert len(got) == len(want)
    for word, ids, expected in zip(words, got, want, strict=True):
        assert ids == expected, f"{json.loads(json_text)['model']['merges']}: {len(word)} bytes, {word[:40]!r}..."


@pytest.mark.parametrize("device", ["cpu", "emulator"])
def test_byte_level_long_words_equal_tokenizers(device: str, share: int) -> None:
    # The emulator runs every other case (issue 31's among them): its kernels
    # check each lane's accesses (several times slower), and the CPU backend
    # runs the same rounds (gt_bpe_rounds) on every case at both shares.
    cases = byte_level_cases()
    for merges, words in cases if device == "cpu" else cases[::2]:
        assert_oracles(byte_level_bpe(merges), words, device)


@pytest.mark.parametrize("device", ["cpu", "emulator"])
def test_sentencepiece_long_words_equal_tokenizers(device: str, share: int) -> None:
    for merges, alphabet, words in sentencepiece_cases():
        assert_oracles(sentencepiece_bpe(merges, alphabet), words, device)
