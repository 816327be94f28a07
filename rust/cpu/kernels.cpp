// Host build of the shared kernel logic (cuda/*.cuh) for the CPU backend:
// C-linkage entry points over the GT_HD functions, nothing more. Compiled by
// build.rs with the `cc` crate.
#include "gt_bpe.cuh"
#include "gt_pretok.cuh"

extern "C" {

gt_u32 gt_host_bpe_word(const GtBpeModel* model, const gt_u8* bytes, gt_u32 n, GtBpeScratch scratch, gt_u32* out) {
    return gt_bpe_word(model, bytes, n, scratch, out);
}

void gt_host_pair_insert(gt_u64* keys, gt_u32* ranks, gt_u32* merged, gt_u64 mask, gt_u32 left, gt_u32 right,
                         gt_u32 rank, gt_u32 merged_id) {
    gt_pair_insert(keys, ranks, merged, mask, left, right, rank, merged_id);
}

void gt_host_bytes_insert(gt_u64* hashes, gt_u32* starts, gt_u32* lens, gt_u32* ids, gt_u64 mask,
                          const gt_u8* bytes, gt_u32 n, gt_u32 start, gt_u32 id) {
    gt_bytes_insert(hashes, starts, lens, ids, mask, bytes, n, start, id);
}

gt_u32 gt_host_find(gt_u32 pattern, const gt_u8* text, gt_u32 end, gt_u32 pos, gt_u32* start) {
    return gt_find(pattern, text, end, pos, start);
}

gt_u32 gt_host_bytes_find(const GtBytesTable* table, const gt_u8* bytes, gt_u32 n) {
    return gt_bytes_find(table, bytes, n);
}

}
