//! The emulator's CUDA driver ([`Emulated`]): the [`Driver`] calls of a GPU
//! modelled on the host, so that a [`super::device::Device`] runs its
//! staging, readback, stream and memory logic in CI, and fails where a GPU
//! would.
//!
//! - Streams run asynchronously: each is a queue of work that a thread of its
//!   own runs in order. Events mark a point of a stream; a stream that waits
//!   for one really waits; the host waits on events, streams or the device.
//! - Memory: device memory (host memory filled with a pattern, so a kernel
//!   reading what it never wrote gives wrong ids) from a stream-ordered pool
//!   that reuses a block freed on another stream only when an event orders
//!   the two streams or the free is done (never by a dependency of its own:
//!   `REUSE_ALLOW_INTERNAL_DEPENDENCIES` off, as `driver.rs` sets it);
//!   pinned host memory for staging.
//! - Hazards: every allocation records the stream (or the host) and the
//!   operation that last wrote it and read it, with a vector clock per stream
//!   and one for the host (what each is known to follow: events waited for,
//!   synchronisations). An operation that touches memory another stream
//!   wrote (or reads, for a write; or touches, for a free) with no event in
//!   between is refused with an error naming both (what compute-sanitizer's
//!   racecheck and synccheck report on a GPU); the host writing or reading
//!   pinned memory a queued copy still uses is refused alike. A kernel
//!   touches every allocation its arguments point into: as a write, except
//!   memory marked read-only (the model's tables).
//! - Kernels run on the engine's pool from the checked host build (block
//!   lanes shuffled and checked, cuda/gt_lane_check.h); a race there is the
//!   stream's error, reported when the host next waits on it.
//! - Counts, when the device is made to count (`GtLaneCheck::count`, off by
//!   default: the hooks then cost a branch): per launch, the global memory
//!   sectors, atomics per word, threads that worked and the longest thread's
//!   work ([`LaunchCounts`]), for the cost model of benches/device_model.py.
//!
//! Example of a hazard: the copy stream uploads a chunk's text; the call's
//! stream must wait for an event recorded after that copy before a kernel
//! reads it. Without the wait the launch fails: "stream 2 (kernel
//! gt_pretok_count) reads memory stream 3 (copy to the device) wrote, with
//! no event between".

use super::device::Driver;
use super::stream::Location;
use crate::error::{Error, Result};
use crate::kernels::{self, DevPtr, GtLaneCheck, GtLaneCounts, Kernel};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

thread_local! {
    /// Nanoseconds this thread has spent on an emulated device's behalf.
    static FOR_THE_DEVICE_NS: Cell<u64> = const { Cell::new(0) };
}

/// Nanoseconds this thread has spent on an emulated device's behalf so far:
/// waiting for its streams and filling fresh device memory, time a GPU would
/// have left the host for its own work.
pub fn host_ns_for_the_device() -> u64 {
    FOR_THE_DEVICE_NS.with(Cell::get)
}

fn add_host_ns(since: Instant) {
    let ns = since.elapsed().as_nanos().min(u64::MAX as u128) as u64;
    FOR_THE_DEVICE_NS.with(|total| total.set(total.get().saturating_add(ns)));
}

/// A stream: its number (0 is the legacy default stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmuStream(usize);

/// What a vector clock's entries count: the host's operations (entry 0),
/// then each stream's (entry 1 + its number).
type Clock = Vec<u64>;

fn join(into: &mut Clock, from: &Clock) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

const HOST: usize = 0;

fn agent_of(stream: usize) -> usize {
    1 + stream
}

/// One access to an allocation: who (agent), their count at it, and what.
#[derive(Clone, Debug)]
struct Access {
    agent: usize,
    seq: u64,
    what: String,
}

impl Access {
    /// True when `clock` follows this access.
    fn before(&self, clock: &Clock) -> bool {
        clock.get(self.agent).copied().unwrap_or(0) >= self.seq
    }

    fn who(&self) -> String {
        match self.agent {
            HOST => format!("the host ({})", self.what),
            agent => format!("stream {} ({})", agent - 1, self.what),
        }
    }
}

/// A live allocation: device memory or pinned host memory.
struct Block {
    storage: Box<[u64]>,
    bytes: usize,
    pinned: bool,
    read_only: bool,
    written: Option<Access>,
    read: Vec<Access>,
}

/// A freed block the pool keeps for reuse.
struct Freed {
    storage: Box<[u64]>,
    stream: usize,
    seq: u64,
}

/// Work queued on a stream.
enum Work {
    Run(Box<dyn FnOnce() -> Result<()> + Send>),
    /// Wait until stream `.0` has done `.1` operations.
    Wait(usize, u64),
    /// Note the time (a timing event's record).
    Stamp(Arc<Mutex<Option<Instant>>>),
    /// Nothing to run: a free's place in the stream's order.
    Mark,
}

struct StreamState {
    queue: VecDeque<Work>,
    /// Operations queued and done so far.
    queued: u64,
    done: u64,
    clock: Clock,
    /// The first error of its queued work (a race between a kernel's lanes),
    /// reported when the host next waits on it.
    error: Option<Error>,
    /// A consumer's stream (another library's): no work of ours runs there.
    external: bool,
    /// Wakes its thread when work is queued.
    queued_work: Arc<Condvar>,
}

