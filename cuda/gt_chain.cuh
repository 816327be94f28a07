// gt_chain.cuh: a tokenizer's pre-tokenizer as a chain of Split steps, each
// a hand-written scanner (gt_pretok.cuh) or a compiled pattern
// (gt_regex.cuh), with the crate's split behaviours, and inversion: the
// words the CPU backend and the device encode.
//
// One step splits a piece as the crate's NormalizedString::split does: the
// matches (find_iter's, with its rule for empty matches) and the gaps
// between them, in order, each flagged as a match (flipped by `invert`);
// then, per behaviour: Isolated keeps every range, Removed drops the
// matches, MergedWithPrevious joins a match to the range before it,
// MergedWithNext to the range after it, Contiguous joins neighbours with the
// same flag. Each resulting piece is split by the next step; the pieces left
// after the last step are the words (empty pieces are dropped, as the crate
// drops them). The crate's pre-tokenizers Punctuation, Digits,
// WhitespaceSplit, Whitespace and CharDelimiterSplit are such steps too (a
// one-character class, or \w+|[^\w\s]+ inverted and removed), compiled on the host.
//
// Example: Split(" ", MergedWithPrevious) on "a b": ranges "a", " " (match),
// "b" -> pieces "a ", "b".
#pragma once
#include "gt_pretok.cuh"
#include "gt_regex.cuh"

#define GT_MAX_STEPS 4
#define GT_PAT_REGEX 0xFFu  // a step whose pattern is compiled (GtChainStep.regex)

#define GT_SPLIT_ISOLATED 0u
#define GT_SPLIT_REMOVED 1u
#define GT_SPLIT_MERGED_PREVIOUS 2u
#define GT_SPLIT_MERGED_NEXT 3u
#define GT_SPLIT_CONTIGUOUS 4u
#define GT_SPLIT_BEHAVIOR 7u
#define GT_SPLIT_INVERT 8u

struct GtChainStep {
    gt_u32 pattern;   // GT_PAT_* of a hand-written scanner, or GT_PAT_REGEX
    gt_u32 behavior;  // GT_SPLIT_* | GT_SPLIT_INVERT
    gt_u32 cuts;      // host only: what the step allows of safe cuts (rust/kernels/host.rs)
    gt_u32 ascii;     // host only: the GT_PAT_* of a compiled pattern that has a loop over
                      // words (gt_scan_ascii_words: ASCII, and beyond where a class decides); else 0
    GtRegex regex;    // GT_PAT_REGEX: the compiled tables
};

struct GtChain {
    gt_u32 n;  // steps in use
    gt_u32 _pad;
    GtChainStep steps[GT_MAX_STEPS];
};

// Calls sink.range(start, end, is_match) for the matches of `step` in the
// subject s[0, n) and the gaps between them, in order (n > 0).
template <class Sink>
GT_HD void gt_step_ranges(const GtChainStep* step, const gt_u8* s, gt_u32 n, Sink& sink) {
    gt_u32 prev = 0, start;
    if (step->pattern != GT_PAT_REGEX) {
        for (gt_u32 pos = 0; pos < n;) {
            gt_u32 e = gt_find(step->pattern, s, n, pos, &start);
            if (e == GT_NONE) break;
            if (prev != start) sink.range(prev, start, 0);
            sink.range(start, e, 1);
            prev = pos = e;
        }
    } else {
        // onig's find_iter: an empty match right where the last match ended
        // is skipped by one character.
        gt_u32 last_end = 0, last_match_end = GT_NONE;
        while (last_end <= n) {
#ifndef __CUDA_ARCH__
            // Runs of words the loop decides first (ASCII, and beyond it
            // where a class decides), each handed on as it ends;
            // gt_rx_find for the word where that stops.
            if (prev == last_end) {
                auto on_end = [&sink](gt_u32 a, gt_u32 b) { sink.range(a, b, 1); };
                gt_u32 done = step->ascii ? gt_scan_ascii_words(step->ascii, s, n, last_end, on_end)
                                          : gt_rx_scan_ascii(&step->regex, s, n, last_end, on_end);
                if (done != last_end) prev = last_end = last_match_end = done;
            }
#endif
            gt_u32 e = gt_rx_find(&step->regex, s, n, last_end, &start);
            if (e == GT_NONE) break;
            if (e == start && last_match_end == e) {
                last_end += last_end < n ? gt_utf8_len(s[last_end]) : 1;
                continue;
            }
            last_end = last_match_end = e;
            if (prev != start) sink.range(prev, start, 0);
            sink.range(start, e, 1);
            prev = e;
        }
    }
    if (prev != n) sink.range(prev, n, 0);
}

