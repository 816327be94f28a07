//! The fast plan for SentencePiece-style BPE (Llama-2, Mistral, Gemma): no
//! pre-tokenizer, a normalizer made of `Prepend` and string `Replace` steps
//! (`"▁"` before the text, spaces as `"▁"`), and a BPE model over characters
//! with `byte_fallback`, `fuse_unk` and `ignore_merges` (`GtSpmModel`,
//! cuda/gt_spm.cuh: the crate's own BPE rule, for any BPE without a
//! pre-tokenizer).
//!
//! The crate runs BPE over each whole piece of text between added tokens.
//! The plan cuts it into words where it proves no merge can cross the cut:
//! before a `"▁"` that follows another character, when no vocabulary token
//! has a `"▁"` after another character (a merged symbol is a vocabulary
//! token, so none can span such a cut). Then words repeat, and go through
//! the per-thread word cache like byte-level words.

use super::bytelevel::{merge_table, MergeTable};
use super::PlainAdded;
use crate::kernels::{BytesTable, GtSpmModel, NONE};
use serde_json::Value;

/// One normalizer step, applied to each piece of text between added tokens.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    /// `Prepend`: this text before a non-empty piece.
    Prepend(String),
    /// `Replace` with a string pattern: every occurrence, left to right.
    Replace(String, String),
}

pub struct SpmPlan {
    steps: Vec<Step>,
    /// The character words are cut before (`"▁"`), when cutting is proven safe.
    pub cut_before: Option<char>,
    model: GtSpmModel,
    /// Owned here: `model` points into them (merges, vocabulary).
    _tables: (MergeTable, BytesTable),
    /// When every added token is plain: the crate's split, without its alignments.
    pub plain_added: Option<PlainAdded>,
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for SpmPlan {}
// SAFETY: as above.
unsafe impl Sync for SpmPlan {}

impl SpmPlan {
    /// The plan, or why this tokenizer is not for it.
    pub fn build(spec: &Value) -> Result<Self, String> {
        if !spec["pre_tokenizer"].is_null() {
            return Err("a pre-tokenizer: the SentencePiece plan covers BPE without one".into());
        }
        let steps = normalizer_steps(&spec["normalizer"])?;
        let model = &spec["model"];
        check_model(model)?;
        let added = &spec["added_tokens"];
        let plain_added = PlainAdded::from_spec(added);
        if plain_added.is_none() && added.as_array().is_some_and(|a| !a.is_empty()) {
            return Err(
                "added tokens that are normalized, strip spaces or match single words".into(),
            );
        }
        let vocab = model["vocab"]
            .as_object()
            .ok_or("model.vocab is not a map")?;
        let ids: rustc_hash::FxHashMap<&str, u32> = vocab
            .iter()
            .filter_map(|(t, id)| Some((t.as_str(), u32::try_from(id.as_u64()?).ok()?)))
            .collect();
        if ids.len() != vocab.len() {
            return Err("a vocabulary id is not a u32".into());
        }
        let id_of = |token: &str| ids.get(token).copied();
        let merges = merge_table(&model["merges"], id_of)?;
        let unk_id = match model["unk_token"].as_str() {
            Some(unk) => id_of(unk)
                .ok_or("the unknown token is not in the vocabulary (the crate reports it)")?,
            None => NONE,
        };
        let mut byte_ids = [NONE; 256];
        if model["byte_fallback"].as_bool().unwrap_or(false) {
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                *slot = id_of(&format!("<0x{b:02X}>")).unwrap_or(NONE);
            }
        }
        let table = BytesTable::build(ids.iter().map(|(t, &id)| (t.as_bytes(), id)));
        let cut_before =
            Some('▁').filter(|&c| uses_spaces(&steps, c) && !ids.keys().any(|t| inside(t, c)));
        let model = GtSpmModel {
            merges: merges.view(),
            vocab: table.view(),
            byte_ids,
            unk_id,
            fuse_unk: u32::from(model["fuse_unk"].as_bool().unwrap_or(false)),
            ignore_merges: u32::from(model["ignore_merges"].as_bool().unwrap_or(false)),
            _pad: 0,
        };
        let description = match cut_before {
            Some(c) => format!(
                "{}; words cut before each {c:?} after another character (no token spans one)",
                super::describe(&spec["normalizer"])
            ),
            None => format!(
                "{}; each piece whole (a token spans words)",
                super::describe(&spec["normalizer"])
            ),
        };
        Ok(SpmPlan {
            steps,
            cut_before,
            model,
            _tables: (merges, table),
            plain_added,
            description,
        })
    }

