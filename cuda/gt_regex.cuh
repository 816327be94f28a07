// gt_regex.cuh: a pre-tokenizer pattern compiled to a table-driven scanner
// (rust/plan/regex/ builds the tables from the pattern's text). The matches
// are Oniguruma's (the oracle's engine): leftmost start, then, at that start,
// the match a backtracking engine finds first.
//
// The automaton reads code points, not bytes: each is mapped to a class
// (code points the pattern never tells apart share one) by a two-level
// table, and each state has a row of next states by class. A match is seen
// one character late: the entry taken on character c carries GT_RX_MATCH
// when a match ended just before c (so a one-character lookahead such as
// `\s+(?!\S)` is decided by c itself); the last column of a row is the end
// of the subject. GT_RX_DEAD: no match can follow, stop reading.
//
// Example, `\s+(?!\S)|\s+` on "  a": at 0, the first space, the second space
// (MATCH: a space follows the first one), then 'a' (no MATCH: a non-space
// follows the run; DEAD): the match is [0, 1), the run less its last space.
#pragma once
#include "gt_common.cuh"

#define GT_RX_MATCH 0x40000000u
#define GT_RX_DEAD 0x80000000u
#define GT_RX_ROW 0x3FFFFFFFu
#define GT_RX_LOOKBEHIND 1u  // the start state depends on the character before

struct GtRegex {
    const gt_u32* trans;     // rows of n_classes + 1 entries: next row | GT_RX_MATCH | GT_RX_DEAD
    const gt_u32* starts;    // n_classes + 1: the first row, by the class of the character before (n_classes: none)
    const gt_u16* block_of;  // 0x110000 / 128: the block of each 128 code points
    const gt_u8* blocks;     // 128 classes per block; block 0 is code points 0..127
    gt_u32 n_classes;
    gt_u32 flags;            // GT_RX_LOOKBEHIND
    const gt_u8* bclass;     // host only, or null: each byte's block class and flags, then the zone's count (gt_rx_scan_blocks)
    const gt_u8* bounds;     // host only, or null: 1 << 16 window entries GT_RX_NO / _YES / _UNDECIDED
};

// The class of the code point at `pos` (< end); its byte length in *len.
GT_HD gt_u32 gt_rx_class(const GtRegex* rx, const gt_u8* s, gt_u32 pos, gt_u32* len) {
    gt_u8 b = s[pos];
    if (b < 0x80) {
        *len = 1;
        return rx->blocks[b];
    }
    gt_u32 cp;
    *len = gt_decode(s, pos, &cp);
    return rx->blocks[(gt_u32)rx->block_of[cp >> 7] * 128u + (cp & 127u)];
}

// The class of the character that ends at `pos`, or n_classes at the start.
GT_HD gt_u32 gt_rx_class_before(const GtRegex* rx, const gt_u8* s, gt_u32 pos) {
    if (pos == 0) return rx->n_classes;
    gt_u32 start = pos - 1, len;
    while (start > 0 && (s[start] & 0xC0) == 0x80) --start;
    return gt_rx_class(rx, s, start, &len);
}

// End of the match at `pos` (<= end) whose character before has class
// `prev`, or GT_NONE.
GT_HD gt_u32 gt_rx_match_at(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 pos, gt_u32 prev) {
    gt_u32 row = rx->starts[prev], last = GT_NONE, p = pos;
    for (;;) {
        if (p == end) return (rx->trans[row + rx->n_classes] & GT_RX_MATCH) ? p : last;
        gt_u32 len, e = rx->trans[row + gt_rx_class(rx, s, p, &len)];
        if (e & GT_RX_MATCH) last = p;
        if (e & GT_RX_DEAD) return last;
        row = e & GT_RX_ROW;
        p += len;
    }
}

// The leftmost match at or after `pos` (a character boundary, <= end):
// returns its end and sets *start, or GT_NONE. A position where the first
// character already kills every thread costs one lookup.
GT_HD_CALL gt_u32 gt_rx_find(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 pos, gt_u32* start) {
    gt_u32 prev = (rx->flags & GT_RX_LOOKBEHIND) ? gt_rx_class_before(rx, s, pos) : rx->n_classes;
    for (;;) {
        if (pos == end) {
            if (rx->trans[rx->starts[prev] + rx->n_classes] & GT_RX_MATCH) {
                *start = pos;
                return pos;
            }
            return GT_NONE;
        }
        gt_u32 len, cls = gt_rx_class(rx, s, pos, &len);
        gt_u32 e = rx->trans[rx->starts[prev] + cls];
        if (!(e & GT_RX_DEAD) || (e & GT_RX_MATCH)) {
            gt_u32 r = gt_rx_match_at(rx, s, end, pos, prev);
            if (r != GT_NONE) {
                *start = pos;
                return r;
            }
        }
        prev = (rx->flags & GT_RX_LOOKBEHIND) ? cls : rx->n_classes;
        pos += len;
    }
}

