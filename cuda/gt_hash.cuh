// gt_hash.cuh: read-only open-addressing hash tables built on the host at plan
// time (rust/plan/bytelevel.rs, through rust/kernels/host.rs) and probed per
// word by the CPU and GPU backends.
//
// Both tables use power-of-two capacities and linear probing; a slot whose key
// is the empty marker ends a probe. Built once, never mutated: safe to share
// between threads and to upload to a device as is.
#pragma once
#include "gt_common.cuh"

// Merge table: (left id, right id) -> rank, the merge's id by rank. A slot is
// one u64, the pair's 42-bit key (21 bits per id) above its 22-bit rank, so a
// probe reads 8 bytes and a cache line holds 8 slots: the table is half the
// size it would be with the merged id beside the rank, and the merge loop
// reads a merged id (merged_of_rank) only when it applies a merge, where it
// looks pairs up twice as often. When the merges' ids rise with their ranks
// (most vocabularies number tokens in merge order), a slot holds the merged
// id in place of the rank: it orders merges as the rank does, and
// merged_of_rank is null (gt_pair_merged).
// Ids must be below GT_PAIR_ID_LIMIT and ranks below GT_PAIR_RANK_LIMIT (the
// plan checks: real vocabularies have a few hundred thousand tokens).
#define GT_PAIR_ID_BITS 21
#define GT_PAIR_RANK_BITS 22
#define GT_PAIR_ID_LIMIT ((1u << GT_PAIR_ID_BITS) - 1)
#define GT_PAIR_RANK_LIMIT ((1u << GT_PAIR_RANK_BITS) - 1)
#define GT_PAIR_EMPTY 0xFFFFFFFFFFFFFFFFull  // its key part is no pair of ids below the limit

struct GtPairSlot {
    gt_u64 packed;  // key << GT_PAIR_RANK_BITS | rank; GT_PAIR_EMPTY marks a free slot
};

struct GtPairTable {
    const GtPairSlot* slots;        // capacity entries
    gt_u64 mask;                    // capacity - 1
    const gt_u32* merged_of_rank;   // each merge's id, by rank (null: slots hold merged ids)
};

// The id the merge found with value `rank` makes.
GT_HD gt_u32 gt_pair_merged(const GtPairTable* t, gt_u32 rank) {
    return t->merged_of_rank ? t->merged_of_rank[rank] : rank;
}

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
    return ((gt_u64)left << GT_PAIR_ID_BITS) | (gt_u64)right;
}

// First slot of a key: one multiply, its high half folded onto the low bits
// the mask keeps (a probe's latency is on the merge loop's critical path).
GT_HD gt_u64 gt_pair_slot(gt_u64 key, gt_u64 mask) {
    gt_u64 h = key * 0x9E3779B97F4A7C15ull;
    return (h ^ (h >> 29)) & mask;
}

// Rank of the merge of (left, right), or GT_NONE when they do not merge.
GT_HD gt_u32 gt_pair_rank(const GtPairTable* t, gt_u32 left, gt_u32 right) {
    gt_u64 key = gt_pair_key(left, right);
    for (gt_u64 slot = gt_pair_slot(key, t->mask);; slot = (slot + 1) & t->mask) {
        gt_u64 e = t->slots[slot].packed;
        if (e >> GT_PAIR_RANK_BITS == key) return (gt_u32)(e & GT_PAIR_RANK_LIMIT);
        if (e == GT_PAIR_EMPTY) return GT_NONE;
    }
}

// A set of (left, right) pairs kept as one bit per hash of a pair (a
// filter): a clear bit says no pair of the set hashes there, so the pair is
// not in it; a set bit, that it may be. One read, from a table small enough
// to stay in the CPU's caches.
struct GtPairBits {
    const gt_u64* words;  // (mask + 1) / 64 words
    gt_u64 mask;          // bits - 1 (bits: a power of two, at least 64)
};

GT_HD int gt_pair_maybe(const GtPairBits* b, gt_u32 left, gt_u32 right) {
    gt_u64 bit = gt_pair_slot(gt_pair_key(left, right), b->mask);
    return (int)(b->words[bit >> 6] >> (bit & 63)) & 1;
}

// Host-side builder: adds (left, right) to the filter's words.
GT_HD void gt_pair_bits_add(gt_u64* words, gt_u64 mask, gt_u32 left, gt_u32 right) {
    gt_u64 bit = gt_pair_slot(gt_pair_key(left, right), mask);
    words[bit >> 6] |= 1ull << (bit & 63);
}

// Asks for the slot where the pair (left, right) is looked up first (a hint:
// host only; the device's caches are another matter).
GT_HD void gt_pair_prefetch(const GtPairTable* t, gt_u32 left, gt_u32 right) {
#if !defined(__CUDACC_RTC__) && !defined(__CUDA_ARCH__)
    __builtin_prefetch(&t->slots[gt_pair_slot(gt_pair_key(left, right), t->mask)]);
#else
    (void)t;
    (void)left;
    (void)right;
#endif
}

// Finds the merge of (left, right). Returns 1 and fills rank/merged if found
// (in a table of pairs alone, merged is the value inserted).
GT_HD int gt_pair_find(const GtPairTable* t, gt_u32 left, gt_u32 right, gt_u32* rank, gt_u32* merged) {
    gt_u32 r = gt_pair_rank(t, left, right);
    if (r == GT_NONE) return 0;
    *rank = r;
    *merged = gt_pair_merged(t, r);
    return 1;
}

