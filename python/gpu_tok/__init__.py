"""gpu_tok: Hugging Face tokenizers, bit for bit, fast, straight into tensors.

    import gpu_tok
    tok = gpu_tok.Tokenizer.from_pretrained("path/to/model")
    tok.encode("Hello")                                   # list[int], as transformers (ids as tokenizers)
    batch = tok(["a", "b c"], padding=True, return_tensors="pt")
"""

from __future__ import annotations

import importlib
from types import ModuleType

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
from ._info import Tensor, __version__, info
from .batch import BatchEncoding
from .compat.tokenizer import Tokenizer

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
