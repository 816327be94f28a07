//! CPU backend: one sequence at a time on the engine's threads, calling the
//! host build of the shared kernel logic (`crate::kernels`): byte-level BPE
//! per word behind a per-thread word cache (`encode`), SentencePiece-style
//! BPE per word behind the same cache (`spm`), Unigram per word behind it
//! too (`unigram`), WordPiece per text (`wordpiece`).

pub mod encode;
pub mod spm;
pub mod unigram;
pub mod word_cache;
pub mod wordpiece;

/// A piece of a text as a per-word model sees it.
pub enum Part<'w> {
    /// An added token's id.
    Added(u32),
    /// A word to encode.
    Word(&'w str),
}
