// gt_common.cuh: what every gpu_tok kernel header needs, and nothing else.
//
// Kernel logic is written once, as freestanding functions marked GT_HD, and
// compiled three ways: by nvcc (__host__ __device__), by NVRTC (__device__),
// and by the host C++ compiler for the CPU backend (plain inline). No STL, no
// libc beyond what NVRTC provides: fixed-width types are our own typedefs.
#pragma once

#if defined(__CUDACC_RTC__)
#define GT_HD __device__ inline
#define GT_HD_CALL __device__ __noinline__
#elif defined(__CUDACC__)
#define GT_HD __host__ __device__ inline
#define GT_HD_CALL __host__ __device__ __noinline__
#else
#define GT_HD inline
#define GT_HD_CALL inline
#endif
// GT_HD_HOT: small helpers of the host's hottest loops, always inlined there.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define GT_HD_HOT GT_HD
#else
#define GT_HD_HOT inline __attribute__((always_inline))
#endif
// GT_HD_NOINLINE: a call on the host, out of a hot loop it would make larger.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define GT_HD_NOINLINE GT_HD
#else
#define GT_HD_NOINLINE inline __attribute__((noinline))
#endif
// GT_HD_CALL: a real call on the GPU, for big functions used from many places
// (inlining the scanners at every use made one kernel take a minute to compile).

typedef unsigned char gt_u8;
typedef unsigned short gt_u16;
typedef unsigned int gt_u32;
typedef int gt_i32;
typedef unsigned long long gt_u64;

// Read-only lookup tables: device globals on the GPU, file-local on the host.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define GT_TABLE __device__
#else
#define GT_TABLE static
#endif

// Marks "no value" in u32 tables (never a valid token id or rank).
#define GT_NONE 0xFFFFFFFFu

// Eight bytes from p, any alignment, as a little-endian word (the host's
// compiler makes it one load).
GT_HD gt_u64 gt_load8(const gt_u8* p) {
    return (gt_u64)p[0] | (gt_u64)p[1] << 8 | (gt_u64)p[2] << 16 | (gt_u64)p[3] << 24 | (gt_u64)p[4] << 32 |
           (gt_u64)p[5] << 40 | (gt_u64)p[6] << 48 | (gt_u64)p[7] << 56;
}

// The index of the lowest set bit of x (x != 0).
GT_HD gt_u32 gt_lowest_bit(gt_u64 x) {
#if defined(__CUDA_ARCH__)
    return (gt_u32)__ffsll((long long)x) - 1;
#else
    return (gt_u32)__builtin_ctzll(x);
#endif
}

