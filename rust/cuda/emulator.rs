//! The host emulator: a [`DeviceStream`] whose memory is host memory and whose
//! launches run the kernel functions of `cuda/gt_batch.cuh` (compiled for the
//! host by build.rs) for every thread index, spread over the engine's pool.
//! It lets CI run the whole CUDA pipeline — decomposition, scans, scratch
//! layout, packing — without a GPU; only launch and copy mechanics differ.
//! Its kernels are the checked host build (cuda/gt_host_checked.cpp): the
//! lanes of a block-cooperative kernel run shuffled, phase by phase, and a
//! race between two lanes fails the launch (cuda/gt_lane_check.h).
//!
//! For tests of the memory rules it also records, process-wide, how each
//! exported buffer (a tensor's) was released and which consumer streams the
//! release waited for ([`take_releases`]), and can cap its memory so that
//! allocations fail as out of memory ([`Emulator::with_memory_limit`]).

use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use crate::error::{Error, Result};
use crate::kernels::{self, DevPtr, GtLaneCheck, Kernel};
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
    /// How launches check the lanes of block-cooperative kernels.
    lanes: GtLaneCheck,
    /// The barriers (`GT_SYNC`, by id) blocks have passed so far.
    barriers: Mutex<Vec<u32>>,
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
            lanes: GtLaneCheck {
                removed: 0,
                _pad: 0,
                seed: lane_seed(),
            },
            barriers: Mutex::new(Vec::new()),
        }
    }

    /// The barriers (`GT_SYNC`, by id: line and file) blocks have passed so far.
    #[cfg(test)]
    pub fn barriers_seen(&self) -> Vec<u32> {
        self.barriers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// An emulator whose block-cooperative kernels skip the barrier
    /// (`GT_SYNC`) of this id wherever they pass it: for tests that the lane
    /// check catches a barrier removed.
    #[cfg(test)]
    pub fn without_barrier(chunk_bytes: usize, barrier: u32) -> Self {
        let mut dev = Emulator::new(chunk_bytes);
        dev.lanes.removed = barrier;
        dev
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

/// Threads per task when spreading a launch over the pool: a block, so that
/// a block-cooperative kernel's lanes run on one host thread.
const THREADS_PER_TASK: u32 = kernels::LANES;

/// A seed for the lanes' shuffled orders: another for each emulator.
fn lane_seed() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)) | 1
}

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
        let found = crate::pool::current().map(tasks, |t| {
            let begin = t as u32 * THREADS_PER_TASK;
            let end = (begin + THREADS_PER_TASK).min(n);
            // SAFETY: the pipeline built `args` for this kernel over live host
            // buffers sized for n threads; threads write disjoint outputs, as on a GPU.
            Ok::<_, Error>(unsafe {
                kernels::host_run_checked(kernel, args, begin, end, &self.lanes)
            })
        })?;
        add_time(&self.device_ns, start);
        let mut barriers = self.barriers.lock().unwrap_or_else(|e| e.into_inner());
        for f in &found {
            for &id in &f.barriers[..f.n_barriers as usize] {
                if !barriers.contains(&id) {
                    barriers.push(id);
                }
            }
        }
        drop(barriers);
        if let Some(race) = found.iter().find(|f| f.found != 0) {
            return Err(Error::Cuda(format!(
                "the emulator found a race between the lanes of {}: {race} \
                 (lane order seed {:#x})",
                kernel.name(),
                self.lanes.seed
            )));
        }
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

    /// A SentencePiece-style BPE (no byte fallback) whose merge "ab a" ranks
    /// before "a b", which makes its "ab": a round of "a b" is cut short.
    const INVERTED_SPM: &str = r#"{"version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [], "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "merges": ["ab a", "a b", "b b", "bb bb"],
                  "vocab": {"▁": 0, "a": 1, "b": 2, "ab": 3, "aba": 4, "bb": 5, "bbbb": 6}}}"#;

    /// A byte-level BPE over the 256 byte characters with `merges`.
    fn byte_level(merges: &[&str]) -> String {
        let alphabet = crate::plan::bytelevel::alphabet();
        let mut vocab: Vec<String> = alphabet.iter().map(|c| c.to_string()).collect();
        for merge in merges {
            let token = merge.replace(' ', "");
            if !vocab.contains(&token) {
                vocab.push(token);
            }
        }
        let vocab: serde_json::Map<String, serde_json::Value> = vocab
            .into_iter()
            .enumerate()
            .map(|(id, token)| (token, id.into()))
            .collect();
        serde_json::json!({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "post_processor": null, "decoder": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false,
                              "use_regex": true},
            "model": {"type": "BPE", "dropout": null, "unk_token": null,
                      "continuing_subword_prefix": null, "end_of_word_suffix": null,
                      "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                      "vocab": vocab, "merges": merges}})
        .to_string()
    }

    /// Long words that end the rounds each way: no merge left, a round
    /// cut short, the heap merge after rounds that merge little.
    fn long_words() -> Vec<(String, Vec<String>)> {
        let mut rng = 7u32;
        let mut random = |units: [&str; 2]| -> String {
            let mut unit = || {
                rng = rng.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                units[(rng >> 16) as usize % 2]
            };
            let mut word = String::new();
            while word.len() < 20_000 {
                word.push_str(unit());
            }
            word
        };
        // (No "a a" in SentencePiece's: no token joins them, so it would cut its words there.)
        let (spm_random, random) = (random(["ab", "b"]), random(["a", "b"]));
        vec![
            (
                INVERTED_SPM.to_string(),
                vec!["ab".repeat(9000), "b".repeat(20_000), spm_random],
            ),
            (
                byte_level(&["a a", "aa aa", "b b", "ab a", "a b"]),
                vec!["a".repeat(20_000), "ab".repeat(9000), random],
            ),
        ]
    }

    #[test]
    fn the_lane_check_catches_every_barrier_removed() {
        use crate::engine::{Engine, Settings};
        for (json, words) in long_words() {
            let engine = Engine::from_json(&json).unwrap();
            for word in words {
                let inputs = [(word.as_str(), None)];
                let dev = Emulator::new(1 << 20);
                let settings = Settings::default();
                let want = engine.encode_batch(&inputs, &settings).unwrap().ids;
                let batch = engine.encode_batch_on(&dev, &inputs, &settings).unwrap();
                let got = batch.fields[0].1.read_vec::<i64>(want.len()).unwrap();
                assert_eq!(got, want, "{}...", &word[..20]);
                let barriers = dev.barriers_seen();
                assert!(barriers.len() >= 10, "{barriers:x?}");
                for barrier in barriers {
                    let dev = Emulator::without_barrier(1 << 20, barrier);
                    match engine.encode_batch_on(&dev, &inputs, &settings) {
                        Err(Error::Cuda(message)) => assert!(message.contains("race"), "{message}"),
                        Err(other) => panic!("barrier {barrier:#x}: {other}"),
                        Ok(_) => panic!(
                            "barrier {barrier:#x} (line {}) removed, no race found in {}...",
                            barrier & 0xFFFF,
                            &word[..20]
                        ),
                    }
                }
            }
        }
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
