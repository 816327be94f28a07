"""gpu_tok: Hugging Face tokenizers, bit for bit, fast, straight into tensors.

    import gpu_tok
    tok = gpu_tok.Tokenizer.from_pretrained("path/to/model")
    tok.encode("Hello")                                   # list[int], as transformers (ids as tokenizers)
    batch = tok(["a", "b c"], padding=True, return_tensors="pt")
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from . import _core
from ._errors import (
    CpuFallbackWarning,
    CudaError,
    CudaOutOfMemoryError,
    CudaUnavailableError,
    EncodingError,
    GpuTokError,
    InvalidInputError,
    InvalidTokenizerError,
    KernelCompileError,
    OutputTooLargeError,
    TokenizerNotFoundError,
    UnsupportedTokenizerError,
)
from .batch import BatchEncoding
from .compat.tokenizer import Tokenizer

Tensor = _core.Tensor
__version__: str = _core.__version__


def info(tokenizer: Tokenizer | None = None, *, probe_cuda: bool = True) -> dict[str, Any]:
    """Version, build (with the SMs whose kernels come prebuilt), backend, CUDA
    status and threads; with a tokenizer, its plan.

    The CUDA probe loads the driver and calls cuInit; a process that forks
    afterwards cannot use CUDA in the child, so pass `probe_cuda=False` there.
    """
    report: dict[str, Any] = dict(_core.build_info())
    report["threads"] = _core.num_threads()
    report["cuda"] = _cuda_report() if probe_cuda else {"available": None, "reason": "not probed"}
    cuda = report["cuda"]
    # A GPU needs NVRTC unless the wheel carries its SM's kernels prebuilt.
    devices_prebuilt = all(d["sm"] in report["prebuilt_kernels"] for d in cuda.get("devices") or [])
    report["backend"] = "cuda" if cuda["available"] and (cuda.get("nvrtc_version") or devices_prebuilt) else "cpu"
    if tokenizer is not None:
        report["plan"] = tokenizer.plan
    return report


def _cuda_report() -> dict[str, Any]:
    """The core's probe (driver, devices with name and SM, NVRTC, kernel cache
    folder), after loading the pip wheel's NVRTC (if any) so the core finds it."""
    from . import _placement

    _placement.cuda_usable()
    return dict(_core.cuda_probe())


# Submodules reachable as attributes (`gpu_tok.convert.cl100k_tokenizer_json()`), each
# imported at first use: they pull in optional packages (pyarrow, aiohttp, ray).
_SUBMODULES = ("client", "collate", "convert", "corpus", "hf_datasets", "ray", "serve")


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'gpu_tok' has no attribute {name!r}")


__all__ = [
    "BatchEncoding",
    "CpuFallbackWarning",
    "CudaError",
    "CudaOutOfMemoryError",
    "CudaUnavailableError",
    "EncodingError",
    "GpuTokError",
    "InvalidInputError",
    "InvalidTokenizerError",
    "KernelCompileError",
    "OutputTooLargeError",
    "Tensor",
    "TokenizerNotFoundError",
    "Tokenizer",
    "UnsupportedTokenizerError",
    "__version__",
    "info",
]
