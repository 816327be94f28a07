//! A model family behind one trait. [`Family`] is what the layers above ask
//! of a family's plan (build it, give it other added tokens, report it, say
//! whether a device runs it), implemented once in the family's own module
//! (`bytelevel.rs`, `spm.rs`, `wordpiece.rs`, `unigram.rs`); [`FastPlan`]
//! holds one of them and [`each_family!`] is the one dispatch over its
//! variants. [`PerWordPlan`] is the plan of the families that split added
//! tokens off and normalize each piece on the host (SentencePiece-style BPE,
//! WordPiece, Unigram): its tables shared, its added tokens' split
//! ([`AddedTokens`]) and normalizer per piece ([`PerWord`]) written once
//! here. Adding a family: its module(s), a variant of `FastPlan`, an arm of
//! `each_family!` and of `FastPlan::build`; then its CPU encoder and the
//! engine's and the device's traits (docs/ARCHITECTURE.md, "A model family").
//!
//! [`FastPlan`]: super::FastPlan

use super::normalize::{Aligns, PieceNormalizer};
use super::{NormalizedAdded, PlainAdded};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// A model family's plan: what the engine and the report ask of it.
pub trait Family: AddedTokens {
    /// The plan for tokenizer.json `spec`, or why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String>;
    /// How it normalizes, pre-tokenizes and runs the model, for the plan report.
    fn report(&self) -> [String; 3];
    /// True when a device runs this plan's model (else the host encodes the
    /// device's rows and uploads their ids).
    fn runs_on_device(&self) -> bool;
}

/// A family's plan with other added tokens.
pub trait AddedTokens: Sized {
    /// This plan with other added tokens (tokenizer.json's `added_tokens`, as
    /// the crate serializes them), for the same model, normalizer and
    /// pre-tokenizer: the tables shared, only the added tokens' split built
    /// (`Tokenizer.add_tokens`). Ids still to resolve, as after `build`.
    fn with_added_tokens(&self, added_tokens: &Value) -> Result<Self, String>;
    /// Gives the plan's plain added tokens the crate's ids (`id_of`).
    fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String>;
}

/// What a per-word family builds from the model, normalizer and
/// pre-tokenizer: the same for every set of added tokens.
pub trait WordTables {
    /// The normalizer as the host runs it, piece by piece.
    fn normalizer(&self) -> &PieceNormalizer;
}

/// The plan of a per-word family: its tables (shared by the tokenizers that
/// differ only in their added tokens; read through `Deref`) and the split of
/// its added tokens.
pub struct PerWordPlan<T> {
    pub(super) shared: Arc<T>,
    /// When every added token is plain: the crate's split, without its alignments.
    pub plain_added: Option<PlainAdded>,
    /// The added tokens matched after the normalizer: a piece holding one
    /// goes to the exact path (`normalize` gives None).
    pub(super) normalized_added: Option<NormalizedAdded>,
}

impl<T: WordTables> AddedTokens for PerWordPlan<T> {
    /// The tables shared, the split built.
    fn with_added_tokens(&self, added_tokens: &Value) -> Result<Self, String> {
        Ok(PerWordPlan {
            shared: Arc::clone(&self.shared),
            plain_added: PlainAdded::for_word_plan(added_tokens)?,
            normalized_added: NormalizedAdded::from_spec(added_tokens, self.shared.normalizer())?,
        })
    }

    /// An error when a plain added token has no id (see
    /// [`PlainAdded::resolve`]): the plan then cannot split text at it.
    fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        PlainAdded::resolve_all(&mut self.plain_added, id_of)
    }
}

impl<T: WordTables> PerWord for PerWordPlan<T> {
    fn plain_added(&self) -> Option<&PlainAdded> {
        self.plain_added.as_ref()
    }

    fn normalized_added(&self) -> Option<&NormalizedAdded> {
        self.normalized_added.as_ref()
    }

    fn normalizer(&self) -> &PieceNormalizer {
        self.shared.normalizer()
    }
}

impl<T> std::ops::Deref for PerWordPlan<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.shared
    }
}

/// What the per-word families share around their model: plain added tokens,
/// added tokens matched after the normalizer, and a normalizer per piece.
pub trait PerWord {
    fn plain_added(&self) -> Option<&PlainAdded>;
    fn normalized_added(&self) -> Option<&NormalizedAdded>;
    fn normalizer(&self) -> &PieceNormalizer;

    /// A piece of text (between added tokens) after the normalizer; None
    /// when the normalizer fails (the exact path reports it) or writes text
    /// holding a normalized added token (the crate splits it there).
    fn normalize<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        let normalized = self.normalizer().normalize(piece)?;
        let held = NormalizedAdded::held_in(self.normalized_added(), &normalized);
        (!held).then_some(normalized)
    }

    /// A piece normalized with its alignments, when the normalizer can give
    /// them (`PieceNormalizer::normalize_aligned`) and the text holds no
    /// normalized added token.
    fn normalize_aligned(&self, piece: &str) -> Option<(String, Aligns)> {
        let (normalized, align) = self.normalizer().normalize_aligned(piece)?;
        let held = NormalizedAdded::held_in(self.normalized_added(), &normalized);
        (!held).then_some((normalized, align))
    }
}
