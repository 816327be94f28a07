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
    const gt_u8* first_bytes;  // host only, or null: 0 for a byte no match starts at (no lookbehind, no empty match)
    gt_u32 n_classes;
    gt_u32 flags;            // GT_RX_LOOKBEHIND
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
#ifndef __CUDA_ARCH__
        // Bytes no match starts at, skipped with one lookup each (the
        // start needs nothing before: `prev` stays the same).
        if (rx->first_bytes) {
            while (pos < end && !rx->first_bytes[s[pos]]) ++pos;
        }
#endif
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
template <class OnEnd>
GT_HD gt_u32 gt_rx_scan_ascii(const GtRegex* rx, const gt_u8* s, gt_u32 end, gt_u32 pos, OnEnd& on_end) {
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
        row = r;
        last = 0;
        ++p;
    }
    return done;
}
