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
    // The token a character of U+0080..U+FFFF starts a word's merges as, by
    // code point (0x10000 entries, with flags: see gt_bpe_symbols); null:
    // every character starts as its bytes.
    const gt_u32* char_atoms;
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

// The lowest of the ranks of `pairs` pairs, leftmost on ties (GT_NONE when
// none merges), and in *at its place. Without a branch on which is lower:
// that is unpredictable, and its mispredictions made this scan a third of
// the merge loop's time on fresh text. A rank and its place compare as one
// key, so the leftmost of equal ranks is the lower key.
GT_HD gt_u64 gt_lower_key(gt_u64 best, const gt_u32* rank, gt_u32 i) {
    gt_u64 key = (gt_u64)rank[i] << 32 | i;
    return key < best ? key : best;
}

GT_HD gt_u32 gt_lowest_pair(const gt_u32* rank, gt_u32 pairs, gt_u32* at) {
    // Even and odd places in two chains, which the CPU runs side by side.
    gt_u64 even = ~0ull, odd = ~0ull;
    gt_u32 i = 0;
    for (; i + 1 < pairs; i += 2) {
        even = gt_lower_key(even, rank, i);
        odd = gt_lower_key(odd, rank, i + 1);
    }
    if (i < pairs) even = gt_lower_key(even, rank, i);
    gt_u64 best = even < odd ? even : odd;
    *at = (gt_u32)best;
    return (gt_u32)(best >> 32);
}

// One merge of the n >= 1 symbols ids[0..n), whose pairs' ranks are
// rank[0..n-1) (GT_NONE: no merge), in place: the lowest-ranked pair,
// leftmost on ties, is merged and *n lowered; returns its rank, GT_NONE
// (nothing changed) when no pair merges. The plan traces a character's
// merges with it too (rust/plan/char_atoms.rs).
GT_HD gt_u32 gt_bpe_merge_step(const GtPairTable* merges, gt_u32* ids, gt_u32* rank, gt_u32* count) {
    gt_u32 n = *count, at, best = gt_lowest_pair(rank, n - 1, &at);
    if (best == GT_NONE) return GT_NONE;
    gt_u32 made = gt_pair_merged(merges, best);
    ids[at] = made;
    // The two pairs to look up next are known now: ask for their slots
    // before the symbols move, so the two loads overlap that work.
    if (at > 0) gt_pair_prefetch(merges, ids[at - 1], made);
    if (at + 2 < n) gt_pair_prefetch(merges, made, ids[at + 2]);
    *count = --n;
    for (gt_u32 j = at + 1; j < n; ++j) {  // the right symbol leaves
        ids[j] = ids[j + 1];
        rank[j] = rank[j + 1];
    }
    if (at > 0) rank[at - 1] = gt_pair_rank(merges, ids[at - 1], ids[at]);
    if (at + 1 < n) rank[at] = gt_pair_rank(merges, ids[at], ids[at + 1]);
    return best;
}

