// gt_spm.cuh: SentencePiece-style BPE (Llama-2, Mistral, Gemma) for one
// piece of normalized text, exactly as the `tokenizers` crate's
// BPE::merge_word computes it (models/bpe/model.rs):
// - each character found in the vocabulary is one symbol;
// - a character that is not becomes the <0xXX> tokens of its UTF-8 bytes
//   (byte_fallback, when all of them exist), else the unknown token:
//   consecutive unknown characters fuse into one with fuse_unk, and a pending
//   unknown is emitted only before the next known character or at the end
//   (so after byte-fallback tokens that followed it, as the crate does);
//   without an unknown token the character is dropped;
// - with ignore_merges a piece found whole in the vocabulary is one token;
// - then the merge loop of byte-level BPE (gt_bpe_merge).
// Worked example (vocab ▁, h, i, ▁h, ▁hi, <0xE2>...; merges "▁ h", "▁h i"):
//   "▁hi" -> [▁, h, i] -> [▁h, i] -> [▁hi]
#pragma once
#include "gt_bpe.cuh"

struct GtSpmModel {
    GtPairTable merges;
    GtBytesTable vocab;     // every token
    gt_u32 byte_ids[256];   // the <0xXX> tokens; GT_NONE where absent, or all without byte_fallback
    gt_u32 unk_id;          // GT_NONE: no unknown token
    gt_u32 fuse_unk;
    gt_u32 ignore_merges;
    gt_u32 pad_;            // named padding (see rust/kernels/abi.rs)
};

// Encodes bytes[0..n) into out (room for n ids); returns the number of ids.
// The scratch holds n symbols (2n heap entries), as for gt_bpe_word.
GT_HD gt_u32 gt_spm_word(const GtSpmModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out) {
    if (n == 0) return 0;
    if (m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out)) return 1;
    gt_u32 k = 0, unk_len = 0;  // unk_len: bytes of the unknown run so far
    for (gt_u32 pos = 0; pos < n;) {
        gt_u32 len = gt_utf8_len(bytes[pos]);
        gt_u32 id = gt_bytes_find(&m->vocab, bytes + pos, len);
        int fallback = id == GT_NONE;
        for (gt_u32 i = 0; fallback && i < len; ++i) fallback = m->byte_ids[bytes[pos + i]] != GT_NONE;
        if (id != GT_NONE) {
            if (unk_len) {
                s.ids[k++] = m->unk_id;
                unk_len = 0;
            }
            s.ids[k++] = id;
        } else if (fallback) {
            for (gt_u32 i = 0; i < len; ++i) {
                s.ids[k++] = m->byte_ids[bytes[pos + i]];
            }
        } else if (m->unk_id != GT_NONE) {
            if (unk_len && !m->fuse_unk) {
                s.ids[k++] = m->unk_id;
                unk_len = 0;
            }
            unk_len += len;
        }
        pos += len;
    }
    if (unk_len) {
        s.ids[k++] = m->unk_id;
    }
    if (k == 0) return 0;
    gt_bpe_link(s, k);
    return gt_bpe_merge(&m->merges, s, k, out);
}
