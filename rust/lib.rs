//! gpu_tok's native core: module wiring only.
//!
//! Layers, bottom up; a module imports only from layers below it:
//! - leaves: [`error`]; [`kernels`], the ABI of the shared kernel logic in
//!   `cuda/*.cuh` (C mirrors, kernel list, host build); [`pool`], the
//!   fork-aware thread pool; [`memory`], the host memory a call may take and
//!   fallible allocation; [`layout`], the packed batch layout; [`dlpack`];
//!   [`short_words`], the word -> ids table the word caches and plans share;
//!   [`memory_hints`] (huge pages, prefetches);
//! - [`plan`]: what the fast engine can run for a tokenizer, and its tables;
//! - the two backends: [`cpu`] (one sequence per thread, word cache) and
//!   [`cuda`] (the batch pipeline on a GPU or its host emulator);
//! - [`engine`]: the batch pipeline over both and the `tokenizers` crate
//!   (split -> normalize -> pre-tokenize -> model -> post-process -> pack);
//! - [`py`]: the Python classes, argument checking, GIL release and exceptions.

pub mod cpu;
pub mod cuda;
pub mod dlpack;
pub mod engine;
pub mod error;
pub mod kernels;
pub mod layout;
pub mod memory;
pub mod memory_hints;
pub mod plan;
pub mod pool;
pub mod py;
pub mod short_words;
#[cfg(test)]
mod test_texts;

use pyo3::prelude::*;

/// The `gpu_tok._core` extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    py::register(m)
}
