"""Random tokenizer.json pipelines for the form fuzzer (test_form_fuzzer.py)
and its fast-path census (benches/form_census.py): every component the
`tokenizers` crate has (normalizers, pre-tokenizers, BPE / WordPiece /
Unigram / WordLevel with their options, post-processors, added tokens with
every flag), assembled at random from a seed, the vocabulary trained small
with the matching `tokenizers` trainer on the corpus sample."""

from __future__ import annotations

import base64
import json
import lzma
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import tokenizers
from tokenizers import models, normalizers, pre_tokenizers, processors, trainers

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]
CL100K = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
ADDED = ["<tok>", "[X]", "hello", "ing", " the", "▁", "<|im_start|>", "ÉtÉ", "\n\n", "a b"]


@cache
def charsmap() -> bytes:
    """The SentencePiece charsmap of the committed Unigram fixture (nmt_nfkc)."""
    spec = json.loads(lzma.decompress((FIXTURES / "unigram-xlmr" / "tokenizer.json.xz").read_bytes()))
    steps = spec["normalizer"].get("normalizers", [spec["normalizer"]])
    found = next(s for s in steps if s["type"] == "Precompiled")
    return base64.b64decode(found["precompiled_charsmap"])


def _normalizer(rng: random.Random) -> normalizers.Normalizer:
    b = lambda: rng.random() < 0.5  # noqa: E731
    pool: list[Callable[[], normalizers.Normalizer]] = [
        normalizers.NFC, normalizers.NFD, normalizers.NFKC, normalizers.NFKD, normalizers.Lowercase,
        normalizers.StripAccents, normalizers.Nmt, normalizers.ByteLevel,
        lambda: normalizers.BertNormalizer(clean_text=b(), handle_chinese_chars=b(),
                                           strip_accents=rng.choice([None, True, False]), lowercase=b()),
        lambda: normalizers.Strip(left=b(), right=b()),
        lambda: normalizers.Replace(rng.choice([" ", " ", "  ", "e", "th", "\n", "é"]),
                                    rng.choice(["▁", "▁", " ", "", "_", "EE"])),
        lambda: normalizers.Replace(tokenizers.Regex(rng.choice([r"\s+", r" {2,}", r"[0-9]+", r"\p{P}", r"x*"])),
                                    rng.choice([" ", "", "#"])),
        lambda: normalizers.Prepend(rng.choice(["▁", " ", ">>"])),
        lambda: normalizers.Precompiled(charsmap()),
    ]
    steps = [rng.choice(pool)() for _ in range(rng.randint(1, 3))]
    return steps[0] if len(steps) == 1 and b() else normalizers.Sequence(steps)


def _pre_tokenizer(rng: random.Random, family: str, byte_level: bool) -> pre_tokenizers.PreTokenizer | None:
    b = lambda: rng.random() < 0.5  # noqa: E731
    metaspace = lambda: pre_tokenizers.Metaspace(  # noqa: E731
        replacement="▁", prepend_scheme=rng.choice(["always", "first", "never"]), split=b())
    # Half the time, a form real tokenizers of the family have (what the fast plans take).
    if family in ("BPE", "Unigram") and not byte_level and b():
        return rng.choice([lambda: None, metaspace,
                           lambda: pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), metaspace()]),
                           lambda: pre_tokenizers.Split(" ", behavior="merged_with_previous")])()
    if family == "WordPiece" and b():
        return rng.choice([pre_tokenizers.BertPreTokenizer, pre_tokenizers.WhitespaceSplit])()
    if byte_level:  # the byte-level forms: ByteLevel alone, or Splits then ByteLevel without its regex
        if b():
            return pre_tokenizers.ByteLevel(add_prefix_space=b(), use_regex=True)
        pattern = rng.choice([CL100K, GPT2, r"\p{L}+|\p{N}+|[^\p{L}\p{N}]+", r"\s+"])
        split = pre_tokenizers.Split(tokenizers.Regex(pattern), behavior=rng.choice(BEHAVIORS), invert=b())
        return pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=b(), use_regex=False)])
    pool: list[Callable[[], pre_tokenizers.PreTokenizer]] = [
        pre_tokenizers.Whitespace, pre_tokenizers.WhitespaceSplit, pre_tokenizers.BertPreTokenizer,
        pre_tokenizers.UnicodeScripts,
        metaspace,
        lambda: pre_tokenizers.Punctuation(behavior=rng.choice(BEHAVIORS)),
        lambda: pre_tokenizers.Digits(individual_digits=b()),
        lambda: pre_tokenizers.CharDelimiterSplit(rng.choice([" ", "-", "e"])),
        lambda: pre_tokenizers.FixedLength(length=rng.choice([3, 5])),
        lambda: pre_tokenizers.Split(rng.choice([" ", tokenizers.Regex(GPT2), tokenizers.Regex(r"\d+")]),
                                     behavior=rng.choice(BEHAVIORS), invert=b()),
    ]
    if rng.random() < 0.2:
        return None
    steps = [rng.choice(pool)() for _ in range(rng.randint(1, 2))]
    return steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)


