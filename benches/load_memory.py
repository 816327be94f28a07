"""Memory and time of loading a tokenizer.json: gpu_tok beside `tokenizers`.

    python benches/load_memory.py [--shared ../shared] [--repeats 5] [--json OUT]

Each load runs in a fresh interpreter that imports both packages first (so
neither's import is counted), resets the peak resident set
(`/proc/self/clear_refs`), loads the file with `Tokenizer.from_file`, then
reads `/proc/self/status`: `added_mb` is VmRSS after the load minus before,
`peak_mb` VmHWM (the highest resident set during the load) minus before.
The two libraries alternate, `--repeats` times per tokenizer of
`<shared>/tokenizers/*`; medians. Linux only.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("gpu_tok", "tokenizers")


def status_mb() -> dict[str, float]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def child(library: str, path: str) -> None:
    """One load in this fresh process; prints its figures as JSON."""
    import gpu_tok
    import tokenizers

    load = gpu_tok.Tokenizer.from_file if library == "gpu_tok" else tokenizers.Tokenizer.from_file
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before = status_mb()["VmRSS"]
    start = time.perf_counter()
    tok = load(path)
    seconds = time.perf_counter() - start
    after = status_mb()
    assert tok.get_vocab_size() > 0
    print(json.dumps({"added_mb": after["VmRSS"] - before, "peak_mb": after["VmHWM"] - before, "load_s": seconds}))


def one_load(library: str, path: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", library, str(path)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def measure(path: Path, repeats: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {lib: [] for lib in LIBRARIES}
    for i in range(repeats):
        for lib in LIBRARIES if i % 2 == 0 else reversed(LIBRARIES):
            runs[lib].append(one_load(lib, path))
    medians = {lib: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for lib, rs in runs.items()}
    return {"tokenizer": path.parent.name, "file_mb": path.stat().st_size / 2**20, "median": medians, "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=str(ROOT.parent / "shared"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=2, metavar=("LIBRARY", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    paths = sorted(Path(args.shared, "tokenizers").glob("*/tokenizer.json"))
    if not paths:
        raise SystemExit(f"no tokenizer.json under {args.shared}/tokenizers")
    results = []
    print("| tokenizer | file MB | gpu_tok added / peak MB | tokenizers added / peak MB | peak ratio | load s |",
          file=sys.stderr)
    for path in paths:
        r = measure(path, args.repeats)
        results.append(r)
        g, t = r["median"]["gpu_tok"], r["median"]["tokenizers"]
        print(f"| {r['tokenizer']} | {r['file_mb']:.1f} | {g['added_mb']:.0f} / {g['peak_mb']:.0f} | "
              f"{t['added_mb']:.0f} / {t['peak_mb']:.0f} | {g['peak_mb'] / t['peak_mb']:.2f}x | "
              f"{g['load_s']:.2f} vs {t['load_s']:.2f} |", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": "gpu_tok.load_memory/1", "repeats": args.repeats,
                                               "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
