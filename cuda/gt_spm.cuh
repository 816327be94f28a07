// gt_spm.cuh: SentencePiece-style BPE (Llama-2, Mistral, Gemma) for one
// piece of normalized text, exactly as the `tokenizers` crate's
// BPE::merge_word computes it (models/bpe/model.rs):
// - each character found in the vocabulary is one symbol, looked up with
//   the continuing_subword_prefix before it (every character but the word's
//   first) and the end_of_word_suffix after it (the word's last), when the
//   model has them (CLIP: "</w>");
// - a character that is not becomes the <0xXX> tokens of the UTF-8 bytes of
//   that lookup text, affixes included (byte_fallback, when all of them
//   exist), else the unknown token: consecutive unknown characters fuse into
//   one with fuse_unk, and a pending unknown is emitted only before the next
//   known character or at the end (so after byte-fallback tokens that
//   followed it, as the crate does); without an unknown token the character
//   is dropped;
// - with ignore_merges a piece found whole in the vocabulary (no affixes) is
//   one token;
// - then the merge loop of byte-level BPE (gt_bpe_merge).
// Byte-level BPE whose model needs any of this (affixes, an unknown token)
// runs here too, on each word's byte-level characters.
// Worked example (vocab ▁, h, i, ▁h, ▁hi, <0xE2>...; merges "▁ h", "▁h i"):
//   "▁hi" -> [▁, h, i] -> [▁h, i] -> [▁hi]
#pragma once
#include "gt_bpe.cuh"

#define GT_AFFIX_MAX 16  // bytes of a continuing_subword_prefix or end_of_word_suffix

struct GtSpmModel {
    GtPairTable merges;
    GtBytesTable vocab;     // every token
    gt_u32 byte_ids[256];   // the <0xXX> tokens; GT_NONE where absent, or all without byte_fallback
    gt_u32 unk_id;          // GT_NONE: no unknown token
    gt_u32 fuse_unk;
    gt_u32 ignore_merges;
    gt_u32 space_len;       // > 0: a space reads as the character space_utf8[0, space_len), a
    gt_u8 space_utf8[4];    // token (the normalizer's Replace of " ", done as the text is read)
    gt_u32 pad_;            // named padding (see rust/kernels/abi.rs)
    gt_u32 prefix_len;      // continuing_subword_prefix (0: none)
    gt_u32 suffix_len;      // end_of_word_suffix (0: none)
    gt_u8 prefix[GT_AFFIX_MAX];
    gt_u8 suffix[GT_AFFIX_MAX];
};

// The most symbols (and ids) a word of n bytes can give: one per byte, and
// with affixes the byte-fallback tokens of each character's prefix and of
// the last one's suffix.
GT_HD gt_u32 gt_spm_room(const GtSpmModel* m, gt_u32 n) { return n * (1 + m->prefix_len) + m->suffix_len; }

// The symbols of bytes[0..n) before any merge, into ids (room for
// gt_spm_room(n)): each character's token, else its bytes' fallback tokens,
// else the unknown token (one per run with fuse_unk). Returns their count.
GT_HD gt_u32 gt_spm_symbols(const GtSpmModel* m, const gt_u8* bytes, gt_u32 n, gt_u32* ids) {
    gt_u32 k = 0, unk = 0;  // unk: an unknown run is pending
    gt_u8 key[2 * GT_AFFIX_MAX + 4];
    for (gt_u32 pos = 0, step; pos < n; pos += step) {
        const gt_u8* ch = bytes + pos;
        gt_u32 len = step = gt_utf8_len(*ch);
        if (*ch == ' ' && m->space_len) {
            ch = m->space_utf8;
            len = m->space_len;
        }
        int prefixed = m->prefix_len && pos > 0, suffixed = m->suffix_len && pos + step >= n;
        if (prefixed || suffixed) {
            gt_u32 at = 0;
            for (gt_u32 i = 0; prefixed && i < m->prefix_len; ++i) key[at++] = m->prefix[i];
            for (gt_u32 i = 0; i < len; ++i) key[at++] = ch[i];
            for (gt_u32 i = 0; suffixed && i < m->suffix_len; ++i) key[at++] = m->suffix[i];
            ch = key;
            len = at;
        }
        gt_u32 id = gt_bytes_find(&m->vocab, ch, len);
        int fallback = id == GT_NONE;
        for (gt_u32 i = 0; fallback && i < len; ++i) fallback = m->byte_ids[ch[i]] != GT_NONE;
        if (id != GT_NONE) {
            if (unk) {
                ids[k++] = m->unk_id;
                unk = 0;
            }
            ids[k++] = id;
        } else if (fallback) {
            for (gt_u32 i = 0; i < len; ++i) {
                ids[k++] = m->byte_ids[ch[i]];
            }
        } else if (m->unk_id != GT_NONE) {
            if (unk && !m->fuse_unk) {
                ids[k++] = m->unk_id;
            }
            unk = 1;
        }
    }
    if (unk) {
        ids[k++] = m->unk_id;
    }
    return k;
}

