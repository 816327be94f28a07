"""Gemma-form and CLIP-form tokenizers (issue #33) where ../shared has none:
vocabularies trained on the corpus with the `tokenizers` trainers, then
written in exactly the forms those models' tokenizer.json files take.

- gemma: normalizer `Replace(" " -> "▁")` alone; pre-tokenizer
  `Split(" ", MergedWithPrevious)` (a no-op after the normalizer); BPE with
  byte_fallback (`<0x00>`..`<0xFF>` in the vocabulary), fuse_unk, `<unk>`;
  thousands of non-special added tokens that are not normalized, matched in
  the raw text (runs of newlines, tabs and "▁", HTML tags); `<bos>` template.
- clip: normalizer `Sequence[NFC, Replace(Regex "\\s+" -> " "), Lowercase]`;
  pre-tokenizer `Sequence[Split(CLIP's regex, Removed, invert),
  ByteLevel(use_regex=false)]`; BPE with `end_of_word_suffix "</w>"` and
  `<|endoftext|>` as its unknown token; `RobertaProcessing`.

    python benches/make_forms.py --form gemma --out benches/tokenizers/gemma-form [--corpus mixed.jsonl]

Without --corpus the trainers read the package's embedded sample. The test
suite builds the same forms smaller (`forms.build`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

CLIP_PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""

HTML_TAGS = (
    "a abbr address area article aside audio b base bdi bdo blockquote body br button canvas caption cite code col "
    "colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset figcaption figure footer form h1 h2 "
    "h3 h4 h5 h6 head header hr html i iframe img input ins kbd label legend li link main map mark meta meter nav "
    "noscript object ol optgroup option output p param picture pre progress q rp rt ruby s samp script section select "
    "small source span strong style sub summary sup table tbody td template textarea tfoot th thead time title tr "
    "track u ul var video wbr").split()


def gemma_added_tokens() -> list[str]:
    """About 6,400 texts in the manner of Gemma's non-special added tokens:
    runs of newlines, tabs and "▁" (and their mixes), and HTML tags with and
    without common attributes."""
    runs = ["\n" * n for n in range(1, 32)] + ["\t" * n for n in range(1, 32)] + ["▁" * n for n in range(2, 32)]
    runs += ["\n" + "▁" * n for n in range(1, 32)] + ["\n" + "\t" * n for n in range(1, 32)]
    tags = []
    attributes = ["", ' class="', ' id="', ' style="', ' href="', ' src="', ' alt="', ' title="', ' name="',
                  ' type="', ' value="', ' width="', ' height="', ' rel="', ' lang="', ' role="', ' data-']
    for tag in HTML_TAGS:
        tags += [f"</{tag}>", f"<{tag}/>", f"<{tag} />"]
        tags += [f"<{tag}{attribute}" + (">" if not attribute else "") for attribute in attributes]
        tags += [f"<{tag}{a}{b}" for a in attributes[1:] for b in ('">', '" ')]
        tags += [f"<{tag.upper()}>", f"</{tag.upper()}>"]
    seen: dict[str, None] = dict.fromkeys(runs + tags)
    return list(seen)


def _train(hf: tokenizers.Tokenizer, texts: Iterable[str], trainer: trainers.Trainer) -> dict:
    hf.train_from_iterator(texts, trainer=trainer)
    return json.loads(hf.to_str())


def gemma(texts: list[str], vocab_size: int, added: int | None = None) -> str:
    """The Gemma form over a vocabulary trained on `texts` (SentencePiece-like
    words: the trainer splits before each "▁"); `added`: how many of
    `gemma_added_tokens` (all by default)."""
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    hf.normalizer = normalizers.Replace(" ", "▁")
    hf.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"],
                                  show_progress=False, limit_alphabet=1000)
    spec = _train(hf, texts, trainer)
    vocab = spec["model"]["vocab"]
    for b in range(256):
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                             "invert": False}
    spec["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    contents = gemma_added_tokens()[:added]
    hf.add_tokens([tokenizers.AddedToken(c, normalized=False, special=False) for c in contents])
    bos = hf.token_to_id("<bos>")
    hf.post_processor = processors.TemplateProcessing(single="<bos> $A", pair="<bos> $A <bos> $B",
                                                      special_tokens=[("<bos>", bos)])
    return hf.to_str()


def clip(texts: list[str], vocab_size: int) -> str:
    """The CLIP form over a byte-level vocabulary with "</w>" word ends trained on `texts`."""
    hf = tokenizers.Tokenizer(models.BPE(unk_token="<|endoftext|>", end_of_word_suffix="</w>",
                                         continuing_subword_prefix="", fuse_unk=False))
    hf.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace(tokenizers.Regex(r"\s+"), " "),
                                          normalizers.Lowercase()])
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(CLIP_PATTERN), behavior="removed", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|startoftext|>", "<|endoftext|>"],
                                  initial_alphabet=alphabet, end_of_word_suffix="</w>", show_progress=False)
    spec = _train(hf, texts, trainer)
    vocab = spec["model"]["vocab"]
    for c in sorted(alphabet):  # every byte alone at a word's end too, as CLIP's vocabulary has
        vocab.setdefault(c + "</w>", len(vocab))
    hf = tokenizers.Tokenizer.from_str(json.dumps(spec))
    hf.decoder = decoders.ByteLevel()
    hf.post_processor = processors.RobertaProcessing(("<|endoftext|>", hf.token_to_id("<|endoftext|>")),
                                                     ("<|startoftext|>", hf.token_to_id("<|startoftext|>")),
                                                     trim_offsets=False, add_prefix_space=False)
    return hf.to_str()


FORMS = {"gemma": gemma, "clip": clip}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--form", choices=sorted(FORMS), required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--corpus", help="a .jsonl with a text field (default: the embedded sample)")
    parser.add_argument("--vocab-size", type=int, default=32000)
    args = parser.parse_args()
    if args.corpus:
        with open(args.corpus, encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f]
    else:
        from gpu_tok import _data

        texts = [doc["text"] for doc in _data.sample_corpus()]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tokenizer.json").write_text(FORMS[args.form](texts, args.vocab_size), encoding="utf-8")
    print(f"wrote {args.out}/tokenizer.json")


if __name__ == "__main__":
    main()
