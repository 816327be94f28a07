// gt_batch.cuh: the batch pipeline of the CUDA backend, one function per
// thread of each kernel. gt_batch.cu wraps each in a __global__ (thread i of
// n runs gt_<kernel>_thread(&args, i)); the host build runs the very same
// functions in a loop over i (cuda/gt_host.cpp, driven by the emulator in
// rust/cuda/emulator.rs), so CI exercises every line here without a GPU.
//
// Data flow for one chunk of rows (all offsets are bytes of one UTF-8 buffer
// holding the rows' texts back to back; rows are cut into pieces at safe
// points, gt_next_cut or gt_spm_next_cut, so no thread scans more than a
// bounded piece):
//   pretok_count  piece  -> words in the piece                 (word_counts)
//   scan          word_counts -> first word of each piece       (exclusive, + total)
//   pretok_fill   piece  -> (start, length) of its words
//   order_count   word   -> its work class, counted             (class_counts)
//   order_fill    word   -> its place in the order of work      (order)
//   bpe_words     word   -> ids at the word's byte offset       (tok_counts; words taken in order,
//                 grid-stride: a fixed grid loops over the words the device counted)
//                 (spm_words on SentencePiece cuts, gt_spm_cut_words;
//                 unigram_words on Metaspace words, gt_metaspace_words, or
//                 on the words the host cut, one per piece)
//   scan          tok_counts -> first token of each word
//   compact       word   -> ids moved to their final place      (raw ids, CSR by word)
//   part_spans    part   -> its raw token range and count       (a row is one part,
//                 or several where added tokens cut its text: see GtRowSource)
//   scan          part counts -> first raw token of each part
//   row_spans     row    -> its raw token count, truncation, final length
//   (host: padding target and row starts, exactly as rust/layout.rs)
//   pack          output element -> id / mask / type id / special mask
// Example: rows ["Hi there", "ok"] with template [BOS] + seq, padding longest:
//   words "Hi" " there" "ok" -> raw ids [h, t, o] -> [[BOS, h, t], [BOS, o, PAD]].
#pragma once
#include "gt_bpe.cuh"
#include "gt_chain.cuh"
#include "gt_pretok.cuh"
#include "gt_spm.cuh"
#include "gt_unigram.cuh"
#include "gt_wordpiece.cuh"

// ---- pre-tokenization ------------------------------------------------------
struct GtPretokArgs {
    GtChain chain;                // byte-level BPE: the pre-tokenizer's Split steps
    gt_u32 metaspace;             // > 0: Unigram words of WhitespaceSplit + Metaspace with this replacement
    gt_u32 pad_;
    const gt_u8* text;
    const gt_u32* piece_bounds;  // n + 1 entries: piece i is [bounds[i], bounds[i + 1])
    gt_u32* word_counts;          // count pass: words per piece; later scanned in place
    const gt_u32* first_word;     // fill pass: the scanned counts
    gt_u32* word_starts;
    gt_u32* word_lens;
    GtSpmCuts cuts;               // SentencePiece BPE: its pieces are cut into words here (else disabled)
};

struct GtCountWords {
    gt_u32 n;
    GT_HD void operator()(gt_u32, gt_u32) { ++n; }
};

struct GtFillWords {
    gt_u32 k;
    gt_u32* starts;
    gt_u32* lens;
    GT_HD void operator()(gt_u32 start, gt_u32 end) {
        starts[k] = start;
        lens[k] = end - start;
        ++k;
    }
};

// The words of piece i: the Split chain's (byte-level BPE), SentencePiece cuts,
// Metaspace words (Unigram), or the piece itself.
template <class Emit>
GT_HD void gt_piece_words(const GtPretokArgs* a, gt_u32 i, Emit& emit) {
    gt_u32 begin = a->piece_bounds[i], end = a->piece_bounds[i + 1];
    GT_WORK_ITEM();
    GT_GLOBAL_READ(&a->piece_bounds[i], 2);
    GT_GLOBAL_READ(a->text + begin, end - begin);  // (the scanners' tables are not counted)
    if (a->cuts.enabled) {
        gt_spm_cut_words(&a->cuts, a->text, begin, end, emit);
    } else if (a->metaspace) {
        gt_metaspace_words(a->text, begin, end, a->metaspace, emit);
    } else {
        gt_chain_words<0>(&a->chain, a->text, begin, end, emit);
    }
}

