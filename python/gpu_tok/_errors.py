"""Exceptions raised by gpu_tok. Each one is a `GpuTokError` and, where natural,
also the built-in exception a caller would catch (`ValueError`,
`FileNotFoundError`, `RuntimeError`)."""

from __future__ import annotations


class GpuTokError(Exception):
    """Base class of every error gpu_tok raises on purpose."""


class InvalidTokenizerError(GpuTokError, ValueError):
    """The tokenizer.json (or its config files) is not valid JSON or not readable."""


class UnsupportedTokenizerError(GpuTokError, ValueError):
    """Valid JSON that the `tokenizers` library cannot build (unknown component types...)."""


class TokenizerNotFoundError(GpuTokError, FileNotFoundError):
    """No tokenizer.json where one was asked for (gpu_tok never downloads)."""


class InvalidInputError(GpuTokError, ValueError):
    """An input or a setting that cannot be honoured (lone surrogate, too-short max_length...)."""


class OutputTooLargeError(InvalidInputError, MemoryError):
    """A call's output would not fit in the memory this process may still take
    (the machine's available memory, a cgroup v1/v2 limit, RLIMIT_AS): refused
    before anything is allocated, or raised when an allocation failed. The
    message names the settings that made it so big (a padding length...)."""


class EncodingError(GpuTokError, RuntimeError):
    """The `tokenizers` library refused to encode or decode an input."""


class CudaUnavailableError(GpuTokError, RuntimeError):
    """CUDA was asked for (`device="cuda"`) but cannot be used here."""


class CudaError(GpuTokError, RuntimeError):
    """A CUDA call failed while the GPU was working (out of memory, a kernel fault...)."""


class CudaOutOfMemoryError(CudaError):
    """The GPU had no room for a call's buffers. `device="auto"` computes such a
    call on the CPU instead (with a `CpuFallbackWarning`); `device="cuda"` raises."""


class CpuFallbackWarning(RuntimeWarning):
    """`device="auto"` chose the GPU, which could not take the call (e.g. out of
    memory): it was computed on the CPU instead, with the same results."""


class KernelCompileError(CudaError):
    """NVRTC could not compile gpu_tok's built-in kernels for this GPU (its log is in
    the message): a bug to report, not a missing CUDA installation."""


__all__ = [
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
    "TokenizerNotFoundError",
    "UnsupportedTokenizerError",
]
