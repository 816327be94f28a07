// gt_wordpiece.cuh: BERT-style tokenization of one text, exactly as the
// Hugging Face `tokenizers` crate computes it (normalizers/bert.rs,
// pre_tokenizers/bert.rs and whitespace.rs, models/wordpiece/mod.rs).
//
// 1. Normalize: BertNormalizer (clean text, spaces around CJK ideographs,
//    strip accents, lowercase), or any normalizer that maps each code point
//    on its own, is one lookup per code point (gt_normalize.cuh). The one
//    context-dependent step, NFD's reordering of combining marks, can only
//    matter for a kept mark with a non-zero combining class: such code
//    points are flagged and the document goes to the exact path.
// 2. Pre-tokenize: the same table gives each normalized code point its class:
//    whitespace splits words and is dropped; punctuation is a word of its own
//    (BertPreTokenizer; WhitespaceSplit has no punctuation class).
// 3. WordPiece: greedy longest match from the left of each word, the first
//    piece in the whole vocabulary, the others in the continuing pieces
//    (prefix `##` stripped); a word with more than max_chars characters, or
//    with a position no piece matches, is one unknown token.
//
// Worked example (vocab: un, ##aff, ##able, [UNK]; lowercase):
//   "Unaffable!" -> "unaffable!" -> words "unaffable", "!"
//   -> [un, ##aff, ##able], [UNK]
#pragma once
#include "gt_hash.cuh"
#include "gt_normalize.cuh"
#include "gt_pretok.cuh"

struct GtWordPieceModel {
    GtCharTable chars;
    GtBytesTable first;  // every vocabulary token: the first piece of a word
    GtBytesTable rest;   // tokens that start with the continuing prefix, without it
    gt_u32 first_max;    // longest key of `first`, in bytes
    gt_u32 rest_max;     // longest key of `rest`, in bytes
    gt_u32 unk_id;
    gt_u32 max_chars;    // max_input_chars_per_word
};

// True when text[0, n) holds a code point that sends its document to the
// exact path (gt_chars_normalize would return GT_NONE): the host asks before it
// sends a row to the device, where there is no exact path.
// ASCII is never exact (no ASCII character has a combining class: the
// table's test checks it): it is skipped eight bytes at a time, straight to
// the first other byte. A character whose first two bytes start no exact
// code point is skipped on one bit: only the rest is decoded.
GT_HD int gt_wp_needs_exact(const GtCharTable* t, const gt_u8* text, gt_u32 n) {
    for (gt_u32 pos = 0; pos < n;) {
        if (n - pos >= 8) {
            gt_u64 high = gt_load8(text + pos) & 0x8080808080808080ULL;
            if (!high) {
                pos += 8;  // eight ASCII bytes
                continue;
            }
            pos += gt_lowest_bit(high) / 8;
        } else if (text[pos] < 0x80) {
            ++pos;
            continue;
        }
        // A run of non-ASCII characters (valid UTF-8: each has a second byte).
        while (pos < n && text[pos] >= 0x80) {
            gt_u8 lead = text[pos];
            gt_u32 prefix = (gt_u32)lead << 8 | text[pos + 1];
            if (!((t->exact_prefixes[prefix >> 6] >> (prefix & 63)) & 1)) {
                pos += gt_utf8_len(lead);
                continue;
            }
            gt_u32 cp, len = gt_decode(text, pos, &cp);
            if (gt_char_entry(t, cp) & GT_CHAR_EXACT) return 1;
            pos += len;
        }
    }
    return 0;
}

GT_HD int gt_is_continuation(gt_u8 b) { return (b & 0xC0) == 0x80; }

