//! `CoreBatch`: a packed batch handed to Python as tensors (DLPack-capable) or
//! as plain lists. Padded batches with equal rows are `[B, L]`; anything else
//! is ragged: flat values plus `row_offsets` (CSR, B + 1 entries). Tensors share
//! the batch's buffers (host memory, or device memory for a CUDA call):
//! nothing is copied on the way out.

use super::errors::to_py;
use super::id_ints::IdInts;
use super::tensor::{Storage, Tensor, Values};
use crate::engine::device::{DeviceBatch, Timings};
use crate::error::Result;
use crate::layout::{narrow, Batch, Dtype, OFFSET_MAPPING};
use crate::memory;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// A packed batch of encodings.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct CoreBatch {
    /// Present fields in transformers' order, each one buffer for all rows.
    fields: Vec<(&'static str, Arc<Storage>)>,
    row_starts: Arc<Storage>,
    lengths: Arc<Storage>,
    /// Host copies of the row layout (for `to_lists` and shapes).
    host_row_starts: Vec<i64>,
    width: Option<usize>,
    timings: Option<Timings>,
    /// The tokenizer's ints of its ids, for the `input_ids` lists.
    id_ints: Option<Arc<IdInts>>,
}

impl CoreBatch {
    /// A host batch with its fields in `dtype` (int32: narrowed here, an error
    /// naming the field when a value does not fit).
    pub fn new(mut batch: Batch, dtype: Dtype) -> Result<Self> {
        let (row_starts, lengths, width) = (
            std::mem::take(&mut batch.row_starts),
            std::mem::take(&mut batch.lengths),
            batch.width,
        );
        let fields = batch
            .into_fields()
            .map(|(name, values)| {
                let values = match dtype {
                    Dtype::Int64 => Values::Int64(values),
                    Dtype::Int32 => Values::Int32(narrow(&values, name)?),
                };
                Ok((name, Storage::host_values(values)))
            })
            .collect::<Result<_>>()?;
        Ok(CoreBatch {
            fields,
            host_row_starts: row_starts.clone(),
            row_starts: Storage::host(row_starts),
            lengths: Storage::host(lengths),
            width,
            timings: None,
            id_ints: None,
        })
    }

    /// This batch with its `input_ids` lists made from `id_ints`.
    pub fn with_id_ints(mut self, id_ints: &Arc<IdInts>) -> Self {
        self.id_ints = Some(Arc::clone(id_ints));
        self
    }

    /// A batch whose buffers live on a device.
    pub fn from_device(batch: DeviceBatch) -> Self {
        CoreBatch {
            fields: batch
                .fields
                .into_iter()
                .map(|(name, buffer)| (name, Storage::device(buffer, batch.dtype)))
                .collect(),
            host_row_starts: batch.row_starts,
            row_starts: Storage::device(batch.row_starts_buf, Dtype::Int64),
            lengths: Storage::device(batch.lengths_buf, Dtype::Int64),
            width: batch.width,
            timings: Some(batch.timings),
            id_ints: None,
        }
    }

    fn field(&self, name: &str) -> Option<&Arc<Storage>> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, b)| b)
    }

    fn n_rows(&self) -> usize {
        self.host_row_starts.len().saturating_sub(1)
    }
}

/// Bytes of Python objects per token of a field in `to_lists`: an int (32) and
/// the list's pointer to it (8); for offsets, a 2-tuple (64), two ints and the pointer.
const LIST_BYTES_PER_VALUE: [usize; 2] = [40, 136];
/// Bytes of one row's list object.
const LIST_BYTES: usize = 64;

/// Values per token: offsets are (start, end) pairs.
fn per_token(name: &str) -> usize {
    if name == OFFSET_MAPPING {
        2
    } else {
        1
    }
}

