//! The exact path: one sequence through the `tokenizers` crate's own stages.
//!
//! This is `TokenizerImpl::encode_single_sequence` rebuilt from the crate's public
//! pieces, so that truncation and padding can be per-call settings (the crate
//! only reads them from the tokenizer, which we never mutate). Every stage here
//! is the crate's code; nothing is re-implemented.

use crate::error::{Error, Result};
use tokenizers::{Encoding, Model, OffsetType, PreTokenizedString, PreTokenizer, Tokenizer};

/// Splits added tokens, normalizes, pre-tokenizes and runs the model on `text`,
/// giving an encoding with character offsets (Python string indices) and every
/// token's type id set to `type_id`. No special tokens, truncation or padding.
pub fn encode_sequence(hf: &Tokenizer, text: &str, type_id: u32) -> Result<Encoding> {
    let mut pretokenized = pre_tokenized(hf, text)?;
    hf.get_model()
        .tokenize_in_pretokenized(&mut pretokenized, None)
        .map_err(Error::tokenizers)?;
    pretokenized
        .into_encoding(None, type_id, OffsetType::Char)
        .map_err(Error::tokenizers)
}

/// `text` split at its added tokens, normalized and pre-tokenized by the
/// crate, ready for a model.
pub fn pre_tokenized(hf: &Tokenizer, text: &str) -> Result<PreTokenizedString> {
    let mut pretokenized = hf
        .get_added_vocabulary()
        .extract_and_normalize(hf.get_normalizer(), text);
    if let Some(pre_tokenizer) = hf.get_pre_tokenizer() {
        pre_tokenizer
            .pre_tokenize(&mut pretokenized)
            .map_err(Error::tokenizers)?;
    }
    Ok(pretokenized)
}
