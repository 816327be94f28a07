// gt_pretok.cuh: hand-written pre-token scanners for the regexes real byte-
// level BPE models use, each matching exactly what Oniguruma (the oracle's
// regex engine) matches for that pattern: leftmost match, alternatives tried
// in order, greedy quantifiers with the backtracking the pattern allows.
//
// A scanner answers one question, gt_match_at: does the pattern match at
// byte `pos` of the piece [0, end), and where does the match end? gt_find
// builds the search on it (the leftmost match at or after `pos`); the caller
// emits the gaps between matches as pieces too (Split behaviour "Isolated").
// Input is valid UTF-8 (it comes from a Rust &str); the end of the piece is
// the end of the subject for lookaheads, as it is for the crate.
//
// Unicode classes come from gt_unicode_table.cuh, generated from Oniguruma
// and checked against it in CI; case-insensitive contractions fold ASCII case
// and U+017F (long s) to 's', which is the fold set Oniguruma uses (also
// checked). Patterns are selected on the host by their exact text
// (rust/plan/bytelevel.rs); anything else keeps the regex engine.
#pragma once
#include "gt_common.cuh"
#include "gt_unicode_table.cuh"

// Class bits (same order as the generator's table).
#define GT_L 0x001u
#define GT_N 0x002u
#define GT_WS 0x004u
#define GT_LU 0x008u
#define GT_LL 0x010u
#define GT_LT 0x020u
#define GT_LM 0x040u
#define GT_LO 0x080u
#define GT_M 0x100u
#define GT_P 0x200u
#define GT_S 0x400u

// The patterns, by the tokenizer.json regex they stand for.
#define GT_PAT_GPT2 1       // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
#define GT_PAT_CL100K 2     // (?i:'s|...|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
#define GT_PAT_QWEN 3       // the same with \p{N} (one digit per token)
#define GT_PAT_O200K 4      // o200k / gpt-oss (case-aware words, \p{N}{1,3}, [\r\n/]* tail)
#define GT_PAT_DS_DIGITS 5  // DeepSeek-V3 step 1: \p{N}{1,3}
#define GT_PAT_DS_CJK 6     // DeepSeek-V3 step 2: [一-龥぀-ゟ゠-ヿ]+
#define GT_PAT_DS_WORDS 7   // DeepSeek-V3 step 3: ASCII-punct words, letters+marks, punct, whitespace

GT_HD gt_u32 gt_class(gt_u32 cp) {
    if (cp >= 0x110000u) return 0;
    return gt_class_palette[gt_class_blocks[gt_class_block_of[cp >> 7]][cp & 127]];
}

