"""Placement: which backend a call runs on, and where its results live.

Accepts "auto", "cpu", "cuda", "cuda:N", None (= "auto") and anything whose
`str()` is one of those (so `device=model.device` works with a `torch.device`).

- "cpu": the CPU engine; results in host memory.
- "cuda" / "cuda:N": the CUDA backend; results in device memory. Raises
  `CudaUnavailableError` (with the reason) where CUDA cannot be used, including
  in a child forked after the parent initialised CUDA.
- "auto": results in host memory, like "cpu", computed on the GPU when it can
  gain: a usable GPU (set up once per process; any failure means the CPU), a
  call the GPU can pack (no pairs, no offsets) and at least `AUTO_MIN_BYTES`
  of text. In a forked child whose parent initialised CUDA it warns once and
  uses the CPU. A call the GPU has no memory for is computed on the CPU, with a
  `CpuFallbackWarning`: the engine's policy (`rust/engine/device.rs`), asked
  for by `host_results=True`.

The device string is parsed by the core (`_core.device_kind`, the engine's one
parser): this module only decides what "auto" means and checks that CUDA can
be used before a call asks for it.

`GPU_TOK_CHUNK_BYTES` (a positive integer, read at each call) sets the text
bytes per device chunk for the GPU, instead of sizing chunks from free memory:
smaller chunks use less GPU memory, and tests use it to run many chunks.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import _core, _nvrtc
from ._errors import CudaError, CudaUnavailableError, KernelCompileError

# Provisional: to be replaced by the crossover measured on a GPU (benches/gpu_bench.py).
AUTO_MIN_BYTES = 1 << 20
# The core device "auto" offloads to (tests without a GPU point it at the host emulator).
AUTO_DEVICE = "cuda:0"
CHUNK_ENV = "GPU_TOK_CHUNK_BYTES"

_warned_fork = False


@dataclass(frozen=True)
class Placement:
    """The core's device ("cpu", "cuda[:N]", or for tests "emulator[:N]"), whether
    results are copied to the host (device="auto": the CPU may then stand in for
    the GPU), and the text bytes per device chunk (None: the device's choice)."""

    core: str
    to_host: bool = False
    chunk_bytes: int | None = None


def chunk_bytes() -> int | None:
    """`GPU_TOK_CHUNK_BYTES` as a positive integer, or None when unset."""
    value = os.environ.get(CHUNK_ENV, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ValueError(f"{CHUNK_ENV} must be a positive number of bytes, not {value!r}")
    return number


def _preload_nvrtc() -> None:
    """The pip wheel's NVRTC, by full path, so the core's bare-name lookup finds it."""
    try:
        _nvrtc.load()
    except (CudaUnavailableError, OSError):
        pass


@cache
def cuda_usable() -> bool:
    """True when the CUDA driver sees a device (probed once per process)."""
    _preload_nvrtc()
    return bool(_core.cuda_probe()["available"])


@cache
def _auto_gpu_ready() -> bool:
    """True when GPU 0 could be set up (driver, NVRTC, kernels), tried once."""
    if not cuda_usable():
        return False
    try:
        _core.cuda_device(0)
    except KernelCompileError as err:  # a bug, not a missing GPU: say so once
        warnings.warn(f"gpu_tok: the CUDA kernels did not compile, device='auto' uses the CPU; "
                      f"please report: {err}", RuntimeWarning, stacklevel=5)
        return False
    except (CudaUnavailableError, CudaError):
        return False
    return True


def is_auto(device: Any) -> bool:
    return device is None or str(device).strip().lower() == "auto"


def check(device: Any) -> str:
    """`device` as the core reads it ("auto", "cpu", "cuda" or "cuda:N"), or a
    `ValueError` naming it. The emulator's spellings are the tests', not users'."""
    name = "auto" if device is None else str(device).strip().lower()
    if name == "auto":
        return name
    try:
        kind = _core.device_kind(name)
    except ValueError:
        kind = "emulator"
    if kind == "emulator":
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {device!r}")
    return name


def resolve(device: Any, text_bytes: int | None = None, packable: bool = True) -> Placement:
    """Where a call with `device` runs. For "auto", `text_bytes` (the batch's
    size, when known) and `packable` (no pairs, no offsets) let it choose."""
    name = check(device)
    if name == "auto":
        if not _auto_wants_gpu(text_bytes, packable):
            return Placement("cpu")
        return Placement(AUTO_DEVICE, to_host=True, chunk_bytes=chunk_bytes())
    if name == "cpu":
        return Placement("cpu")
    if _core.cuda_initialised_before_fork() or not cuda_usable():
        raise CudaUnavailableError(f"device={device!r} cannot be used: {_core.cuda_probe()['reason']}; "
                                   "use 'cpu' or 'auto'")
    return Placement(name, chunk_bytes=chunk_bytes())


def _auto_wants_gpu(text_bytes: int | None, packable: bool) -> bool:
    global _warned_fork
    if not packable or text_bytes is None or text_bytes < AUTO_MIN_BYTES:
        return False
    if _core.cuda_initialised_before_fork():
        if not _warned_fork:
            _warned_fork = True
            warnings.warn("gpu_tok: CUDA was initialised before this process was forked; device='auto' uses "
                          "the CPU here", RuntimeWarning, stacklevel=4)
        return False
    return _auto_gpu_ready()
