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

use super::{encoding_from_ids, Engine, Input, Settings};
use crate::cuda::pipeline::{self, DeviceBatch, DeviceTables, Job, Row, Truncation};
use crate::cuda::stream::{DeviceStream, Location};
use crate::error::Result;
use crate::kernels::{GtBpeModel, GtTemplate, MAX_TEMPLATE};
use crate::plan::bytelevel::ByteLevelPlan;
use crate::pool;
use std::sync::{Arc, Mutex};
use tokenizers::{TruncationDirection, TruncationStrategy};

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
        let template = self.single_template(settings.add_special_tokens);
        let packable = !settings.outputs.offsets
            && inputs.iter().all(|(_, pair)| pair.is_none())
            && settings
                .truncation
                .as_ref()
                .is_none_or(|t| t.strategy != TruncationStrategy::OnlySecond);
        let Some(template) = template.filter(|_| packable) else {
            return DeviceBatch::upload(dev, self.encode_batch(inputs, settings)?);
        };

        let plan = self
            .fast
            .as_ref()
            .ok()
            .filter(|p| p.scanner_chain.is_some());
        let tables = plan.map(|p| self.tables_on(dev, p)).transpose()?;
        let rows = pool::current().map(inputs.len(), |i| {
            self.device_row(inputs[i].0, plan, settings)
        })?;
        let added = if settings.add_special_tokens {
            self.added_special_tokens(false)
        } else {
            0
        };
        let job = Job {
            model: tables.as_ref().map_or_else(GtBpeModel::null, |t| t.model),
            splits: plan.and_then(|p| p.scanner_chain).unwrap_or_default(),
            rows,
            template,
            truncation: settings.truncation.as_ref().map(|t| Truncation {
                max_seq: (t.max_length - added).min(u32::MAX as usize) as u32,
                left: t.direction == TruncationDirection::Left,
            }),
            padding: settings.padding.as_ref(),
            outputs: settings.outputs,
        };
        pipeline::encode(dev, &job)
    }

    /// A row for the device: its normalized text when the device can encode
    /// it, else the ids of the CPU engine (fast or exact path).
    fn device_row<'t>(
        &self,
        text: &'t str,
        plan: Option<&ByteLevelPlan>,
        settings: &Settings,
    ) -> Result<Row<'t>> {
        if let Some(prepared) = plan.and_then(|p| p.prepare(text)) {
            return Ok(Row::Text(prepared));
        }
        Ok(Row::Ids(
            self.encode_sequence(text, 0, settings)?.get_ids().to_vec(),
        ))
    }

    /// The plan's tables on `dev`, uploaded at first use.
    fn tables_on(&self, dev: &dyn DeviceStream, plan: &ByteLevelPlan) -> Result<Arc<DeviceTables>> {
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

    /// The special tokens the post-processor puts around a single sequence,
    /// found by asking it (sequences of 1 and 3 sentinel ids), or None when
    /// its output is not "prefix + sequence + suffix" with special tokens
    /// marked as such.
    pub fn single_template(&self, add_special_tokens: bool) -> Option<GtTemplate> {
        // A template the crate cannot apply (it would panic) is not asked.
        if let Some((_, always)) = &self.template_problems[0] {
            if *always || add_special_tokens {
                return None;
            }
        }
        const SEQ: [u32; 3] = [u32::MAX - 3, u32::MAX - 2, u32::MAX - 1];
        let run = |n: usize| {
            self.post_process(
                encoding_from_ids(SEQ[..n].to_vec(), 0),
                None,
                add_special_tokens,
            )
            .ok()
        };
        let (one, three) = (run(1)?, run(3)?);
        let at = one.get_ids().iter().position(|&id| id == SEQ[0])?;
        let (prefix, suffix) = (&one.get_ids()[..at], &one.get_ids()[at + 1..]);
        let expected: Vec<u32> = prefix.iter().chain(&SEQ).chain(suffix).copied().collect();
        if three.get_ids() != expected || prefix.len() + suffix.len() > MAX_TEMPLATE {
            return None;
        }
        let seq_type_id = one.get_type_ids()[at];
        let in_seq = |k: usize| (at..at + SEQ.len()).contains(&k);
        let consistent = (0..three.len()).all(|k| {
            three.get_attention_mask()[k] == 1
                && three.get_special_tokens_mask()[k] == u32::from(!in_seq(k))
                && (!in_seq(k) || three.get_type_ids()[k] == seq_type_id)
        });
        if !consistent || prefix.iter().chain(suffix).any(|id| SEQ.contains(id)) {
            return None;
        }
        let mut template = GtTemplate {
            n_prefix: prefix.len() as u32,
            n_suffix: suffix.len() as u32,
            seq_type_id,
            ..Default::default()
        };
        let specials = (0..three.len()).filter(|&k| !in_seq(k));
        for (slot, k) in specials.enumerate() {
            template.ids[slot] = three.get_ids()[k];
            template.type_ids[slot] = three.get_type_ids()[k];
        }
        Some(template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BERTISH: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 0, "content": "[CLS]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true},
                       {"id": 5, "content": "[SEP]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}},
                   {"SpecialToken": {"id": "[SEP]", "type_id": 2}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]},
                           "[SEP]": {"id": "[SEP]", "ids": [5], "tokens": ["[SEP]"]}}},
      "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[CLS]": 0, "a": 1, "b": 2, "c": 3, "[UNK]": 4, "[SEP]": 5},
                "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn template_is_read_from_the_post_processor() {
        let engine = Engine::from_json(BERTISH).unwrap();
        let t = engine.single_template(true).unwrap();
        assert_eq!((t.n_prefix, t.n_suffix, t.seq_type_id), (1, 1, 1));
        assert_eq!((&t.ids[..2], &t.type_ids[..2]), (&[0, 5][..], &[0, 2][..]));
        // Without special tokens the crate still gives the sequence $A's type id.
        let bare = engine.single_template(false).unwrap();
        assert_eq!((bare.n_prefix, bare.n_suffix, bare.seq_type_id), (0, 0, 1));
    }
}
