// gt_host.cpp: the host build of the kernel logic (cuda/*.cuh) for the CPU
// backend and the CUDA backend's host emulator: C-linkage entry points over
// the GT_HD functions, nothing more. Compiled by build.rs with the `cc` crate;
// called through rust/kernels/host.rs.
#include "gt_batch.cuh"
#include "gt_spm.cuh"
#include "gt_unigram.cuh"
#include "gt_wordpiece.cuh"

extern "C" {

// A long word goes through a block's rounds as on the device (this thread
// runs the lanes), with the schedule `share` (gt_bpe_rounds): runs of one
// symbol then merge in linear time.
gt_u32 gt_host_bpe_word(const GtBpeModel* model, const gt_u8* bytes, gt_u32 n, GtBpeScratch scratch, gt_u32* out,
                        gt_u32 share) {
    if (n < GT_HOST_LONG_WORD) return gt_bpe_word(model, bytes, n, scratch, out);
    gt_u32 count;
    gt_long_word(model, bytes, n, scratch, out, &count, share);
    return count;
}

void gt_host_bpe_words_turns(const GtBpeModel* model, const gt_u8* bytes, const gt_u32* starts, const gt_u32* lens,
                             gt_u32 k, gt_u32* out, const gt_u32* rooms, gt_u32* counts) {
    gt_bpe_words_turns(model, bytes, starts, lens, k, out, rooms, counts);
}

gt_u32 gt_host_turn_max() { return GT_TURN_MAX; }

gt_u32 gt_host_bpe_merge_step(const GtPairTable* merges, gt_u32* ids, gt_u32* rank, gt_u32* n) {
    return gt_bpe_merge_step(merges, ids, rank, n);
}
int gt_host_cjk_led(gt_u32 first, gt_u32 second) { return gt_cjk_led(first, second); }
int gt_host_has_cjk(const gt_u8* bytes, gt_u32 n) { return gt_has_cjk(bytes, n); }

gt_u32 gt_host_spm_word(const GtSpmModel* model, const gt_u8* bytes, gt_u32 n, GtBpeScratch scratch, gt_u32* out,
                        gt_u32 share) {
    if (n < GT_HOST_LONG_WORD) return gt_spm_word(model, bytes, n, scratch, out);
    gt_u32 count;
    gt_long_word(model, bytes, n, scratch, out, &count, share);
    return count;
}

gt_u32 gt_host_chars_kept(const GtCharTable* table, const gt_u8* text, gt_u32 n, gt_u32 pos) {
    return gt_chars_kept(table, text, n, pos);
}

gt_u32 gt_host_chars_normalize(const GtCharTable* table, const gt_u8* text, gt_u32 n, gt_u8* out, gt_u32* from,
                               gt_u32* to) {
    return gt_chars_normalize(table, text, n, out, from, to);
}

gt_u32 gt_host_spm_room(const GtSpmModel* model, gt_u32 n) { return gt_spm_room(model, n); }

gt_u32 gt_host_unigram_word(const GtUnigramModel* model, const gt_u8* bytes, gt_u32 n, GtUnigramScratch scratch,
                            gt_u32* out) {
    return gt_unigram_word(model, bytes, n, scratch, out);
}

void gt_host_pair_insert(GtPairSlot* slots, gt_u64 mask, gt_u32 left, gt_u32 right, gt_u32 rank) {
    gt_pair_insert(slots, mask, left, right, rank);
}

void gt_host_bytes_insert(GtBytesSlot* slots, gt_u64 mask, gt_u64* filter, gt_u64 filter_mask, const gt_u8* bytes,
                          gt_u32 n, gt_u32 start, gt_u32 id) {
    gt_bytes_insert(slots, mask, filter, filter_mask, bytes, n, start, id);
}

gt_u32 gt_host_find(gt_u32 pattern, const gt_u8* text, gt_u32 end, gt_u32 pos, gt_u32* start) {
    return gt_find(pattern, text, end, pos, start);
}

gt_u32 gt_host_pair_rank(const GtPairTable* table, gt_u32 left, gt_u32 right) {
    return gt_pair_rank(table, left, right);
}

void gt_host_pair_bits_add(gt_u64* words, gt_u64 mask, gt_u32 left, gt_u32 right) {
    gt_pair_bits_add(words, mask, left, right);
}

int gt_host_pair_maybe(const GtPairBits* bits, gt_u32 left, gt_u32 right) {
    return gt_pair_maybe(bits, left, right);
}

gt_u32 gt_host_bytes_find(const GtBytesTable* table, const gt_u8* bytes, gt_u32 n) {
    return gt_bytes_find(table, bytes, n);
}

// Words of text[0, n) after the Split steps: word(ctx, start, end) for each.
typedef void (*GtWordCallback)(void* ctx, gt_u32 start, gt_u32 end);
struct GtHostEmit {
    GtWordCallback word;
    void* ctx;
    void operator()(gt_u32 start, gt_u32 end) { word(ctx, start, end); }
};
void gt_host_chain_words(const GtChain* chain, const gt_u8* text, gt_u32 n, GtWordCallback word, void* ctx) {
    GtHostEmit emit = {word, ctx};
    gt_chain_words<0>(chain, text, 0, n, emit);
}

// The same, a run of CJK characters cut into the pieces that merge on their
// own (gt_bpe_cut, with `model`'s atoms and the character pairs `pairs`):
// they repeat where the whole run seldom does.
struct GtHostCutEmit {
    GtWordCallback word;
    void* ctx;
    const gt_u8* text;
    gt_u32 n;
    const GtBpeModel* model;
    const GtPairBits* pairs;
    void operator()(gt_u32 start, gt_u32 end) {
        // One branch, and well predicted: most text has no such runs, or is
        // all of them. The byte after a word's first may be the next word's.
        gt_u32 second = start + 1 < n ? text[start + 1] : 0;
        if (!gt_cjk_led(text[start], second)) {
            word(ctx, start, end);
        } else {
            pieces(start, end);
        }
    }
    // Out of the scan's loop, which keeps its registers.
    __attribute__((noinline)) void pieces(gt_u32 start, gt_u32 end) {
        for (gt_u32 from = start; from < end;) {
            gt_u32 to = start + gt_bpe_cut(model, pairs, text + start, end - start, from - start);
            word(ctx, from, to);
            from = to;
        }
    }
};
void gt_host_chain_pieces(const GtChain* chain, const GtBpeModel* model, const GtPairBits* pairs, const gt_u8* text,
                          gt_u32 n, GtWordCallback word, void* ctx) {
    GtHostCutEmit emit = {word, ctx, text, n, model, pairs};
    gt_chain_words<0>(chain, text, 0, n, emit);
}

// The ranges one Split step makes of text[0, n) (n > 0), before its behaviour:
// range(ctx, start, end, is_match) for each.
typedef void (*GtRangeCallback)(void* ctx, gt_u32 start, gt_u32 end, int is_match);
struct GtHostRanges {
    GtRangeCallback cb;
    void* ctx;
    void range(gt_u32 start, gt_u32 end, int is_match) { cb(ctx, start, end, is_match); }
};
void gt_host_step_ranges(const GtChainStep* step, const gt_u8* text, gt_u32 n, GtRangeCallback cb, void* ctx) {
    GtHostRanges sink = {cb, ctx};
    gt_step_ranges(step, text, n, sink);
}

// The pieces a Split behaviour (GT_SPLIT_* | GT_SPLIT_INVERT) makes of n
// ranges (start, end, is_match triples, in order): piece(ctx, start, end) for each.
void gt_host_behave(gt_u32 behavior, const gt_u32* ranges, gt_u32 n, GtWordCallback piece, void* ctx) {
    GtHostEmit out = {piece, ctx};
    GtBehave<GtHostEmit> sink = gt_behave(behavior, &out);
    for (gt_u32 i = 0; i < n; ++i) sink.range(ranges[3 * i], ranges[3 * i + 1], (int)ranges[3 * i + 2]);
    sink.finish();
}

gt_u32 gt_host_rx_find(const GtRegex* rx, const gt_u8* text, gt_u32 end, gt_u32 pos, gt_u32* start) {
    return gt_rx_find(rx, text, end, pos, start);
}

gt_u32 gt_host_wordpiece_text(const GtWordPieceModel* model, const gt_u8* text, gt_u32 n, GtWpScratch scratch,
                              gt_u32* ids, gt_u32* starts, gt_u32* ends) {
    return gt_wordpiece_text(model, text, n, scratch, ids, starts, ends);
}

int gt_host_wp_needs_exact(const GtWordPieceModel* model, const gt_u8* text, gt_u32 n) {
    return gt_wp_needs_exact(&model->chars, text, n);
}

// The words of text[0, n) after normalization (into norm, room for the
// table's growth times n): word(ctx, bytes, length) for each; returns the
// normalized length, or GT_NONE when the text needs the exact path.
typedef void (*GtWpWordCallback)(void* ctx, const gt_u8* word, gt_u32 n);
struct GtHostWpEmit {
    GtWpWordCallback word;
    void* ctx;
    const gt_u8* norm;
    void operator()(gt_u32 begin, gt_u32 end) { word(ctx, norm + begin, end - begin); }
};
gt_u32 gt_host_wordpiece_words(const GtWordPieceModel* model, const gt_u8* text, gt_u32 n, gt_u8* norm,
                               GtWpWordCallback word, void* ctx) {
    gt_u32 k = gt_chars_normalize(&model->chars, text, n, norm, 0, 0);
    if (k == GT_NONE) return GT_NONE;
    GtHostWpEmit emit = {word, ctx, norm};
    gt_wp_words(model, norm, k, emit);
    return k;
}

// WordPiece of one normalized word: ids into out (room for n); returns the count.
gt_u32 gt_host_wordpiece_word(const GtWordPieceModel* model, const gt_u8* word, gt_u32 n, gt_u32* out) {
    return gt_wordpiece_word(model, word, 0, n, out, 0, 0);
}

gt_u32 gt_host_spm_next_cut(const GtSpmCuts* cuts, const gt_u8* text, gt_u32 end, gt_u32 from) {
    return gt_spm_next_cut(cuts, text, end, from);
}

int gt_host_spm_cut_between(const GtSpmCuts* cuts, gt_u32 a, gt_u32 b) { return gt_spm_cut_between(cuts, a, b); }

gt_u32 gt_host_next_cut(const gt_u8* text, gt_u32 end, gt_u32 from) { return gt_next_cut(text, end, from); }

int gt_host_is_white_space(gt_u32 cp) { return gt_is_white_space(cp); }

gt_u32 gt_host_class(gt_u32 cp) { return gt_class(cp); }

// Runs threads [begin, end) of batch kernel number `kernel` (the order of
// GT_BATCH_KERNELS) with `args`, as the GPU would; returns 0, or -1 for an
// unknown kernel.
int gt_host_run(gt_u32 kernel, const void* args, gt_u32 begin, gt_u32 end) {
    gt_u32 number = 0;
#define GT_HOST_KERNEL(name, Args)                                                   \
    if (kernel == number++) {                                                        \
        for (gt_u32 i = begin; i < end; ++i) name##_thread((const Args*)args, i);    \
        return 0;                                                                    \
    }
    GT_BATCH_KERNELS(GT_HOST_KERNEL)
#undef GT_HOST_KERNEL
    return -1;
}

// The constants Rust mirrors (rust/kernels/abi.rs): GT_WORK_CLASSES, GT_LANES,
// GT_LONG_WORD, GT_ROUND_SHARE_HOST, GT_ROUND_SHARE_GPU, GT_HOST_LONG_WORD.
void gt_host_constants(gt_u32* out) {
    out[0] = GT_WORK_CLASSES;
    out[1] = GT_LANES;
    out[2] = GT_LONG_WORD;
    out[3] = GT_ROUND_SHARE_HOST;
    out[4] = GT_ROUND_SHARE_GPU;
    out[5] = GT_HOST_LONG_WORD;
}

// sizeof of each kernel's argument struct (kernel order), then of the other
// mirrored structs in the order of rust/kernels/abi.rs's layout test.
gt_u32 gt_host_struct_sizes(gt_u64* out, gt_u32 n) {
    gt_u32 k = 0;
#define GT_ARG_SIZE(name, Args) if (k < n) out[k++] = sizeof(Args);
    GT_BATCH_KERNELS(GT_ARG_SIZE)
#undef GT_ARG_SIZE
    const gt_u64 others[] = {sizeof(GtRowSpan), sizeof(GtMergeEntry), sizeof(GtBpeModel), sizeof(GtChain),
                             sizeof(GtTemplate), sizeof(GtRowSource), sizeof(GtCharTable),
                             sizeof(GtWordPieceModel), sizeof(GtWpScratch), sizeof(GtSpmModel), sizeof(GtBytesSlot),
                             sizeof(GtUnigramModel), sizeof(GtUnigramScratch), sizeof(GtPairSlot), sizeof(GtPartSpan),
                             sizeof(GtSpmCuts), sizeof(GtRegex), sizeof(GtChainStep), sizeof(GtPairBits)};
    for (gt_u64 size : others)
        if (k < n) out[k++] = size;
    return k;
}

}
