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
use crate::cuda::pipeline::{self, DeviceBatch, DeviceTables, Job, Row, Truncation};
use crate::cuda::stream::{DeviceStream, Location};
use crate::error::Result;
use crate::kernels::GtBpeModel;
use crate::plan::bytelevel::ByteLevelPlan;
use crate::plan::FastPlan;
use crate::pool;
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
        let Some(template) = self.packable_template(inputs, settings) else {
            return DeviceBatch::upload(dev, self.encode_batch(inputs, settings)?);
        };

        let plan = self
            .fast
            .as_ref()
            .ok()
            .and_then(FastPlan::byte_level)
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
}