struct State {
    streams: Vec<StreamState>,
    /// What the host is known to follow (one clock for every host thread:
    /// they hand work to each other through locks).
    host: Clock,
    /// Live allocations by address.
    blocks: BTreeMap<u64, Block>,
    freed: Vec<Freed>,
    /// Freed bytes the pool keeps; bytes in use, and their peak.
    keep: u64,
    used: u64,
    peak: u64,
    /// Consumer stream handles, by stream; those their owner destroyed (tests).
    consumers: HashMap<u64, usize>,
    destroyed: Vec<u64>,
    /// Times the host waited for the whole device.
    device_waits: u64,
    closing: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes whoever waits for a stream's work to be done.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(state).unwrap_or_else(|e| e.into_inner())
    }
}

/// An event: the point of a stream it was last recorded at.
pub struct EmuEvent {
    recorded: Mutex<Option<Recorded>>,
    timing: bool,
}

#[derive(Clone)]
struct Recorded {
    stream: usize,
    seq: u64,
    clock: Clock,
    at: Option<Arc<Mutex<Option<Instant>>>>,
}

impl EmuEvent {
    fn get(&self) -> Option<Recorded> {
        self.recorded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What one launch did to global memory, summed over its threads (the
/// accesses the kernels declare; see `GtLaneCounts` in cuda/gt_lane_check.h
/// for how a warp's sectors are counted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchCounts {
    pub kernel: Option<Kernel>,
    /// Threads launched (a block-cooperative kernel's lanes), and those that
    /// took an item of work (`GT_WORK_ITEM`: a piece, a word, an element).
    pub threads: u64,
    pub working: u64,
    /// 32-byte sectors read and written (each once per warp).
    pub read_sectors: u64,
    pub write_sectors: u64,
    /// The most sectors one thread touched: the launch's tail.
    pub tail: u64,
    pub atomics: u64,
    /// Atomics per word, most hit first (words past the first 16 a block
    /// of threads hit are in `atomics_untracked`, taken as spread out).
    pub atomic_words: Vec<(u64, u64)>,
    pub atomics_untracked: u64,
}

impl LaunchCounts {
    fn add(&mut self, part: &GtLaneCounts) {
        self.threads += part.threads;
        self.working += part.working;
        self.read_sectors += part.read_sectors;
        self.write_sectors += part.write_sectors;
        self.tail = self.tail.max(part.tail);
        self.atomics += part.atomics;
        self.atomics_untracked += part.atomics_untracked;
        for k in 0..part.n_atomic_words as usize {
            let (word, hits) = (part.atomic_word[k], part.atomic_hits[k]);
            match self.atomic_words.iter_mut().find(|w| w.0 == word) {
                Some(entry) => entry.1 += hits,
                None => self.atomic_words.push((word, hits)),
            }
        }
    }

    /// The most atomics on one word (they serialise in L2).
    pub fn same_address_max(&self) -> u64 {
        self.atomic_words.iter().map(|w| w.1).max().unwrap_or(0)
    }
}

/// The emulated driver of one emulated device.
pub struct Emulated {
    shared: Arc<Shared>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// How kernels check their block lanes (each launch shuffles anew).
    lanes: GtLaneCheck,
    launches: AtomicU64,
    /// The barriers (`GT_SYNC`, by id) blocks have passed so far.
    barriers: Arc<Mutex<Vec<u32>>>,
    /// The launches' counts, oldest first, when `lanes.count` asks.
    counts: Arc<Mutex<Vec<LaunchCounts>>>,
    /// The process that made it (a forked child uses it no more).
    pid: u32,
}

/// The pattern fresh device memory is filled with.
const PATTERN: u64 = 0xA5A5_A5A5_A5A5_A5A5;
/// Free memory the emulated device reports (chunks are sized by the caller).
const FREE_BYTES: usize = 64 << 30;

impl Emulated {
    /// A device whose kernels check their lanes as `lanes` asks.
    pub fn new(lanes: GtLaneCheck) -> Emulated {
        let emulated = Emulated {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    streams: Vec::new(),
                    host: vec![0],
                    blocks: BTreeMap::new(),
                    freed: Vec::new(),
                    keep: 0,
                    used: 0,
                    peak: 0,
                    consumers: HashMap::new(),
                    destroyed: Vec::new(),
                    device_waits: 0,
                    closing: false,
                }),
                changed: Condvar::new(),
            }),
            threads: Mutex::new(Vec::new()),
            lanes,
            launches: AtomicU64::new(0),
            barriers: Arc::new(Mutex::new(Vec::new())),
            counts: Arc::new(Mutex::new(Vec::new())),
            pid: std::process::id(),
        };
        let legacy = emulated.add_stream(false);
        debug_assert_eq!(legacy, Some(0));
        emulated
    }

    /// The counts of the launches since the last call, oldest first (none
    /// unless the device counts: `GtLaneCheck::count`).
    pub fn take_launch_counts(&self) -> Vec<LaunchCounts> {
        std::mem::take(&mut *self.counts.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The barriers (`GT_SYNC`, by id: line and file) blocks have passed so far.
    pub fn barriers_seen(&self) -> Vec<u32> {
        self.barriers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Marks a consumer's stream handle destroyed by its owner (tests of
    /// the rule that it must outlive the tensors exported to it).
    #[cfg(test)]
    pub fn destroy_consumer(&self, handle: u64) {
        self.shared.lock().destroyed.push(handle);
    }

    /// Times the host has waited for the whole device.
    #[cfg(test)]
    pub fn device_waits(&self) -> u64 {
        self.shared.lock().device_waits
    }

    /// A new stream (with a thread running its work, unless `external`);
    /// None when no thread could be started.
    fn add_stream(&self, external: bool) -> Option<usize> {
        let mut state = self.shared.lock();
        let id = state.streams.len();
        let mut clock = state.host.clone();
        clock.resize(agent_of(id) + 1, 0);
        state.streams.push(StreamState {
            queue: VecDeque::new(),
            queued: 0,
            done: 0,
            clock,
            error: None,
            external,
            queued_work: Arc::new(Condvar::new()),
        });
        let queued_work = state.streams[id].queued_work.clone();
        drop(state);
        if !external {
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("gpu_tok-emulated-stream-{id}"))
                .spawn(move || run_stream(&shared, id, &queued_work));
            match spawned {
                Ok(thread) => self
                    .threads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(thread),
                Err(_) => {
                    self.shared.lock().streams[id].external = true; // never used
                    return None;
                }
            }
        }
        Some(id)
    }

    /// Queues `work` on `stream` after checking `accesses` (address, bytes,
    /// write, what) against the memory's history; returns its number in the
    /// stream's order. A hazard refuses the work.
    fn push(
        &self,
        state: &mut State,
        stream: usize,
        accesses: &[(u64, usize, bool)],
        what: &str,
        work: Work,
    ) -> Result<u64> {
        let agent = agent_of(stream);
        let host = state.host.clone();
        let s = &mut state.streams[stream];
        join(&mut s.clock, &host);
        let seq = s.queued + 1;
        let clock = s.clock.clone();
        for &(ptr, bytes, write) in accesses {
            check(state, &clock, agent, seq, ptr, bytes, write, what)?;
        }
        let s = &mut state.streams[stream];
        s.queued = seq;
        s.clock[agent] = seq;
        if s.external {
            s.done = seq;
            self.shared.changed.notify_all();
        } else {
            s.queue.push_back(work);
            s.queued_work.notify_one();
        }
        Ok(seq)
    }

    /// Waits until `stream` has done `seq` operations; the host then follows them.
    fn wait_done<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        stream: usize,
        seq: u64,
        clock: &Clock,
    ) -> MutexGuard<'a, State> {
        if state.streams[stream].done < seq {
            let since = Instant::now();
            while state.streams[stream].done < seq {
                state = self.shared.wait(state);
            }
            add_host_ns(since);
        }
        join(&mut state.host, clock);
        state
    }

    /// Takes `stream`'s error, if its work failed.
    fn take_error(state: &mut State, stream: usize) -> Result<()> {
        match state.streams[stream].error.take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Gives back the storage of done frees beyond what the pool keeps.
    fn release_freed(state: &mut State, keep: u64) {
        let mut kept: u64 = state.freed.iter().map(|f| 8 * f.storage.len() as u64).sum();
        let streams = &state.streams;
        state.freed.retain(|f| {
            let done = streams[f.stream].done >= f.seq;
            let release = kept > keep && done;
            if release {
                kept -= 8 * f.storage.len() as u64;
            }
            !release
        });
    }
}