// The merge loop over the n >= 2 symbols ids[0..n), whose pairs' ranks are
// rank[0..n-1), in place: returns how many symbols remain.
GT_HD gt_u32 gt_bpe_merge_ranked(const GtPairTable* merges, gt_u32* ids, gt_u32* rank, gt_u32 n) {
    while (gt_bpe_merge_step(merges, ids, rank, &n) != GT_NONE) {
    }
    return n;
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

// ---- where a word's merges start ------------------------------------------
// BPE starts from one symbol per byte. Most merges of a multi-byte character
// join its own bytes (a CJK character is three bytes, merged in two steps
// into one token), and they are the same in every word: starting such a
// character as that token, its "atom", skips them. Exact where the plan
// (rust/plan/char_atoms.rs) finds, for the character alone:
//   1. its bytes merge into one token; let R be the highest rank of those merges;
//   2. no merge of rank <= R joins one of its partial symbols (any but the
//      token) with a symbol of the neighbours it has in this word: the
//      partial symbol at its right end with a symbol that starts the next
//      character, or the one at its left end with a symbol that ends the
//      character before (the plan keeps this per kind of neighbour: the
//      flags below);
//   3. no merge of rank <= R has the token itself as a side.
// Why that is the oracle's result: while the character is partial, its next
// own merge (rank <= R) is in the queue, so by 2 no merge that takes one of
// its partial symbols comes first; its own merges are then those it makes
// alone. By 3, every pair its token makes ranks above every one of its own
// merges, so the queue cannot take such a pair before the token exists, and
// from the state with every atom made the queue takes the pairs between
// tokens in the same order as from the atoms (merges with other characters'
// partial symbols, of rank above R, wait in both).

// An entry of char_atoms: the atom's id (GT_ATOM_ID: none, the character
// always starts as its bytes), and flags for the neighbours next to which
// condition 2 fails: one that ends / starts with an ASCII byte, or with a
// byte of a longer character. Before a longer character, the merges that
// join the character's partial end with a token holding a whole character
// count only before that character: NOT_BEFORE_LISTED, and LISTED on every
// character some such merge's token starts with.
#define GT_ATOM_ID 0x00FFFFFFu
#define GT_ATOM_NOT_AFTER_ASCII (1u << 24)
#define GT_ATOM_NOT_AFTER_CHAR (1u << 25)
#define GT_ATOM_NOT_BEFORE_ASCII (1u << 26)
#define GT_ATOM_NOT_BEFORE_CHAR (1u << 27)
#define GT_ATOM_NOT_BEFORE_LISTED (1u << 28)
#define GT_ATOM_LISTED (1u << 29)

// The length of the character of two or three bytes at bytes[i] (a lead
// byte below 0xF0 and its continuation bytes, all before n) and its code
// point, else 0 (bytes that are no such character start as bytes).
GT_HD gt_u32 gt_atom_char(const gt_u8* bytes, gt_u32 n, gt_u32 i, gt_u32* cp) {
    gt_u8 b = bytes[i];
    if (b < 0xC0 || b >= 0xF0) return 0;
    gt_u32 len = b < 0xE0 ? 2u : 3u;
    if (i + len > n || (bytes[i + 1] & 0xC0) != 0x80 || (len == 3 && (bytes[i + 2] & 0xC0) != 0x80)) return 0;
    *cp = len == 2 ? (gt_u32)(b & 0x1F) << 6 | (bytes[i + 1] & 0x3Fu)
                   : (gt_u32)(b & 0x0F) << 12 | (gt_u32)(bytes[i + 1] & 0x3F) << 6 | (bytes[i + 2] & 0x3Fu);
    return len;
}

// The atom the character at bytes[i] of word bytes[0..n) starts its merges
// as in this word (GT_NONE: it starts as its bytes, or no character of two
// or three bytes starts there), its length in *len and code point in *cp
// (*len 0: no such character).
GT_HD gt_u32 gt_atom_here(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, gt_u32 i, gt_u32* len, gt_u32* cp) {
    const gt_u32* atoms = m->char_atoms;
    *len = atoms ? gt_atom_char(bytes, n, i, cp) : 0;
    if (!*len) return GT_NONE;
    gt_u32 atom = atoms[*cp];
    if ((atom & GT_ATOM_ID) == GT_ATOM_ID) return GT_NONE;
    // The neighbours next to which the character must start as its bytes.
    gt_u32 not_here = 0, end = i + *len;
    if (i > 0) not_here |= bytes[i - 1] < 0x80 ? GT_ATOM_NOT_AFTER_ASCII : GT_ATOM_NOT_AFTER_CHAR;
    if (end < n) {
        if (bytes[end] < 0x80) {
            not_here |= GT_ATOM_NOT_BEFORE_ASCII;
        } else {
            not_here |= GT_ATOM_NOT_BEFORE_CHAR;
            // A listed character next, or one the table does not cover.
            gt_u32 next_cp;
            if ((atom & GT_ATOM_NOT_BEFORE_LISTED) &&
                (!gt_atom_char(bytes, n, end, &next_cp) || (atoms[next_cp] & GT_ATOM_LISTED))) {
                not_here |= GT_ATOM_NOT_BEFORE_LISTED;
            }
        }
    }
    return (atom & not_here) ? GT_NONE : atom & GT_ATOM_ID;
}

// Writes the symbols word bytes[0..n) starts its merges from to ids (room
// for n): a character's atom where it has one, else each byte's token.
// Returns their count (n: every symbol is a byte's).
GT_HD gt_u32 gt_bpe_symbols(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, gt_u32* ids) {
    gt_u32 k = 0;
    for (gt_u32 i = 0; i < n;) {
        gt_u32 len, cp, atom = gt_atom_here(m, bytes, n, i, &len, &cp);
        if (atom != GT_NONE) {
            ids[k++] = atom;
            i += len;
            continue;
        }
        ids[k++] = m->byte_ids[bytes[i]];
        ++i;
    }
    return k;
}

// ---- cutting a word where no merge joins its two sides ---------------------
// Two neighbouring characters A and B of a word that both start as atoms can
// be joined only by a merge whose token holds A then B, whole: each is one
// symbol from the start, so a symbol that holds a byte of one holds all of
// it. Where no token of the vocabulary holds A then B (`pairs`: a filter of
// the code points of every two characters some token holds side by side;
// one it may hold by a collision is left uncut, which is exact too), no merge
// crosses between them, and a merge on one side changes no pair of the
// other: the word's ids are those of its two sides, each merged alone as a
// word (A and B still start as atoms there: with fewer neighbours, fewer
// conditions). Not under ignore_merges, where a side found whole in the
// vocabulary would be one token. A run of CJK characters is one long word
// that text seldom repeats; cut so, it is pieces of one to a few characters
// (a word, most of them), which do repeat.
// Whether a word whose first byte is `first` (and the byte after it
// `second`, 0 at the end of the text) is a run of CJK characters: it starts
// with a CJK character or kana (U+3000 to U+9FFF, lead bytes E3..E9), or
// with one ASCII byte (a space, a mark) and then one. Without a branch: it
// is asked of every word, and word kinds do not predict.
GT_HD gt_u8 gt_cjk_lead(gt_u8 byte) { return (gt_u8)(byte - 0xE3u) < 7u; }

GT_HD int gt_cjk_led(gt_u32 first, gt_u32 second) { return gt_cjk_lead((gt_u8)(first < 0x80 ? second : first)); }

// Whether bytes[0..n) holds a lead byte of a CJK character or kana (a text
// with none has no word to cut): in blocks of 64 bytes without a branch per
// byte, in byte arithmetic, which the compiler makes vector instructions.
GT_HD int gt_has_cjk(const gt_u8* bytes, gt_u32 n) {
    gt_u32 i = 0;
    for (; i + 64 <= n; i += 64) {
        const gt_u8* block = bytes + i;
        gt_u8 any = 0;
        for (int j = 0; j < 64; ++j) any |= gt_cjk_lead(block[j]);
        if (any) return 1;
    }
    for (; i < n; ++i) {
        if (gt_cjk_lead(bytes[i])) return 1;
    }
    return 0;
}

// The end of the piece of word bytes[0..n) that starts at `from` (where a
// character starts): the first such cut after it, or n.
GT_HD gt_u32 gt_bpe_cut(const GtBpeModel* m, const GtPairBits* pairs, const gt_u8* bytes, gt_u32 n, gt_u32 from) {
    gt_u32 before = GT_NONE;  // the code point of the atom that ends at i, GT_NONE: none
    for (gt_u32 i = from; i < n;) {
        gt_u32 len, cp;
        if (gt_atom_here(m, bytes, n, i, &len, &cp) == GT_NONE) {
            before = GT_NONE;
            ++i;
            continue;
        }
        if (before != GT_NONE && !gt_pair_maybe(pairs, before, cp)) return i;
        before = cp;
        i += len;
    }
    return n;
}

// Encodes `bytes[0..n)` into `out` (room for n ids); returns the number of ids.
GT_HD gt_u32 gt_bpe_word(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out) {
    if (n == 0) return 0;
    if (m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out)) return 1;
    if (n <= GT_SHORT_MERGE) {
        gt_u32 rank[GT_SHORT_MERGE];
        gt_u32 k = gt_bpe_symbols(m, bytes, n, out);
        if (k < 2) return k;
        if (!m->byte_pair_ranks || k < n) return gt_bpe_merge_short(&m->merges, out, k);
        for (gt_u32 i = 0; i + 1 < n; ++i) rank[i] = m->byte_pair_ranks[(gt_u32)bytes[i] << 8 | bytes[i + 1]];
        return gt_bpe_merge_ranked(&m->merges, out, rank, n);
    }
    gt_u32 k = gt_bpe_symbols(m, bytes, n, s.ids);
    return gt_bpe_merge(&m->merges, s, k, out);
}

