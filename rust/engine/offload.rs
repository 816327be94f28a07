//! Offload: a whole batch on a device (a GPU, or the host emulator of the
//! CUDA backend), results in the device's memory.
//!
//! The engine decides what the device can do: single sequences without
//! offsets, whose post-processor is a fixed template around the sequence (BOS,
//! CLS/SEP...), go through the device pipeline; inside it, each row is either
//! text for the device (fast plan with scanners, no added-token text) or ids
//! the host encoded. Anything else (pairs, offsets, an unusual post-processor,
//! truncation "only_second") is encoded by the CPU engine and copied to the
//! device, so a device call never gives different results.

use super::{Engine, Input, Settings};
use crate::cpu::{self, Part};
use crate::cuda::pipeline::{self, DeviceBatch, DeviceModel, DeviceTables, Job, Row, Truncation};
use crate::cuda::stream::{DeviceStream, Location};
use crate::error::{Error, Result};
use crate::kernels::{GtBpeModel, GtTemplate};
use crate::layout::Dtype;
use crate::plan::FastPlan;
use crate::pool;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use tokenizers::TruncationDirection;

/// The fast plan's tables, uploaded once per device.
pub type TablesCache = Mutex<Vec<(Location, Arc<DeviceTables>)>>;

impl Engine {
    /// Encodes `inputs` on `dev`; the result's buffers live there.
    pub fn encode_batch_on(
        &self,
        dev: &dyn DeviceStream,
        inputs: &[Input<'_>],
        settings: &Settings,
    ) -> Result<DeviceBatch> {
        self.check_settings(inputs, settings)?;
        let dtype = settings.outputs.dtype;
        let Some(template) = self.packable_template(inputs, settings) else {
            return DeviceBatch::upload(dev, self.encode_batch(inputs, settings)?, dtype);
        };
        if dtype == Dtype::Int32 {
            self.check_int32(&template, settings)?;
        }

        let plan = self.fast.as_ref().ok().filter(|p| runs_on_device(p));
        let tables = plan.map(|plan| self.tables_on(dev, plan)).transpose()?;
        let clock = std::time::Instant::now();
        let rows = pool::current().map(inputs.len(), |i| {
            self.device_row(inputs[i].0, plan, settings)
        })?;
        let prepare_ms = clock.elapsed().as_secs_f64() * 1e3;
        let added = if settings.add_special_tokens {
            self.added_special_tokens(false)
        } else {
            0
        };
        let job = Job {
            model: tables
                .as_ref()
                .map_or(DeviceModel::ByteLevel(GtBpeModel::null()), |t| t.model),
            splits: plan
                .and_then(FastPlan::byte_level)
                .and_then(|p| p.scanner_chain)
                .unwrap_or_default(),
            rows,
            template,
            truncation: settings.truncation.as_ref().map(|t| Truncation {
                max_seq: (t.max_length - added).min(u32::MAX as usize) as u32,
                left: t.direction == TruncationDirection::Left,
            }),
            padding: settings.padding.as_ref(),
            outputs: settings.outputs,
        };
        let mut batch = pipeline::encode(dev, &job)?;
        batch.timings.prepare_ms = prepare_ms;
        Ok(batch)
    }

    /// int32 outputs packed on the device: the kernel narrows what it writes,
    /// so every id it may write (the vocabulary's, the template's, padding's)
    /// must fit in an int32.
    fn check_int32(&self, template: &GtTemplate, settings: &Settings) -> Result<()> {
        let vocab = self
            .max_id
            .get_or_init(|| self.hf.get_vocab(true).into_values().max().unwrap_or(0));
        let padding = settings
            .padding
            .as_ref()
            .map_or([0, 0], |p| [p.pad_id, p.pad_type_id]);
        let largest = (template
            .ids
            .iter()
            .chain(&template.type_ids)
            .chain(&padding))
        .copied()
        .fold(*vocab, u32::max);
        if i32::try_from(largest).is_err() {
            return Err(Error::InvalidArgument(format!(
                "dtype=\"int32\": this tokenizer can give id {largest}, which int32 cannot hold; use dtype=\"int64\""
            )));
        }
        Ok(())
    }

    /// A row for the device: its normalized text (byte-level) or words
    /// (families whose words the host cuts) when the device can encode it,
    /// else the ids of the CPU engine (fast or exact path).
    fn device_row<'t>(
        &self,
        text: &'t str,
        plan: Option<&FastPlan>,
        settings: &Settings,
    ) -> Result<Row<'t>> {
        let row = match plan {
            Some(FastPlan::ByteLevel(plan)) => plan.prepare(text).map(Row::Text),
            Some(FastPlan::SentencePiece(plan)) => {
                words_row(|part| cpu::each_part(plan, text, part))
            }
            Some(FastPlan::Unigram(plan)) => words_row(|part| cpu::each_part(plan, text, part)),
            Some(FastPlan::WordPiece(plan)) => {
                plan.device_pieces(text, pipeline::PIECE_BYTES)
                    .map(|ends| Row::Words {
                        text: Cow::Borrowed(text),
                        ends,
                    })
            }
            None => None,
        };
        match row {
            Some(row) => Ok(row),
            None => Ok(Row::Ids(
                self.encode_sequence(text, 0, settings)?.get_ids().to_vec(),
            )),
        }
    }

    /// The plan's tables on `dev`, uploaded at first use.
    fn tables_on(&self, dev: &dyn DeviceStream, plan: &FastPlan) -> Result<Arc<DeviceTables>> {
        let mut cache = self.device_tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, tables)) = cache.iter().find(|(at, _)| *at == dev.location()) {
            return Ok(tables.clone());
        }
        let tables = Arc::new(pipeline::upload_tables(dev, plan)?);
        // Other calls use the tables on other streams: the copies must be done.
        dev.synchronize()?;
        cache.push((dev.location(), tables.clone()));
        Ok(tables)
    }
}

