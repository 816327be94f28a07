//! One sequence of a SentencePiece-style BPE tokenizer on the CPU: split out
//! plain added tokens (the crate's split), normalize each piece, split it as
//! the pre-tokenizer does, cut it into words where the plan proved it safe,
//! and BPE each word through the per-thread cache and the shared kernel
//! (`gt_spm_word`).

use super::encode::{char_offsets, push_added, Encoded};
use super::token_spans::push_spans;
use super::word_cache::{self, WordScratch};
use super::{each_part, Part, WordPlan};
use crate::kernels;
use crate::plan::spm::{Cuts, SpmPlan};
use crate::plan::PlainAdded;
use std::borrow::Cow;

/// `text` on the fast path, or None when the normalizer fails. With
/// offsets (`token_lens`: bytes each id covers, see `token_spans`), None too
/// when the plan cannot align its normalizer (`SpmPlan::normalize_aligned`)
/// or a word's token spans cannot be told.
pub fn encode(
    plan: &SpmPlan,
    plan_id: u64,
    text: &str,
    token_lens: Option<&[u32]>,
) -> Option<Encoded> {
    if let Some(lens) = token_lens {
        return encode_with_offsets(plan, plan_id, text, lens);
    }
    let each = |part: &mut dyn FnMut(Part<'_>)| each_part(plan, text, part);
    word_cache::encode_parts(plan_id, text.len() / 3 + 1, each, kernel(plan))
}

fn kernel(plan: &SpmPlan) -> impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool + '_ {
    |w, s, o| kernels::spm_word(plan.model(), w, &mut s.bpe, o)
}

/// `text` with each token's span: added tokens as the crate splits them, each
/// piece between them normalized with its alignments, its words' token spans
/// mapped back through them, then to characters as the crate converts them.
fn encode_with_offsets(plan: &SpmPlan, plan_id: u64, text: &str, lens: &[u32]) -> Option<Encoded> {
    if PlainAdded::irregular_in(plan.plain_added(), text) {
        return None;
    }
    let (mut ids, mut spans, mut added) = (Vec::new(), Vec::new(), Vec::new());
    let encode = kernel(plan);
    let fine = word_cache::with_cache(plan_id, |cache| {
        for (piece, (start, end), token) in PlainAdded::pieces(plan.plain_added(), text) {
            if let Some((id, value)) = token {
                push_added(
                    &mut ids,
                    Some(&mut spans),
                    &mut added,
                    id,
                    (start, end),
                    value,
                );
                continue;
            }
            let Some((normalized, align)) = plan.normalize_aligned(piece) else {
                return false;
            };
            for word in words(&normalized, plan.cuts.as_ref()) {
                let at = word.as_ptr() as usize - normalized.as_ptr() as usize;
                let first = ids.len();
                if !cache.encode_word(word.as_bytes(), &mut ids, &encode) {
                    return false;
                }
                let told = push_spans(&ids[first..], lens, at, word.len(), &mut |_, (a, b)| {
                    spans.push((start + align[a].0 as usize, start + align[b - 1].1 as usize))
                });
                if !told {
                    return false;
                }
            }
        }
        true
    });
    fine.then(|| Encoded {
        offsets: Some(char_offsets(text, &spans)),
        ids,
        added,
    })
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
pub fn words<'t>(text: &'t str, cuts: Option<&'t Cuts>) -> impl Iterator<Item = &'t str> {
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
