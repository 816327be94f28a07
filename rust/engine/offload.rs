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
use crate::cpu::encode::Segment;
use crate::cpu::{self, NormalizedPart, Part, WordPlan};
use crate::cuda::pipeline::{
    self, DeviceBatch, DeviceModel, DeviceTables, Job, PieceCuts, Row, RowGroup, Truncation,
};
use crate::cuda::stream::{DeviceStream, Location};
use crate::error::{Error, Result};
use crate::kernels::{GtBpeModel, GtSpmCuts, GtTemplate};
use crate::layout::Dtype;
use crate::plan::bytelevel::ByteLevelPlan;
use crate::plan::spm::SpmPlan;
use crate::plan::unigram::UnigramPlan;
use crate::plan::wordpiece::WordPiecePlan;
use crate::plan::{each_family, DevicePiece, FastPlan, PlainAdded};
use crate::pool;
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use tokenizers::{AddedVocabulary, TruncationDirection};

/// Input bytes the host prepares before their chunks are queued: small
/// enough that a call of 100 MB is two groups (the host prepares one while
/// the device runs the one before), large enough that a chunk's fixed
/// device costs (its scans' tiles, launches) stay little: 32 MiB chunks
/// cost the modeled kernels 15-40 % more than 64 MiB (benches/README,
/// "Device cost model").
const PREPARE_GROUP_BYTES: usize = 64 << 20;

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
            let mut batch = DeviceBatch::upload(dev, self.encode_batch(inputs, settings)?, dtype)?;
            batch.timings.rows_on_host = inputs.len();
            return Ok(batch);
        };
        if dtype == Dtype::Int32 {
            self.check_int32(&template, settings)?;
        }

        let plan = self.fast.as_ref().ok().filter(|p| p.runs_on_device());
        let tables = plan.map(|plan| self.tables_on(dev, plan)).transpose()?;
        let model = tables
            .as_ref()
            .map_or(DeviceModel::ByteLevel(GtBpeModel::null()), |t| t.model);
        let chain = tables.as_ref().map_or_else(Default::default, |t| t.chain);
        let spm_cuts = plan.map_or(
            GtSpmCuts::disabled(),
            |plan| each_family!(plan, plan => plan.host_cuts()),
        );
        let piece_cuts = PieceCuts::of(&model, &chain, spm_cuts);
        let added = if settings.add_special_tokens {
            self.added_special_tokens(false)
        } else {
            0
        };
        let job = Job {
            model,
            chain,
            spm_cuts,
            template,
            truncation: settings.truncation.as_ref().map(|t| Truncation {
                max_seq: (t.max_length - added).min(u32::MAX as usize) as u32,
                left: t.direction == TruncationDirection::Left,
            }),
            padding: settings.padding.as_ref(),
            outputs: settings.outputs,
        };
        // Rows are prepared a group at a time, each group's chunks queued
        // before the next is prepared: the host prepares group k + 1 while
        // the device runs group k (a call of 100 MB overlaps too).
        let (mut prepare_ms, mut on_host) = (0.0, 0);
        let group_bytes = dev.chunk_bytes().min(PREPARE_GROUP_BYTES);
        let sizes = inputs.iter().map(|input| input.0.len());
        let mut groups = pipeline::groups_of_bytes(sizes, group_bytes)
            .into_iter()
            .map(|group| {
                let clock = std::time::Instant::now();
                // Each row is cut into pieces as soon as it is prepared, while
                // its text is in the cache (a search later missed it once per kB).
                let rows = pool::current().map(group.len(), |i| {
                    let (row, host) = self.device_row(inputs[group.start + i].0, plan, settings)?;
                    let cuts = piece_cuts.of_row(&row);
                    Ok::<_, Error>((row, (host, cuts)))
                })?;
                let (rows, (host, cuts)): (Vec<Row<'_>>, (Vec<bool>, _)) = rows.into_iter().unzip();
                on_host += host.iter().filter(|&&host| host).count();
                prepare_ms += clock.elapsed().as_secs_f64() * 1e3;
                Ok(RowGroup { rows, cuts })
            });
        let batch = pipeline::encode(dev, &job, inputs.len(), &mut groups);
        drop(groups);
        let mut batch = batch?;
        batch.timings.prepare_ms = prepare_ms;
        // After the pipeline's scratch is freed: on a GPU the frees are queued
        // on the stream, not host work, so the emulator counts them as device time.
        batch.timings.emulated_device_ms = dev.emulated_device_ms();
        batch.timings.emulated_peak_bytes = dev.emulated_peak_bytes();
        batch.timings.rows_on_host = on_host;
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

    /// A row for the device: its normalized text (byte-level; SentencePiece
    /// BPE without a pre-tokenizer, as `SpmPlan::device_piece` gives it) or
    /// words (families whose words the host cuts) when the device can encode it,
    /// cut at added tokens (whose ids the host splices in) where the text has
    /// them, else the ids of the CPU engine (fast or exact path); true when
    /// the host encoded it whole.
    fn device_row<'t>(
        &self,
        text: &'t str,
        plan: Option<&FastPlan>,
        settings: &Settings,
    ) -> Result<(Row<'t>, bool)> {
        let row = plan.and_then(|plan| each_family!(plan, plan => plan.device_row(self, text)));
        match row {
            Some(row) => Ok((row, false)),
            None => {
                let ids = self.encode_sequence(text, 0, settings)?.get_ids().to_vec();
                Ok((Row::Ids(ids), true))
            }
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

/// A family's part of a device call on the host: its rows (`Engine::device_row`)
/// and the host tables the device's piece cuts read.
trait DeviceRows {
    /// `text` as a device row, or None when only the host can encode it.
    fn device_row<'t>(&self, engine: &Engine, text: &'t str) -> Option<Row<'t>>;

    /// The host's tables of where pieces may be cut (`PieceCuts`);
    /// SentencePiece's, disabled for the others.
    fn host_cuts(&self) -> GtSpmCuts {
        GtSpmCuts::disabled()
    }
}

impl DeviceRows for ByteLevelPlan {
    fn device_row<'t>(&self, engine: &Engine, text: &'t str) -> Option<Row<'t>> {
        match self.prepare(text) {
            Some(normalized) => Some(Row::Text(normalized)),
            None if self.has_added_token(text) => {
                byte_level_parts(self, engine.hf.get_added_vocabulary(), text)
            }
            None => None,
        }
    }
}