GT_HD int gt_is_ascii_letter(gt_u8 b) { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z'); }

// A cursor over one code point: its position, length, value and class.
struct GtChar {
    gt_u32 pos, len, cp, cls;
};

GT_HD GtChar gt_char_at(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    GtChar c = {pos, 0, 0, 0};
    if (pos < end) {
        c.len = gt_decode(s, pos, &c.cp);
        c.cls = gt_class(c.cp);
    }
    return c;
}

GT_HD int gt_is_crlf(GtChar c) { return c.len && (c.cp == '\r' || c.cp == '\n'); }

// ---- ASCII fast paths ----------------------------------------------------
// Most text is ASCII words. These read 8 bytes at a time (SWAR on a u64, the
// same on host and device) and answer only when ASCII alone decides; where a
// non-ASCII byte could change the answer they return GT_NONE and the caller
// takes the general path, so the result is always the general path's.
#define GT_ONES8 0x0101010101010101ull
#define GT_HIGH8 0x8080808080808080ull

// High bit of each byte of x (bytes below 0x80) that lies in [lo, hi].
GT_HD gt_u64 gt_swar_in(gt_u64 x, gt_u8 lo, gt_u8 hi) {
    // Below 0x80 plus at most 0x7F: no byte carries into the next.
    gt_u64 ge_lo = x + GT_ONES8 * (0x80u - lo), gt_hi = x + GT_ONES8 * (0x7Fu - hi);
    return ge_lo & ~gt_hi & GT_HIGH8;
}

// High bit of each ASCII letter byte of x (any bytes).
GT_HD gt_u64 gt_swar_letters(gt_u64 x) {
    gt_u64 low7 = x & ~GT_HIGH8;
    return gt_swar_in(low7 | GT_ONES8 * 0x20u, 'a', 'z') & ~x;  // | 0x20 folds A-Z onto a-z
}

// High bit of each ASCII digit byte of x (any bytes).
GT_HD gt_u64 gt_swar_digits(gt_u64 x) { return gt_swar_in(x & ~GT_HIGH8, '0', '9') & ~x; }

// End of the run of ASCII bytes whose SWAR test `kind` holds (0: letters,
// 1: digits, 2: lowercase, 3: uppercase), from p: the first byte not in it,
// which may be a non-ASCII one.
GT_HD_HOT gt_u32 gt_ascii_run_end(const gt_u8* s, gt_u32 end, gt_u32 p, int kind) {
    for (;;) {
        if (end - p >= 8) {
            gt_u64 x = gt_load8(s + p), in;
            switch (kind) {
                case 0: in = gt_swar_letters(x); break;
                case 1: in = gt_swar_digits(x); break;
                case 2: in = gt_swar_in(x & ~GT_HIGH8, 'a', 'z') & ~x; break;
                default: in = gt_swar_in(x & ~GT_HIGH8, 'A', 'Z') & ~x; break;
            }
            gt_u64 out = ~in & GT_HIGH8;
            if (!out) {
                p += 8;
                continue;
            }
            return p + gt_lowest_bit(out) / 8;
        }
        if (p == end) return p;
        gt_u8 b = s[p];
        int in = kind == 0 ? gt_is_ascii_letter(b) : kind == 1 ? (b >= '0' && b <= '9')
               : kind == 2 ? (b >= 'a' && b <= 'z') : (b >= 'A' && b <= 'Z');
        if (!in) return p;
        ++p;
    }
}

// The same, GT_NONE when the run stops at a non-ASCII byte (a letter or
// digit there would go on with it).
GT_HD_HOT gt_u32 gt_ascii_run(const gt_u8* s, gt_u32 end, gt_u32 p, int kind) {
    gt_u32 at = gt_ascii_run_end(s, end, p, kind);
    return at < end && s[at] >= 0x80 ? GT_NONE : at;
}

// The first byte at or after p that is not ASCII, or, with `digits`, that
// is not ASCII or is an ASCII digit (where a \p{N} or CJK match can start).
GT_HD gt_u32 gt_skip_ascii(const gt_u8* s, gt_u32 end, gt_u32 p, int digits) {
    while (end - p >= 8) {
        gt_u64 x = gt_load8(s + p);
        gt_u64 stop = (x & GT_HIGH8) | (digits ? gt_swar_digits(x) : 0);
        if (stop) return p + gt_lowest_bit(stop) / 8;
        p += 8;
    }
    while (p < end && s[p] < 0x80 && !(digits && s[p] >= '0' && s[p] <= '9')) ++p;
    return p;
}

// End of the run of code points whose class intersects `mask`, from `pos`;
// at most `limit` code points.
GT_HD gt_u32 gt_run(const gt_u8* s, gt_u32 end, gt_u32 pos, gt_u32 mask, gt_u32 limit) {
    for (gt_u32 n = 0; n < limit; ++n) {
        GtChar c = gt_char_at(s, end, pos);
        if (!c.len || !(c.cls & mask)) break;
        pos += c.len;
    }
    return pos;
}

// End of the run of \r and \n (and '/' when `slash`) from `pos`.
GT_HD gt_u32 gt_newline_run(const gt_u8* s, gt_u32 end, gt_u32 pos, int slash) {
    while (pos < end && (s[pos] == '\r' || s[pos] == '\n' || (slash && s[pos] == '/'))) ++pos;
    return pos;
}

// (?i:x) for a contraction letter x: ASCII case, and U+017F for 's'.
GT_HD int gt_fold_eq(gt_u32 cp, gt_u32 lower, int fold) {
    if (cp == lower) return 1;
    if (!fold) return 0;
    return cp == lower - 32 || (lower == 's' && cp == 0x17F);
}

// 's|'t|'re|'ve|'m|'ll|'d at pos (case-folded when `fold`); end or GT_NONE.
GT_HD gt_u32 gt_contraction(const gt_u8* s, gt_u32 end, gt_u32 pos, int fold) {
    if (pos >= end || s[pos] != '\'') return GT_NONE;
    GtChar a = gt_char_at(s, end, pos + 1);
    if (!a.len) return GT_NONE;
    GtChar b = gt_char_at(s, end, pos + 1 + a.len);
    const char singles[4] = {'s', 't', 'm', 'd'};
    for (int i = 0; i < 4; ++i) {
        // Alternation order is 's 't 're 've 'm 'll 'd; the letters differ, so
        // only one alternative can match and order does not matter here.
        if (gt_fold_eq(a.cp, (gt_u32)singles[i], fold)) return a.pos + a.len;
    }
    if (b.len) {
        if (gt_fold_eq(a.cp, 'r', fold) && gt_fold_eq(b.cp, 'e', fold)) return b.pos + b.len;
        if (gt_fold_eq(a.cp, 'v', fold) && gt_fold_eq(b.cp, 'e', fold)) return b.pos + b.len;
        if (gt_fold_eq(a.cp, 'l', fold) && gt_fold_eq(b.cp, 'l', fold)) return b.pos + b.len;
    }
    return GT_NONE;
}

// \s*[\r\n]+ : through the last \r or \n of the whitespace run at pos.
GT_HD gt_u32 gt_ws_newlines(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    gt_u32 found = GT_NONE;
    for (GtChar c = gt_char_at(s, end, pos); c.len && (c.cls & GT_WS); c = gt_char_at(s, end, c.pos + c.len)) {
        if (gt_is_crlf(c)) found = c.pos + c.len;
    }
    return found;
}

// \s+(?!\S) then \s+ : the whitespace run, less its last character when a
// non-space follows (and the run has more than one character).
GT_HD gt_u32 gt_ws_tail(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    gt_u32 last = GT_NONE, p = pos;
    for (GtChar c = gt_char_at(s, end, p); c.len && (c.cls & GT_WS); c = gt_char_at(s, end, p)) {
        last = p;
        p += c.len;
    }
    if (last == GT_NONE) return GT_NONE;
    if (p == end || last == pos) return p;  // at the end, or a single character: \s+ takes it
    return last;
}

// [^\s\p{L}\p{N}]: not whitespace, letter or number.
#define GT_OTHER(c) ((c).len && !((c).cls & (GT_WS | GT_L | GT_N)))

// " ?[^\s\p{L}\p{N}]+" at c (next is the character after c): end, or GT_NONE.
GT_HD gt_u32 gt_space_other(const gt_u8* s, gt_u32 end, GtChar c, GtChar next) {
    GtChar other = c.cp == ' ' && GT_OTHER(next) ? next : c;
    if (!GT_OTHER(other)) return GT_NONE;
    gt_u32 p = other.pos;
    for (GtChar o = other; GT_OTHER(o); o = gt_char_at(s, end, p)) p += o.len;
    return p;
}

// ASCII words: " ?" then letters or digits (GPT-2), or [^\r\n\p{L}\p{N}]?
// then letters (cl100k, Qwen), or a digit run (cl100k, Qwen: at most
// `max_digits`; GPT-2: 0, no limit), decided by ASCII bytes alone; else
// GT_NONE. Never at an apostrophe (the contractions come first).
GT_HD gt_u32 gt_ascii_word(const gt_u8* s, gt_u32 end, gt_u32 pos, int gpt2, gt_u32 max_digits) {
    gt_u8 c = s[pos];
    gt_u8 next = pos + 1 < end ? s[pos + 1] : 0;
    if (gt_is_ascii_letter(c)) return gt_ascii_run(s, end, pos + 1, 0);
    int digit = c >= '0' && c <= '9';
    // The optional lead: " ?" for GPT-2; any ASCII but \r, \n, letters and digits otherwise.
    int lead = gpt2 ? c == ' ' : c < 0x80 && c != '\r' && c != '\n' && !digit && c != '\'';
    if (lead && gt_is_ascii_letter(next)) return gt_ascii_run(s, end, pos + 2, 0);
    if (gpt2 && (digit || (lead && next >= '0' && next <= '9'))) return gt_ascii_run(s, end, pos + 1 + !digit, 1);
    if (!gpt2 && digit) {
        gt_u32 p = pos + 1;
        while (p < end && p - pos < max_digits && s[p] >= '0' && s[p] <= '9') ++p;
        // Fewer than max digits, then a byte that may start a non-ASCII digit.
        return p - pos < max_digits && p < end && s[p] >= 0x80 ? GT_NONE : p;
    }
    return GT_NONE;
}

GT_HD gt_u32 gt_match_gpt2(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    if (s[pos] != '\'') {
        gt_u32 fast = gt_ascii_word(s, end, pos, 1, 0);
        if (fast != GT_NONE) return fast;
    }
    gt_u32 r = gt_contraction(s, end, pos, 0);
    if (r != GT_NONE) return r;
    GtChar c = gt_char_at(s, end, pos);
    GtChar word = c;
    if (c.cp == ' ') word = gt_char_at(s, end, pos + 1);  // " ?" then the class of what follows
    if (word.len && (word.cls & GT_L)) return gt_run(s, end, word.pos, GT_L, GT_NONE);
    if (word.len && (word.cls & GT_N)) return gt_run(s, end, word.pos, GT_N, GT_NONE);
    r = gt_space_other(s, end, c, gt_char_at(s, end, pos + c.len));
    if (r != GT_NONE) return r;
    return gt_ws_tail(s, end, pos);
}

// Qwen2/3 (max_digits 1) and cl100k / Llama-3 (max_digits 3).
GT_HD gt_u32 gt_match_cl100k(const gt_u8* s, gt_u32 end, gt_u32 pos, gt_u32 max_digits) {
    if (s[pos] != '\'') {
        gt_u32 fast = gt_ascii_word(s, end, pos, 0, max_digits);
        if (fast != GT_NONE) return fast;
    }
    gt_u32 r = gt_contraction(s, end, pos, 1);
    if (r != GT_NONE) return r;
    GtChar c = gt_char_at(s, end, pos);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c.cls & GT_L) return gt_run(s, end, pos, GT_L, GT_NONE);
    GtChar next = gt_char_at(s, end, pos + c.len);
    if (!gt_is_crlf(c) && !(c.cls & GT_N) && next.len && (next.cls & GT_L)) return gt_run(s, end, next.pos, GT_L, GT_NONE);
    // \p{N}{1,max}
    if (c.cls & GT_N) return gt_run(s, end, pos, GT_N, max_digits);
    // " ?[^\s\p{L}\p{N}]+[\r\n]*"
    r = gt_space_other(s, end, c, next);
    if (r != GT_NONE) return gt_newline_run(s, end, r, 0);
    r = gt_ws_newlines(s, end, pos);
    if (r != GT_NONE) return r;
    return gt_ws_tail(s, end, pos);
}