/// Checks an access by `agent` (whose clock is `clock`, count `seq`) to
/// `bytes` at `ptr`, and records it. Memory outside every allocation (a
/// table of another device, a past-the-end pointer) is not checked.
#[allow(clippy::too_many_arguments)]
fn check(
    state: &mut State,
    clock: &Clock,
    agent: usize,
    seq: u64,
    ptr: u64,
    bytes: usize,
    write: bool,
    what: &str,
) -> Result<()> {
    let Some((_, block)) = state.blocks.range_mut(..=ptr).next_back() else {
        return Ok(());
    };
    let start = block.storage.as_ptr() as u64;
    if ptr >= start + block.bytes.max(1) as u64
        || ptr + bytes as u64 > start + 8 * block.storage.len() as u64
    {
        return Ok(());
    }
    let write = write && !(block.read_only && what.starts_with("kernel"));
    let me = Access {
        agent,
        seq,
        what: what.to_string(),
    };
    let unordered = |other: &Access| other.agent != agent && !other.before(clock);
    let (verb, kind) = match write {
        true => ("writes", "wrote"),
        false => ("reads", "wrote"),
    };
    if let Some(w) = block.written.as_ref().filter(|w| unordered(w)) {
        return Err(hazard(&me, verb, kind, w));
    }
    if write {
        if let Some(r) = block.read.iter().find(|r| unordered(r)) {
            return Err(hazard(&me, verb, "reads", r));
        }
        block.written = Some(me);
        block.read.clear();
    } else {
        block.read.retain(|r| r.agent != agent);
        block.read.push(me);
    }
    Ok(())
}

fn hazard(me: &Access, verb: &str, kind: &str, other: &Access) -> Error {
    Error::Cuda(format!(
        "the emulator found a hazard: {} {verb} memory {} {kind}, with no event between \
         (on a GPU: a race)",
        me.who(),
        other.who()
    ))
}

