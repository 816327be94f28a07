// gt_pretok.cu: thin kernels over gt_find, one thread per piece of text
// (a document, or a chunk cut at a safe point). Two passes, as everywhere:
// gt_pretok_count writes the number of words of each piece (matches and the
// gaps between them); after an exclusive prefix sum over the counts,
// gt_pretok_fill writes each word's end offset at the piece's place.
//
// Launch: grid = ceil(n_pieces / 256), block = 256.
// Example (GT_PAT_QWEN): piece "Hi  there" -> words "Hi", " ", " there"
//   -> count 3, fill ends {2, 3, 9} (offsets into the text buffer).
#include "gt_pretok.cuh"

// Visits the words of [start, end) in order: calls body(word_end) for each.
#define GT_FOR_EACH_WORD(pattern, text, start, end, body)                         \
    do {                                                                          \
        gt_u32 gt_pos = (start), gt_mstart;                                       \
        while (gt_pos < (end)) {                                                  \
            gt_u32 gt_mend = gt_find((pattern), (text), (end), gt_pos, &gt_mstart); \
            if (gt_mend == GT_NONE) { body((end)); break; }                       \
            if (gt_mstart != gt_pos) { body(gt_mstart); }                         \
            body(gt_mend);                                                        \
            gt_pos = gt_mend;                                                     \
        }                                                                         \
    } while (0)

extern "C" __global__ void gt_pretok_count(gt_u32 pattern, const gt_u8* text, const gt_u32* piece_starts,
                                           const gt_u32* piece_ends, gt_u32 n_pieces, gt_u32* counts) {
    gt_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_pieces) return;
    gt_u32 n = 0;
#define GT_COUNT(word_end) (++n)
    GT_FOR_EACH_WORD(pattern, text, piece_starts[i], piece_ends[i], GT_COUNT);
#undef GT_COUNT
    counts[i] = n;
}

extern "C" __global__ void gt_pretok_fill(gt_u32 pattern, const gt_u8* text, const gt_u32* piece_starts,
                                          const gt_u32* piece_ends, gt_u32 n_pieces, const gt_u32* first_word,
                                          gt_u32* word_ends) {
    gt_u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_pieces) return;
    gt_u32 k = first_word[i];
#define GT_FILL(word_end) (word_ends[k++] = (word_end))
    GT_FOR_EACH_WORD(pattern, text, piece_starts[i], piece_ends[i], GT_FILL);
#undef GT_FILL
}