    /// The C view of the tables.
    pub fn model(&self) -> &GtSpmModel {
        &self.model
    }

    /// A piece of text (between added tokens) after the normalizer.
    pub fn normalize(&self, piece: &str) -> String {
        normalize(&self.steps, piece)
    }

    /// How the plan normalizes and splits, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }

    /// Gives the plain added tokens the crate's ids; an error when one has none.
    pub fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        let had = self.plain_added.is_some();
        PlainAdded::resolve(&mut self.plain_added, id_of);
        match had && self.plain_added.is_none() {
            true => Err("an added token has no id in the loaded tokenizer".into()),
            false => Ok(()),
        }
    }
}

fn normalize(steps: &[Step], piece: &str) -> String {
    let mut text = piece.to_string();
    for step in steps {
        match step {
            Step::Prepend(p) if !text.is_empty() => text.insert_str(0, p),
            Step::Prepend(_) => {}
            Step::Replace(from, to) => {
                if text.contains(from.as_str()) {
                    text = text.replace(from.as_str(), to);
                }
            }
        }
    }
    text
}

/// The normalizer as Prepend / string Replace steps, or why it is not one.
fn normalizer_steps(normalizer: &Value) -> Result<Vec<Step>, String> {
    let items: Vec<&Value> = match normalizer {
        Value::Null => return Ok(Vec::new()),
        n if n["type"] == "Sequence" => n["normalizers"]
            .as_array()
            .ok_or("unreadable normalizer Sequence")?
            .iter()
            .collect(),
        n => vec![n],
    };
    items
        .into_iter()
        .map(
            |step| match (step["type"].as_str(), step["pattern"]["String"].as_str()) {
                (Some("Prepend"), _) => step["prepend"]
                    .as_str()
                    .map(|p| Step::Prepend(p.to_string()))
                    .ok_or_else(|| "unreadable Prepend".to_string()),
                (Some("Replace"), Some(from)) if !from.is_empty() => step["content"]
                    .as_str()
                    .map(|to| Step::Replace(from.to_string(), to.to_string()))
                    .ok_or_else(|| "unreadable Replace".to_string()),
                _ => Err(format!(
                    "normalizer step {}: the SentencePiece plan covers Prepend and string Replace",
                    super::describe(step)
                )),
            },
        )
        .collect()
}

/// True when the normalizer turns spaces into `c` (the word boundary worth cutting at).
fn uses_spaces(steps: &[Step], c: char) -> bool {
    steps
        .iter()
        .any(|s| matches!(s, Step::Replace(from, to) if from == " " && to.chars().eq([c])))
}

/// True when `token` has `c` after a character that is not `c`.
fn inside(token: &str, c: char) -> bool {
    token.trim_start_matches(c).contains(c)
}

fn check_model(model: &Value) -> Result<(), String> {
    if model["type"].as_str() != Some("BPE") {
        return Err("the model is not BPE".into());
    }
    if model["dropout"].as_f64().is_some_and(|d| d > 0.0) {
        return Err("BPE dropout is random: exact path".into());
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if model[key].as_str().is_some_and(|s| !s.is_empty()) {
            return Err(format!("BPE {key} is not covered yet"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizer_steps_apply_per_piece_in_order() {
        let spec = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]});
        let steps = normalizer_steps(&spec).unwrap();
        assert!(uses_spaces(&steps, '▁'));
        assert_eq!(normalize(&steps, "a b  c"), "▁a▁b▁▁c");
        assert_eq!(normalize(&steps, ""), "");
        assert!(normalizer_steps(&serde_json::json!({"type": "NFKC"})).is_err());
        assert!(inside("a▁b", '▁') && !inside("▁▁ab", '▁'));
    }
}
