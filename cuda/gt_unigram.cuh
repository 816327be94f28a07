// gt_unigram.cuh: Unigram (T5, XLM-R, ALBERT) for one word, exactly as the
// `tokenizers` crate's Unigram::encode_optimized and Unigram::tokenize compute
// it (models/unigram/model.rs):
// - Viterbi from the left: from each character start, in order, every token
//   that begins there (shortest first) offers best[start] + score to the node
//   where it ends, and takes it when the node is unreached or the sum is
//   strictly greater (so ties keep the earliest offer, as the crate does);
// - a character with no token of its own length offers the unknown token at
//   min_score - 10 (the crate fails when there is no unknown token: GT_NONE);
// - the best path is read back from the end; consecutive unknown tokens fuse
//   (Unigram always fuses), and a fused run becomes the token with its text
//   if there is one, else its <0xXX> bytes with byte_fallback when all exist,
//   else the unknown token.
// Worked example (scores a=-1 b=-1 ab=-1.5): "ab": node 1 <- a (-1), node 2
// <- b (-2), then ab from 0 offers -1.5 > -2: the path is [ab].
//
// Tokens are found through one hash table that holds every token and every
// proper prefix of one that ends on a character: an entry says whether it is
// a token (its id) and whether longer tokens begin with it, so the search
// from a start stops where the crate's trie walk stops.
#pragma once
#include "gt_hash.cuh"

#define GT_UNI_LONGER 0x80000000u  // entry flag: a longer token begins with this text
#define GT_UNI_PREFIX 0x7FFFFFFEu  // entry id: only a prefix, not a token

struct GtUnigramModel {
    GtBytesTable pieces;    // token or proper prefix -> id (or GT_UNI_PREFIX) | GT_UNI_LONGER
    const double* scores;   // per id
    double unk_score;       // min_score - 10 (the crate's kUnkPenalty)
    gt_u32 byte_ids[256];   // the <0xXX> tokens with byte_fallback; GT_NONE where absent, or all without
    gt_u32 unk_id;          // GT_NONE: no unknown token
    gt_u32 lead_len;        // > 0: a word's slot byte reads as lead_utf8[0, lead_len), a token
    gt_u8 lead_utf8[4];     // (Metaspace's replacement; see gt_metaspace_words)
    gt_u32 pad_;            // named padding (see rust/kernels/abi.rs)
};

// The words of s[begin, end) after WhitespaceSplit then Metaspace (replacement
// r, prepend_scheme "always", split), as emit(start, end): each run of
// non-whitespace, cut before every r inside it. The first word of a run that
// does not start with r gets r before it: that word starts one byte early, at
// its slot, the last byte of the whitespace before it, which the model reads
// as r (gt_uni_has_slot). A piece must start with whitespace (the host puts a
// space before a text that does not, and cuts texts only before a space).
template <class Emit>
GT_HD void gt_metaspace_words(const gt_u8* s, gt_u32 begin, gt_u32 end, gt_u32 r, Emit& emit) {
    gt_u32 start = GT_NONE;  // the open word's start
    for (gt_u32 p = begin, cp, len; p < end; p += len) {
        len = gt_decode(s, p, &cp);
        if (gt_is_white_space(cp)) {
            if (start != GT_NONE) emit(start, p);
            start = GT_NONE;
        } else if (start == GT_NONE) {
            start = cp == r || p == begin ? p : p - 1;  // (p == begin: a piece the host broke its promise on)
        } else if (cp == r) {
            emit(start, p);
            start = p;
        }
    }
    if (start != GT_NONE) emit(start, end);
}

// True when a word starts with a slot: the last byte of the whitespace
// before it (ASCII whitespace, or the last byte of a longer character),
// which a word's own first byte never is.
GT_HD int gt_uni_has_slot(const GtUnigramModel* m, const gt_u8* bytes) {
    gt_u8 b = bytes[0];
    return m->lead_len && (b == ' ' || (b >= 0x09 && b <= 0x0D) || (b & 0xC0) == 0x80);
}

// Per word of n bytes: n + 1 entries each.
struct GtUnigramScratch {
    double* best;   // best score of a path ending at each byte
    gt_u32* from;   // where that path's last token starts; GT_NONE: unreached
    gt_u32* id;     // that token
};

// Offers a token [start, end) to node end (the crate's update rule).
GT_HD void gt_uni_offer(GtUnigramScratch s, gt_u32 start, gt_u32 end, gt_u32 id, double score) {
    double candidate = score + s.best[start];
    if (s.from[end] == GT_NONE || candidate > s.best[end]) {
        s.best[end] = candidate;
        s.from[end] = start;
        s.id[end] = id;
    }
}

