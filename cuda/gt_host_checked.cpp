// gt_host_checked.cpp: the emulator's build of the batch kernels. The same
// functions as gt_host.cpp's (cuda/gt_batch.cuh), compiled with GT_LANE_CHECK
// so that block-cooperative code runs its lanes shuffled, phase by phase, and
// has every shared access checked (gt_lane_check.h). They live in a namespace
// of their own: the CPU backend keeps the unchecked build, at full speed.
// Compiled by build.rs; called through rust/kernels/host.rs.
#include <stdlib.h>
#include <string.h>

#include "gt_lane_check.h"

namespace gt_checked {
#define GT_LANE_CHECK 1
#include "gt_batch.cuh"
}  // namespace gt_checked

static_assert(sizeof(GtLaneCheck) == 16 && sizeof(GtLaneHazard) == 96 && sizeof(GtLaneCounts) == 320,
              "as rust/kernels/abi.rs mirrors them");

namespace {

const uint16_t NOBODY = 0xFFFF;          // no access yet
const uint16_t EVERY = GT_LANE_EVERY;    // code every lane runs
const uint16_t SEVERAL = GT_LANE_SEVERAL;  // reads by more than one lane

// One 4-byte word's accesses in the current phase (entries of older phases
// are free slots).
struct Shadow {
    uint64_t key;
    uint32_t phase;
    uint16_t writer;
    uint16_t reader;
};

// The checker's state on one host thread, which runs whole blocks.
struct LaneState {
    Shadow* slots = nullptr;
    uint64_t capacity = 0, used = 0;
    uint32_t phase = 1;  // slots of another phase are free
    uint16_t lane = EVERY;
    uint32_t syncs = 0, block = 0;
    uint64_t rng = 1, order_a = 1, order_b = 0;
    GtLaneCheck check = {0, 0, 0};
    GtLaneHazard hazard = {};
    ~LaneState() { free(slots); }
};

thread_local LaneState state;

// The counts of the current range of threads (GtLaneCounts), when asked:
// the sectors the current warp touched so far (a set, by generation), and
// the current thread's work.
const uint64_t SECTOR_SLOTS = 1u << 13;
struct CountState {
    bool on = false;
    uint64_t* keys = nullptr;  // sector << 1 | write
    uint32_t* gens = nullptr;
    uint32_t gen = 1;
    uint64_t used = 0;
    uint64_t thread_sectors = 0;
    bool thread_working = false;
    // A block-cooperative kernel's lanes, which its first thread runs: each
    // lane is a thread of the counts (what every lane runs is each one's).
    bool lanes_used = false;
    uint64_t lane_sectors[GT_LANES] = {};
    bool lane_working[GT_LANES] = {};
    GtLaneCounts counts = {};
    ~CountState() {
        free(keys);
        free(gens);
    }
};

thread_local CountState counting;

// A new warp: its set of sectors starts empty.
void new_warp(CountState& c) {
    if (!c.keys) {
        c.keys = static_cast<uint64_t*>(calloc(SECTOR_SLOTS, sizeof(uint64_t)));
        c.gens = static_cast<uint32_t*>(calloc(SECTOR_SLOTS, sizeof(uint32_t)));
        if (!c.keys || !c.gens) abort();  // out of host memory
    }
    if (++c.gen == 0) {
        memset(c.gens, 0, SECTOR_SLOTS * sizeof(uint32_t));
        c.gen = 1;
    }
    c.used = 0;
}

// True when the current warp had not touched this sector (this way) yet.
bool first_touch(CountState& c, uint64_t key) {
    if (2 * c.used >= SECTOR_SLOTS) return true;  // a warp past 4096 sectors: counted as new
    for (uint64_t at = (key * 0x9E3779B97F4A7C15ull) >> 51;; at = (at + 1) & (SECTOR_SLOTS - 1)) {
        if (c.gens[at] != c.gen) {
            c.gens[at] = c.gen;
            c.keys[at] = key;
            ++c.used;
            return true;
        }
        if (c.keys[at] == key) return false;
    }
}

// The current thread is done: its work goes into the counts. A block's
// first thread that ran its lanes counts as the lanes that worked (the other
// threads of the block run nothing), its tail as its own work plus its
// busiest lane's.
void end_thread(CountState& c) {
    GtLaneCounts& n = c.counts;
    ++n.threads;
    uint64_t most = 0;
    if (c.lanes_used) {
        for (uint32_t k = 0; k < GT_LANES; ++k) {
            if (c.lane_working[k] || c.thread_working) ++n.working;
            if (c.lane_sectors[k] > most) most = c.lane_sectors[k];
            c.lane_sectors[k] = 0;
            c.lane_working[k] = false;
        }
        c.lanes_used = false;
    } else if (c.thread_working) {
        ++n.working;
    }
    if (c.thread_sectors + most > n.tail) n.tail = c.thread_sectors + most;
    c.thread_sectors = 0;
    c.thread_working = false;
}

// Charges `sectors` of work (and working, when it took an item) to the
// current lane, or to the thread outside the lane loops.
void charge(CountState& c, uint64_t sectors, bool working) {
    uint16_t lane = state.lane;
    if (lane < GT_LANES) {
        c.lanes_used = true;
        c.lane_sectors[lane] += sectors;
        if (working) c.lane_working[lane] = true;
    } else {
        c.thread_sectors += sectors;
        if (working) c.thread_working = true;
    }
}

uint64_t next_random(LaneState& st) {
    st.rng ^= st.rng << 13;
    st.rng ^= st.rng >> 7;
    st.rng ^= st.rng << 17;
    return st.rng;
}

void clear_slots(LaneState& st, uint64_t capacity) {
    free(st.slots);
    st.slots = static_cast<Shadow*>(calloc(capacity, sizeof(Shadow)));
    if (!st.slots) abort();  // out of host memory: nothing sensible is left to do
    st.capacity = capacity;
    st.used = 0;
}

uint64_t slot_of(const LaneState& st, uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) & (st.capacity - 1); }

