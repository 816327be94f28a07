//! Build and runtime facts for `gpu_tok.info()`.

use super::errors::detach_work;
use crate::engine::device::{driver, emulator, jit, prebuilt, probe, sources};
use crate::pool;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::HashMap;
use std::path::PathBuf;

/// Version and compiled-in features of the native core.
#[pyfunction]
pub fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", env!("CARGO_PKG_VERSION"))?;
    d.set_item("tokenizers_crate", env!("GPU_TOK_TOKENIZERS_VERSION"))?;
    // Always built: cudarc loads libcuda and NVRTC at run time, if present.
    d.set_item("cuda_backend", true)?;
    d.set_item("debug", cfg!(debug_assertions))?;
    // The stable-ABI build converts a list of str under the GIL (rust/py/utf8.rs).
    d.set_item("stable_abi", cfg!(feature = "abi3"))?;
    let dir = prebuilt::dir();
    let archs: Vec<String> = dir
        .iter()
        .flat_map(|dir| prebuilt::list(dir))
        .map(|(arch, _)| arch)
        .collect();
    d.set_item("prebuilt_kernels", archs)?;
    d.set_item(
        "prebuilt_kernel_dir",
        dir.map(|d| d.to_string_lossy().into_owned()),
    )?;
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
    let devices = status
        .devices
        .iter()
        .enumerate()
        .map(|(ordinal, (name, (major, minor)))| {
            let dev = PyDict::new(py);
            dev.set_item("ordinal", ordinal)?;
            dev.set_item("name", name)?;
            dev.set_item("sm", format!("sm_{major}{minor}"))?;
            Ok(dev)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("devices", devices)?;
    d.set_item("kernel_cache_dir", jit::cache_dir().to_string_lossy())?;
    Ok(d)
}

/// True in a child forked after its parent initialised CUDA (CUDA is unusable here).
#[pyfunction]
pub fn cuda_initialised_before_fork() -> bool {
    probe::initialised_before_fork()
}

/// Records CUDA as initialised by this process, as a successful probe does.
/// For tests of the fork rules on machines without a GPU; use in a throwaway
/// process (its forked children then refuse CUDA).
#[cfg(feature = "test-hooks")]
#[pyfunction]
pub fn note_cuda_initialised_for_tests() {
    probe::note_initialised();
}

/// For tests of the consumer-stream rule: how each exported emulator buffer
/// was released since the last call, oldest first, as (bytes, the consumer
/// streams the release waited for).
#[cfg(feature = "test-hooks")]
#[pyfunction]
pub fn emulator_releases_for_tests() -> Vec<(usize, Vec<u64>)> {
    emulator::take_releases()
        .into_iter()
        .map(|r| (r.bytes, r.waited_for))
        .collect()
}

/// For the device cost model (benches/device_model.py): the process's
/// emulator launches since the last call, oldest first, as (kernel, counts:
/// sectors read and written, threads, working threads, tail, atomics, the
/// most atomics on one word, untracked atomics). Empty unless
/// `GPU_TOK_DEVICE_COUNTS=1` was set before the emulator's first use.
#[pyfunction]
pub fn emulator_launch_counts(py: Python<'_>) -> PyResult<Vec<(String, HashMap<String, u64>)>> {
    let device = emulator::device().map_err(|err| super::errors::to_py(py, err))?;
    Ok(device
        .driver
        .take_launch_counts()
        .into_iter()
        .map(|c| {
            let name = c.kernel.map_or("", |k| k.name()).to_string();
            let fields = [
                ("read_sectors", c.read_sectors),
                ("write_sectors", c.write_sectors),
                ("threads", c.threads),
                ("working", c.working),
                ("tail", c.tail),
                ("atomics", c.atomics),
                ("same_address_max", c.same_address_max()),
                ("atomics_untracked", c.atomics_untracked),
            ];
            (
                name,
                fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            )
        })
        .collect())
}

/// The shares long words are merged with (`gt_bpe_rounds`): (CPU backend,
/// devices). Sets those given first, for tests that run each backend with the
/// other's schedule; returns the shares before. Results never depend on them.
#[cfg(feature = "test-hooks")]
#[pyfunction]
#[pyo3(signature = (host=None, device=None))]
pub fn long_word_round_shares_for_tests(
    host: Option<u32>,
    device: Option<u32>,
) -> PyResult<(u32, u32)> {
    crate::engine::device::set_round_shares(host, device)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Sets up CUDA device `ordinal` for the batch kernels (context, kernels
/// compiled or loaded from the cache) and describes it.
#[pyfunction]
pub fn cuda_device(py: Python<'_>, ordinal: usize) -> PyResult<Bound<'_, PyDict>> {
    let device = detach_work(py, || driver::gpu(ordinal))?;
    let gpu = &device.driver;
    let d = PyDict::new(py);
    d.set_item("ordinal", gpu.ordinal)?;
    d.set_item("name", &gpu.name)?;
    d.set_item("sm", format!("sm_{}{}", gpu.sm.0, gpu.sm.1))?;
    d.set_item("total_memory", gpu.total_memory)?;
    d.set_item("cubin", gpu.cubin_path.to_string_lossy())?;
    d.set_item("cubin_from_cache", gpu.cubin_from_cache)?;
    Ok(d)
}

/// Compiles the built-in kernels for `arch` ("sm_90") through the on-disk
/// cache in `cache_dir` (default: the kernel cache): (path, from_cache, size).
#[pyfunction]
#[pyo3(signature = (arch, cache_dir=None))]
pub fn compile_kernels(
    py: Python<'_>,
    arch: String,
    cache_dir: Option<PathBuf>,
) -> PyResult<(PathBuf, bool, usize)> {
    let dir = cache_dir.unwrap_or_else(jit::cache_dir);
    let cubin = detach_work(py, || jit::kernels_cubin(&arch, &dir))?;
    let from_cache = cubin.from_cache();
    Ok((cubin.path, from_cache, cubin.image.len()))
}

/// The CUBIN a device of `arch` loads, found as the device set-up finds it
/// (no device needed): prebuilt in `prebuilt_dir` (default: the package's),
/// else cached in `cache_dir`, else compiled. (path, origin, size), origin
/// "prebuilt", "cache" or "nvrtc".
#[pyfunction]
#[pyo3(signature = (arch, prebuilt_dir=None, cache_dir=None))]
pub fn find_kernels(
    py: Python<'_>,
    arch: String,
    prebuilt_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
) -> PyResult<(PathBuf, &'static str, usize)> {
    let prebuilt_dir = prebuilt_dir.or_else(prebuilt::dir);
    let cache_dir = cache_dir.unwrap_or_else(jit::cache_dir);
    let ((), cubin) = detach_work(py, || {
        prebuilt::load_first(
            &arch,
            prebuilt_dir.as_deref(),
            &cache_dir,
            jit::kernels_cubin,
            |_| Ok(()),
        )
    })?;
    Ok((cubin.path, cubin.origin.name(), cubin.image.len()))
}

/// (arch, path) of the prebuilt CUBINs of this binary's kernel sources in
/// `dir` (default: the package's `kernels/` folder), by arch.
#[pyfunction]
#[pyo3(signature = (dir=None))]
pub fn prebuilt_kernels(dir: Option<PathBuf>) -> Vec<(String, PathBuf)> {
    dir.or_else(prebuilt::dir)
        .map(|dir| prebuilt::list(&dir))
        .unwrap_or_default()
}

/// Compiles `unit` of `files` ({name: text}, headers are the `.cuh` files) to
/// a CUBIN for `arch` with NVRTC: the JIT's compiler, for compile checks.
#[pyfunction]
pub fn nvrtc_compile<'py>(
    py: Python<'py>,
    unit: String,
    files: Vec<(String, String)>,
    arch: String,
) -> PyResult<Bound<'py, PyBytes>> {
    let image = detach_work(py, || {
        let borrowed: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        jit::compile(&unit, &borrowed, &arch)
    })?;
    Ok(PyBytes::new(py, &image))
}

/// Kernel sources built into this binary: ({file: text}, {unit: [kernel names]}).
#[pyfunction]
pub fn kernel_sources(py: Python<'_>) -> PyResult<(Bound<'_, PyDict>, Bound<'_, PyDict>)> {
    let files = PyDict::new(py);
    for (name, text) in sources::FILES {
        files.set_item(name, text)?;
    }
    let kernels = PyDict::new(py);
    for (unit, names) in sources::kernels() {
        kernels.set_item(unit, names)?;
    }
    Ok((files, kernels))
}

/// The 256 byte-level characters (GPT-2's bytes_to_unicode), byte order.
#[pyfunction]
pub fn byte_level_alphabet() -> String {
    crate::engine::decode::byte_level_alphabet()
}

/// Worker threads of the engine's pool in this process.
#[pyfunction]
pub fn num_threads() -> usize {
    pool::current().threads()
}
