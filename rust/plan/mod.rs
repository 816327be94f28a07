//! The plan: for a loaded tokenizer, which engine runs each stage and why.
//!
//! Today every stage runs on the exact path (the `tokenizers` crate). The fast
//! engine will claim the stages it can prove exact; this module is where that
//! decision is made and explained (`gpu-tok info --tokenizer`, `tok.plan`).

use serde_json::Value;
use tokenizers::{ModelWrapper, Tokenizer};

/// Which engine runs a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The `tokenizers` crate itself: always exact, never fast.
    Exact,
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Path::Exact => "exact",
        })
    }
}

/// One stage of the pipeline and the decision taken for it.
#[derive(Clone, Debug)]
pub struct Stage {
    pub stage: &'static str,
    /// The component as tokenizer.json names it, e.g. `Sequence[Split, ByteLevel]`.
    pub component: String,
    pub path: Path,
    pub reason: String,
}

/// The decisions for every stage.
#[derive(Clone, Debug)]
pub struct Plan {
    pub stages: Vec<Stage>,
}

/// `type` of a serialized component, with the types inside a `Sequence`.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "none".into(),
        Value::Object(map) => {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or("?");
            let inner = ["normalizers", "pretokenizers", "processors", "decoders"]
                .iter()
                .find_map(|k| map.get(*k).and_then(Value::as_array));
            match inner {
                Some(items) => format!(
                    "{kind}[{}]",
                    items.iter().map(describe).collect::<Vec<_>>().join(", ")
                ),
                None => kind.into(),
            }
        }
        _ => "?".into(),
    }
}

fn serialized(component: Option<impl serde::Serialize>) -> Value {
    component
        .and_then(|c| serde_json::to_value(c).ok())
        .unwrap_or(Value::Null)
}

/// The model's type, without serializing its (large) vocabulary.
fn model_type(model: &ModelWrapper) -> Value {
    let kind = match model {
        ModelWrapper::BPE(_) => "BPE",
        ModelWrapper::WordPiece(_) => "WordPiece",
        ModelWrapper::WordLevel(_) => "WordLevel",
        ModelWrapper::Unigram(_) => "Unigram",
    };
    serde_json::json!({ "type": kind })
}

impl Plan {
    /// The plan for `hf`.
    pub fn of(hf: &Tokenizer) -> Plan {
        let components = [
            ("normalize", serialized(hf.get_normalizer())),
            ("pre_tokenize", serialized(hf.get_pre_tokenizer())),
            ("model", model_type(hf.get_model())),
            ("post_process", serialized(hf.get_post_processor())),
            ("decode", serialized(hf.get_decoder())),
        ];
        let stages = components
            .iter()
            .map(|(stage, value)| Stage {
                stage,
                component: describe(value),
                path: Path::Exact,
                reason: "the fast engine does not cover this stage yet".into(),
            })
            .collect();
        Plan { stages }
    }
}

/// True when the post-processor assigns a non-zero token type id (pairs in BERT-style models).
pub fn post_processor_uses_type_ids(hf: &Tokenizer) -> bool {
    fn any_type_id(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                map.get("type").and_then(Value::as_str) == Some("BertProcessing")
                    || map
                        .get("type_id")
                        .and_then(Value::as_u64)
                        .is_some_and(|t| t > 0)
                    || map.values().any(any_type_id)
            }
            Value::Array(items) => items.iter().any(any_type_id),
            _ => false,
        }
    }
    any_type_id(&serialized(hf.get_post_processor()))
}
