"""A driver to profile gpu_tok on fresh text: the first MB of the corpus, each
document encoded once as a new str, on GPU_TOK_NUM_THREADS threads (default 1).
With PERF_CTL (and PERF_ACK) naming perf's control fifos, only the timed loop
is sampled (loading the tokenizer and reading the corpus are not):

    mkfifo ctl ack
    PERF_CTL=ctl PERF_ACK=ack perf record -D -1 --control fifo:ctl,ack -e cpu-clock -F 1999 \\
        -o fresh.data -- python benches/profile_fresh.py --mode batch --mb 16
    perf report -i fresh.data --no-children --sort dso,symbol
    perf annotate -i fresh.data -s gt_bpe_merge_queued

Modes: batch (1024 documents per call), one (`tok.encode`, a document per
call), and repeat-batch / repeat-one (the same objects twice, the second
time timed: warm caches).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))


def perf(command: str) -> None:
    """Tells perf (through its control fifo, when there is one) to start or stop sampling."""
    fifo = os.environ.get("PERF_CTL")
    if not fifo:
        return
    with open(fifo, "w") as f:
        f.write(command + "\n")
    if os.environ.get("PERF_ACK"):
        with open(os.environ["PERF_ACK"]) as f:
            f.readline()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["batch", "one", "repeat-batch", "repeat-one"], default="batch")
    parser.add_argument("--mb", type=float, default=16.0)
    parser.add_argument("--tokenizer", default=str(SHARED / "tokenizers" / "qwen3"))
    parser.add_argument("--corpus", default=str(SHARED / "corpus" / "mixed.jsonl"))
    args = parser.parse_args()
    os.environ.setdefault("GPU_TOK_NUM_THREADS", "1")  # before the pool exists
    import gpu_tok

    tok = gpu_tok.Tokenizer.from_pretrained(args.tokenizer)
    docs: list[bytes] = []
    total = 0
    with open(args.corpus, encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)["text"].encode()
            if total + len(doc) > args.mb * 1e6:
                break
            docs.append(doc)
            total += len(doc)
    options = dict(add_special_tokens=False, padding=False, truncation=False, return_attention_mask=False,
                   return_token_type_ids=False, device="cpu")

    def run(texts: list[str]) -> None:
        if args.mode.endswith("one"):
            for text in texts:
                tok.encode(text, add_special_tokens=False)
        else:
            for i in range(0, len(texts), 1024):
                tok.encode_batch(texts[i:i + 1024], **options)

    texts = [doc.decode() for doc in docs]
    if args.mode.startswith("repeat"):
        run(texts)
    perf("enable")
    start = time.perf_counter()
    run(texts)
    elapsed = time.perf_counter() - start
    perf("disable")
    print(f"{args.mode}: {len(docs)} documents, {total / 1e6:.1f} MB, {elapsed:.2f} s, "
          f"{total / elapsed / 1e6:.1f} MB/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
