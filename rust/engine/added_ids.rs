//! Loading a tokenizer.json gpu_tok wrote itself (pickling, a rebuilt
//! post-processor, a reload after `add_tokens`) with its added tokens' ids.
//!
//! The crate's loader adds every added token in one call, numbering the ones
//! the model lacks from the model's size on. After `add_tokens` on a
//! vocabulary with an id gap (special tokens in the model past a hole, as in
//! cl100k and o200k), a new token took the largest id + 1 (as in `tokenizers`
//! and transformers), and a reload would move it into the gap: a different
//! id, possibly another token's. Replaying the additions in runs, each
//! starting where the crate's next id is, gives every token its id back.

use crate::error::{Error, Result};
use serde_json::Value;
use tokenizers::{AddedToken, Model, Tokenizer};

/// `hf` (loaded from `json` by the crate) with the added tokens at the ids
/// `json` gives them, when the crate's loader moved some and replaying
/// `add_tokens` can put them back; else `hf` as loaded.
pub fn keep_json_ids(json: &str, hf: Tokenizer) -> Result<Tokenizer> {
    let mut spec: Value = serde_json::from_str(json).map_err(Error::tokenizers)?;
    let entries = match spec.get("added_tokens").and_then(Value::as_array) {
        Some(entries) => entries.clone(),
        None => return Ok(hf),
    };
    let mut tokens: Vec<(u32, AddedToken)> = Vec::with_capacity(entries.len());
    for entry in entries {
        let id = entry.get("id").and_then(Value::as_u64);
        let Some(id) = id.and_then(|id| u32::try_from(id).ok()) else {
            return Ok(hf);
        };
        tokens.push((
            id,
            serde_json::from_value(entry).map_err(Error::tokenizers)?,
        ));
    }
    if tokens
        .iter()
        .all(|(id, t)| hf.token_to_id(&t.content) == Some(*id))
    {
        return Ok(hf);
    }
    spec["added_tokens"] = Value::Array(Vec::new());
    let mut base: Tokenizer = serde_json::to_string(&spec)
        .map_err(Error::tokenizers)?
        .parse()
        .map_err(Error::tokenizers)?;
    tokens.sort_by_key(|(id, _)| *id);
    let Some(runs) = runs(&base, &tokens) else {
        return Ok(hf);
    };
    for run in runs {
        base.add_tokens(run).map_err(Error::tokenizers)?;
    }
    let kept = tokens
        .iter()
        .all(|(id, t)| base.token_to_id(&t.content) == Some(*id));
    Ok(if kept { base } else { hf })
}

/// `tokens` (sorted by id) cut into calls of `add_tokens` that give each its
/// id, or None when no such cut exists. One call numbers the tokens the
/// model lacks from `next_id` on; a token the model has keeps its model id.
fn runs(base: &Tokenizer, tokens: &[(u32, AddedToken)]) -> Option<Vec<Vec<AddedToken>>> {
    let model = base.get_model();
    let size = model.get_vocab_size() as u32;
    // The crate's first id for a call, from the largest id added so far.
    let next_id = |largest: Option<u32>| match largest {
        Some(max) if max >= size || size == 0 => max.saturating_add(1),
        _ => size,
    };
    let (mut runs, mut run) = (Vec::new(), Vec::new());
    let mut largest: Option<u32> = None;
    let mut next = next_id(None);
    for (id, token) in tokens {
        match model.token_to_id(&token.content) {
            Some(model_id) if model_id != *id => return None,
            Some(_) => {}
            None => {
                if *id != next {
                    if !run.is_empty() {
                        runs.push(std::mem::take(&mut run));
                    }
                    next = next_id(largest);
                    if *id != next {
                        return None;
                    }
                }
                next = next.saturating_add(1);
            }
        }
        largest = largest.max(Some(*id));
        run.push(token.clone());
    }
    runs.push(run);
    Some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAPPED: &str = r#"{"version": "1.0", "added_tokens": [
        {"id": 5, "content": "<a>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 9, "content": "<b>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
        {"id": 10, "content": "new", "single_word": false, "lstrip": false, "rstrip": false, "normalized": true, "special": false}],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"x": 0, "y": 1, "[UNK]": 2, "<a>": 5, "<b>": 9}, "unk_token": "[UNK]"}}"#;

    #[test]
    fn a_token_past_the_gap_keeps_its_id() {
        let loaded: Tokenizer = GAPPED.parse().unwrap();
        // The crate's loader numbers "new" from the model's size, onto "<a>"'s id.
        assert_eq!(loaded.token_to_id("new"), Some(5));
        let kept = keep_json_ids(GAPPED, loaded).unwrap();
        assert_eq!(kept.token_to_id("new"), Some(10));
        assert_eq!(kept.token_to_id("<a>"), Some(5));
        assert_eq!(kept.id_to_token(5).as_deref(), Some("<a>"));
    }

    #[test]
    fn ids_no_replay_can_give_stay_as_loaded() {
        let json = GAPPED.replace("\"id\": 10", "\"id\": 40");
        let kept = keep_json_ids(&json, json.parse().unwrap()).unwrap();
        assert_eq!(kept.token_to_id("new"), Some(5));
    }
}
