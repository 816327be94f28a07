//! One sequence of a byte-level BPE tokenizer on the CPU: split out added
//! tokens, normalize, split into words with the plan's scanners, then BPE
//! each word through the per-thread cache and the shared kernel.
//!
//! Added tokens (chat templates: `<|im_start|>`, `<think>`...) are found by
//! the crate's own `AddedVocabulary` (its Aho-Corasick, longest match,
//! `single_word`, `lstrip`, `rstrip`, `normalized`), so the segments are
//! exactly the crate's; the text between them goes through the fast engine.

use super::word_cache;
use crate::kernels;
use crate::plan::bytelevel::{ByteLevelPlan, SplitStep};
use std::borrow::Cow;
use tokenizers::{AddedVocabulary, NormalizerWrapper, OffsetReferential, OffsetType};

/// Token ids of `text`, or None if only the exact path can encode it (text
/// around an added token that the normalizer would change: the crate matches
/// normalized added tokens after normalizing, which the fast path does not redo).
pub fn encode_ids(
    plan: &ByteLevelPlan,
    plan_id: u64,
    added: &AddedVocabulary,
    text: &str,
) -> Option<Vec<u32>> {
    if !plan.has_added_token(text) {
        let normalized = plan.prepare(text)?;
        let mut ids = Vec::with_capacity(normalized.len() / 3 + 1);
        encode_text(plan, plan_id, &normalized, &mut ids);
        return Some(ids);
    }
    // Without a normalizer the crate's split is the one it makes with it, as
    // long as the text, and every piece between added tokens, is already
    // normalized (checked: the crate normalizes the pieces it matches in).
    if matches!(plan.normalize(text), Cow::Owned(_)) {
        return None;
    }
    let pieces = added.extract_and_normalize(None::<&NormalizerWrapper>, text);
    let mut ids = Vec::with_capacity(text.len() / 3 + 1);
    for (piece, _, tokens) in pieces.get_splits(OffsetReferential::Original, OffsetType::None) {
        match tokens {
            Some(tokens) => ids.extend(tokens.iter().map(|t| t.id)),
            None if matches!(plan.normalize(piece), Cow::Borrowed(_)) => {
                let piece = plan.with_prefix_space(Cow::Borrowed(piece));
                encode_text(plan, plan_id, &piece, &mut ids)
            }
            None => return None,
        }
    }
    Some(ids)
}

/// Appends the ids of normalized `text`, free of added tokens, to `ids`.
fn encode_text(plan: &ByteLevelPlan, plan_id: u64, text: &str, ids: &mut Vec<u32>) {
    word_cache::with_cache(plan_id, |cache| {
        let mut encode = |word: &str| cache.encode_word(plan.model(), word.as_bytes(), ids);
        match &plan.scanner_chain {
            // Every step a scanner: the shared kernel logic splits (as on the GPU).
            Some(chain) => {
                kernels::split_words(chain, text, &mut |start, end| encode(&text[start..end]))
            }
            None => for_each_word(&plan.splits, text, &mut encode),
        }
    });
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
