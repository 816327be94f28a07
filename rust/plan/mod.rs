//! The plan: for a loaded tokenizer, what the fast engine can run and with
//! which tables.
//!
//! The fast engine claims the stages it reproduces exactly (today: byte-level
//! BPE, whose plan and tables are [`bytelevel::ByteLevelPlan`]); everything
//! else runs on the exact path, the `tokenizers` crate itself. The decision
//! for each stage and its reason ([`PlanReport`]) are shown by
//! `gpu-tok info --tokenizer` and `tok.plan`. [`unicode`] holds the test that
//! keeps the scanners' Unicode table in step with Oniguruma.

pub mod alphabet;
pub mod bytelevel;
pub mod char_atoms;
pub mod char_table;
pub mod family;
pub mod metaspace;
pub mod normal_form;
pub mod normalize;
pub mod regex;
pub mod scripts;
pub mod spm;
pub mod unicode;
pub mod unigram;
pub mod wordpiece;

pub use family::{AddedTokens, Family, PerWord};

use aho_corasick::AhoCorasick;
use serde_json::Value;
use std::borrow::Cow;
use tokenizers::{ModelWrapper, Tokenizer};

/// A piece of text (between added tokens) as a device that cuts the words
/// reads it: `text`, after one space when `spaced` (the normalizer's
/// `Prepend`, or the slot Metaspace's replacement is read from). The chunk
/// layout writes that space, so the host copies no piece to put it there.
pub struct DevicePiece<'t> {
    pub text: Cow<'t, str>,
    pub spaced: bool,
}

impl<'t> DevicePiece<'t> {
    /// The text as the device reads it, the space written out (a copy when spaced).
    pub fn joined(self) -> Cow<'t, str> {
        match self.spaced {
            true => Cow::Owned(format!(" {}", self.text)),
            false => self.text,
        }
    }
}

/// The fast engine's plan for a tokenizer of a family it covers (each a
/// [`Family`]).
#[allow(
    clippy::large_enum_variant,
    reason = "one per loaded tokenizer, never copied"
)]
pub enum FastPlan {
    ByteLevel(bytelevel::ByteLevelPlan),
    SentencePiece(spm::SpmPlan),
    WordPiece(wordpiece::WordPiecePlan),
    Unigram(unigram::UnigramPlan),
}

/// The one dispatch over the families: `each_family!(fast, plan => body)`
/// runs `body` with `plan` bound to the family's plan (so `body` may call the
/// [`Family`] methods, or a backend's trait for the families);
/// `each_family!(map fast, plan => body)` wraps `body`'s plan back into its
/// variant.
macro_rules! each_family {
    ($fast:expr, $plan:ident => $body:expr) => {
        match $fast {
            $crate::plan::FastPlan::ByteLevel($plan) => $body,
            $crate::plan::FastPlan::SentencePiece($plan) => $body,
            $crate::plan::FastPlan::WordPiece($plan) => $body,
            $crate::plan::FastPlan::Unigram($plan) => $body,
        }
    };
    (map $fast:expr, $plan:ident => $body:expr) => {
        match $fast {
            $crate::plan::FastPlan::ByteLevel($plan) => $crate::plan::FastPlan::ByteLevel($body),
            $crate::plan::FastPlan::SentencePiece($plan) => {
                $crate::plan::FastPlan::SentencePiece($body)
            }
            $crate::plan::FastPlan::WordPiece($plan) => $crate::plan::FastPlan::WordPiece($body),
            $crate::plan::FastPlan::Unigram($plan) => $crate::plan::FastPlan::Unigram($body),
        }
    };
}
pub(crate) use each_family;

