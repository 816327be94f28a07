"""Characters that start a word's merges as one token (their "atom",
rust/plan/char_atoms.rs and `gt_bpe_symbols` in cuda/gt_bpe.cuh) against
`tokenizers`, which always starts from bytes.

An atom is exact only under the conditions written in gt_bpe.cuh; dropping
them gave thousands of wrong documents on the real tokenizers. So: every
character of two and three bytes, next to every kind of neighbour, on the real
byte-level models; and random merge lists over a few characters' bytes, where
merges that join one character's partial bytes with a neighbour's are common,
on the CPU backend and on the emulator (the device's code)."""

from __future__ import annotations

import random
import re

import gpu_tok
import pytest
import tokenizers
from conftest import TOKENIZER_NAMES, tokenizer_json
from test_long_words import byte_level_bpe

BYTE_LEVEL = [name for name in TOKENIZER_NAMES if name in {"qwen3", "deepseek_v3", "gpt-oss", "claude"}]
# The byte-level alphabet: the character standing for each byte.
_PRINTABLE = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
_OTHERS = [b for b in range(256) if b not in _PRINTABLE]
BYTE_CHAR = {b: chr(b) for b in _PRINTABLE} | {b: chr(256 + n) for n, b in enumerate(_OTHERS)}


def atoms_in_plan(tok: gpu_tok.Tokenizer) -> int:
    """How many characters the plan starts as one token (its model line says)."""
    reason = next(step["reason"] for step in tok.plan if step["stage"] == "model")
    found = re.search(r"(\d+) characters start their merges as one token", reason)
    assert found, reason
    return int(found.group(1))


def in_contexts(chars: list[str]) -> list[str]:
    """Documents holding each character alone, after a space and a letter,
    before a letter and a digit, and between characters of two and three bytes
    (the neighbours an atom's flags tell apart)."""
    pieces = []
    for c in chars:
        pieces += [c, f" {c}", f"a{c}b", f"{c}7", f"中{c}中", f"ж{c}{c}é", f"、{c}。"]
    return ["\n".join(pieces[i:i + 512]) for i in range(0, len(pieces), 512)]


@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_every_character_in_every_context_equals_tokenizers(name: str) -> None:
    json_text = tokenizer_json(name)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    assert atoms_in_plan(tok) > 1000
    chars = [chr(cp) for cp in range(0x80, 0x10000) if not 0xD800 <= cp < 0xE000]
    docs = in_contexts(chars)
    want = [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(docs, add_special_tokens=False)]
    got = tok.encode_batch(docs, add_special_tokens=False).to_lists()["input_ids"]
    assert len(got) == len(want)
    for doc, ids, expected in zip(docs, got, want, strict=True):
        assert ids == expected, doc[:80]


# Characters of two and three bytes, and ASCII neighbours.
CHARS = ["é", "ü", "ж", "中", "国", "한", " ", "a"]


def random_case(rng: random.Random) -> tuple[list[tuple[str, str]], list[str]]:
    """Merges that join each character's bytes (at random ranks), mixed with
    random merges of the tokens they make, partial ones included (a
    character's last byte with the next one's first, a space with a lead
    byte...), and words of those characters."""
    as_text = {c: [BYTE_CHAR[b] for b in c.encode()] for c in CHARS}
    tokens = sorted({t for parts in as_text.values() for t in parts})
    merges: list[tuple[str, str]] = []
    for parts in as_text.values():
        while len(parts) > 1:  # this character's own merges, left to right or right to left
            at = rng.randrange(len(parts) - 1)
            merges.append((parts[at], parts[at + 1]))
            parts = [*parts[:at], parts[at] + parts[at + 1], *parts[at + 2:]]
            tokens.append(parts[at])
    for _ in range(rng.randrange(2, 10)):
        pair = (rng.choice(tokens), rng.choice(tokens))
        if pair not in merges and len(pair[0] + pair[1]) <= 12:
            merges.append(pair)
            tokens.append(pair[0] + pair[1])
    rng.shuffle(merges)
    words = ["".join(rng.choice(CHARS) for _ in range(rng.randrange(1, 9))) for _ in range(60)]
    return merges, words


@pytest.mark.parametrize("device", ["cpu", "emulator"])
def test_random_merges_over_characters_equal_tokenizers(device: str) -> None:
    rng = random.Random(31)
    with_atoms = 0
    for _ in range(120 if device == "cpu" else 30):
        merges, words = random_case(rng)
        json_text = byte_level_bpe(merges)
        tok = gpu_tok.Tokenizer.from_str(json_text)
        with_atoms += atoms_in_plan(tok) > 0
        want = [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(words)]
        got = tok._core.encode_batch(words, device=device).to_lists()["input_ids"]
        for word, ids, expected in zip(words, got, want, strict=True):
            assert ids == expected, f"{merges}: {word!r}"
        assert [tok.encode(word) for word in words] == want
    assert with_atoms >= 10, "too few cases have atoms to test them"


@pytest.mark.parametrize("name", BYTE_LEVEL)
def test_runs_of_cjk_characters_cut_into_pieces_equal_tokenizers(name: str) -> None:
    """A run of CJK characters is cut where no token holds two neighbouring
    atoms side by side (`gt_bpe_cut`), and each piece merged alone: random runs
    of common and rare characters, kana and punctuation, after a space or a
    mark, equal `tokenizers`; the plan says where it cuts (not under
    ignore_merges, where a piece found whole would be one token)."""
    json_text = tokenizer_json(name)
    tok = gpu_tok.Tokenizer.from_str(json_text)
    reason = next(step["reason"] for step in tok.plan if step["stage"] == "model")
    ignore_merges = bool(tokenizers.Tokenizer.from_str(json_text).model.ignore_merges)
    assert ("gt_bpe_cut" in reason) == (not ignore_merges), reason
    rng = random.Random(11)
    common = "的一是不了人我在有他这中大来上国个到说们为子你地出道也时年日本語学生"
    kana = "のにはをたがでてとしれさあいうえおかきくけこアイウエオカキクケコンー"
    rare = "".join(chr(rng.randrange(0x4E00, 0x9FA6)) for _ in range(200))
    marks = ["", " ", "、", "「", "(", "\n"]
    docs = []
    for _ in range(300):
        words = []
        for _ in range(rng.randrange(1, 12)):
            pool = rng.choice([common, kana, rare, common + kana])
            run = "".join(rng.choice(pool) for _ in range(rng.randrange(1, 40)))
            words.append(rng.choice(marks) + run)
        docs.append("".join(words))
    want = [e.ids for e in tokenizers.Tokenizer.from_str(json_text).encode_batch(docs, add_special_tokens=False)]
    for ids, expected, doc in zip(tok.encode_batch(docs, add_special_tokens=False).to_lists()["input_ids"], want, docs,
                                  strict=True):
        assert ids == expected, doc[:60]
    assert [tok.encode(doc, add_special_tokens=False) for doc in docs[:50]] == want[:50]
