//! Is CUDA usable here? Loads the driver (`libcuda.so.1`) and NVRTC by name at
//! run time and asks them for versions and devices. Every failure is a reason
//! string, never a panic or an abort, so it is safe on any host.
//!
//! Note: a successful probe initialises the driver in this process (`cuInit`);
//! a forked child then cannot use CUDA. Only `gpu_tok.info()`, an explicit
//! CUDA device, and `device="auto"` with a batch big enough for the GPU probe.

use libloading::{Library, Symbol};
use std::ffi::c_int;

/// What the probe found.
#[derive(Clone, Debug, Default)]
pub struct CudaStatus {
    /// Driver loaded and at least one device visible.
    pub available: bool,
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: Option<i32>,
    pub device_count: i32,
    /// (name, compute capability) of each device.
    pub devices: Vec<(String, (i32, i32))>,
    /// NVRTC version (major, minor), if a libnvrtc could be loaded.
    pub nvrtc_version: Option<(i32, i32)>,
    /// Why CUDA is not available (empty when it is).
    pub reason: String,
}

const DRIVER_NAMES: [&str; 2] = ["libcuda.so.1", "libcuda.so"];
const NVRTC_NAMES: [&str; 4] = [
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so",
    "nvrtc64_130_0.dll",
];

fn open_first(names: &[&str]) -> Option<Library> {
    // SAFETY: loading a shared library runs its initialisers; the CUDA driver
    // and NVRTC are designed to be loaded this way.
    names
        .iter()
        .find_map(|name| unsafe { Library::new(name) }.ok())
}

fn probe_driver(status: &mut CudaStatus) {
    let Some(lib) = open_first(&DRIVER_NAMES) else {
        status.reason = "no CUDA driver (libcuda.so.1 not found)".into();
        return;
    };
    // SAFETY: the symbols have these C signatures in every CUDA driver since 2.0;
    // `lib` outlives the calls.
    unsafe {
        let init: Result<Symbol<unsafe extern "C" fn(u32) -> c_int>, _> = lib.get(b"cuInit\0");
        let version: Result<Symbol<unsafe extern "C" fn(*mut c_int) -> c_int>, _> =
            lib.get(b"cuDriverGetVersion\0");
        let count: Result<Symbol<unsafe extern "C" fn(*mut c_int) -> c_int>, _> =
            lib.get(b"cuDeviceGetCount\0");
        let (Ok(init), Ok(version), Ok(count)) = (init, version, count) else {
            status.reason = "libcuda found but it lacks cuInit/cuDeviceGetCount".into();
            return;
        };
        let mut v = 0;
        if version(&mut v) == 0 {
            status.driver_version = Some(v);
        }
        let rc = init(0);
        if rc != 0 {
            status.reason = format!("cuInit failed with CUDA error {rc} (no usable GPU or driver)");
            return;
        }
        let mut n = 0;
        if count(&mut n) != 0 || n == 0 {
            status.reason = "the CUDA driver sees no device".into();
            return;
        }
        status.device_count = n;
        note_initialised();
    }
    status.devices = (0..status.device_count)
        .map(|i| describe_device(&lib, i))
        .collect();
    // Keep the driver loaded for the life of the process, as CUDA expects.
    std::mem::forget(lib);
    status.available = true;
}

/// Name and compute capability of device `ordinal` ("?" and (0, 0) if unknown).
fn describe_device(lib: &Library, ordinal: c_int) -> (String, (i32, i32)) {
    type GetDevice = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    type GetName = unsafe extern "C" fn(*mut std::ffi::c_char, c_int, c_int) -> c_int;
    type GetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
    const MAJOR: c_int = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    const MINOR: c_int = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
    let mut out = ("?".to_string(), (0, 0));
    // SAFETY: the symbols have these C signatures in every driver since CUDA 2.0;
    // the name buffer is 256 bytes and NUL-terminated by the driver.
    unsafe {
        let (Ok(get), Ok(name), Ok(attr)) = (
            lib.get::<GetDevice>(b"cuDeviceGet\0"),
            lib.get::<GetName>(b"cuDeviceGetName\0"),
            lib.get::<GetAttribute>(b"cuDeviceGetAttribute\0"),
        ) else {
            return out;
        };
        let mut dev = 0;
        if get(&mut dev, ordinal) != 0 {
            return out;
        }
        let mut buf = [0 as std::ffi::c_char; 256];
        if name(buf.as_mut_ptr(), buf.len() as c_int, dev) == 0 {
            out.0 = std::ffi::CStr::from_ptr(buf.as_ptr())
                .to_string_lossy()
                .into_owned();
        }
        let (mut major, mut minor) = (0, 0);
        if attr(&mut major, MAJOR, dev) == 0 && attr(&mut minor, MINOR, dev) == 0 {
            out.1 = (major, minor);
        }
    }
    out
}

fn probe_nvrtc() -> Option<(i32, i32)> {
    let lib = open_first(&NVRTC_NAMES)?;
    // SAFETY: nvrtcVersion(int*, int*) has had this signature since NVRTC 7.0.
    let found = unsafe {
        let version: Symbol<unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int> =
            lib.get(b"nvrtcVersion\0").ok()?;
        let (mut major, mut minor) = (0, 0);
        (version(&mut major, &mut minor) == 0).then_some((major, minor))
    };
    std::mem::forget(lib);
    found
}

/// The process that initialised the CUDA driver (0: none yet).
static INITIALISED_BY: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Records that this process initialised the driver (cuInit succeeded).
pub fn note_initialised() {
    INITIALISED_BY.store(std::process::id(), std::sync::atomic::Ordering::SeqCst);
}

/// Why CUDA is refused in a child forked after its parent initialised it.
pub const FORKED_REASON: &str =
    "CUDA was initialised in the parent process before fork(), and a forked child \
     cannot use it (start workers with the 'spawn' method, or use device='cpu')";

/// True in a child forked after its parent initialised the driver: CUDA is
/// unusable there (the driver's state does not survive fork).
pub fn initialised_before_fork() -> bool {
    let pid = INITIALISED_BY.load(std::sync::atomic::Ordering::SeqCst);
    pid != 0 && pid != std::process::id()
}

/// Probes the driver and NVRTC. Never panics.
pub fn probe() -> CudaStatus {
    let mut status = CudaStatus::default();
    if initialised_before_fork() {
        status.reason = FORKED_REASON.into();
        return status;
    }
    let outcome = std::panic::catch_unwind(|| {
        let mut s = CudaStatus::default();
        probe_driver(&mut s);
        s.nvrtc_version = probe_nvrtc();
        s
    });
    match outcome {
        Ok(found) => found,
        Err(_) => {
            status.reason = "the CUDA probe failed unexpectedly".into();
            status
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn probe_never_panics_and_explains_itself() {
        let status = super::probe();
        assert_eq!(status.available, status.reason.is_empty());
    }
}
