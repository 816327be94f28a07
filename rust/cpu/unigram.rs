//! One sequence of a Unigram tokenizer on the CPU: split out plain added
//! tokens (the crate's split), normalize each piece (`plan/normalize.rs`),
//! cut it into words as the pre-tokenizer does, and run each word
//! through the per-thread cache and the shared Viterbi kernel
//! (`gt_unigram_word`).

use super::encode::Encoded;
use super::word_cache::{self, WordScratch};
use super::{each_part, Part, WordPlan};
use crate::kernels;
use crate::plan::unigram::UnigramPlan;
use crate::plan::PlainAdded;
use std::borrow::Cow;

/// `text` on the fast path, or None when offsets are asked for (the
/// normalizer may change the text: they stay on the exact path) or when only
/// the exact path can encode it (a normalizer error, a character without a
/// token and no unknown token: the crate reports those).
pub fn encode(plan: &UnigramPlan, plan_id: u64, text: &str, offsets: bool) -> Option<Encoded> {
    if offsets {
        return None;
    }
    let kernel = |w: &[u8], s: &mut WordScratch, o: &mut Vec<u32>| {
        kernels::unigram_word(plan.model(), w, &mut s.unigram, o)
    };
    let each = |part: &mut dyn FnMut(Part<'_>)| each_part(plan, text, part);
    word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel)
}

impl WordPlan for UnigramPlan {
    fn plain_added(&self) -> Option<&PlainAdded> {
        self.plain_added.as_ref()
    }

    fn normalize_piece<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        self.normalize(piece)
    }

    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str)) {
        self.words(normalized, first, word)
    }
}