// UTF-8 length of the character starting with byte b (valid UTF-8).
GT_HD gt_u32 gt_utf8_len(gt_u8 b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// Adds v to *p atomically; returns the value before (threads of a kernel
// count into shared counters: the emulator runs them on several CPU threads).
GT_HD gt_u32 gt_atomic_add(gt_u32* p, gt_u32 v) {
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
    return atomicAdd(p, v);
#elif defined(GT_LANE_CHECK)
    gt_count_atomic(p);  // (the device cost model's count; nothing unless asked)
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#else
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

// Block-cooperative code: GT_LANES threads of one block work on one item in
// phases. On a GPU each lane runs its share of a phase and GT_SYNC is the
// block's barrier; on the host one thread runs the lanes of each phase in
// turn (GT_SYNC is then nothing). A phase's loop body is one lane's work;
// what lives from one phase to the next is in GT_SHARED arrays (block shared
// memory; the host function's own locals), and every lane takes the same
// branches between phases (code outside GT_EACH_LANE and GT_LANE_ZERO runs
// on every lane: on the host, once).
// The emulator's build (GT_LANE_CHECK: cuda/gt_host_checked.cpp, the checker
// in cuda/gt_lane_check.h) runs each phase's lanes in a shuffled order and
// checks every access made through a GtLaneMem view (below): a location one
// lane writes and another reads or writes in the same phase is a race on a
// GPU, and is reported.
#define GT_LANES 256u
#if defined(__CUDA_ARCH__)
#define GT_EACH_LANE(lane) for (gt_u32 lane = threadIdx.x, once_ = 1; once_; once_ = 0)
#define GT_LANE_ZERO if (threadIdx.x == 0)
#define GT_SYNC() __syncthreads()
#define GT_SHARED __shared__
#elif defined(GT_LANE_CHECK)
#define GT_EACH_LANE(lane) \
    for (GtLaneLoop lanes_(GT_LANES); lanes_.next();) for (gt_u32 lane = lanes_.lane(), once_ = 1; once_; once_ = 0)
#define GT_LANE_ZERO for (GtLaneLoop lanes_(1); lanes_.next();)
#define GT_SYNC() gt_lane_sync(__FILE__, __LINE__)
#define GT_SHARED
#else
#define GT_EACH_LANE(lane) for (gt_u32 lane = 0; lane < GT_LANES; ++lane)
#define GT_LANE_ZERO
#define GT_SYNC() ((void)0)
#define GT_SHARED
#endif

// Memory the lanes of a block share (GT_SHARED arrays, and the item's global
// scratch) is read and written through GtLaneMem<T> views: a plain T* but in
// the checked build, where each access goes to the checker.
// GT_LANE_READS / GT_LANE_WROTE tell the checker about n elements from p read
// or written through plain pointers (by a function shared with one-thread
// code).
#if defined(GT_LANE_CHECK)
template <class T>
struct GtLaneRef {
    T* p;
    operator T() const {
        gt_lane_touch(p, sizeof(T), 0);
        return *p;
    }
    GtLaneRef& operator=(T v) {
        gt_lane_touch(p, sizeof(T), 1);
        *p = v;
        return *this;
    }
    GtLaneRef& operator=(const GtLaneRef& other) { return *this = (T)other; }
};
template <class T>
struct GtLaneMem {
    T* p;
    GtLaneMem(T* at) : p(at) {}
    GtLaneRef<T> operator[](gt_u64 i) const { return GtLaneRef<T>{p + i}; }
    GtLaneRef<T> operator*() const { return GtLaneRef<T>{p}; }
};
#define GT_LANE_READS(p, n) gt_lane_touch((p), (gt_u64)(n) * sizeof(*(p)), 0)
// GT_GLOBAL_READ / GT_GLOBAL_WROTE: n elements from p of global memory read
// or written by this thread, for the emulator's counts (gt_lane_check.h's
// GtLaneCounts); nothing in any other build.
#define GT_GLOBAL_READ(p, n) gt_count_global((p), (gt_u64)(n) * sizeof(*(p)), 0)
#define GT_GLOBAL_WROTE(p, n) gt_count_global((p), (gt_u64)(n) * sizeof(*(p)), 1)
// GT_WORK_ITEM(): this thread (or lane) took an item of its launch's work (a
// piece, a word, an element...): the counts' working threads; the others
// only found they had nothing to do (idle, for the cost model).
#define GT_WORK_ITEM() gt_count_item()
#define GT_LANE_WROTE(p, n) gt_lane_touch((p), (gt_u64)(n) * sizeof(*(p)), 1)
#else
template <class T>
using GtLaneMem = T*;
#define GT_LANE_READS(p, n) ((void)0)
#define GT_LANE_WROTE(p, n) ((void)0)
#define GT_GLOBAL_READ(p, n) ((void)0)
#define GT_GLOBAL_WROTE(p, n) ((void)0)
#define GT_WORK_ITEM() ((void)0)
#endif

// Unicode White_Space (Rust's char::is_whitespace, which the crate's
// WhitespaceSplit cuts at).
GT_HD int gt_is_white_space(gt_u32 cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Decodes the code point at `pos` (< end) into *cp; returns its byte length.
GT_HD gt_u32 gt_decode(const gt_u8* s, gt_u32 pos, gt_u32* cp) {
    gt_u8 b = s[pos];
    if (b < 0x80) { *cp = b; return 1; }
    if (b < 0xE0) { *cp = ((gt_u32)(b & 0x1F) << 6) | (s[pos + 1] & 0x3F); return 2; }
    if (b < 0xF0) {
        *cp = ((gt_u32)(b & 0x0F) << 12) | ((gt_u32)(s[pos + 1] & 0x3F) << 6) | (s[pos + 2] & 0x3F);
        return 3;
    }
    *cp = ((gt_u32)(b & 0x07) << 18) | ((gt_u32)(s[pos + 1] & 0x3F) << 12) | ((gt_u32)(s[pos + 2] & 0x3F) << 6) |
          (s[pos + 3] & 0x3F);
    return 4;
}