// Encodes bytes[0..n) into out (room for gt_spm_room(n) ids); returns the
// number of ids. The scratch holds that many symbols (twice as many heap
// entries), as for gt_bpe_word.
GT_HD gt_u32 gt_spm_word(const GtSpmModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out) {
    if (n == 0) return 0;
    if (m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out)) return 1;
    gt_u32 k = gt_spm_symbols(m, bytes, n, s.ids);
    if (k == 0) return 0;
    return gt_bpe_merge(&m->merges, s, k, out);
}

// gt_spm_word of a long word by a block whose rounds take `share`
// (gt_bpe_rounds), its id count into *count; lane 0 finds the symbols (one pass).
GT_HD void gt_long_word(const GtSpmModel* m, const gt_u8* bytes, gt_u32 n, GtBpeScratch s, gt_u32* out,
                        gt_u32* count, gt_u32 share) {
    GT_SHARED gt_u32 symbols_;
    GtLaneMem<gt_u32> symbols = &symbols_;
    GT_LANE_ZERO {
        int whole = m->ignore_merges && gt_whole_word(&m->vocab, bytes, n, out);
        gt_u32 k = whole ? 0 : gt_spm_symbols(m, bytes, n, s.ids);
        GT_LANE_WROTE(s.ids, k);
        *symbols = k;
        if (!k) *count = whole;
    }
    GT_SYNC();
    gt_u32 k = *symbols;
    if (k) gt_bpe_rounds(&m->merges, s, k, out, count, share);
}

// ---- words: where a piece can be cut --------------------------------------
// The crate runs BPE over each whole piece of normalized text. A piece can be
// cut between characters a and b when both are tokens of their own and no
// token has a then b inside it, and, with byte fallback for every byte, on
// both sides of a character that is not a token: no merge can span such a
// cut (the proof is at `Cuts` in rust/plan/spm.rs, which builds the tables).
// Both backends cut with these functions: the CPU per word, the device per
// piece (pretok kernels) and the host where it cuts rows into pieces.
#define GT_SPM_ASCII_WORDS 512  // 128 rows of 128 bits: bit b of row a

struct GtSpmCuts {
    const gt_u32* bits;     // ASCII pairs a-then-b no word ends between (GT_SPM_ASCII_WORDS words), then
                            // one bit per code point below n_known: a token of its own
    GtPairTable joined;     // the other pairs adjacent inside a token, by code point (rank unused)
    gt_u32 n_known;         // code points the known bits cover
    gt_u32 unknown_alone;   // a character that is not a token is cut off on both sides
    gt_u32 enabled;         // 0: no cut is proven safe, each piece is one word
    gt_u32 space_as;        // > 0: a space reads as this code point (as in GtSpmModel)
};

GT_HD int gt_spm_bit(const gt_u32* bits, gt_u32 i) { return (bits[i >> 5] >> (i & 31)) & 1; }

GT_HD int gt_spm_known(const GtSpmCuts* c, gt_u32 cp) {
    return cp < c->n_known && gt_spm_bit(c->bits + GT_SPM_ASCII_WORDS, cp);
}

// True when a word may end between characters a and b. An ASCII pair's bit
// is the whole answer (the plan folds the known checks into it: one load for
// most pairs of a text).
GT_HD int gt_spm_cut_between(const GtSpmCuts* c, gt_u32 a, gt_u32 b) {
    if (a < 128 && b < 128) return !gt_spm_bit(c->bits, a * 128 + b);
    if (!gt_spm_known(c, a) || !gt_spm_known(c, b)) return c->unknown_alone;
    gt_u32 rank, merged;
    return !gt_pair_find(&c->joined, a, b, &rank, &merged);
}

// Decodes the character at `pos` as the model reads it (a space as
// space_as); returns its byte length.
GT_HD gt_u32 gt_spm_decode(const GtSpmCuts* c, const gt_u8* s, gt_u32 pos, gt_u32* cp) {
    gt_u32 len = gt_decode(s, pos, cp);
    if (*cp == ' ' && c->space_as) *cp = c->space_as;
    return len;
}

// The first cut of s at or after byte `from` (>= 1; s[0] starts a character)
// and before `end`, or `end`.
GT_HD gt_u32 gt_spm_next_cut(const GtSpmCuts* c, const gt_u8* s, gt_u32 end, gt_u32 from) {
    if (!c->enabled) return end;
    gt_u32 p = from;
    while (p < end && (s[p] & 0xC0) == 0x80) ++p;  // to a character start
    if (p >= end) return end;
    gt_u32 q = p - 1, a, b;
    while ((s[q] & 0xC0) == 0x80) --q;  // the character before p
    gt_spm_decode(c, s, q, &a);
    for (gt_u32 len; p < end; p += len, a = b) {
        len = gt_spm_decode(c, s, p, &b);
        if (gt_spm_cut_between(c, a, b)) return p;
    }
    return end;
}

// Calls emit(start, end) for each word of s[begin, end), in order.
template <class Emit>
GT_HD void gt_spm_cut_words(const GtSpmCuts* c, const gt_u8* s, gt_u32 begin, gt_u32 end, Emit& emit) {
    for (gt_u32 start = begin; start < end;) {
        gt_u32 cut = gt_spm_next_cut(c, s, end, start + 1);
        emit(start, cut);
        start = cut;
    }
}