#define GT_UPPERISH (GT_LU | GT_LT | GT_LM | GT_LO | GT_M)
#define GT_LOWERISH (GT_LL | GT_LM | GT_LO | GT_M)

// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ from q, with the
// backtracking of the greedy first run: the lowerish run starts at the last
// position the uppers run can give back to it. Then an optional contraction.
GT_HD gt_u32 gt_o200k_lower_word(const gt_u8* s, gt_u32 end, gt_u32 q) {
    gt_u32 p = q, last_lowerish = GT_NONE, word_end;
    GtChar c = gt_char_at(s, end, p);
    for (; c.len && (c.cls & GT_UPPERISH); c = gt_char_at(s, end, p)) {
        if (c.cls & GT_LOWERISH) last_lowerish = p + c.len;
        p += c.len;
    }
    if (c.len && (c.cls & GT_LOWERISH)) {
        word_end = gt_run(s, end, p, GT_LOWERISH, GT_NONE);
    } else if (last_lowerish != GT_NONE) {
        word_end = last_lowerish;
    } else {
        return GT_NONE;
    }
    gt_u32 r = gt_contraction(s, end, word_end, 1);
    return r != GT_NONE ? r : word_end;
}

// [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* from q, then an optional contraction.
GT_HD gt_u32 gt_o200k_upper_word(const gt_u8* s, gt_u32 end, gt_u32 q) {
    gt_u32 p = gt_run(s, end, q, GT_UPPERISH, GT_NONE);
    if (p == q) return GT_NONE;
    p = gt_run(s, end, p, GT_LOWERISH, GT_NONE);
    gt_u32 r = gt_contraction(s, end, p, 1);
    return r != GT_NONE ? r : p;
}

