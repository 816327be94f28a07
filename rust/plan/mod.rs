//! The plan: for a loaded tokenizer, what the fast engine can run and with
//! which tables.
//!
//! The fast engine claims the stages it reproduces exactly (today: byte-level
//! BPE, whose plan and tables are [`bytelevel::ByteLevelPlan`]); everything
//! else runs on the exact path, the `tokenizers` crate itself. The decision
//! for each stage and its reason ([`PlanReport`]) are shown by
//! `gpu-tok info --tokenizer` and `tok.plan`. [`unicode`] holds the test that
//! keeps the scanners' Unicode table in step with Oniguruma.

pub mod bytelevel;
pub mod unicode;

use serde_json::Value;
use tokenizers::{ModelWrapper, Tokenizer};

/// Which engine runs a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// The `tokenizers` crate itself: always exact, never fast.
    Exact,
    /// gpu_tok's fast engine (shared kernels in `cuda/*.cuh`).
    Fast,
}

impl std::fmt::Display for Path {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Path::Exact => "exact",
            Path::Fast => "fast",
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

/// The decision for every stage, as reported to users.
#[derive(Clone, Debug)]
pub struct PlanReport {
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

impl PlanReport {
    /// The report for `hf`; `fast` is the byte-level plan's outcome: how it
    /// pre-tokenizes, or why there is no fast plan.
    pub fn of(hf: &Tokenizer, fast: Result<String, &str>) -> PlanReport {
        let components = [
            ("normalize", serialized(hf.get_normalizer())),
            ("pre_tokenize", serialized(hf.get_pre_tokenizer())),
            ("model", model_type(hf.get_model())),
            ("post_process", serialized(hf.get_post_processor())),
            ("decode", serialized(hf.get_decoder())),
        ];
        let stages = components
            .iter()
            .map(|(stage, value)| {
                let (path, reason) = match (*stage, &fast) {
                    ("normalize", Ok(_)) => (Path::Fast, "quick check, then the crate's own normalization tables only where the text changes".into()),
                    ("pre_tokenize", Ok(how)) => (Path::Fast, how.clone()),
                    ("model", Ok(_)) => (Path::Fast, "byte-level BPE kernel (cuda/gt_bpe.cuh) with a per-thread word cache; offsets too, unless the normalizer changes the text".into()),
                    ("normalize" | "pre_tokenize" | "model", Err(why)) => (Path::Exact, why.to_string()),
                    ("post_process", _) => (Path::Exact, "the crate's post-processor runs on the ids (templates, truncation, padding)".into()),
                    _ => (Path::Exact, "decoding always runs in the crate".into()),
                };
                Stage { stage, component: describe(value), path, reason }
            })
            .collect();
        PlanReport { stages }
    }
}

/// What the crate's loader accepts but its encoder would panic on, for the
/// `single` (`pair` = false) or `pair` template of a `TemplateProcessing`
/// (alone or in a `Sequence`): a special token its `special_tokens` does not
/// define (a problem only when special tokens are added: the bool is false),
/// or a single template that uses the second sequence (always: true). None
/// when the template is fine. Asked once at load; reported when it is used.
pub fn template_problem(hf: &Tokenizer, pair: bool) -> Option<(String, bool)> {
    fn check(value: &Value, template: &str) -> Option<(String, bool)> {
        match value {
            Value::Object(map)
                if map.get("type").and_then(Value::as_str) == Some("TemplateProcessing") =>
            {
                let defined = map.get("special_tokens").and_then(Value::as_object);
                let pieces = map.get(template).and_then(Value::as_array);
                for piece in pieces.into_iter().flatten() {
                    if template == "single" && piece["Sequence"]["id"].as_str() == Some("B") {
                        let why =
                            "post_processor: the single template uses the second sequence ($B)";
                        return Some((why.into(), true));
                    }
                    let Some(id) = piece["SpecialToken"]["id"].as_str() else {
                        continue;
                    };
                    if !defined.is_some_and(|d| d.contains_key(id)) {
                        let why = format!(
                            "post_processor: the {template} template names the special token \
                             {id:?}, which its special_tokens do not define"
                        );
                        return Some((why, false));
                    }
                }
                None
            }
            Value::Object(map) => map.values().find_map(|v| check(v, template)),
            Value::Array(items) => items.iter().find_map(|v| check(v, template)),
            _ => None,
        }
    }
    let template = if pair { "pair" } else { "single" };
    check(&serialized(hf.get_post_processor()), template)
}

/// True when the post-processor trims offsets by reading token strings (a
/// `ByteLevel` or `RobertaProcessing` with `trim_offsets`, alone or in a
/// `Sequence`): the fast path then gives its encodings the token strings too.
pub fn post_processor_reads_tokens(hf: &Tokenizer) -> bool {
    fn trims(value: &Value) -> bool {
        match value {
            Value::Object(map) => {
                let kind = map.get("type").and_then(Value::as_str);
                (matches!(kind, Some("ByteLevel" | "RobertaProcessing"))
                    && map.get("trim_offsets").and_then(Value::as_bool) != Some(false))
                    || map.values().any(trims)
            }
            Value::Array(items) => items.iter().any(trims),
            _ => false,
        }
    }
    trims(&serialized(hf.get_post_processor()))
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
