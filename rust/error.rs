//! The crate's one error type. Every failure carries enough context to be shown
//! to a Python user as is; `py::errors` maps each kind to a typed exception.

use thiserror::Error;

/// Everything that can go wrong in the native core.
#[derive(Clone, Debug, Error)]
pub enum Error {
    /// A tokenizer.json that could not be read or parsed.
    #[error("{0}")]
    Load(String),
    /// Valid JSON that the `tokenizers` crate cannot build (unknown component types...).
    #[error("{0}")]
    Unsupported(String),
    /// A setting or an input that cannot be honoured (too-short max_length, no pad token...).
    #[error("{0}")]
    InvalidArgument(String),
    /// An output that this process cannot hold (refused before allocating, or an
    /// allocation that failed): see `crate::memory`.
    #[error("{0}")]
    HostMemory(String),
    /// A failure inside the `tokenizers` crate while encoding or decoding.
    #[error("tokenizers: {0}")]
    Tokenizers(String),
    /// CUDA was asked for but cannot be used here.
    #[error("{0}")]
    CudaUnavailable(String),
    /// A CUDA call failed while the GPU was working (out of memory, a kernel fault...).
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The GPU (or pinned host memory) had no room for a call's buffers.
    #[error("CUDA out of memory: {0}")]
    CudaOutOfMemory(String),
    /// The built-in kernels did not compile for this GPU (NVRTC's log): a bug
    /// in gpu_tok or NVRTC, not a missing CUDA.
    #[error("{0}")]
    KernelCompile(String),
}

impl Error {
    /// Wraps an error raised by the `tokenizers` crate.
    pub fn tokenizers(err: impl std::fmt::Display) -> Self {
        Error::Tokenizers(err.to_string())
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
