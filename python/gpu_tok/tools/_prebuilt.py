"""Prebuilt kernels: the wheel-build step that compiles the built-in CUDA
kernels for the SMs a wheel ships for, so users of those GPUs never wait for
NVRTC (`make kernels`, run by `make wheel` and Dockerfile.cuda).

The compiler is the core's own JIT (`_state.compile_kernels`, NVRTC from the
pip wheel), writing kernel-cache files named by source hash, arch and NVRTC
version into the package's `kernels/` folder; the core looks there before
compiling (rust/cuda/prebuilt.rs) and ignores files of other sources. Run it
with the core built from the same sources as the wheel, e.g.:

    python -m gpu_tok.tools._prebuilt --out python/gpu_tok/kernels sm_80 sm_90
    python -m gpu_tok.tools._prebuilt --check dist/gpu_tok-*.whl   # the wheel carries them
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .. import _nvrtc, _state

# Ampere (A100, A10/RTX 30), Ada (L4/L40, RTX 40), Hopper, Blackwell (B200, RTX 50).
ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")
# Where the wheel carries them: `kernels/` beside the core library.
WHEEL_FOLDER = "gpu_tok/kernels/"


def build(out: Path, archs: Sequence[str] = ARCHS, nvrtc: str | None = None) -> list[tuple[str, Path]]:
    """Compiles the built-in kernels for each of `archs` into `out`, replacing
    the CUBINs there; returns the core's listing of `out` ((arch, path)).
    With `nvrtc` ("13.0"), refuses to compile with any other NVRTC version."""
    _nvrtc.load()
    found = "{}.{}".format(*_nvrtc.version())
    if nvrtc is not None and found != nvrtc:
        raise RuntimeError(f"NVRTC {found} was loaded, {nvrtc} was asked for: a driver of CUDA {nvrtc} "
                           f"refuses CUBINs of a newer NVRTC (put NVRTC {nvrtc}'s wheel first on PYTHONPATH)")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.cubin"):  # other sources or archs no longer shipped
        old.unlink()
    # The core releases the GIL while NVRTC compiles: one thread per arch.
    with ThreadPoolExecutor(max_workers=min(len(archs), os.cpu_count() or 1) or 1) as pool:
        list(pool.map(lambda arch: _state.compile_kernels(arch, out), archs))
    listed = _state.prebuilt_kernels(out)
    if sorted(arch for arch, _ in listed) != sorted(archs):
        raise RuntimeError(f"prebuilt kernels in {out}: {listed}, expected {sorted(archs)}")
    return listed


def check_wheel(wheel: Path, archs: Sequence[str] = ARCHS) -> list[str]:
    """The archs whose CUBIN `wheel` carries for this core's kernel sources;
    raises if one of `archs` is missing."""
    with zipfile.ZipFile(wheel) as archive, tempfile.TemporaryDirectory() as tmp:
        for name in archive.namelist():
            if name.startswith(WHEEL_FOLDER) and name.endswith(".cubin"):
                (Path(tmp) / Path(name).name).write_bytes(archive.read(name))
        found = [arch for arch, _ in _state.prebuilt_kernels(tmp)]
    missing = sorted(set(archs) - set(found))
    if missing:
        raise RuntimeError(f"{wheel} lacks prebuilt kernels for {missing} (it has {found})")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_tok.tools._prebuilt", description=__doc__.split("\n\n")[0])
    parser.add_argument("archs", nargs="*", default=list(ARCHS), help=f"SMs (default: {' '.join(ARCHS)})")
    parser.add_argument("--out", type=Path, help="the folder to fill (python/gpu_tok/kernels when building a wheel)")
    parser.add_argument("--check", type=Path, metavar="WHEEL", help="check that WHEEL carries them instead")
    parser.add_argument("--nvrtc", metavar="MAJOR.MINOR",
                        help="the NVRTC version to compile with (the oldest of the CUDA major: 13.0); any other fails")
    args = parser.parse_args(argv)
    if args.check:
        print(f"{args.check}: prebuilt kernels for {' '.join(check_wheel(args.check, args.archs))}")
        return 0
    if args.out is None:
        parser.error("--out is required (the package's kernels/ folder of the source tree being packaged)")
    for arch, path in build(args.out, args.archs, args.nvrtc):
        print(f"{arch}: {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