// Consecutive matches from `pos` (where a match may start: 0 or the end of
// the last one) over ASCII text, in one loop: on_end(start, end) for each
// (the first starts at pos, each next one where the one before ended);
// returns where the last one ended (pos: none). It saves gt_rx_find's call,
// restart and second reading of each word's first character. Where a match
// dies (GT_RX_DEAD) with one ending just before the dead character
// (GT_RX_MATCH on the same entry), the next starts on that character; where
// it ended earlier (a backtrack, e.g. `\s+(?!\S)` giving back a run's last
// space), the reading goes on from there. It stops, leaving the rest to
// gt_rx_find, before anything it does not decide: a non-ASCII byte, the end
// of the subject, a position where no match or an empty one may start, a
// backtrack with no match; patterns with a lookbehind are left to it whole.
// Same matches as gt_rx_find by construction (rust/plan/regex/tests.rs
// checks both against Oniguruma).
// With `until`, it returns after the first end at or after it.
template <class OnEnd>
GT_HD gt_u32 gt_rx_scan_ascii(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 pos, OnEnd& on_end,
                              gt_u32 until = GT_NONE) {
    if (pos >= end || s[pos] >= 0x80 || (rx->flags & GT_RX_LOOKBEHIND)) return pos;
    const gt_u32* trans = rx->trans;
    const gt_u8* blocks = rx->blocks;
    const gt_u32 start_row = rx->starts[rx->n_classes];
    gt_u32 row = trans[start_row + blocks[s[pos]]];
    if (row & (GT_RX_DEAD | GT_RX_MATCH)) return pos;
    // last: the current match's last MATCH (0: none; a match is never empty).
    gt_u32 done = pos, last = 0;
    for (gt_u32 p = pos + 1; p < end;) {
        gt_u32 b = s[p];
        if (b >= 0x80) break;
        gt_u32 c = blocks[b];
        gt_u32 e = trans[(row & GT_RX_ROW) + c];
        if (!(e & GT_RX_DEAD)) {
            if (e & GT_RX_MATCH) last = p;
            row = e;
            ++p;
            continue;
        }
        if (!(e & GT_RX_MATCH)) {
            if (!last) break;
            p = last;  // the match ended before its dead character: read on from there
            c = blocks[s[p]];
        }
        gt_u32 r = trans[start_row + c];  // the first entry of a match starting at p
        if (r & (GT_RX_DEAD | GT_RX_MATCH)) break;
        on_end(done, p);
        done = p;
        if (p >= until) break;
        row = r;
        last = 0;
        ++p;
    }
    return done;
}

#ifndef __CUDA_ARCH__
// The block scan (host only): word ends over ASCII read from a table, 64
// positions at a time, without a branch per word. rust/plan/regex/bounds.rs
// derives the table from the DFA: bclass maps a byte to its block class (low
// 4 bits; 15: non-ASCII) and flags (GT_RX_RARE, GT_RX_WHITE); bounds[a << 12 |
// b << 8 | c << 4 | d] says whether a match ends between b and c in the
// bytes a b c d (GT_RX_YES), does not (GT_RX_NO), or the table cannot tell
// (GT_RX_UNDECIDED: the DFA decides). The table holds only for windows
// that start bclass[256] counted bytes (not GT_RX_WHITE) after the last
// rare one (`'`, `\n`: a contraction, `\s*[\r\n]` giving back a run).
//
// Example, GPT-2's pattern on "ab cd": the window "b cd" says yes (a match
// ends before the space), "ab c" no, " cd" with what follows no.
#define GT_RX_NO 0u
#define GT_RX_YES 1u
#define GT_RX_UNDECIDED 2u
#define GT_RX_RARE 0x10u
#define GT_RX_WHITE 0x20u
#ifndef GT_RX_DFA_RUN
#define GT_RX_DFA_RUN 16u
#endif

// Counted bytes (up to `safe`) since the last rare one before `pos` (`safe`
// where there is none), looking back 32 bytes at most (0 past them: fewer
// than the truth only makes more windows undecided).
inline gt_u32 gt_rx_count_before(const gt_u8* cls, const gt_u8* s, gt_u32 pos, gt_u32 safe) {
    gt_u32 d = 0, floor = pos > 32u ? pos - 32u : 0u;
    while (d < safe) {
        if (pos == floor) return floor == 0 ? safe : 0u;
        gt_u32 k = cls[s[--pos]];
        if (k & GT_RX_RARE) return d;
        d += (k & GT_RX_WHITE) ? 0u : 1u;
    }
    return safe;
}

