//! One sequence of a Unigram tokenizer on the CPU: split out plain added
//! tokens (the crate's split), normalize each piece (`plan/normalize.rs`),
//! cut it into words as the pre-tokenizer does, and run each word
//! through the per-thread cache and the shared Viterbi kernel
//! (`gt_unigram_word`).

use super::token_spans::{self, SpanSource};
use super::word_cache::{self, WordScratch};
use super::{each_part, encode_with_offsets, AlignedWord, Part, WordPlan};
use super::{Encoded, FastEncode};
use crate::kernels;
use crate::plan::unigram::UnigramPlan;
use tokenizers::AddedVocabulary;

/// `text` on the fast path, or None when only the exact path can encode it
/// (a normalizer error, a character without a token and no unknown token:
/// the crate reports those). With offsets (`token_lens`: bytes each id
/// covers, see `token_spans`), None too where `cpu::encode_with_offsets`
/// cannot tell them.
pub fn encode(
    plan: &UnigramPlan,
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

/// The plan's ids of one word (`gt_unigram_word`); false when it cannot
/// encode it (no unknown token for a character).
pub fn kernel(plan: &UnigramPlan) -> impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool + '_ {
    |w, s, o| kernels::unigram_word(plan.model(), w, &mut s.unigram, o)
}

impl FastEncode for UnigramPlan {
    fn encode_fast(
        &self,
        plan_id: u64,
        _added: &AddedVocabulary,
        text: &str,
        offsets: bool,
    ) -> Option<Encoded> {
        match offsets {
            true => None,
            false => encode(self, plan_id, text, None),
        }
    }

    fn word_plan(&self) -> Option<&dyn WordPlan> {
        Some(self)
    }
}

impl WordPlan for UnigramPlan {
    fn encode_word(&self, word: &[u8], scratch: &mut WordScratch, out: &mut Vec<u32>) -> bool {
        kernels::unigram_word(self.model(), word, &mut scratch.unigram, out)
    }

    /// A Unigram pre-token is one word.
    fn each_pre_token_word(&self, pre_token: &str, word: &mut dyn FnMut(&str)) {
        if !pre_token.is_empty() {
            word(pre_token)
        }
    }

    fn affixes(&self) -> (usize, usize) {
        (0, 0)
    }

    /// The crate's Unigram gives every byte token of an unknown piece the whole piece.
    fn special_ids(&self) -> (&[u32; 256], u32, u32) {
        (
            &self.model().byte_ids,
            token_spans::UNKNOWN_LEN,
            self.model().unk_id,
        )
    }

    fn unknown_is_text(&self) -> bool {
        true
    }

    fn asks_crate_for_spans(&self) -> bool {
        true
    }

    fn encode_with_spans(
        &self,
        plan_id: u64,
        text: &str,
        spans: &SpanSource<'_>,
    ) -> Option<Encoded> {
        encode(self, plan_id, text, Some(spans))
    }
    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str)) {
        self.words(normalized, first, word)
    }

    fn each_word_aligned(
        &self,
        normalized: &str,
        align: &[(u32, u32)],
        first: bool,
        word: &mut AlignedWord<'_>,
    ) {
        self.words_aligned(normalized, align, first, word)
    }
}