// Host-side builder: inserts (left, right) -> rank, overwriting an existing
// entry (the oracle keeps the last of duplicate merges). The table must have
// a free slot; ids and rank must be below the limits.
GT_HD void gt_pair_insert(GtPairSlot* slots, gt_u64 mask, gt_u32 left, gt_u32 right, gt_u32 rank) {
    gt_u64 key = gt_pair_key(left, right);
    gt_u64 slot = gt_pair_slot(key, mask);
    while (slots[slot].packed != GT_PAIR_EMPTY && slots[slot].packed >> GT_PAIR_RANK_BITS != key) {
        slot = (slot + 1) & mask;
    }
    slots[slot].packed = key << GT_PAIR_RANK_BITS | rank;
}

// Byte-string table: token bytes -> id. A slot holds the hash, the id and
// where the entry sits in the blob (its length, 4 bytes little-endian, then
// its bytes), so a probe reads one slot and, on a hash match, one place in
// the blob. A Bloom filter (two bits per entry from the hash's high bits, 16
// bits of filter per entry: ~1% false positives) answers most misses from a
// small array that stays in cache: WordPiece's greedy match and SentencePiece
// characters look up far more strings that are absent than present.
struct GtBytesSlot {
    gt_u64 hash;  // 0 marks a free slot (real hashes are never 0)
    gt_u32 start; // offset of the entry's length in the blob
    gt_u32 id;
};

struct GtBytesTable {
    const GtBytesSlot* slots;
    const gt_u8* blob;
    const gt_u64* filter;  // (filter_mask + 1) bits
    gt_u64 mask;           // capacity - 1
    gt_u64 filter_mask;
};

// The filter's two bits for hash h.
GT_HD gt_u64 gt_filter_bit(gt_u64 h, int which, gt_u64 filter_mask) {
    return (which ? h >> 21 : h >> 42) & filter_mask;
}

GT_HD int gt_filter_has(const gt_u64* filter, gt_u64 filter_mask, gt_u64 h) {
    gt_u64 a = gt_filter_bit(h, 0, filter_mask), b = gt_filter_bit(h, 1, filter_mask);
    return (filter[a >> 6] >> (a & 63) & 1) && (filter[b >> 6] >> (b & 63) & 1);
}

// FNV-1a over the bytes, finished with gt_mix64; never 0. In two steps, so
// a search that grows a string a character at a time (Unigram's prefix walk)
// extends one running state instead of hashing every prefix again.
#define GT_FNV_BASIS 0xCBF29CE484222325ull

GT_HD gt_u64 gt_fnv_extend(gt_u64 state, const gt_u8* bytes, gt_u32 n) {
    for (gt_u32 i = 0; i < n; ++i) {
        state ^= bytes[i];
        state *= 0x100000001B3ull;
    }
    return state;
}

GT_HD gt_u64 gt_hash_finish(gt_u64 state, gt_u32 n) {
    gt_u64 h = gt_mix64(state ^ n);
    return h ? h : 1;
}

GT_HD gt_u64 gt_bytes_hash(const gt_u8* bytes, gt_u32 n) { return gt_hash_finish(gt_fnv_extend(GT_FNV_BASIS, bytes, n), n); }

// Id of the byte string a[0, an) then b[0, bn) whose gt_bytes_hash is h, or
// GT_NONE (two parts: Unigram reads a word's first byte as another character).
GT_HD gt_u32 gt_bytes_find_parts(const GtBytesTable* t, const gt_u8* a, gt_u32 an, const gt_u8* b, gt_u32 bn,
                                 gt_u64 h) {
    if (!gt_filter_has(t->filter, t->filter_mask, h)) return GT_NONE;
    gt_u32 n = an + bn;
    for (gt_u64 slot = h & t->mask;; slot = (slot + 1) & t->mask) {
        GtBytesSlot e = t->slots[slot];
        if (e.hash == 0) return GT_NONE;
        if (e.hash == h) {
            const gt_u8* stored = t->blob + e.start;
            gt_u32 len = stored[0] | (gt_u32)stored[1] << 8 | (gt_u32)stored[2] << 16 | (gt_u32)stored[3] << 24;
            gt_u32 i = 0;
            while (len == n && i < an && stored[4 + i] == a[i]) ++i;
            while (len == n && i >= an && i < n && stored[4 + i] == b[i - an]) ++i;
            if (len == n && i == n) return e.id;
        }
    }
}

// Id of the exact byte string whose gt_bytes_hash is h, or GT_NONE.
GT_HD gt_u32 gt_bytes_find_hashed(const GtBytesTable* t, const gt_u8* bytes, gt_u32 n, gt_u64 h) {
    return gt_bytes_find_parts(t, bytes, n, bytes + n, 0, h);
}

// Id of the exact byte string, or GT_NONE.
GT_HD gt_u32 gt_bytes_find(const GtBytesTable* t, const gt_u8* bytes, gt_u32 n) {
    return gt_bytes_find_hashed(t, bytes, n, gt_bytes_hash(bytes, n));
}

// Host-side builder: adds bytes -> id at a free slot (the caller adds each
// distinct byte string once, after writing its length and bytes at `start`
// in the blob).
GT_HD void gt_bytes_insert(GtBytesSlot* slots, gt_u64 mask, gt_u64* filter, gt_u64 filter_mask, const gt_u8* bytes,
                           gt_u32 n, gt_u32 start, gt_u32 id) {
    gt_u64 h = gt_bytes_hash(bytes, n);
    for (int which = 0; which < 2; ++which) {
        gt_u64 bit = gt_filter_bit(h, which, filter_mask);
        filter[bit >> 6] |= 1ull << (bit & 63);
    }
    gt_u64 slot = h & mask;
    while (slots[slot].hash != 0) slot = (slot + 1) & mask;
    slots[slot].hash = h;
    slots[slot].start = start;
    slots[slot].id = id;
}
