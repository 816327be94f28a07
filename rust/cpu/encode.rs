//! One sequence of a byte-level BPE tokenizer on the CPU: normalize, split
//! into words with the plan's scanners, then BPE each word through the
//! per-thread cache and the shared kernel. Returns None when the document
//! must take the exact path (it contains an added token's text).

use super::word_cache;
use crate::kernels;
use crate::plan::bytelevel::{ByteLevelPlan, SplitStep};

/// Token ids of `text`, or None if only the exact path can encode it.
pub fn encode_ids(plan: &ByteLevelPlan, plan_id: u64, text: &str) -> Option<Vec<u32>> {
    let normalized = plan.prepare(text)?;
    let text = normalized.as_ref();
    let mut ids = Vec::with_capacity(text.len() / 3 + 1);
    word_cache::with_cache(plan_id, |cache| {
        let mut encode = |word: &str| cache.encode_word(plan.model(), word.as_bytes(), &mut ids);
        match &plan.scanner_chain {
            // Every step a scanner: the shared kernel logic splits (as on the GPU).
            Some(chain) => {
                kernels::split_words(chain, text, &mut |start, end| encode(&text[start..end]))
            }
            None => for_each_word(&plan.splits, text, &mut encode),
        }
    });
    Some(ids)
}

/// Calls `emit` with each non-empty word (for chains with a regex step; all-
/// scanner chains use `gt_split_words`, the same rule): the pieces of `text` after every
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