GT_HD void gt_pretok_count_thread(const GtPretokArgs* a, gt_u32 i) {
    GtCountWords count = {0};
    gt_piece_words(a, i, count);
    GT_GLOBAL_WROTE(&a->word_counts[i], 1);
    a->word_counts[i] = count.n;
}

GT_HD void gt_pretok_fill_thread(const GtPretokArgs* a, gt_u32 i) {
    GtFillWords fill = {a->first_word[i], a->word_starts, a->word_lens};
    GT_GLOBAL_READ(&a->first_word[i], 1);
    gt_piece_words(a, i, fill);
    GT_GLOBAL_WROTE(&a->word_starts[a->first_word[i]], fill.k - a->first_word[i]);
    GT_GLOBAL_WROTE(&a->word_lens[a->first_word[i]], fill.k - a->first_word[i]);
}

// ---- words in order of work ------------------------------------------------
// A warp runs 32 word threads in step, so it takes as long as its slowest
// word. The per-word kernels therefore take words in order of a work class:
// byte-level words the shortcut table holds whole (one lookup) first, then
// the others by their length's bit count. order_count counts each class,
// order_fill places each word after the classes before its own (in no
// particular order inside a class: each word writes only its own slots, so
// the results do not depend on it).
// Both are block-cooperative (GT_EACH_LANE) and block-stride (a fixed grid
// loops over the blocks of words the device counted): lane k classes word
// 256 m + k of the word block m in turn, then lane c < GT_WORK_CLASSES
// tallies class c over it and makes one global atomic for it. The classes
// alternate between two arrays by turn, so the next turn's lanes may write
// theirs while this turn's last phase still reads (no barrier between). One atomic per word on a class's
// counter serialises in L2 (~40M on one word per 256 MB of text: ~95% of the
// modeled kernel time, benches/README "Device cost model"); one per class and
// block is 256x fewer.
#define GT_WORK_CLASSES 16

struct GtOrderArgs {
    const gt_u8* text;
    const gt_u32* word_starts;
    const gt_u32* word_lens;
    const gt_u32* n_words;     // the chunk's word count (blocks past it do nothing)
    GtBytesTable shortcut;     // byte-level BPE's table of whole words (slots null: none)
    gt_u32* class_counts;      // GT_WORK_CLASSES counts, then as many cursors (zeroed by the host)
    gt_u32* order;             // n_words entries: the words, class by class
    gt_u32 blocks;             // the launch's blocks: block b takes the blocks of words b, b + blocks, ...
    gt_u32 pad_;
};

GT_HD gt_u32 gt_work_class(const GtOrderArgs* a, gt_u32 w) {
    gt_u32 len = a->word_lens[w], bits = 0;
    GT_GLOBAL_READ(&a->word_lens[w], 1);
    if (a->shortcut.slots) {
        GT_GLOBAL_READ(&a->word_starts[w], 1);
        GT_GLOBAL_READ(a->text + a->word_starts[w], len);  // (the table's own reads are not counted)
        if (gt_bytes_find(&a->shortcut, a->text + a->word_starts[w], len) != GT_NONE) return 0;
    }
    for (; len; len >>= 1) ++bits;
    return bits < GT_WORK_CLASSES ? bits : GT_WORK_CLASSES - 1;
}
// The last class holds exactly the words of GT_LONG_WORD bytes or more.
static_assert(GT_LONG_WORD == 1u << (GT_WORK_CLASSES - 2), "the long words are the last work class");

// The block of thread i (GT_NONE on the host for all but a block's first
// thread, which runs its lanes: see GT_EACH_LANE).
#if defined(__CUDA_ARCH__)
#define GT_BLOCK_OF_THREAD(i) ((i) / GT_LANES)
#else
#define GT_BLOCK_OF_THREAD(i) ((i) % GT_LANES ? GT_NONE : (i) / GT_LANES)
#endif

// Phase 1 of both order kernels: each lane's word's class into cls (GT_NONE
// past the chunk's words). Returns 0 for a block past them (the whole block).
GT_HD int gt_block_classes(const GtOrderArgs* a, gt_u32 b, GtLaneMem<gt_u32> cls) {
    GT_GLOBAL_READ(a->n_words, 1);
    gt_u32 n = *a->n_words;
    if ((gt_u64)b * GT_LANES >= n) return 0;
    GT_EACH_LANE(lane) {
        gt_u32 w = b * GT_LANES + lane;
        if (w < n) GT_WORK_ITEM();
        cls[lane] = w < n ? gt_work_class(a, w) : GT_NONE;
    }
    GT_SYNC();
    return 1;
}

