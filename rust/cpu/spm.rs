//! One sequence of a SentencePiece-style BPE tokenizer on the CPU: split out
//! plain added tokens (the crate's split), normalize each piece, split it as
//! the pre-tokenizer does, cut it into words where the plan proved it safe, and BPE each word through the
//! per-thread cache and the shared kernel (`gt_spm_word`).

use super::encode::Encoded;
use super::word_cache::{self, WordScratch};
use super::Part;
use crate::kernels;
use crate::plan::spm::{Cuts, SpmPlan};
use crate::plan::PlainAdded;

/// `text` on the fast path, or None when offsets are asked for (the plan
/// leaves them to the exact path: the normalizer changes the text) or the
/// normalizer fails.
pub fn encode(plan: &SpmPlan, plan_id: u64, text: &str, offsets: bool) -> Option<Encoded> {
    if offsets {
        return None;
    }
    let mut ids = Vec::with_capacity(text.len() / 3 + 1);
    let mut all = true;
    let normalized = word_cache::with_cache(plan_id, |cache| {
        each_part(plan, text, |part| match part {
            Part::Added(id) => ids.push(id),
            Part::Word(word) => {
                let kernel = |w: &[u8], s: &mut WordScratch, o: &mut Vec<u32>| {
                    kernels::spm_word(plan.model(), w, &mut s.bpe, o)
                };
                all &= cache.encode_word(word.as_bytes(), &mut ids, kernel);
            }
        })
    });
    (normalized && all).then_some(Encoded {
        ids,
        offsets: None,
        added: Vec::new(),
    })
}

/// `text` as the model sees it, in order: plain added tokens (the crate's
/// split) and the words of each piece between them (normalized, split as the
/// pre-tokenizer does, cut where the plan proved it safe). False when only
/// the exact path can: an added token that strips spaces or matches single
/// words is in the text, or the normalizer failed (the exact path reports it).
pub fn each_part(plan: &SpmPlan, text: &str, mut part: impl FnMut(Part<'_>)) -> bool {
    if PlainAdded::irregular_in(plan.plain_added.as_ref(), text) {
        return false;
    }
    for (piece, (start, _), token) in PlainAdded::pieces(plan.plain_added.as_ref(), text) {
        if let Some((id, _)) = token {
            part(Part::Added(id));
            continue;
        }
        let Some(normalized) = plan.normalize(piece) else {
            return false;
        };
        plan.words.each(&normalized, start == 0, |pre_token| {
            words(pre_token, plan.cuts.as_ref()).for_each(|word| part(Part::Word(word)))
        });
    }
    true
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