impl FastPlan {
    /// The plan for tokenizer.json `spec`, or why there is none: which
    /// family the spec is, then that family's [`Family::build`].
    pub fn build(spec: &Value) -> Result<FastPlan, String> {
        match spec["model"]["type"].as_str() {
            Some("WordPiece") => wordpiece::WordPiecePlan::build(spec).map(FastPlan::WordPiece),
            Some("Unigram") => unigram::UnigramPlan::build(spec).map(FastPlan::Unigram),
            Some("WordLevel") => Err("model WordLevel: the fast engine has no WordLevel kernel \
                                      (a lookup per pre-token; the crate runs it)"
                .into()),
            // BPE whose pre-tokenizer has no ByteLevel step (none, Metaspace,
            // Split steps) is SentencePiece-style: the crate's BPE over the
            // characters of each word; with ByteLevel, byte-level.
            _ if !mentions_byte_level(&spec["pre_tokenizer"]) => {
                spm::SpmPlan::build(spec).map(FastPlan::SentencePiece)
            }
            _ => bytelevel::ByteLevelPlan::build(spec).map(FastPlan::ByteLevel),
        }
    }

    /// The byte-level plan, the one the CUDA backend runs.
    pub fn byte_level(&self) -> Option<&bytelevel::ByteLevelPlan> {
        match self {
            FastPlan::ByteLevel(plan) => Some(plan),
            _ => None,
        }
    }

    /// [`Family::with_added_tokens`] of the family's plan.
    pub fn with_added_tokens(&self, added_tokens: &Value) -> Result<FastPlan, String> {
        Ok(each_family!(map self, plan => plan.with_added_tokens(added_tokens)?))
    }

    /// [`Family::resolve_added_ids`] of the family's plan.
    pub fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        each_family!(self, plan => plan.resolve_added_ids(id_of))
    }

    /// [`Family::runs_on_device`] of the family's plan.
    pub fn runs_on_device(&self) -> bool {
        each_family!(self, plan => plan.runs_on_device())
    }

    /// [`Family::report`] of the family's plan.
    fn describe(&self) -> [String; 3] {
        each_family!(self, plan => plan.report())
    }
}