GT_HD void gt_order_count_thread(const GtOrderArgs* a, gt_u32 i) {
    gt_u32 first = GT_BLOCK_OF_THREAD(i);
    if (first == GT_NONE || !a->blocks) return;
    GT_SHARED gt_u32 cls_[2 * GT_LANES];
    for (gt_u32 b = first, turn = 0;; b += a->blocks, turn ^= 1) {
        GtLaneMem<gt_u32> cls = cls_ + turn * GT_LANES;
        if (!gt_block_classes(a, b, cls)) return;
        GT_EACH_LANE(lane) {
            if (lane < GT_WORK_CLASSES) {
                gt_u32 n = 0;
                for (gt_u32 k = 0; k < GT_LANES; ++k) n += cls[k] == lane;
                if (n) gt_atomic_add(&a->class_counts[lane], n);
            }
        }
    }
}

// order_fill's turn over word block b (its classes in cls): lane c <
// GT_WORK_CLASSES ranks the block's words of class c (in word order) and
// reserves their slots with one atomic on the class's cursor; then each lane
// writes its word at its class's slots plus its rank.
GT_HD void gt_order_place(const GtOrderArgs* a, gt_u32 b, GtLaneMem<gt_u32> cls, GtLaneMem<gt_u32> rank,
                          GtLaneMem<gt_u32> base) {
    GT_EACH_LANE(lane) {
        if (lane < GT_WORK_CLASSES) {
            gt_u32 n = 0;
            for (gt_u32 k = 0; k < GT_LANES; ++k)
                if (cls[k] == lane) rank[k] = n++;
            if (n) {
                gt_u32 at = 0;  // the classes before this one
                GT_GLOBAL_READ(a->class_counts, lane);
                for (gt_u32 k = 0; k < lane; ++k) at += a->class_counts[k];
                base[lane] = at + gt_atomic_add(&a->class_counts[GT_WORK_CLASSES + lane], n);
            }
        }
    }
    GT_SYNC();
    GT_EACH_LANE(lane) {
        gt_u32 c = cls[lane];
        if (c != GT_NONE) {
            gt_u32 slot = base[c] + rank[lane];
            GT_GLOBAL_WROTE(&a->order[slot], 1);
            a->order[slot] = b * GT_LANES + lane;
        }
    }
}

GT_HD void gt_order_fill_thread(const GtOrderArgs* a, gt_u32 i) {
    gt_u32 first = GT_BLOCK_OF_THREAD(i);
    if (first == GT_NONE || !a->blocks) return;
    GT_SHARED gt_u32 cls_[2 * GT_LANES], rank_[GT_LANES], base_[GT_WORK_CLASSES];
    GtLaneMem<gt_u32> rank = rank_, base = base_;
    for (gt_u32 b = first, turn = 0;; b += a->blocks, turn ^= 1) {
        GtLaneMem<gt_u32> cls = cls_ + turn * GT_LANES;
        if (!gt_block_classes(a, b, cls)) return;
        gt_order_place(a, b, cls, rank, base);
    }
}

// ---- the model, word by word -----------------------------------------------
// Every per-word kernel reads the chunk's words and writes the ids of the
// word starting at byte b to out[b..] (at most one id per byte), their count
// to tok_counts. Scratch is indexed by byte offset too, so each word's
// scratch and output slots are its own.
// The word count stays on the device (the host does not wait to read it):
// the host launches a fixed grid of `stride` threads (about what the device
// keeps resident, or fewer for a small chunk), and thread t takes the
// positions t, t + stride, ... of the order below the count. Only the
// counted words' tok_counts are written, and scanned (gt_scan_count).
struct GtWords {
    const gt_u8* text;
    const gt_u32* word_starts;
    const gt_u32* word_lens;
    gt_u32* out;            // as long as the text
    gt_u32* tok_counts;     // ids per word; later scanned in place
    const gt_u32* n_words;  // the chunk's word count (scanned word_counts' total)
    const gt_u32* order;    // which word position i holds (order_fill)
    const gt_u32* class_counts;  // how many words of each work class (order_count)
    gt_u32 stride;          // the launch's threads
    gt_u32 pad_;
};

// The chunk's word count, read on the device.
GT_HD gt_u32 gt_word_count(const GtWords* x) {
    GT_GLOBAL_READ(x->n_words, 1);
    return *x->n_words;
}

