//! One sequence of a Unigram tokenizer on the CPU: split out plain added
//! tokens (the crate's split), normalize each piece (`plan/normalize.rs`),
//! cut it into words as the pre-tokenizer does, and run each word
//! through the per-thread cache and the shared Viterbi kernel
//! (`gt_unigram_word`).

use super::encode::Encoded;
use super::word_cache::{self, WordScratch};
use super::Part;
use crate::kernels;
use crate::plan::unigram::UnigramPlan;
use crate::plan::PlainAdded;

/// `text` on the fast path, or None when offsets are asked for (the
/// normalizer may change the text: they stay on the exact path) or when only
/// the exact path can encode it (a normalizer error, a character without a
/// token and no unknown token: the crate reports those).
pub fn encode(plan: &UnigramPlan, plan_id: u64, text: &str, offsets: bool) -> Option<Encoded> {
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
                    kernels::unigram_word(plan.model(), w, &mut s.unigram, o)
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
/// pre-tokenizer does). False when only the exact path can: an added token
/// that strips spaces or matches single words is in the text, or the
/// normalizer failed (the exact path reports it).
pub fn each_part(plan: &UnigramPlan, text: &str, mut part: impl FnMut(Part<'_>)) -> bool {
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
        plan.words(&normalized, start == 0, |word| part(Part::Word(word)));
    }
    true
}