// A step's ranges -> pieces by its behaviour, streamed: at most one piece
// waits for what follows it. Each piece goes to out(start, end) (empty ones
// too: the caller drops them).
template <class Out>
struct GtBehave {
    Out* out;
    gt_u32 behavior, invert;
    int has, prev_match;  // a waiting piece [a, b); the last range's flag
    gt_u32 a, b;

    GT_HD void range(gt_u32 x, gt_u32 y, int m) {
        m ^= (int)invert;
        switch (behavior) {
            case GT_SPLIT_REMOVED:
                if (!m) (*out)(x, y);
                break;
            case GT_SPLIT_CONTIGUOUS:
            case GT_SPLIT_MERGED_PREVIOUS: {
                int merge = behavior == GT_SPLIT_CONTIGUOUS ? m == prev_match : (m && !prev_match);
                if (merge && has) {
                    b = y;
                } else {
                    if (has) (*out)(a, b);
                    a = x, b = y, has = 1;
                }
                prev_match = m;
                break;
            }
            case GT_SPLIT_MERGED_NEXT:
                if (has) {
                    has = 0;
                    if (!m) {
                        (*out)(a, y);  // the waiting match joins this gap
                        break;
                    }
                    (*out)(a, b);
                }
                if (m) {
                    a = x, b = y, has = 1;
                } else {
                    (*out)(x, y);
                }
                break;
            default:  // GT_SPLIT_ISOLATED
                (*out)(x, y);
        }
    }

    GT_HD void finish() {
        if (has) (*out)(a, b);
        has = 0;
    }
};

template <class Out>
GT_HD GtBehave<Out> gt_behave(gt_u32 behavior, Out* out) {
    GtBehave<Out> sink = {out, behavior & GT_SPLIT_BEHAVIOR, (behavior & GT_SPLIT_INVERT) ? 1u : 0u, 0, 0, 0, 0};
    return sink;
}

template <int STEP, class Emit>
GT_HD_CALL void gt_chain_words(const GtChain* chain, const gt_u8* s, gt_u32 begin, gt_u32 end, Emit& emit);

// A piece of step STEP - 1 (offsets into its subject at `base`), split by step STEP.
template <int STEP, class Emit>
struct GtNextStep {
    const GtChain* chain;
    const gt_u8* s;
    gt_u32 base;
    Emit* emit;
    GT_HD void operator()(gt_u32 x, gt_u32 y) { gt_chain_words<STEP>(chain, s, base + x, base + y, *emit); }
};

// Each non-empty range of a step (offsets into its subject at `base`) as a
// word: what the last step hands on when it keeps every range (Isolated, the
// commonest), without a GtBehave and a call of the next step per word.
template <class Emit>
struct GtEachRange {
    Emit* emit;
    gt_u32 base;
    GT_HD void range(gt_u32 x, gt_u32 y, int) {
        if (x != y) (*emit)(base + x, base + y);
    }
};

// Calls emit(start, end) for each non-empty word of s[begin, end) after
// steps STEP.. of `chain`, in order. Offsets are into `s`; each piece is a
// subject of its own (its ends are the ends of text for lookarounds).
template <int STEP, class Emit>
GT_HD_CALL void gt_chain_words(const GtChain* chain, const gt_u8* s, gt_u32 begin, gt_u32 end, Emit& emit) {
    if (begin == end) return;
    if constexpr (STEP == GT_MAX_STEPS) {
        emit(begin, end);
    } else {
        if ((gt_u32)STEP >= chain->n) {
            emit(begin, end);
            return;
        }
        const GtChainStep* step = &chain->steps[STEP];
        if ((gt_u32)STEP + 1 == chain->n && (step->behavior & GT_SPLIT_BEHAVIOR) == GT_SPLIT_ISOLATED) {
            // The last step keeps every range as a piece: each is a word.
            GtEachRange<Emit> words = {&emit, begin};
            gt_step_ranges(step, s + begin, end - begin, words);
            return;
        }
        GtNextStep<STEP + 1, Emit> next = {chain, s, begin, &emit};
        GtBehave<GtNextStep<STEP + 1, Emit> > sink = gt_behave(step->behavior, &next);
        gt_step_ranges(step, s + begin, end - begin, sink);
        sink.finish();
    }
}
