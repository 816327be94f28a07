//! The fast path for one sequence of a byte-level BPE tokenizer: normalize,
//! split into words with the plan's scanners, then BPE each word through the
//! per-thread cache and the shared kernel. Returns None when the document
//! must take the exact path (it contains an added token's text).

use crate::cpu::{kernels, word_cache};
use crate::plan::bytelevel::{ByteLevelPlan, SplitStep};

/// Token ids of `text`, or None if only the exact path can encode it.
pub fn encode_ids(plan: &ByteLevelPlan, plan_id: u64, text: &str) -> Option<Vec<u32>> {
    if plan.has_added_token(text) {
        return None;
    }
    let normalized = plan.normalize(text);
    let text = normalized.as_ref();
    if matches!(normalized, std::borrow::Cow::Owned(_)) && plan.has_added_token(text) {
        return None;
    }
    let mut ids = Vec::with_capacity(text.len() / 3 + 1);
    word_cache::with_cache(plan_id, |cache| {
        for_each_word(&plan.splits, text, &mut |word| {
            cache.encode_word(plan.model(), word.as_bytes(), &mut ids)
        });
    });
    Some(ids)
}

/// Calls `emit` with each non-empty word: the pieces of `text` after every
/// Split step (Isolated: each match and each gap between matches is a piece),
/// in order, as the crate's `PreTokenizedString::split` produces them.
fn for_each_word(splits: &[SplitStep], text: &str, emit: &mut impl FnMut(&str)) {
    let Some((step, rest)) = splits.split_first() else {
        if !text.is_empty() {
            emit(text);
        }
        return;
    };
    let mut prev = 0;
    let mut piece = |start: usize, end: usize, prev: &mut usize| {
        if *prev != start {
            for_each_word(rest, &text[*prev..start], emit);
        }
        for_each_word(rest, &text[start..end], emit);
        *prev = end;
    };
    match step {
        SplitStep::Scanner(pattern) => {
            while let Some((start, end)) = kernels::find(*pattern, text, prev) {
                piece(start, end, &mut prev);
            }
        }
        SplitStep::Regex(regex) => {
            for (start, end) in regex.find_iter(text) {
                piece(start, end, &mut prev);
            }
        }
    }
    if prev != text.len() {
        for_each_word(rest, &text[prev..], emit);
    }
}