// ---- many words taking turns (the host) -----------------------------------
// One word's merge loop waits on each table read it makes: a merge's next
// pairs are known only once it is applied, and a random probe of a table of
// several MB costs a trip to memory. A CPU thread can wait on many reads at
// once, so it merges GT_TURN_LANES words side by side: each in turn looks up
// the pairs its last merge made (their lines were asked for), chooses and
// applies its next merge, asks for the lines of the two pairs that merge
// makes, and yields to the next word; when its turn comes again the reads
// have arrived. Each word merges as gt_bpe_merge_ranked does, the lowest
// value first, leftmost on ties: only the words interleave, so the ids are
// the same.
//
// A lane keeps its symbols where the word's first symbols were (a merge
// unlinks the right one: nothing moves), and each pair's value with the
// place of its left symbol as one key, value << 7 | place, so the lowest key
// is the merge to make (places keep the symbols' order). The lowest of a
// lane's keys is taken in eight running minimums without a branch (which
// key is lower is unpredictable). Where a merge's id is read by its rank
// (merged_of_rank), that read is asked for when the pair is looked up.
#define GT_TURN_LANES 16u
// Longest word (in bytes) a lane takes: a place fits 7 bits and a u8 link.
// A lane's arrays are on the host thread's stack, so it can be longer than
// GT_SHORT_MERGE (which bounds the arrays of a device thread): on the host
// the scan of a lane's keys costs less than the queue's chain of table
// probes up to here (most words of 33-128 bytes are CJK runs and long
// identifiers).
#define GT_TURN_MAX 128u
#define GT_TURN_PLACE_BITS 7u
#define GT_TURN_END 0xFFu  // no neighbour
static_assert(GT_TURN_MAX <= (1u << GT_TURN_PLACE_BITS) && GT_TURN_MAX <= GT_TURN_END, "a place fits its bits and a link");

