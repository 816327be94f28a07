"""NVRTC from the pip wheel (`nvidia-cuda-nvrtc`), by full path.

cudarc and ctypes look libnvrtc up by bare name, which the wheel's lib folder
is not on; and the 13.0 wheel's libnvrtc cannot find its own builtins library
unless that is loaded first. So: load `libnvrtc-builtins.so.13.*` then
`libnvrtc.so.13` from the wheel with RTLD_GLOBAL, after which a bare-name
lookup finds them too. Also compiles a kernel unit to CUBIN for one SM, which
needs no GPU and no driver: CI uses it to compile-check every kernel.
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


def compile_cubin(unit: str, files: dict[str, str], arch: str) -> bytes:
    """Compiles `files[unit]` (headers from `files`) to a CUBIN for `arch` (e.g. "sm_90")."""
    lib = load()
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    headers = [name for name in files if name.endswith(".cuh")]
    program = ctypes.c_void_p()
    encode = [s.encode() for s in headers]
    sources = (ctypes.c_char_p * len(headers))(*[files[h].encode() for h in headers])
    names = (ctypes.c_char_p * len(headers))(*encode)
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(program), files[unit].encode(), unit.encode(),
                                       len(headers), sources, names), "nvrtcCreateProgram")
    options = [f"--gpu-architecture={arch}".encode(), b"--std=c++17", b"-default-device"]
    opts = (ctypes.c_char_p * len(options))(*options)
    try:
        status = lib.nvrtcCompileProgram(program, len(options), opts)
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(program, log)
            raise CudaUnavailableError(f"NVRTC failed to compile {unit} for {arch}:\n{log.value.decode()}")
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(program, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def _check(lib: ctypes.CDLL, status: int, what: str) -> None:
    if status != 0:
        raise CudaUnavailableError(f"{what} failed: {lib.nvrtcGetErrorString(status).decode()}")
