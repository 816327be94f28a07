//! NVRTC: the kernel sources built into the binary -> a CUBIN for the exact
//! SM of the device, cached on disk so later processes start fast.
//!
//! Cache key: a hash of every source file, the architecture and the NVRTC
//! version, in the file name (`gt_batch-<hash>-sm_90-nvrtc13.0.cubin`); a file
//! is written to a temporary name and renamed, so concurrent processes never
//! read half a file. Compiling needs no GPU (CI compiles for sm_80 and sm_90).
//! Prebuilt CUBINs are such cache files, made at wheel-build time.
//!
//! libnvrtc is found by bare name (cudarc's lookup); the Python layer first
//! loads the pip wheel's copy by full path (`gpu_tok._nvrtc`).

use crate::error::{Error, Result};
use crate::kernels::sources;
use cudarc::nvrtc::sys as nvrtc;
use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};

/// The kernel cache folder: `$GPU_TOK_KERNEL_CACHE`, else
/// `$XDG_CACHE_HOME/gpu_tok/kernels`, else `~/.cache/gpu_tok/kernels`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GPU_TOK_KERNEL_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("gpu_tok").join("kernels")
}

/// FNV-1a over every source file's name and text: stable across builds and
/// Rust versions (unlike `DefaultHasher`).
pub fn source_hash(files: &[(&str, &str)]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for (name, text) in files {
        for b in name.bytes().chain([0]).chain(text.bytes()).chain([0]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01B3);
        }
    }
    h
}

/// The NVRTC version (major, minor), or why NVRTC cannot be used.
pub fn nvrtc_version() -> Result<(i32, i32)> {
    guarded(|| {
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: two valid out-pointers.
        let status = unsafe { nvrtc::nvrtcVersion(&mut major, &mut minor) };
        check(status, "nvrtcVersion")?;
        Ok((major, minor))
    })
}

/// Where a CUBIN came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Shipped with the package (`prebuilt`), built at wheel-build time.
    Prebuilt,
    /// The on-disk kernel cache.
    Cache,
    /// Compiled by NVRTC in this call.
    Compiled,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Prebuilt => "prebuilt",
            Origin::Cache => "cache",
            Origin::Compiled => "nvrtc",
        }
    }
}

/// A CUBIN of the built-in kernels for `arch` (e.g. "sm_90").
pub struct Cubin {
    pub image: Vec<u8>,
    pub path: PathBuf,
    pub origin: Origin,
}

impl Cubin {
    /// Read from disk rather than compiled now.
    pub fn from_cache(&self) -> bool {
        self.origin != Origin::Compiled
    }
}

/// `gt_batch-<source hash>-`: how every CUBIN file of the built-in sources
/// starts (the arch and the NVRTC version follow).
pub fn sources_prefix() -> String {
    format!("gt_batch-{:016x}-", source_hash(&sources::FILES))
}

/// `gt_batch-<source hash>-<arch>-`: the start of the built-in sources' CUBIN
/// files for `arch`.
pub fn cubin_prefix(arch: &str) -> String {
    format!("{}{arch}-", sources_prefix())
}

/// A CUBIN image as far as the CPU can tell: an ELF file.
pub fn looks_like_cubin(image: &[u8]) -> bool {
    image.starts_with(b"\x7fELF")
}

/// The built-in kernels for `arch`, from `dir` when cached there, else
/// compiled and stored there (a cache that cannot be written is not an error).
pub fn kernels_cubin(arch: &str, dir: &Path) -> Result<Cubin> {
    let (major, minor) = nvrtc_version()?;
    let path = dir.join(format!("{}nvrtc{major}.{minor}.cubin", cubin_prefix(arch)));
    if let Ok(image) = std::fs::read(&path) {
        if looks_like_cubin(&image) {
            return Ok(Cubin {
                image,
                path,
                origin: Origin::Cache,
            });
        }
    }
    let image = compile(sources::UNIT, &sources::FILES, arch)?;
    let _ = store(&path, &image);
    Ok(Cubin {
        image,
        path,
        origin: Origin::Compiled,
    })
}

fn store(path: &Path, image: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(".{}.{}.tmp", std::process::id(), unique()));
    std::fs::write(&tmp, image)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn unique() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Compiles `unit` (headers: every `.cuh` in `files`) to a CUBIN for `arch`.