#[pymethods]
impl CoreBatch {
    /// Names of the fields present, in transformers' order.
    fn keys(&self) -> Vec<&'static str> {
        self.fields.iter().map(|(n, _)| *n).collect()
    }

    /// Row length after padding when every row has it (a `[B, L]` batch), else None.
    #[getter]
    fn width(&self) -> Option<usize> {
        self.width
    }

    /// Number of rows.
    #[getter]
    fn rows(&self) -> usize {
        self.n_rows()
    }

    /// Field `name` as a tensor: `[B, L]` (`[B, L, 2]` for offsets) when padded
    /// to equal rows, else flat `[N]` (`[N, 2]`). None if the field is absent.
    fn tensor(&self, name: &str) -> Option<Tensor> {
        let buffer = self.field(name)?;
        let k = per_token(name);
        let mut shape = match self.width {
            Some(width) => vec![self.n_rows(), width],
            None => vec![buffer.len() / k],
        };
        if k == 2 {
            shape.push(2);
        }
        Some(Tensor::new(Arc::clone(buffer), shape))
    }

    /// `row_offsets` (CSR, B + 1 entries) as a tensor.
    fn row_offsets(&self) -> Tensor {
        Tensor::new(Arc::clone(&self.row_starts), vec![self.n_rows() + 1])
    }

    /// Tokens per row before padding, as a tensor.
    fn lengths(&self) -> Tensor {
        Tensor::new(Arc::clone(&self.lengths), vec![self.n_rows()])
    }

    /// The batch in host memory: this one when it is there, else a copy.
    fn cpu(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let this = slf.get();
        let on_host = |s: &Arc<Storage>| matches!(**s, Storage::Host(_));
        if this.fields.iter().all(|(_, s)| on_host(s)) && on_host(&this.row_starts) {
            return Ok(slf);
        }
        let py = slf.py();
        let copy = |s: &Arc<Storage>| -> PyResult<Arc<Storage>> {
            Ok(Storage::host_values(py.detach(|| s.host_copy())?))
        };
        let batch = CoreBatch {
            fields: this
                .fields
                .iter()
                .map(|(name, s)| Ok((*name, copy(s)?)))
                .collect::<PyResult<_>>()?,
            row_starts: copy(&this.row_starts)?,
            lengths: copy(&this.lengths)?,
            host_row_starts: this.host_row_starts.clone(),
            width: this.width,
            timings: this.timings,
            id_ints: this.id_ints.clone(),
        };
        Bound::new(py, batch)
    }

    /// Milliseconds spent by a device call: {"kernels_ms", "upload_ms",
    /// "prepare_ms", "rows_on_host" (rows the host encoded whole)}, and
    /// "emulated_device_ms" and "emulated_peak_bytes" (the most device memory
    /// in use at once) from the host emulator; None for a CPU call.
    fn timings<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(t) = self.timings else {
            return Ok(None);
        };
        let out = PyDict::new(py);
        out.set_item("kernels_ms", t.kernels_ms)?;
        out.set_item("upload_ms", t.upload_ms)?;
        out.set_item("prepare_ms", t.prepare_ms)?;
        out.set_item("rows_on_host", t.rows_on_host)?;
        if let Some(ms) = t.emulated_device_ms {
            out.set_item("emulated_device_ms", ms)?;
        }
        if let Some(bytes) = t.emulated_peak_bytes {
            out.set_item("emulated_peak_bytes", bytes)?;
        }
        Ok(Some(out))
    }

    /// Every field as a list of per-row lists (offsets as (start, end) tuples).
    /// Refused first when the lists would not fit in memory: Python's objects
    /// take ~5x the packed buffers, and a failed allocation in the middle of
    /// building them would not be an exception.
    fn to_lists<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let starts = &self.host_row_starts;
        let tokens = *starts.last().unwrap_or(&0) as usize;
        let bytes_per_token: usize = self
            .fields
            .iter()
            .map(|(name, _)| LIST_BYTES_PER_VALUE[per_token(name) - 1])
            .sum();
        let bytes = tokens
            .checked_mul(bytes_per_token)
            .and_then(|b| b.checked_add(self.n_rows() * self.fields.len() * LIST_BYTES));
        memory::check("the output as Python lists", bytes, || {
            "the padding length or the batch, or ask for return_tensors=\"np\" (one buffer, 4 or 8 bytes a value)"
                .into()
        })
        .map_err(|err| to_py(py, err))?;
        let out = PyDict::new(py);
        let _paused = super::lists::GcPause::new(py);
        for (name, buffer) in &self.fields {
            let values = buffer.values()?;
            let id_ints = (*name == "input_ids")
                .then_some(self.id_ints.as_deref())
                .flatten();
            let rows =
                super::lists::rows(py, &values, &self.host_row_starts, per_token(name), id_ints)?;
            out.set_item(*name, rows)?;
        }
        Ok(out)
    }
}
