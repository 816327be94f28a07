//! The GPU as a [`Device`], through the CUDA driver API (cudarc's thin
//! `result` layer, libcuda loaded at run time).
//!
//! - [`Gpu`]: one per device ordinal and process, made at first use: the
//!   primary context, the kernels' module (CUBIN from `jit`, cached on disk),
//!   the default memory pool set to keep freed memory (so buffers are pooled
//!   by the driver, stream-ordered), and a pool of streams.
//! - [`GpuStream`]: one call's ordered stream of work, taken from the pool and
//!   given back on drop, so concurrent calls from many threads overlap.
//! - Fork: CUDA cannot be used in a child forked after the driver was
//!   initialised; [`gpu`] then refuses with `CudaUnavailable` (the Python layer
//!   falls back to the CPU for `device="auto"`).

use super::device::{DevBuf, Device, Location, Mark, Memory};
use super::kernels::{DevPtr, Kernel};
use super::{jit, probe};
use crate::error::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex};

/// One CUDA device, ready to run the batch kernels.
pub struct Gpu {
    pub ordinal: usize,
    pub name: String,
    /// Compute capability (major, minor).
    pub sm: (i32, i32),
    pub total_memory: usize,
    /// Where the CUBIN came from, and whether it was already cached.
    pub cubin_path: std::path::PathBuf,
    pub cubin_from_cache: bool,
    ctx: sys::CUcontext,
    functions: Vec<sys::CUfunction>,
    streams: Mutex<Vec<StreamHandle>>,
    /// Pinned host buffers for uploads, reused call after call.
    staging: Mutex<Vec<Pinned>>,
}

/// Pinned (page-locked, write-combined) host memory for host-to-device
/// copies; `ready` is recorded after the last copy out of it.
struct Pinned {
    ptr: *mut u8,
    capacity: usize,
    ready: Option<Event>,
}

// SAFETY: a host allocation owned by this value; the event is a driver handle.
unsafe impl Send for Pinned {}

impl Pinned {
    /// Waits until the last copy out of this buffer is done.
    fn wait(&mut self) -> Result<()> {
        if let Some(event) = self.ready.take() {
            // SAFETY: a live event recorded on a live stream.
            unsafe { cu::event::synchronize(event.0) }.map_err(cuda_err("cuEventSynchronize"))?;
        }
        Ok(())
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = self.wait();
        // SAFETY: allocated by cuMemHostAlloc, no copy reads it any more (waited).
        unsafe {
            let _ = cu::free_host(self.ptr.cast());
        }
    }
}

/// Pinned buffers kept for reuse, and the smallest one made.
const STAGING_KEPT: usize = 4;
const STAGING_MIN_BYTES: usize = 16 << 20;

/// A stream handle (a pointer the driver owns; used from any thread).
#[derive(Clone, Copy)]
struct StreamHandle(sys::CUstream);

// SAFETY: CUDA contexts, functions and streams are handles the driver lets any
// thread use once the context is current; Gpu never mutates them after setup
// (the stream pool is behind a Mutex).
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}
// SAFETY: as above.
unsafe impl Send for StreamHandle {}

fn cuda_err(what: &str) -> impl Fn(cu::DriverError) -> Error + '_ {
    move |err| Error::Cuda(format!("{what}: {err}"))
}

static GPUS: Mutex<Vec<(usize, Arc<Gpu>)>> = Mutex::new(Vec::new());

/// The GPU `ordinal`, set up at first use. Never panics: a missing driver, a
/// missing symbol, a forked child or a bad ordinal are errors.
pub fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    if probe::initialised_before_fork() {
        return Err(Error::CudaUnavailable(
            "CUDA was initialised in the parent process before fork(); a forked child cannot use it \
             (start workers with the 'spawn' method, or use device='cpu')"
                .into(),
        ));
    }
    let mut gpus = GPUS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, gpu)) = gpus.iter().find(|(o, _)| *o == ordinal) {
        return Ok(gpu.clone());
    }
    // SAFETY: only checks whether libcuda can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::CudaUnavailable(
            "no CUDA driver (libcuda.so.1 not found)".into(),
        ));
    }
    let gpu = std::panic::catch_unwind(|| set_up(ordinal)).unwrap_or_else(|_| {
        Err(Error::CudaUnavailable(
            "the CUDA driver is too old or incomplete (a driver function is missing)".into(),
        ))
    })?;
    let gpu = Arc::new(gpu);
    gpus.push((ordinal, gpu.clone()));
    Ok(gpu)
}

