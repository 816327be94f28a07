//! The GPU as a [`DeviceStream`], through the CUDA driver API (cudarc's thin
//! `result` layer, libcuda loaded at run time).
//!
//! - [`Gpu`]: one per device ordinal and process, made at first use: the
//!   primary context, the kernels' module (CUBIN from `jit`, cached on disk),
//!   a private memory pool (stream-ordered; other libraries' pools are
//!   untouched), a pool of streams, pinned staging buffers for uploads
//!   (write-combined) and for large downloads (read back two at a time).
//! - Pool size: between calls the pool keeps what the last busy period used
//!   at its peak (its release threshold follows that working set), so calls
//!   alike reuse memory instead of mapping it again; once no call has run for
//!   `IDLE_TRIM`, a background thread gives all unused memory back to the
//!   driver, for the other libraries in the process.
//! - Consumer streams: a tensor exported through DLPack to a consumer's stream
//!   is freed only after the work queued on that stream by then (an event
//!   recorded on it, waited for by the freeing stream), so a side stream that
//!   still reads the tensor never sees its memory reused.
//! - [`GpuStream`]: one call's ordered stream of work, taken from the pool and
//!   given back on drop, so concurrent calls from many threads overlap; with
//!   a second stream for `upload_beside`, so a chunk's input is copied while
//!   the previous chunk's kernels run (the first stream waits for the copy).
//! - Every entry point pushes the device's context and pops it on the way
//!   out ([`ContextGuard`]): the caller's current context (torch's current
//!   device) is never changed.
//! - Fork: CUDA cannot be used in a child forked after the driver was
//!   initialised; [`gpu`] then refuses with `CudaUnavailable` (the Python layer
//!   falls back to the CPU for `device="auto"`), and memory inherited from
//!   the parent is neither read nor freed there.

use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use super::{jit, prebuilt, probe};
use crate::error::{Error, Result};
use crate::kernels::{DevPtr, Kernel};
use cudarc::driver::result as cu;
use cudarc::driver::sys;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The oldest driver the kernels and cudarc's CUDA 13 bindings run on.
const MIN_DRIVER: i32 = 13000;
/// Freed pool memory kept before the first call has measured its working set.
const POOL_KEEP_FIRST: u64 = 256 << 20;
/// After this long with no call running, unused pool memory is released.
const IDLE_TRIM: Duration = Duration::from_secs(5);
/// Pinned staging kept for reuse: at most this many buffers and bytes.
const STAGING_KEPT: usize = 4;
const STAGING_KEPT_BYTES: usize = 1 << 30;
const STAGING_MIN_BYTES: usize = 16 << 20;
/// Staging buffers one call may have in flight before it waits for the oldest.
const STAGING_IN_FLIGHT: usize = 2;
/// The largest chunk a call sizes itself (free memory permitting): a call of
/// a GB or more runs as several chunks, whose copies and host layout overlap
/// the kernels, and two chunks' staging stays within `STAGING_KEPT_BYTES`,
/// so it is pinned once, not per chunk.
const MAX_CHUNK_BYTES: usize = 256 << 20;
/// Downloads over this size go through two pinned buffers in turn, each
/// `READBACK_CHUNK` bytes (`download_pinned`); `READBACK_KEPT` are kept.
const READBACK_DIRECT: usize = 1 << 20;
const READBACK_CHUNK: usize = 8 << 20;
const READBACK_KEPT: usize = 4;

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
    pool: sys::CUmemoryPool,
    functions: Vec<sys::CUfunction>,
    streams: Mutex<Vec<StreamHandle>>,
    /// Where exported buffers are freed: a stream of gpu_tok's own, so that
    /// ordering a free after a consumer's stream never makes another
    /// non-blocking stream (a torch side stream) wait for it.
    releases: StreamHandle,
    /// Calls running now and the pool's use; `idle` wakes the trim thread.
    activity: Mutex<Activity>,
    idle: Condvar,
    /// The trim thread, started when the device first goes idle.
    trimmer: OnceLock<()>,
    /// Pinned host buffers for uploads, reused call after call.
    staging: Mutex<Vec<Pinned>>,
    /// Pinned host buffers for large downloads (readable: not write-combined).
    readback: Mutex<Vec<Pinned>>,
}

