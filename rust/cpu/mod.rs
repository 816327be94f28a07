//! CPU backend: one sequence at a time on the engine's threads, calling the
//! host build of the shared kernel logic (`crate::kernels`): byte-level BPE
//! per word behind a per-thread word cache (`encode`), SentencePiece-style
//! BPE per word behind the same cache (`spm`), Unigram per word behind it
//! too (`unigram`), WordPiece per text (`wordpiece`).

pub mod encode;
pub mod spm;
pub mod token_spans;
pub mod unigram;
pub mod word_cache;
pub mod wordpiece;

use crate::plan::PlainAdded;
use std::borrow::Cow;

/// A piece of a text as a per-word model sees it.
pub enum Part<'w> {
    /// An added token's id.
    Added(u32),
    /// A word to encode.
    Word(&'w str),
}

/// What the per-word plans (SentencePiece BPE, Unigram) share: plain added
/// tokens, a normalizer per piece, and the words of a normalized piece.
pub trait WordPlan {
    fn plain_added(&self) -> Option<&PlainAdded>;
    /// A piece after the normalizer; None when it fails (the exact path reports it).
    fn normalize_piece<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>>;
    /// The words of a normalized piece that starts the original text (`first`) or not.
    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str));
}

/// `text` as a per-word model sees it, in order: plain added tokens (the
/// crate's split) and the words of each piece between them. False when only
/// the exact path can: an added token that strips spaces or matches single
/// words is in the text, or the normalizer failed (the exact path reports it).
pub fn each_part(plan: &impl WordPlan, text: &str, mut part: impl FnMut(Part<'_>)) -> bool {
    if PlainAdded::irregular_in(plan.plain_added(), text) {
        return false;
    }
    for (piece, (start, _), token) in PlainAdded::pieces(plan.plain_added(), text) {
        if let Some((id, _)) = token {
            part(Part::Added(id));
            continue;
        }
        let Some(normalized) = plan.normalize_piece(piece) else {
            return false;
        };
        plan.each_word(&normalized, start == 0, &mut |word| part(Part::Word(word)));
    }
    true
}