/// A stream's thread: runs its work in order until the device closes.
fn run_stream(shared: &Shared, id: usize, queued_work: &Condvar) {
    let mut state = shared.lock();
    loop {
        let Some(work) = state.streams[id].queue.pop_front() else {
            if state.closing {
                return;
            }
            state = queued_work.wait(state).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        match work {
            Work::Wait(other, seq) => {
                while state.streams[other].done < seq && !state.closing {
                    state = shared.wait(state);
                }
            }
            Work::Run(run) => {
                drop(state);
                let outcome = run();
                state = shared.lock();
                if let Err(err) = outcome {
                    state.streams[id].error.get_or_insert(err);
                }
            }
            Work::Stamp(at) => *at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now()),
            Work::Mark => {}
        }
        state.streams[id].done += 1;
        shared.changed.notify_all();
    }
}

impl Drop for Emulated {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closing = true;
        for stream in &state.streams {
            stream.queued_work.notify_one();
        }
        drop(state);
        self.shared.changed.notify_all();
        if self.forked() {
            return; // the threads are the parent's
        }
        for thread in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = thread.join();
        }
    }
}

/// A raw address moved into a stream's work (the hazard check has proved
/// that nothing else touches it meanwhile).
#[derive(Clone, Copy)]
struct Addr(u64);

// SAFETY: an address; the work using it is ordered with every other use (checked).
unsafe impl Send for Addr {}

impl Driver for Emulated {
    type Stream = EmuStream;
    type Event = EmuEvent;
    type Current = ();

    fn location(&self) -> Location {
        Location::Host
    }

    fn enter(&self) -> Result<()> {
        Ok(())
    }

    fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    fn forked_error(&self) -> Error {
        Error::CudaUnavailable("the emulated device belongs to the parent process".into())
    }

    fn new_stream(&self) -> Result<EmuStream> {
        self.add_stream(false)
            .map(EmuStream)
            .ok_or_else(|| Error::Cuda("the emulator could not start a stream's thread".into()))
    }

    fn legacy_stream(&self) -> EmuStream {
        EmuStream(0)
    }

    fn consumer_stream(&self, handle: u64) -> EmuStream {
        let known = self.shared.lock().consumers.get(&handle).copied();
        let id = known.unwrap_or_else(|| {
            let id = self.add_stream(true).unwrap_or(0);
            self.shared.lock().consumers.insert(handle, id);
            id
        });
        EmuStream(id)
    }

    fn check_consumer(&self, handle: u64) -> Result<()> {
        // Any handle stands for another library's stream, until destroyed.
        match self.shared.lock().destroyed.contains(&handle) {
            true => Err(Error::InvalidArgument(format!(
                "stream {handle:#x} is not a usable CUDA stream: destroyed"
            ))),
            false => Ok(()),
        }
    }

    fn synchronize(&self, stream: EmuStream) -> Result<()> {
        let state = self.shared.lock();
        let (seq, clock) = (
            state.streams[stream.0].queued,
            state.streams[stream.0].clock.clone(),
        );
        let mut state = self.wait_done(state, stream.0, seq, &clock);
        let keep = state.keep;
        Self::release_freed(&mut state, keep);
        Self::take_error(&mut state, stream.0)
    }

    fn synchronize_device(&self) {
        let mut state = self.shared.lock();
        state.device_waits += 1;
        for id in 0..state.streams.len() {
            let (seq, clock) = (state.streams[id].queued, state.streams[id].clock.clone());
            state = self.wait_done(state, id, seq, &clock);
        }
    }

    fn new_event(&self, timing: bool) -> Result<EmuEvent> {
        Ok(EmuEvent {
            recorded: Mutex::new(None),
            timing,
        })
    }

    fn record(&self, event: &EmuEvent, stream: EmuStream) -> Result<()> {
        let mut state = self.shared.lock();
        let at = event.timing.then(|| Arc::new(Mutex::new(None)));
        if let Some(at) = &at {
            self.push(&mut state, stream.0, &[], "event", Work::Stamp(at.clone()))?;
        }
        let host = state.host.clone();
        let s = &mut state.streams[stream.0];
        join(&mut s.clock, &host);
        *event.recorded.lock().unwrap_or_else(|e| e.into_inner()) = Some(Recorded {
            stream: stream.0,
            seq: s.queued,
            clock: s.clock.clone(),
            at,
        });
        Ok(())
    }

    fn wait_event(&self, stream: EmuStream, event: &EmuEvent) -> Result<()> {
        let Some(recorded) = event.get() else {
            return Ok(()); // never recorded: nothing to wait for, as in CUDA
        };
        let mut state = self.shared.lock();
        let work = Work::Wait(recorded.stream, recorded.seq);
        self.push(&mut state, stream.0, &[], "wait", work)?;
        join(&mut state.streams[stream.0].clock, &recorded.clock);
        Ok(())
    }

    fn is_done(&self, event: &EmuEvent) -> bool {
        event
            .get()
            .is_none_or(|r| self.shared.lock().streams[r.stream].done >= r.seq)
    }

    fn wait_host(&self, event: &EmuEvent) -> Result<()> {
        let Some(recorded) = event.get() else {
            return Ok(());
        };
        let state = self.shared.lock();
        let mut state = self.wait_done(state, recorded.stream, recorded.seq, &recorded.clock);
        Self::take_error(&mut state, recorded.stream)
    }

