// gt_bpe.cuh: byte-level BPE for one word (one pre-token), exactly as the
// Hugging Face `tokenizers` crate computes it (models/bpe/word.rs, merge_all).
//
// Semantics (the oracle's, kept bit for bit):
// - each byte of the word starts as one symbol: the id of that byte's one-
//   character byte-level token (`byte_ids`);
// - with `ignore_merges`, a word found whole in the vocabulary is one token;
// - otherwise merges are applied lowest rank first, ties by leftmost position,
//   from a priority queue with lazy invalidation: an entry is skipped when its
//   left symbol was merged away, has no right neighbour, or the current pair
//   no longer merges into the entry's id. Each merge pushes the new pairs with
//   its left and right neighbours.
// Cost: O(n log n) in the word's length n (no quadratic rescans, so runs of
// 100,000 repeated characters stay cheap).
//
// Worked example (merges: "a a" rank 0 -> "aa", "aa a" rank 1 -> "aaa"):
//   "aaaa" -> a a a a -> (rank 0 at 0) aa a a -> (rank 0 at 2) aa aa -> done: [aa, aa]
#pragma once
#include "gt_common.cuh"
#include "gt_hash.cuh"

struct GtBpeModel {
    GtPairTable merges;
    GtBytesTable vocab;    // whole words, for the ignore_merges shortcut
    gt_u32 byte_ids[256];  // id of each byte's one-character token
    gt_u32 ignore_merges;  // 1: a word found in `vocab` is emitted whole
    gt_u32 pad_;           // named padding: the Rust mirror has no hidden bytes
};

// Caller-owned scratch for a word of n bytes: ids/prev/next hold n
// entries each, heap holds 2n. Why that is enough: it starts with at most
// n - 1 pairs; every pop that merges pushes at most 2 (net +1), every other
// pop pushes none (net -1), and there are at most n - 1 merges, so it never
// holds more than 2n - 2.
// An entry is a merge's rank and its left symbol; the id it merges into is
// the merge's own (merges.merged_of_rank), so 8 bytes hold it.
struct GtMergeEntry {
    gt_u32 rank;
    gt_u32 pos;
};

// A symbol's next is -1 at the end of the word, -2 once merged away.
struct GtBpeScratch {
    gt_u32* ids;
    gt_i32* prev;
    gt_i32* next;
    GtMergeEntry* heap;
};

GT_HD int gt_merge_before(GtMergeEntry a, GtMergeEntry b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

GT_HD void gt_heap_push(GtMergeEntry* heap, gt_u32* size, GtMergeEntry e) {
    gt_u32 i = (*size)++;
    while (i > 0) {
        gt_u32 parent = (i - 1) / 2;
        if (!gt_merge_before(e, heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

GT_HD GtMergeEntry gt_heap_pop(GtMergeEntry* heap, gt_u32* size) {
    GtMergeEntry top = heap[0];
    GtMergeEntry last = heap[--(*size)];
    gt_u32 n = *size, i = 0;
    for (;;) {
        gt_u32 child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && gt_merge_before(heap[child + 1], heap[child])) ++child;
        if (!gt_merge_before(heap[child], last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (n > 0) heap[i] = last;
    return top;
}

// Pushes the merge of the symbols at `left` and `right`, if there is one.
GT_HD void gt_push_pair(const GtPairTable* merges, GtBpeScratch s, gt_u32* heap_size, gt_u32 left, gt_u32 right) {
    gt_u32 rank, merged;
    if (gt_pair_find(merges, s.ids[left], s.ids[right], &rank, &merged)) {
        GtMergeEntry e = {rank, left};
        gt_heap_push(s.heap, heap_size, e);
    }
}

// The merge loop over the n > 0 symbols s.ids[0..n) (the caller links
// prev/next): writes the final ids to out, returns their count.
// Shared by byte-level BPE (one symbol per byte) and SentencePiece-style BPE
// (gt_spm.cuh: one per character, or per fallback byte).
GT_HD gt_u32 gt_bpe_merge(const GtPairTable* merges, GtBpeScratch s, gt_u32 n, gt_u32* out) {
    gt_u32 heap_size = 0;
    for (gt_u32 i = 0; i + 1 < n; ++i) gt_push_pair(merges, s, &heap_size, i, i + 1);

    while (heap_size > 0) {
        GtMergeEntry top = gt_heap_pop(s.heap, &heap_size);
        gt_u32 pos = top.pos;
        if (s.next[pos] < 0) continue;  // last symbol, or merged away
        gt_u32 right = (gt_u32)s.next[pos];
        gt_u32 rank, merged;
        // As the crate checks: stale when the pair now there does not merge
        // into the id this entry's merge makes.
        if (!gt_pair_find(merges, s.ids[pos], s.ids[right], &rank, &merged) ||
            merged != merges->merged_of_rank[top.rank]) {
            continue;
        }
        s.ids[pos] = merged;
        s.next[pos] = s.next[right];
        if (s.next[right] >= 0) s.prev[s.next[right]] = (gt_i32)pos;
        s.next[right] = -2;  // merged away: its queued pairs are stale
        if (s.prev[pos] >= 0) gt_push_pair(merges, s, &heap_size, (gt_u32)s.prev[pos], pos);
        if (s.next[pos] >= 0) gt_push_pair(merges, s, &heap_size, pos, (gt_u32)s.next[pos]);
    }

    gt_u32 count = 0;
    for (gt_i32 i = 0; i >= 0; i = s.next[i]) out[count++] = s.ids[i];
    return count;
}

// Links symbols 0..n into a list.
GT_HD void gt_bpe_link(GtBpeScratch s, gt_u32 n) {
    for (gt_u32 i = 0; i < n; ++i) {
        s.prev[i] = (gt_i32)i - 1;
        s.next[i] = i + 1 < n ? (gt_i32)(i + 1) : -1;
    }
}

// The ignore_merges shortcut: a word found whole in `vocab` is one token
// (written to out[0]). Returns 1 if it was found, else 0.
GT_HD gt_u32 gt_whole_word(const GtBytesTable* vocab, const gt_u8* bytes, gt_u32 n, gt_u32* out) {
    gt_u32 id = gt_bytes_find(vocab, bytes, n);
    if (id == GT_NONE) return 0;
    out[0] = id;
    return 1;
}

// Encodes `bytes[0..n)` into `out` (room for n ids); returns the number of ids.
GT_HD gt_u32 gt_bpe_word(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out) {
    if (n == 0) return 0;
    if (m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out)) return 1;
    for (gt_u32 i = 0; i < n; ++i) s.ids[i] = m->byte_ids[bytes[i]];
    gt_bpe_link(s, n);
    return gt_bpe_merge(&m->merges, s, n, out);
}
