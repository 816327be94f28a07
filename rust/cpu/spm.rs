//! One sequence of a SentencePiece-style BPE tokenizer on the CPU: split out
//! plain added tokens (the crate's split), normalize each piece, split it as
//! the pre-tokenizer does, cut it into words where the plan proved it safe,
//! and BPE each word through the per-thread cache and the shared kernel
//! (`gt_spm_word`). Without a pre-tokenizer the text is read as a device
//! reads it (`SpmPlan::device_piece`: Llama-2's spaces read as "▁").

use super::token_spans::{self, SpanSource};
use super::word_cache::{self, WordScratch};
use super::{
    each_normalized_part, each_part, encode_with_offsets, AlignedWord, NormalizedPart, Part,
    WordPlan,
};
use super::{Encoded, FastEncode};
use crate::kernels::{self, GtSpmCuts};
use crate::plan::spm::SpmPlan;
use crate::plan::DevicePiece;
use tokenizers::AddedVocabulary;

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
    if !plan.words.is_identity() {
        let each = |part: &mut dyn FnMut(Part<'_>)| each_part(plan, text, part);
        return word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel(plan));
    }
    // Without a pre-tokenizer, as a device reads it: Llama-2's spaces are
    // read as "▁" by the cuts and the model, so the text is not rewritten.
    // (A cached word is then " the" here and "▁the" with offsets: either
    // key's ids are its own.)
    let (model, cuts) = plan.device_views();
    let each = |part: &mut dyn FnMut(Part<'_>)| {
        let device_text = |piece| plan.device_piece(piece).map(DevicePiece::joined);
        each_normalized_part(plan, text, device_text, |piece| match piece {
            NormalizedPart::Added(id) => part(Part::Added(id)),
            NormalizedPart::Text(piece, _) => {
                words(&piece, &cuts).for_each(|w| part(Part::Word(w)))
            }
        })
    };
    let kernel = |w: &[u8], s: &mut WordScratch, o: &mut Vec<u32>| {
        kernels::spm_word(&model, w, &mut s.bpe, o)
    };
    word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel)
}

/// The plan's ids of one word (`gt_spm_word`); false when it cannot encode it.
pub fn kernel(plan: &SpmPlan) -> impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool + '_ {
    |w, s, o| kernels::spm_word(plan.model(), w, &mut s.bpe, o)
}

impl FastEncode for SpmPlan {
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

impl WordPlan for SpmPlan {
    fn encode_word(&self, word: &[u8], scratch: &mut WordScratch, out: &mut Vec<u32>) -> bool {
        kernels::spm_word(self.model(), word, &mut scratch.bpe, out)
    }

    /// Cut where the plan proved it safe.
    fn each_pre_token_word(&self, pre_token: &str, word: &mut dyn FnMut(&str)) {
        words(pre_token, &self.cuts_view()).for_each(word)
    }

    fn affixes(&self) -> (usize, usize) {
        let model = self.model();
        (model.prefix_len as usize, model.suffix_len as usize)
    }

    /// The crate's BPE gives a byte token its byte.
    fn special_ids(&self) -> (&[u32; 256], u32, u32) {
        (
            &self.model().byte_ids,
            token_spans::BYTE_LEN,
            self.model().unk_id,
        )
    }

    fn unknown_is_text(&self) -> bool {
        false
    }

    /// Unless the model drops unknown characters (no unknown token).
    fn asks_crate_for_spans(&self) -> bool {
        self.model().unk_id != kernels::NONE
    }

    fn encode_with_spans(
        &self,
        plan_id: u64,
        text: &str,
        spans: &SpanSource<'_>,
    ) -> Option<Encoded> {
        encode(self, plan_id, text, Some(spans))
    }
    /// Split as the pre-tokenizer does, then cut where the plan proved it safe.
    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str)) {
        let cuts = self.cuts_view();
        self.words.each(normalized, first, |pre_token| {
            words(pre_token, &cuts).for_each(&mut *word)
        });
    }

    fn each_word_aligned(
        &self,
        normalized: &str,
        align: &[(u32, u32)],
        first: bool,
        word: &mut AlignedWord<'_>,
    ) {
        let cuts = self.cuts_view();
        self.words
            .each_aligned(normalized, align, first, |pre_token, pre_align| {
                for w in words(pre_token, &cuts) {
                    let at = w.as_ptr() as usize - pre_token.as_ptr() as usize;
                    word(w, &pre_align[at..at + w.len()]);
                }
            });
    }
}

/// The words of a normalized piece: cut wherever `cuts` allows (the whole
/// piece when they are disabled; `gt_spm_next_cut`).
pub fn words<'t>(text: &'t str, cuts: &'t GtSpmCuts) -> impl Iterator<Item = &'t str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (word, tail) = rest.split_at(kernels::spm_next_cut(cuts, rest, 1));
        rest = tail;
        Some(word)
    })
}