    fn elapsed_ms(&self, from: &EmuEvent, to: &EmuEvent) -> Result<f64> {
        let (Some(a), Some(b)) = (from.get(), to.get()) else {
            return Err(Error::Cuda(
                "elapsed time of an event never recorded".into(),
            ));
        };
        self.wait_host(to)?;
        self.wait_host(from)?;
        let stamp = |r: &Recorded| {
            r.at.as_ref()
                .and_then(|at| *at.lock().unwrap_or_else(|e| e.into_inner()))
        };
        match (stamp(&a), stamp(&b)) {
            (Some(a), Some(b)) => Ok(b.saturating_duration_since(a).as_secs_f64() * 1e3),
            _ => Err(Error::Cuda(
                "elapsed time of an event without timing".into(),
            )),
        }
    }

    fn alloc(&self, bytes: usize, stream: EmuStream) -> Result<DevPtr> {
        let words = bytes.div_ceil(8).max(1);
        let mut state = self.shared.lock();
        let s = stream.0;
        // Reuse: freed on this stream, or ordered before it by an event it
        // waited for, or done: never by a dependency of the pool's own.
        let clock = {
            let host = state.host.clone();
            join(&mut state.streams[s].clock, &host);
            state.streams[s].clock.clone()
        };
        let reusable = |f: &Freed| {
            (words..=2 * words).contains(&f.storage.len())
                && (f.stream == s
                    || clock.get(agent_of(f.stream)).copied().unwrap_or(0) >= f.seq
                    || state.streams[f.stream].done >= f.seq)
        };
        let reused = (0..state.freed.len())
            .filter(|&i| reusable(&state.freed[i]))
            .min_by_key(|&i| state.freed[i].storage.len());
        let storage = match reused {
            Some(i) => {
                let mut storage = state.freed.swap_remove(i).storage;
                let at = Addr(storage.as_mut_ptr() as u64);
                let len = storage.len();
                // Filled again in the stream's order: the block's last user may still run until then.
                let fill = move || {
                    // SAFETY: the block is this allocation's alone from here, in this stream's order.
                    unsafe { std::slice::from_raw_parts_mut(at.0 as *mut u64, len) }.fill(PATTERN);
                    Ok(())
                };
                self.push(&mut state, s, &[], "allocation", Work::Run(Box::new(fill)))?;
                storage
            }
            None => {
                let since = Instant::now();
                let storage = vec![PATTERN; words].into_boxed_slice();
                add_host_ns(since);
                storage
            }
        };
        let ptr = storage.as_ptr() as u64;
        let seq = state.streams[s].queued;
        state.blocks.insert(
            ptr,
            Block {
                storage,
                bytes,
                pinned: false,
                read_only: false,
                // Memory a stream allocates is its own until an event says otherwise.
                written: Some(Access {
                    agent: agent_of(s),
                    seq,
                    what: "allocation".into(),
                }),
                read: Vec::new(),
            },
        );
        state.used += 8 * words as u64;
        state.peak = state.peak.max(state.used);
        Ok(ptr)
    }

    fn free(&self, ptr: DevPtr, stream: EmuStream) {
        let mut state = self.shared.lock();
        let Some(bytes) = state.blocks.get(&ptr).map(|b| b.bytes) else {
            return;
        };
        match self.push(
            &mut state,
            stream.0,
            &[(ptr, bytes, true)],
            "free",
            Work::Mark,
        ) {
            Ok(seq) => {
                let block = state.blocks.remove(&ptr).expect("checked above");
                state.used -= 8 * block.storage.len() as u64;
                state.freed.push(Freed {
                    storage: block.storage,
                    stream: stream.0,
                    seq,
                });
            }
            // A free with a hazard keeps the memory (never reused): the
            // stream's error says why.
            Err(err) => {
                state.streams[stream.0].error.get_or_insert(err);
            }
        }
    }

    fn free_bytes(&self) -> Result<usize> {
        Ok(FREE_BYTES)
    }

    fn take_peak_use(&self) -> Option<u64> {
        let mut state = self.shared.lock();
        let peak = state.peak;
        state.peak = state.used;
        Some(peak)
    }

    fn keep_freed(&self, bytes: u64) {
        self.shared.lock().keep = bytes;
    }

    fn trim(&self) {
        Self::release_freed(&mut self.shared.lock(), 0);
    }

    fn read_only(&self, ptr: DevPtr) {
        if let Some(block) = self.shared.lock().blocks.get_mut(&ptr) {
            block.read_only = true;
        }
    }

    fn pin(&self, bytes: usize, _write_combined: bool) -> Result<*mut u8> {
        let mut storage = vec![0u64; bytes.div_ceil(8).max(1)].into_boxed_slice();
        let ptr = storage.as_mut_ptr() as *mut u8;
        let mut state = self.shared.lock();
        state.blocks.insert(
            ptr as u64,
            Block {
                storage,
                bytes,
                pinned: true,
                read_only: false,
                written: None,
                read: Vec::new(),
            },
        );
        Ok(ptr)
    }