// WordPiece of the word s[begin, end): its ids into ids and, when starts is
// not null, each token's [start, end) in s. Returns the token count (at most
// the word's character count).
GT_HD gt_u32 gt_wordpiece_word(const GtWordPieceModel* m, const gt_u8* s, gt_u32 begin, gt_u32 end, gt_u32* ids,
                               gt_u32* starts, gt_u32* ends) {
    gt_u32 chars = 0;
    for (gt_u32 i = begin; i < end; ++i) chars += !gt_is_continuation(s[i]);
    gt_u32 count = 0;
    int matched = chars <= m->max_chars;
    for (gt_u32 start = begin; matched && start < end;) {
        const GtBytesTable* table = start == begin ? &m->first : &m->rest;
        gt_u32 longest = start == begin ? m->first_max : m->rest_max;
        // No key is longer than `longest`: start there (on a character boundary)
        // instead of at the word's end; the longest match is the same.
        gt_u32 stop = end - start > longest ? start + longest : end;
        while (stop > start && stop < end && gt_is_continuation(s[stop])) --stop;
        gt_u32 id = GT_NONE;
        while (stop > start) {
            id = gt_bytes_find(table, s + start, stop - start);
            if (id != GT_NONE) break;
            do --stop;
            while (stop > start && gt_is_continuation(s[stop]));
        }
        matched = id != GT_NONE;
        if (matched) {
            ids[count] = id;
            if (starts) {
                starts[count] = start;
                ends[count] = stop;
            }
            ++count;
            start = stop;
        }
    }
    if (matched) return count;
    ids[0] = m->unk_id;
    if (starts) {
        starts[0] = begin;
        ends[0] = end;
    }
    return 1;
}

// Pre-tokenizes the normalized text s[0, n): emit(begin, end) for each word.
template <class Emit>
GT_HD void gt_wp_words(const GtWordPieceModel* m, const gt_u8* s, gt_u32 n, Emit& emit) {
    gt_u32 word = 0;
    for (gt_u32 pos = 0; pos < n;) {
        gt_u32 cp, len = gt_decode(s, pos, &cp);
        gt_u32 cls = gt_char_entry(&m->chars, cp) & GT_CHAR_CLASS;
        if (cls != GT_CHAR_WORD) {
            if (word < pos) emit(word, pos);
            if (cls == GT_CHAR_PUNCT) emit(pos, pos + len);
            word = pos + len;
        }
        pos += len;
    }
    if (word < n) emit(word, n);
}

// WordPieces each word it is given, appending ids (and spans when starts is
// not null).
struct GtWpEncodeWords {
    const GtWordPieceModel* m;
    const gt_u8* s;
    gt_u32* ids;
    gt_u32* starts;
    gt_u32* ends;
    gt_u32 count;
    GT_HD void operator()(gt_u32 begin, gt_u32 end) {
        gt_u32 at = count;
        count += gt_wordpiece_word(m, s, begin, end, ids + at, starts ? starts + at : 0, starts ? ends + at : 0);
    }
};

// Pre-tokenizes the normalized text s[0, n) and WordPieces each word: ids into
// ids (room for n), spans in s into starts/ends when starts is not null.
// Returns the token count.
GT_HD gt_u32 gt_wp_encode_normalized(const GtWordPieceModel* m, const gt_u8* s, gt_u32 n, gt_u32* ids,
                                     gt_u32* starts, gt_u32* ends) {
    GtWpEncodeWords encode = {m, s, ids, starts, ends, 0};
    gt_wp_words(m, s, n, encode);
    return encode.count;
}

// Scratch for gt_wordpiece_text over a text of n bytes normalizing to at most
// g * n bytes (g: the table's growth): norm holds g * n bytes, from/to g * n
// entries each (only with spans).
struct GtWpScratch {
    gt_u8* norm;
    gt_u32* from;
    gt_u32* to;
};

// One text: ids into ids (room for g * n) and, when starts is not null, each
// token's byte span in text. Returns the count, or GT_NONE for the exact path.
GT_HD gt_u32 gt_wordpiece_text(const GtWordPieceModel* m, const gt_u8* text, gt_u32 n, GtWpScratch s, gt_u32* ids,
                               gt_u32* starts, gt_u32* ends) {
    gt_u32 k = gt_chars_normalize(&m->chars, text, n, s.norm, starts ? s.from : 0, starts ? s.to : 0);
    if (k == GT_NONE) return GT_NONE;
    gt_u32 count = gt_wp_encode_normalized(m, s.norm, k, ids, starts, ends);
    if (starts) {
        // Spans in the normalized text -> spans in text (of whole characters).
        for (gt_u32 i = 0; i < count; ++i) {
            gt_u32 first = starts[i], last = ends[i] - 1;
            starts[i] = s.from[first];
            ends[i] = s.to[last];
        }
    }
    return count;
}