impl DeviceRows for SpmPlan {
    fn device_row<'t>(&self, _: &Engine, text: &'t str) -> Option<Row<'t>> {
        match self.words.is_identity() {
            // Without a pre-tokenizer the device cuts the words (gt_spm_cut_words).
            true => text_row(self, text, |piece| self.device_piece(piece)),
            false => words_row(|part| cpu::each_part(self, text, part)),
        }
    }

    fn host_cuts(&self) -> GtSpmCuts {
        self.device_views().1
    }
}

impl DeviceRows for UnigramPlan {
    fn device_row<'t>(&self, _: &Engine, text: &'t str) -> Option<Row<'t>> {
        match self.device_cuts_words() {
            // WhitespaceSplit + Metaspace: the device cuts the words (gt_metaspace_words).
            true => text_row(self, text, |piece| self.device_piece(piece)),
            false => words_row(|part| cpu::each_part(self, text, part)),
        }
    }
}

impl DeviceRows for WordPiecePlan {
    fn device_row<'t>(&self, _: &Engine, text: &'t str) -> Option<Row<'t>> {
        wordpiece_row(self, text)
    }
}

/// A byte-level text that holds added tokens as a device row: each stretch
/// of text between them for the device, their ids from the host; None when
/// only the exact path can encode it.
fn byte_level_parts<'t>(
    plan: &ByteLevelPlan,
    added: &AddedVocabulary,
    text: &str,
) -> Option<Row<'t>> {
    let mut parts = Vec::new();
    let fine = cpu::encode::each_segment(plan, added, text, |segment, _| match segment {
        Segment::Text(piece, _) => parts.push(Row::Text(Cow::Owned(piece.into_owned()))),
        Segment::Added(id, _) => push_id(&mut parts, id),
    });
    fine.then_some(Row::Parts(parts))
}

