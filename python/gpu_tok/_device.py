"""Device selection: which backend a call runs on.

Accepts "auto", "cpu", "cuda", "cuda:N", None (= "auto") and anything whose
`str()` is one of those (so `device=model.device` works with a `torch.device`).

- "cpu": the CPU engine; results in host memory.
- "cuda" / "cuda:N": the CUDA backend; results in device memory. Raises
  `CudaUnavailableError` (with the reason) where CUDA cannot be used, including
  in a child forked after the parent initialised CUDA.
- "auto": the GPU when one is usable and the batch has at least
  `AUTO_MIN_BYTES` of text (smaller batches finish sooner on the CPU than a
  launch round trip takes), else the CPU. In a forked child whose parent
  initialised CUDA it warns once and uses the CPU.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from typing import Any

from . import _core, _nvrtc
from ._errors import CudaUnavailableError

_CUDA = re.compile(r"cuda(?::(\d+))?")

# Provisional: to be replaced by the crossover measured on a GPU (benches/gpu_bench.py).
AUTO_MIN_BYTES = 1 << 20

_warned_fork = False


@cache
def cuda_usable() -> bool:
    """True when the CUDA driver sees a device (probed once per process)."""
    _preload_nvrtc()
    return bool(_core.cuda_probe()["available"])


def _preload_nvrtc() -> None:
    """The pip wheel's NVRTC, by full path, so the core's bare-name lookup finds it."""
    try:
        _nvrtc.load()
    except (CudaUnavailableError, OSError):
        pass


def is_auto(device: Any) -> bool:
    return device is None or str(device).strip().lower() == "auto"


def resolve(device: Any, text_bytes: int | None = None) -> str:
    """The core's device for `device`: "cpu" or "cuda:N" (or an exception).
    `text_bytes` (the batch's size, when known) lets "auto" choose."""
    name = "auto" if device is None else str(device).strip().lower()
    if name == "cpu":
        return "cpu"
    if name == "auto":
        return "cuda:0" if _auto_wants_gpu(text_bytes) else "cpu"
    match = _CUDA.fullmatch(name)
    if match:
        if _core.cuda_initialised_before_fork():
            raise CudaUnavailableError(
                f"device={device!r}: CUDA was initialised in the parent process before fork(), and a forked "
                "child cannot use it; start workers with the 'spawn' method, or use device='cpu'"
            )
        if not cuda_usable():
            raise CudaUnavailableError(
                f"device={device!r} was asked for, but CUDA is not available here: "
                f"{_core.cuda_probe()['reason']}; use 'cpu' or 'auto'"
            )
        return f"cuda:{match.group(1) or 0}"
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {device!r}")


def _auto_wants_gpu(text_bytes: int | None) -> bool:
    global _warned_fork
    if text_bytes is None or text_bytes < AUTO_MIN_BYTES:
        return False
    if _core.cuda_initialised_before_fork():
        if not _warned_fork:
            _warned_fork = True
            warnings.warn("gpu_tok: CUDA was initialised before this process was forked; device='auto' uses "
                          "the CPU here", RuntimeWarning, stacklevel=4)
        return False
    return cuda_usable()
