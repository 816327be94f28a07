"""The inputs people really send, gpu_tok beside `tokenizers` in one run:
plain documents (ragged ids), the same documents in a chat template (added
tokens in the text), offsets requested, and padded + truncated numpy output.

    python benches/real_inputs.py [--tokenizers qwen3,gpt-oss] [--every 8] [--repeats 3] [--json out.json]

Uses every N-th document of ../shared/corpus/mixed.jsonl and the tokenizers in
../shared/tokenizers (and the committed Unigram fixture, tests/fixtures/unigram-xlmr).
Reports median MB/s of UTF-8 input per case, the ratio to `tokenizers` and
whether the ids (and offsets) were identical.
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import gpu_tok
import tokenizers

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CHAT = {  # each tokenizer's own chat markers
    "qwen3": ("<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{a}<|im_end|>\n"),
    "gpt-oss": "<|start|>user<|message|>{q}<|end|><|start|>assistant<|channel|>final<|message|>{a}<|end|>",
    "deepseek_v3": "<｜begin▁of▁sentence｜><｜User｜>{q}<｜Assistant｜>{a}<｜end▁of▁sentence｜>",
    "llama2": "<s>[INST] {q} [/INST] {a}</s>",
    "bert-minilm": "[CLS] {q} [SEP] {a} [SEP]",
    "unigram-xlmr": "<s> {q}</s></s> {a}</s>",
}


def tokenizer_path(name: str) -> Path:
    """tokenizer.json of `name`: in ../shared, else the committed fixture (unpacked)."""
    shared = SHARED / "tokenizers" / name / "tokenizer.json"
    if shared.is_file():
        return shared
    packed = ROOT / "tests" / "fixtures" / name / "tokenizer.json.xz"
    unpacked = Path(tempfile.mkdtemp(prefix="gpu_tok_real_inputs_")) / "tokenizer.json"
    unpacked.write_bytes(lzma.decompress(packed.read_bytes()))
    return unpacked


def median_seconds(call: Any, texts: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call(texts)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(name: str, docs: list[str], repeats: int) -> dict[str, Any]:
    path = tokenizer_path(name)
    tok, hf = gpu_tok.Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    template = CHAT[name]
    chat = [template.format(q=d[: len(d) // 2], a=d[len(d) // 2:]) for d in docs]
    pad = hf.token_to_id("<|endoftext|>") or 0
    padded_hf = tokenizers.Tokenizer.from_file(str(path))
    padded_hf.enable_truncation(max_length=2048)
    padded_hf.enable_padding(pad_id=pad, pad_token=hf.id_to_token(pad) or "")
    cases = {
        "plain": (docs, lambda t: tok.encode_batch(t, add_special_tokens=False, device="cpu"),
                  lambda t: hf.encode_batch_fast(t, add_special_tokens=False), "ids"),
        "chat": (chat, lambda t: tok.encode_batch(t, add_special_tokens=False, device="cpu"),
                 lambda t: hf.encode_batch_fast(t, add_special_tokens=False), "ids"),
        "offsets": (docs, lambda t: tok.encode_batch(t, add_special_tokens=False, return_offsets=True, device="cpu"),
                    lambda t: hf.encode_batch(t, add_special_tokens=False), "offsets"),
        "padded-numpy": (docs, lambda t: tok(t, padding=True, truncation=True, max_length=2048, pad_token_id=pad,
                                             add_special_tokens=False, return_tensors="np", device="cpu"),
                         lambda t: padded_hf.encode_batch_fast(t, add_special_tokens=False), "padded"),
    }
    out: dict[str, Any] = {}
    for case, (texts, ours, theirs, check) in cases.items():
        mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        got, expected = ours(texts), theirs(texts)
        if check == "ids":
            same = got.to_lists()["input_ids"] == [e.ids for e in expected]
        elif check == "offsets":
            lists = got.to_lists()
            same = lists["input_ids"] == [e.ids for e in expected] and lists["offset_mapping"] == [
                [tuple(o) for o in e.offsets] for e in expected]
        else:
            same = got["input_ids"].tolist() == [e.ids for e in expected]
        ours_s, theirs_s = median_seconds(ours, texts, repeats), median_seconds(theirs, texts, repeats)
        out[case] = {"mb": round(mb, 2), "gpu_tok_mb_s": round(mb / ours_s, 1),
                     "tokenizers_mb_s": round(mb / theirs_s, 1), "ratio": round(theirs_s / ours_s, 1),
                     "identical": same}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default="qwen3,gpt-oss,deepseek_v3,llama2,bert-minilm,unigram-xlmr")
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    with (SHARED / "corpus" / "mixed.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for i, line in enumerate(f) if i % args.every == 0]
    report = {"documents": len(docs), "threads": gpu_tok.info(probe_cuda=False)["threads"],
              "tokenizers": {name: measure(name, docs, args.repeats) for name in args.tokenizers.split(",")}}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text + "\n", encoding="utf-8")
    return 0 if all(c["identical"] for t in report["tokenizers"].values() for c in t.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
