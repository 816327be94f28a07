//! One sequence of a WordPiece tokenizer on the CPU: split out plain added
//! tokens (the crate's split), then normalize, pre-tokenize and WordPiece each
//! piece with the shared kernel logic: without offsets word by word behind
//! the per-thread word cache (`gt_wp_words`, `gt_wordpiece_word`), with
//! offsets in one call that also maps spans (`gt_wordpiece_text`).

use super::encode::{char_offsets, push_added};
use super::word_cache;
use super::Encoded;
use crate::kernels::{self, WordPieceScratch};
use crate::plan::wordpiece::WordPiecePlan;
use crate::plan::{Piece, PlainAdded};
use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<WordPieceScratch> = RefCell::new(WordPieceScratch::default());
}

/// `text` on the fast path, or None if only the exact path can encode it (a
/// character whose accents the crate's NFD could reorder).
pub fn encode(plan: &WordPiecePlan, plan_id: u64, text: &str, offsets: bool) -> Option<Encoded> {
    // None: an added token that strips spaces or matches single words.
    let pieces = PlainAdded::pieces(plan.plain_added.as_ref(), text)?;
    if !offsets {
        return encode_ids(plan, plan_id, &pieces);
    }
    SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        let mut ids = Vec::with_capacity(text.len() / 4 + 1);
        let mut spans = offsets.then(Vec::new);
        let mut added = Vec::new();
        for (piece, (start, end), token) in pieces {
            match token {
                Some((id, value)) => push_added(
                    &mut ids,
                    spans.as_mut(),
                    &mut added,
                    id,
                    (start, end),
                    value,
                ),
                None => {
                    let model = plan.model();
                    let bytes = piece.as_bytes();
                    let growth = plan.growth();
                    if !kernels::wordpiece_text(
                        model,
                        growth,
                        bytes,
                        scratch,
                        &mut ids,
                        spans.as_mut(),
                        start,
                    ) {
                        return None;
                    }
                }
            }
        }
        Some(Encoded {
            ids,
            offsets: spans.map(|spans| char_offsets(text, &spans)),
            added,
        })
    })
}

/// The ids of a text split at its added tokens, each word's from the word
/// cache or the kernel.
fn encode_ids(plan: &WordPiecePlan, plan_id: u64, pieces: &[Piece<'_>]) -> Option<Encoded> {
    let model = plan.model();
    let bytes: usize = pieces.iter().map(|(piece, _, _)| piece.len()).sum();
    let mut ids = Vec::with_capacity(bytes / 4 + 1);
    let fast = SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        word_cache::with_cache(plan_id, |cache| {
            for &(piece, _, token) in pieces {
                if let Some((id, _)) = token {
                    ids.push(id);
                    continue;
                }
                let mut word = |w: &[u8]| {
                    cache.encode_word(w, &mut ids, |w, _, out| {
                        kernels::wordpiece_word(model, w, out);
                        true
                    });
                };
                if !kernels::wordpiece_words(
                    model,
                    plan.growth(),
                    piece.as_bytes(),
                    scratch,
                    &mut word,
                ) {
                    return false;
                }
            }
            true
        })
    });
    fast.then_some(Encoded {
        ids,
        offsets: None,
        added: Vec::new(),
    })
}
