//! The host emulator: a [`DeviceStream`] whose memory is host memory and whose
//! launches run the kernel functions of `cuda/gt_batch.cuh` (compiled for the
//! host by build.rs) for every thread index, spread over the engine's pool.
//! It lets CI run the whole CUDA pipeline — decomposition, scans, scratch
//! layout, packing — without a GPU; only launch and copy mechanics differ.
//!
//! For tests of the memory rules it also records, process-wide, how each
//! exported buffer (a tensor's) was released and which consumer streams the
//! release waited for ([`take_releases`]), and can cap its memory so that
//! allocations fail as out of memory ([`Emulator::with_memory_limit`]).

use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use crate::error::{Error, Result};
use crate::kernels::{self, DevPtr, Kernel};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Emulated device; `chunk_bytes` is small in tests to force many chunks.
pub struct Emulator {
    memory: Arc<HostMemory>,
    /// The same memory for exported buffers: their releases are recorded.
    exported: Arc<HostMemory>,
    /// Bytes allocated and not yet freed, and the most there may be.
    in_use: Arc<AtomicUsize>,
    limit: Option<usize>,
    /// The most bytes in use at once so far.
    peak: AtomicUsize,
    chunk_bytes: usize,
    /// Nanoseconds spent doing the device's work: running kernels, and
    /// allocating, filling and freeing memory (device memory costs the host
    /// nothing on a GPU). Shared with `memory`, which frees.
    device_ns: Arc<AtomicU64>,
    /// What the stream was asked to do, in order, when traced.
    trace: Option<Mutex<Vec<Op>>>,
}

/// One operation on the stream, for the trace.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Bytes copied to the device.
    Upload(usize),
    /// Bytes copied back: the host waits for the work before it.
    Download(usize),
    Launch(Kernel),
    Synchronize,
    /// A buffer of this many bytes handed out with the results.
    Export(usize),
}

struct HostMemory {
    device_ns: Arc<AtomicU64>,
    in_use: Arc<AtomicUsize>,
    /// Whether releases are recorded (exported buffers).
    recorded: bool,
}

/// How an exported buffer was released: its size and the consumer streams
/// the release waited for (on a GPU: an event recorded on each, waited for by
/// the freeing stream, before the memory can be reused).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    pub bytes: usize,
    pub waited_for: Vec<u64>,
}

/// The latest releases (bounded: a test reads them right after its own).
static RELEASES: Mutex<Vec<Release>> = Mutex::new(Vec::new());
const RELEASES_KEPT: usize = 4096;

/// The releases of exported emulator buffers since the last call, oldest first.
pub fn take_releases() -> Vec<Release> {
    std::mem::take(&mut *RELEASES.lock().unwrap_or_else(|e| e.into_inner()))
}

impl Memory for HostMemory {
    fn free(&self, ptr: DevPtr, bytes: usize, consumers: &[u64]) {
        if self.recorded {
            let mut releases = RELEASES.lock().unwrap_or_else(|e| e.into_inner());
            if releases.len() == RELEASES_KEPT {
                releases.remove(0);
            }
            // Host memory has no streams to wait on: the waits are recorded.
            releases.push(Release {
                bytes,
                waited_for: consumers.to_vec(),
            });
        }
        let start = Instant::now();
        let words = bytes.div_ceil(8).max(1);
        let slice = std::ptr::slice_from_raw_parts_mut(ptr as *mut u64, words);
        // SAFETY: `ptr` came from `alloc` below: a leaked Box<[u64]> of `words` elements.
        drop(unsafe { Box::from_raw(slice) });
        self.in_use.fetch_sub(8 * words, Ordering::Relaxed);
        add_time(&self.device_ns, start);
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller (DevBuf::read_vec) checked the buffer holds dst.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn location(&self) -> Location {
        Location::Host
    }
}

impl Emulator {
    pub fn new(chunk_bytes: usize) -> Self {
        let device_ns = Arc::new(AtomicU64::new(0));
        let in_use = Arc::new(AtomicUsize::new(0));
        let memory = |recorded| {
            Arc::new(HostMemory {
                device_ns: device_ns.clone(),
                in_use: in_use.clone(),
                recorded,
            })
        };
        Emulator {
            memory: memory(false),
            exported: memory(true),
            in_use: in_use.clone(),
            limit: None,
            peak: AtomicUsize::new(0),
            chunk_bytes: chunk_bytes.max(1),
            device_ns,
            trace: None,
        }
    }