// Emits a fused run of unknown characters bytes[0, n): its token, its bytes,
// or the unknown token (Unigram::tokenize).
GT_HD gt_u32 gt_uni_unknown_run(const GtUnigramModel* m, const gt_u8* bytes, gt_u32 n, gt_u32* out) {
    gt_u32 whole = gt_bytes_find(&m->pieces, bytes, n);
    if (whole != GT_NONE && (whole & ~GT_UNI_LONGER) != GT_UNI_PREFIX) {
        out[0] = whole & ~GT_UNI_LONGER;
        return 1;
    }
    int fallback = 1;
    for (gt_u32 i = 0; fallback && i < n; ++i) fallback = m->byte_ids[bytes[i]] != GT_NONE;
    if (!fallback) {
        out[0] = m->unk_id;
        return 1;
    }
    for (gt_u32 i = 0; i < n; ++i) out[i] = m->byte_ids[bytes[i]];
    return n;
}

// Encodes bytes[0..n) into out (room for n ids); returns the number of ids,
// or GT_NONE when a character has no token and there is no unknown token.
// A word that starts with a slot (gt_uni_has_slot) reads it as m->lead: a
// one-byte character in the scratch and out, lead_len bytes in lookups.
GT_HD gt_u32 gt_unigram_word(const GtUnigramModel* m, const gt_u8* bytes, gt_u32 n, GtUnigramScratch s,
                             gt_u32* out) {
    if (n == 0) return 0;
    int slot = gt_uni_has_slot(m, bytes);
    for (gt_u32 i = 0; i <= n; ++i) s.from[i] = GT_NONE;
    s.best[0] = 0.0;
    for (gt_u32 start = 0; start < n;) {
        int at_slot = slot && start == 0;
        gt_u32 char_len = at_slot ? 1 : gt_utf8_len(bytes[start]);
        int single = 0;
        gt_u64 state = GT_FNV_BASIS;
        for (gt_u32 end = start; end < n;) {
            gt_u32 from = end;
            end += from == 0 && at_slot ? 1 : gt_utf8_len(bytes[end]);
            if (end > n) break;  // a cut-off character: no token ends inside it
            gt_u32 entry, len = end - start;
            if (at_slot) {
                // The lead then bytes[1, end).
                state = from == 0 ? gt_fnv_extend(state, m->lead_utf8, m->lead_len)
                                  : gt_fnv_extend(state, bytes + from, end - from);
                gt_u32 read = m->lead_len + len - 1;
                entry = gt_bytes_find_parts(&m->pieces, m->lead_utf8, m->lead_len, bytes + 1, len - 1,
                                            gt_hash_finish(state, read));
            } else {
                state = gt_fnv_extend(state, bytes + from, end - from);
                entry = gt_bytes_find_hashed(&m->pieces, bytes + start, len, gt_hash_finish(state, len));
            }
            if (entry == GT_NONE) break;
            gt_u32 id = entry & ~GT_UNI_LONGER;
            if (id != GT_UNI_PREFIX) {
                gt_uni_offer(s, start, end, id, m->scores[id]);
                single |= end - start == char_len;
            }
            if (!(entry & GT_UNI_LONGER)) break;
        }
        if (!single) {
            if (m->unk_id == GT_NONE) return GT_NONE;
            gt_u32 end = start + char_len < n ? start + char_len : n;
            gt_uni_offer(s, start, end, m->unk_id, m->unk_score);
        }
        start += char_len;
    }
    // The path's token ends, first to last, into the tail of out: out[n - k, n).
    // (A slot reads as a token, so it is never part of an unknown run below.)
    gt_u32 k = 0;
    for (gt_u32 end = n; end > 0; end = s.from[end]) out[n - 1 - k++] = end;
    // Ids are written from out[0] up: after the tokens covering bytes [0, b)
    // at most b ids are written, and the tokens still to read cover the other
    // n - b bytes with at least one byte each, so writes never reach an end
    // not yet read.
    gt_u32 written = 0, start = 0, run_start = 0, in_run = 0;
    for (gt_u32 i = n - k; i < n; ++i) {
        gt_u32 end = out[i];
        gt_u32 id = s.id[end];
        if (id == m->unk_id) {
            if (!in_run) run_start = start;
            in_run = 1;
        } else {
            if (in_run) written += gt_uni_unknown_run(m, bytes + run_start, start - run_start, out + written);
            in_run = 0;
            out[written++] = id;
        }
        start = end;
    }
    if (in_run) written += gt_uni_unknown_run(m, bytes + run_start, n - run_start, out + written);
    return written;
}