struct GtTurnLane {
    gt_u32 ids[GT_TURN_MAX];   // the symbol at each live place
    gt_u32 keys[GT_TURN_MAX];  // the key of the pair a live place starts; GT_NONE: none, or not live
    gt_u8 next[GT_TURN_MAX], prev[GT_TURN_MAX];  // a live place's neighbours (GT_TURN_END: none)
    gt_u32 span;  // keys read: the word's pairs, rounded up to 8
    gt_u32 at;    // where the last merge was applied (its two pairs to look up), or GT_NONE
    gt_u32 word;  // which word, GT_NONE: the lane is free
};

// Asks for the line where the merged id of rank `rank` is read (host only).
GT_HD void gt_merged_prefetch(const GtPairTable* t, gt_u32 rank) {
#if !defined(__CUDACC_RTC__) && !defined(__CUDA_ARCH__)
    if (t->merged_of_rank && rank != GT_NONE) __builtin_prefetch(&t->merged_of_rank[rank]);
#else
    (void)t;
    (void)rank;
#endif
}

// The key of the pair at `place` whose value (gt_pair_rank) is `value`.
GT_HD gt_u32 gt_turn_key(gt_u32 value, gt_u32 place) {
    return value == GT_NONE ? GT_NONE : value << GT_TURN_PLACE_BITS | place;
}