// The shadow of word `key` in this phase (a fresh one if untouched so far).
Shadow& shadow(LaneState& st, uint64_t key) {
    if (2 * (st.used + 1) > st.capacity) {  // grow, keeping this phase's entries
        Shadow* old = st.slots;
        uint64_t old_capacity = st.capacity;
        st.slots = nullptr;  // (not freed by clear_slots)
        clear_slots(st, 2 * old_capacity);
        for (uint64_t i = 0; i < old_capacity; ++i) {
            if (old[i].phase != st.phase) continue;
            uint64_t at = slot_of(st, old[i].key);
            while (st.slots[at].phase == st.phase) at = (at + 1) & (st.capacity - 1);
            st.slots[at] = old[i];
            ++st.used;
        }
        free(old);
    }
    for (uint64_t at = slot_of(st, key);; at = (at + 1) & (st.capacity - 1)) {
        Shadow& s = st.slots[at];
        if (s.phase != st.phase) {
            s.key = key;
            s.phase = st.phase;
            s.writer = s.reader = NOBODY;
            ++st.used;
            return s;
        }
        if (s.key == key) return s;
    }
}

// True when an access recorded as `by` is another lane's than `lane`'s.
bool other(uint16_t by, uint16_t lane) {
    return by != NOBODY && (by != lane || lane == EVERY || by == SEVERAL);
}

void report(LaneState& st, uint16_t first, int write) {
    if (st.hazard.found) return;
    st.hazard.found = 1;
    st.hazard.write = (uint32_t)write;
    st.hazard.first = first;
    st.hazard.second = st.lane;
    st.hazard.block = st.block;
    st.hazard.phase = st.syncs;
}

void new_phase(LaneState& st) {
    if (++st.phase == 0) {  // wrapped: every slot is old anyway
        memset(st.slots, 0, st.capacity * sizeof(Shadow));
        st.phase = 1;
    }
    st.used = 0;
}

}  // namespace

void gt_count_global(const void* p, uint64_t bytes, int write) {
    CountState& c = counting;
    if (!c.on || !bytes) return;
    uint64_t first = (uint64_t)(uintptr_t)p >> 5, last = ((uint64_t)(uintptr_t)p + bytes - 1) >> 5;
    charge(c, last - first + 1, false);
    for (uint64_t sector = first; sector <= last; ++sector) {
        if (first_touch(c, sector << 1 | (uint64_t)(write != 0)))
            ++(write ? c.counts.write_sectors : c.counts.read_sectors);
    }
}

void gt_count_atomic(const void* p) {
    CountState& c = counting;
    if (!c.on) return;
    GtLaneCounts& n = c.counts;
    charge(c, 1, false);
    ++n.atomics;
    uint64_t word = (uint64_t)(uintptr_t)p;
    uint32_t k = 0;
    while (k < n.n_atomic_words && n.atomic_word[k] != word) ++k;
    if (k == n.n_atomic_words) {
        if (k == GT_COUNT_ATOMIC_WORDS) {
            ++n.atomics_untracked;
            return;
        }
        n.atomic_word[k] = word;
        ++n.n_atomic_words;
    }
    ++n.atomic_hits[k];
}

