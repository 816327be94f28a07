//! The GPU through the CUDA driver API (cudarc's thin `result` layer, libcuda
//! loaded at run time): [`Cuda`], the [`Driver`] a [`Device`] runs its host
//! logic over (streams, staging, readback, the pool's size: `device.rs`, which
//! the emulator runs too), and the set-up of each device.
//!
//! - [`gpu`]: one [`Gpu`] per device ordinal and process, made at first use:
//!   the primary context, the kernels' module (CUBIN prebuilt, cached or
//!   compiled by `jit`), a private memory pool (stream-ordered; other
//!   libraries' pools are untouched; it never reuses memory across streams
//!   by a dependency of its own: `private_pool`).
//! - Every entry point pushes the device's context and pops it on the way
//!   out ([`ContextGuard`]): the caller's current context (torch's current
//!   device) is never changed.
//! - Fork: CUDA cannot be used in a child forked after the driver was
//!   initialised; [`gpu`] then refuses with `CudaUnavailable` (the Python layer
//!   falls back to the CPU for `device="auto"`), and memory inherited from
//!   the parent is neither read nor freed there.

use super::device::{Device, DeviceCall, Driver};
use super::stream::Location;
use super::{jit, prebuilt, probe};
use crate::error::{Error, Result};
use crate::kernels::{DevPtr, Kernel};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};

/// The oldest driver the kernels and cudarc's CUDA 13 bindings run on.
const MIN_DRIVER: i32 = 13000;

/// One CUDA device, ready to run the batch kernels.
pub type Gpu = Device<Cuda>;
/// One call's ordered stream of work on a [`Gpu`].
pub type GpuStream = DeviceCall<Cuda>;

/// A CUDA device's driver: its context, pool and kernels.
pub struct Cuda {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability (major, minor).
    pub sm: (i32, i32),
    pub total_memory: usize,
    /// Where the CUBIN came from, and whether it was already cached.
    pub cubin_path: std::path::PathBuf,
    pub cubin_from_cache: bool,
    ctx: sys::CUcontext,
    pool: sys::CUmemoryPool,
    functions: Vec<sys::CUfunction>,
}

/// A stream handle (a pointer the driver owns; used from any thread).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct StreamHandle(sys::CUstream);

// SAFETY: CUDA contexts, pools, functions and streams are handles the driver
// lets any thread use with the context current; Cuda never mutates them after
// set-up.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}
// SAFETY: as above.
unsafe impl Send for StreamHandle {}
// SAFETY: as above.
unsafe impl Sync for StreamHandle {}

fn cuda_err(what: &str) -> impl Fn(cu::DriverError) -> Error + '_ {
    move |err| Error::Cuda(format!("{what}: {err}"))
}

/// The device's context made current for the guard's life, then the
/// caller's restored.
pub struct ContextGuard;

impl ContextGuard {
    fn enter(ctx: sys::CUcontext) -> Result<ContextGuard> {
        // SAFETY: `ctx` is a retained primary context, valid for the process.
        unsafe { sys::cuCtxPushCurrent_v2(ctx) }
            .result()
            .map_err(cuda_err("cuCtxPushCurrent"))?;
        Ok(ContextGuard)
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context this guard pushed on this thread.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
    }
}

type GpuCell = Arc<OnceLock<std::result::Result<Arc<Gpu>, Error>>>;
static GPUS: Mutex<Vec<(usize, GpuCell)>> = Mutex::new(Vec::new());