fn set_up(ordinal: usize) -> Result<Gpu> {
    cu::init().map_err(|e| Error::CudaUnavailable(format!("cuInit failed: {e}")))?;
    probe::note_initialised();
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
    let (ctx, sm, total_memory) = unsafe {
        let ctx = cu::primary_ctx::retain(dev).map_err(cuda_err("cuDevicePrimaryCtxRetain"))?;
        cu::ctx::set_current(ctx).map_err(cuda_err("cuCtxSetCurrent"))?;
        let major = cu::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .map_err(cuda_err("cuDeviceGetAttribute"))?;
        let minor = cu::device::get_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            .map_err(cuda_err("cuDeviceGetAttribute"))?;
        let total = cu::device::total_mem(dev).map_err(cuda_err("cuDeviceTotalMem"))?;
        // Keep freed memory in the pool instead of returning it to the OS
        // after each synchronisation: buffers are reused call after call.
        let pool =
            cu::device::get_default_mem_pool(dev).map_err(cuda_err("cuDeviceGetDefaultMemPool"))?;
        let mut keep = u64::MAX;
        cu::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
        .map_err(cuda_err("cuMemPoolSetAttribute"))?;
        (ctx, (major, minor), total)
    };
    let name = cu::device::get_name(dev).unwrap_or_else(|_| "unknown CUDA device".into());
    let cubin = jit::kernels_cubin(&format!("sm_{}{}", sm.0, sm.1), &jit::cache_dir())?;
    // SAFETY: the image is a complete CUBIN (ELF checked by jit) alive for the call.
    let module = unsafe { cu::module::load_data(cubin.image.as_ptr().cast()) }
        .map_err(cuda_err("cuModuleLoadData"))?;
    let functions = Kernel::ALL
        .iter()
        .map(|k| {
            let name = CString::new(k.name()).expect("kernel names have no NUL");
            // SAFETY: `module` was just loaded and is never unloaded.
            unsafe { cu::module::get_function(module, name) }
                .map_err(cuda_err("cuModuleGetFunction"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Gpu {
        ordinal,
        name,
        sm,
        total_memory,
        cubin_path: cubin.path,
        cubin_from_cache: cubin.from_cache,
        ctx,
        functions,
        streams: Mutex::new(Vec::new()),
        staging: Mutex::new(Vec::new()),
    })
}

impl Gpu {
    fn make_current(&self) -> Result<()> {
        // SAFETY: the primary context is retained for the life of the process.
        unsafe { cu::ctx::set_current(self.ctx) }.map_err(cuda_err("cuCtxSetCurrent"))
    }

    /// A pinned buffer of at least `bytes`, free to write (its last copy done).
    fn take_staging(&self, bytes: usize) -> Result<Pinned> {
        let reused = {
            let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            let best = (0..pool.len())
                .filter(|&i| pool[i].capacity >= bytes)
                .min_by_key(|&i| pool[i].capacity);
            best.map(|i| pool.swap_remove(i))
        };
        if let Some(mut pinned) = reused {
            pinned.wait()?;
            return Ok(pinned);
        }
        let capacity = bytes.next_power_of_two().max(STAGING_MIN_BYTES);
        // SAFETY: plain allocation; write-combined suits memory the CPU only writes.
        let ptr = unsafe { cu::malloc_host(capacity, sys::CU_MEMHOSTALLOC_WRITECOMBINED) }
            .map_err(|err| {
                Error::Cuda(format!(
                    "pinning {capacity} bytes of host memory failed: {err}"
                ))
            })?;
        Ok(Pinned {
            ptr: ptr.cast(),
            capacity,
            ready: None,
        })
    }

    /// Keeps `pinned` for reuse (the largest few).
    fn give_back_staging(&self, pinned: Pinned) {
        let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        pool.push(pinned);
        if pool.len() > STAGING_KEPT {
            let smallest = (0..pool.len())
                .min_by_key(|&i| pool[i].capacity)
                .unwrap_or(0);
            let dropped = pool.swap_remove(smallest);
            drop(pool);
            drop(dropped);
        }
    }
}

/// One call's stream of work on a [`Gpu`].
pub struct GpuStream {
    gpu: Arc<Gpu>,
    stream: StreamHandle,
    memory: Arc<dyn Memory>,
    exported: Arc<dyn Memory>,
    chunk_bytes: usize,
}

/// Device memory of one stream: allocated and freed in that stream's order.
/// Exported memory (tensors) may also be in use by consumers' streams when
/// its last tensor dies: it is freed after this stream's work (a host wait)
/// and in the order of the legacy default stream, which waits for the work
/// of every blocking stream (torch's and CuPy's default stream among them).
struct StreamMemory {
    ctx: sys::CUcontext,
    stream: StreamHandle,
    ordinal: usize,
    exported: bool,
}

// SAFETY: handles only, usable from any thread once the context is current.
unsafe impl Send for StreamMemory {}
// SAFETY: as above.
unsafe impl Sync for StreamMemory {}

impl Memory for StreamMemory {
    fn free(&self, ptr: DevPtr, _bytes: usize) {
        // SAFETY: `ptr` came from cuMemAllocAsync on this context; freeing on the
        // allocating stream orders the free after the work queued there. Errors
        // (e.g. at interpreter exit, after the driver shut down) are ignored.
        unsafe {
            if cu::ctx::set_current(self.ctx).is_ok() {
                if self.exported {
                    let _ = cu::stream::synchronize(self.stream.0);
                    let _ = cu::free_async(ptr, cu::stream::null());
                } else {
                    let _ = cu::free_async(ptr, self.stream.0);
                }
            }
        }
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: `ptr` holds at least dst.len() bytes (the caller's contract);
        // the stream is synchronised before `dst` is used.
        unsafe {
            cu::ctx::set_current(self.ctx).map_err(cuda_err("cuCtxSetCurrent"))?;
            cu::memcpy_dtoh_async(dst, ptr, self.stream.0)
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
            cu::stream::synchronize(self.stream.0).map_err(cuda_err("cuStreamSynchronize"))
        }
    }

    fn location(&self) -> Location {
        Location::Cuda(self.ordinal)
    }
}

/// A CUDA event, destroyed on drop.
pub struct Event(sys::CUevent);

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the event was created by cuEventCreate and is destroyed once.
        unsafe {
            let _ = cu::event::destroy(self.0);
        }
    }
}

impl GpuStream {
    /// A stream from `gpu`'s pool (a new one when all are busy).
    pub fn acquire(gpu: &Arc<Gpu>) -> Result<GpuStream> {
        gpu.make_current()?;
        let pooled = gpu.streams.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let stream = match pooled {
            Some(s) => s,
            None => StreamHandle(
                cu::stream::create(cu::stream::StreamKind::NonBlocking)
                    .map_err(cuda_err("cuStreamCreate"))?,
            ),
        };
        // Scratch is ~70 bytes per text byte: chunks use a fraction of what is free.
        let (free, _) = cu::mem_get_info().map_err(cuda_err("cuMemGetInfo"))?;
        let chunk_bytes = (free / 96).clamp(1 << 20, 1 << 30);
        let memory = |exported| -> Arc<dyn Memory> {
            Arc::new(StreamMemory {
                ctx: gpu.ctx,
                stream,
                ordinal: gpu.ordinal,
                exported,
            })
        };
        Ok(GpuStream {
            gpu: gpu.clone(),
            stream,
            memory: memory(false),
            exported: memory(true),
            chunk_bytes,
        })
    }
}

impl Drop for GpuStream {
    fn drop(&mut self) {
        let _ = Device::synchronize(self);
        self.gpu
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(self.stream);
    }
}

/// Threads per block of every batch kernel.
const BLOCK: u32 = 256;

impl Device for GpuStream {
    fn location(&self) -> Location {
        Location::Cuda(self.gpu.ordinal)
    }

    fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        // SAFETY: a live stream of the current context.
        let ptr = unsafe { cu::malloc_async(self.stream.0, bytes.max(8)) }.map_err(|err| {
            Error::Cuda(format!(
                "allocating {bytes} bytes on cuda:{} failed: {err}",
                self.gpu.ordinal
            ))
        })?;
        Ok(DevBuf::new(ptr, bytes, self.memory.clone()))
    }

    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()> {
        assert!(
            offset + src.len() <= dst.bytes().max(8),
            "upload past the end of a buffer"
        );
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: dst has room (checked). From pageable memory the driver has
        // staged `src` when this returns, so the caller may reuse it.
        unsafe { cu::memcpy_htod_async(dst.ptr() + offset as u64, src, self.stream.0) }
            .map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        let buf = self.alloc(bytes)?;
        if bytes == 0 {
            return Ok(buf);
        }
        let mut pinned = self.gpu.take_staging(bytes)?;
        // SAFETY: `pinned` holds at least `bytes` bytes and no copy reads it (waited).
        let staged = unsafe { std::slice::from_raw_parts_mut(pinned.ptr, bytes) };
        fill(staged);
        // SAFETY: `buf` has room for `bytes`; `pinned` stays alive (pooled) and
        // is not written again before the event recorded after this copy.
        unsafe { cu::memcpy_htod_async(buf.ptr(), &staged[..], self.stream.0) }
            .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
        let event = Event(
            cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
                .map_err(cuda_err("cuEventCreate"))?,
        );
        // SAFETY: a live event and stream.
        unsafe { cu::event::record(event.0, self.stream.0) }.map_err(cuda_err("cuEventRecord"))?;
        pinned.ready = Some(event);
        self.gpu.give_back_staging(pinned);
        Ok(buf)
    }

    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        assert!(
            offset + dst.len() <= src.bytes().max(8),
            "download past the end of a buffer"
        );
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: src holds the bytes (checked); the stream is synchronised
        // before `dst` is read.
        unsafe {
            cu::memcpy_dtoh_async(dst, src.ptr() + offset as u64, self.stream.0)
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        }
        self.synchronize()
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        let function = self.gpu.functions[kernel.number() as usize];
        let mut params = [
            args.as_ptr() as *mut c_void,
            (&n as *const u32).cast_mut().cast(),
        ];
        // SAFETY: `args` is the kernel's argument struct (see kernels.rs) and `n`
        // its thread count; cuLaunchKernel copies both before returning. Every
        // address in `args` is device memory owned by the pipeline until the
        // stream has run past this kernel (frees are stream-ordered).
        unsafe {
            cu::launch_kernel(
                function,
                (n.div_ceil(BLOCK), 1, 1),
                (BLOCK, 1, 1),
                0,
                self.stream.0,
                &mut params,
            )
        }
        .map_err(|err| Error::Cuda(format!("launching {} failed: {err}", kernel.name())))
    }

    fn mark(&self) -> Result<Mark> {
        let event = Event(
            cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                .map_err(cuda_err("cuEventCreate"))?,
        );
        // SAFETY: a live event and stream.
        unsafe { cu::event::record(event.0, self.stream.0) }.map_err(cuda_err("cuEventRecord"))?;
        Ok(Mark::Cuda(event))
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        let (Mark::Cuda(a), Mark::Cuda(b)) = (from, to) else {
            return Ok(0.0);
        };
        // SAFETY: both events were recorded on this stream.
        unsafe {
            cu::event::synchronize(b.0).map_err(cuda_err("cuEventSynchronize"))?;
            cu::event::elapsed(a.0, b.0)
                .map(f64::from)
                .map_err(cuda_err("cuEventElapsedTime"))
        }
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn synchronize(&self) -> Result<()> {
        // SAFETY: the stream is live (pooled streams are never destroyed).
        unsafe { cu::stream::synchronize(self.stream.0) }.map_err(cuda_err("cuStreamSynchronize"))
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        buf.with_memory(self.exported.clone())
    }
}