// o200k's words over ASCII: [^\r\n\p{L}\p{N}]? then uppercase letters, then
// lowercase ones (the lower-word alternative when there are lowercase
// letters, else the upper-word one: the same span), when ASCII bytes alone
// decide it and no apostrophe follows; else GT_NONE.
GT_HD gt_u32 gt_o200k_ascii_word(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    gt_u8 c = s[pos];
    int lead = c < 0x80 && c != '\r' && c != '\n' && !gt_is_ascii_letter(c) && !(c >= '0' && c <= '9');
    gt_u32 q = pos + (lead ? 1 : 0);
    if (q >= end || !gt_is_ascii_letter(s[q])) return GT_NONE;
    gt_u32 p = gt_ascii_run(s, end, q, 3);
    if (p != GT_NONE) p = gt_ascii_run(s, end, p, 2);
    if (p == GT_NONE || (p < end && s[p] == '\'')) return GT_NONE;
    return p;
}

GT_HD gt_u32 gt_match_o200k(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    gt_u32 fast = gt_o200k_ascii_word(s, end, pos);
    if (fast != GT_NONE) return fast;
    GtChar c = gt_char_at(s, end, pos);
    int lead = !gt_is_crlf(c) && !(c.cls & (GT_L | GT_N));  // [^\r\n\p{L}\p{N}]?
    gt_u32 r;
    if (lead && (r = gt_o200k_lower_word(s, end, pos + c.len)) != GT_NONE) return r;
    if ((r = gt_o200k_lower_word(s, end, pos)) != GT_NONE) return r;
    if (lead && (r = gt_o200k_upper_word(s, end, pos + c.len)) != GT_NONE) return r;
    if ((r = gt_o200k_upper_word(s, end, pos)) != GT_NONE) return r;
    if (c.cls & GT_N) return gt_run(s, end, pos, GT_N, 3);
    // " ?[^\s\p{L}\p{N}]+[\r\n/]*"
    r = gt_space_other(s, end, c, gt_char_at(s, end, pos + c.len));
    if (r != GT_NONE) return gt_newline_run(s, end, r, 1);
    r = gt_ws_newlines(s, end, pos);
    if (r != GT_NONE) return r;
    return gt_ws_tail(s, end, pos);
}

GT_HD int gt_is_ds_cjk(gt_u32 cp) {
    return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x309F) || (cp >= 0x30A0 && cp <= 0x30FF);
}

GT_HD int gt_is_ascii_punct(gt_u8 b) {
    return (b >= '!' && b <= '/') || (b >= ':' && b <= '@') || (b >= '[' && b <= '`') || (b >= '{' && b <= '~');
}