/// The GPU `ordinal`, set up at first use (once per ordinal: a failure is
/// remembered too). Never panics: a missing or old driver, a missing symbol,
/// a forked child or a bad ordinal are errors.
pub fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    if probe::initialised_before_fork() {
        return Err(Error::CudaUnavailable(probe::FORKED_REASON.into()));
    }
    let cell = {
        let mut gpus = GPUS.lock().unwrap_or_else(|e| e.into_inner());
        match gpus.iter().find(|(o, _)| *o == ordinal) {
            Some((_, cell)) => cell.clone(),
            None => {
                let cell = GpuCell::default();
                gpus.push((ordinal, cell.clone()));
                cell
            }
        }
    };
    // Only callers of this ordinal wait while it is set up (NVRTC may compile).
    let outcome = cell.get_or_init(|| {
        // SAFETY: only checks whether libcuda can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::CudaUnavailable(
                "no CUDA driver (libcuda.so.1 not found)".into(),
            ));
        }
        std::panic::catch_unwind(|| set_up(ordinal).map(Arc::new)).unwrap_or_else(|_| {
            Err(Error::CudaUnavailable(
                "the CUDA driver is incomplete (a driver function is missing)".into(),
            ))
        })
    });
    match outcome {
        Ok(gpu) => Ok(gpu.clone()),
        Err(err @ Error::KernelCompile(_)) => Err(err.clone()),
        Err(err) => Err(Error::CudaUnavailable(err.to_string())),
    }
}

fn set_up(ordinal: usize) -> Result<Gpu> {
    cu::init().map_err(|e| Error::CudaUnavailable(format!("cuInit failed: {e}")))?;
    probe::note_initialised();
    let mut version = 0;
    // SAFETY: one valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .map_err(cuda_err("cuDriverGetVersion"))?;
    if version < MIN_DRIVER {
        return Err(Error::CudaUnavailable(format!(
            "the CUDA driver supports CUDA {}.{}; gpu_tok needs CUDA {}.{} or newer (driver R580+)",
            version / 1000,
            version % 1000 / 10,
            MIN_DRIVER / 1000,
            MIN_DRIVER % 1000 / 10
        )));
    }
    let count = cu::device::get_count().map_err(cuda_err("cuDeviceGetCount"))? as usize;
    if ordinal >= count {
        return Err(Error::CudaUnavailable(format!(
            "device cuda:{ordinal} was asked for, but this machine has {count} CUDA device(s)"
        )));
    }
    let dev = cu::device::get(ordinal as i32).map_err(cuda_err("cuDeviceGet"))?;
    use sys::CUdevice_attribute as A;
    // SAFETY: `dev` is a valid device handle; the primary context is retained
    // for the life of the process, which is how CUDA libraries share a device.
    let ctx =
        unsafe { cu::primary_ctx::retain(dev) }.map_err(cuda_err("cuDevicePrimaryCtxRetain"))?;
    let _current = ContextGuard::enter(ctx)?;
    // SAFETY: `dev` is valid and its context current.
    let (sm, total_memory, pool) = unsafe {
        let major = cu::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(cuda_err("cuDeviceGetAttribute"))?;
        let minor = cu::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(cuda_err("cuDeviceGetAttribute"))?;
        let total = cu::device::total_mem(dev).map_err(cuda_err("cuDeviceTotalMem"))?;
        ((major, minor), total, private_pool(ordinal)?)
    };
    let name = cu::device::get_name(dev).unwrap_or_else(|_| "unknown CUDA device".into());
    let arch = format!("sm_{}{}", sm.0, sm.1);
    let (module, cubin) = load_module(&arch)?;
    let functions = Kernel::ALL
        .iter()
        .map(|k| {
            let name = CString::new(k.name()).expect("kernel names have no NUL");
            // SAFETY: `module` was just loaded and is never unloaded.
            unsafe { cu::module::get_function(module, name) }
                .map_err(cuda_err("cuModuleGetFunction"))
        })
        .collect::<Result<Vec<_>>>()?;
    Device::new(Cuda {
        ordinal,
        name,
        sm,
        total_memory,
        cubin_from_cache: cubin.from_cache(),
        cubin_path: cubin.path,
        ctx,
        pool,
        functions,
    })
}