/// What the pool's size follows (see the module comment).
struct Activity {
    /// Calls running now: each sizes its chunks to a share of free memory.
    running: usize,
    /// The highest use of the pool in the current busy period.
    busy_peak: u64,
    /// When the device last went idle (or a tensor was freed while idle);
    /// None while busy and once trimmed.
    idle_since: Option<Instant>,
}

/// A stream handle (a pointer the driver owns; used from any thread).
#[derive(Clone, Copy)]
struct StreamHandle(sys::CUstream);

// SAFETY: CUDA contexts, pools, functions and streams are handles the driver
// lets any thread use with the context current; Gpu never mutates them after
// setup (the stream and staging pools are behind Mutexes).
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}
// SAFETY: as above.
unsafe impl Send for StreamHandle {}

fn cuda_err(what: &str) -> impl Fn(cu::DriverError) -> Error + '_ {
    move |err| Error::Cuda(format!("{what}: {err}"))
}

/// The device's context made current for the guard's life, then the
/// caller's restored.
struct ContextGuard;

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
    let releases = cu::stream::create(cu::stream::StreamKind::NonBlocking)
        .map_err(cuda_err("cuStreamCreate"))?;
    Ok(Gpu {
        ordinal,
        name,
        sm,
        total_memory,
        cubin_from_cache: cubin.from_cache(),
        cubin_path: cubin.path,
        ctx,
        pool,
        functions,
        streams: Mutex::new(Vec::new()),
        releases: StreamHandle(releases),
        activity: Mutex::new(Activity {
            running: 0,
            busy_peak: 0,
            idle_since: None,
        }),
        idle: Condvar::new(),
        trimmer: OnceLock::new(),
        staging: Mutex::new(Vec::new()),
        readback: Mutex::new(Vec::new()),
    })
}

