// gt_lane_check.h: the emulator's check of block-cooperative code, for the
// GT_LANE_CHECK build of the batch kernels (cuda/gt_host_checked.cpp; the
// macros that call it are in gt_common.cuh). Host C++ only: NVRTC never sees it.
//
// A block's lanes run one phase at a time (the code between two GT_SYNCs),
// each phase's lanes in an order shuffled anew, and every access through a
// GtLaneMem view is recorded for its phase. A location one lane writes and
// another lane reads or writes in the same phase is a race on a GPU (what
// compute-sanitizer's racecheck reports as a hazard): the first one is
// reported to the emulator, which fails the launch. Code outside GT_EACH_LANE
// and GT_LANE_ZERO runs on every lane, so its reads are every lane's.
//
// Example: lane 0 sums lane_a[] (written by each lane in the phase before);
// without the GT_SYNC between the two phases, lane 0's read of lane_a[5] and
// lane 5's write of it fall in one phase: "lane 0 read what lane 5 wrote".
#pragma once
#include <stdint.h>

// What a launch asks of the checker (mirrored in rust/kernels/abi.rs).
struct GtLaneCheck {
    uint32_t removed;  // > 0: the barrier (GT_SYNC) of this id does nothing (tests: a barrier removed)
    uint32_t count;    // 1: count global accesses (GtLaneCounts) for the device cost model
    uint64_t seed;     // the lanes' shuffled orders
};

// The most distinct barriers a launch reports.
#define GT_LANE_BARRIERS 16

// What it found (mirrored in rust/kernels/abi.rs).
struct GtLaneHazard {
    uint32_t found;    // 1: a race, as below
    uint32_t write;    // 1: the second access was a write
    uint32_t first;    // the lane that touched the location first (or GT_LANE_EVERY, GT_LANE_SEVERAL)
    uint32_t second;   // the lane whose access raced with it
    uint32_t block;    // the block (thread / GT_LANES)
    uint32_t phase;    // GT_SYNCs the block had passed
    uint32_t syncs;    // the most GT_SYNCs a block of the launch passed (found or not)
    uint32_t n_barriers;                  // the distinct barriers the launch passed (found or not):
    uint32_t barriers[GT_LANE_BARRIERS];  // their ids (gt_lane_barrier)
};

// What threads [begin, end) of a launch did to global memory, counted when
// the check asks (count = 1), for the device cost model (benches/device_model.py;
// mirrored in rust/kernels/abi.rs). Accesses are the ones the kernels declare
// (GT_GLOBAL_READ / GT_GLOBAL_WROTE, gt_atomic_add). A warp (32 consecutive
// threads) is charged each distinct 32-byte sector it touched once over the
// whole kernel, reads and writes apart: an approximation of per-instruction
// coalescing that is exact for the one-access-per-array kernels and low for
// a warp re-reading a sector L1 would not have kept.
#define GT_COUNT_ATOMIC_WORDS 16
struct GtLaneCounts {
    uint64_t read_sectors, write_sectors;
    uint64_t threads;  // threads run (a block-cooperative kernel's: its lanes)
    uint64_t working;  // threads (lanes) that took an item of work (GT_WORK_ITEM)
    uint64_t tail;     // the most sectors one thread touched (each access's, not deduplicated)
    uint64_t atomics;  // atomic operations in all
    uint64_t atomics_untracked;  // on words past the first GT_COUNT_ATOMIC_WORDS of the range
    uint32_t n_atomic_words, pad_;
    uint64_t atomic_word[GT_COUNT_ATOMIC_WORDS];  // the words atomics hit (addresses) ...
    uint64_t atomic_hits[GT_COUNT_ATOMIC_WORDS];  // ... and how many atomics each took
};

// Counts an access of bytes [p, p + bytes) to global memory by the current thread.
void gt_count_global(const void* p, uint64_t bytes, int write);
// Counts an atomic operation on the word at p by the current thread.
void gt_count_atomic(const void* p);
// Counts the current thread (lane) as working: it took an item of work.
void gt_count_item();

// Lane numbers standing for every lane (code outside the lane loops) and
// for reads by several lanes.
#define GT_LANE_EVERY 0xFFFEu
#define GT_LANE_SEVERAL 0xFFFDu

// Records an access to bytes [p, p + bytes) by the current lane.
void gt_lane_touch(const void* p, uint64_t bytes, int write);
// A barrier's id: its line in its file, and 16 bits of its file's name.
uint32_t gt_lane_barrier(const char* file, uint32_t line);
// Ends the phase (GT_SYNC at this file and line), unless the launch removed this barrier.
void gt_lane_sync(const char* file, uint32_t line);
// Makes `lane` the current one; returns the one before.
uint32_t gt_lane_enter(uint32_t lane);
// Lane k of the current phase's shuffled order of n (a power of two) lanes.
uint32_t gt_lane_shuffled(uint32_t k, uint32_t n);
// A new order for the next phase's lanes.
void gt_lane_shuffle();

// The lanes of one phase (GT_EACH_LANE: n lanes, shuffled) or lane 0 alone
// (GT_LANE_ZERO: n = 1), each made current while its body runs; every lane
// is current again after the loop.
class GtLaneLoop {
  public:
    explicit GtLaneLoop(uint32_t n) : n_(n), k_(0), lane_(0), before_(gt_lane_enter(GT_LANE_EVERY)) {
        if (n > 1) gt_lane_shuffle();
    }
    ~GtLaneLoop() { gt_lane_enter(before_); }
    bool next() {
        if (k_ == n_) return false;
        lane_ = n_ > 1 ? gt_lane_shuffled(k_, n_) : 0;
        gt_lane_enter(lane_);
        ++k_;
        return true;
    }
    uint32_t lane() const { return lane_; }

  private:
    GtLaneLoop(const GtLaneLoop&);
    GtLaneLoop& operator=(const GtLaneLoop&);
    uint32_t n_, k_, lane_, before_;
};
