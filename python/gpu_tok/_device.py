"""Device selection: which backend a call runs on.

Accepts "auto", "cpu", "cuda", "cuda:N", None (= "auto") and anything whose
`str()` is one of those (so `device=model.device` works with a `torch.device`).
The CUDA backend is not part of this build yet: "auto" always picks the CPU and
an explicit CUDA device raises `CudaUnavailableError` saying why.
"""

from __future__ import annotations

import re
from typing import Any

from . import _core
from ._errors import CudaUnavailableError

_CUDA = re.compile(r"cuda(?::(\d+))?")


def resolve(device: Any) -> str:
    """The backend for `device`: today always "cpu" (or an exception)."""
    name = "auto" if device is None else str(device).strip().lower()
    if name in ("auto", "cpu"):
        return "cpu"
    if _CUDA.fullmatch(name):
        probe = _core.cuda_probe()
        why = (
            "this build of gpu_tok has no CUDA backend yet"
            if probe["available"]
            else f"CUDA is not available here: {probe['reason']}"
        )
        raise CudaUnavailableError(f"device={device!r} was asked for, but {why}; use 'cpu' or 'auto'")
    raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {device!r}")
