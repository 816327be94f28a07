"""A real-form Unigram tokenizer where ../shared has none: a SentencePiece
Unigram model (the `nmt_nfkc` charsmap, as T5 / XLM-R / ALBERT were trained)
trained on the corpus, converted to tokenizer.json by transformers exactly as
a user's `XLMRobertaTokenizer.from_pretrained` / `T5Tokenizer.from_pretrained`
converts it. The folder keeps the .model file, so the sentencepiece peer of
`gpu-tok bench` encodes with the same model.

    python benches/make_unigram.py --corpus ../shared/corpus/mixed.jsonl --out benches/tokenizers/unigram-xlmr

Needs `sentencepiece` (the bench extra) and `transformers` (the test extra).
tests/fixtures/unigram-xlmr was made this way from the test corpus sample
(4,000 pieces)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

MODEL_FILES = {"xlmr": "sentencepiece.bpe.model", "t5": "spiece.model"}


def train_sentencepiece(texts: list[str], folder: Path, vocab_size: int) -> Path:
    """Trains a Unigram model on the lines of `texts`; returns the .model path."""
    import sentencepiece

    folder.mkdir(parents=True, exist_ok=True)
    lines = folder / "train.txt"
    with lines.open("w", encoding="utf-8") as f:
        for text in texts:
            f.writelines(line[:4000] + "\n" for line in text.splitlines() if line.strip())
    prefix = folder / "unigram"
    sentencepiece.SentencePieceTrainer.train(
        input=str(lines), model_prefix=str(prefix), vocab_size=vocab_size, model_type="unigram",
        normalization_rule_name="nmt_nfkc", character_coverage=0.9995, input_sentence_size=300_000,
        shuffle_input_sentence=True, num_threads=2, minloglevel=2)
    lines.unlink()
    return prefix.with_suffix(".model")


def convert(model: Path, kind: str, out: Path) -> str:
    """`model` converted by transformers as a `kind` ("xlmr" or "t5") tokenizer
    into `out` (tokenizer.json, its config and the .model); returns the JSON text."""
    from transformers import T5Tokenizer, XLMRobertaTokenizer

    source = out / "source"
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy(model, source / MODEL_FILES[kind])
    cls = XLMRobertaTokenizer if kind == "xlmr" else T5Tokenizer
    options = {"extra_ids": 4} if kind == "t5" else {}
    cls.from_pretrained(str(source), **options).save_pretrained(str(out))
    shutil.move(str(source / MODEL_FILES[kind]), out / MODEL_FILES[kind])
    source.rmdir()
    return (out / "tokenizer.json").read_text(encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="a .jsonl with a text field")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--kind", choices=sorted(MODEL_FILES), default="xlmr")
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--every", type=int, default=3, help="train on every n-th document")
    args = parser.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for i, line in enumerate(f) if i % args.every == 0]
    model = train_sentencepiece(texts, args.out / "training", args.vocab_size)
    convert(model, args.kind, args.out)
    shutil.rmtree(args.out / "training")
    print(f"wrote {args.out}/tokenizer.json and {args.out}/{MODEL_FILES[args.kind]}")


if __name__ == "__main__":
    main()