// The key of the pair of symbols at `place` and `right` of a lane. Where ids
// are read by rank (merged_of_rank), the id the pair would merge into is
// asked for now, so that it is there when the lane applies the merge.
GT_HD gt_u32 gt_turn_pair(const GtPairTable* merges, const GtTurnLane* l, gt_u32 place, gt_u32 right) {
    gt_u32 value = gt_pair_rank(merges, l->ids[place], l->ids[right]);
    gt_merged_prefetch(merges, value);
    return gt_turn_key(value, place);
}

// The lowest of keys[0..span) (span a multiple of 8), GT_NONE when none merges.
GT_HD gt_u32 gt_turn_lowest(const gt_u32* keys, gt_u32 span) {
    gt_u32 low[8] = {GT_NONE, GT_NONE, GT_NONE, GT_NONE, GT_NONE, GT_NONE, GT_NONE, GT_NONE};
    for (gt_u32 i = 0; i < span; i += 8) {
        for (gt_u32 j = 0; j < 8; ++j) low[j] = keys[i + j] < low[j] ? keys[i + j] : low[j];
    }
    gt_u32 best = low[0];
    for (gt_u32 j = 1; j < 8; ++j) best = low[j] < best ? low[j] : best;
    return best;
}

// Takes word bytes[0..len) (1..GT_TURN_MAX bytes) into a free lane.
GT_HD void gt_turn_take(const GtBpeModel* m, GtTurnLane* l, const gt_u8* b, gt_u32 len, gt_u32 word) {
    const GtPairTable* merges = &m->merges;
    gt_u32 n = gt_bpe_symbols(m, b, len, l->ids);
    for (gt_u32 i = 0; i < n; ++i) {
        l->next[i] = (gt_u8)(i + 1 < n ? i + 1 : GT_TURN_END);
        l->prev[i] = (gt_u8)(i > 0 ? i - 1 : GT_TURN_END);
    }
    if (m->byte_pair_ranks && n == len) {
        for (gt_u32 i = 0; i + 1 < n; ++i) {
            gt_u32 value = m->byte_pair_ranks[(gt_u32)b[i] << 8 | b[i + 1]];
            gt_merged_prefetch(merges, value);
            l->keys[i] = gt_turn_key(value, i);
        }
    } else {
        // Ask for every pair's line first, so the reads overlap.
        for (gt_u32 i = 0; i + 1 < n; ++i) gt_pair_prefetch(merges, l->ids[i], l->ids[i + 1]);
        for (gt_u32 i = 0; i + 1 < n; ++i) l->keys[i] = gt_turn_pair(merges, l, i, i + 1);
    }
    gt_u32 pairs = n - 1;
    l->span = (pairs + 7u) & ~7u;
    for (gt_u32 i = pairs; i < l->span; ++i) l->keys[i] = GT_NONE;
    l->at = GT_NONE;
    l->word = word;
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
                gt_turn_take(m, l, bytes + starts[next], lens[next], next);
                ++next;
                ++busy;
            }
            // The pairs around the last merge (their lines were asked for), then the next merge.
            gt_u32 at = l->at;
            if (at != GT_NONE) {
                gt_u32 left = l->prev[at], right = l->next[at];
                if (left != GT_TURN_END) l->keys[left] = gt_turn_pair(merges, l, left, at);
                if (right != GT_TURN_END) l->keys[at] = gt_turn_pair(merges, l, at, right);
            }
            gt_u32 best = gt_turn_lowest(l->keys, l->span);
            if (best == GT_NONE) {  // done: the first place is never merged away
                gt_u32* o = out + rooms[l->word];
                gt_u32 c = 0;
                for (gt_u32 i = 0; i != GT_TURN_END; i = l->next[i]) o[c++] = l->ids[i];
                counts[l->word] = c;
                l->word = GT_NONE;
                --busy;
                continue;
            }
            // Apply it: the right symbol leaves; ask for the two new pairs' lines.
            at = best & ((1u << GT_TURN_PLACE_BITS) - 1u);
            gt_u32 made = gt_pair_merged(merges, best >> GT_TURN_PLACE_BITS);
            gt_u32 gone = l->next[at], right = l->next[gone], left = l->prev[at];
            l->ids[at] = made;
            l->next[at] = (gt_u8)right;
            l->keys[gone] = GT_NONE;
            l->keys[at] = GT_NONE;
            if (right != GT_TURN_END) {
                l->prev[right] = (gt_u8)at;
                gt_pair_prefetch(merges, made, l->ids[right]);
            }
            if (left != GT_TURN_END) {
                l->keys[left] = GT_NONE;
                gt_pair_prefetch(merges, l->ids[left], made);
            }
            l->at = at;
        }
    } while (busy > 0 || next < k);
}