/// gpu_tok's own stream-ordered pool on device `ordinal`, keeping at most
/// `POOL_KEEP_FIRST` of freed memory across synchronisations until the first
/// call has measured its working set.
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
        set_pool_u64(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            POOL_KEEP_FIRST,
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

impl Gpu {
    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a call in; returns how many run now (this one included).
    fn call_started(&self) -> usize {
        let mut activity = self.activity();
        activity.running += 1;
        activity.idle_since = None;
        activity.running
    }

    /// Counts a call out (its stream synchronised, the context current): the
    /// pool's release threshold becomes the peak use of this busy period, so
    /// the next calls like it find their memory kept; when no call is left,
    /// the trim thread starts counting.
    fn call_ended(self: &Arc<Self>) {
        let mut activity = self.activity();
        activity.running = activity.running.saturating_sub(1);
        let mut peak = 0u64;
        // SAFETY: a live pool; the attributes are u64 values.
        unsafe {
            let high = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH;
            if cu::mem_pool::get_attribute(self.pool, high, (&mut peak as *mut u64).cast()).is_ok()
            {
                let _ = set_pool_u64(self.pool, high, 0); // the next peak starts from here
            }
            activity.busy_peak = activity.busy_peak.max(peak);
            let threshold = sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
            let _ = set_pool_u64(self.pool, threshold, activity.busy_peak);
        }
        if activity.running == 0 {
            activity.busy_peak = 0;
            drop(activity);
            self.went_idle();
        }
    }

    /// Restarts the idle clock (no call is running) and wakes the trim
    /// thread, started here the first time.
    fn went_idle(self: &Arc<Self>) {
        {
            let mut activity = self.activity();
            if activity.running > 0 {
                return;
            }
            activity.idle_since = Some(Instant::now());
        }
        self.trimmer.get_or_init(|| {
            let gpu = self.clone();
            // Without the thread (spawn failed) memory is only kept, never trimmed.
            let _ = std::thread::Builder::new()
                .name("gpu_tok-pool-trim".into())
                .spawn(move || gpu.trim_when_idle());
        });
        self.idle.notify_all();
    }

    /// The trim thread: once the device has been idle for `IDLE_TRIM`, gives
    /// the pool's unused memory back (tensors still alive keep theirs).
    fn trim_when_idle(&self) {
        let mut activity = self.activity();
        loop {
            match activity.idle_since {
                None => {
                    activity = self.idle.wait(activity).unwrap_or_else(|e| e.into_inner());
                }
                Some(since) if since.elapsed() < IDLE_TRIM => {
                    let left = IDLE_TRIM - since.elapsed().min(IDLE_TRIM);
                    activity = self
                        .idle
                        .wait_timeout(activity, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                Some(_) => {
                    activity.idle_since = None;
                    drop(activity);
                    if !probe::initialised_before_fork() {
                        if let Ok(_current) = ContextGuard::enter(self.ctx) {
                            // SAFETY: a live pool; trimming releases only unused memory.
                            let _ = unsafe { cu::mem_pool::trim_to(self.pool, 0) };
                        }
                    }
                    activity = self.activity();
                }
            }
        }
    }

    /// A pinned buffer of at least `bytes`, free to write (its last copy done).
    /// Double buffering: a buffer whose copy is still queued (behind the
    /// previous chunk's kernels, on one stream) is waited for only when
    /// `STAGING_IN_FLIGHT` such buffers fit; until then another is pinned, so
    /// the host stages chunk k + 1 while the device runs chunk k.
    fn take_staging(&self, bytes: usize) -> Result<Pinned> {
        let reused = {
            let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            let capacity = |&i: &usize| pool[i].capacity;
            let fitting = (0..pool.len()).filter(|&i| pool[i].capacity >= bytes);
            let idle = fitting
                .clone()
                .filter(|&i| pool[i].copied())
                .min_by_key(capacity);
            let wait_for_one = fitting.clone().count() >= STAGING_IN_FLIGHT;
            let best = idle.or_else(|| fitting.min_by_key(capacity).filter(|_| wait_for_one));
            best.map(|i| pool.swap_remove(i))
        };
        if let Some(mut pinned) = reused {
            pinned.wait()?;
            return Ok(pinned);
        }
        // Write-combined suits memory the CPU only writes.
        Pinned::new(staging_capacity(bytes), sys::CU_MEMHOSTALLOC_WRITECOMBINED)
    }

    /// A stream from the pool, or a new one.
    fn take_stream(&self) -> Result<StreamHandle> {
        let pooled = self.streams.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(stream) => Ok(stream),
            None => Ok(StreamHandle(
                cu::stream::create(cu::stream::StreamKind::NonBlocking)
                    .map_err(cuda_err("cuStreamCreate"))?,
            )),
        }
    }

    fn give_back_streams<const N: usize>(&self, streams: [StreamHandle; N]) {
        let mut pool = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        pool.extend(streams);
    }

    /// Two pinned buffers of `READBACK_CHUNK` bytes for one download.
    fn take_readback(&self) -> Result<[Pinned; 2]> {
        let mut pool = self.readback.lock().unwrap_or_else(|e| e.into_inner());
        let mut take = || match pool.pop() {
            Some(pinned) => Ok(pinned),
            None => Pinned::new(READBACK_CHUNK, 0),
        };
        Ok([take()?, take()?])
    }

    /// Keeps a download's buffers for reuse, up to `READBACK_KEPT`.
    fn give_back_readback(&self, buffers: [Pinned; 2]) {
        let mut pool = self.readback.lock().unwrap_or_else(|e| e.into_inner());
        pool.extend(buffers);
        let keep = READBACK_KEPT.min(pool.len());
        let released: Vec<Pinned> = pool.drain(keep..).collect();
        drop(pool);
        drop(released);
    }

    /// Keeps `pinned` for reuse while the kept buffers stay within bounds.
    fn give_back_staging(&self, pinned: Pinned) {
        let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
        pool.push(pinned);
        pool.sort_by_key(|p| std::cmp::Reverse(p.capacity));
        let capacities: Vec<usize> = pool.iter().map(|p| p.capacity).collect();
        let (kept, released): (Vec<_>, Vec<_>) = pool
            .drain(..)
            .zip(kept_staging(&capacities))
            .partition(|&(_, keep)| keep);
        *pool = kept.into_iter().map(|(pinned, _)| pinned).collect();
        drop(pool);
        drop(released); // each waits for its copy, then is freed
    }
}

/// The pinned capacity staged for `bytes`: some room over them, since the
/// next chunk's inputs are rarely the same size.
fn staging_capacity(bytes: usize) -> usize {
    (bytes + bytes / 8).next_multiple_of(STAGING_MIN_BYTES)
}

/// Which staging buffers (capacities, largest first) are kept for reuse: up
/// to `STAGING_KEPT` within `STAGING_KEPT_BYTES`. One too large to fit is
/// released without keeping the smaller ones from being kept.
fn kept_staging(capacities: &[usize]) -> Vec<bool> {
    let (mut kept, mut bytes) = (0, 0);
    capacities
        .iter()
        .map(|&capacity| {
            let keep = kept < STAGING_KEPT && bytes + capacity <= STAGING_KEPT_BYTES;
            if keep {
                kept += 1;
                bytes += capacity;
            }
            keep
        })
        .collect()
}

/// Pinned (page-locked) host memory: write-combined for host-to-device
/// copies, plain for reading back; `ready` is recorded after the last copy
/// out of it or into it.
struct Pinned {
    ptr: *mut u8,
    capacity: usize,
    ready: Option<Event>,
}

// SAFETY: a host allocation owned by this value; the event is a driver handle.
unsafe impl Send for Pinned {}

impl Pinned {
    /// `capacity` bytes pinned with `cuMemHostAlloc` `flags`, zeroed once so
    /// that a slice of them is never uninitialised memory.
    fn new(capacity: usize, flags: u32) -> Result<Pinned> {
        // SAFETY: plain allocation.
        let ptr = unsafe { cu::malloc_host(capacity, flags) }
            .map_err(|err| alloc_err(format!("pinning {capacity} bytes of host memory"), err))?;
        // SAFETY: `capacity` bytes were just allocated at `ptr`.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, capacity) };
        Ok(Pinned {
            ptr: ptr.cast(),
            capacity,
            ready: None,
        })
    }

    /// True when no queued copy uses this buffer any more.
    fn copied(&self) -> bool {
        // SAFETY: a live event recorded on a live stream.
        self.ready
            .as_ref()
            .is_none_or(|event| unsafe { cu::event::query(event.0) }.is_ok())
    }

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
        if probe::initialised_before_fork() {
            return; // the parent's pinned memory: not ours to free
        }
        let _ = self.wait();
        // SAFETY: allocated by cuMemHostAlloc; no copy reads it any more (waited).
        unsafe {
            let _ = cu::free_host(self.ptr.cast());
        }
    }
}

/// A CUDA event of a context, destroyed on drop (with that context current:
/// a mark may die on a thread that has none).
struct Event(sys::CUevent, sys::CUcontext);

// SAFETY: an event and a context are driver handles, usable from any thread.
unsafe impl Send for Event {}

impl Event {
    /// A new event in `ctx`, which is current.
    fn new(flags: sys::CUevent_flags, ctx: sys::CUcontext) -> Result<Event> {
        Ok(Event(
            cu::event::create(flags).map_err(cuda_err("cuEventCreate"))?,
            ctx,
        ))
    }
}

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

/// One call's stream of work on a [`Gpu`]: a [`DeviceStream`].
pub struct GpuStream {
    gpu: Arc<Gpu>,
    stream: StreamHandle,
    /// Where `upload_beside` copies run, beside `stream`'s kernels.
    copies: StreamHandle,
    memory: Arc<dyn Memory>,
    exported: Arc<dyn Memory>,
    chunk_bytes: usize,
}

/// Device memory allocated on one stream. Internal buffers are freed in that
/// stream's order. Exported buffers (tensors) were complete when the call
/// returned (it synchronised, so a consumer's stream never has to wait for
/// gpu_tok's work), and are freed on the device's release stream once the
/// work queued by then is done on the legacy default stream (which follows
/// the blocking streams: CuPy's and torch's default streams) and on each
/// consumer stream the tensor was exported to (`__dlpack__(stream=...)`,
/// e.g. a torch side stream, which is non-blocking). Only the release
/// stream waits on the consumers; the event on the legacy stream is, like
/// any work there, a meeting point of the blocking streams.
struct StreamMemory {
    gpu: Arc<Gpu>,
    stream: StreamHandle,
    exported: bool,
}

// SAFETY: handles only, usable from any thread with the context current.
unsafe impl Send for StreamMemory {}
// SAFETY: as above.
unsafe impl Sync for StreamMemory {}

impl Memory for StreamMemory {
    fn free(&self, ptr: DevPtr, _bytes: usize, consumers: &[u64]) {
        if probe::initialised_before_fork() {
            return; // the parent's memory: the driver is unusable in this child
        }
        let Ok(_current) = ContextGuard::enter(self.gpu.ctx) else {
            return; // e.g. at interpreter exit, after the driver shut down
        };
        let (stream, legacy) = match self.exported {
            true => (self.gpu.releases.0, Some(cu::stream::null() as u64)),
            false => (self.stream.0, None),
        };
        for consumer in legacy.into_iter().chain(consumers.iter().copied()) {
            // SAFETY: `consumer` is the legacy stream, or was checked to be a
            // stream of this context when the tensor was exported, and must
            // still exist (a consumer's stream must outlive the tensors
            // exported to it); an error the driver reports is handled below.
            if unsafe { wait_for(stream, consumer as sys::CUstream) }.is_err() {
                // The order is lost: wait for the whole device instead, so the
                // memory is never reused while the consumer may still read it.
                let _ = cu::ctx::synchronize();
                break;
            }
        }
        // SAFETY: `ptr` came from this context's pool; the free is ordered on
        // `stream` as described on StreamMemory. Errors are ignored (shutdown).
        let _ = unsafe { cu::free_async(ptr, stream) };
        if self.exported {
            self.gpu.went_idle(); // memory back in the pool: trim it if idle
        }
    }

    fn check_consumer(&self, consumer: u64) -> Result<()> {
        if probe::initialised_before_fork() {
            return Err(Error::CudaUnavailable(probe::FORKED_REASON.into()));
        }
        let mut ctx = std::ptr::null_mut();
        // SAFETY: one out-pointer; the driver validates the handle as far as it can.
        let owner = unsafe { sys::cuStreamGetCtx(consumer as sys::CUstream, &mut ctx) }.result();
        match owner {
            Ok(()) if ctx == self.gpu.ctx => Ok(()),
            Ok(()) => Err(Error::InvalidArgument(format!(
                "stream {consumer:#x} belongs to another device or CUDA context than this \
                 tensor (cuda:{}); pass a stream of the tensor's device",
                self.gpu.ordinal
            ))),
            Err(err) => Err(Error::InvalidArgument(format!(
                "stream {consumer:#x} is not a usable CUDA stream: {err}"
            ))),
        }
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        if probe::initialised_before_fork() {
            return Err(Error::CudaUnavailable(probe::FORKED_REASON.into()));
        }
        let _current = ContextGuard::enter(self.gpu.ctx)?;
        // Copies on the legacy stream order after the work of blocking
        // streams, e.g. a consumer's in-place writes. Large results (what
        // device="auto" brings back) go through pinned memory.
        if dst.len() > READBACK_DIRECT {
            return download_pinned(&self.gpu, cu::stream::null(), ptr, dst);
        }
        // SAFETY: `ptr` holds at least dst.len() bytes (the caller's contract).
        unsafe { cu::memcpy_dtoh_sync(dst, ptr) }.map_err(cuda_err("cuMemcpyDtoH"))
    }

    fn location(&self) -> Location {
        Location::Cuda(self.gpu.ordinal)
    }
}

/// A large download through two pinned buffers in turn, ordered on
/// `stream`: the device copies chunk k + 1 into one while the host copies
/// chunk k out of the other. (A pageable destination makes the driver stage
/// every byte itself, one synchronous step after another.) The context is
/// current.
fn download_pinned(gpu: &Gpu, stream: sys::CUstream, src: u64, dst: &mut [u8]) -> Result<()> {
    let Ok(mut buffers) = gpu.take_readback() else {
        // No pinned memory to be had: the driver stages the copy itself.
        // SAFETY: `src` holds dst.len() bytes (the caller's); the stream is
        // synchronised before `dst` is read.
        unsafe { cu::memcpy_dtoh_async(dst, src, stream) }
            .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        // SAFETY: a live stream of the current context.
        return unsafe { cu::stream::synchronize(stream) }.map_err(cuda_err("cuStreamSynchronize"));
    };
    let mut chunks: Vec<&mut [u8]> = dst.chunks_mut(READBACK_CHUNK).collect();
    let n = chunks.len();
    let mut copy_all = || -> Result<()> {
        for k in 0..n + 2 {
            let buffer = &mut buffers[k % 2];
            if k >= 2 {
                // This buffer holds chunk k - 2: wait for it, then copy it out.
                buffer.wait()?;
                let out = &mut chunks[k - 2];
                // SAFETY: the buffer holds READBACK_CHUNK >= out.len() bytes,
                // all written (its copy completed).
                out.copy_from_slice(unsafe { std::slice::from_raw_parts(buffer.ptr, out.len()) });
            }
            if k < n {
                let len = chunks[k].len();
                // SAFETY: `buffer` has room for `len` bytes and no copy uses it
                // (waited above, or never used); `src` holds the caller's bytes.
                // The event recorded after the copy is waited for before the
                // buffer is read or reused.
                unsafe {
                    let staged = std::slice::from_raw_parts_mut(buffer.ptr, len);
                    let from = src + (k * READBACK_CHUNK) as u64;
                    cu::memcpy_dtoh_async(staged, from, stream)
                        .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
                    let ready = Event::new(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING, gpu.ctx)?;
                    cu::event::record(ready.0, stream).map_err(cuda_err("cuEventRecord"))?;
                    buffer.ready = Some(ready);
                }
            }
        }
        Ok(())
    };
    let copied = copy_all();
    if copied.is_err() {
        // A copy may still be queued into a buffer that has no event.
        // SAFETY: a live stream of the current context.
        unsafe { cu::stream::synchronize(stream) }.map_err(cuda_err("cuStreamSynchronize"))?;
    }
    gpu.give_back_readback(buffers);
    copied
}

/// Makes `stream` wait for the work queued on `consumer` so far.
///
/// # Safety
/// Both must be streams of the current context (a destroyed `consumer` gives
/// an error where the driver detects it).
unsafe fn wait_for(
    stream: sys::CUstream,
    consumer: sys::CUstream,
) -> std::result::Result<(), cu::DriverError> {
    let event = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)?;
    // SAFETY: a fresh event; the streams are the caller's.
    let waited = unsafe {
        cu::event::record(event, consumer).and_then(|()| {
            cu::stream::wait_event(
                stream,
                event,
                sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        })
    };
    // SAFETY: created above and destroyed once; the driver keeps what the
    // queued wait needs until it has run.
    let _ = unsafe { cu::event::destroy(event) };
    waited
}

impl GpuStream {
    /// A stream from `gpu`'s pool (a new one when all are busy), with chunks
    /// of `chunk_bytes` of text when given, else sized to the free memory.
    /// Every fallible step comes before the stream is taken and the call
    /// counted, so a failure leaks neither (Drop gives both back).
    pub fn acquire(gpu: &Arc<Gpu>, chunk_bytes: Option<usize>) -> Result<GpuStream> {
        let _current = ContextGuard::enter(gpu.ctx)?;
        let (free, _) = cu::mem_get_info().map_err(cuda_err("cuMemGetInfo"))?;
        let stream = gpu.take_stream()?;
        let copies = match gpu.take_stream() {
            Ok(copies) => copies,
            Err(err) => {
                gpu.give_back_streams([stream]);
                return Err(err);
            }
        };
        // A chunk's device memory peaks at 28-57 bytes per text byte by family
        // (benches/host_cost.py, B/byte), plus what earlier chunks keep until
        // packing: each running call sizes its chunks to a share of what is free.
        let running = gpu.call_started();
        let chunk_bytes = chunk_bytes
            .unwrap_or_else(|| (free / (96 * running)).clamp(1 << 20, MAX_CHUNK_BYTES))
            .max(1);
        let memory = |exported| -> Arc<dyn Memory> {
            Arc::new(StreamMemory {
                gpu: gpu.clone(),
                stream,
                exported,
            })
        };
        Ok(GpuStream {
            gpu: gpu.clone(),
            stream,
            copies,
            memory: memory(false),
            exported: memory(true),
            chunk_bytes,
        })
    }

    /// Device memory on `stream`, freed in this stream's order.
    fn alloc_on(&self, stream: StreamHandle, bytes: usize) -> Result<DevBuf> {
        let _current = self.enter()?;
        let mut ptr = 0;
        // SAFETY: a live pool and stream of the current context.
        unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, bytes.max(8), self.gpu.pool, stream.0) }
            .result()
            .map_err(|err| {
                alloc_err(
                    format!("allocating {bytes} bytes on cuda:{}", self.gpu.ordinal),
                    err,
                )
            })?;
        Ok(DevBuf::new(ptr, bytes, self.memory.clone()))
    }

    /// Fills `bytes` of pinned staging with `fill` and copies them into `buf`
    /// on `stream`.
    fn stage(
        &self,
        buf: &DevBuf,
        bytes: usize,
        fill: &(dyn Fn(&mut [u8]) + Sync),
        stream: StreamHandle,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _current = self.enter()?;
        let ready = Event::new(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING, self.gpu.ctx)?;
        let mut pinned = self.gpu.take_staging(bytes)?;
        // SAFETY: `pinned` holds at least `bytes` initialised bytes, and no copy
        // reads them any more (take_staging waited).
        let staged = unsafe { std::slice::from_raw_parts_mut(pinned.ptr, bytes) };
        fill(staged);
        // SAFETY: `buf` has room for `bytes`. `pinned` is not written again
        // before `ready`, recorded right after this copy, has completed; if
        // recording fails the stream is synchronised instead.
        unsafe {
            cu::memcpy_htod_async(buf.ptr(), &staged[..], stream.0)
                .map_err(cuda_err("cuMemcpyHtoDAsync"))?;
            match cu::event::record(ready.0, stream.0) {
                Ok(()) => pinned.ready = Some(ready),
                Err(err) => {
                    cu::stream::synchronize(stream.0).map_err(cuda_err("cuStreamSynchronize"))?;
                    return Err(Error::Cuda(format!("cuEventRecord: {err}")));
                }
            }
        }
        self.gpu.give_back_staging(pinned);
        Ok(())
    }

    fn enter(&self) -> Result<ContextGuard> {
        ContextGuard::enter(self.gpu.ctx)
    }
}

