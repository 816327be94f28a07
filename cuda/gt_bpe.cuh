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
    // Rank of the merge of each two bytes' tokens, by (first byte << 8 |
    // second byte), GT_NONE where they do not merge (256 kB, null: look them
    // up in `merges`): a word's first pairs, one per byte and most of its
    // lookups, then come from a table that stays in the cache.
    const gt_u32* byte_pair_ranks;
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
// the merge's own (gt_pair_merged), so 8 bytes hold it.
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
    gt_u32 rank = gt_pair_rank(merges, s.ids[left], s.ids[right]);
    if (rank != GT_NONE) {
        GtMergeEntry e = {rank, left};
        gt_heap_push(s.heap, heap_size, e);
    }
}

// The merge loop over the symbols s.ids (linked by prev/next from symbol 0),
// whose pairs that merge are queued in the heap (heap_size entries): writes
// the final ids to out, returns their count.
GT_HD gt_u32 gt_bpe_merge_queued(const GtPairTable* merges, GtBpeScratch s, gt_u32 heap_size, gt_u32* out) {
    while (heap_size > 0) {
        GtMergeEntry top = gt_heap_pop(s.heap, &heap_size);
        gt_u32 pos = top.pos;
        if (s.next[pos] < 0) continue;  // last symbol, or merged away
        gt_u32 right = (gt_u32)s.next[pos];
        gt_u32 rank, merged;
        // As the crate checks: stale when the pair now there does not merge
        // into the id this entry's merge makes.
        if (!gt_pair_find(merges, s.ids[pos], s.ids[right], &rank, &merged) ||
            merged != gt_pair_merged(merges, top.rank)) {
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

// Words of at most this many symbols (nearly all of them) merge without the
// queue: the oracle's queue always takes the lowest-ranked pair there is,
// the leftmost of equal ranks (an entry that passes its stale check is the
// pair now at its place: a symbol only grows to the right, so the same merged
// id means the same two symbols), so a word this short can look for that pair
// directly. Each pair's rank sits in an array in the order of the symbols; a
// merge drops one symbol and looks up only its two new pairs, where the
// queue also looked the popped pair up again and popped stale entries.
#define GT_SHORT_MERGE 32u

// The merge loop over the n >= 2 symbols ids[0..n), whose
// pairs' ranks are rank[0..n-1) (GT_NONE: no merge), in place: returns how
// many symbols remain.
GT_HD gt_u32 gt_bpe_merge_ranked(const GtPairTable* merges, gt_u32* ids, gt_u32* rank, gt_u32 n) {
    for (;;) {
        gt_u32 best = GT_NONE, at = 0;
        for (gt_u32 i = 0; i + 1 < n; ++i) {
            if (rank[i] < best) {
                best = rank[i];
                at = i;
            }
        }
        if (best == GT_NONE) return n;
        gt_u32 made = gt_pair_merged(merges, best);
        ids[at] = made;
        // The two pairs to look up next are known now: ask for their slots
        // before the symbols move, so the two loads overlap that work.
        if (at > 0) gt_pair_prefetch(merges, ids[at - 1], made);
        if (at + 2 < n) gt_pair_prefetch(merges, made, ids[at + 2]);
        --n;
        for (gt_u32 j = at + 1; j < n; ++j) {  // the right symbol leaves
            ids[j] = ids[j + 1];
            rank[j] = rank[j + 1];
        }
        if (at > 0) rank[at - 1] = gt_pair_rank(merges, ids[at - 1], ids[at]);
        if (at + 1 < n) rank[at] = gt_pair_rank(merges, ids[at], ids[at + 1]);
    }
}

// gt_bpe_merge_ranked with the ranks looked up.
GT_HD gt_u32 gt_bpe_merge_short(const GtPairTable* merges, gt_u32* ids, gt_u32 n) {
    gt_u32 rank[GT_SHORT_MERGE];
    for (gt_u32 i = 0; i + 1 < n; ++i) rank[i] = gt_pair_rank(merges, ids[i], ids[i + 1]);
    return gt_bpe_merge_ranked(merges, ids, rank, n);
}

// The merge loop over the n > 0 symbols s.ids[0..n): writes the final ids to
// out, returns their count. Shared by byte-level BPE (one symbol per byte)
// and SentencePiece-style BPE (gt_spm.cuh: one per character, or per
// fallback byte).
GT_HD gt_u32 gt_bpe_merge(const GtPairTable* merges, GtBpeScratch s, gt_u32 n, gt_u32* out) {
    if (n <= GT_SHORT_MERGE) {
        for (gt_u32 i = 0; i < n; ++i) out[i] = s.ids[i];
        return n < 2 ? n : gt_bpe_merge_short(merges, out, n);
    }
    gt_bpe_link(s, n);
    gt_u32 heap_size = 0;
    for (gt_u32 i = 0; i + 1 < n; ++i) gt_push_pair(merges, s, &heap_size, i, i + 1);
    return gt_bpe_merge_queued(merges, s, heap_size, out);
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
    if (n <= GT_SHORT_MERGE) {
        gt_u32 rank[GT_SHORT_MERGE];
        for (gt_u32 i = 0; i < n; ++i) out[i] = m->byte_ids[bytes[i]];
        if (n < 2) return n;
        if (!m->byte_pair_ranks) return gt_bpe_merge_short(&m->merges, out, n);
        for (gt_u32 i = 0; i + 1 < n; ++i) rank[i] = m->byte_pair_ranks[(gt_u32)bytes[i] << 8 | bytes[i + 1]];
        return gt_bpe_merge_ranked(&m->merges, out, rank, n);
    }
    for (gt_u32 i = 0; i < n; ++i) s.ids[i] = m->byte_ids[bytes[i]];
    return gt_bpe_merge(&m->merges, s, n, out);
}

// ---- many words taking turns (the host) -----------------------------------
// One word's merge loop waits on each table read it makes: a merge's next
// pairs are known only once it is applied, and a random probe of a table of
// several MB costs a trip to memory. A CPU thread can wait on many reads at
// once, so it merges GT_TURN_LANES words side by side: each in turn chooses
// its next merge, asks for the reads that merge will make (prefetch), and
// yields to the next word; when its turn comes again the reads have arrived.
// Each word goes through exactly the steps of gt_bpe_merge_ranked, in the
// same order: only the words interleave, so the ids are the same.
#define GT_TURN_LANES 16u
// Longest word (in bytes) a lane takes. A lane's arrays are on the host
// thread's stack, so it can be longer than GT_SHORT_MERGE (which bounds the
// arrays of a device thread): on the host the scan's n^2 compares of ranks
// in L1 cost less than the queue's chain of table probes up to here (most
// words of 33-128 bytes are CJK runs and long identifiers).
#define GT_TURN_MAX 128u

struct GtTurnLane {
    gt_u32 ids[GT_TURN_MAX], rank[GT_TURN_MAX];
    gt_u32 n;       // symbols left
    gt_u32 at;      // where the last merge was applied (its two pairs to look up), or GT_NONE
    gt_u32 best;    // the merge chosen, before it is applied
    gt_u32 word;    // which word, GT_NONE: the lane is free
};

// The lowest-ranked pair of a lane, leftmost on ties: its rank (GT_NONE when
// none merges) and, in *at, its place.
GT_HD gt_u32 gt_turn_choose(const GtTurnLane* l, gt_u32* at) {
    gt_u32 best = GT_NONE;
    for (gt_u32 i = 0; i + 1 < l->n; ++i) {
        if (l->rank[i] < best) {
            best = l->rank[i];
            *at = i;
        }
    }
    return best;
}

// Asks for the line where the merged id of rank `rank` is read (host only).
GT_HD void gt_merged_prefetch(const GtPairTable* t, gt_u32 rank) {
#if !defined(__CUDACC_RTC__) && !defined(__CUDA_ARCH__)
    if (t->merged_of_rank) __builtin_prefetch(&t->merged_of_rank[rank]);
#else
    (void)t;
    (void)rank;
#endif
}

// Byte-level BPE of k words of 1..GT_TURN_MAX bytes, the merge loop only:
// word i is bytes[starts[i], starts[i] + lens[i]); its ids go to
// out[rooms[i]...] (room for lens[i]) and their count to counts[i]. No
// whole-word shortcut: the caller has looked the words up already.
GT_HD void gt_bpe_words_turns(const GtBpeModel* m, const gt_u8* bytes, const gt_u32* starts, const gt_u32* lens,
                              gt_u32 k, gt_u32* out, const gt_u32* rooms, gt_u32* counts) {
    const GtPairTable* merges = &m->merges;
    GtTurnLane lanes[GT_TURN_LANES];
    for (gt_u32 j = 0; j < GT_TURN_LANES; ++j) lanes[j].word = GT_NONE;
    gt_u32 next = 0, busy = 0;
    do {
        for (gt_u32 j = 0; j < GT_TURN_LANES; ++j) {
            GtTurnLane* l = &lanes[j];
            if (l->word == GT_NONE) {  // take the next word
                if (next == k) continue;
                gt_u32 w = next++, n = lens[w];
                const gt_u8* b = bytes + starts[w];
                for (gt_u32 i = 0; i < n; ++i) l->ids[i] = m->byte_ids[b[i]];
                for (gt_u32 i = 0; i + 1 < n; ++i) {
                    l->rank[i] = m->byte_pair_ranks ? m->byte_pair_ranks[(gt_u32)b[i] << 8 | b[i + 1]]
                                                    : gt_pair_rank(merges, l->ids[i], l->ids[i + 1]);
                }
                l->n = n;
                l->at = GT_NONE;
                l->best = GT_NONE;
                l->word = w;
                ++busy;
            }
            if (l->best == GT_NONE) {
                // The pairs around the last merge (their lines were asked for), then the next merge.
                gt_u32 at = l->at, n = l->n;
                if (at != GT_NONE) {
                    if (at > 0) l->rank[at - 1] = gt_pair_rank(merges, l->ids[at - 1], l->ids[at]);
                    if (at + 1 < n) l->rank[at] = gt_pair_rank(merges, l->ids[at], l->ids[at + 1]);
                }
                l->best = gt_turn_choose(l, &l->at);
                if (l->best == GT_NONE) {  // done
                    gt_u32* o = out + rooms[l->word];
                    for (gt_u32 i = 0; i < n; ++i) o[i] = l->ids[i];
                    counts[l->word] = n;
                    l->word = GT_NONE;
                    --busy;
                    continue;
                }
                if (merges->merged_of_rank) {  // its id is one more read: wait for it
                    gt_merged_prefetch(merges, l->best);
                    continue;
                }
            }
            // Apply the chosen merge and ask for its two new pairs' lines.
            gt_u32 at = l->at, made = gt_pair_merged(merges, l->best);
            l->ids[at] = made;
            if (at > 0) gt_pair_prefetch(merges, l->ids[at - 1], made);
            if (at + 2 < l->n) gt_pair_prefetch(merges, made, l->ids[at + 2]);
            --l->n;
            for (gt_u32 i = at + 1; i < l->n; ++i) {
                l->ids[i] = l->ids[i + 1];
                l->rank[i] = l->rank[i + 1];
            }
            l->best = GT_NONE;
        }
    } while (busy > 0 || next < k);
}

// ---- long words: merges in rounds across a block ---------------------------
// One thread merging a word of 2^14 bytes or more (a run of one character, a
// line of CJK, a blob of base64) would hold up the whole kernel, so a block
// merges it in rounds (byte-level BPE here, SentencePiece BPE in gt_spm.cuh;
// the CPU backend too, one thread running the lanes: a run of one symbol
// then takes linear time, not n log n). A round finds the lowest rank r among
// the word's pairs and applies every merge of rank r at once, the leftmost
// first where pairs overlap (a run "a a a a" of one symbol merges its 1st and
// 3rd pair).
// That is what the oracle's queue does, as long as no merge of the round
// makes a pair of lower rank than r (the queue would take that one next, and
// it could take a symbol another merge of the round used): the next round's
// lowest rank tells, and a round that did is undone (merges written by
// training make only pairs of higher rank; lists converted from ranks, such
// as gpt-oss's, do not always). A round is applied when it merges a share
// of the symbols (GT_ROUND_SHARE), so together the rounds read the word a
// bounded number of times; then lane 0 finishes with the heap merge (gt_bpe_merge), which
// from a state where every merge of rank <= r is done gives what it gives
// from the start.
#define GT_LONG_WORD 16384u

// A round is applied when it merges at least 1/GT_ROUND_SHARE of the
// symbols: it looks up every pair, which 256 lanes share on a GPU, while the
// heap merge looks up only around each merge; on the host one thread does a
// round's lookups alone.
#if defined(__CUDA_ARCH__)
#define GT_ROUND_SHARE 32u
#else
#define GT_ROUND_SHARE 4u
#endif

// Lane `lane`'s share [*lo, *hi) of `count` items, in contiguous stripes.
GT_HD void gt_lane_share(gt_u32 count, gt_u32 lane, gt_u32* lo, gt_u32* hi) {
    gt_u64 per = (count + (gt_u64)GT_LANES - 1) / GT_LANES, at = lane * per;
    *lo = (gt_u32)(at < count ? at : count);
    *hi = (gt_u32)(at + per < count ? at + per : count);
}

// Merges the k > 0 symbols in s.ids (written before a GT_SYNC) into out
// (room for k ids) and their count into *count, with the block's GT_LANES
// lanes (see above). The rounds use s.ids, s.prev and s.next as three arrays
// of k u32; the heap merge then takes its scratch back.
GT_HD void gt_bpe_rounds(const GtPairTable* merges, GtBpeScratch s, gt_u32 k, gt_u32* out, gt_u32* count) {
    GT_SHARED gt_u32 lane_a[GT_LANES], lane_b[GT_LANES], lane_c[GT_LANES];
    GT_SHARED gt_u32 symbols, lowest, productive;
    gt_u32* cur = s.ids;              // the symbols
    gt_u32* next = (gt_u32*)s.prev;  // the symbols after a round (then: before it)
    gt_u32* pair = (gt_u32*)s.next;  // each pair's rank, then 1 where it merges
    // Every lane holds the same copies of these (read from shared memory).
    gt_u32 last = GT_NONE, before = 0, done = 0, ranked = 0;  // ranked: pair[] holds cur's ranks
    for (;;) {
        // Each pair's rank; the lowest of each lane's share (lane_a).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, low = GT_NONE, rank, merged;
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi; ++j) {
                pair[j] = gt_pair_find(merges, cur[j], cur[j + 1], &rank, &merged) ? rank : GT_NONE;
                low = pair[j] < low ? pair[j] : low;
            }
            lane_a[lane] = low;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            lowest = GT_NONE;
            for (gt_u32 l = 0; l < GT_LANES; ++l) lowest = lane_a[l] < lowest ? lane_a[l] : lowest;
        }
        GT_SYNC();
        gt_u32 r = lowest;
        if (last != GT_NONE && r < last) {  // the last round made a pair of lower rank: undone
            gt_u32* made = cur;
            cur = next;
            next = made;
            k = before;
            break;
        }
        if (r == GT_NONE) {
            done = 1;
            break;
        }
        // Runs of rank-r pairs cross shares: the run each share starts and
        // ends with (lane_a, lane_b), then the run going into each (lane_c).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, lead = 0, tail = 0;
            gt_lane_share(k - 1, lane, &lo, &hi);
            while (lo + lead < hi && pair[lo + lead] == r) ++lead;
            while (tail < hi - lo && pair[hi - 1 - tail] == r) ++tail;
            lane_a[lane] = lead;
            lane_b[lane] = tail;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 run = 0, lo, hi;
            for (gt_u32 l = 0; l < GT_LANES; ++l) {
                gt_lane_share(k - 1, l, &lo, &hi);
                lane_c[l] = run;
                run = lane_a[l] == hi - lo ? run + (hi - lo) : lane_b[l];
            }
        }
        GT_SYNC();
        // The pairs that merge: the 1st, 3rd, ... of each run. Counted first
        // (lane_a): a round that merges little is not applied, and the heap
        // merge goes on from here with the ranks found.
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, run = lane_c[lane], merging = 0;
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi; ++j) {
                run = pair[j] == r ? run + 1 : 0;
                merging += run & 1;
            }
            lane_a[lane] = merging;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 merging = 0;
            for (gt_u32 l = 0; l < GT_LANES; ++l) merging += lane_a[l];
            productive = merging >= k / GT_ROUND_SHARE;
        }
        GT_SYNC();
        if (!productive) {
            ranked = 1;
            break;
        }
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, run = lane_c[lane];
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi; ++j) {
                run = pair[j] == r ? run + 1 : 0;
                pair[j] = run & 1;
            }
        }
        GT_SYNC();
        // Symbols kept (all but the right one of a merging pair), per share (lane_b).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, kept = 0;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) kept += !(i > 0 && pair[i - 1]);
            lane_b[lane] = kept;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 at = 0;
            for (gt_u32 l = 0; l < GT_LANES; ++l) {
                lane_c[l] = at;
                at += lane_b[l];
            }
            symbols = at;
        }
        GT_SYNC();
        // The round's symbols, each share's from where it starts (lane_c).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, at = lane_c[lane];
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) {
                if (i > 0 && pair[i - 1]) continue;
                next[at++] = i + 1 < k && pair[i] ? gt_pair_merged(merges, r) : cur[i];
            }
        }
        GT_SYNC();
        gt_u32* was = cur;
        cur = next;
        next = was;
        before = k;
        k = symbols;
        last = r;
    }
    if (done) {  // no merge left: the symbols are the ids
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) out[i] = cur[i];
        }
        GT_LANE_ZERO *count = k;
        return;
    }
    // The rest on one lane, from the last state the oracle also reaches.
    if (cur != s.ids) {
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) s.ids[i] = cur[i];
        }
        GT_SYNC();
    }
    GT_LANE_ZERO {
        gt_u32 queued = 0;
        for (gt_u32 j = 0; ranked && j + 1 < k; ++j) {
            GtMergeEntry e = {pair[j], j};
            if (pair[j] != GT_NONE) gt_heap_push(s.heap, &queued, e);
        }
        gt_bpe_link(s, k);  // (pair[] is s.next)
        *count = ranked ? gt_bpe_merge_queued(merges, s, queued, out) : gt_bpe_merge(merges, s, k, out);
    }
}

// Byte-level BPE of a long word bytes[0..n) (as gt_bpe_word gives it) into
// out (room for n ids) and its id count into *count, by a block.
GT_HD void gt_long_word(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out,
                        gt_u32* count) {
    GT_SHARED gt_u32 whole;
    GT_LANE_ZERO {
        whole = m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out);
        if (whole) *count = 1;
    }
    GT_SYNC();
    if (whole) return;
    GT_EACH_LANE(lane) {
        gt_u32 lo, hi;
        gt_lane_share(n, lane, &lo, &hi);
        for (gt_u32 i = lo; i < hi; ++i) s.ids[i] = m->byte_ids[bytes[i]];
    }
    GT_SYNC();
    gt_bpe_rounds(&m->merges, s, n, out, count);
}