// ---- long words: merges in rounds across a block ---------------------------
// One thread merging a word of 2^11 bytes or more (GT_LONG_WORD: a run of one
// character, a line of CJK, a blob of base64) would hold up the whole kernel, so a block
// merges it in rounds (byte-level BPE here, SentencePiece BPE in gt_spm.cuh;
// the CPU backend too, one thread running the lanes: a run of one symbol
// then takes linear time, not n log n). A round finds the lowest rank r among
// the word's pairs and applies the merges of rank r at once, the leftmost
// first where pairs overlap (a run "a a a a" of one symbol merges its 1st and
// 3rd pair).
//
// Why that is the oracle's result. From a state the oracle's queue passes
// through whose lowest pair rank is r, the queue merges the rank-r pairs left
// to right for as long as no merge makes a pair of lower rank. A merge of rank
// r makes a token t and two pairs: (its left neighbour, t) and (t, its right
// neighbour), where, when the queue gets to it, the merges left of it are done
// and those right of it are not: the left neighbour is the one after the
// round, the right one the one before it. (Neither pair has rank r: t is
// longer than each side of that merge.) The round looks both pairs up for
// every merge. If none ranks below r, the round is exactly the queue's
// merges of rank r. If one does, the queue takes that pair right after the
// merge that made it (it may take a symbol a later merge of rank r wanted), so
// the round applies its merges up to that one only: a state the queue passes
// through, whose lowest rank, below r, the next round takes, as the queue does.
// Merge lists written by training never do this; lists rebuilt from ranks
// (gpt-oss's, Mistral's) can, and so does Llama-2's "▁" before a run of one
// letter.
//
// A round looks up every pair, which the lanes share, while the heap merge
// looks up only around each merge: a round is applied when it merges at least
// 1/share of the symbols (GT_ROUND_SHARE_GPU on a GPU; GT_ROUND_SHARE_HOST on
// the host, where one thread does all of a round's look-ups), so together
// the rounds read the word a bounded number of times. A round cut short, and
// the round after it (which takes the lower-rank pairs it left), are applied
// whatever they merge, GT_ROUND_REPAIRS times at most. Then lane 0 finishes
// with the heap merge (gt_bpe_merge_queued), seeded with the ranks the last
// round looked up: from a state the oracle passes through, it gives the
// oracle's result.
// A word of GT_LONG_WORD bytes or more is long on a device (a block merges
// it: one thread on a 2 kB word is already ~10x a grid-stride thread's whole
// share of a chunk's words); the CPU backend, one thread either way, keeps
// the heap merge up to GT_HOST_LONG_WORD.
#define GT_LONG_WORD 2048u
#define GT_HOST_LONG_WORD 16384u
#define GT_ROUND_SHARE_GPU 32u
#define GT_ROUND_SHARE_HOST 4u
#define GT_ROUND_REPAIRS 8u

