//! Error -> Python exception. The exception classes live in
//! `gpu_tok._errors` (they need two bases, e.g. `GpuTokError` and `ValueError`,
//! which is plain in Python); this module looks them up and raises them.

use crate::error::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::sync::Mutex;

fn raise(py: Python<'_>, class: &str, message: String) -> PyErr {
    match py.import("gpu_tok._errors").and_then(|m| m.getattr(class)) {
        Ok(cls) => match cls.call1((message.clone(),)) {
            Ok(instance) => PyErr::from_value(instance),
            Err(err) => err,
        },
        Err(_) => PyRuntimeError::new_err(message),
    }
}

/// Converts a core error into the matching typed Python exception.
pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let message = err.to_string();
    let class = match err {
        Error::Load(_) => "InvalidTokenizerError",
        Error::Unsupported(_) => "UnsupportedTokenizerError",
        Error::InvalidArgument(_) => "InvalidInputError",
        Error::HostMemory(_) => "OutputTooLargeError",
        Error::Tokenizers(_) => "EncodingError",
        Error::CudaUnavailable(_) => "CudaUnavailableError",
        Error::Cuda(_) => "CudaError",
        Error::CudaOutOfMemory(_) => "CudaOutOfMemoryError",
        Error::KernelCompile(_) => "KernelCompileError",
    };
    raise(py, class, message)
}

/// `gpu_tok.OutputTooLargeError` when `nbytes` more bytes for `what` ("the
/// padded rows"...) would not fit in the memory this process can get (see
/// `crate::memory`); `cause` completes "lower ...". For what Python builds.
#[pyfunction]
pub fn check_memory(
    py: Python<'_>,
    nbytes: &Bound<'_, PyAny>,
    what: &str,
    cause: &str,
) -> PyResult<()> {
    let bytes = nbytes
        .extract::<u64>()
        .ok()
        .and_then(|b| usize::try_from(b).ok()); // None: too many
    crate::memory::check(what, bytes, || cause.to_string()).map_err(|err| to_py(py, err))
}

/// Where the last panic happened (set by the hook installed in [`quiet_panics`]).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Panics become exceptions (see [`from_panic`]) whose message says everything
/// the default hook would print: so the hook prints nothing, and only records
/// the location for the message.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()));
        *LAST_PANIC.lock().unwrap_or_else(|e| e.into_inner()) = location;
    }));
}

/// Turns a panic that escaped the core into an exception instead of an abort.
pub fn from_panic(py: Python<'_>, payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let what = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into());
    let at = LAST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .map_or(String::new(), |l| format!(" at {l}"));
    raise(
        py,
        "GpuTokError",
        format!("internal error (please report): {what}{at}"),
    )
}

/// Runs `work` without the GIL, turning core errors and panics into exceptions.
pub fn detach_work<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> crate::error::Result<T> + Send,
{
    let outcome = py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)));
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(to_py(py, err)),
        Err(payload) => Err(from_panic(py, payload)),
    }
}