/// A WordPiece row: pieces of its text the device normalizes (or the host,
/// `WordPiecePlan::kernel_text`) and encodes, cut at added tokens (their ids
/// from the host) as the crate splits them; None when only the host can (an
/// added token that strips spaces, a character the crate's NFD could reorder).
fn wordpiece_row<'t>(plan: &WordPiecePlan, text: &'t str) -> Option<Row<'t>> {
    // None: an added token that strips spaces or matches single words.
    let pieces = PlainAdded::pieces(plan.plain_added.as_ref(), text)?;
    let words = |piece: &'t str| {
        let text = plan.kernel_text(piece)?;
        let ends = plan.piece_ends(&text, pipeline::PIECE_BYTES)?;
        Some(Row::Words { text, ends })
    };
    if let [(piece, _, None)] = pieces[..] {
        return words(piece);
    }
    let mut parts = Vec::new();
    for (piece, _, token) in pieces {
        match token {
            Some((id, _)) => push_id(&mut parts, id),
            None => parts.push(words(piece)?),
        }
    }
    Some(Row::Parts(parts))
}

/// A row for the device to cut into words (SentencePiece BPE, Unigram's
/// Metaspace words): each piece between added tokens as the device reads it
/// (`device_piece`: the plan's), the added tokens' ids from the host between them.
fn text_row<'t>(
    plan: &impl WordPlan,
    text: &'t str,
    device_piece: impl Fn(&'t str) -> Option<DevicePiece<'t>>,
) -> Option<Row<'t>> {
    let mut parts = Vec::new();
    let fine = cpu::each_normalized_part(plan, text, device_piece, |part| match part {
        NormalizedPart::Added(id) => push_id(&mut parts, id),
        NormalizedPart::Text(piece, _) if piece.text.is_empty() => {}
        NormalizedPart::Text(DevicePiece { text, spaced }, _) => parts.push(match spaced {
            true => Row::Spaced(text),
            false => Row::Text(text),
        }),
    });
    if !fine {
        return None;
    }
    Some(match parts.len() {
        0 => Row::Text(Cow::Borrowed("")),
        1 => parts.pop()?,
        _ => Row::Parts(parts),
    })
}

/// The words a per-word model family makes of a text (`each_part` passes
/// them, returning false when the text needs the exact path), as a device
/// row: its words, and the ids of the added tokens between them.
fn words_row<'t>(each_part: impl FnOnce(&mut dyn FnMut(Part<'_>)) -> bool) -> Option<Row<'t>> {
    let mut parts = Vec::new();
    let mut fits = true;
    let fine = each_part(&mut |part| match part {
        Part::Added(id) => push_id(&mut parts, id),
        Part::Word(word) => {
            if !matches!(parts.last(), Some(Row::Words { .. })) {
                parts.push(Row::Words {
                    text: Cow::Owned(String::new()),
                    ends: Vec::new(),
                });
            }
            if let Some(Row::Words { text, ends }) = parts.last_mut() {
                let text = text.to_mut();
                text.push_str(word);
                fits &= u32::try_from(text.len()).is_ok();
                ends.push(text.len() as u32);
            }
        }
    });
    if !(fine && fits) {
        return None;
    }
    Some(match parts.len() {
        0 => Row::Words {
            text: Cow::Borrowed(""),
            ends: Vec::new(),
        },
        1 => parts.pop()?,
        _ => Row::Parts(parts),
    })
}