// Lane `lane`'s share [*lo, *hi) of `count` items, in contiguous stripes.
GT_HD void gt_lane_share(gt_u32 count, gt_u32 lane, gt_u32* lo, gt_u32* hi) {
    gt_u64 per = (count + (gt_u64)GT_LANES - 1) / GT_LANES, at = lane * per;
    *lo = (gt_u32)(at < count ? at : count);
    *hi = (gt_u32)(at + per < count ? at + per : count);
}

// True when the pair (left, right) merges with a rank below r.
GT_HD int gt_ranks_below(const GtPairTable* merges, gt_u32 left, gt_u32 right, gt_u32 r) {
    return gt_pair_rank(merges, left, right) < r;  // GT_NONE (no merge) is above every rank
}

// Merges the k > 0 symbols in s.ids (written before a GT_SYNC) into out
// (room for k ids) and their count into *count, with the block's GT_LANES
// lanes and the schedule `share` (see above). The rounds use s.ids, s.prev
// and s.next as three arrays of k u32, and out for which pairs merge; the
// heap merge then takes its scratch back.
GT_HD void gt_bpe_rounds(const GtPairTable* merges, GtBpeScratch s, gt_u32 k, gt_u32* out, gt_u32* count,
                         gt_u32 share) {
    GT_SHARED gt_u32 lane_a_[GT_LANES], lane_b_[GT_LANES], lane_c_[GT_LANES], told_[4];
    // Each lane's partial results, and what lane 0 tells every lane.
    GtLaneMem<gt_u32> lane_a = lane_a_, lane_b = lane_b_, lane_c = lane_c_;
    GtLaneMem<gt_u32> lowest = told_, productive = told_ + 1, cut = told_ + 2, symbols = told_ + 3;
    GtLaneMem<gt_u32> cur = s.ids;              // the symbols
    GtLaneMem<gt_u32> next = (gt_u32*)s.prev;  // the symbols after a round
    GtLaneMem<gt_u32> pair = (gt_u32*)s.next;  // each pair's rank
    GtLaneMem<gt_u32> merging = out;           // 1 where a pair merges this round
    // Every lane holds the same copies of these (read from shared memory).
    gt_u32 last = GT_NONE, repairs = GT_ROUND_REPAIRS, done = 0, in_ids = 1;  // in_ids: cur is s.ids
    for (;;) {
        // Each pair's rank; the lowest of each lane's share (lane_a).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, low = GT_NONE;
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi; ++j) {
                gt_u32 p = gt_pair_rank(merges, cur[j], cur[j + 1]);
                pair[j] = p;
                low = p < low ? p : low;
            }
            lane_a[lane] = low;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 low = GT_NONE;
            for (gt_u32 l = 0; l < GT_LANES; ++l) {
                gt_u32 its = lane_a[l];
                low = its < low ? its : low;
            }
            *lowest = low;
        }
        GT_SYNC();
        gt_u32 r = *lowest;
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
                gt_u32 lead = lane_a[l], tail = lane_b[l];
                lane_c[l] = run;
                run = lead == hi - lo ? run + lead : tail;
            }
        }
        GT_SYNC();
        // The pairs that merge: the 1st, 3rd, ... of each run; counted (lane_a).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, run = lane_c[lane], merges_here = 0;
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi; ++j) {
                run = pair[j] == r ? run + 1 : 0;
                merging[j] = run & 1;
                merges_here += run & 1;
            }
            lane_a[lane] = merges_here;
        }
        GT_SYNC();
        // The first merge that makes a pair of rank below r, with its left
        // neighbour after the round or its right one before it (lane_b).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, first = GT_NONE, made = gt_pair_merged(merges, r);
            gt_lane_share(k - 1, lane, &lo, &hi);
            for (gt_u32 j = lo; j < hi && first == GT_NONE; ++j) {
                if (!merging[j]) continue;
                gt_u32 left = j >= 2 && merging[j - 2] ? made : j >= 1 ? (gt_u32)cur[j - 1] : GT_NONE;
                if ((left != GT_NONE && gt_ranks_below(merges, left, made, r)) ||
                    (j + 2 < k && gt_ranks_below(merges, made, cur[j + 2], r))) {
                    first = j;
                }
            }
            lane_b[lane] = first;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 merges_all = 0, first = GT_NONE;
            for (gt_u32 l = 0; l < GT_LANES; ++l) {
                gt_u32 its = lane_b[l];
                merges_all += lane_a[l];
                first = its < first ? its : first;
            }
            // A round right after one cut short takes the pairs it left (r < last).
            gt_u32 go = merges_all >= k / share || (last != GT_NONE && r < last);
            if (first != GT_NONE && repairs == 0) go = 0;
            *productive = go;
            *cut = first;
        }
        GT_SYNC();
        if (!*productive) break;  // the heap merge goes on from here, with the ranks found
        gt_u32 upto = *cut;       // the merges at pairs up to here are applied
        if (upto != GT_NONE) --repairs;
        // Symbols kept (all but the right one of a merging pair), per share (lane_b).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, kept = 0;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) kept += !(i > 0 && i - 1 <= upto && merging[i - 1]);
            lane_b[lane] = kept;
        }
        GT_SYNC();
        GT_LANE_ZERO {
            gt_u32 at = 0;
            for (gt_u32 l = 0; l < GT_LANES; ++l) {
                lane_c[l] = at;
                at += lane_b[l];
            }
            *symbols = at;
        }
        GT_SYNC();
        // The round's symbols, each share's from where it starts (lane_c).
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi, at = lane_c[lane], made = gt_pair_merged(merges, r);
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) {
                if (i > 0 && i - 1 <= upto && merging[i - 1]) continue;
                next[at++] = i + 1 < k && i <= upto && merging[i] ? made : (gt_u32)cur[i];
            }
        }
        GT_SYNC();
        GtLaneMem<gt_u32> was = cur;
        cur = next;
        next = was;
        in_ids = !in_ids;
        k = *symbols;
        last = r;
    }
    if (done) {  // no merge left: the symbols are the ids
        GtLaneMem<gt_u32> ids = out;
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) ids[i] = cur[i];
        }
        GT_LANE_ZERO *count = k;
        return;
    }
    // The rest on one lane, from the last state (the oracle's too).
    if (!in_ids) {
        GtLaneMem<gt_u32> ids = s.ids;
        GT_EACH_LANE(lane) {
            gt_u32 lo, hi;
            gt_lane_share(k, lane, &lo, &hi);
            for (gt_u32 i = lo; i < hi; ++i) ids[i] = cur[i];
        }
        GT_SYNC();
    }
    GT_LANE_ZERO {
        gt_u32 queued = 0;
        for (gt_u32 j = 0; j + 1 < k; ++j) {
            GtMergeEntry e = {(gt_u32)pair[j], j};
            if (e.rank != GT_NONE) gt_heap_push(s.heap, &queued, e);
        }
        GT_LANE_READS(s.ids, k);  // the heap merge reads them through plain pointers
        gt_bpe_link(s, k);        // (pair[] is s.next)
        *count = gt_bpe_merge_queued(merges, s, queued, out);
    }
}

// Byte-level BPE of a long word bytes[0..n) (as gt_bpe_word gives it) into
// out (room for n ids) and its id count into *count, by a block whose rounds
// take `share` (gt_bpe_rounds).
GT_HD void gt_long_word(const GtBpeModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out,
                        gt_u32* count, gt_u32 share) {
    GT_SHARED gt_u32 whole_;
    GtLaneMem<gt_u32> whole = &whole_, ids = s.ids;
    GT_LANE_ZERO {
        *whole = m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out);
        if (*whole) *count = 1;
    }
    GT_SYNC();
    if (*whole) return;
    GT_EACH_LANE(lane) {
        gt_u32 lo, hi;
        gt_lane_share(n, lane, &lo, &hi);
        for (gt_u32 i = lo; i < hi; ++i) ids[i] = m->byte_ids[bytes[i]];
    }
    GT_SYNC();
    gt_bpe_rounds(&m->merges, s, n, out, count, share);
}