// The word at position i of the order (i below the count), taken by this thread.
GT_HD gt_u32 gt_word_at(const GtWords* x, gt_u32 i) {
    GT_WORK_ITEM();
    GT_GLOBAL_READ(&x->order[i], 1);
    return x->order[i];
}

// The device cost model's count of what a per-word thread read and wrote
// besides its model's tables and scratch (not counted): the word's start,
// length and bytes, its count and ids (gt_common.cuh's GT_GLOBAL_READ).
GT_HD void gt_count_word(const GtWords* x, gt_u32 w, gt_u32 n_ids) {
    GT_GLOBAL_READ(&x->word_starts[w], 1);
    GT_GLOBAL_READ(&x->word_lens[w], 1);
    GT_GLOBAL_READ(x->text + x->word_starts[w], x->word_lens[w]);
    GT_GLOBAL_WROTE(&x->tok_counts[w], 1);
    GT_GLOBAL_WROTE(x->out + x->word_starts[w], n_ids);
    (void)x, (void)w, (void)n_ids;
}

// Merge-loop scratch of the BPE families: n entries per byte (heap: 2n).
struct GtMergeScratch {
    gt_u32* ids;
    gt_i32* prev;
    gt_i32* next;
    GtMergeEntry* heap;
};

GT_HD GtBpeScratch gt_merge_scratch_at(const GtMergeScratch* m, gt_u32 start) {
    GtBpeScratch s = {m->ids + start, m->prev + start, m->next + start, m->heap + 2ull * start};
    return s;
}

// Words of the last work class (GT_LONG_WORD bytes and more) come last in
// the order: gt_bpe_words and gt_spm_words leave them, a block takes each
// (gt_bpe_long_words, gt_spm_long_words).
GT_HD gt_u32 gt_long_words(const GtWords* x) { return x->class_counts[GT_WORK_CLASSES - 1]; }

// True when position i of the order holds a long word.
GT_HD int gt_is_long_at(const GtWords* x, gt_u32 i) {
    GT_GLOBAL_READ(&x->class_counts[GT_WORK_CLASSES - 1], 1);
    return i >= *x->n_words - gt_long_words(x);
}

// The long word block b takes, or GT_NONE (the host launches a block for
// each GT_LONG_WORD bytes of text: as many as there can be).
GT_HD gt_u32 gt_long_word_of_block(const GtWords* x, gt_u32 b) {
    gt_u32 longs = gt_long_words(x);
    return b < longs ? x->order[*x->n_words - longs + b] : GT_NONE;
}

// Byte-level BPE over the words the scanners found. round_share: the long
// words' schedule (gt_bpe_rounds; GT_ROUND_SHARE_GPU unless a test asks for another).
struct GtBpeArgs {
    GtBpeModel model;
    GtWords words;
    GtMergeScratch scratch;
    gt_u32 round_share;
    gt_u32 pad_;
};

GT_HD void gt_bpe_words_thread(const GtBpeArgs* a, gt_u32 t) {
    const GtWords* x = &a->words;
    // (The long words come last in the order: a block each takes them.)
    for (gt_u32 i = t, n = gt_word_count(x); i < n && !gt_is_long_at(x, i); i += x->stride) {
        gt_u32 w = gt_word_at(x, i), start = x->word_starts[w];
        GtBpeScratch s = gt_merge_scratch_at(&a->scratch, start);
        x->tok_counts[w] = gt_bpe_word(&a->model, x->text + start, x->word_lens[w], s, x->out + start);
        gt_count_word(x, w, x->tok_counts[w]);
    }
}

// SentencePiece-style BPE. The host normalized the rows; pretok_* cut their
// pieces into words (gt_spm_cut_words).
struct GtSpmArgs {
    GtSpmModel model;
    GtWords words;
    GtMergeScratch scratch;
    gt_u32 round_share;  // as in GtBpeArgs
    gt_u32 pad_;
};

GT_HD void gt_spm_words_thread(const GtSpmArgs* a, gt_u32 t) {
    const GtWords* x = &a->words;
    for (gt_u32 i = t, n = gt_word_count(x); i < n && !gt_is_long_at(x, i); i += x->stride) {
        gt_u32 w = gt_word_at(x, i), start = x->word_starts[w];
        GtBpeScratch s = gt_merge_scratch_at(&a->scratch, start);
        x->tok_counts[w] = gt_spm_word(&a->model, x->text + start, x->word_lens[w], s, x->out + start);
        gt_count_word(x, w, x->tok_counts[w]);
    }
}

