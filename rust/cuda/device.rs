//! A device's host logic, written once over the driver calls it makes
//! ([`Driver`]): the CUDA driver API on a GPU (`driver::Cuda`) and the
//! emulator's model of it (`emulator::Emulated`), so that CI runs the very
//! staging, readback, stream and memory rules a GPU runs.
//!
//! - [`Device`]: one per device: a pool of streams, a release stream for
//!   exported buffers, the pool-size policy (the memory pool keeps what the
//!   last busy period used at its peak; after `IDLE_TRIM` with no call, a
//!   background thread gives unused memory back), pinned staging buffers for
//!   uploads (write-combined, double buffered) and for large downloads (read
//!   back two at a time).
//! - [`DeviceCall`]: one call's [`DeviceStream`]: two streams from the pool,
//!   the second for `upload_beside` (a chunk's input is copied while the
//!   previous chunk's kernels run; the first stream waits for the copy).
//! - Consumer streams: a tensor exported through DLPack to a consumer's stream
//!   is freed only after the work queued on that stream by then (an event
//!   recorded on it, waited for by the release stream), so a side stream that
//!   still reads the tensor never sees its memory reused.
//! - Every entry point makes the driver current (`Driver::enter`: on a GPU the
//!   device's context is pushed and popped after, so the caller's current
//!   device, torch's, never changes).
//! - Fork: a child forked after the driver was initialised touches nothing
//!   (`Driver::forked`): memory inherited from the parent is neither read nor
//!   freed there.