/// gpu_tok's own stream-ordered pool on device `ordinal` (`Device::new`
/// sets how much freed memory it keeps). It never reuses memory freed on one
/// stream for another by a dependency of its own making
/// (`REUSE_ALLOW_INTERNAL_DEPENDENCIES` off): chunk k's scratch freed on the
/// call's stream, reused for chunk k + 1's upload on the copy stream, would
/// make that copy wait for chunk k's kernels (its overlap lost), and a call
/// could end up waiting behind another library's stream. Reuse follows the
/// events the streams wait for, or memory whose free is already done (the
/// emulator's pool keeps the same rules).
///
/// # Safety
/// The device's context must be current.
unsafe fn private_pool(ordinal: usize) -> Result<sys::CUmemoryPool> {
    // SAFETY: a plain C struct; all-zero is its documented default.
    let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
    props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE;
    props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = ordinal as i32;
    // SAFETY: `props` is fully initialised; the pool lives for the process.
    unsafe {
        let pool = cu::mem_pool::create(&props).map_err(cuda_err("cuMemPoolCreate"))?;
        let mut internal: i32 = 0;
        cu::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            (&mut internal as *mut i32).cast(),
        )
        .map_err(cuda_err("cuMemPoolSetAttribute"))?;
        Ok(pool)
    }
}

/// Sets a 64-bit attribute of `pool`.
///
/// # Safety
/// `pool` must be a live pool and `attr` an attribute whose value is a u64.
unsafe fn set_pool_u64(
    pool: sys::CUmemoryPool,
    attr: sys::CUmemPool_attribute,
    mut value: u64,
) -> std::result::Result<(), cu::DriverError> {
    // SAFETY: the caller's contract; `value` outlives the call.
    unsafe { cu::mem_pool::set_attribute(pool, attr, (&mut value as *mut u64).cast()) }
}

/// An out-of-memory error from `err` where the driver says so.
fn alloc_err(what: String, err: cu::DriverError) -> Error {
    if err.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::CudaOutOfMemory(format!(
            "{what} failed: {err}; free memory on the device, tokenize smaller batches, \
             or lower GPU_TOK_CHUNK_BYTES"
        ))
    } else {
        Error::Cuda(format!("{what} failed: {err}"))
    }
}

/// The kernels' module for `arch`: prebuilt, cached or compiled, passing over
/// an image the driver refuses (`prebuilt::load_kernels`).
fn load_module(arch: &str) -> Result<(sys::CUmodule, jit::Cubin)> {
    prebuilt::load_kernels(arch, |image| {
        // SAFETY: the image is a complete ELF (checked by jit) alive for the call.
        unsafe { cu::module::load_data(image.as_ptr().cast()) }
            .map_err(cuda_err("cuModuleLoadData"))
    })
}

/// A CUDA event of a context, destroyed on drop (with that context current:
/// a mark may die on a thread that has none).
pub struct Event(sys::CUevent, sys::CUcontext);

// SAFETY: an event and a context are driver handles, usable from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Drop for Event {
    fn drop(&mut self) {
        if probe::initialised_before_fork() {
            return; // the parent's event: the driver is unusable in this child
        }
        let Ok(_current) = ContextGuard::enter(self.1) else {
            return; // e.g. at interpreter exit, after the driver shut down
        };
        // SAFETY: the event was created by cuEventCreate and is destroyed once.
        unsafe {
            let _ = cu::event::destroy(self.0);
        }
    }
}

/// Threads per block of every batch kernel (a block-cooperative kernel's lanes).
const BLOCK: u32 = crate::kernels::LANES;

impl Driver for Cuda {
    type Stream = StreamHandle;
    type Event = Event;
    type Current = ContextGuard;

    fn location(&self) -> Location {
        Location::Cuda(self.ordinal)
    }

    fn enter(&self) -> Result<ContextGuard> {
        ContextGuard::enter(self.ctx)
    }

    fn forked(&self) -> bool {
        probe::initialised_before_fork()
    }

    fn new_stream(&self) -> Result<StreamHandle> {
        cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map(StreamHandle)
            .map_err(cuda_err("cuStreamCreate"))
    }