    unsafe fn unpin(&self, ptr: *mut u8, bytes: usize) {
        if self.host_access(ptr, bytes, true).is_ok() {
            self.shared.lock().blocks.remove(&(ptr as u64));
        } // else a copy may still use it: kept (leaked), the error was the caller's to see
    }

    fn host_access(&self, ptr: *const u8, bytes: usize, write: bool) -> Result<()> {
        let mut state = self.shared.lock();
        if !state.blocks.get(&(ptr as u64)).is_some_and(|b| b.pinned) {
            return Ok(());
        }
        let seq = state.host[HOST] + 1;
        let clock = state.host.clone();
        let what = match write {
            true => "writing pinned memory",
            false => "reading pinned memory",
        };
        check(
            &mut state, &clock, HOST, seq, ptr as u64, bytes, write, what,
        )?;
        state.host[HOST] = seq;
        Ok(())
    }

    fn upload(&self, dst: DevPtr, src: &[u8], stream: EmuStream) -> Result<()> {
        let staged = src.to_vec(); // pageable: staged before this returns
        let at = Addr(dst);
        let copy = move || {
            // SAFETY: `dst` holds the bytes (the caller's), this stream's in its order (checked).
            unsafe {
                std::ptr::copy_nonoverlapping(staged.as_ptr(), at.0 as *mut u8, staged.len())
            };
            Ok(())
        };
        let mut state = self.shared.lock();
        let access = [(dst, src.len(), true)];
        self.push(
            &mut state,
            stream.0,
            &access,
            "copy to the device",
            Work::Run(Box::new(copy)),
        )?;
        Ok(())
    }

    unsafe fn upload_pinned(
        &self,
        dst: DevPtr,
        src: *const u8,
        bytes: usize,
        stream: EmuStream,
    ) -> Result<()> {
        let (from, to) = (Addr(src as u64), Addr(dst));
        let copy = move || {
            // SAFETY: the caller's contract; both ordered with their other uses (checked).
            unsafe { std::ptr::copy_nonoverlapping(from.0 as *const u8, to.0 as *mut u8, bytes) };
            Ok(())
        };
        let mut state = self.shared.lock();
        let access = [(src as u64, bytes, false), (dst, bytes, true)];
        self.push(
            &mut state,
            stream.0,
            &access,
            "copy to the device",
            Work::Run(Box::new(copy)),
        )?;
        Ok(())
    }

    unsafe fn download_pinned(
        &self,
        dst: *mut u8,
        src: DevPtr,
        bytes: usize,
        stream: EmuStream,
    ) -> Result<()> {
        let (from, to) = (Addr(src), Addr(dst as u64));
        let copy = move || {
            // SAFETY: the caller's contract; both ordered with their other uses (checked).
            unsafe { std::ptr::copy_nonoverlapping(from.0 as *const u8, to.0 as *mut u8, bytes) };
            Ok(())
        };
        let mut state = self.shared.lock();
        let access = [(src, bytes, false), (dst as u64, bytes, true)];
        self.push(
            &mut state,
            stream.0,
            &access,
            "copy to the host",
            Work::Run(Box::new(copy)),
        )?;
        Ok(())
    }