// Word ends from `done` (> 0, the end of a match) as the table decides
// them, in order, up to the first position it does not decide: on_end(a, b)
// for each; returns the last end (done: none) and sets *stop to that
// position (end: the table went as far as it can, to end - 2). Positions go
// 16 at a time (a stop wastes at most 15 lookups).
template <class OnEnd>
inline gt_u32 gt_rx_scan_blocks(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 done, OnEnd& on_end,
                                gt_u32* stop) {
    const gt_u8* cls = rx->bclass;
    const gt_u8* bounds = rx->bounds;
    const gt_u32 safe = cls[256];
    // Position q's window is s[q - 2, q + 2); the first is done + 1's.
    gt_u32 q = done + 1;
    gt_u32 count = q + 1 < end ? gt_rx_count_before(cls, s, q - 2, safe) : 0u;
    while (q + 1 < end) {
        gt_u32 m = end - 1 - q < 16u ? end - 1 - q : 16u;
        const gt_u8* w = s + q - 2;
        // Windows that hold a byte >= 0x80 are undecided: stop before them
        // without their lookups (text that is not ASCII costs one test).
        gt_u32 j = m + 3;  // the first byte >= 0x80 is w[j] (m + 3: none)
        if (m == 16) {
            const gt_u64 hi = 0x8080808080808080ull;
            gt_u64 w0, w1, w2;
            __builtin_memcpy(&w0, w, 8);
            __builtin_memcpy(&w1, w + 8, 8);
            __builtin_memcpy(&w2, w + 11, 8);
            if (w0 & hi) {
                j = (gt_u32)__builtin_ctzll(w0 & hi) >> 3;
            } else if (w1 & hi) {
                j = 8 + ((gt_u32)__builtin_ctzll(w1 & hi) >> 3);
            } else if (w2 & hi) {
                j = 11 + ((gt_u32)__builtin_ctzll(w2 & hi) >> 3);
            }
        } else {
            for (gt_u32 i = 0; i < m + 3; ++i) {
                if (w[i] >= 0x80) {
                    j = i;
                    break;
                }
            }
        }
        if (j < m + 3) {
            if (j <= 3) {  // window 0 holds it
                *stop = q;
                return done;
            }
            m = j - 3 < m ? j - 3 : m;
        }
        // pair[i]: the classes of w[i] and w[i + 1]; window i is pair[i], pair[i + 2].
        gt_u32 pair[18], flags = 0;
        gt_u32 k0 = cls[w[0]];
        for (gt_u32 i = 0; i < m + 2; ++i) {
            gt_u32 k1 = cls[w[i + 1]];
            pair[i] = (k0 & 15u) << 4 | (k1 & 15u);
            flags |= i < m ? k0 : 0u;
            k0 = k1;
        }
        gt_u32 yes = 0, und = 0;
        for (gt_u32 i = 0; i < m; ++i) {
            gt_u32 v = bounds[pair[i] << 8 | pair[i + 2]];
            yes |= (v & 1u) << i;
            und |= (v >> 1) << i;
        }
        if ((flags & GT_RX_RARE) || count < safe) {
            // A zone: windows starting within `safe` counted bytes of a rare one.
            for (gt_u32 i = 0; i < m; ++i) {
                if (count < safe) und |= 1u << i;
                gt_u32 k = cls[w[i]];
                count = (k & GT_RX_RARE) ? 0u : count + ((k & GT_RX_WHITE) ? 0u : 1u);
            }
            if (count > safe) count = safe;
        }
        gt_u32 take = und ? yes & ((und & (0u - und)) - 1u) : yes;
        while (take) {
            gt_u32 e = q + (gt_u32)__builtin_ctz(take);
            on_end(done, e);
            done = e;
            take &= take - 1u;
        }
        if (und) {
            *stop = q + (gt_u32)__builtin_ctz(und);
            return done;
        }
        q += m;
    }
    *stop = end;
    return done;
}

// Consecutive matches from `pos` as gt_rx_scan_ascii finds them, with the
// block scan wherever the pattern has a table: the table from each known
// end, the DFA from where it stops to the first end past that.
template <class OnEnd>
inline gt_u32 gt_rx_scan_fast(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 pos, OnEnd& on_end) {
    if (!rx->bounds) return gt_rx_scan_ascii(rx, s, end, pos, on_end);
    gt_u32 done = pos;
    for (;;) {
        gt_u32 stop = done;
        if (done > 0 && (s[done - 1] | s[done]) < 0x80) done = gt_rx_scan_blocks(rx, s, end, done, on_end, &stop);
        // The DFA past the undecided position and a little further (a zone
        // or a run of undecided windows is rarely alone).
        gt_u32 until = stop >= end ? GT_NONE : (stop > done ? stop : done + 1) + GT_RX_DFA_RUN;
        gt_u32 next = gt_rx_scan_ascii(rx, s, end, done, on_end, until);
        if (next == done || until == GT_NONE) return next;
        done = next;
    }
}
#endif
