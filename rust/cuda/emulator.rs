//! The host emulator: a [`DeviceStream`] for tests and machines without a
//! GPU. It is one call on an emulated device ([`device`]): the same host
//! logic a GPU call runs (`device.rs`: streams from a pool, pinned staging
//! and its reuse, readback, events, the release stream) over the emulator's
//! driver (`emulated.rs`), whose streams run asynchronously on threads of
//! their own, whose memory is host memory checked for hazards between
//! streams, and whose launches run the kernel functions of
//! `cuda/gt_batch.cuh` (the checked host build: block lanes shuffled and
//! checked for races) for every thread index, spread over the engine's pool.
//! It lets CI run the whole CUDA pipeline — decomposition, scans, scratch
//! layout, packing, copies and their order — without a GPU.
//!
//! Per call it also counts the memory the call has in use (its peak, and a
//! cap that makes allocations fail as out of memory:
//! [`Emulator::with_memory_limit`]), records what the call asked for
//! ([`Emulator::traced`]), and records, process-wide, how each exported
//! buffer (a tensor's) was released and which consumer streams the release
//! waited for ([`take_releases`]).

use super::device::{Device, DeviceCall};
use super::emulated::Emulated;
use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use crate::error::{Error, Result};
use crate::kernels::{DevPtr, GtLaneCheck, Kernel};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The process's emulated device, made at first use (and again in a forked
/// child, where the parent's threads do not exist).
pub fn device() -> Result<Arc<Device<Emulated>>> {
    static DEVICE: Mutex<Option<(u32, Arc<Device<Emulated>>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut shared = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    match shared.as_ref() {
        Some((made_by, device)) if *made_by == pid => Ok(device.clone()),
        _ => {
            let device = Arc::new(Device::new(Emulated::new(lane_check(0)))?);
            if let Some(parent) = shared.replace((pid, device.clone())) {
                std::mem::forget(parent); // its threads are the parent's
            }
            Ok(device)
        }
    }
}

/// How kernels check their lanes: shuffled from a fresh seed, the barrier
/// of id `removed` (> 0) left out; counting their accesses for the cost
/// model when `GPU_TOK_DEVICE_COUNTS=1` (off by default: CI's emulator runs
/// at full speed).
fn lane_check(removed: u32) -> GtLaneCheck {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    GtLaneCheck {
        removed,
        count: u32::from(std::env::var_os("GPU_TOK_DEVICE_COUNTS").is_some_and(|v| v == "1")),
        seed: (nanos ^ NEXT.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)) | 1,
    }
}

/// One call on the emulated device; `chunk_bytes` is small in tests to force many chunks.
pub struct Emulator {
    call: DeviceCall<Emulated>,
    /// Bytes the call has allocated and not freed, the most at once, and the cap.
    in_use: Arc<AtomicUsize>,
    peak: AtomicUsize,
    limit: Option<usize>,
    /// The calling thread's time on the device's behalf when the call started (ns).
    host_ns_before: u64,
    /// What the call asked for, in order, when traced.
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

/// How an exported buffer was released: its size and the consumer streams
/// the release waited for (an event recorded on each, waited for by the
/// release stream, before the memory can be reused).
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

/// Memory of one call: what it frees stops counting as the call's.
struct Counted {
    inner: Arc<dyn Memory>,
    in_use: Arc<AtomicUsize>,
}

impl Memory for Counted {
    fn free(&self, ptr: DevPtr, bytes: usize, consumers: &[u64]) {
        self.in_use.fetch_sub(bytes.max(8), Ordering::Relaxed);
        self.inner.free(ptr, bytes, consumers);
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        self.inner.read(ptr, dst)
    }

    fn location(&self) -> Location {
        Location::Host
    }
}

/// Memory of an exported buffer: its release is recorded.
struct Recorded {
    inner: Arc<dyn Memory>,
}

impl Memory for Recorded {
    fn free(&self, ptr: DevPtr, bytes: usize, consumers: &[u64]) {
        {
            let mut releases = RELEASES.lock().unwrap_or_else(|e| e.into_inner());
            if releases.len() == RELEASES_KEPT {
                releases.remove(0);
            }
            releases.push(Release {
                bytes,
                waited_for: consumers.to_vec(),
            });
        }
        self.inner.free(ptr, bytes, consumers);
    }

    fn check_consumer(&self, handle: u64) -> Result<()> {
        self.inner.check_consumer(handle)
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        self.inner.read(ptr, dst)
    }

