// gt_bpe.cu: thin kernel over gt_bpe_word. One thread per word; the words of a
// batch are (start, length) ranges into one UTF-8 buffer.
//
// Launch: grid = ceil(n_words / 256), block = 256.
// Scratch: per word, ids/prev/next/len at the word's own byte offset (each
// array as long as the text) and heap entries at 3x that offset, so words never
// share scratch. Output: word i's ids start at out_starts[i] (an exclusive
// prefix sum of word lengths, an upper bound on ids per word); its count goes
// to out_counts[i]; a later pass compacts.
#include "gt_bpe.cuh"

extern "C" __global__ void gt_bpe_words(GtBpeModel model, const gt_u8* text, const gt_u32* word_starts,
                                        const gt_u32* word_lens, gt_u32 n_words, gt_u32* scratch_ids,
                                        gt_i32* scratch_prev, gt_i32* scratch_next, gt_u32* scratch_len,
                                        GtMergeEntry* scratch_heap, gt_u32* out_ids, gt_u32* out_counts) {
    gt_u32 w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w >= n_words) return;
    gt_u32 start = word_starts[w];
    GtBpeScratch s = {scratch_ids + start, scratch_prev + start, scratch_next + start, scratch_len + start,
                      scratch_heap + 3ull * start};
    out_counts[w] = gt_bpe_word(&model, text + start, word_lens[w], s, out_ids + start);
}
