//! Build and runtime facts for `gpu_tok.info()`.

use crate::cpu;
use crate::cuda::{probe, sources};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Version and compiled-in features of the native core.
#[pyfunction]
pub fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item("tokenizers_crate", "0.23.2")?;
    d.set_item("features", Vec::<&str>::new())?;
    d.set_item("cuda_backend", false)?;
    d.set_item("debug", cfg!(debug_assertions))?;
    Ok(d)
}

/// Probes CUDA (driver, devices, NVRTC) without ever crashing; see `cuda::probe`.
#[pyfunction]
pub fn cuda_probe(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let status = py.detach(probe::probe);
    let d = PyDict::new(py);
    d.set_item("available", status.available)?;
    d.set_item("driver_version", status.driver_version)?;
    d.set_item("device_count", status.device_count)?;
    d.set_item("nvrtc_version", status.nvrtc_version)?;
    d.set_item("reason", status.reason)?;
    Ok(d)
}

/// Kernel sources built into this binary: ({file: text}, {unit: [kernel names]}).
#[pyfunction]
pub fn kernel_sources(py: Python<'_>) -> PyResult<(Bound<'_, PyDict>, Bound<'_, PyDict>)> {
    let files = PyDict::new(py);
    for (name, text) in sources::FILES {
        files.set_item(name, text)?;
    }
    let kernels = PyDict::new(py);
    for (unit, names) in sources::KERNELS {
        kernels.set_item(unit, names.to_vec())?;
    }
    Ok((files, kernels))
}

/// The 256 byte-level characters (GPT-2's bytes_to_unicode), byte order.
#[pyfunction]
pub fn byte_level_alphabet() -> String {
    crate::plan::bytelevel::alphabet().iter().collect()
}

/// Worker threads of the engine's pool in this process.
#[pyfunction]
pub fn num_threads() -> usize {
    cpu::pool::current().threads()
}