def _post_processor(rng: random.Random, hf: tokenizers.Tokenizer) -> processors.PostProcessor | None:
    b = lambda: rng.random() < 0.5  # noqa: E731
    bos, eos = ("<s>", hf.token_to_id("<s>")), ("</s>", hf.token_to_id("</s>"))
    choices: list[Callable[[], processors.PostProcessor | None]] = [
        lambda: None,
        lambda: processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                              special_tokens=[bos, eos]),
        lambda: processors.BertProcessing(eos, bos),
        lambda: processors.RobertaProcessing(eos, bos, trim_offsets=b(), add_prefix_space=b()),
        lambda: processors.ByteLevel(trim_offsets=b()),
    ]
    return rng.choice(choices)()


def random_tokenizer(seed: int, texts: list[str]) -> str | None:
    """The tokenizer.json of pipeline `seed`, trained on `texts`; None when
    the `tokenizers` trainer or loader refuses the combination drawn."""
    rng = random.Random(seed)
    b = lambda: rng.random() < 0.5  # noqa: E731
    family = rng.choices(["BPE", "WordPiece", "Unigram", "WordLevel"], weights=[5, 2, 2, 1])[0]
    byte_level = family == "BPE" and b()
    unk = "[UNK]" if family in ("WordPiece", "WordLevel") else "<unk>"
    specials = [unk, "<s>", "</s>"]
    vocab_size = rng.choice([300, 500, 900])
    trainer: Any
    if family == "BPE":
        affixes = {}
        if rng.random() < 0.3:
            affixes["continuing_subword_prefix"] = rng.choice(["##", "@@"])
        if rng.random() < 0.3:
            affixes["end_of_word_suffix"] = "</w>"
        model: Any = models.BPE(unk_token=unk if rng.random() < 0.8 else None, byte_fallback=b(),
                                fuse_unk=b(), ignore_merges=rng.random() < 0.3, **affixes)
        alphabet = pre_tokenizers.ByteLevel.alphabet() if byte_level else []
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                      initial_alphabet=alphabet, limit_alphabet=rng.choice([60, 200, 1000]),
                                      **affixes)
    elif family == "WordPiece":
        prefix = rng.choice(["##", "@@"])
        model = models.WordPiece(unk_token=unk, continuing_subword_prefix=prefix,
                                 max_input_chars_per_word=rng.choice([100, 8]))
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                            continuing_subword_prefix=prefix)
    elif family == "Unigram":
        model = models.Unigram()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                          unk_token=unk if rng.random() < 0.8 else None)
    else:
        model = models.WordLevel(unk_token=unk)
        trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    hf = tokenizers.Tokenizer(model)
    if rng.random() < 0.75:
        hf.normalizer = _normalizer(rng)
    pre = _pre_tokenizer(rng, family, byte_level)
    if pre is not None:
        hf.pre_tokenizer = pre
    try:
        hf.train_from_iterator(texts, trainer=trainer)
    # The trainer refuses this combination (too small a vocabulary for the
    # alphabet...), or panics on it (pyo3 raises a panic as a BaseException).
    except BaseException as err:
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        return None
    spec = json.loads(hf.to_str())
    if family == "BPE" and spec["model"].get("byte_fallback") and b():
        for byte in range(256):  # as SentencePiece converters add them: vocabulary entries
            spec["model"]["vocab"].setdefault(f"<0x{byte:02X}>", len(spec["model"]["vocab"]))
    if family == "Unigram" and rng.random() < 0.3:
        spec["model"]["byte_fallback"] = True
    try:
        hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    except Exception:
        return None
    post = _post_processor(rng, hf)
    if post is not None:
        hf.post_processor = post
    added = rng.sample(ADDED, rng.randint(0, 4))
    for content in added:
        token = tokenizers.AddedToken(content, single_word=rng.random() < 0.2, lstrip=rng.random() < 0.2,
                                      rstrip=rng.random() < 0.2, normalized=b(), special=b())
        (hf.add_special_tokens if token.special else hf.add_tokens)([token])
    return hf.to_str()


def describe(json_text: str) -> str:
    """The pipeline without its vocabulary: what a failure report shows."""
    spec = json.loads(json_text)
    model = {k: v for k, v in spec["model"].items() if k not in ("vocab", "merges")}
    parts = {"normalizer": spec["normalizer"], "pre_tokenizer": spec["pre_tokenizer"], "model": model,
             "post_processor": spec["post_processor"],
             "added_tokens": [{k: v for k, v in t.items() if k != "id"} for t in spec["added_tokens"][3:]]}
    return json.dumps(parts, ensure_ascii=False)


def texts_for(json_text: str, edge: list[str], corpus: list[str]) -> list[str]:
    """What a pipeline is checked on: edge cases, corpus documents (cut to
    800 characters), and rows holding its added tokens."""
    added = [t["content"] for t in json.loads(json_text)["added_tokens"]]
    rows = [f"x{a} y {a}{a}z {a}" for a in added] + [" ".join(added), "".join(added) + " tail"]
    return edge + [text[:800] for text in corpus] + rows