    fn legacy_stream(&self) -> StreamHandle {
        StreamHandle(cu::stream::null())
    }

    fn consumer_stream(&self, handle: u64) -> StreamHandle {
        StreamHandle(handle as sys::CUstream)
    }

    fn check_consumer(&self, consumer: u64) -> Result<()> {
        let mut ctx = std::ptr::null_mut();
        // SAFETY: one out-pointer; the driver validates the handle as far as it can.
        let owner = unsafe { sys::cuStreamGetCtx(consumer as sys::CUstream, &mut ctx) }.result();
        match owner {
            Ok(()) if ctx == self.ctx => Ok(()),
            Ok(()) => Err(Error::InvalidArgument(format!(
                "stream {consumer:#x} belongs to another device or CUDA context than this \
                 tensor (cuda:{}); pass a stream of the tensor's device",
                self.ordinal
            ))),
            Err(err) => Err(Error::InvalidArgument(format!(
                "stream {consumer:#x} is not a usable CUDA stream: {err}"
            ))),
        }
    }

    fn synchronize(&self, stream: StreamHandle) -> Result<()> {
        // SAFETY: a live stream of the current context (pooled streams are
        // never destroyed; a consumer's must outlive its tensors).
        unsafe { cu::stream::synchronize(stream.0) }.map_err(cuda_err("cuStreamSynchronize"))
    }

    fn synchronize_device(&self) {
        let _ = cu::ctx::synchronize();
    }

    fn new_event(&self, timing: bool) -> Result<Event> {
        let flags = match timing {
            true => sys::CUevent_flags::CU_EVENT_DEFAULT,
            false => sys::CUevent_flags::CU_EVENT_DISABLE_TIMING,
        };
        Ok(Event(
            cu::event::create(flags).map_err(cuda_err("cuEventCreate"))?,
            self.ctx,
        ))
    }

    fn record(&self, event: &Event, stream: StreamHandle) -> Result<()> {
        // SAFETY: a live event and stream of the current context.
        unsafe { cu::event::record(event.0, stream.0) }.map_err(cuda_err("cuEventRecord"))
    }

    fn wait_event(&self, stream: StreamHandle, event: &Event) -> Result<()> {
        // SAFETY: as above.
        unsafe {
            cu::stream::wait_event(
                stream.0,
                event.0,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .map_err(cuda_err("cuStreamWaitEvent"))
    }

    fn is_done(&self, event: &Event) -> bool {
        // SAFETY: a live event.
        unsafe { cu::event::query(event.0) }.is_ok()
    }

    fn wait_host(&self, event: &Event) -> Result<()> {
        // SAFETY: a live event.
        unsafe { cu::event::synchronize(event.0) }.map_err(cuda_err("cuEventSynchronize"))
    }

    fn elapsed_ms(&self, from: &Event, to: &Event) -> Result<f64> {
        // SAFETY: both events are live and were recorded.
        unsafe {
            cu::event::synchronize(to.0).map_err(cuda_err("cuEventSynchronize"))?;
            cu::event::elapsed(from.0, to.0)
                .map(f64::from)
                .map_err(cuda_err("cuEventElapsedTime"))
        }
    }

    fn alloc(&self, bytes: usize, stream: StreamHandle) -> Result<DevPtr> {
        let mut ptr = 0;
        // SAFETY: a live pool and stream of the current context.
        unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes, self.pool, stream.0) }
            .result()
            .map_err(|err| {
                alloc_err(
                    format!("allocating {bytes} bytes on cuda:{}", self.ordinal),
                    err,
                )
            })?;
        Ok(ptr)
    }

    fn free(&self, ptr: DevPtr, stream: StreamHandle) {
        // SAFETY: `ptr` came from this context's pool; the free is ordered on
        // `stream`. Errors are ignored (shutdown).
        let _ = unsafe { cu::free_async(ptr, stream.0) };
    }

