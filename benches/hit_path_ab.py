"""A/B of gpu_tok builds on one thread, a document per call, fresh and repeated text.

Each (build, tokenizer, round) runs in its own process: the first 4 MB of the
corpus encoded untimed (tables loaded, the word cache and allocator warm, as in
a long job), then the next 12 MB timed once as new `str` objects (fresh: each
document once), then the same 12 MB again (repeated: the word cache holds every
word). Reported: MB per CPU-second of the process (`process_time`; steadier than
wall time on shared cores), the median over the rounds per build, and each
build's ratio to the first. Builds alternate in order, reversed every other round.

    python benches/hit_path_ab.py --tok qwen3,gpt-oss --rounds 5 \\
        base=/tmp/x-base cand=/tmp/x-cand cand14=/tmp/x-cand@GT_SOME_SETTING:14

A build is NAME=DIR: DIR holds the package `gpu_tok_base` when NAME is `base`,
else `gpu_tok_new` (a copy of python/gpu_tok with that build's `_core`);
`@VAR:VALUE` sets an environment variable for that build's processes only.
Results go to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(os.environ.get("GPU_TOK_SHARED", "/work/shared"))


def child(folder: str, package: str, tok: str, warm_mb: float, timed_mb: float) -> None:
    os.environ["GPU_TOK_NUM_THREADS"] = "1"
    os.environ["RAYON_NUM_THREADS"] = "1"
    sys.path.insert(0, folder)
    gpu_tok = __import__(package)
    if tok == "default":
        t = gpu_tok.Tokenizer.default()
    else:
        t = gpu_tok.Tokenizer.from_pretrained(str(SHARED / "tokenizers" / tok))
    warm: list[bytes] = []
    timed: list[bytes] = []
    total = 0
    with open(SHARED / "corpus" / "mixed.jsonl", encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)["text"].encode()
            (warm if total < warm_mb * 1e6 else timed).append(doc)
            total += len(doc)
            if total > (warm_mb + timed_mb) * 1e6:
                break
    mb = sum(map(len, timed)) / 1e6
    for doc in warm:
        t.encode(doc.decode(), add_special_tokens=False)
    out = {}
    for mode in ("fresh", "repeat"):
        texts = [doc.decode() for doc in timed]
        start = time.process_time()
        for text in texts:
            t.encode(text, add_special_tokens=False)
        out[mode] = mb / (time.process_time() - start)
    print(json.dumps(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="NAME=DIR[@VAR:VALUE]")
    parser.add_argument("--tok", default="qwen3,gpt-oss")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-mb", type=float, default=4.0)
    parser.add_argument("--mb", type=float, default=12.0)
    parser.add_argument("--out", default="hit_path_ab.json")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.warm_mb, args.mb)
        return 0
    builds = []
    for spec in args.builds:
        name, folder = spec.split("=", 1)
        folder, _, env = folder.partition("@")
        builds.append((name, folder, "gpu_tok_base" if name == "base" else "gpu_tok_new", env))
    toks = args.tok.split(",")
    runs = []
    for r in range(args.rounds):
        for tok in toks:
            for name, folder, package, env in builds if r % 2 == 0 else builds[::-1]:
                environ = dict(os.environ)
                if env:
                    var, _, value = env.partition(":")
                    environ[var] = value
                command = [sys.executable, __file__, "--child", folder, package, tok,
                           "--warm-mb", str(args.warm_mb), "--mb", str(args.mb), "x"]
                done = subprocess.run(command, capture_output=True, text=True, env=environ)
                if done.returncode:
                    print(done.stderr, file=sys.stderr)
                    return 1
                result = json.loads(done.stdout.strip().splitlines()[-1])
                runs.append({"build": name, "tok": tok, "round": r, **result})
                print(name, tok, r, result, flush=True)
    medians = {}
    for tok in toks:
        for mode in ("fresh", "repeat"):
            by_build = {name: statistics.median(x[mode] for x in runs if x["build"] == name and x["tok"] == tok)
                        for name, *_ in builds}
            medians[f"{tok}/{mode}"] = by_build
            first = by_build[builds[0][0]]
            print(f"{tok:10} {mode:6}", "  ".join(f"{n} {v:.1f} (x{v / first:.3f})" for n, v in by_build.items()))
    Path(args.out).write_text(json.dumps({"runs": runs, "medians": medians, "load": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