    fn download(&self, dst: &mut [u8], src: DevPtr, stream: EmuStream) -> Result<()> {
        let (from, to, bytes) = (Addr(src), Addr(dst.as_mut_ptr() as u64), dst.len());
        let copy = move || {
            // SAFETY: `dst` outlives the copy (the host waits for it below);
            // `src` holds the bytes, ordered with its other uses (checked).
            unsafe { std::ptr::copy_nonoverlapping(from.0 as *const u8, to.0 as *mut u8, bytes) };
            Ok(())
        };
        let mut state = self.shared.lock();
        let access = [(src, bytes, false)];
        let seq = self.push(
            &mut state,
            stream.0,
            &access,
            "copy to the host",
            Work::Run(Box::new(copy)),
        )?;
        let clock = state.streams[stream.0].clock.clone();
        let mut state = self.wait_done(state, stream.0, seq, &clock);
        Self::take_error(&mut state, stream.0)
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32, stream: EmuStream) -> Result<()> {
        if kernel.in_blocks() && n % kernels::LANES != 0 {
            return Err(Error::Cuda(format!(
                "{} is block-cooperative: {n} threads are not whole blocks of {}",
                kernel.name(),
                kernels::LANES
            )));
        }
        let mut state = self.shared.lock();
        // The allocations the arguments point into (at 8-byte aligned words).
        let mut touched: Vec<(u64, usize, bool)> = Vec::new();
        for word in args.chunks_exact(8) {
            let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            if let Some((&start, block)) = state.blocks.range(..=word).next_back() {
                let inside = word < start + block.bytes.max(1) as u64;
                if inside && !block.pinned && !touched.iter().any(|t| t.0 == start) {
                    touched.push((start, block.bytes, true));
                }
            }
        }
        let launch = self.launches.fetch_add(1, Ordering::Relaxed);
        let lanes = GtLaneCheck {
            seed: self.lanes.seed ^ launch.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ..self.lanes
        };
        let (args, barriers, counts) = (args.to_vec(), self.barriers.clone(), self.counts.clone());
        let run = move || {
            let tasks = n.div_ceil(kernels::LANES) as usize;
            let found = crate::pool::current().map(tasks, |t| {
                let begin = t as u32 * kernels::LANES;
                let end = (begin + kernels::LANES).min(n);
                // SAFETY: the pipeline built `args` for this kernel over live
                // buffers sized for n threads (the hazard check ordered them
                // with every other use); threads write disjoint outputs.
                let found = unsafe { kernels::host_run_checked(kernel, &args, begin, end, &lanes) };
                let counted = (lanes.count != 0).then(kernels::host_lane_counts);
                Ok::<_, Error>((found, counted))
            })?;
            if lanes.count != 0 {
                let mut launch = LaunchCounts {
                    kernel: Some(kernel),
                    ..LaunchCounts::default()
                };
                for part in found.iter().filter_map(|f| f.1.as_ref()) {
                    launch.add(part);
                }
                launch
                    .atomic_words
                    .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                counts
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(launch);
            }
            let found: Vec<_> = found.into_iter().map(|f| f.0).collect();
            let mut seen = barriers.lock().unwrap_or_else(|e| e.into_inner());
            for f in &found {
                for &id in &f.barriers[..f.n_barriers as usize] {
                    if !seen.contains(&id) {
                        seen.push(id);
                    }
                }
            }
            drop(seen);
            match found.iter().find(|f| f.found != 0) {
                Some(race) => Err(Error::Cuda(format!(
                    "the emulator found a race between the lanes of {}: {race} \
                     (lane order seed {:#x})",
                    kernel.name(),
                    lanes.seed
                ))),
                None => Ok(()),
            }
        };
        let what = format!("kernel {}", kernel.name());
        self.push(
            &mut state,
            stream.0,
            &touched,
            &what,
            Work::Run(Box::new(run)),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Emulated {
        /// Holds `stream` (its next work waits) until the sender is dropped or used.
        fn hold(&self, stream: EmuStream) -> std::sync::mpsc::Sender<()> {
            let (release, held) = std::sync::mpsc::channel::<()>();
            let held = Mutex::new(held);
            let wait = move || {
                let _ = held.lock().unwrap_or_else(|e| e.into_inner()).recv();
                Ok(())
            };
            let mut state = self.shared.lock();
            self.push(&mut state, stream.0, &[], "hold", Work::Run(Box::new(wait)))
                .unwrap();
            release
        }
    }

    fn device() -> (Emulated, EmuStream, EmuStream) {
        let lanes = GtLaneCheck {
            removed: 0,
            count: 0,
            seed: 1,
        };
        let d = Emulated::new(lanes);
        let (a, b) = (d.new_stream().unwrap(), d.new_stream().unwrap());
        (d, a, b)
    }

    /// `values` on the device on `stream`, at a sector-aligned address (as
    /// the counts below assume) inside an allocation.
    fn upload_u32(d: &Emulated, values: &[u32], stream: EmuStream) -> DevPtr {
        let ptr = d.alloc(values.len() * 4 + 32, stream).unwrap();
        let aligned = ptr.next_multiple_of(32);
        d.upload(aligned, kernels::as_bytes(values), stream)
            .unwrap();
        aligned
    }

    #[test]
    fn launches_count_their_sectors_atomics_working_threads_and_tail_when_asked() {
        use kernels::{GtBytesTable, GtOrderArgs};
        // 1024 words of 5 bytes (work class 3: no shortcut table), in blocks
        // of 256 lanes, and a fifth block past the words.
        const WORDS: u32 = 1024;
        const THREADS: u32 = WORDS + kernels::LANES;
        const BLOCKS: u64 = (THREADS / kernels::LANES) as u64;
        for count in [0, 1] {
            let d = Emulated::new(GtLaneCheck {
                removed: 0,
                count,
                seed: 1,
            });
            let s = d.new_stream().unwrap();
            let args = GtOrderArgs {
                text: upload_u32(&d, &[0; 8], s),
                word_starts: upload_u32(&d, &[0; WORDS as usize], s),
                word_lens: upload_u32(&d, &[5; WORDS as usize], s),
                n_words: upload_u32(&d, &[WORDS], s),
                shortcut: GtBytesTable {
                    slots: std::ptr::null(),
                    blob: std::ptr::null(),
                    filter: std::ptr::null(),
                    mask: 0,
                    filter_mask: 0,
                },
                class_counts: upload_u32(&d, &[0; 2 * kernels::WORK_CLASSES], s),
                order: upload_u32(&d, &[0; WORDS as usize], s),
                blocks: THREADS / kernels::LANES,
                _pad: 0,
            };
            let bytes = kernels::as_bytes(std::slice::from_ref(&args)).to_vec();
            // Block-cooperative: only whole blocks.
            assert!(d
                .launch(Kernel::OrderCount, &bytes, THREADS - 1, s)
                .is_err());
            d.launch(Kernel::OrderCount, &bytes, THREADS, s).unwrap();
            d.launch(Kernel::OrderFill, &bytes, THREADS, s).unwrap();
            let mut classes = [0u32; 2 * kernels::WORK_CLASSES];
            d.download(kernels::as_bytes_mut(&mut classes), args.class_counts, s)
                .unwrap();
            assert_eq!(
                (classes[3], classes[kernels::WORK_CLASSES + 3]),
                (WORDS, WORDS)
            );
            let counts = d.take_launch_counts();
            if count == 0 {
                assert!(counts.is_empty(), "{counts:?}");
                continue;
            }
            let class_word = args.class_counts + 3 * 4;
            let cursor_word = args.class_counts + (kernels::WORK_CLASSES as u64 + 3) * 4;
            let working_blocks = u64::from(WORDS / kernels::LANES);
            assert_eq!(
                counts[0],
                LaunchCounts {
                    kernel: Some(Kernel::OrderCount),
                    threads: THREADS.into(),
                    // A lane per word; the fifth block's lanes are idle.
                    working: WORDS.into(),
                    // word_lens: 1024 contiguous u32 = 128 sectors; n_words: once per block.
                    read_sectors: u64::from(WORDS) * 4 / 32 + BLOCKS,
                    write_sectors: 0,
                    // n_words (every lane) at each turn (the second finds no words
                    // left), then lane 3's word length and its class's atomic.
                    tail: 4,
                    // One atomic per class and block, not one per word.
                    atomics: working_blocks,
                    atomic_words: vec![(class_word, working_blocks)],
                    atomics_untracked: 0,
                }
            );
            assert_eq!(counts[0].same_address_max(), working_blocks);
            let fill = &counts[1];
            assert_eq!(fill.kernel, Some(Kernel::OrderFill));
            assert_eq!(fill.working, u64::from(WORDS));
            assert_eq!(fill.atomic_words, vec![(cursor_word, working_blocks)]);
            // Each block's words take 256 consecutive slots of order: 128 sectors.
            assert_eq!(fill.write_sectors, u64::from(WORDS) * 4 / 32, "{fill:?}");
            // + the three class counts before its class: a sector per working block.
            assert_eq!(
                fill.read_sectors,
                u64::from(WORDS) * 4 / 32 + BLOCKS + working_blocks
            );
            // n_words twice; lane 3: its length, the counts before, the atomic, its slot.
            assert_eq!(fill.tail, 6);
        }
    }

    fn is_hazard<T: std::fmt::Debug>(outcome: Result<T>) -> bool {
        matches!(outcome, Err(Error::Cuda(message)) if message.contains("no event between"))
    }

    #[test]
    fn freed_memory_is_reused_across_streams_only_after_an_event_or_once_the_free_is_done() {
        let (d, a, b) = device();
        let release = d.hold(a);
        let x = d.alloc(4096, a).unwrap();
        d.free(x, a);
        // Stream b follows nothing of a's, and a's free has not run: no reuse
        // (the pool makes no dependency of its own).
        let y = d.alloc(4096, b).unwrap();
        assert_ne!(y, x);
        // Stream a itself reuses it at once, in its order.
        let z = d.alloc(4096, a).unwrap();
        assert_eq!(z, x);
        d.free(z, a);
        // An event after the free, which b waits for: b may reuse it.
        let event = d.new_event(false).unwrap();
        d.record(&event, a).unwrap();
        d.wait_event(b, &event).unwrap();
        let w = d.alloc(4096, b).unwrap();
        assert_eq!(w, x);
        d.free(w, b);
        d.free(y, b);
        // Once the free is done, any stream may take it.
        drop(release);
        d.synchronize(a).unwrap();
        d.synchronize(b).unwrap();
        let c = d.new_stream().unwrap();
        let v = d.alloc(4096, c).unwrap();
        assert!(v == x || v == y);
        d.free(v, c);
        d.synchronize(c).unwrap();
    }

    #[test]
    fn memory_another_stream_wrote_needs_an_event_before_use() {
        let (d, a, b) = device();
        let release = d.hold(a);
        let x = d.alloc(64, a).unwrap();
        d.upload(x, &[7; 64], a).unwrap();
        // Read on b (a download) and free on b with no event: refused.
        let mut out = [0u8; 64];
        assert!(is_hazard(d.download(&mut out, x, b)));
        d.free(x, b);
        assert!(
            is_hazard(d.synchronize(b)),
            "the free's hazard is b's error"
        );
        // With an event after the upload, b reads what a wrote.
        let event = d.new_event(false).unwrap();
        d.record(&event, a).unwrap();
        d.wait_event(b, &event).unwrap();
        drop(release);
        d.download(&mut out, x, b).unwrap();
        assert_eq!(out, [7; 64]);
        d.free(x, b);
        d.synchronize(b).unwrap();
    }

    #[test]
    fn the_host_may_reuse_pinned_memory_only_once_its_copy_is_done() {
        let (d, a, _) = device();
        let pinned = d.pin(64, true).unwrap();
        d.host_access(pinned, 64, true).unwrap();
        let x = d.alloc(64, a).unwrap();
        let release = d.hold(a);
        // SAFETY: 64 pinned bytes into 64 device bytes.
        unsafe { d.upload_pinned(x, pinned, 64, a) }.unwrap();
        let copied = d.new_event(false).unwrap();
        d.record(&copied, a).unwrap();
        // The copy is queued behind the hold: writing the staging now races with it.
        assert!(is_hazard(d.host_access(pinned, 64, true)));
        drop(release);
        d.wait_host(&copied).unwrap();
        d.host_access(pinned, 64, true).unwrap();
        d.free(x, a);
        d.synchronize(a).unwrap();
        // SAFETY: from `pin`, no copy uses it any more.
        unsafe { d.unpin(pinned, 64) };
    }
}
