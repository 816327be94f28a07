//! One sequence of a WordPiece tokenizer on the CPU: split out plain added
//! tokens (the crate's split), then normalize, pre-tokenize and WordPiece each
//! piece with the shared kernel logic: without offsets word by word behind
//! the per-thread word cache (`gt_wp_words`, `gt_wordpiece_word`), with
//! offsets in one call that also maps spans (`gt_wordpiece_text`). When the
//! plan's host normalizes (`WordPiecePlan::kernel_text`), the kernel reads
//! each piece's normalized text and its spans go through the alignments.

use super::encode::{char_offsets, push_added};
use super::word_cache;
use super::{Encoded, FastEncode};
use crate::kernels::{self, WordPieceScratch};
use crate::plan::wordpiece::WordPiecePlan;
use crate::plan::{Piece, PlainAdded};
use std::cell::RefCell;
use tokenizers::AddedVocabulary;

thread_local! {
    static SCRATCH: RefCell<WordPieceScratch> = RefCell::new(WordPieceScratch::default());
}

/// `text` on the fast path, or None if only the exact path can encode it (a
/// character whose accents the crate's NFD could reorder).
impl FastEncode for WordPiecePlan {
    fn encode_fast(
        &self,
        plan_id: u64,
        _added: &AddedVocabulary,
        text: &str,
        offsets: bool,
    ) -> Option<Encoded> {
        let plan = self;
        // None: an added token that strips spaces or matches single words.
        let pieces = PlainAdded::pieces(plan.plain_added.as_ref(), text)?;
        if plan.chain_words().is_some() {
            return encode_chain(plan, plan_id, text, &pieces, offsets);
        }
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
                        let (text, align) = plan.kernel_text_aligned(piece)?;
                        let first = spans.as_ref().map_or(0, Vec::len);
                        let base = if align.is_some() { 0 } else { start };
                        if !kernels::wordpiece_text(
                            plan.model(),
                            plan.growth(),
                            text.as_bytes(),
                            scratch,
                            &mut ids,
                            spans.as_mut(),
                            base,
                        ) {
                            return None;
                        }
                        if let (Some(spans), Some(align)) = (spans.as_mut(), align) {
                            for span in &mut spans[first..] {
                                *span = original_span(*span, &align, start);
                            }
                        }
                    }
                }
            }
            Some(Encoded {
                ids,
                offsets: spans.map(|spans| char_offsets(text, spans)),
                added,
            })
        })
    }
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
                let Some(text) = plan.kernel_text(piece) else {
                    return false;
                };
                let mut word = |w: &[u8]| {
                    cache.encode_word(w, &mut ids, |w, _, out| {
                        kernels::wordpiece_word(model, w, out);
                        true
                    });
                };
                if !kernels::wordpiece_words(
                    model,
                    plan.growth(),
                    text.as_bytes(),
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

/// A text whose pre-tokenizer is a chain of Split steps: each piece
/// normalized on the host, cut into words by the chain (`Words`), each word
/// whole through the kernel (its table splits nothing): ids behind the word
/// cache, or with offsets each word's spans through its alignments.
fn encode_chain(
    plan: &WordPiecePlan,
    plan_id: u64,
    text: &str,
    pieces: &[Piece<'_>],
    offsets: bool,
) -> Option<Encoded> {
    let words = plan.chain_words()?;
    let model = plan.model();
    let mut ids = Vec::with_capacity(text.len() / 4 + 1);
    let mut spans = offsets.then(Vec::new);
    let mut added = Vec::new();
    let fine = SCRATCH.with(|cell| {
        let scratch = &mut *cell.borrow_mut();
        word_cache::with_cache(plan_id, |cache| {
            for &(piece, (start, end), token) in pieces {
                if let Some((id, value)) = token {
                    push_added(
                        &mut ids,
                        spans.as_mut(),
                        &mut added,
                        id,
                        (start, end),
                        value,
                    );
                    continue;
                }
                let Some(spans) = spans.as_mut() else {
                    let Some(normalized) = plan.kernel_text(piece) else {
                        return false;
                    };
                    words.each(&normalized, start == 0, |w| {
                        // An empty piece (no pre-tokenizer) has no tokens.
                        if w.is_empty() {
                            return;
                        }
                        cache.encode_word(w.as_bytes(), &mut ids, |w, _, out| {
                            kernels::wordpiece_word(model, w, out);
                            true
                        });
                    });
                    continue;
                };
                let Some((normalized, Some(align))) = plan.kernel_text_aligned(piece) else {
                    return false;
                };
                let mut fine = true;
                words.each_aligned(&normalized, &align, start == 0, |w, w_align| {
                    if w.is_empty() {
                        return;
                    }
                    let first = spans.len();
                    fine &= kernels::wordpiece_text(
                        model,
                        plan.growth(),
                        w.as_bytes(),
                        scratch,
                        &mut ids,
                        Some(spans),
                        0,
                    );
                    for span in &mut spans[first..] {
                        *span = original_span(*span, w_align, start);
                    }
                });
                if !fine {
                    return false;
                }
            }
            true
        })
    });
    fine.then(|| Encoded {
        ids,
        offsets: spans.map(|spans| char_offsets(text, spans)),
        added,
    })
}

/// A token's span in a piece's normalized text as a span of the original
/// text (the piece starting at `start`): from the source of its first byte
/// to the end of its last byte's, as the crate converts offsets.
fn original_span((from, to): (usize, usize), align: &[(u32, u32)], start: usize) -> (usize, usize) {
    let Some(&(first, _)) = align.get(from) else {
        // Past the normalized text (an empty piece has no tokens): the piece's end.
        let end = align.last().map_or(0, |a| a.1 as usize);
        return (start + end, start + end);
    };
    let last = align[to.max(from + 1) - 1].1;
    (start + first as usize, start + last as usize)
}
