//! The Python surface of the native core: classes, argument checking, GIL
//! release, and the mapping of [`crate::error::Error`] to typed exceptions.
//! The friendly API (`gpu_tok.Tokenizer`, the transformers-style call) is in
//! `python/gpu_tok/`; this layer stays thin and strict.

mod arrow;
mod batch;
mod compat;
mod decode;
mod encode_one;
mod errors;
mod id_ints;
mod info;
mod inputs;
mod lists;
mod maps;
mod pretok;
mod settings;
mod tensor;
mod tokenizer;
mod utf8;

use pyo3::prelude::*;

/// Adds the core's classes and functions to `gpu_tok._core`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::quiet_panics();
    m.add_class::<tokenizer::CoreTokenizer>()?;
    m.add_class::<batch::CoreBatch>()?;
    m.add_class::<tensor::Tensor>()?;
    m.add_class::<settings::Truncation>()?;
    m.add_class::<settings::Padding>()?;
    m.add_function(wrap_pyfunction!(errors::check_memory, m)?)?;
    m.add_function(wrap_pyfunction!(tokenizer::device_kind, m)?)?;
    m.add_class::<maps::CoreMaps>()?;
    m.add_function(wrap_pyfunction!(maps::encode_rich, m)?)?;
    m.add_function(wrap_pyfunction!(decode::decode_rows, m)?)?;
    m.add_function(wrap_pyfunction!(compat::added_token_flags, m)?)?;
    m.add_function(wrap_pyfunction!(compat::save_model, m)?)?;
    m.add_function(wrap_pyfunction!(info::build_info, m)?)?;
    m.add_function(wrap_pyfunction!(info::cuda_probe, m)?)?;
    m.add_function(wrap_pyfunction!(info::num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(info::kernel_sources, m)?)?;
    m.add_function(wrap_pyfunction!(info::byte_level_alphabet, m)?)?;
    m.add_function(wrap_pyfunction!(info::compile_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(info::nvrtc_compile, m)?)?;
    m.add_function(wrap_pyfunction!(info::find_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(info::prebuilt_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(info::cuda_device, m)?)?;
    m.add_function(wrap_pyfunction!(info::cuda_initialised_before_fork, m)?)?;
    #[cfg(feature = "test-hooks")]
    m.add_function(wrap_pyfunction!(info::note_cuda_initialised_for_tests, m)?)?;
    #[cfg(feature = "test-hooks")]
    m.add_function(wrap_pyfunction!(info::emulator_releases_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(info::emulator_launch_counts, m)?)?;
    #[cfg(feature = "test-hooks")]
    m.add_function(wrap_pyfunction!(info::long_word_round_shares_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(pretok::split_words, m)?)?;
    m.add_function(wrap_pyfunction!(pretok::time_split, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
