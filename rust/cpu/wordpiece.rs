//! One sequence of a WordPiece tokenizer on the CPU: split out plain added
//! tokens (the crate's split), then normalize, pre-tokenize and WordPiece each
//! piece in one call of the shared kernel logic (`gt_wordpiece_text`).

use super::encode::{char_offsets, push_added, Encoded};
use crate::kernels::{self, WordPieceScratch};
use crate::plan::wordpiece::WordPiecePlan;
use crate::plan::PlainAdded;
use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<WordPieceScratch> = RefCell::new(WordPieceScratch::default());
}

/// `text` on the fast path, or None if only the exact path can encode it (a
/// character whose accents the crate's NFD could reorder).
pub fn encode(plan: &WordPiecePlan, text: &str, offsets: bool) -> Option<Encoded> {
    SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        let mut ids = Vec::with_capacity(text.len() / 4 + 1);
        let mut spans = offsets.then(Vec::new);
        let mut added = Vec::new();
        for (piece, (start, end), token) in PlainAdded::pieces(plan.plain_added.as_ref(), text) {
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