// Thread i's part in the long word of its block, for either BPE family
// (gt_long_word is overloaded on the model).
template <class Args>
GT_HD void gt_long_words_thread(const Args* a, gt_u32 i) {
    const GtWords* x = &a->words;
    gt_u32 b = GT_BLOCK_OF_THREAD(i);
    gt_u32 w = b == GT_NONE ? GT_NONE : gt_long_word_of_block(x, b);
    if (w == GT_NONE) return;  // the whole block
    gt_u32 start = x->word_starts[w];
    GtBpeScratch s = gt_merge_scratch_at(&a->scratch, start);
    gt_long_word(&a->model, x->text + start, x->word_lens[w], s, x->out + start, &x->tok_counts[w], a->round_share);
    GT_LANE_ZERO {  // (counted as lane 0's work: the block's lanes' merge traffic is not counted)
        GT_WORK_ITEM();
        gt_count_word(x, w, x->tok_counts[w]);
    }
}

GT_HD void gt_bpe_long_words_thread(const GtBpeArgs* a, gt_u32 i) { gt_long_words_thread(a, i); }

GT_HD void gt_spm_long_words_thread(const GtSpmArgs* a, gt_u32 i) { gt_long_words_thread(a, i); }

// Unigram, on Metaspace words (gt_metaspace_words) or the words the host cut,
// one per piece. A word of n bytes needs n + 1 scratch
// entries: word w's start at byte b + w (words are disjoint and in order, so
// these are too). The host sends only rows the model can encode whole (it
// has an unknown token), so no word fails here.
struct GtUnigramArgs {
    GtUnigramModel model;
    GtWords words;
    double* best;  // text length + words entries
    gt_u32* from;  // (the same)
    gt_u32* id;    // (the same)
};

GT_HD void gt_unigram_words_thread(const GtUnigramArgs* a, gt_u32 t) {
    const GtWords* x = &a->words;
    for (gt_u32 i = t, n = gt_word_count(x); i < n; i += x->stride) {
        gt_u32 w = gt_word_at(x, i), start = x->word_starts[w];
        gt_u64 at = (gt_u64)start + w;
        GtUnigramScratch s = {a->best + at, a->from + at, a->id + at};
        x->tok_counts[w] = gt_unigram_word(&a->model, x->text + start, x->word_lens[w], s, x->out + start);
        gt_count_word(x, w, x->tok_counts[w]);
    }
}

// WordPiece, one thread per piece of raw text. The host cuts each row before
// ASCII spaces (BERT's normalizer maps each code point on its own and words
// never span whitespace, so the pieces' tokens are the row's), sends only
// rows without exact-path code points (gt_wp_needs_exact), and only for
// tables whose code points normalize to at most one character per input
// byte: a piece of n bytes then has at most n tokens, its room in `out`.
struct GtWordPieceArgs {
    GtWordPieceModel model;
    GtWords words;
    gt_u8* norm;  // growth bytes per text byte
    gt_u64 growth;
};

GT_HD void gt_wordpiece_words_thread(const GtWordPieceArgs* a, gt_u32 t) {
    const GtWords* x = &a->words;
    for (gt_u32 i = t, n = gt_word_count(x); i < n; i += x->stride) {
        gt_u32 w = gt_word_at(x, i), start = x->word_starts[w];
        GtWpScratch s = {a->norm + a->growth * start, 0, 0};
        x->tok_counts[w] = gt_wordpiece_text(&a->model, x->text + start, x->word_lens[w], s, x->out + start, 0, 0);
        gt_count_word(x, w, x->tok_counts[w]);
    }
}

// ---- compaction: word-major ids into one dense array ------------------------
struct GtCompactArgs {
    const gt_u32* word_starts;
    const gt_u32* tok_offsets;  // n + 1 entries (scanned tok_counts)
    const gt_u32* bpe_out;
    gt_u32* raw_ids;
    const gt_u32* n_words;      // as in GtWords: thread t takes words t, t + stride, ... below it
    gt_u32 stride;              // the launch's threads
    gt_u32 pad_;
};