    fn location(&self) -> Location {
        Location::Host
    }
}

impl Emulator {
    /// A call on the process's emulated device.
    pub fn new(chunk_bytes: usize) -> Self {
        Self::on(device(), chunk_bytes)
    }

    /// A call on `device`; a device that could not be made (no thread
    /// could be started) gives a call that fails at its first operation.
    fn on(device: Result<Arc<Device<Emulated>>>, chunk_bytes: usize) -> Self {
        let call = device
            .and_then(|device| DeviceCall::acquire(&device, Some(chunk_bytes.max(1))))
            .expect("the emulated device starts (threads of its own)");
        Emulator {
            call,
            in_use: Arc::new(AtomicUsize::new(0)),
            peak: AtomicUsize::new(0),
            limit: None,
            host_ns_before: super::emulated::host_ns_for_the_device(),
            trace: None,
        }
    }

    /// A call whose allocations fail with `CudaOutOfMemory`, as a GPU's
    /// would, once it has `limit` bytes in use (for tests of the fallbacks).
    pub fn with_memory_limit(chunk_bytes: usize, limit: usize) -> Self {
        Emulator {
            limit: Some(limit),
            ..Emulator::new(chunk_bytes)
        }
    }

    /// A call that records every operation (`trace`).
    pub fn traced(chunk_bytes: usize) -> Self {
        Emulator {
            trace: Some(Mutex::new(Vec::new())),
            ..Emulator::new(chunk_bytes)
        }
    }

    /// A call on a device of its own whose block-cooperative kernels skip
    /// the barrier (`GT_SYNC`) of this id wherever they pass it: for tests
    /// that the lane check catches a barrier removed.
    #[cfg(test)]
    pub fn without_barrier(chunk_bytes: usize, barrier: u32) -> Self {
        let device = Device::new(Emulated::new(lane_check(barrier))).map(Arc::new);
        Self::on(device, chunk_bytes)
    }

    /// A call whose `upload_beside` leaves out the stream's wait for the
    /// copy: for tests that the emulator catches a wait removed.
    #[cfg(test)]
    pub fn without_copy_wait(chunk_bytes: usize) -> Self {
        let mut dev = Emulator::new(chunk_bytes);
        dev.call.skip_copy_wait();
        dev
    }

    /// The barriers (`GT_SYNC`, by id: line and file) blocks of the device
    /// have passed so far.
    #[cfg(test)]
    pub fn barriers_seen(&self) -> Vec<u32> {
        self.call.device().driver.barriers_seen()
    }

    /// The counts of the device's launches since they were last taken (the
    /// process's device counts when `GPU_TOK_DEVICE_COUNTS=1`).
    pub fn take_launch_counts(&self) -> Vec<super::emulated::LaunchCounts> {
        self.call.device().driver.take_launch_counts()
    }

    /// The most bytes the call has had in use at once so far.
    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
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

    /// Counts `bytes` in, or fails as out of memory past the limit.
    fn count(&self, bytes: usize) -> Result<()> {
        let bytes = bytes.max(8);
        let used = self.in_use.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if let Some(limit) = self.limit.filter(|&limit| used > limit) {
            self.in_use.fetch_sub(bytes, Ordering::Relaxed);
            return Err(Error::CudaOutOfMemory(format!(
                "the emulated device ran out of memory allocating {bytes} bytes \
                 ({limit} bytes in all)"
            )));
        }
        self.peak.fetch_max(used, Ordering::Relaxed);
        Ok(())
    }

    /// `buf` counted as the call's until freed (its `bytes` counted in already).
    fn counted(&self, buf: Result<DevBuf>, bytes: usize) -> Result<DevBuf> {
        match buf {
            Ok(buf) => {
                let inner = buf.memory();
                Ok(buf.with_memory(Arc::new(Counted {
                    inner,
                    in_use: self.in_use.clone(),
                })))
            }
            Err(err) => {
                self.in_use.fetch_sub(bytes.max(8), Ordering::Relaxed);
                Err(err)
            }
        }
    }
}

impl DeviceStream for Emulator {
    fn location(&self) -> Location {
        Location::Host
    }

    fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        self.count(bytes)?;
        self.counted(self.call.alloc(bytes), bytes)
    }

    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()> {
        self.record(Op::Upload(src.len()));
        self.call.upload(dst, offset, src)
    }

    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        self.record(Op::Upload(bytes));
        self.count(bytes)?;
        self.counted(self.call.upload_with(bytes, fill), bytes)
    }

    fn upload_beside(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        self.record(Op::Upload(bytes));
        self.count(bytes)?;
        self.counted(self.call.upload_beside(bytes, fill), bytes)
    }

    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.record(Op::Download(dst.len()));
        self.call.download(src, offset, dst)
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        self.record(Op::Launch(kernel));
        self.call.launch(kernel, args, n)
    }

    fn mark(&self) -> Result<Mark> {
        self.call.mark()
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        self.call.elapsed_ms(from, to)
    }

    fn chunk_bytes(&self) -> usize {
        self.call.chunk_bytes()
    }

    fn synchronize(&self) -> Result<()> {
        self.record(Op::Synchronize);
        self.call.synchronize()
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        self.record(Op::Export(buf.bytes()));
        let buf = self.call.export(buf);
        let inner = buf.memory();
        buf.with_memory(Arc::new(Recorded { inner }))
    }

    fn read_only(&self, buf: &DevBuf) {
        self.call.read_only(buf)
    }

    fn emulated_device_ms(&self) -> Option<f64> {
        let ns = super::emulated::host_ns_for_the_device();
        Some(ns.saturating_sub(self.host_ns_before) as f64 / 1e6)
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
                let dev = Emulator::without_barrier(1 << 20, 0); // a device of its own, every barrier kept
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
                        Err(Error::Cuda(message)) => {
                            assert!(message.contains("race"), "{message}");
                            // (shown with --nocapture: what the check reports)
                            eprintln!("barrier {barrier:#x} removed: {message}");
                        }
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
    fn a_tensor_outliving_its_consumer_stream_is_freed_after_the_whole_device() {
        let device = Arc::new(Device::new(Emulated::new(lane_check(0))).unwrap());
        let call = DeviceCall::acquire(&device, Some(1024)).unwrap();
        for destroyed in [false, true] {
            let buf = call.export(call.alloc(64).unwrap());
            buf.export_to(ConsumerStream::Handle(0x5eed)).unwrap();
            if destroyed {
                device.driver.destroy_consumer(0x5eed);
            }
            let before = device.driver.device_waits();
            drop(buf);
            // Never recorded on: the free waits for the whole device instead.
            assert_eq!(device.driver.device_waits() - before, u64::from(destroyed));
        }
        assert!(call
            .alloc(8)
            .unwrap()
            .export_to(ConsumerStream::Handle(0x5eed))
            .is_err());
    }

    #[test]
    fn a_wait_removed_between_the_copy_stream_and_the_kernels_is_caught() {
        use crate::engine::{Engine, Settings};
        let engine = Engine::from_json(INVERTED_SPM).unwrap();
        let texts = ["a ab b", "ab ab ab ab", "b a b a b a b a b a"];
        let inputs: Vec<_> = texts.iter().map(|t| (*t, None)).collect();
        // 24-byte chunks: several, each copied beside the kernels of the one before.
        let kept = Emulator::new(24);
        engine
            .encode_batch_on(&kept, &inputs, &Settings::default())
            .unwrap();
        let removed = Emulator::without_copy_wait(24);
        match engine.encode_batch_on(&removed, &inputs, &Settings::default()) {
            Err(Error::Cuda(message)) => {
                assert!(
                    message.contains("kernel gt_pretok_count")
                        && message.contains("no event between"),
                    "{message}"
                );
                eprintln!("copy wait removed: {message}"); // (shown with --nocapture)
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("the kernels read the copy stream's upload with no event between"),
        }
    }

    #[test]
    fn large_results_come_back_through_the_pinned_readback_buffers() {
        use crate::cuda::stream::DeviceStreamExt;
        // Over 1 MiB: two 8 MiB pinned buffers in turn (download_pinned),
        // through the call's stream and through the legacy stream (Memory::read).
        let dev = Emulator::new(1 << 20);
        let values: Vec<u64> = (0..(20 << 20) / 8).map(|i| i * 2_654_435_761).collect();
        let buf = dev.upload_new(&values).unwrap();
        assert_eq!(
            dev.download_vec::<u64>(&buf, 0, values.len()).unwrap(),
            values
        );
        dev.synchronize().unwrap();
        let exported = dev.export(buf);
        assert_eq!(exported.read_vec::<u64>(values.len()).unwrap(), values);
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
