//! One sequence of a SentencePiece-style BPE tokenizer on the CPU: split out
//! plain added tokens (the crate's split), normalize each piece, split it as
//! the pre-tokenizer does, cut it into words where the plan proved it safe,
//! and BPE each word through the per-thread cache and the shared kernel
//! (`gt_spm_word`).

use super::encode::Encoded;
use super::token_spans::SpanSource;
use super::word_cache::{self, WordScratch};
use super::{each_part, encode_with_offsets, AlignedWord, Part, WordPlan};
use crate::kernels;
use crate::plan::normalize::Aligns;
use crate::plan::spm::{Cuts, SpmPlan};
use crate::plan::PlainAdded;
use std::borrow::Cow;

/// `text` on the fast path, or None when the normalizer fails. With
/// offsets (`spans`: how token spans are told, see `token_spans`), None too
/// where `cpu::encode_with_offsets` cannot tell them.
pub fn encode(
    plan: &SpmPlan,
    plan_id: u64,
    text: &str,
    spans: Option<&SpanSource<'_>>,
) -> Option<Encoded> {
    if let Some(source) = spans {
        return encode_with_offsets(plan, plan_id, text, source, kernel(plan));
    }
    let each = |part: &mut dyn FnMut(Part<'_>)| each_part(plan, text, part);
    word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel(plan))
}

/// The plan's ids of one word (`gt_spm_word`); false when it cannot encode it.
pub fn kernel(plan: &SpmPlan) -> impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool + '_ {
    |w, s, o| kernels::spm_word(plan.model(), w, &mut s.bpe, o)
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

    fn normalize_aligned(&self, piece: &str) -> Option<(String, Aligns)> {
        SpmPlan::normalize_aligned(self, piece)
    }

    fn each_word_aligned(
        &self,
        normalized: &str,
        align: &[(u32, u32)],
        first: bool,
        word: &mut AlignedWord<'_>,
    ) {
        self.words
            .each_aligned(normalized, align, first, |pre_token, pre_align| {
                for w in words(pre_token, self.cuts.as_ref()) {
                    let at = w.as_ptr() as usize - pre_token.as_ptr() as usize;
                    word(w, &pre_align[at..at + w.len()]);
                }
            });
    }
}

/// The words of a normalized piece: cut wherever `cuts` allows (the whole
/// piece without them; `gt_spm_next_cut`).
pub fn words<'t>(text: &'t str, cuts: Option<&'t Cuts>) -> impl Iterator<Item = &'t str> {
    let view = cuts.map(Cuts::view);
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = view
            .as_ref()
            .map_or(rest.len(), |view| kernels::spm_next_cut(view, rest, 1));
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}