impl Drop for GpuStream {
    fn drop(&mut self) {
        let _ = DeviceStream::synchronize(self);
        if let Ok(_current) = self.enter() {
            self.gpu.call_ended();
        }
        // (The copy stream's work is done: `stream` waited for all of it.)
        self.gpu.give_back_streams([self.stream, self.copies]);
    }
}

/// Threads per block of every batch kernel (a block-cooperative kernel's lanes).
const BLOCK: u32 = crate::kernels::LANES;

impl DeviceStream for GpuStream {
    fn location(&self) -> Location {
        Location::Cuda(self.gpu.ordinal)
    }

    fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        self.alloc_on(self.stream, bytes)
    }

    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()> {
        assert!(
            offset + src.len() <= dst.bytes(),
            "upload past the end of a buffer"
        );
        if src.is_empty() {
            return Ok(());
        }
        let _current = self.enter()?;
        // SAFETY: dst has room (checked). From pageable memory the driver has
        // staged `src` when this returns, so the caller may reuse it.
        unsafe { cu::memcpy_htod_async(dst.ptr() + offset as u64, src, self.stream.0) }
            .map_err(cuda_err("cuMemcpyHtoDAsync"))
    }

    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        let buf = self.alloc(bytes)?;
        self.stage(&buf, bytes, fill, self.stream)?;
        Ok(buf)
    }

    fn upload_beside(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        // In the copy stream's order, not behind this stream's queued kernels;
        // freed in this stream's order (DevBuf's memory), after the kernels
        // that read it, which the pool's stream-ordered reuse respects.
        let buf = self.alloc_on(self.copies, bytes)?;
        let _current = self.enter()?;
        let waited = self.stage(&buf, bytes, fill, self.copies).and_then(|()| {
            // SAFETY: two live streams of the current context.
            unsafe { wait_for(self.stream.0, self.copies.0) }.map_err(cuda_err("cuStreamWaitEvent"))
        });
        if let Err(err) = waited {
            // `buf` is freed on this stream, not in the copy stream's order:
            // its allocation and any copy into it must be done first.
            // SAFETY: a live stream of the current context.
            unsafe { cu::stream::synchronize(self.copies.0) }
                .map_err(cuda_err("cuStreamSynchronize"))?;
            return Err(err);
        }
        Ok(buf)
    }

    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        assert!(
            offset + dst.len() <= src.bytes(),
            "download past the end of a buffer"
        );
        if dst.is_empty() {
            return Ok(());
        }
        let _current = self.enter()?;
        if dst.len() > READBACK_DIRECT {
            return download_pinned(&self.gpu, self.stream.0, src.ptr() + offset as u64, dst);
        }
        // SAFETY: src holds the bytes (checked); the stream is synchronised
        // before `dst` is read.
        unsafe {
            cu::memcpy_dtoh_async(dst, src.ptr() + offset as u64, self.stream.0)
                .map_err(cuda_err("cuMemcpyDtoHAsync"))?;
        }
        DeviceStream::synchronize(self)
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        let _current = self.enter()?;
        let function = self.gpu.functions[kernel.number() as usize];
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
                self.stream.0,
                &mut params,
            )
        }
        .map_err(|err| Error::Cuda(format!("launching {} failed: {err}", kernel.name())))
    }

    fn mark(&self) -> Result<Mark> {
        let _current = self.enter()?;
        let event = Event::new(sys::CUevent_flags::CU_EVENT_DEFAULT, self.gpu.ctx)?;
        // SAFETY: a live event and stream.
        unsafe { cu::event::record(event.0, self.stream.0) }.map_err(cuda_err("cuEventRecord"))?;
        Ok(Mark::new(event))
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        let (Some(a), Some(b)) = (from.get::<Event>(), to.get::<Event>()) else {
            return Ok(0.0);
        };
        let _current = self.enter()?;
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
        let _current = self.enter()?;
        // SAFETY: the stream is live (pooled streams are never destroyed).
        unsafe { cu::stream::synchronize(self.stream.0) }.map_err(cuda_err("cuStreamSynchronize"))
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        buf.with_memory(self.exported.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_largest_chunks_staging_is_kept_for_the_next_call() {
        // A chunk's inputs: its text and about 4 bytes per 1 kB piece.
        let staging = staging_capacity(MAX_CHUNK_BYTES + MAX_CHUNK_BYTES / 256);
        let small = staging_capacity(1);
        let pool = [staging, staging, small, small];
        assert_eq!(kept_staging(&pool), [true; 4]);
        assert_eq!(
            kept_staging(&[staging; 5]),
            [true, true, true, false, false]
        );
        // A buffer too big to keep does not release the smaller ones after it.
        let huge = STAGING_KEPT_BYTES + 1;
        assert_eq!(kept_staging(&[huge, staging, small]), [false, true, true]);
    }
}