GT_HD void gt_compact_thread(const GtCompactArgs* a, gt_u32 t) {
    GT_GLOBAL_READ(a->n_words, 1);
    for (gt_u32 w = t, words = *a->n_words; w < words; w += a->stride) {
        GT_WORK_ITEM();
        const gt_u32* from = a->bpe_out + a->word_starts[w];
        gt_u32 to = a->tok_offsets[w], n = a->tok_offsets[w + 1] - to;
        GT_GLOBAL_READ(&a->word_starts[w], 1);
        GT_GLOBAL_READ(&a->tok_offsets[w], 2);
        GT_GLOBAL_READ(from, n);
        GT_GLOBAL_WROTE(&a->raw_ids[to], n);
        for (gt_u32 k = 0; k < n; ++k) a->raw_ids[to + k] = from[k];
    }
}

// ---- exclusive scan of u32 counts, in place --------------------------------
// values has n + 1 entries: counts in [0, n) become offsets, values[n] the
// total. Large arrays go in two passes over tiles of `tile` entries (sum each
// tile, scan the tile sums the same way, then apply); a small one is a single
// tile with base 0. With `count` (a count the device holds, at most n: the
// word count), only count values are scanned and values[count] is the
// total; the tiles past it sum to 0 and write nothing else.
struct GtScanArgs {
    gt_u32* values;
    gt_u32* tile_sums;         // sum pass output; apply pass: scanned tile bases (null: 0)
    gt_u32 n;
    gt_u32 tile;
    const gt_u32* count;       // null: n values
};

GT_HD gt_u64 gt_scan_count(const GtScanArgs* a) {
    if (!a->count) return a->n;
    GT_GLOBAL_READ(a->count, 1);
    return *a->count;
}

GT_HD void gt_scan_sum_thread(const GtScanArgs* a, gt_u32 t) {
    gt_u64 n = gt_scan_count(a), begin = (gt_u64)t * a->tile, end = begin + a->tile < n ? begin + a->tile : n;
    gt_u32 sum = 0;
    if (begin < n) {
        GT_WORK_ITEM();
        for (gt_u64 j = begin; j < end; ++j) sum += a->values[j];
        GT_GLOBAL_READ(a->values + begin, end - begin);
    }
    GT_GLOBAL_WROTE(&a->tile_sums[t], 1);
    a->tile_sums[t] = sum;
}

GT_HD void gt_scan_apply_thread(const GtScanArgs* a, gt_u32 t) {
    gt_u64 n = gt_scan_count(a), begin = (gt_u64)t * a->tile, end = begin + a->tile < n ? begin + a->tile : n;
    // Tiles past the count have nothing; the total's place n is in the tile
    // ending there (tile 0 when n is 0).
    if (begin > n || (begin == n && n > 0)) return;
    gt_u32 running = a->tile_sums ? a->tile_sums[t] : 0;
    GT_WORK_ITEM();
    if (a->tile_sums) GT_GLOBAL_READ(&a->tile_sums[t], 1);
    GT_GLOBAL_READ(a->values + begin, end - begin);
    GT_GLOBAL_WROTE(a->values + begin, end - begin + (end == n));
    for (gt_u64 j = begin; j < end; ++j) {
        gt_u32 v = a->values[j];
        a->values[j] = running;
        running += v;
    }
    if (end == n) a->values[n] = running;
}

// ---- rows: raw token ranges, truncation, the post-processor's template -----
#define GT_MAX_TEMPLATE 8

// The special tokens a single-sequence post-processor puts around the
// sequence (found by the host by asking the crate's post-processor).
struct GtTemplate {
    gt_u32 n_prefix, n_suffix;
    gt_u32 ids[GT_MAX_TEMPLATE];       // prefix then suffix
    gt_u32 type_ids[GT_MAX_TEMPLATE];
    gt_u32 seq_type_id;                // type id of the sequence's own tokens
};

// Where a row's tokens come from: its parts, in order, each the text pieces
// [piece_begin, piece_end) (encoded on the device) then host ids
// [host_begin, host_end). A row is one part (its text, or the ids of a row the
// host encoded), or several when added tokens cut its text: each stretch of
// text with the ids of the added tokens after it (`<|im_start|>user\nHi` is
// the parts (nothing, [im_start]), ("user\nHi", nothing)). gt_part_spans turns
// a part's pieces into a range of raw_ids (GtPartSpan).
struct GtRowSource {
    gt_u32 piece_begin, piece_end, host_begin, host_end;
};

struct GtPartSpan {
    gt_u32 dev_begin, dev_end, host_begin, host_end;
};