GT_HD gt_u32 gt_match_ds_words(const gt_u8* s, gt_u32 end, gt_u32 pos) {
    // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
    if (gt_is_ascii_punct(s[pos]) && pos + 1 < end && gt_is_ascii_letter(s[pos + 1])) {
        gt_u32 p = pos + 1;
        while (p < end && gt_is_ascii_letter(s[p])) ++p;
        return p;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ over ASCII: a letter, or a space and
    // a letter, then letters (GT_NONE from the run: a mark or letter may follow).
    gt_u8 b = s[pos];
    int space_letter = b == ' ' && pos + 1 < end && gt_is_ascii_letter(s[pos + 1]);
    if (gt_is_ascii_letter(b) || space_letter) {
        gt_u32 r = gt_ascii_run(s, end, pos + 1 + space_letter, 0);
        if (r != GT_NONE) return r;
    }
    GtChar c = gt_char_at(s, end, pos);
    GtChar next = gt_char_at(s, end, pos + c.len);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    int lead = !gt_is_crlf(c) && !(c.cls & (GT_L | GT_P | GT_S));
    if (lead && next.len && (next.cls & (GT_L | GT_M))) return gt_run(s, end, next.pos, GT_L | GT_M, GT_NONE);
    if (c.cls & (GT_L | GT_M)) return gt_run(s, end, pos, GT_L | GT_M, GT_NONE);
    // " ?[\p{P}\p{S}]+[\r\n]*"
    GtChar punct = c.cp == ' ' && next.len && (next.cls & (GT_P | GT_S)) ? next : c;
    if (punct.cls & (GT_P | GT_S)) return gt_newline_run(s, end, gt_run(s, end, punct.pos, GT_P | GT_S, GT_NONE), 0);
    gt_u32 r = gt_ws_newlines(s, end, pos);
    if (r != GT_NONE) return r;
    return gt_ws_tail(s, end, pos);
}

// End of the match of `pattern` starting at byte `pos` (< end), or GT_NONE.
GT_HD gt_u32 gt_match_at(gt_u32 pattern, const gt_u8* s, gt_u32 end, gt_u32 pos) {
    switch (pattern) {
        case GT_PAT_GPT2: return gt_match_gpt2(s, end, pos);
        case GT_PAT_CL100K: return gt_match_cl100k(s, end, pos, 3);
        case GT_PAT_QWEN: return gt_match_cl100k(s, end, pos, 1);
        case GT_PAT_O200K: return gt_match_o200k(s, end, pos);
        case GT_PAT_DS_DIGITS: {
            GtChar c = gt_char_at(s, end, pos);
            return (c.cls & GT_N) ? gt_run(s, end, pos, GT_N, 3) : GT_NONE;
        }
        case GT_PAT_DS_CJK: {
            gt_u32 p = pos;
            for (GtChar c = gt_char_at(s, end, p); c.len && gt_is_ds_cjk(c.cp); c = gt_char_at(s, end, p)) p += c.len;
            return p > pos ? p : GT_NONE;
        }
        case GT_PAT_DS_WORDS: return gt_match_ds_words(s, end, pos);
        default: return GT_NONE;
    }
}

// The leftmost match at or after `pos`: returns its end and sets *start, or
// returns GT_NONE when the rest of the piece has no match.
GT_HD_CALL gt_u32 gt_find(gt_u32 pattern, const gt_u8* s, gt_u32 end, gt_u32 pos, gt_u32* start) {
    while (pos < end) {
        // DeepSeek's digit and CJK steps match at no ASCII byte but a digit.
        if (pattern == GT_PAT_DS_DIGITS || pattern == GT_PAT_DS_CJK) {
            pos = gt_skip_ascii(s, end, pos, pattern == GT_PAT_DS_DIGITS);
            if (pos == end) break;
        }
        gt_u32 e = gt_match_at(pattern, s, end, pos);
        if (e != GT_NONE) {
            *start = pos;
            return e;
        }
        gt_u32 cp;
        pos += gt_decode(s, pos, &cp);
    }
    return GT_NONE;
}

// ---- Runs of words for GPT-2, cl100k, Qwen, o200k and DeepSeek-V3 ---------
// The compiled pattern reads a word a character at a time, each step waiting
// on the last (gt_rx_scan_ascii). For these patterns a word is decided by
// the class of its first one or two characters and the end of a run, so this
// loop finds them by those alone: a letter run 8 bytes at a time, digits, a
// punctuation run with its tail, a whitespace run with the rules of
// \s*[\r\n]+, \s+(?!\S) and \s+. Beyond ASCII it reads a character where its
// class alone decides: a letter (two-byte ones: Latin, Greek, Cyrillic,
// Hebrew, Arabic; for \p{L}+ also longer ones, CJK) starts or goes on with a
// letter run, and a character that is no letter, digit or white space leads
// a word or goes on with punctuation (DeepSeek-V3's step: gt_ds_word). It
// stops before a word whose end another character could decide (digits and
// white space that are not ASCII, and for o200k letters of more than two
// bytes or of the classes its two case runs share: Lt, Lm, Lo, marks),
// leaving the rest to the compiled pattern.
// Checked against Oniguruma with the compiled pattern (rust/plan/regex/tests.rs).

#define GT_AK_LETTER 0
#define GT_AK_DIGIT 1
#define GT_AK_SPACE 2      // ' '
#define GT_AK_NEWLINE 3    // \r, \n
#define GT_AK_WS 4         // \t, \v, \f: white space, and a lead of [^\r\n\p{L}\p{N}]
#define GT_AK_QUOTE 5      // '
#define GT_AK_OTHER 6      // the rest: [^\s\p{L}\p{N}]
#define GT_AK_UNDECIDED 7  // a character the loop leaves to the compiled pattern

GT_HD_HOT int gt_ascii_kind(gt_u32 b) {
    if ((gt_u32)((b | 0x20u) - 'a') < 26u) return GT_AK_LETTER;
    if ((gt_u32)(b - '0') < 10u) return GT_AK_DIGIT;
    if (b == ' ') return GT_AK_SPACE;
    if ((gt_u32)(b - 9u) < 5u) return (b == '\n' || b == '\r') ? GT_AK_NEWLINE : GT_AK_WS;
    return b == '\'' ? GT_AK_QUOTE : GT_AK_OTHER;
}

// Whether s[p] starts a character of two bytes (U+0080..U+07FF).
GT_HD_HOT int gt_two_byte_lead(gt_u8 b) { return (gt_u8)(b - 0xC2u) < 0x1Eu; }

// The class bits of the two-byte character at s[p]: one read.
GT_HD_HOT gt_u32 gt_two_byte_class(const gt_u8* s, gt_u32 p) {
    return gt_class_two_byte[(gt_u32)(s[p] & 0x1Fu) << 6 | (s[p + 1] & 0x3Fu)];
}

// The class bits of the character of three or four bytes at s[p], and its length.
GT_HD_HOT gt_u32 gt_long_class(const gt_u8* s, gt_u32 p, gt_u32* len) {
    gt_u32 cp;
    *len = gt_decode(s, p, &cp);
    return gt_class(cp);
}

// The class bits of the non-ASCII character at s[p], and its length.
GT_HD_HOT gt_u32 gt_wide_class(const gt_u8* s, gt_u32 p, gt_u32* len) {
    if (gt_two_byte_lead(s[p])) {
        *len = 2;
        return gt_two_byte_class(s, p);
    }
    gt_u32 cp;
    *len = gt_decode(s, p, &cp);
    return gt_class(cp);
}

// The kind of the character at s[p] (p < end) in PATTERN's loop, and its
// length: ASCII by gt_ascii_kind; a letter (for o200k only a two-byte Lu or
// Ll) a letter; any other character without \p{L}, \p{N} or \s (for o200k
// not a mark either, which its letter classes hold) GT_AK_OTHER; the rest
// GT_AK_UNDECIDED.
template <gt_u32 PATTERN>
GT_HD_HOT int gt_word_kind(const gt_u8* s, gt_u32 p, gt_u32* len) {
    *len = 1;
    if (s[p] < 0x80) return gt_ascii_kind(s[p]);
    gt_u32 cls = gt_wide_class(s, p, len);
    if (cls & GT_L) {
        int cased = PATTERN != GT_PAT_O200K || (cls & (GT_LU | GT_LL));
        return (*len == 2 || PATTERN != GT_PAT_O200K) && cased ? GT_AK_LETTER : GT_AK_UNDECIDED;
    }
    if (cls & (GT_N | GT_WS)) return GT_AK_UNDECIDED;
    return PATTERN == GT_PAT_O200K && (cls & GT_M) ? GT_AK_UNDECIDED : GT_AK_OTHER;
}

// End of the letter run from p (kind 0: \p{L}; o200k's 2: lowercase, 3:
// uppercase), through letters of the kind (o200k: two-byte Ll, Lu); GT_NONE
// where a character could go on with it that the kind does not decide: for
// o200k a letter of more bytes, or one of Lt, Lm, Lo or a mark.
GT_HD_HOT gt_u32 gt_letter_run(const gt_u8* s, gt_u32 end, gt_u32 p, int kind) {
    const gt_u32 in = kind == 0 ? GT_L : kind == 2 ? GT_LL : GT_LU;
    const gt_u32 unsure = kind == 0 ? 0u : GT_LT | GT_LM | GT_LO | GT_M;
    for (;;) {
        p = gt_ascii_run_end(s, end, p, kind);
        if (p == end || s[p] < 0x80) return p;  // most runs end at an ASCII byte
        gt_u32 len, cls = gt_wide_class(s, p, &len);
        if (len != 2) {
            if (kind != 0 || !(cls & GT_L)) return cls & (in | unsure) ? GT_NONE : p;
            // \p{L} of three or four bytes (a CJK word), one after another.
            for (;;) {
                p += len;
                if (p == end || s[p] < 0xE0) break;
                cls = gt_long_class(s, p, &len);
                if (!(cls & GT_L)) return p;
            }
            continue;
        }
        // Two-byte letters one after another (a Cyrillic or Greek word),
        // then maybe ASCII letters again.
        for (;;) {
            if (!(cls & in)) return cls & unsure ? GT_NONE : p;
            p += 2;
            if (p == end || !gt_two_byte_lead(s[p])) break;
            cls = gt_two_byte_class(s, p);
        }
    }
}

// End of the run of punctuation ([^\s\p{L}\p{N}], of any length) from p,
// then of the run of `tail` after it (0: none; 1: [\r\n]*; 2: [\r\n/]*).
GT_HD_HOT gt_u32 gt_other_run(const gt_u8* s, gt_u32 end, gt_u32 p, int tail) {
    while (p < end) {
        gt_u32 b = s[p];
        if (b < 0x80) {
            int k = gt_ascii_kind(b);
            if (k != GT_AK_OTHER && k != GT_AK_QUOTE) break;
            ++p;
            continue;
        }
        gt_u32 len;
        if (gt_wide_class(s, p, &len) & (GT_L | GT_N | GT_WS)) break;
        p += len;
    }
    return tail ? gt_newline_run(s, end, p, tail == 2) : p;
}

// The whitespace word at p (ASCII white space): with `newlines`, through the
// run's last \r or \n (\s*[\r\n]+); else the run, less its last character
// when a non-space follows and it has more than one (\s+(?!\S), \s+).
// GT_NONE when the run meets white space that is not ASCII.
GT_HD_HOT gt_u32 gt_space_word(const gt_u8* s, gt_u32 end, gt_u32 p, int newlines) {
    gt_u32 start = p, newline_end = GT_NONE;
    for (; p < end; ++p) {
        gt_u32 b = s[p];
        if (b >= 0x80) {
            gt_u32 len;
            if (gt_wide_class(s, p, &len) & GT_WS) return GT_NONE;
            break;
        }
        int k = gt_ascii_kind(b);
        if (k == GT_AK_NEWLINE) {
            newline_end = p + 1;
        } else if (k != GT_AK_SPACE && k != GT_AK_WS) {
            break;
        }
    }
    if (newlines && newline_end != GT_NONE) return newline_end;
    return p == end || p - start == 1 ? p : p - 1;
}

// o200k's letters from p, a letter (gt_word_kind): [A-Z]*[a-z]+ or
// [A-Z]+[a-z]* (the uppercase run, then the lowercase run after it), then
// an optional contraction; GT_NONE when a character could go on with it
// that the runs do not decide.
GT_HD_HOT gt_u32 gt_o200k_letters(const gt_u8* s, gt_u32 end, gt_u32 p) {
    gt_u32 len = 1;
    int lower = s[p] < 0x80 ? s[p] >= 'a' : (gt_wide_class(s, p, &len) & GT_LL) != 0;
    // Most words start lowercase: no uppercase run to read then.
    gt_u32 e = lower ? p + len : gt_letter_run(s, end, p + len, 3);
    if (e == GT_NONE) return e;
    e = gt_letter_run(s, end, e, 2);
    if (e == GT_NONE) return e;
    gt_u32 c = gt_contraction(s, end, e, 1);
    return c != GT_NONE ? c : e;
}

// ASCII punctuation and symbols (\p{P}, \p{S}): printable, not a letter, digit or space.
GT_HD_HOT int gt_ascii_punct(gt_u32 b) { return b > 0x20u && b < 0x7Fu && gt_ascii_kind(b) >= GT_AK_QUOTE; }

// gt_ds_letters from a non-ASCII byte at p.
GT_HD_NOINLINE gt_u32 gt_ds_letters_wide(const gt_u8* s, gt_u32 end, gt_u32 p) {
    for (;;) {
        gt_u32 len;
        if (!(gt_wide_class(s, p, &len) & (GT_L | GT_M))) return p;
        p += len;
        // Two-byte letters one after another (a Cyrillic or Greek word).
        while (p < end && gt_two_byte_lead(s[p]) && (gt_two_byte_class(s, p) & (GT_L | GT_M))) p += 2;
        p = gt_ascii_run_end(s, end, p, 0);
        if (p == end || s[p] < 0x80) return p;
    }
}

// End of DeepSeek-V3's [\p{L}\p{M}]+ from p (after its first character):
// its classes are decided for every character, of any length.
GT_HD_HOT gt_u32 gt_ds_letters(const gt_u8* s, gt_u32 end, gt_u32 p) {
    p = gt_ascii_run_end(s, end, p, 0);
    return p == end || s[p] < 0x80 ? p : gt_ds_letters_wide(s, end, p);
}

// gt_ds_punct_run from a non-ASCII byte at p.
GT_HD_NOINLINE gt_u32 gt_ds_punct_run_wide(const gt_u8* s, gt_u32 end, gt_u32 p) {
    while (p < end) {
        if (s[p] < 0x80) {
            if (!gt_ascii_punct(s[p])) break;
            ++p;
            continue;
        }
        gt_u32 len;
        if (!(gt_wide_class(s, p, &len) & (GT_P | GT_S))) break;
        p += len;
    }
    return gt_newline_run(s, end, p, 0);
}

// End of DeepSeek-V3's [\p{P}\p{S}]+ from p, then of [\r\n]*.
GT_HD_HOT gt_u32 gt_ds_punct_run(const gt_u8* s, gt_u32 end, gt_u32 p) {
    while (p < end && gt_ascii_punct(s[p])) ++p;
    return p < end && s[p] >= 0x80 ? gt_ds_punct_run_wide(s, end, p) : gt_newline_run(s, end, p, 0);
}

// DeepSeek-V3's word step at p: its pieces come after the digit and CJK
// steps, so a digit here is a piece of digits (no match: a gap, as are
// control characters), left to the compiled pattern with them, as is a word
// led by white space or another character that is not ASCII.

// A word led by a character that is not ASCII (out of the loop).
GT_HD_NOINLINE gt_u32 gt_ds_wide_word(const gt_u8* s, gt_u32 end, gt_u32 p) {
    gt_u32 len, cls = gt_wide_class(s, p, &len);
    if (cls & (GT_L | GT_M)) return gt_ds_letters(s, end, p + len);  // lead or not, the same run
    if (cls & (GT_P | GT_S)) return gt_ds_punct_run(s, end, p + len);
    return GT_NONE;
}

// The word at p, an ASCII character of kind k that leads one (a space, a
// tab, a newline, punctuation), before a character that is not ASCII.
GT_HD_NOINLINE gt_u32 gt_ds_word_before_wide(const gt_u8* s, gt_u32 end, gt_u32 p, int k, int punct) {
    // [!-/:-@[-`{-~][A-Za-z]+ needs an ASCII letter: " ?[\p{P}\p{S}]+[\r\n]*".
    if (punct) return gt_ds_punct_run(s, end, p + 1);
    gt_u32 len1, cls1 = gt_wide_class(s, p + 1, &len1);
    if (k == GT_AK_SPACE && (cls1 & (GT_P | GT_S))) return gt_ds_punct_run(s, end, p + 1 + len1);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ after a space or a tab, then white space.
    if (k != GT_AK_NEWLINE && (cls1 & (GT_L | GT_M))) return gt_ds_letters(s, end, p + 1 + len1);
    return gt_space_word(s, end, p, 1);
}

GT_HD_HOT gt_u32 gt_ds_word(const gt_u8* s, gt_u32 end, gt_u32 p) {
    gt_u32 b = s[p];
    if (b >= 0x80) return gt_ds_wide_word(s, end, p);
    int k = gt_ascii_kind(b);
    if (k == GT_AK_LETTER) return gt_ds_letters(s, end, p + 1);  // [\p{L}\p{M}]+
    int punct = gt_ascii_punct(b);
    if (k == GT_AK_DIGIT || (k == GT_AK_OTHER && !punct)) return GT_NONE;
    int k1 = GT_AK_NEWLINE, punct1 = 0;  // at the end: neither a letter nor punctuation
    if (p + 1 < end) {
        if (s[p + 1] >= 0x80) return gt_ds_word_before_wide(s, end, p, k, punct);
        k1 = gt_ascii_kind(s[p + 1]);
        punct1 = gt_ascii_punct(s[p + 1]);
    }
    if (punct && k1 == GT_AK_LETTER) {
        // [!-/:-@[-`{-~][A-Za-z]+: ASCII letters only, so a byte past them ends it.
        gt_u32 e = p + 2;
        while (e < end && gt_is_ascii_letter(s[e])) ++e;
        return e;
    }
    // " ?[\p{P}\p{S}]+[\r\n]*"
    gt_u32 q = punct ? p : (k == GT_AK_SPACE && punct1) ? p + 1 : GT_NONE;
    if (q != GT_NONE) return gt_ds_punct_run(s, end, q + 1);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ after a space or a tab, then white space.
    if (k != GT_AK_NEWLINE && k1 == GT_AK_LETTER) return gt_ds_letters(s, end, p + 2);
    return gt_space_word(s, end, p, 1);
}

// The word of PATTERN (GT_PAT_GPT2, _CL100K, _QWEN, _O200K, _DS_WORDS) at p,
// or GT_NONE where a character the loop does not decide could decide it.
template <gt_u32 PATTERN>
GT_HD_HOT gt_u32 gt_word_of(const gt_u8* s, gt_u32 end, gt_u32 p) {
    const gt_u32 pattern = PATTERN;
    if (pattern == GT_PAT_DS_WORDS) return gt_ds_word(s, end, p);
    const int gpt2 = pattern == GT_PAT_GPT2, o200k = pattern == GT_PAT_O200K;
    gt_u32 len, len1 = 0;
    int k = gt_word_kind<PATTERN>(s, p, &len);
    if (k == GT_AK_LETTER) return o200k ? gt_o200k_letters(s, end, p) : gt_letter_run(s, end, p + len, 0);
    if (k == GT_AK_UNDECIDED) return GT_NONE;
    if (k == GT_AK_DIGIT) {
        if (gpt2) return gt_ascii_run(s, end, p + 1, 1);  // \p{N}+
        const gt_u32 most = pattern == GT_PAT_QWEN ? 1u : 3u;
        gt_u32 e = p + 1;
        while (e < end && e - p < most && (gt_u32)(s[e] - '0') < 10u) ++e;
        // Fewer than the most digits, then a byte that may start a non-ASCII digit.
        return e - p < most && e < end && s[e] >= 0x80 ? GT_NONE : e;
    }
    // What follows decides: a letter or digit after a lead, a contraction, " ?" punctuation.
    int k1 = GT_AK_NEWLINE;  // at the end: neither a letter nor punctuation
    if (p + len < end) {
        k1 = gt_word_kind<PATTERN>(s, p + len, &len1);
        if (k1 == GT_AK_UNDECIDED) return GT_NONE;
    }
    if (k == GT_AK_QUOTE && !o200k) {
        gt_u32 e = gt_contraction(s, end, p, !gpt2);
        if (e != GT_NONE) return e;
    }
    if (gpt2) {
        // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+", then white space.
        const int spaced = k == GT_AK_SPACE && p + 1 < end;
        const gt_u32 q = spaced ? p + 1 : p, q_len = spaced ? len1 : len;
        const int kq = spaced ? k1 : k;
        if (kq == GT_AK_LETTER) return gt_letter_run(s, end, q + q_len, 0);
        if (kq == GT_AK_DIGIT) return gt_ascii_run(s, end, q + 1, 1);
        if (kq == GT_AK_OTHER || kq == GT_AK_QUOTE) return gt_other_run(s, end, q + q_len, 0);
        return gt_space_word(s, end, p, 0);
    }
    // [^\r\n\p{L}\p{N}]? before letters, " ?[^\s\p{L}\p{N}]+" and its tail, then white space.
    if (k != GT_AK_NEWLINE && k1 == GT_AK_LETTER) {
        return o200k ? gt_o200k_letters(s, end, p + len) : gt_letter_run(s, end, p + len + len1, 0);
    }
    const int tail = o200k ? 2 : 1;
    if (k == GT_AK_OTHER || k == GT_AK_QUOTE) return gt_other_run(s, end, p + len, tail);
    if (k == GT_AK_SPACE && (k1 == GT_AK_OTHER || k1 == GT_AK_QUOTE)) return gt_other_run(s, end, p + 1 + len1, tail);
    return gt_space_word(s, end, p, 1);
}

template <gt_u32 PATTERN, class OnEnd>
GT_HD gt_u32 gt_scan_ascii_words_of(const gt_u8* s, gt_u32 end, gt_u32 pos, OnEnd& on_end) {
    gt_u32 p = pos;
    while (p < end) {
        gt_u32 e = gt_word_of<PATTERN>(s, end, p);
        if (e == GT_NONE) break;
        on_end(p, e);
        p = e;
    }
    return p;
}

// Consecutive words of `pattern` (one of those above) from `pos` (where
// a word starts) over ASCII: on_end(start, end) for each; returns where the
// last one ended (pos: none). The contract of gt_rx_scan_ascii. One loop per
// pattern, so the pattern's choices are made when it is compiled.
template <class OnEnd>
GT_HD gt_u32 gt_scan_ascii_words(gt_u32 pattern, const gt_u8* s, gt_u32 end, gt_u32 pos, OnEnd& on_end) {
    switch (pattern) {
        case GT_PAT_GPT2: return gt_scan_ascii_words_of<GT_PAT_GPT2>(s, end, pos, on_end);
        case GT_PAT_CL100K: return gt_scan_ascii_words_of<GT_PAT_CL100K>(s, end, pos, on_end);
        case GT_PAT_QWEN: return gt_scan_ascii_words_of<GT_PAT_QWEN>(s, end, pos, on_end);
        case GT_PAT_O200K: return gt_scan_ascii_words_of<GT_PAT_O200K>(s, end, pos, on_end);
        case GT_PAT_DS_WORDS: return gt_scan_ascii_words_of<GT_PAT_DS_WORDS>(s, end, pos, on_end);
        default: return pos;
    }
}

// ---- Safe cut points ------------------------------------------------------
// A long document is cut into pieces that threads scan independently, at
// positions p where s[p] is an ASCII space after a character that is not
// white space (gt_ends_in_non_space). Which chains may be cut there is proven
// per step from its automaton when the plan is built (GtChain.can_cut in
// rust/kernels/host.rs: no match crosses such a p, and one starts there), so
// the words of s[a, p) then s[p, b) are the words of s[a, b).

// True when the character that ends just before s[p] (p >= 1, valid UTF-8
// from s) is printable ASCII other than a space, or non-ASCII and not white
// space: a space after it starts a new word for every scanner that can cut.
GT_HD int gt_ends_in_non_space(const gt_u8* s, gt_u32 p) {
    gt_u8 last = s[p - 1];
    if (last < 0x80) return last > 0x20 && last < 0x7F;
    gt_u32 start = p - 1, cp;
    while (start > 0 && (s[start] & 0xC0) == 0x80) --start;
    gt_decode(s, start, &cp);
    return !gt_is_white_space(cp);
}

// The first safe cut at or after `from` (from >= 1) and before `end`, or `end`:
// before a space after a character that is not white space (Cyrillic and
// Greek words are cut as Latin ones). Spaces are looked for 8 bytes at a
// time: text without them (CJK) is scanned to its end.
GT_HD gt_u32 gt_next_cut(const gt_u8* s, gt_u32 end, gt_u32 from) {
    const gt_u64 ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    gt_u32 p = from;
    while (p < end) {
        if (end - p >= 8) {
            gt_u64 x = gt_load8(s + p) ^ (ones * ' ');  // a space is now a zero byte
            // A zero byte borrows into its high bit; a borrow goes on only
            // from a zero byte, so the lowest flag is the first space.
            gt_u64 spaces = (x - ones) & ~x & high;
            if (!spaces) {
                p += 8;
                continue;
            }
            p += gt_lowest_bit(spaces) / 8;
        }
        if (s[p] == ' ' && gt_ends_in_non_space(s, p)) return p;
        ++p;
    }
    return end;
}
