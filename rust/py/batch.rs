//! `CoreBatch`: a packed batch handed to Python as tensors (DLPack-capable) or
//! as plain lists. Padded batches with equal rows are `[B, L]`; anything else
//! is ragged: flat values plus `row_offsets` (CSR, B + 1 entries). Tensors share
//! the batch's buffers: nothing is copied on the way out.

use super::tensor::{HostBuffer, Tensor};
use crate::engine::pack::Batch;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::Arc;

/// A packed batch of encodings.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct CoreBatch {
    /// Present fields in transformers' order, each one buffer for all rows.
    fields: Vec<(&'static str, Arc<HostBuffer>)>,
    row_starts: Arc<HostBuffer>,
    lengths: Arc<HostBuffer>,
    width: Option<usize>,
}

impl CoreBatch {
    pub fn new(batch: Batch) -> Self {
        let Batch {
            row_starts,
            lengths,
            ids,
            attention_mask,
            type_ids,
            special_tokens_mask,
            offsets,
            width,
        } = batch;
        let fields = [
            ("input_ids", Some(ids)),
            ("attention_mask", attention_mask),
            ("token_type_ids", type_ids),
            ("special_tokens_mask", special_tokens_mask),
            ("offset_mapping", offsets),
        ]
        .into_iter()
        .filter_map(|(name, values)| Some((name, HostBuffer::new(values?))))
        .collect();
        CoreBatch {
            fields,
            row_starts: HostBuffer::new(row_starts),
            lengths: HostBuffer::new(lengths),
            width,
        }
    }

    fn field(&self, name: &str) -> Option<&Arc<HostBuffer>> {
        self.fields.iter().find(|(n, _)| *n == name).map(|(_, b)| b)
    }

    fn n_rows(&self) -> usize {
        self.lengths.values().len()
    }
}

/// Values per token: offsets are (start, end) pairs.
fn per_token(name: &str) -> usize {
    if name == "offset_mapping" {
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
            None => vec![buffer.values().len() / k],
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

    /// Every field as a list of per-row lists (offsets as (start, end) tuples).
    fn to_lists<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        let starts = self.row_starts.values();
        for (name, buffer) in &self.fields {
            let values = buffer.values();
            let k = per_token(name);
            let rows = starts
                .windows(2)
                .map(|w| {
                    let row = &values[k * w[0] as usize..k * w[1] as usize];
                    if k == 2 {
                        let pairs = row
                            .chunks_exact(2)
                            .map(|p| PyTuple::new(py, [p[0], p[1]]))
                            .collect::<PyResult<Vec<_>>>()?;
                        PyList::new(py, pairs)
                    } else {
                        PyList::new(py, row)
                    }
                })
                .collect::<PyResult<Vec<_>>>()?;
            out.set_item(*name, PyList::new(py, rows)?)?;
        }
        Ok(out)
    }
}
