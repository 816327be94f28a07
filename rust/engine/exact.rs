//! The exact path: one sequence through the `tokenizers` crate's own stages.
//!
//! This is `TokenizerImpl::encode_single_sequence` rebuilt from the crate's public
//! pieces, so that truncation and padding can be per-call settings (the crate
//! only reads them from the tokenizer, which we never mutate). Every stage here
//! is the crate's code; nothing is re-implemented.

use crate::error::{Error, Result};
use tokenizers::{Encoding, Model, OffsetType, PreTokenizedString, PreTokenizer, Tokenizer};

/// Splits added tokens, normalizes, pre-tokenizes and runs the model on `text`,
/// giving an encoding with every token's type id set to `type_id` and, with
/// `offsets`, character offsets (Python string indices; without, the crate
/// skips converting every token's offsets, a map over the text's characters
/// per call that `tokenizers`' own `encode_batch` builds). No special
/// tokens, truncation or padding.
pub fn encode_sequence(
    hf: &Tokenizer,
    text: &str,
    type_id: u32,
    offsets: bool,
) -> Result<Encoding> {
    let mut pretokenized = pre_tokenized(hf, text)?;
    hf.get_model()
        .tokenize_in_pretokenized(&mut pretokenized, None)
        .map_err(Error::tokenizers)?;
    let offset_type = match offsets {
        true => OffsetType::Char,
        false => OffsetType::None,
    };
    let mut encoding = pretokenized
        .into_encoding(None, type_id, offset_type)
        .map_err(Error::tokenizers)?;
    if !offsets {
        // OffsetType::None leaves the type ids at 0.
        let n = encoding.len();
        encoding.set_type_ids(vec![type_id; n]);
    }
    Ok(encoding)
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