/// True when a pre-tokenizer is or holds (in a Sequence) `ByteLevel`.
pub(crate) fn mentions_byte_level(pre: &Value) -> bool {
    match pre["type"].as_str() {
        Some("ByteLevel") => true,
        Some("Sequence") => pre["pretokenizers"]
            .as_array()
            .is_some_and(|items| items.iter().any(mentions_byte_level)),
        _ => false,
    }
}

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
    /// The report for `hf` and its fast plan (or why there is none).
    pub fn of(hf: &Tokenizer, fast: Result<&FastPlan, &str>) -> PlanReport {
        let fast = fast.map(FastPlan::describe);
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
                    ("normalize", Ok([how, _, _])) => (Path::Fast, how.clone()),
                    ("pre_tokenize", Ok([_, how, _])) => (Path::Fast, how.clone()),
                    ("model", Ok([_, _, how])) => (Path::Fast, how.clone()),
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

/// Added tokens that are all plain (not `normalized`, `single_word`, `lstrip`
/// or `rstrip`, contents distinct): the crate's split of a text at them is
/// just its leftmost-longest Aho-Corasick match over the original text. The
/// same automaton here, with the ids, lets the fast path split without
/// building the crate's alignments.
pub struct PlainAdded {
    /// Every added token, as the crate matches them: the plain ones
    /// (`contents`, the first patterns), then those that strip spaces or
    /// match single words (`with_irregular`), whose matches only the exact
    /// path splits as the crate does. Where it matches only plain tokens, the
    /// crate's split is theirs alone.
    automaton: AhoCorasick,
    /// The crate's ids (`resolve`), which need not be the ones tokenizer.json lists.
    ids: Vec<u32>,
    contents: Vec<String>,
}

/// The added tokens the crate matches in each normalized piece
/// (`normalized`): an automaton over their texts and normalized texts. A
/// piece whose normalized text holds one is split there by the crate, so the
/// plans leave it to the exact path (a superset: the text itself counts too).
pub struct NormalizedAdded {
    automaton: AhoCorasick,
    /// A token normalizes to nothing: the crate's automaton then matches the
    /// empty text at every byte, so it cuts the text at every character (and
    /// panics inside a character of several bytes): every piece is its.
    empty_form: bool,
}

impl NormalizedAdded {
    /// The automaton for tokenizer.json's `added_tokens` under `normalizer`;
    /// None when none is normalized, an error when the normalizer fails on one.
    pub fn from_spec(
        tokens: &Value,
        normalizer: &normalize::PieceNormalizer,
    ) -> Result<Option<NormalizedAdded>, String> {
        let (mut texts, mut empty_form) = (Vec::new(), false);
        for token in tokens.as_array().map(Vec::as_slice).unwrap_or_default() {
            let Some(content) = token["content"].as_str().filter(|c| !c.is_empty()) else {
                continue;
            };
            if !token["normalized"].as_bool().unwrap_or(false) {
                continue;
            }
            texts.push(content.to_string());
            match normalizer.normalize(content) {
                Some(form) if !form.is_empty() => texts.push(form.into_owned()),
                Some(_) => empty_form = true,
                None => return Err("the normalizer fails on an added token".into()),
            }
        }
        match texts.is_empty() {
            true => Ok(None),
            false => AhoCorasick::new(&texts)
                .map(|automaton| {
                    Some(NormalizedAdded {
                        automaton,
                        empty_form,
                    })
                })
                .map_err(|e| format!("cannot index the added tokens: {e}")),
        }
    }

    /// True when `normalized` (a piece after the normalizer) holds one of
    /// the tokens (`this` None: there are none); always when a token
    /// normalizes to nothing.
    pub fn held_in(this: Option<&NormalizedAdded>, normalized: &str) -> bool {
        this.is_some_and(|added| added.empty_form || added.automaton.is_match(normalized))
    }
}

/// A piece of a text split at added tokens: its text, its byte span, and for
/// an added token its (id, text).
pub type Piece<'t> = (&'t str, (usize, usize), Option<(u32, &'t str)>);

impl PlainAdded {
    /// The automaton for tokenizer.json's `added_tokens`; None when any is
    /// not plain (or there are none). Ids come from [`PlainAdded::resolve`].
    pub fn from_spec(tokens: &Value) -> Option<PlainAdded> {
        Self::build(tokens, false, false)
    }

    /// As [`PlainAdded::from_spec`], but tokens that strip spaces or match
    /// single words (and are not normalized) are allowed: texts holding one
    /// go to the exact path (`PlainAdded::split` gives None for them).
    pub fn with_irregular(tokens: &Value) -> Option<PlainAdded> {
        Self::build(tokens, true, false)
    }

    /// The split of a per-word plan (SentencePiece BPE, Unigram, WordPiece)
    /// at the tokens the crate matches in the original text: as
    /// [`PlainAdded::with_irregular`], without the `normalized` tokens (the
    /// crate matches those in each normalized piece afterwards: see
    /// [`NormalizedAdded`]); or why the plan cannot take these tokens.
    pub fn for_word_plan(tokens: &Value) -> Result<Option<PlainAdded>, String> {
        let plain = Self::build(tokens, true, true);
        let matched_first = |token: &&Value| !token["normalized"].as_bool().unwrap_or(false);
        let any = tokens
            .as_array()
            .is_some_and(|a| a.iter().any(|t| matched_first(&t)));
        if plain.is_none() && any {
            return Err("added tokens with an empty or repeated text".into());
        }
        Ok(plain)
    }

    fn build(tokens: &Value, allow_irregular: bool, skip_normalized: bool) -> Option<PlainAdded> {
        let (mut contents, mut irregular) = (Vec::new(), Vec::new());
        for token in tokens.as_array()? {
            let flag = |key: &str| token[key].as_bool().unwrap_or(false);
            let content = token["content"].as_str().filter(|c| !c.is_empty())?;
            match flag("normalized") {
                true if skip_normalized => continue,
                true => return None,
                false => {}
            }
            match ["single_word", "lstrip", "rstrip"].iter().any(|k| flag(k)) {
                true if allow_irregular => irregular.push(content.to_string()),
                true => return None,
                false => contents.push(content.to_string()),
            }
        }
        let distinct: std::collections::HashSet<&String> =
            contents.iter().chain(&irregular).collect();
        if contents.len() + irregular.len() == 0
            || distinct.len() != contents.len() + irregular.len()
        {
            return None;
        }
        let automaton = aho_corasick::AhoCorasickBuilder::new()
            .match_kind(aho_corasick::MatchKind::LeftmostLongest)
            .build(contents.iter().chain(&irregular))
            .ok()?;
        Some(PlainAdded {
            automaton,
            ids: Vec::new(),
            contents,
        })
    }

    /// Gives `plain` the ids the crate gave its tokens (`id_of`, e.g. its
    /// `token_to_id`); without an id for each, it is dropped (the crate's
    /// split is used).
    pub fn resolve(plain: &mut Option<PlainAdded>, id_of: impl Fn(&str) -> Option<u32>) {
        let ids = plain.as_ref().and_then(|p| {
            p.contents
                .iter()
                .map(|c| id_of(c))
                .collect::<Option<Vec<u32>>>()
        });
        match (ids, plain.as_mut()) {
            (Some(ids), Some(p)) => p.ids = ids,
            _ => *plain = None,
        }
    }

    /// As [`PlainAdded::resolve`], for plans that cannot fall back to the
    /// crate's split: an error when a token has no id.
    pub fn resolve_all(
        plain: &mut Option<PlainAdded>,
        id_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<(), String> {
        let had = plain.is_some();
        PlainAdded::resolve(plain, id_of);
        match had && plain.is_none() {
            true => Err("an added token has no id in the loaded tokenizer".into()),
            false => Ok(()),
        }
    }

    /// `text` split at the added tokens of `plain` (`split`; without any,
    /// one piece, empty or not). None where only the exact path can split it.
    pub fn pieces<'t>(plain: Option<&PlainAdded>, text: &'t str) -> Option<Vec<Piece<'t>>> {
        match plain {
            Some(plain) => plain.split(text),
            None => Some(vec![(text, (0, text.len()), None)]),
        }
    }

    /// The crate's split of `text` in one pass: pieces between matches, and
    /// each match with its token, in order; empty pieces are dropped, as the
    /// crate drops them, and a text without a match is one piece. None when
    /// a token that strips spaces or matches single words matched.
    pub fn split<'t>(&self, text: &'t str) -> Option<Vec<Piece<'t>>> {
        let mut out = Vec::new();
        let mut at = 0;
        for found in self.automaton.find_iter(text) {
            let (start, end) = (found.start(), found.end());
            let id = *self.ids.get(found.pattern().as_usize())?;
            if start > at {
                out.push((&text[at..start], (at, start), None));
            }
            out.push((
                &text[start..end],
                (start, end),
                Some((id, &text[start..end])),
            ));
            at = end;
        }
        if at < text.len() || out.is_empty() {
            out.push((&text[at..], (at, text.len()), None));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_normalized_added_token_that_normalizes_to_nothing_sends_every_piece_away() {
        // Strip makes "\n\n" nothing: the crate's split then cuts the text at
        // every character, and panics inside one of several bytes.
        let strip = serde_json::json!({"type": "Strip", "strip_left": true, "strip_right": false});
        let normalizer = normalize::PieceNormalizer::from_spec(&strip).unwrap();
        let tokens = serde_json::json!([
            {"content": "\n\n", "normalized": true},
            {"content": "hello", "normalized": true}]);
        let added = NormalizedAdded::from_spec(&tokens, &normalizer).unwrap();
        assert!(NormalizedAdded::held_in(added.as_ref(), "a\u{a0}b"));
        assert!(NormalizedAdded::held_in(added.as_ref(), "a b"));
        let tokens = serde_json::json!([{"content": "hello", "normalized": true}]);
        let added = NormalizedAdded::from_spec(&tokens, &normalizer).unwrap();
        assert!(!NormalizedAdded::held_in(added.as_ref(), "a b"));
        assert!(NormalizedAdded::held_in(added.as_ref(), "a hello"));
    }

    #[test]
    fn bpe_without_byte_level_in_its_pre_tokenizer_is_sentencepiece_style() {
        let seq = |items: Value| serde_json::json!({"type": "Sequence", "pretokenizers": items});
        assert!(mentions_byte_level(&seq(serde_json::json!([
            {"type": "Digits"}, {"type": "ByteLevel"}]))));
        assert!(!mentions_byte_level(&seq(serde_json::json!([
            {"type": "Digits"}, {"type": "Whitespace"}]))));
        assert!(!mentions_byte_level(&Value::Null));
    }
}
