"""NVRTC from the pip wheel (`nvidia-cuda-nvrtc`), by full path.

cudarc and ctypes look libnvrtc up by bare name, which the wheel's lib folder
is not on; and the 13.0 wheel's libnvrtc cannot find its own builtins library
unless that is loaded first. So: load `libnvrtc-builtins.so.13.*` then
`libnvrtc.so.13` from the wheel with RTLD_GLOBAL, after which a bare-name
lookup finds them too. Compiling is the core's (`_core.nvrtc_compile`, the
JIT's own compiler).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from functools import cache
from pathlib import Path

from ._errors import CudaUnavailableError


def _wheel_lib_dirs() -> list[Path]:
    dirs = []
    for entry in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
            candidate = Path(entry) / sub
            if candidate.is_dir():
                dirs.append(candidate)
    return dirs


@cache
def load() -> ctypes.CDLL:
    """libnvrtc, preferring the pip wheel's; raises CudaUnavailableError if none."""
    mode = getattr(os, "RTLD_GLOBAL", 0)
    for folder in _wheel_lib_dirs():
        for builtins in sorted(glob.glob(str(folder / "libnvrtc-builtins.so*"))):
            ctypes.CDLL(builtins, mode=mode)
        for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
            if (folder / name).exists():
                return ctypes.CDLL(str(folder / name), mode=mode)
    for name in ("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"):
        try:
            return ctypes.CDLL(name, mode=mode)
        except OSError:
            continue
    raise CudaUnavailableError("NVRTC not found: pip install nvidia-cuda-nvrtc")


def version() -> tuple[int, int]:
    lib = load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value
