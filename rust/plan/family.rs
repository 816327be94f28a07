//! A model family behind one trait. [`Family`] is what the layers above ask
//! of a family's plan (build it, give it other added tokens, report it, say
//! whether a device runs it), implemented once in the family's own module
//! (`bytelevel.rs`, `spm.rs`, `wordpiece.rs`, `unigram.rs`); [`FastPlan`]
//! holds one of them and [`each_family!`] is the one dispatch over its
//! variants. [`PerWord`] is what the per-word families (SentencePiece-style
//! BPE, Unigram) share: the added tokens' split and a normalizer per piece,
//! written once here. Adding a family: its module(s), a variant of
//! `FastPlan`, an arm of `each_family!` and of `FastPlan::build`.
//!
//! [`FastPlan`]: super::FastPlan

use super::normalize::{Aligns, PieceNormalizer};
use super::{NormalizedAdded, PlainAdded};
use serde_json::Value;
use std::borrow::Cow;

/// A model family's plan: what the engine and the report ask of it.
pub trait Family: Sized {
    /// The plan for tokenizer.json `spec`, or why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String>;
    /// This plan with other added tokens (tokenizer.json's `added_tokens`, as
    /// the crate serializes them), for the same model, normalizer and
    /// pre-tokenizer: the tables shared, only the added tokens' split built
    /// (`Tokenizer.add_tokens`). Ids still to resolve, as after `build`.
    fn with_added_tokens(&self, added_tokens: &Value) -> Result<Self, String>;
    /// Gives the plan's plain added tokens the crate's ids (`id_of`).
    fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String>;
    /// How it normalizes, pre-tokenizes and runs the model, for the plan report.
    fn report(&self) -> [String; 3];
    /// True when a device runs this plan's model (else the host encodes the
    /// device's rows and uploads their ids).
    fn runs_on_device(&self) -> bool;
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
