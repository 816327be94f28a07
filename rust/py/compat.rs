//! What transformers' tokenizer exposes that `CoreTokenizer` has no method
//! for: added tokens with all their flags (`added_tokens_decoder`) and the
//! model's own files (`save_vocabulary`).

use super::errors::detach_work;
use super::tokenizer::CoreTokenizer;
use crate::error::Error;
use pyo3::prelude::*;
use tokenizers::Model;

/// Added tokens as (id, content, single_word, lstrip, rstrip, normalized,
/// special), sorted by id.
#[pyfunction]
pub fn added_token_flags(
    tokenizer: PyRef<'_, CoreTokenizer>,
) -> Vec<(u32, String, bool, bool, bool, bool, bool)> {
    let mut out: Vec<_> = tokenizer
        .engine()
        .hf()
        .get_added_tokens_decoder()
        .into_iter()
        .map(|(id, t)| {
            (
                id,
                t.content,
                t.single_word,
                t.lstrip,
                t.rstrip,
                t.normalized,
                t.special,
            )
        })
        .collect();
    out.sort_by_key(|t| t.0);
    out
}

/// Writes the model's files into `folder` (the crate's `Model::save`:
/// vocab.json and merges.txt for BPE, vocab.txt for WordPiece...), names
/// prefixed with `prefix`; returns their paths.
#[pyfunction]
#[pyo3(signature = (tokenizer, folder, prefix=None))]
pub fn save_model(
    py: Python<'_>,
    tokenizer: PyRef<'_, CoreTokenizer>,
    folder: &str,
    prefix: Option<&str>,
) -> PyResult<Vec<String>> {
    let engine = tokenizer.engine();
    detach_work(py, || {
        let paths = engine
            .hf()
            .get_model()
            .save(std::path::Path::new(folder), prefix)
            .map_err(|err| {
                Error::InvalidArgument(format!("cannot save the vocabulary in {folder}: {err}"))
            })?;
        Ok(paths
            .into_iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect())
    })
}
