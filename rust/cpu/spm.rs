//! One sequence of a SentencePiece-style BPE tokenizer on the CPU: split out
//! plain added tokens (the crate's split), normalize each piece, split it as
//! the pre-tokenizer does, cut it into words where the plan proved it safe,
//! and BPE each word through the per-thread cache and the shared kernel
//! (`gt_spm_word`).

use super::encode::Encoded;
use super::word_cache::{self, WordScratch};
use super::{each_part, Part, WordPlan};
use crate::kernels;
use crate::plan::spm::{Cuts, SpmPlan};
use crate::plan::PlainAdded;
use std::borrow::Cow;

/// `text` on the fast path, or None when offsets are asked for (the plan
/// leaves them to the exact path: the normalizer changes the text) or the
/// normalizer fails.
pub fn encode(plan: &SpmPlan, plan_id: u64, text: &str, offsets: bool) -> Option<Encoded> {
    if offsets {
        return None;
    }
    let kernel = |w: &[u8], s: &mut WordScratch, o: &mut Vec<u32>| {
        kernels::spm_word(plan.model(), w, &mut s.bpe, o)
    };
    let each = |part: &mut dyn FnMut(Part<'_>)| each_part(plan, text, part);
    word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel)
}

impl WordPlan for SpmPlan {
    fn plain_added(&self) -> Option<&PlainAdded> {
        self.plain_added.as_ref()
    }

    fn normalize_piece<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        self.normalize(piece)
    }

    /// Split as the pre-tokenizer does, then cut where the plan proved it safe.
    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str)) {
        self.words.each(normalized, first, |pre_token| {
            words(pre_token, self.cuts.as_ref()).for_each(&mut *word)
        });
    }
}

/// The words of a normalized piece: cut wherever `cuts` allows (the whole
/// piece without them).
fn words<'t>(text: &'t str, cuts: Option<&'t Cuts>) -> impl Iterator<Item = &'t str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len();
        if let Some(cuts) = cuts {
            let mut chars = rest.char_indices();
            let mut prev = chars.next().map(|(_, c)| c);
            for (at, c) in chars {
                if prev.is_some_and(|p| cuts.between(p, c)) {
                    end = at;
                    break;
                }
                prev = Some(c);
            }
        }
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}