use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use crate::error::{Error, Result};
use crate::kernels::{DevPtr, Kernel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The driver calls a device's host logic makes. Streams are non-blocking;
/// frees and allocations are stream-ordered (a pool that reuses memory
/// across streams only when an event orders the two, or the free is done:
/// no dependency of its own making); events follow the work queued before
/// their record. Errors are `Error::Cuda` (out of memory:
/// `Error::CudaOutOfMemory`).
pub trait Driver: Send + Sync + 'static {
    /// A stream handle, used from any thread.
    type Stream: Copy + Send + Sync + PartialEq + 'static;
    /// An event, destroyed on drop.
    type Event: Send + Sync + 'static;
    /// What keeps the driver current on this thread for its life.
    type Current;

    fn location(&self) -> Location;
    /// Makes the driver current on this thread until the value is dropped.
    fn enter(&self) -> Result<Self::Current>;
    /// True in a child forked after the driver was initialised: nothing may
    /// be touched there.
    fn forked(&self) -> bool;
    /// Why the driver cannot be used in a forked child.
    fn forked_error(&self) -> Error {
        Error::CudaUnavailable(super::probe::FORKED_REASON.into())
    }

    /// A new non-blocking stream.
    fn new_stream(&self) -> Result<Self::Stream>;
    /// The legacy default stream (which blocking streams meet at).
    fn legacy_stream(&self) -> Self::Stream;
    /// The stream of a consumer's handle (checked by `check_consumer`).
    fn consumer_stream(&self, handle: u64) -> Self::Stream;
    /// Checks that a consumer's stream handle is a stream of this device.
    fn check_consumer(&self, handle: u64) -> Result<()>;
    /// Waits until the work queued on `stream` is done.
    fn synchronize(&self, stream: Self::Stream) -> Result<()>;
    /// Waits until all of the device's work is done.
    fn synchronize_device(&self);

    /// A new event; `timing` when it marks time.
    fn new_event(&self, timing: bool) -> Result<Self::Event>;
    /// Records `event` after the work queued on `stream` so far.
    fn record(&self, event: &Self::Event, stream: Self::Stream) -> Result<()>;
    /// Makes `stream`'s later work wait for `event`'s last record.
    fn wait_event(&self, stream: Self::Stream, event: &Self::Event) -> Result<()>;
    /// True when the work before `event`'s last record is done.
    fn is_done(&self, event: &Self::Event) -> bool;
    /// Waits on the host until the work before `event`'s last record is done.
    fn wait_host(&self, event: &Self::Event) -> Result<()>;
    /// Milliseconds between two recorded timing events (waits for `to`).
    fn elapsed_ms(&self, from: &Self::Event, to: &Self::Event) -> Result<f64>;

    /// `bytes` of the device's pool, in `stream`'s order.
    fn alloc(&self, bytes: usize, stream: Self::Stream) -> Result<DevPtr>;
    /// Frees memory from `alloc` in `stream`'s order. Must not fail loudly.
    fn free(&self, ptr: DevPtr, stream: Self::Stream);
    /// Free device memory in bytes.
    fn free_bytes(&self) -> Result<usize>;
    /// The pool's highest use since the last call, which resets it.
    fn take_peak_use(&self) -> Option<u64>;
    /// Freed memory the pool keeps across synchronisations.
    fn keep_freed(&self, bytes: u64);
    /// Releases the pool's unused memory.
    fn trim(&self);
    /// Notes that kernels only read this allocation from now on (tables).
    fn read_only(&self, _ptr: DevPtr) {}

    /// `bytes` of pinned host memory, zeroed; write-combined for memory the
    /// host only writes.
    fn pin(&self, bytes: usize, write_combined: bool) -> Result<*mut u8>;
    /// Frees pinned memory (no copy may use it any more).
    ///
    /// # Safety
    /// `ptr` came from `pin` with `bytes`, and is not used again.
    unsafe fn unpin(&self, ptr: *mut u8, bytes: usize);
    /// Notes that the host reads or writes pinned memory now (the emulator
    /// checks that no queued copy still uses it).
    fn host_access(&self, _ptr: *const u8, _bytes: usize, _write: bool) -> Result<()> {
        Ok(())
    }

    /// Copies `src` (pageable: staged before this returns) to `dst`.
    fn upload(&self, dst: DevPtr, src: &[u8], stream: Self::Stream) -> Result<()>;
    /// Copies `bytes` of pinned memory at `src` to `dst` when `stream` gets there.
    ///
    /// # Safety
    /// `src` holds `bytes` of pinned memory, not written until the copy is done.
    unsafe fn upload_pinned(
        &self,
        dst: DevPtr,
        src: *const u8,
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    /// Copies `bytes` at `src` into pinned memory at `dst` when `stream` gets there.
    ///
    /// # Safety
    /// `dst` holds `bytes` of pinned memory, not used until the copy is done.
    unsafe fn download_pinned(
        &self,
        dst: *mut u8,
        src: DevPtr,
        bytes: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    /// Copies into pageable `dst` after `stream`'s queued work; returns when copied.
    fn download(&self, dst: &mut [u8], src: DevPtr, stream: Self::Stream) -> Result<()>;
    /// Launches `n` threads of `kernel` (blocks of `LANES`) with `args`.
    fn launch(&self, kernel: Kernel, args: &[u8], n: u32, stream: Self::Stream) -> Result<()>;
}

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
pub const MAX_CHUNK_BYTES: usize = 256 << 20;
/// Downloads over this size go through two pinned buffers in turn, each
/// `READBACK_CHUNK` bytes (`download_pinned`); `READBACK_KEPT` are kept.
const READBACK_DIRECT: usize = 1 << 20;
const READBACK_CHUNK: usize = 8 << 20;
const READBACK_KEPT: usize = 4;

/// One device, ready to run the batch kernels.
pub struct Device<D: Driver> {
    pub driver: D,
    streams: Mutex<Vec<D::Stream>>,
    /// Where exported buffers are freed: a stream of gpu_tok's own, so that
    /// ordering a free after a consumer's stream never makes another
    /// non-blocking stream (a torch side stream) wait for it.
    releases: D::Stream,
    /// Calls running now and the pool's use; `idle.1` wakes the trim thread.
    idle: Arc<(Mutex<Activity>, Condvar)>,
    /// The trim thread, started when the device first goes idle.
    trimmer: OnceLock<()>,
    /// Pinned host buffers for uploads, reused call after call.
    staging: Mutex<Vec<Pinned<D>>>,
    /// Pinned host buffers for large downloads (readable: not write-combined).
    readback: Mutex<Vec<Pinned<D>>>,
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
    /// Set when the device is dropped: the trim thread ends.
    gone: bool,
}

impl<D: Driver> Device<D> {
    /// The device of `driver`, its pool keeping `POOL_KEEP_FIRST` of freed
    /// memory until the first call has measured its working set.
    pub fn new(driver: D) -> Result<Device<D>> {
        let releases = {
            let _current = driver.enter()?;
            driver.keep_freed(POOL_KEEP_FIRST);
            driver.new_stream()?
        };
        Ok(Device {
            driver,
            streams: Mutex::new(Vec::new()),
            releases,
            idle: Arc::new((
                Mutex::new(Activity {
                    running: 0,
                    busy_peak: 0,
                    idle_since: None,
                    gone: false,
                }),
                Condvar::new(),
            )),
            trimmer: OnceLock::new(),
            staging: Mutex::new(Vec::new()),
            readback: Mutex::new(Vec::new()),
        })
    }

    fn activity(&self) -> MutexGuard<'_, Activity> {
        self.idle.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a call in; returns how many run now (this one included).
    fn call_started(&self) -> usize {
        let mut activity = self.activity();
        activity.running += 1;
        activity.idle_since = None;
        activity.running
    }

    /// Counts a call out (its stream synchronised, the driver current): the
    /// pool's release threshold becomes the peak use of this busy period, so
    /// the next calls like it find their memory kept; when no call is left,
    /// the trim thread starts counting.
    fn call_ended(self: &Arc<Self>) {
        let mut activity = self.activity();
        activity.running = activity.running.saturating_sub(1);
        let peak = self.driver.take_peak_use().unwrap_or(0);
        activity.busy_peak = activity.busy_peak.max(peak);
        self.driver.keep_freed(activity.busy_peak);
        if activity.running == 0 {
            activity.busy_peak = 0;
            drop(activity);
            self.went_idle();
        }
    }

    /// Restarts the idle clock (no call is running) and wakes the trim
    /// thread, started here the first time. The thread holds the device
    /// weakly: it ends when the device is dropped.
    fn went_idle(self: &Arc<Self>) {
        {
            let mut activity = self.activity();
            if activity.running > 0 {
                return;
            }
            activity.idle_since = Some(Instant::now());
        }
        self.trimmer.get_or_init(|| {
            let (device, idle) = (Arc::downgrade(self), self.idle.clone());
            // Without the thread (spawn failed) memory is only kept, never trimmed.
            let _ = std::thread::Builder::new()
                .name("gpu_tok-pool-trim".into())
                .spawn(move || trim_when_idle(device, &idle));
        });
        self.idle.1.notify_all();
    }

    /// A pinned buffer of at least `bytes`, free to write (its last copy done).
    /// Double buffering: a buffer whose copy is still queued (behind the
    /// previous chunk's kernels, on one stream) is waited for only when
    /// `STAGING_IN_FLIGHT` such buffers fit; until then another is pinned, so
    /// the host stages chunk k + 1 while the device runs chunk k.
    fn take_staging(&self, bytes: usize) -> Result<Pinned<D>> {
        let reused = {
            let mut pool = self.staging.lock().unwrap_or_else(|e| e.into_inner());
            let capacity = |&i: &usize| pool[i].capacity;
            let fitting = (0..pool.len()).filter(|&i| pool[i].capacity >= bytes);
            let idle = fitting
                .clone()
                .filter(|&i| pool[i].copied(&self.driver))
                .min_by_key(capacity);
            let wait_for_one = fitting.clone().count() >= STAGING_IN_FLIGHT;
            let best = idle.or_else(|| fitting.min_by_key(capacity).filter(|_| wait_for_one));
            best.map(|i| pool.swap_remove(i))
        };
        if let Some(mut pinned) = reused {
            if let Err(err) = pinned.wait(&self.driver) {
                self.release(pinned);
                return Err(err);
            }
            return Ok(pinned);
        }
        // Write-combined suits memory the CPU only writes.
        Pinned::new(&self.driver, staging_capacity(bytes), true)
    }

    /// Keeps `pinned` for reuse while the kept buffers stay within bounds.
    fn give_back_staging(&self, pinned: Pinned<D>) {
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
        for (pinned, _) in released {
            self.release(pinned); // waits for its copy, then frees it
        }
    }

    /// Two pinned buffers of `READBACK_CHUNK` bytes for one download.
    fn take_readback(&self) -> Result<[Pinned<D>; 2]> {
        let mut pool = self.readback.lock().unwrap_or_else(|e| e.into_inner());
        let first = match pool.pop() {
            Some(pinned) => pinned,
            None => Pinned::new(&self.driver, READBACK_CHUNK, false)?,
        };
        let second = match pool.pop() {
            Some(pinned) => Ok(pinned),
            None => Pinned::new(&self.driver, READBACK_CHUNK, false),
        };
        match second {
            Ok(second) => Ok([first, second]),
            Err(err) => {
                pool.push(first);
                Err(err)
            }
        }
    }

    /// Keeps a download's buffers for reuse, up to `READBACK_KEPT`.
    fn give_back_readback(&self, buffers: [Pinned<D>; 2]) {
        let mut pool = self.readback.lock().unwrap_or_else(|e| e.into_inner());
        pool.extend(buffers);
        let keep = READBACK_KEPT.min(pool.len());
        let released: Vec<Pinned<D>> = pool.drain(keep..).collect();
        drop(pool);
        for pinned in released {
            self.release(pinned);
        }
    }

    /// Frees a pinned buffer once its last copy is done.
    fn release(&self, mut pinned: Pinned<D>) {
        if self.driver.forked() {
            return; // the parent's pinned memory: not ours to free
        }
        if pinned.wait(&self.driver).is_err() {
            self.driver.synchronize_device();
        }
        // SAFETY: from `pin` with this capacity; no copy uses it any more (waited).
        unsafe { self.driver.unpin(pinned.ptr, pinned.capacity) };
    }

    /// A stream from the pool, or a new one.
    fn take_stream(&self) -> Result<D::Stream> {
        let pooled = self.streams.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match pooled {
            Some(stream) => Ok(stream),
            None => self.driver.new_stream(),
        }
    }

    fn give_back_streams<const N: usize>(&self, streams: [D::Stream; N]) {
        let mut pool = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        pool.extend(streams);
    }
}

impl<D: Driver> Drop for Device<D> {
    fn drop(&mut self) {
        self.activity().gone = true;
        self.idle.1.notify_all();
        if self.driver.forked() {
            return;
        }
        let _current = self.driver.enter();
        let kept: Vec<Pinned<D>> = [&self.staging, &self.readback]
            .iter()
            .flat_map(|pool| std::mem::take(&mut *pool.lock().unwrap_or_else(|e| e.into_inner())))
            .collect();
        for pinned in kept {
            self.release(pinned);
        }
    }
}

/// The trim thread: once the device has been idle for `IDLE_TRIM`, gives
/// the pool's unused memory back (tensors still alive keep theirs).
fn trim_when_idle<D: Driver>(device: Weak<Device<D>>, idle: &(Mutex<Activity>, Condvar)) {
    let mut activity = idle.0.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        match activity.idle_since {
            _ if activity.gone => return,
            None => activity = idle.1.wait(activity).unwrap_or_else(|e| e.into_inner()),
            Some(since) if since.elapsed() < IDLE_TRIM => {
                let left = IDLE_TRIM - since.elapsed().min(IDLE_TRIM);
                activity = idle
                    .1
                    .wait_timeout(activity, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            Some(_) => {
                activity.idle_since = None;
                drop(activity);
                let Some(device) = device.upgrade() else {
                    return;
                };
                if !device.driver.forked() {
                    if let Ok(_current) = device.driver.enter() {
                        device.driver.trim();
                    }
                }
                drop(device);
                activity = idle.0.lock().unwrap_or_else(|e| e.into_inner());
            }
        }
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
/// out of it or into it. Freed by its device (`Device::release`), never on
/// drop.
struct Pinned<D: Driver> {
    ptr: *mut u8,
    capacity: usize,
    ready: Option<D::Event>,
}

// SAFETY: a host allocation owned by this value; the event is a driver handle.
unsafe impl<D: Driver> Send for Pinned<D> {}

impl<D: Driver> Pinned<D> {
    fn new(driver: &D, capacity: usize, write_combined: bool) -> Result<Pinned<D>> {
        Ok(Pinned {
            ptr: driver.pin(capacity, write_combined)?,
            capacity,
            ready: None,
        })
    }

    /// True when no queued copy uses this buffer any more.
    fn copied(&self, driver: &D) -> bool {
        self.ready
            .as_ref()
            .is_none_or(|event| driver.is_done(event))
    }

    /// Waits until the last copy out of this buffer or into it is done.
    fn wait(&mut self, driver: &D) -> Result<()> {
        if let Some(event) = self.ready.take() {
            driver.wait_host(&event)?;
        }
        Ok(())
    }

    /// The first `len` bytes, for the host to write (`len` <= capacity).
    fn write(&mut self, driver: &D, len: usize) -> Result<&mut [u8]> {
        assert!(len <= self.capacity);
        driver.host_access(self.ptr, len, true)?;
        // SAFETY: `capacity` initialised bytes (pinned zeroed), no copy uses
        // them (the caller waited), and `self` is borrowed mutably.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, len) })
    }

    /// The first `len` bytes, for the host to read (`len` <= capacity).
    fn read(&self, driver: &D, len: usize) -> Result<&[u8]> {
        assert!(len <= self.capacity);
        driver.host_access(self.ptr, len, false)?;
        // SAFETY: as in `write`; the copy into them is done (waited).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, len) })
    }
}

/// A large download through two pinned buffers in turn, ordered on
/// `stream`: the device copies chunk k + 1 into one while the host copies
/// chunk k out of the other. (A pageable destination makes the driver stage
/// every byte itself, one synchronous step after another.) The driver is
/// current.
fn download_pinned<D: Driver>(
    device: &Device<D>,
    stream: D::Stream,
    src: DevPtr,
    dst: &mut [u8],
) -> Result<()> {
    let driver = &device.driver;
    let Ok(mut buffers) = device.take_readback() else {
        // No pinned memory to be had: the driver stages the copy itself.
        return driver.download(dst, src, stream);
    };
    let mut chunks: Vec<&mut [u8]> = dst.chunks_mut(READBACK_CHUNK).collect();
    let n = chunks.len();
    let mut copy_all = || -> Result<()> {
        for k in 0..n + 2 {
            let buffer = &mut buffers[k % 2];
            if k >= 2 {
                // This buffer holds chunk k - 2: wait for it, then copy it out.
                buffer.wait(driver)?;
                let out = &mut chunks[k - 2];
                out.copy_from_slice(buffer.read(driver, out.len())?);
            }
            if k < n {
                let len = chunks[k].len();
                let ready = driver.new_event(false)?;
                let from = src + (k * READBACK_CHUNK) as u64;
                // SAFETY: `buffer` has room for `len` bytes and no copy uses it
                // (waited above, or never used); `src` holds the caller's bytes.
                // The event recorded after the copy is waited for before the
                // buffer is read or reused.
                unsafe { driver.download_pinned(buffer.ptr, from, len, stream)? };
                driver.record(&ready, stream)?;
                buffer.ready = Some(ready);
            }
        }
        Ok(())
    };
    let copied = copy_all();
    if copied.is_err() {
        // A copy may still be queued into a buffer that has no event.
        driver.synchronize(stream)?;
    }
    device.give_back_readback(buffers);
    copied
}

/// Makes `stream` wait for the work queued on `consumer` so far.
fn wait_for<D: Driver>(driver: &D, stream: D::Stream, consumer: D::Stream) -> Result<()> {
    let event = driver.new_event(false)?;
    driver.record(&event, consumer)?;
    driver.wait_event(stream, &event)
    // (The event is destroyed here; the driver keeps what the queued wait needs.)
}

/// One call's stream of work on a [`Device`]: a [`DeviceStream`].
pub struct DeviceCall<D: Driver> {
    device: Arc<Device<D>>,
    stream: D::Stream,
    /// Where `upload_beside` copies run, beside `stream`'s kernels.
    copies: D::Stream,
    memory: Arc<dyn Memory>,
    exported: Arc<dyn Memory>,
    chunk_bytes: usize,
    /// Tests only: `upload_beside` leaves out the stream's wait for the copy.
    skip_copy_wait: bool,
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
struct StreamMemory<D: Driver> {
    device: Arc<Device<D>>,
    stream: D::Stream,
    exported: bool,
}

impl<D: Driver> Memory for StreamMemory<D> {
    fn free(&self, ptr: DevPtr, _bytes: usize, consumers: &[u64]) {
        let driver = &self.device.driver;
        if driver.forked() {
            return; // the parent's memory: the driver is unusable in this child
        }
        let Ok(_current) = driver.enter() else {
            return; // e.g. at interpreter exit, after the driver shut down
        };
        let (stream, legacy) = match self.exported {
            true => (self.device.releases, Some(driver.legacy_stream())),
            false => (self.stream, None),
        };
        // A consumer's stream must outlive the tensors exported to it (README):
        // one the driver no longer takes for a stream of this device is not
        // recorded on (undefined in CUDA); the whole device is waited for instead.
        let (live, dead): (Vec<u64>, Vec<u64>) = consumers
            .iter()
            .partition(|&&handle| driver.check_consumer(handle).is_ok());
        if !dead.is_empty() {
            driver.synchronize_device();
        }
        let consumers = live.into_iter().map(|h| driver.consumer_stream(h));
        for consumer in legacy.into_iter().chain(consumers) {
            if wait_for(driver, stream, consumer).is_err() {
                // The order is lost: wait for the whole device instead, so the
                // memory is never reused while the consumer may still read it.
                driver.synchronize_device();
                break;
            }
        }
        driver.free(ptr, stream);
        if self.exported {
            self.device.went_idle(); // memory back in the pool: trim it if idle
        }
    }

    fn check_consumer(&self, consumer: u64) -> Result<()> {
        let driver = &self.device.driver;
        if driver.forked() {
            return Err(driver.forked_error());
        }
        let _current = driver.enter()?;
        driver.check_consumer(consumer)
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        let driver = &self.device.driver;
        if driver.forked() {
            return Err(driver.forked_error());
        }
        let _current = driver.enter()?;
        // Copies on the legacy stream order after the work of blocking
        // streams, e.g. a consumer's in-place writes. Large results (what
        // device="auto" brings back) go through pinned memory.
        let legacy = driver.legacy_stream();
        if dst.len() > READBACK_DIRECT {
            return download_pinned(&self.device, legacy, ptr, dst);
        }
        driver.download(dst, ptr, legacy)
    }

    fn location(&self) -> Location {
        self.device.driver.location()
    }
}

impl<D: Driver> DeviceCall<D> {
    /// Two streams from `device`'s pool (new ones when all are busy), with
    /// chunks of `chunk_bytes` of text when given, else sized to the free
    /// memory. Every fallible step comes before the streams are taken and the
    /// call counted, so a failure leaks neither (Drop gives both back).
    pub fn acquire(device: &Arc<Device<D>>, chunk_bytes: Option<usize>) -> Result<DeviceCall<D>> {
        let driver = &device.driver;
        if driver.forked() {
            return Err(driver.forked_error());
        }
        let _current = driver.enter()?;
        let free = driver.free_bytes()?;
        let stream = device.take_stream()?;
        let copies = match device.take_stream() {
            Ok(copies) => copies,
            Err(err) => {
                device.give_back_streams([stream]);
                return Err(err);
            }
        };
        // A chunk's device memory peaks at 28-57 bytes per text byte by family
        // (benches/host_cost.py, B/byte), plus what earlier chunks keep until
        // packing: each running call sizes its chunks to a share of what is free.
        let running = device.call_started();
        let chunk_bytes = chunk_bytes
            .unwrap_or_else(|| (free / (96 * running)).clamp(1 << 20, MAX_CHUNK_BYTES))
            .max(1);
        let memory = |exported| -> Arc<dyn Memory> {
            Arc::new(StreamMemory {
                device: device.clone(),
                stream,
                exported,
            })
        };
        Ok(DeviceCall {
            device: device.clone(),
            stream,
            copies,
            memory: memory(false),
            exported: memory(true),
            chunk_bytes,
            skip_copy_wait: false,
        })
    }

    /// The device the call runs on.
    pub fn device(&self) -> &Arc<Device<D>> {
        &self.device
    }

    /// The call's streams: its own, and the one its copies beside run on.
    pub fn streams(&self) -> (D::Stream, D::Stream) {
        (self.stream, self.copies)
    }

    /// Tests only: `upload_beside` no longer makes the call's stream wait
    /// for the copy (a wait removed, which the emulator must catch).
    #[cfg(test)]
    pub fn skip_copy_wait(&mut self) {
        self.skip_copy_wait = true;
    }

    fn driver(&self) -> &D {
        &self.device.driver
    }

    fn enter(&self) -> Result<D::Current> {
        if self.driver().forked() {
            return Err(self.driver().forked_error());
        }
        self.driver().enter()
    }

    /// Device memory on `stream`, freed in this call's stream's order.
    fn alloc_on(&self, stream: D::Stream, bytes: usize) -> Result<DevBuf> {
        let _current = self.enter()?;
        let ptr = self.driver().alloc(bytes.max(8), stream)?;
        Ok(DevBuf::new(ptr, bytes, self.memory.clone()))
    }

    /// Fills `bytes` of pinned staging with `fill` and copies them into `buf`
    /// on `stream`.
    fn stage(
        &self,
        buf: &DevBuf,
        bytes: usize,
        fill: &(dyn Fn(&mut [u8]) + Sync),
        stream: D::Stream,
    ) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        let _current = self.enter()?;
        let driver = self.driver();
        let ready = driver.new_event(false)?;
        let mut pinned = self.device.take_staging(bytes)?;
        let staged = match pinned.write(driver, bytes) {
            Ok(staged) => staged,
            Err(err) => {
                self.device.give_back_staging(pinned);
                return Err(err);
            }
        };
        fill(staged);
        // SAFETY: `buf` has room for `bytes`. `pinned` is not written again
        // before `ready`, recorded right after this copy, has completed; if
        // recording fails the stream is synchronised instead.
        let copied = unsafe { driver.upload_pinned(buf.ptr(), pinned.ptr, bytes, stream) }
            .and_then(|()| match driver.record(&ready, stream) {
                Ok(()) => {
                    pinned.ready = Some(ready);
                    Ok(())
                }
                Err(err) => driver.synchronize(stream).and(Err(err)),
            });
        if copied.is_err() {
            let _ = driver.synchronize(stream); // no copy may still read `pinned`
        }
        self.device.give_back_staging(pinned);
        copied
    }
}

impl<D: Driver> Drop for DeviceCall<D> {
    fn drop(&mut self) {
        let _ = DeviceStream::synchronize(self);
        if let Ok(_current) = self.enter() {
            // (The copy stream's work is done: `stream` waited for all of it.)
            let _ = self.driver().synchronize(self.copies);
            self.device.call_ended();
        }
        self.device.give_back_streams([self.stream, self.copies]);
    }
}

impl<D: Driver> DeviceStream for DeviceCall<D> {
    fn location(&self) -> Location {
        self.driver().location()
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
        self.driver()
            .upload(dst.ptr() + offset as u64, src, self.stream)
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
        let waited =
            self.stage(&buf, bytes, fill, self.copies)
                .and_then(|()| match self.skip_copy_wait {
                    true => Ok(()),
                    false => wait_for(self.driver(), self.stream, self.copies),
                });
        if let Err(err) = waited {
            // `buf` is freed on this stream, not in the copy stream's order:
            // its allocation and any copy into it must be done first.
            self.driver().synchronize(self.copies)?;
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
        let from = src.ptr() + offset as u64;
        if dst.len() > READBACK_DIRECT {
            return download_pinned(&self.device, self.stream, from, dst);
        }
        self.driver().download(dst, from, self.stream)
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        let _current = self.enter()?;
        self.driver().launch(kernel, args, n, self.stream)
    }

    fn mark(&self) -> Result<Mark> {
        let _current = self.enter()?;
        let event = self.driver().new_event(true)?;
        self.driver().record(&event, self.stream)?;
        Ok(Mark::new(MarkOf::<D>(event)))
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        let (Some(a), Some(b)) = (from.get::<MarkOf<D>>(), to.get::<MarkOf<D>>()) else {
            return Ok(0.0);
        };
        let _current = self.enter()?;
        self.driver().elapsed_ms(&a.0, &b.0)
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn synchronize(&self) -> Result<()> {
        let _current = self.enter()?;
        self.driver().synchronize(self.stream)
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        buf.with_memory(self.exported.clone())
    }

    fn read_only(&self, buf: &DevBuf) {
        if let Ok(_current) = self.enter() {
            self.driver().read_only(buf.ptr());
        }
    }
}

/// A mark's event (a type of its own per driver, for `Mark::get`).
struct MarkOf<D: Driver>(D::Event);

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