void gt_count_item() {
    if (counting.on) charge(counting, 0, true);
}

void gt_lane_touch(const void* p, uint64_t bytes, int write) {
    LaneState& st = state;
    uint64_t first = (uint64_t)(uintptr_t)p >> 2, last = ((uint64_t)(uintptr_t)p + bytes + 3) >> 2;
    for (uint64_t key = first; key < last; ++key) {
        Shadow& s = shadow(st, key);
        if (write) {
            if (other(s.writer, st.lane)) report(st, s.writer, 1);
            else if (other(s.reader, st.lane)) report(st, s.reader, 1);
            s.writer = st.lane;
        } else {
            if (other(s.writer, st.lane)) report(st, s.writer, 0);
            s.reader = s.reader == NOBODY || s.reader == st.lane ? st.lane : SEVERAL;
        }
    }
}

uint32_t gt_lane_barrier(const char* file, uint32_t line) {
    const char* name = file;
    for (const char* c = file; *c; ++c)
        if (*c == '/' || *c == '\\') name = c + 1;
    uint32_t h = 2166136261u;
    for (; *name; ++name) h = (h ^ (uint8_t)*name) * 16777619u;
    return (h & 0xFFFF0000u) | (line & 0xFFFFu);
}

void gt_lane_sync(const char* file, uint32_t line) {
    LaneState& st = state;
    uint32_t id = gt_lane_barrier(file, line);
    GtLaneHazard& h = st.hazard;
    uint32_t k = 0;
    while (k < h.n_barriers && h.barriers[k] != id) ++k;
    if (k == h.n_barriers && k < GT_LANE_BARRIERS) h.barriers[h.n_barriers++] = id;
    ++st.syncs;
    if (st.syncs > h.syncs) h.syncs = st.syncs;
    if (id != st.check.removed) new_phase(st);
}

uint32_t gt_lane_enter(uint32_t lane) {
    uint32_t before = state.lane;
    state.lane = (uint16_t)lane;
    return before;
}

void gt_lane_shuffle() {
    LaneState& st = state;
    st.order_a = next_random(st) | 1;  // odd: k -> a k + b is a permutation mod a power of two
    st.order_b = next_random(st);
}

uint32_t gt_lane_shuffled(uint32_t k, uint32_t n) {
    return (uint32_t)((state.order_a * k + state.order_b) & (n - 1));
}

extern "C" {

// Runs threads [begin, end) of batch kernel number `kernel` with `args`, as
// gt_host_run does, with block-cooperative code checked as `check` asks (a
// block is started by its thread whose index is a multiple of GT_LANES);
// writes what the checker found to *found. Returns 0, or -1 for an unknown kernel.
int gt_host_run_checked(uint32_t kernel, const void* args, uint32_t begin, uint32_t end, const GtLaneCheck* check,
                        GtLaneHazard* found) {
    LaneState& st = state;
    st.check = *check;
    st.hazard = GtLaneHazard{};
    if (st.capacity > (1u << 22)) clear_slots(st, 4096);  // do not keep a huge table between launches
    if (!st.capacity) clear_slots(st, 4096);
    counting.on = check->count != 0;
    counting.counts = GtLaneCounts{};
    if (counting.on && begin % 32) new_warp(counting);  // (a range that starts mid-warp)
    int rc = -1;
    uint32_t number = 0;
#define GT_CHECKED_KERNEL(name, Args)                                            \
    if (kernel == number++) {                                                    \
        for (uint32_t i = begin; i < end; ++i) {                                 \
            st.block = i / GT_LANES;                                             \
            st.syncs = 0;                                                        \
            st.lane = EVERY;                                                     \
            st.rng = (check->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) | 1;      \
            new_phase(st);                                                       \
            if (counting.on && i % 32 == 0) new_warp(counting);                  \
            gt_checked::name##_thread((const gt_checked::Args*)args, i);          \
            if (counting.on) end_thread(counting);                               \
        }                                                                        \
        rc = 0;                                                                  \
    }
    GT_BATCH_KERNELS(GT_CHECKED_KERNEL)
#undef GT_CHECKED_KERNEL
    *found = st.hazard;
    return rc;
}

// The counts of this host thread's last gt_host_run_checked (zero unless it was asked to count).
void gt_host_lane_counts(GtLaneCounts* out) { *out = counting.counts; }

}