struct GtRowSpan {
    gt_u32 part_begin, part_end;  // the row's parts
    gt_u32 skip;                  // raw tokens dropped at the front (left truncation)
    gt_u32 keep;                  // raw tokens kept
};

struct GtRowArgs {
    const GtRowSource* sources;  // one per part
    const gt_u32* row_parts;     // row r's parts are [row_parts[r], row_parts[r + 1])
    const gt_u32* first_word;    // scanned word counts (n_pieces + 1)
    const gt_u32* tok_offsets;   // scanned token counts (n_words + 1)
    GtPartSpan* parts;
    gt_u32* part_starts;         // raw tokens per part; scanned (n_parts + 1) before gt_row_spans
    GtTemplate tmpl;
    gt_u32 truncate;             // 1: keep at most max_seq raw tokens
    gt_u32 max_seq;              // max_length minus the template's tokens
    gt_u32 truncate_left;
    GtRowSpan* spans;
    gt_u32* lengths;             // final length of each row (before padding)
};

GT_HD void gt_part_spans_thread(const GtRowArgs* a, gt_u32 p) {
    GtRowSource src = a->sources[p];
    GT_WORK_ITEM();
    GT_GLOBAL_READ(&a->sources[p], 1);
    GT_GLOBAL_READ(&a->first_word[src.piece_begin], 1);
    GT_GLOBAL_READ(&a->first_word[src.piece_end], 1);
    GT_GLOBAL_READ(&a->tok_offsets[a->first_word[src.piece_begin]], 1);
    GT_GLOBAL_READ(&a->tok_offsets[a->first_word[src.piece_end]], 1);
    GT_GLOBAL_WROTE(&a->parts[p], 1);
    GT_GLOBAL_WROTE(&a->part_starts[p], 1);
    GtPartSpan span;
    span.dev_begin = a->tok_offsets[a->first_word[src.piece_begin]];
    span.dev_end = a->tok_offsets[a->first_word[src.piece_end]];
    span.host_begin = src.host_begin;
    span.host_end = src.host_end;
    a->parts[p] = span;
    a->part_starts[p] = (span.dev_end - span.dev_begin) + (src.host_end - src.host_begin);
}

GT_HD void gt_row_spans_thread(const GtRowArgs* a, gt_u32 r) {
    GtRowSpan span;
    GT_WORK_ITEM();
    GT_GLOBAL_READ(&a->row_parts[r], 2);
    GT_GLOBAL_READ(&a->part_starts[a->row_parts[r]], 1);
    GT_GLOBAL_READ(&a->part_starts[a->row_parts[r + 1]], 1);
    GT_GLOBAL_WROTE(&a->spans[r], 1);
    GT_GLOBAL_WROTE(&a->lengths[r], 1);
    span.part_begin = a->row_parts[r];
    span.part_end = a->row_parts[r + 1];
    gt_u32 raw = a->part_starts[span.part_end] - a->part_starts[span.part_begin];
    span.keep = a->truncate && raw > a->max_seq ? a->max_seq : raw;
    span.skip = a->truncate_left ? raw - span.keep : 0;
    a->spans[r] = span;
    a->lengths[r] = a->tmpl.n_prefix + span.keep + a->tmpl.n_suffix;
}

// ---- packing: one thread per output element --------------------------------
// Rows are back to back (row_starts, B + 1 entries, padding included), as
// rust/layout.rs lays them out; absent outputs are null. Outputs are int64, or
// int32 where the caller asked (half the bytes to write and to keep).
struct GtPackArgs {
    const GtRowSpan* spans;
    const GtPartSpan* parts;
    const gt_u32* part_starts;  // scanned: first raw token of each part
    const gt_u32* lengths;
    const gt_u64* row_starts;  // the chunk's rows' starts in the whole output (n_rows + 1)
    gt_u64 row_base;           // this launch's first element (row_starts[0] or after): outputs and e start there
    gt_u32 n_rows;
    gt_u32 value_bytes;        // 8: int64 outputs, 4: int32
    const gt_u32* raw_ids;
    const gt_u32* host_ids;
    GtTemplate tmpl;
    gt_u32 pad_left;
    gt_u32 pad_id, pad_type_id;
    void* ids;
    void* attention_mask;
    void* type_ids;
    void* special_tokens_mask;
};

