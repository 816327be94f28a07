// gt_hash.cuh: read-only open-addressing hash tables built on the host at plan
// time (rust/plan/bytelevel.rs, through rust/kernels/host.rs) and probed per
// word by the CPU and GPU backends.
//
// Both tables use power-of-two capacities and linear probing; a slot whose key
// is the empty marker ends a probe. Built once, never mutated: safe to share
// between threads and to upload to a device as is.
#pragma once
#include "gt_common.cuh"

// Merge table: key (left id << 32 | right id) -> (rank, merged id).
#define GT_PAIR_EMPTY 0xFFFFFFFFFFFFFFFFull

struct GtPairTable {
    const gt_u64* keys;   // capacity entries; GT_PAIR_EMPTY marks a free slot
    const gt_u32* ranks;  // capacity entries
    const gt_u32* merged; // capacity entries
    gt_u64 mask;          // capacity - 1
};

GT_HD gt_u64 gt_mix64(gt_u64 x) {
    // splitmix64 finaliser: cheap, and spreads the id bits over the whole word.
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

GT_HD gt_u64 gt_pair_key(gt_u32 left, gt_u32 right) {
    return ((gt_u64)left << 32) | (gt_u64)right;
}

// Finds the merge of (left, right). Returns 1 and fills rank/merged if found.
GT_HD int gt_pair_find(const GtPairTable* t, gt_u32 left, gt_u32 right, gt_u32* rank, gt_u32* merged) {
    gt_u64 key = gt_pair_key(left, right);
    for (gt_u64 slot = gt_mix64(key) & t->mask;; slot = (slot + 1) & t->mask) {
        gt_u64 k = t->keys[slot];
        if (k == key) {
            *rank = t->ranks[slot];
            *merged = t->merged[slot];
            return 1;
        }
        if (k == GT_PAIR_EMPTY) return 0;
    }
}

// Host-side builder: inserts (left, right) -> (rank, merged), overwriting an
// existing entry (the oracle keeps the last of duplicate merges). The table
// must have a free slot.
GT_HD void gt_pair_insert(gt_u64* keys, gt_u32* ranks, gt_u32* merged, gt_u64 mask, gt_u32 left, gt_u32 right,
                          gt_u32 rank, gt_u32 merged_id) {
    gt_u64 key = gt_pair_key(left, right);
    gt_u64 slot = gt_mix64(key) & mask;
    while (keys[slot] != GT_PAIR_EMPTY && keys[slot] != key) slot = (slot + 1) & mask;
    keys[slot] = key;
    ranks[slot] = rank;
    merged[slot] = merged_id;
}

// Byte-string table: token bytes -> id. Entries point into one byte blob.
struct GtBytesTable {
    const gt_u64* hashes; // capacity entries; 0 marks a free slot (real hashes are never 0)
    const gt_u32* starts; // offset of the entry's bytes in blob
    const gt_u32* lens;
    const gt_u32* ids;
    const gt_u8* blob;
    gt_u64 mask;
};

// FNV-1a over the bytes, finished with gt_mix64; never 0.
GT_HD gt_u64 gt_bytes_hash(const gt_u8* bytes, gt_u32 n) {
    gt_u64 h = 0xCBF29CE484222325ull;
    for (gt_u32 i = 0; i < n; ++i) {
        h ^= bytes[i];
        h *= 0x100000001B3ull;
    }
    h = gt_mix64(h ^ n);
    return h ? h : 1;
}

// Id of the exact byte string, or GT_NONE.
GT_HD gt_u32 gt_bytes_find(const GtBytesTable* t, const gt_u8* bytes, gt_u32 n) {
    gt_u64 h = gt_bytes_hash(bytes, n);
    for (gt_u64 slot = h & t->mask;; slot = (slot + 1) & t->mask) {
        gt_u64 k = t->hashes[slot];
        if (k == 0) return GT_NONE;
        if (k == h && t->lens[slot] == n) {
            const gt_u8* stored = t->blob + t->starts[slot];
            gt_u32 i = 0;
            while (i < n && stored[i] == bytes[i]) ++i;
            if (i == n) return t->ids[slot];
        }
    }
}

// Host-side builder: adds bytes -> id at a free slot (the caller adds each
// distinct byte string once). `start` is the bytes' offset in the blob.
GT_HD void gt_bytes_insert(gt_u64* hashes, gt_u32* starts, gt_u32* lens, gt_u32* ids, gt_u64 mask,
                           const gt_u8* bytes, gt_u32 n, gt_u32 start, gt_u32 id) {
    gt_u64 h = gt_bytes_hash(bytes, n);
    gt_u64 slot = h & mask;
    while (hashes[slot] != 0) slot = (slot + 1) & mask;
    hashes[slot] = h;
    starts[slot] = start;
    lens[slot] = n;
    ids[slot] = id;
}
