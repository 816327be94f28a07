//! One sequence of a Unigram tokenizer on the CPU: split out plain added
//! tokens (the crate's split), normalize each piece with the crate's
//! normalizer, cut it into words as the pre-tokenizer does, and run each word
//! through the per-thread cache and the shared Viterbi kernel
//! (`gt_unigram_word`).

use super::encode::Encoded;
use super::word_cache::{self, WordScratch};
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
    let encoded = word_cache::with_cache(plan_id, |cache| {
        for (piece, (start, _), token) in PlainAdded::pieces(plan.plain_added.as_ref(), text) {
            if let Some((id, _)) = token {
                ids.push(id);
                continue;
            }
            let normalized = plan.normalize(piece)?;
            let mut all = true;
            plan.words(&normalized, start == 0, |word| {
                let kernel = |w: &[u8], s: &mut WordScratch, o: &mut Vec<u32>| {
                    kernels::unigram_word(plan.model(), w, &mut s.unigram, o)
                };
                all &= cache.encode_word(word.as_bytes(), &mut ids, kernel);
            });
            if !all {
                return None;
            }
        }
        Some(())
    });
    encoded.map(|()| Encoded {
        ids,
        offsets: None,
        added: Vec::new(),
    })
}