    fn free_bytes(&self) -> Result<usize> {
        Ok(cu::mem_get_info().map_err(cuda_err("cuMemGetInfo"))?.0)
    }

    fn take_peak_use(&self) -> Option<u64> {
        let mut peak = 0u64;
        let high = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
        // SAFETY: a live pool; the attribute is a u64.
        unsafe {
            cu::mem_pool::get_attribute(self.pool, high, (&mut peak as *mut u64).cast()).ok()?;
            let _ = set_pool_u64(self.pool, high, 0); // the next peak starts from here
        }
        Some(peak)
    }

    fn keep_freed(&self, bytes: u64) {
        let threshold = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        // SAFETY: a live pool; the attribute is a u64.
        let _ = unsafe { set_pool_u64(self.pool, threshold, bytes) };
    }

    fn trim(&self) {
        // SAFETY: a live pool; trimming releases only unused memory.
        let _ = unsafe { cu::mem_pool::trim_to(self.pool, 0) };
    }

    fn pin(&self, bytes: usize, write_combined: bool) -> Result<*mut u8> {
        let flags = match write_combined {
            true => sys::CU_MEMHOSTALLOC_WRITECOMBINED,
            false => 0,
        };
        // SAFETY: plain allocation.
        let ptr = unsafe { cu::malloc_host(bytes, flags) }
            .map_err(|err| alloc_err(format!("pinning {bytes} bytes of host memory"), err))?;
        // SAFETY: `bytes` were just allocated at `ptr`; zeroed once so that a
        // slice of them is never uninitialised memory.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
        Ok(ptr.cast())
    }

    unsafe fn unpin(&self, ptr: *mut u8, _bytes: usize) {
        // SAFETY: the caller's contract (allocated by cuMemHostAlloc, unused).
        let _ = unsafe { cu::free_host(ptr.cast()) };
    }

    fn upload(&self, dst: DevPtr, src: &[u8], stream: StreamHandle) -> Result<()> {
        // SAFETY: dst has room (the caller's). From pageable memory the driver
        // has staged `src` when this returns, so the caller may reuse it.
        unsafe { cu::memcpy_htod_async(dst, src, stream.0) }.map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    unsafe fn upload_pinned(
        &self,
        dst: DevPtr,
        src: *const u8,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            let staged = std::slice::from_raw_parts(src, bytes);
            cu::memcpy_htod_async(dst, staged, stream.0).map_err(cuda_err("cuMemcpyHtoDAsync"))
        }
    }

    unsafe fn download_pinned(
        &self,
        dst: *mut u8,
        src: DevPtr,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
            let staged = std::slice::from_raw_parts_mut(dst, bytes);
            cu::memcpy_dtoh_async(staged, src, stream.0).map_err(cuda_err("cuMemcpyDtoHAsync"))
        }
    }

    fn download(&self, dst: &mut [u8], src: DevPtr, stream: StreamHandle) -> Result<()> {
        // SAFETY: `src` holds dst.len() bytes (the caller's); the stream is
        // synchronised before `dst` is read.
        unsafe { cu::memcpy_dtoh_async(dst, src, stream.0) }
            .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        self.synchronize(stream)
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32, stream: StreamHandle) -> Result<()> {
        let function = self.functions[kernel.number() as usize];
        let mut params = [
            args.as_ptr() as *mut c_void,
            (&n as *const u32).cast_mut().cast(),
        ];
        // SAFETY: `args` is the kernel's argument struct (rust/kernels/abi.rs) and `n`
        // its thread count; cuLaunchKernel copies both before returning. Every
        // address in `args` is device memory owned by the pipeline until the
        // stream has run past this kernel (frees are stream-ordered).
        unsafe {
            cu::launch_kernel(
                function,
                (n.div_ceil(BLOCK), 1, 1),
                (BLOCK, 1, 1),
                0,
                stream.0,
                &mut params,
            )
        }
        .map_err(|err| Error::Cuda(format!("launching {} failed: {err}", kernel.name())))
    }
}
