//! The batch pipeline: inputs -> encodings -> packed buffers.
//!
//! An [`Engine`] owns one loaded tokenizer and is immutable after construction
//! (that is what makes one instance safe to share across threads). Truncation and
//! padding are per-call [`Settings`]; the ones stored in tokenizer.json are kept
//! as defaults for callers that want `tokenizers`' behaviour.
//!
//! Each sequence runs on the fast path (`crate::cpu::encode`, byte-level BPE
//! through the shared kernels) when the plan and the document allow it, else
//! on the exact path (`exact`, the `tokenizers` crate's own stages);
//! truncation, the post-processor and packing (`pack`) are the same for both.
//! `offload` runs a whole batch on a CUDA device (or its emulator) instead.

mod added_ids;
mod aligned;
pub mod decode;
pub mod device;
pub mod exact;
pub mod maps;
pub mod offload;
pub mod overflow;
pub mod pack;
pub mod pretok;
mod single;
pub mod template;

use crate::cpu::{self, FastEncode};
use crate::error::{Error, Result};
use crate::layout::{Batch, Outputs};
use crate::plan::{each_family, FastPlan, PlanReport};
use crate::pool;
use pack::Sequence;
use tokenizers::{AddedToken, Encoding, PaddingParams, PostProcessor, Tokenizer, TruncationParams};

/// Per-call settings.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub add_special_tokens: bool,
    pub truncation: Option<TruncationParams>,
    pub padding: Option<PaddingParams>,
    pub outputs: Outputs,
}

/// One input row: a text, or a pair of texts.
pub type Input<'a> = (&'a str, Option<&'a str>);

/// A loaded tokenizer, ready to encode and decode.
pub struct Engine {
    /// The crate's tokenizer with truncation and padding removed.
    hf: Tokenizer,
    file_truncation: Option<TruncationParams>,
    file_padding: Option<PaddingParams>,
    /// The fast engine's plan, or why this tokenizer has none.
    fast: std::result::Result<FastPlan, String>,
    /// Unique per engine: tags per-thread word caches.
    id: u64,
    /// The post-processor reads token strings (to trim offsets): fast
    /// encodings with offsets carry them.
    tokens_for_offsets: bool,
    /// Why the single / pair template cannot be applied (the crate would panic).
    /// (why, even without special tokens), from `plan::template_problem`.
    template_problems: [Option<(String, bool)>; 2],
    /// The fast plan's tables on each device they were uploaded to.
    device_tables: offload::TablesCache,
    /// The largest id the tokenizer can give (found at the first int32 device call).
    max_id: std::sync::OnceLock<u32>,
    /// Bytes of normalized text each model id covers (built at the first
    /// per-word call with offsets; `aligned`).
    token_lens: std::sync::OnceLock<Vec<u32>>,
    /// What rows with per-token maps need, built at their first call (`maps`).
    rich: maps::RichState,
    /// Every id's decoded form, built at the first decode (None: the crate's decoder).
    decode_forms: std::sync::OnceLock<Option<decode::Forms>>,
    /// `single_template` without and with special tokens, asked once (the
    /// post-processor is fixed for the engine's life).
    single_templates: [std::sync::OnceLock<Option<crate::kernels::GtTemplate>>; 2],
    /// `offsets_template`'s answer without and with special tokens, asked once.
    offsets_templates: [std::sync::OnceLock<Option<crate::kernels::GtTemplate>>; 2],
}