/// Appends an added token's id to a row's parts (to the ids part it ends with, if any).
fn push_id(parts: &mut Vec<Row<'_>>, id: u32) {
    match parts.last_mut() {
        Some(Row::Ids(ids)) => ids.push(id),
        _ => parts.push(Row::Ids(vec![id])),
    }
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
    fn normalized_text_goes_to_the_device_and_added_tokens_ids_come_from_the_host() {
        let engine = Engine::from_json(SPM).unwrap();
        let plan = engine.fast.as_ref().ok().filter(|p| p.runs_on_device());
        let settings = Settings::default();
        // The device cuts the words (gt_spm_cut_words) and reads each space
        // as "▁" (the normalizer's Replace); the layout writes a space before
        // the text (its Prepend), which is not copied.
        match engine.device_row("a ab", plan, &settings).unwrap().0 {
            Row::Spaced(Cow::Borrowed(text)) => assert_eq!(text, "a ab"),
            _ => panic!("expected borrowed text for the device, after a space"),
        }
        // Text around an added token: the pieces for the device, its id between them.
        match engine.device_row("a<s>a<s><s>", plan, &settings).unwrap().0 {
            Row::Parts(parts) => {
                let shapes: Vec<String> = parts
                    .iter()
                    .map(|part| match part {
                        Row::Text(text) => format!("text {text}"),
                        Row::Spaced(text) => format!("spaced {text}"),
                        Row::Ids(ids) => format!("ids {ids:?}"),
                        _ => "other".into(),
                    })
                    .collect();
                // (The normalizer prepends ▁ to every piece between added tokens, as the crate does.)
                assert_eq!(shapes, ["spaced a", "ids [4]", "spaced a", "ids [4, 4]"]);
            }
            _ => panic!("expected parts"),
        }
        assert!(matches!(
            engine.device_row("<s>", plan, &settings).unwrap().0,
            Row::Ids(ids) if ids == [4]
        ));
    }

    #[test]
    fn metaspace_words_are_cut_on_the_device_from_a_slot_before_each() {
        let unigram = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "post_processor": null, "decoder": null,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}]},
            "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
                      "vocab": [["<unk>", 0.0], ["▁", -1.0], ["a", -2.0], ["▁a", -1.5], ["b", -2.0]]}}"#;
        let engine = Engine::from_json(unigram).unwrap();
        let plan = engine.fast.as_ref().ok().filter(|p| p.runs_on_device());
        let row = |text| {
            engine
                .device_row(text, plan, &Settings::default())
                .unwrap()
                .0
        };
        // A space before text that does not start with whitespace: its first word's slot.
        assert!(matches!(row("a b"), Row::Spaced(Cow::Borrowed(text)) if text == "a b"));
        assert!(matches!(row("\ta"), Row::Text(text) if text == "\ta"));
        use crate::cuda::stream::DeviceStreamExt;
        let dev = crate::cuda::emulator::Emulator::traced(1 << 20);
        let texts = ["a b", "\ta  ▁a", "ab▁", "", " ", "b\u{3000}a"];
        let inputs: Vec<Input<'_>> = texts.iter().map(|t| (*t, None)).collect();
        let settings = Settings::default();
        let on_device = engine.encode_batch_on(&dev, &inputs, &settings).unwrap();
        let on_cpu = engine.encode_batch(&inputs, &settings).unwrap();
        let ids = dev
            .download_vec::<i64>(&on_device.fields[0].1, 0, on_cpu.ids.len())
            .unwrap();
        assert_eq!(ids, on_cpu.ids);
    }

    #[test]
    fn a_chunk_of_more_elements_than_one_launch_takes_is_packed_in_several() {
        use crate::cuda::emulator::{Emulator, Op};
        use crate::cuda::pipeline::PACK_ELEMENTS_FOR_TESTS;
        use crate::cuda::stream::DeviceStreamExt;
        use crate::kernels::Kernel;
        let engine = Engine::from_json(SPM).unwrap();
        let texts = ["a ab b", "ab ab ab ab", "<s>a", "", "b a b a b a b a b a"];
        let inputs: Vec<Input<'_>> = texts.iter().map(|t| (*t, None)).collect();
        let settings = Settings {
            padding: Some(tokenizers::PaddingParams {
                pad_id: 9,
                ..Default::default()
            }),
            outputs: crate::layout::Outputs {
                attention_mask: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let want = engine.encode_batch(&inputs, &settings).unwrap();
        // 7 elements per launch: a row's elements span launches too.
        PACK_ELEMENTS_FOR_TESTS.with(|most| most.set(7));
        let dev = Emulator::traced(1 << 20);
        let got = engine.encode_batch_on(&dev, &inputs, &settings);
        PACK_ELEMENTS_FOR_TESTS.with(|most| most.set(u32::MAX as usize));
        let got = got.unwrap();
        let read = |buf| dev.download_vec::<i64>(buf, 0, want.ids.len()).unwrap();
        assert_eq!(read(&got.fields[0].1), want.ids);
        assert_eq!(Some(read(&got.fields[1].1)), want.attention_mask);
        let launches = dev
            .trace()
            .iter()
            .filter(|op| **op == Op::Launch(Kernel::Pack))
            .count();
        assert_eq!(launches, want.ids.len().div_ceil(7));
    }

    #[test]
    fn one_pinned_upload_per_chunk_and_one_wait_per_call() {
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
        let count = |op: &dyn Fn(&Op) -> bool| trace.iter().filter(|o| op(o)).count();
        let chunks = count(&|op| *op == Op::Launch(Kernel::RowSpans));
        assert!(chunks > 2, "expected several chunks: {trace:?}");
        // One read of every row's length, after every chunk is queued: the
        // host lays out chunk k + 1 while the device runs chunk k.
        let reads: Vec<usize> = (0..trace.len())
            .filter(|&i| matches!(trace[i], Op::Download(_)))
            .collect();
        assert_eq!(reads.len(), 1, "{trace:?}");
        let last_row_spans = trace
            .iter()
            .rposition(|op| *op == Op::Launch(Kernel::RowSpans))
            .unwrap();
        assert!(reads[0] > last_row_spans, "{trace:?}");
        // Each chunk's inputs are one upload, straight before its first kernel.
        let before: Vec<&Op> = trace[..reads[0]]
            .iter()
            .filter(|op| !matches!(op, Op::Launch(_)))
            .collect();
        assert_eq!(before.len(), chunks, "one upload per chunk: {trace:?}");
        for (i, op) in trace[..reads[0]].iter().enumerate() {
            if matches!(op, Op::Upload(_)) {
                assert!(matches!(trace[i + 1], Op::Launch(_)), "{trace:?}");
            }
        }
        // Then the row starts and lengths (handed out with the results),
        // packing, and the one sync that ends the call.
        let after = &trace[reads[0] + 1..];
        assert_eq!(
            after
                .iter()
                .filter(|op| matches!(op, Op::Upload(_)))
                .count(),
            2,
            "{trace:?}"
        );
        assert_eq!(
            count(&|op| *op == Op::Launch(Kernel::Pack)),
            chunks,
            "{trace:?}"
        );
        assert_eq!(count(&|op| *op == Op::Synchronize), 1, "{trace:?}");
        assert_eq!(
            handed_out_after_the_work(&trace),
            3,
            "ids, row starts, lengths"
        );
    }

    /// The results' buffers are exported only after the call's one sync, so
    /// an error before it frees them in the call's stream order (after the
    /// copies and kernels still using them); returns how many there are.
    fn handed_out_after_the_work(trace: &[crate::cuda::emulator::Op]) -> usize {
        use crate::cuda::emulator::Op;
        let exported = |op: &Op| matches!(op, Op::Export(_));
        let sync = trace.iter().rposition(|op| *op == Op::Synchronize);
        let sync = sync.unwrap_or_else(|| panic!("no sync: {trace:?}"));
        assert!(!trace[..sync].iter().any(exported), "{trace:?}");
        assert!(trace[sync + 1..].iter().all(exported), "{trace:?}");
        trace.len() - sync - 1
    }

    #[test]
    fn results_the_host_encoded_are_handed_out_after_their_copies() {
        use crate::cuda::emulator::Emulator;
        let engine = Engine::from_json(SPM).unwrap();
        let dev = Emulator::traced(24);
        // Pairs are encoded by the CPU engine and copied to the device.
        let inputs: Vec<Input<'_>> = vec![("a ab", Some("b a")), ("ab", Some(""))];
        let batch = engine
            .encode_batch_on(&dev, &inputs, &Settings::default())
            .unwrap();
        assert_eq!(batch.timings.rows_on_host, 2);
        assert_eq!(handed_out_after_the_work(&dev.trace()), 3);
    }
}