/// True when the device runs this plan's model: byte-level BPE whose splits
/// are scanners, SentencePiece-style BPE, Unigram with an unknown token (so
/// no word can fail there), WordPiece whose pieces fit their room.
fn runs_on_device(plan: &FastPlan) -> bool {
    match plan {
        FastPlan::ByteLevel(plan) => plan.scanner_chain.is_some(),
        FastPlan::SentencePiece(_) => true,
        FastPlan::Unigram(plan) => plan.encodes_every_word(),
        FastPlan::WordPiece(plan) => plan.tokens_fit_bytes(),
    }
}

/// The words a per-word model family makes of a text (`each_part` passes
/// them, returning false when the text needs the exact path), as a device
/// row; None when the text holds an added token (the host encodes that row).
fn words_row<'t>(each_part: impl FnOnce(&mut dyn FnMut(Part<'_>)) -> bool) -> Option<Row<'t>> {
    let (mut text, mut ends, mut added) = (String::new(), Vec::new(), false);
    let fine = each_part(&mut |part| match part {
        Part::Added(_) => added = true,
        Part::Word(word) => {
            text.push_str(word);
            ends.push(text.len() as u32);
        }
    });
    let fits = u32::try_from(text.len()).is_ok();
    (fine && !added && fits).then_some(Row::Words {
        text: Cow::Owned(text),
        ends,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Settings;

    /// A SentencePiece-style BPE tokenizer with one plain added token.
    const SPM: &str = r#"{"version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 4, "content": "<s>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": null, "post_processor": null, "decoder": null,
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                  "ignore_merges": false, "vocab": {"▁": 0, "a": 1, "b": 2, "▁a": 3, "<s>": 4},
                  "merges": ["▁ a"]}}"#;

    #[test]
    fn host_cut_words_go_to_the_device_and_added_tokens_stay_on_the_host() {
        let engine = Engine::from_json(SPM).unwrap();
        let plan = engine.fast.as_ref().ok().filter(|p| runs_on_device(p));
        let settings = Settings::default();
        match engine.device_row("a ab", plan, &settings).unwrap() {
            Row::Words { text, ends } => {
                assert_eq!(text, "▁a▁ab");
                // "▁a" | "▁a" "b" cut between b's known neighbours; never inside "▁a"
                assert!(ends.iter().all(|&e| text.is_char_boundary(e as usize)));
                assert_eq!(*ends.last().unwrap() as usize, text.len());
                assert!(ends.contains(&("▁a".len() as u32)));
            }
            _ => panic!("expected words for the device"),
        }
        assert!(matches!(
            engine.device_row("<s>a", plan, &settings).unwrap(),
            Row::Ids(ids) if ids == [4, 3]
        ));
    }

    #[test]
    fn no_wait_between_a_chunks_upload_and_its_first_kernel_and_one_per_chunk() {
        use crate::cuda::emulator::{Emulator, Op};
        use crate::kernels::Kernel;
        let engine = Engine::from_json(SPM).unwrap();
        // 24-byte chunks: several per call.
        let dev = Emulator::traced(24);
        let texts = ["a ab b", "ab ab ab ab", "<s>a", "", "b a b a b a b a b a"];
        let inputs: Vec<Input<'_>> = texts.iter().map(|t| (*t, None)).collect();
        engine
            .encode_batch_on(&dev, &inputs, &Settings::default())
            .unwrap();
        let trace = dev.trace();
        // The tables' upload at first use ends in a sync of its own.
        let tables = trace.iter().position(|op| *op == Op::Synchronize).unwrap();
        let trace = trace[tables + 1..].to_vec();
        let last_launch = trace.iter().rposition(|op| matches!(op, Op::Launch(_)));
        let launches = trace
            .iter()
            .filter(|op| matches!(op, Op::Launch(_)))
            .count();
        assert!(launches > 8, "expected several chunks: {trace:?}");
        // After an upload, the next operation that is not one is a kernel:
        // the host never waits between laying out inputs and using them (the
        // results' own uploads, after the last kernel, end in one sync).
        for (i, op) in trace.iter().enumerate() {
            if matches!(op, Op::Upload(_)) && Some(i) < last_launch {
                let next = trace[i..].iter().find(|op| !matches!(op, Op::Upload(_)));
                assert!(
                    matches!(next, Some(Op::Launch(_))),
                    "{next:?} after an upload: {trace:?}"
                );
            }
        }
        let syncs = trace.iter().filter(|op| **op == Op::Synchronize).count();
        assert_eq!(syncs, 1, "one at the end of the call: {trace:?}");
        // One wait per chunk: its lengths (word and token counts stay on the device).
        let chunks = trace
            .iter()
            .filter(|op| **op == Op::Launch(Kernel::RowSpans))
            .count();
        let reads = trace
            .iter()
            .filter(|op| matches!(op, Op::Download(_)))
            .count();
        assert_eq!(reads, chunks, "{trace:?}");
    }
}
