// gt_normalize.cuh: a normalizer that maps each code point on its own, as
// one lookup per code point in a table the plan builds on the host from the
// `tokenizers` crate's own functions (rust/plan/char_table.rs, checked there
// on every code point): BertNormalizer, Lowercase, StripAccents, Nmt, the
// ByteLevel normalizer, Replace of one character, and NFD/NFKD/NFC/NFKC
// where they act on a code point alone, composed in the order a Sequence
// applies them. A step that depends on its neighbours (NFD's reordering of
// marks, NFC's composition) flags the code points where it could: text
// holding one takes the steps one by one on the host instead (or, on a
// device, its row is the host's).
//
// Each output byte comes from one code point of the input; its span there
// is the offsets' alignment (the crate gives every character a per-code-
// point step writes the span of the one it came from).
//
// Worked example (Sequence[Lowercase, Replace(" " -> "▁")]):
//   "A b" -> 'A' maps to "a", ' ' to "▁", 'b' is kept -> "a▁b",
//   spans [0,1) [1,2) [1,2) [1,2) [2,3)
#pragma once
#include "gt_common.cuh"

// A GtCharTable entry: bits 0-1 the code point's pre-tokenizer class (as a
// normalized character; WordPiece's), bits 2-3 what the normalizer does with
// it, bit 4 the flag for the step-by-step path, bits 8-31 for GT_CHAR_MAP the
// offset in the blob of its replacement: one length byte, then that many
// UTF-8 bytes.
#define GT_CHAR_WORD 0u
#define GT_CHAR_SPACE 1u
#define GT_CHAR_PUNCT 2u
#define GT_CHAR_CLASS 3u
#define GT_CHAR_KEEP (0u << 2)
#define GT_CHAR_DROP (1u << 2)
#define GT_CHAR_MAP (2u << 2)
#define GT_CHAR_ACTION (3u << 2)
#define GT_CHAR_EXACT (1u << 4)
#define GT_CHAR_BLOCKS 0x1100u  // blocks of 256 code points up to U+10FFFF

// Two-level table: blocks[cp >> 8] is the block holding cp's 256 entries.
// exact_prefixes: a bit per (lead byte, second byte) of UTF-8 that starts a
// flagged code point (host only: a device never asks gt_wp_needs_exact).
struct GtCharTable {
    const gt_u16* blocks;
    const gt_u32* entries;
    const gt_u8* blob;
    const gt_u64* exact_prefixes;
};

GT_HD gt_u32 gt_char_entry(const GtCharTable* t, gt_u32 cp) {
    return t->entries[((gt_u32)t->blocks[cp >> 8] << 8) | (cp & 0xFF)];
}

// The first byte from `pos` of text[0, n) (at a character start) whose code
// point the table changes or flags, or n: text before it is its own output.
GT_HD gt_u32 gt_chars_kept(const GtCharTable* t, const gt_u8* text, gt_u32 n, gt_u32 pos) {
    while (pos < n) {
        gt_u32 cp, len = gt_decode(text, pos, &cp);
        if (gt_char_entry(t, cp) & (GT_CHAR_ACTION | GT_CHAR_EXACT)) return pos;
        pos += len;
    }
    return n;
}

// text[0, n) through the table into out (room for n times the table's
// growth), and for each output byte the span [from, to) in text of the code
// point it came from (when from is not null). Returns the output length, or
// GT_NONE at a flagged code point.
GT_HD gt_u32 gt_chars_normalize(const GtCharTable* t, const gt_u8* text, gt_u32 n, gt_u8* out, gt_u32* from,
                                gt_u32* to) {
    gt_u32 k = 0;
    for (gt_u32 pos = 0; pos < n;) {
        gt_u32 cp, len = gt_decode(text, pos, &cp);
        gt_u32 e = gt_char_entry(t, cp);
        if (e & GT_CHAR_EXACT) return GT_NONE;
        const gt_u8* src = text + pos;
        gt_u32 m = len;
        if ((e & GT_CHAR_ACTION) == GT_CHAR_DROP) m = 0;
        if ((e & GT_CHAR_ACTION) == GT_CHAR_MAP) {
            src = t->blob + (e >> 8) + 1;
            m = t->blob[e >> 8];
        }
        for (gt_u32 i = 0; i < m; ++i, ++k) {
            out[k] = src[i];
            if (from) {
                from[k] = pos;
                to[k] = pos + len;
            }
        }
        pos += len;
    }
    return k;
}