// Element e of an output of `value_bytes`-wide integers. Ids are below 2^31
// (the host refuses int32 for a vocabulary that is not).
GT_HD void gt_store(void* out, gt_u32 e, long long value, gt_u32 value_bytes) {
    if (value_bytes == 4) ((int*)out)[e] = (int)value;
    else ((long long*)out)[e] = value;
}

GT_HD void gt_pack_thread(const GtPackArgs* a, gt_u32 e) {
    gt_u64 at = a->row_base + e;
    GT_WORK_ITEM();
    gt_u32 lo = 0, hi = a->n_rows;  // the row r with row_starts[r] <= at < row_starts[r + 1]
    while (hi - lo > 1) {
        gt_u32 mid = (lo + hi) / 2;
        if (a->row_starts[mid] <= at) lo = mid;
        else hi = mid;
    }
    gt_u32 r = lo, j = (gt_u32)(at - a->row_starts[r]);
    gt_u32 width = (gt_u32)(a->row_starts[r + 1] - a->row_starts[r]), len = a->lengths[r], pad = width - len;
    long long id = a->pad_id, mask = 0, type = a->pad_type_id, special = 1;
    gt_u32 k = a->pad_left ? j - pad : j;  // position among the row's tokens
    if (a->pad_left ? j >= pad : j < len) {
        GtRowSpan s = a->spans[r];
        gt_u32 n_prefix = a->tmpl.n_prefix;
        mask = 1;
        if (k < n_prefix || k >= n_prefix + s.keep) {
            gt_u32 t = k < n_prefix ? k : k - s.keep;
            id = a->tmpl.ids[t];
            type = a->tmpl.type_ids[t];
        } else {
            // The raw token's part: the row's last part starting at or before it.
            gt_u32 raw = a->part_starts[s.part_begin] + s.skip + (k - n_prefix);
            gt_u32 p = s.part_begin, end = s.part_end;
            while (end - p > 1) {
                gt_u32 mid = (p + end) / 2;
                if (a->part_starts[mid] <= raw) p = mid;
                else end = mid;
            }
            GtPartSpan part = a->parts[p];
            gt_u32 j = raw - a->part_starts[p], n_dev = part.dev_end - part.dev_begin;
            id = j < n_dev ? a->raw_ids[part.dev_begin + j] : a->host_ids[part.host_begin + j - n_dev];
            type = a->tmpl.seq_type_id;
            special = 0;
        }
    }
    // (The cost model's count: its writes; its reads, a binary search in a few cached rows, are not counted.)
#if defined(GT_LANE_CHECK)
    void* const outputs[4] = {a->ids, a->attention_mask, a->type_ids, a->special_tokens_mask};
    for (gt_u32 k = 0; k < 4; ++k)
        if (outputs[k]) GT_GLOBAL_WROTE((const gt_u8*)outputs[k] + (gt_u64)e * a->value_bytes, a->value_bytes);
#endif
    gt_store(a->ids, e, id, a->value_bytes);
    if (a->attention_mask) gt_store(a->attention_mask, e, mask, a->value_bytes);
    if (a->type_ids) gt_store(a->type_ids, e, type, a->value_bytes);
    if (a->special_tokens_mask) gt_store(a->special_tokens_mask, e, special, a->value_bytes);
}

// Every batch kernel: X(kernel name, argument struct). gt_batch.cu and the host
// unit gt_host.cpp (gt_host_run, gt_host_struct_sizes) both expand this list;
// rust/kernels/abi.rs numbers it the same way.
#define GT_BATCH_KERNELS(X)               \
    X(gt_pretok_count, GtPretokArgs)      \
    X(gt_pretok_fill, GtPretokArgs)       \
    X(gt_order_count, GtOrderArgs)        \
    X(gt_order_fill, GtOrderArgs)         \
    X(gt_bpe_words, GtBpeArgs)            \
    X(gt_bpe_long_words, GtBpeArgs)       \
    X(gt_spm_words, GtSpmArgs)            \
    X(gt_spm_long_words, GtSpmArgs)       \
    X(gt_unigram_words, GtUnigramArgs)    \
    X(gt_wordpiece_words, GtWordPieceArgs)\
    X(gt_compact, GtCompactArgs)          \
    X(gt_scan_sum, GtScanArgs)            \
    X(gt_scan_apply, GtScanArgs)          \
    X(gt_part_spans, GtRowArgs)           \
    X(gt_row_spans, GtRowArgs)            \
    X(gt_pack, GtPackArgs)
