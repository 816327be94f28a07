"""benches/gpu_check.sh must work the first time it runs on a lent GPU machine
(where device time is scarce): its dry run passes here, in CI. The dry run
runs every step that needs no device (preflight, `gpu_tok.info()`, which
tokenizers the tests cover) and checks each device step's command instead of
running it (the tests it would run are collected, the sanitizers' selection
is not empty, the benchmark's arguments parse)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_check_dry_run_passes(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHON"}  # python3 by default
    env["OUT"] = str(tmp_path)
    done = subprocess.run(["bash", "benches/gpu_check.sh", "--dry-run"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-2000:]
    assert "FAIL" not in out, out
    python3 = shutil.which("python3", path=env.get("PATH"))
    assert python3 is not None
    assert any(line.startswith("python ") and line.endswith(python3) for line in out.splitlines()), out
    steps = ("== preflight", "== gpu_tok.info()", "  covered: ", "  not covered: ", "tests: skipped: no device (",
             "sanitizers: ", "bench: skipped: no device", "== summary: tests exit 0")
    for step in steps:
        assert step in out, step
    assert (tmp_path / "gpu_check.log").read_text() == out