static NEXT_ENGINE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Engine {
    /// Builds an engine from the text of a tokenizer.json, as the crate loads it.
    pub fn from_json(json: &str) -> Result<Self> {
        Engine::load(json, false)
    }

    /// Builds an engine from a tokenizer.json this project wrote (`to_json`):
    /// added tokens keep the ids it gives them (`added_ids`).
    pub fn from_own_json(json: &str) -> Result<Self> {
        Engine::load(json, true)
    }

    fn load(json: &str, keep_added_ids: bool) -> Result<Self> {
        // The crate's loader and the fast plan each parse the JSON: side by side.
        let (parsed, fast) = std::thread::scope(|scope| {
            let plan = scope.spawn(|| match serde_json::from_str::<serde_json::Value>(json) {
                Ok(spec) => FastPlan::build(&spec),
                Err(err) => Err(format!("unreadable JSON: {err}")),
            });
            let parsed = json.parse::<Tokenizer>();
            let fast = plan
                .join()
                .unwrap_or_else(|_| Err("building the fast plan failed".into()));
            (parsed, fast)
        });
        let mut hf = parsed.map_err(|err| classify_load_error(json, err))?;
        if keep_added_ids {
            hf = added_ids::keep_json_ids(json, hf)?;
        }
        let fast = fast.and_then(|mut plan| {
            plan.resolve_added_ids(|content| hf.token_to_id(content))?;
            Ok(plan)
        });
        let file_truncation = hf.get_truncation().cloned();
        let file_padding = hf.get_padding().cloned();
        hf.with_truncation(None).map_err(Error::tokenizers)?;
        hf.with_padding(None);
        release_freed_memory();
        Ok(Engine::assemble(hf, fast, file_truncation, file_padding))
    }

    /// An engine over `hf` (truncation and padding removed) and its plan.
    fn assemble(
        hf: Tokenizer,
        fast: std::result::Result<FastPlan, String>,
        file_truncation: Option<TruncationParams>,
        file_padding: Option<PaddingParams>,
    ) -> Engine {
        Engine {
            tokens_for_offsets: crate::plan::post_processor_reads_tokens(&hf),
            template_problems: [false, true].map(|pair| crate::plan::template_problem(&hf, pair)),
            hf,
            file_truncation,
            file_padding,
            fast,
            id: NEXT_ENGINE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            device_tables: Default::default(),
            max_id: Default::default(),
            token_lens: Default::default(),
            rich: Default::default(),
            decode_forms: Default::default(),
            single_templates: Default::default(),
            offsets_templates: Default::default(),
        }
    }

    /// This tokenizer with `tokens` added by the crate's own `add_tokens`
    /// (ids, flags and count as `tokenizers` gives them), and how many were
    /// added. Adding tokens changes neither the model nor the normalizer nor
    /// the pre-tokenizer, so the new engine shares the fast plan's tables and
    /// builds only the added tokens' split (a reload of the JSON took 1.6 s
    /// for one token on Qwen3). Without a fast plan, whose reason may lie in
    /// the added tokens, the JSON is loaded again and the plan decided anew.
    pub fn with_added_tokens(&self, tokens: Vec<AddedToken>) -> Result<(Engine, usize)> {
        let mut hf = self.hf.clone();
        let added = hf.add_tokens(tokens).map_err(Error::tokenizers)?;
        let (truncation, padding) = (self.file_truncation.clone(), self.file_padding.clone());
        let Ok(plan) = &self.fast else {
            let reloaded = Engine::assemble(hf, Err(String::new()), truncation, padding);
            return Ok((Engine::from_own_json(&reloaded.to_json()?)?, added));
        };
        let spec = serde_json::to_value(hf.get_added_vocabulary()).map_err(Error::tokenizers)?;
        let fast = plan.with_added_tokens(&spec).and_then(|mut plan| {
            plan.resolve_added_ids(|content| hf.token_to_id(content))?;
            Ok(plan)
        });
        Ok((Engine::assemble(hf, fast, truncation, padding), added))
    }

    /// The plan: which engine runs each stage, and why.
    pub fn plan_report(&self) -> PlanReport {
        PlanReport::of(&self.hf, self.fast.as_ref().map_err(String::as_str))
    }

    /// True when the fast path encodes `text` whole (with `offsets` or not).
    pub fn takes_fast_path(&self, text: &str, offsets: bool) -> bool {
        self.encode_fast(text, offsets).is_some()
    }

    /// One sequence on the fast path, or None when the plan or the document
    /// leaves it to the exact path.
    fn encode_fast(&self, text: &str, offsets: bool) -> Option<cpu::Encoded> {
        if !fits_the_kernels(text.len()) {
            return None;
        }
        let plan = self.fast.as_ref().ok()?;
        if offsets && self.word_model().is_some() {
            return self.encode_word_offsets(text);
        }
        let added = self.hf.get_added_vocabulary();
        each_family!(plan, plan => plan.encode_fast(self.id, added, text, offsets))
    }

    /// One sequence: the fast path when the plan and the document allow it,
    /// else the exact path.
    fn encode_sequence(&self, text: &str, type_id: u32, settings: &Settings) -> Result<Encoding> {
        let offsets = settings.outputs.offsets;
        if let Some(done) = self.encode_fast(text, offsets) {
            let tokens = (offsets && self.tokens_for_offsets).then(|| {
                let token = |&id| self.hf.id_to_token(id).unwrap_or_default();
                let mut tokens: Vec<String> = done.ids.iter().map(token).collect();
                for (at, text) in done.added {
                    tokens[at] = text;
                }
                tokens
            });
            return Ok(fast_encoding(done.ids, done.offsets, tokens, type_id));
        }
        if offsets && fits_the_kernels(text.len()) {
            if let Some(encoding) = self.encode_aligned(text, type_id) {
                return encoding;
            }
        }
        exact::encode_sequence(&self.hf, text, type_id, offsets)
    }

    /// The ids of a single sequence, cut as the crate's truncation cuts one
    /// sequence alone (for rows packed from ids, see `template`).
    fn sequence_ids(&self, text: &str, settings: &Settings) -> Result<Vec<u32>> {
        Ok(self.sequence_row(text, settings, false)?.ids)
    }

    /// The ids of a single sequence and, with `offsets`, each token's
    /// character offsets (as `encode_sequence` gives them), cut as the
    /// crate's truncation cuts one sequence alone (for rows packed from ids
    /// and offsets, see `template`).
    fn sequence_row(&self, text: &str, settings: &Settings, offsets: bool) -> Result<Sequence> {
        let mut row = match self.encode_fast(text, offsets) {
            Some(done) => Sequence {
                ids: done.ids,
                offsets: done.offsets,
            },
            None => {
                let aligned = match offsets && fits_the_kernels(text.len()) {
                    true => self.encode_aligned(text, 0),
                    false => None,
                };
                let encoding = match aligned {
                    Some(encoding) => encoding?,
                    None => exact::encode_sequence(&self.hf, text, 0, offsets)?,
                };
                Sequence {
                    ids: encoding.get_ids().to_vec(),
                    offsets: offsets.then(|| encoding.get_offsets().to_vec()),
                }
            }
        };
        if let Some(trunc) = &settings.truncation {
            let len = row.ids.len();
            let params = self.room_params(trunc, false, settings.add_special_tokens);
            let special = trunc.max_length - params.max_length;
            if let (Some(to), None) = overflow::targets(len, None, &params, special)? {
                let main = overflow::Windows {
                    len,
                    to: Some(to),
                    stride: trunc.stride,
                    direction: trunc.direction,
                };
                let range = main.range(0);
                row.ids = row.ids[range.clone()].to_vec();
                if let Some(offsets) = row.offsets.as_mut() {
                    *offsets = offsets[range].to_vec();
                }
            }
        }
        Ok(row)
    }

    /// `trunc` with the room a row leaves its text as max_length (the crate
    /// truncates the sequences to that, then adds the special tokens).
    fn room_params(
        &self,
        trunc: &TruncationParams,
        pair: bool,
        add_special_tokens: bool,
    ) -> TruncationParams {
        TruncationParams {
            max_length: self.sequence_room(trunc, pair, add_special_tokens),
            ..trunc.clone()
        }
    }

    /// Tokens of text a row of `trunc.max_length` holds besides the special
    /// tokens the post-processor adds (max_length was checked to hold them).
    fn sequence_room(
        &self,
        trunc: &TruncationParams,
        pair: bool,
        add_special_tokens: bool,
    ) -> usize {
        let added = match add_special_tokens {
            true => self.added_special_tokens(pair),
            false => 0,
        };
        trunc.max_length - added
    }

    /// tokenizer.json text for this tokenizer, its own truncation and padding
    /// included (what pickling a Tokenizer sends to another process).
    pub fn to_json(&self) -> Result<String> {
        // Into the JSON value directly: `with_truncation` would re-validate a
        // stride the crate accepted at load.
        let mut value = serde_json::to_value(&self.hf).map_err(Error::tokenizers)?;
        value["truncation"] =
            serde_json::to_value(&self.file_truncation).map_err(Error::tokenizers)?;
        value["padding"] = serde_json::to_value(&self.file_padding).map_err(Error::tokenizers)?;
        serde_json::to_string(&value).map_err(Error::tokenizers)
    }

    /// True when the post-processor gives pairs a second token type (BERT-style).
    pub fn uses_type_ids(&self) -> bool {
        crate::plan::post_processor_uses_type_ids(&self.hf)
    }

    /// The underlying `tokenizers` object (without truncation and padding).
    pub fn hf(&self) -> &Tokenizer {
        &self.hf
    }

    /// Truncation stored in tokenizer.json, if any.
    pub fn file_truncation(&self) -> Option<&TruncationParams> {
        self.file_truncation.as_ref()
    }

    /// Padding stored in tokenizer.json, if any.
    pub fn file_padding(&self) -> Option<&PaddingParams> {
        self.file_padding.as_ref()
    }

    /// Special tokens the post-processor adds to a single input or a pair.
    pub fn added_special_tokens(&self, is_pair: bool) -> usize {
        self.hf
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(is_pair))
    }

    /// Encodes a batch on the engine's thread pool and packs the result.
    pub fn encode_batch(&self, inputs: &[Input<'_>], settings: &Settings) -> Result<Batch> {
        self.check_settings(inputs, settings)?;
        let pool = pool::current();
        let sizes: Vec<usize> = inputs
            .iter()
            .map(|(a, b)| a.len() + b.map_or(0, str::len))
            .collect();
        // No per-document Encoding where the template allows: ids (and each
        // token's offsets, when asked), then the template around them.
        let packable = match self.packable_template(inputs, settings) {
            Some(template) => Some((template, false)),
            None => self
                .offsets_template(inputs, settings)
                .map(|template| (template, true)),
        };
        if let Some((template, offsets)) = packable {
            let rows = pool.map_by_size(&sizes, |i| {
                self.sequence_row(inputs[i].0, settings, offsets)
            })?;
            return pack::pack_sequences(
                &rows,
                &template,
                settings.padding.as_ref(),
                settings.outputs,
            );
        }
        let encodings: Vec<Encoding> =
            pool.map_by_size(&sizes, |i| self.encode_one(inputs[i], settings))?;
        pack::pack(&encodings, settings.padding.as_ref(), settings.outputs)
    }

    /// Refuses, before any work starts, settings that cannot be honoured: a
    /// max_length that cannot even hold the special tokens (the crate would
    /// underflow), or padding whose output would not fit in memory.
    fn check_settings(&self, inputs: &[Input<'_>], settings: &Settings) -> Result<()> {
        for (is_pair, problem) in [false, true].iter().zip(&self.template_problems) {
            let used = || inputs.iter().any(|(_, pair)| pair.is_some() == *is_pair);
            if let Some((why, always)) = problem {
                if (*always || settings.add_special_tokens) && used() {
                    // The crate would panic applying this template.
                    return Err(Error::Unsupported(why.clone()));
                }
            }
        }
        crate::layout::check_padding(
            inputs.len(),
            settings.padding.as_ref(),
            settings.outputs.bytes_per_token(),
        )?;
        let Some(trunc) = &settings.truncation else {
            return Ok(());
        };
        for is_pair in [false, true] {
            let needed = match settings.add_special_tokens {
                true => self.added_special_tokens(is_pair),
                false => 0,
            };
            let what = if is_pair { "pair" } else { "sequence" };
            let used = inputs.iter().any(|(_, pair)| pair.is_some() == is_pair);
            if used && needed > trunc.max_length {
                return Err(Error::InvalidArgument(format!(
                    "max_length={} is smaller than the {needed} special tokens added to each {what}",
                    trunc.max_length,
                )));
            }
        }
        Ok(())
    }

    /// One row: each sequence, then truncation, then the post-processor (the
    /// order of `TokenizerImpl::post_process`).
    fn encode_one(&self, (text, pair): Input<'_>, settings: &Settings) -> Result<Encoding> {
        let first = self.encode_sequence(text, 0, settings)?;
        let second = pair
            .map(|p| self.encode_sequence(p, 1, settings))
            .transpose()?;
        let (first, second) = match &settings.truncation {
            Some(trunc) => {
                let params = self.room_params(trunc, second.is_some(), settings.add_special_tokens);
                let special = trunc.max_length - params.max_length;
                // The crate's truncation without its panic on a large stride,
                // and without the overflowing windows this call does not return.
                overflow::truncate_main(first, second, &params, special)?
            }
            None => (first, second),
        };
        self.post_process(first, second, settings.add_special_tokens)
    }

    /// The post-processor (or the crate's default) over truncated sequences.
    fn post_process(
        &self,
        first: Encoding,
        second: Option<Encoding>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        match self.hf.get_post_processor() {
            Some(processor) => processor
                .process(first, second, add_special_tokens)
                .map_err(Error::tokenizers),
            None => {
                let encodings = std::iter::once(first).chain(second).collect();
                let mut merged =
                    <dyn PostProcessor>::default_process(encodings, add_special_tokens)
                        .map_err(Error::tokenizers)?;
                merged
                    .pop()
                    .ok_or_else(|| Error::Tokenizers("post-processing returned no encoding".into()))
            }
        }
    }

    /// Decodes each row of ids on the engine's thread pool.
    pub fn decode_batch(
        &self,
        rows: &[Vec<u32>],
        skip_special_tokens: bool,
    ) -> Result<Vec<String>> {
        self.decode_rows(rows, skip_special_tokens, false)
    }

    /// Decodes each row of ids on the engine's thread pool (`decode`: the
    /// decoder's per-id forms where it has them, else the crate's), with
    /// transformers' `clean_up_tokenization_spaces` when `clean_up`.
    pub fn decode_rows(
        &self,
        rows: &[Vec<u32>],
        skip_special_tokens: bool,
        clean_up: bool,
    ) -> Result<Vec<String>> {
        let forms = self
            .decode_forms
            .get_or_init(|| decode::Forms::build(&self.hf));
        let ids = rows.iter().map(Vec::len).sum::<usize>();
        // About 4 bytes of text per id: small batches stay on the calling thread.
        pool::current().map_sized(rows.len(), ids.saturating_mul(4), |i| match forms {
            Some(forms) => Ok(forms.decode(&rows[i], skip_special_tokens, clean_up)),
            None => decode::crate_decode(&self.hf, &rows[i], skip_special_tokens, clean_up),
        })
    }
}

/// Returns the memory freed after loading to the system. Parsing a large
/// tokenizer.json twice (the crate and the plan, on two threads, so in two
/// malloc arenas) leaves hundreds of MB of freed but resident memory that
/// glibc keeps otherwise.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// An encoding of plain ids (no token strings, offsets or word ids: the
/// post-processor and packing read only ids, type ids and masks from it,
/// and offsets and token strings only when asked for).
fn encoding_from_ids(ids: Vec<u32>, type_id: u32) -> Encoding {
    fast_encoding(ids, None, None, type_id)
}

/// An encoding from the fast path: ids and, when computed, character offsets
/// and token strings.
fn fast_encoding(
    ids: Vec<u32>,
    offsets: Option<Vec<(usize, usize)>>,
    tokens: Option<Vec<String>>,
    type_id: u32,
) -> Encoding {
    let n = ids.len();
    Encoding::new(
        ids,
        vec![type_id; n],
        tokens.unwrap_or_else(|| vec![String::new(); n]),
        vec![None; n],
        offsets.unwrap_or_else(|| vec![(0, 0); n]),
        vec![0; n],
        vec![1; n],
        Vec::new(),
        Default::default(),
    )
}

/// Tells apart text that is not JSON, JSON that is not a tokenizer (no
/// `model`), and a tokenizer.json the crate cannot build.
fn classify_load_error(json: &str, err: impl std::fmt::Display) -> Error {
    match serde_json::from_str::<serde_json::Value>(json) {
        Err(json_err) => Error::Load(format!(
            "not a valid tokenizer.json (invalid JSON: {json_err})"
        )),
        Ok(serde_json::Value::Object(map)) if !map.contains_key("model") => {
            let keys: Vec<&str> = map.keys().map(String::as_str).take(8).collect();
            Error::Load(format!(
                "not a tokenizer.json: the JSON has no `model` (its top-level keys: {})",
                if keys.is_empty() {
                    "none".into()
                } else {
                    keys.join(", ")
                }
            ))
        }
        Ok(serde_json::Value::Object(_)) => Error::Unsupported(format!(
            "tokenizers cannot build this tokenizer.json: {err}"
        )),
        Ok(_) => Error::Load("not a tokenizer.json: the JSON is not an object".into()),
    }
}

/// The kernels count a text's bytes in u32 (`kernels::chain_words` asserts
/// it): a text of 4 GiB or more takes the exact path, which has no such limit.
fn fits_the_kernels(len: usize) -> bool {
    len < u32::MAX as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_of_4_gib_or_more_is_left_to_the_exact_path() {
        assert!(fits_the_kernels(u32::MAX as usize - 1));
        assert!(!fits_the_kernels(u32::MAX as usize));
        assert!(!fits_the_kernels(u32::MAX as usize + 1));
    }

    const WORDLEVEL: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 0, "content": "[CLS]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]}}},
      "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[CLS]": 0, "a": 1, "b": 2, "c": 3, "[UNK]": 4}, "unk_token": "[UNK]"}
    }"#;

    fn settings() -> Settings {
        Settings {
            add_special_tokens: true,
            ..Settings::default()
        }
    }

    /// The crate runs without truncation of its own, ever: crates.io has no
    /// tokenizers 0.23.3 (the PyPI oracle's version), and the oracle's Rust
    /// differs from the crate's 0.23.2 only where the crate truncates while
    /// it tokenizes (0.23.2's early exit, which the oracle dropped), so
    /// truncation stays the engine's own for the two to give the same ids.
    #[test]
    fn the_crate_never_truncates_itself() {
        let json = WORDLEVEL.replace(
            r#""truncation": null"#,
            r#""truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst",
                              "stride": 0}"#,
        );
        let engine = Engine::from_json(&json).unwrap();
        assert!(engine.file_truncation().is_some());
        assert!(engine.hf().get_truncation().is_none());
        let (added, _) = engine
            .with_added_tokens(vec![AddedToken::from("zz", false)])
            .unwrap();
        assert!(added.hf().get_truncation().is_none());
    }

    #[test]
    fn encodes_pairs_with_template() {
        let engine = Engine::from_json(WORDLEVEL).unwrap();
        let mut s = settings();
        s.outputs.type_ids = true;
        let batch = engine.encode_batch(&[("a b", Some("c x"))], &s).unwrap();
        assert_eq!(batch.ids, vec![0, 1, 2, 3, 4]);
        assert_eq!(batch.type_ids.unwrap(), vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn truncation_keeps_room_for_special_tokens() {
        let engine = Engine::from_json(WORDLEVEL).unwrap();
        let mut s = settings();
        s.truncation = Some(TruncationParams {
            max_length: 3,
            ..Default::default()
        });
        let batch = engine.encode_batch(&[("a b c a", None)], &s).unwrap();
        assert_eq!(batch.ids, vec![0, 1, 2]);
        s.truncation = Some(TruncationParams {
            max_length: 0,
            ..Default::default()
        });
        assert!(matches!(
            engine.encode_batch(&[("a", None)], &s),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn load_errors_are_classified() {
        assert!(matches!(
            Engine::from_json("{not json"),
            Err(Error::Load(_))
        ));
        let unknown = WORDLEVEL.replace("\"WordLevel\"", "\"NoSuchModel\"");
        assert!(matches!(
            Engine::from_json(&unknown),
            Err(Error::Unsupported(_))
        ));
        let Err(Error::Load(why)) = Engine::from_json(r#"{"vocab": {}, "merges": []}"#) else {
            panic!("JSON without a model must be a load error");
        };
        assert!(
            why.contains("no `model`") && why.contains("merges, vocab"),
            "{why}"
        );
        assert!(matches!(Engine::from_json("[1, 2]"), Err(Error::Load(_))));
    }
}