pub fn compile(unit: &str, files: &[(&str, &str)], arch: &str) -> Result<Vec<u8>> {
    let source = files
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(|| Error::InvalidArgument(format!("no source file named {unit}")))?
        .1;
    let cstr = |s: &str| {
        CString::new(s)
            .map_err(|_| Error::InvalidArgument("a kernel source contains a NUL byte".into()))
    };
    let headers: Vec<(CString, CString)> = files
        .iter()
        .filter(|(name, _)| name.ends_with(".cuh"))
        .map(|(name, text)| Ok((cstr(name)?, cstr(text)?)))
        .collect::<Result<_>>()?;
    let header_names: Vec<*const c_char> = headers.iter().map(|(n, _)| n.as_ptr()).collect();
    let header_texts: Vec<*const c_char> = headers.iter().map(|(_, t)| t.as_ptr()).collect();
    let (source, name) = (cstr(source)?, cstr(unit)?);
    let options: Vec<CString> = [format!("--gpu-architecture={arch}"), "--std=c++17".into()]
        .iter()
        .map(|o| cstr(o))
        .collect::<Result<_>>()?;
    let option_ptrs: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();

    guarded(|| {
        let mut program = std::ptr::null_mut();
        // SAFETY: every pointer is a NUL-terminated string alive for the call;
        // the header arrays have `headers.len()` entries.
        let status = unsafe {
            nvrtc::nvrtcCreateProgram(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                headers.len() as c_int,
                header_texts.as_ptr(),
                header_names.as_ptr(),
            )
        };
        check(status, "nvrtcCreateProgram")?;
        let result = build(program, &option_ptrs, unit, arch);
        // SAFETY: `program` was created above and is destroyed once.
        unsafe { nvrtc::nvrtcDestroyProgram(&mut program) };
        result
    })
}

fn build(
    program: nvrtc::nvrtcProgram,
    options: &[*const c_char],
    unit: &str,
    arch: &str,
) -> Result<Vec<u8>> {
    // SAFETY: `program` is a live program; options are valid C strings.
    let status =
        unsafe { nvrtc::nvrtcCompileProgram(program, options.len() as c_int, options.as_ptr()) };
    if status != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        let mut size = 0usize;
        // SAFETY: `program` is live; the log buffer has the size NVRTC reported.
        let log = unsafe {
            nvrtc::nvrtcGetProgramLogSize(program, &mut size);
            let mut log = vec![0u8; size.max(1)];
            nvrtc::nvrtcGetProgramLog(program, log.as_mut_ptr().cast());
            String::from_utf8_lossy(&log)
                .trim_end_matches('\0')
                .to_string()
        };
        return Err(Error::KernelCompile(format!(
            "NVRTC failed to compile {unit} for {arch}:\n{log}"
        )));
    }
    let mut size = 0usize;
    // SAFETY: `program` compiled; the buffer has the size NVRTC reported.
    unsafe {
        check(
            nvrtc::nvrtcGetCUBINSize(program, &mut size),
            "nvrtcGetCUBINSize",
        )?;
        let mut image = vec![0u8; size];
        check(
            nvrtc::nvrtcGetCUBIN(program, image.as_mut_ptr().cast()),
            "nvrtcGetCUBIN",
        )?;
        Ok(image)
    }
}

fn check(status: nvrtc::nvrtcResult, what: &str) -> Result<()> {
    if status == nvrtc::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(Error::CudaUnavailable(format!("{what} failed: {status:?}")))
    }
}

/// Runs an NVRTC call sequence, turning a missing library (cudarc panics)
/// into `CudaUnavailable`.
fn guarded<T>(work: impl FnOnce() -> Result<T>) -> Result<T> {
    // SAFETY: only checks whether the library can be loaded.
    if !unsafe { nvrtc::is_culib_present() } {
        return Err(Error::CudaUnavailable(
            "NVRTC not found (pip install nvidia-cuda-nvrtc)".into(),
        ));
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
        Err(Error::CudaUnavailable(
            "NVRTC could not be used (a symbol is missing from libnvrtc)".into(),
        ))
    })
}
