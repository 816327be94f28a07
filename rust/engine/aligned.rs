//! Offsets for the per-word families (SentencePiece-style BPE, Unigram),
//! whose normalizers change the text. First the CPU fast path with the
//! crate's alignments (`encode_word_offsets` -> `cpu::encode_with_offsets`);
//! where it cannot follow the normalizer (a step the crate runs) or a BPE
//! drops unknown characters, `encode_aligned`: the crate's own added-token
//! split, normalizer and pre-tokenizer (which record where each normalized
//! byte came from), the fast model on each pre-token (the word cache and the
//! shared kernels), and the crate's conversion of the tokens' spans into
//! offsets of the original text (`into_encoding`). Only the model step is
//! ours, the one the parity suites hold to the crate's ids; so the offsets
//! are the crate's by construction.
//!
//! A token's span in its pre-token comes from the token lengths
//! (`cpu::token_spans`); a pre-token with a word whose spans cannot be told
//! goes to the crate's model.

use super::Engine;
use crate::cpu::encode::crate_char_offsets;
use crate::cpu::token_spans::{self, push_spans, CrateWord, SpanSource};
use crate::cpu::word_cache;
use crate::cpu::FastEncode;
use crate::cpu::WordPlan;
use crate::error::{Error, Result};
use crate::plan::each_family;
use tokenizers::{Encoding, Model, OffsetType, PreTokenizedString, Token};

/// The model of a per-word plan, one word at a time.
pub(super) type WordModel<'p> = &'p dyn WordPlan;

impl Engine {
    /// One sequence with offsets for a per-word plan (see the module comment),
    /// as `exact::encode_sequence` gives it; None for other plans.
    pub(super) fn encode_aligned(&self, text: &str, type_id: u32) -> Option<Result<Encoding>> {
        let model = self.word_model()?;
        Some(self.encode_with_model(model, text, type_id))
    }

    /// The plan's per-word model; None for the other families.
    pub(super) fn word_model(&self) -> Option<WordModel<'_>> {
        let fast = self.fast.as_ref().ok()?;
        each_family!(fast, plan => plan.word_plan())
    }

    fn encode_with_model(
        &self,
        model: WordModel<'_>,
        text: &str,
        type_id: u32,
    ) -> Result<Encoding> {
        let hf = &self.hf;
        let mut pretokenized = super::exact::pre_tokenized(hf, text)?;
        let lens = self.token_lens(model);
        pretokenized
            .tokenize(|normalized| {
                let pre_token = normalized.get();
                match self.fast_tokens(model, lens, pre_token, self.tokens_for_offsets) {
                    Some(tokens) => Ok(tokens),
                    None => hf.get_model().tokenize(pre_token),
                }
            })
            .map_err(Error::tokenizers)?;
        char_offset_encoding(pretokenized, text, None, type_id)
    }

    /// Bytes of normalized text each id of the model covers (`token_spans`).
    fn token_lens(&self, model: WordModel<'_>) -> &[u32] {
        self.token_lens.get_or_init(|| {
            let (byte_ids, byte_len, unk_id) = model.special_ids();
            token_spans::token_lens(&self.hf.get_vocab(false), byte_ids, byte_len, unk_id)
        })
    }

    /// With offsets, a per-word plan's text on the CPU fast path
    /// (`cpu::encode_with_offsets`); None when it cannot tell them.
    pub(super) fn encode_word_offsets(&self, text: &str) -> Option<crate::cpu::Encoded> {
        let crate_word = |word: &str| {
            let tokens = self.hf.get_model().tokenize(word).ok()?;
            Some(tokens.into_iter().map(|t| (t.id, t.offsets)).collect())
        };
        let model = self.word_model()?;
        let source = SpanSource {
            lens: self.token_lens(model),
            affixes: model.affixes(),
            crate_word: model
                .asks_crate_for_spans()
                .then_some(&crate_word as &CrateWord<'_>),
        };
        model.encode_with_spans(self.id, text, &source)
    }

    /// A per-word plan's tokens of one pre-token, with their spans and token
    /// strings (`maps`); None when the spans cannot be told.
    pub(super) fn per_word_tokens(
        &self,
        model: WordModel<'_>,
        pre_token: &str,
    ) -> Option<Vec<Token>> {
        let lens = self.token_lens(model);
        self.fast_tokens(model, lens, pre_token, true)
    }

    /// The tokens of a pre-token with their byte spans in it, on the fast
    /// model; None when a word's spans cannot be told (the crate's model then
    /// encodes the pre-token). `values`: with their token strings.
    fn fast_tokens(
        &self,
        model: WordModel<'_>,
        lens: &[u32],
        pre_token: &str,
        values: bool,
    ) -> Option<Vec<Token>> {
        let mut tokens = Vec::new();
        let mut ids = Vec::new();
        let mut fine = true;
        // With affixes the plan makes no cuts: each word is a whole pre-token,
        // the crate's word, whose affixes `push_spans` leaves out.
        let affixes = model.affixes();
        let unknown_is_text = model.unknown_is_text();
        let unk_id = model.special_ids().2;
        word_cache::with_cache(self.id, |cache| {
            model.each_pre_token_word(pre_token, &mut |word| {
                if !fine {
                    return;
                }
                let start = word.as_ptr() as usize - pre_token.as_ptr() as usize;
                ids.clear();
                fine = cache.encode_word(word.as_bytes(), &mut ids, |w, s, o| {
                    model.encode_word(w, s, o)
                }) && push_spans(&ids, lens, affixes, start, word.len(), &mut |id, span| {
                    let value = match values {
                        // The crate's Unigram names an unknown piece by its text.
                        true if unknown_is_text && id == unk_id => {
                            pre_token[span.0..span.1].to_string()
                        }
                        true => self.hf.id_to_token(id).unwrap_or_default(),
                        false => String::new(),
                    };
                    tokens.push(Token::new(id, value, span));
                });
            })
        });
        fine.then_some(tokens)
    }
}

/// A tokenized `pretokenized` (of `text`) as the crate's `into_encoding`
/// gives it with character offsets (`word`: every token's word id, else the
/// pre-token's index): byte offsets first, then characters as the crate
/// converts them, through an array rather than the crate's per-call hash map
/// of every byte.
pub(super) fn char_offset_encoding(
    pretokenized: PreTokenizedString,
    text: &str,
    word: Option<u32>,
    type_id: u32,
) -> Result<Encoding> {
    let mut encoding = pretokenized
        .into_encoding(word, type_id, OffsetType::Byte)
        .map_err(Error::tokenizers)?;
    let chars = crate_char_offsets(text, encoding.get_offsets());
    encoding.get_offsets_mut().copy_from_slice(&chars);
    Ok(encoding)
}
