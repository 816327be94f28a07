//! gpu_tok's native core: module wiring only.
//!
//! Each responsibility lives in its own module:
//! - [`engine`]: the batch pipeline (split -> normalize -> pre-tokenize -> model -> post-process -> pack);
//! - [`cpu`]: the fork-aware thread pool, the host build of the kernels, the word cache;
//! - [`cuda`]: the CUDA probe and the kernel sources (the device backend is still to come);
//! - [`plan`]: what the fast engine could run for a given tokenizer, stage by stage;
//! - [`dlpack`]: DLPack export of result buffers;
//! - [`py`]: the Python classes, argument checking, GIL release and exceptions.

pub mod cpu;
pub mod cuda;
pub mod dlpack;
pub mod engine;
pub mod error;
pub mod plan;
pub mod py;

use pyo3::prelude::*;

/// The `gpu_tok._core` extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