    /// An emulator whose allocations fail with `CudaOutOfMemory`, as a GPU's
    /// would, once `limit` bytes are in use (for tests of the fallbacks).
    pub fn with_memory_limit(chunk_bytes: usize, limit: usize) -> Self {
        Emulator {
            limit: Some(limit),
            ..Emulator::new(chunk_bytes)
        }
    }

    /// The most bytes of emulated device memory in use at once so far.
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// An emulator that records every operation (`trace`).
    pub fn traced(chunk_bytes: usize) -> Self {
        Emulator {
            trace: Some(Mutex::new(Vec::new())),
            ..Emulator::new(chunk_bytes)
        }
    }

    /// The operations so far (empty unless traced).
    pub fn trace(&self) -> Vec<Op> {
        self.trace.as_ref().map_or_else(Vec::new, |t| {
            t.lock().unwrap_or_else(|e| e.into_inner()).clone()
        })
    }

    fn record(&self, op: Op) {
        if let Some(trace) = &self.trace {
            trace.lock().unwrap_or_else(|e| e.into_inner()).push(op);
        }
    }
}

/// Adds the time since `since` to a nanosecond counter.
fn add_time(counter: &AtomicU64, since: Instant) {
    let ns = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
    counter.fetch_add(ns, Ordering::Relaxed);
}

/// Threads per task when spreading a launch over the pool.
const THREADS_PER_TASK: u32 = 256;

impl DeviceStream for Emulator {
    fn location(&self) -> Location {
        Location::Host
    }

    fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        let start = Instant::now();
        let words = bytes.div_ceil(8).max(1);
        let used = self.in_use.fetch_add(8 * words, Ordering::Relaxed) + 8 * words;
        if let Some(limit) = self.limit.filter(|&limit| used > limit) {
            self.in_use.fetch_sub(8 * words, Ordering::Relaxed);
            return Err(Error::CudaOutOfMemory(format!(
                "the emulated device ran out of memory allocating {bytes} bytes \
                 ({limit} bytes in all)"
            )));
        }
        self.peak.fetch_max(used, Ordering::Relaxed);
        // Filled with a pattern, not zeros: a kernel that reads memory it never
        // wrote shows up as wrong ids in the parity tests.
        let memory: Box<[u64]> = vec![0xA5A5_A5A5_A5A5_A5A5u64; words].into_boxed_slice();
        let ptr = Box::into_raw(memory) as *mut u64 as DevPtr;
        add_time(&self.device_ns, start);
        Ok(DevBuf::new(ptr, bytes, self.memory.clone()))
    }

    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()> {
        self.record(Op::Upload(src.len()));
        assert!(
            offset + src.len() <= dst.bytes(),
            "upload past the end of a buffer"
        );
        // SAFETY: dst is a live host allocation of at least offset + len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                (dst.ptr() as *mut u8).add(offset),
                src.len(),
            )
        };
        Ok(())
    }

    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        self.record(Op::Upload(bytes));
        let buf = self.alloc(bytes)?;
        // SAFETY: a fresh host allocation of at least `bytes` bytes, not shared yet.
        fill(unsafe { std::slice::from_raw_parts_mut(buf.ptr() as *mut u8, bytes) });
        Ok(buf)
    }

    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.record(Op::Download(dst.len()));
        assert!(
            offset + dst.len() <= src.bytes(),
            "download past the end of a buffer"
        );
        // SAFETY: src is a live host allocation of at least offset + len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (src.ptr() as *const u8).add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        self.record(Op::Launch(kernel));
        let start = Instant::now();
        let tasks = n.div_ceil(THREADS_PER_TASK) as usize;
        crate::pool::current().map(tasks, |t| {
            let begin = t as u32 * THREADS_PER_TASK;
            let end = (begin + THREADS_PER_TASK).min(n);
            // SAFETY: the pipeline built `args` for this kernel over live host
            // buffers sized for n threads; threads write disjoint outputs, as on a GPU.
            unsafe { kernels::host_run(kernel, args, begin, end) };
            Ok(())
        })?;
        add_time(&self.device_ns, start);
        Ok(())
    }

    fn mark(&self) -> Result<Mark> {
        Ok(Mark::new(Instant::now()))
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        match (from.get::<Instant>(), to.get::<Instant>()) {
            (Some(a), Some(b)) => Ok(b.duration_since(*a).as_secs_f64() * 1e3),
            _ => Ok(0.0),
        }
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn synchronize(&self) -> Result<()> {
        self.record(Op::Synchronize);
        Ok(())
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        self.record(Op::Export(buf.bytes()));
        buf.with_memory(self.exported.clone())
    }

    fn emulated_device_ms(&self) -> Option<f64> {
        Some(self.device_ns.load(Ordering::Relaxed) as f64 / 1e6)
    }

    fn emulated_peak_bytes(&self) -> Option<usize> {
        Some(self.peak_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::stream::ConsumerStream;

    #[test]
    fn dlpack_stream_values() {
        use ConsumerStream::*;
        let table = [
            (None, Ok(Unordered)),
            (Some(-1), Ok(Unordered)),
            (Some(1), Ok(Legacy)),
            (Some(2), Ok(PerThread)),
            (Some(0x7f00_dead_beef), Ok(Handle(0x7f00_dead_beef))),
        ];
        for (value, want) in table {
            assert_eq!(ConsumerStream::from_dlpack(value), want, "{value:?}");
        }
        for bad in [0, -2, i128::from(u64::MAX) + 1] {
            assert!(ConsumerStream::from_dlpack(Some(bad)).is_err(), "{bad}");
        }
        assert_eq!(Handle(9).wait_handle(), Some(9));
        assert!([Unordered, Legacy, PerThread]
            .iter()
            .all(|s| s.wait_handle().is_none()));
    }

    #[test]
    fn an_exported_buffer_waits_for_its_consumer_streams_before_reuse() {
        // Sizes no other test uses pick this test's releases out of the shared log.
        let dev = Emulator::new(1 << 10);
        let waits = |bytes: usize| {
            let mine: Vec<_> = take_releases()
                .into_iter()
                .filter(|r| r.bytes == bytes)
                .collect();
            assert_eq!(mine.len(), 1, "{mine:?}");
            mine[0].waited_for.clone()
        };
        let buf = dev.export(dev.alloc(1_000_001).unwrap());
        for stream in [
            ConsumerStream::Handle(0xabc0),
            ConsumerStream::Handle(0xabc0),
        ] {
            buf.export_to(stream).unwrap();
        }
        buf.export_to(ConsumerStream::Handle(0xdef0)).unwrap();
        drop(buf);
        assert_eq!(waits(1_000_001), vec![0xabc0, 0xdef0]);

        // None/-1 and the default streams (ordered by the legacy stream) need no wait.
        let buf = dev.export(dev.alloc(1_000_003).unwrap());
        for stream in [
            ConsumerStream::Unordered,
            ConsumerStream::Legacy,
            ConsumerStream::PerThread,
        ] {
            buf.export_to(stream).unwrap();
        }
        drop(buf);
        assert_eq!(waits(1_000_003), Vec::<u64>::new());

        // Internal buffers are not exported: no release is recorded for them.
        drop(dev.alloc(1_000_005).unwrap());
        assert!(take_releases().iter().all(|r| r.bytes != 1_000_005));
    }

    #[test]
    fn a_memory_limit_fails_allocations_as_out_of_memory() {
        let dev = Emulator::with_memory_limit(1 << 10, 4096);
        let kept = dev.alloc(4000).unwrap();
        match dev.alloc(200) {
            Err(Error::CudaOutOfMemory(message)) => assert!(message.contains("200 bytes")),
            other => panic!("expected out of memory, got {:?}", other.map(|b| b.bytes())),
        }
        drop(kept); // freed memory counts no more
        assert!(dev.alloc(4096).is_ok());
    }
}
