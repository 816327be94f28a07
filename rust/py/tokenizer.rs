//! `CoreTokenizer`: the native half of `gpu_tok.Tokenizer`. Frozen (immutable)
//! and `Sync`: one instance is shared by any number of threads, with the GIL
//! released for all work once the input strings are borrowed.

use super::batch::CoreBatch;
use super::errors::detach_work;
use super::id_ints::IdInts;
use super::inputs;
use super::settings::{call_settings, check_pairs, Padding, Truncation};
use crate::engine::device::{Device, Placed};
use crate::engine::Engine;
use crate::error::Error;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use std::sync::Arc;

/// The kind of device `device` names ("cpu", "cuda" or "emulator"), or a
/// `ValueError`: the engine's one parser of device strings, for the Python
/// layer's checks before a call.
#[pyfunction]
pub fn device_kind(device: &str) -> PyResult<&'static str> {
    Device::parse(device)
        .map(|device| device.kind())
        .map_err(|err| PyValueError::new_err(err.to_string()))
}

/// A loaded tokenizer (immutable).
#[pyclass(frozen, weakref, module = "gpu_tok._core")]
pub struct CoreTokenizer {
    engine: Arc<Engine>,
    /// The ints of its ids, shared by the lists it returns.
    ints: Arc<IdInts>,
}

#[pymethods]
impl CoreTokenizer {
    /// Builds a tokenizer from the text of a tokenizer.json (GIL released while
    /// parsing). `keep_added_ids`: the text is this module's own `to_json`,
    /// whose added tokens keep their ids (the crate's loader renumbers the
    /// ones past an id gap).
    #[staticmethod]
    #[pyo3(signature = (json, keep_added_ids=false))]
    fn from_str(py: Python<'_>, json: &str, keep_added_ids: bool) -> PyResult<Self> {
        let engine = detach_work(py, || match keep_added_ids {
            true => Engine::from_own_json(json),
            false => Engine::from_json(json),
        })?;
        Ok(CoreTokenizer::new(engine))
    }

    /// Encodes a batch. Settings are explicit; the Python layer resolves defaults.
    /// `device`: "cpu", "cuda", "cuda:N", or "emulator[:chunk_bytes[:memory_bytes]]"
    /// (the CUDA pipeline run on the host, for tests; `memory_bytes` makes
    /// allocations past it fail as out of memory), parsed by the engine
    /// (`engine::device`). `chunk_bytes`: text bytes per device chunk, instead
    /// of the device's own choice (`cuda` sizes chunks from free memory); it
    /// has no effect on the CPU. `host_results`: the caller wants the results
    /// in host memory (`device="auto"`), so a device out of memory computes the
    /// call on the CPU with a `CpuFallbackWarning` (at `stacklevel`, counted
    /// from the Python function that calls this one) instead of raising.
    #[pyo3(signature = (texts, pairs=None, *, add_special_tokens=true, truncation=None, padding=None,
                        attention_mask=false, type_ids=false, special_tokens_mask=false, offsets=false,
                        device="cpu", dtype="int64", chunk_bytes=None, host_results=false, stacklevel=1))]
    #[allow(clippy::too_many_arguments)]
    fn encode_batch(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        pairs: Option<&Bound<'_, PyAny>>,
        add_special_tokens: bool,
        truncation: Option<PyRef<'_, Truncation>>,
        padding: Option<PyRef<'_, Padding>>,
        attention_mask: bool,
        type_ids: bool,
        special_tokens_mask: bool,
        offsets: bool,
        device: &str,
        dtype: &str,
        chunk_bytes: Option<usize>,
        host_results: bool,
        stacklevel: i32,
    ) -> PyResult<CoreBatch> {
        let device = Device::parse(device).map_err(|err| PyValueError::new_err(err.to_string()))?;
        if chunk_bytes == Some(0) {
            return Err(PyValueError::new_err("chunk_bytes must be positive"));
        }
        let (settings, dtype) = call_settings(
            add_special_tokens,
            truncation,
            padding,
            attention_mask,
            type_ids,
            special_tokens_mask,
            offsets,
            dtype,
        )?;
        let firsts = inputs::Texts::read(texts, "texts")?;
        let seconds = pairs
            .map(|p| inputs::Texts::read(p, "text_pair"))
            .transpose()?;
        check_pairs(firsts.len(), seconds.as_ref().map(|s| s.len()))?;
        let first_utf8 = firsts.utf8(py, "texts")?;
        let second_utf8 = seconds
            .as_ref()
            .map(|s| s.utf8(py, "text_pair"))
            .transpose()?;
        let first_strs = first_utf8.strs();
        let second_strs = second_utf8.as_ref().map(|s| s.strs());
        let rows: Vec<(&str, Option<&str>)> = match &second_strs {
            Some(seconds) => first_strs
                .iter()
                .zip(seconds)
                .map(|(a, b)| (*a, Some(*b)))
                .collect(),
            None => first_strs.iter().map(|a| (*a, None)).collect(),
        };
        let engine = &self.engine;
        let (placed, fallback) = detach_work(py, || {
            engine.encode_on(device, chunk_bytes, host_results, &rows, &settings)
        })?;
        if let Some(fallback) = fallback {
            let category = py
                .import("gpu_tok._errors")?
                .getattr("CpuFallbackWarning")?;
            let message = std::ffi::CString::new(fallback.message())
                .map_err(|err| PyValueError::new_err(err.to_string()))?;
            PyErr::warn(py, &category, &message, stacklevel)?;
        }
        match placed {
            Placed::Host(batch) => detach_work(py, || CoreBatch::new(batch, dtype))
                .map(|batch| batch.with_id_ints(&self.ints)),
            Placed::Device(batch) => Ok(CoreBatch::from_device(batch)),
        }
    }

    /// The ids of one text as a list, on the calling thread: what
    /// `encode_batch([text], add_special_tokens=...)` gives as its only row
    /// with no truncation or padding (`encode_one`).
    fn encode_ids<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'py, PyString>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        super::encode_one::encode_ids(py, &self.engine, &self.ints, text, add_special_tokens)
    }

    /// Truncation stored in tokenizer.json, or None.
    fn file_truncation(&self) -> Option<Truncation> {
        self.engine.file_truncation().map(Truncation::from)
    }

    /// Padding stored in tokenizer.json, or None.
    fn file_padding(&self) -> Option<Padding> {
        self.engine.file_padding().map(Padding::from)
    }

    /// tokenizer.json text of this tokenizer (for pickling; GIL released).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        let engine = &self.engine;
        detach_work(py, || engine.to_json())
    }

    /// This tokenizer with tokens added (a JSON list of `added_tokens`
    /// entries without ids: content and the five flags), as the crate's
    /// `add_tokens` adds them, and how many were added (GIL released).
    fn with_added_tokens(&self, py: Python<'_>, tokens: &str) -> PyResult<(Self, usize)> {
        let tokens: Vec<tokenizers::AddedToken> = serde_json::from_str(tokens)
            .map_err(|err| PyValueError::new_err(format!("unreadable added tokens: {err}")))?;
        let engine = &self.engine;
        let (engine, added) = detach_work(py, || engine.with_added_tokens(tokens))?;
        Ok((CoreTokenizer::new(engine), added))
    }

    /// Special tokens the post-processor adds to one sequence or a pair.
    fn num_special_tokens_to_add(&self, is_pair: bool) -> usize {
        self.engine.added_special_tokens(is_pair)
    }

    /// True when the post-processor gives pairs a second token type (BERT-style).
    fn uses_token_type_ids(&self) -> bool {
        self.engine.uses_type_ids()
    }

    /// Text of `ids` (a list or tuple of ints, checked here).
    #[pyo3(signature = (ids, skip_special_tokens=true))]
    fn decode(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        skip_special_tokens: bool,
    ) -> PyResult<String> {
        let ids = inputs::token_ids(ids, "ids")?;
        let engine = &self.engine;
        detach_work(py, || {
            engine
                .hf()
                .decode(&ids, skip_special_tokens)
                .map_err(Error::tokenizers)
        })
    }

    /// Text of each row (a list of lists or tuples of ints, checked here).
    #[pyo3(signature = (rows, skip_special_tokens=true))]
    fn decode_batch(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        skip_special_tokens: bool,
    ) -> PyResult<Vec<String>> {
        let rows = rows
            .cast::<PyList>()
            .map_err(|_| PyTypeError::new_err("rows must be a list of id lists"))?
            .iter()
            .enumerate()
            .map(|(i, row)| inputs::token_ids(&row, &format!("sequences[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let engine = &self.engine;
        detach_work(py, || engine.decode_batch(&rows, skip_special_tokens))
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.engine.hf().token_to_id(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.engine.hf().id_to_token(id)
    }

    #[pyo3(signature = (with_added_tokens=true))]
    fn get_vocab<'py>(
        &self,
        py: Python<'py>,
        with_added_tokens: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let vocab = self.engine.hf().get_vocab(with_added_tokens);
        let out = PyDict::new(py);
        for (token, id) in vocab {
            out.set_item(token, id)?;
        }
        Ok(out)
    }

    #[pyo3(signature = (with_added_tokens=true))]
    fn get_vocab_size(&self, with_added_tokens: bool) -> usize {
        self.engine.hf().get_vocab_size(with_added_tokens)
    }

    /// Added tokens as (id, content, special), sorted by id.
    fn added_tokens(&self) -> Vec<(u32, String, bool)> {
        let mut tokens: Vec<_> = self
            .engine
            .hf()
            .get_added_tokens_decoder()
            .into_iter()
            .map(|(id, t)| (id, t.content, t.special))
            .collect();
        tokens.sort_by_key(|t| t.0);
        tokens
    }

    /// The share of `texts` the fast path encodes whole, with or without
    /// offsets (the rest take the exact path): for the form census and tests.
    /// A text the crate panics on (its added-token split can) is not fast:
    /// the exact path raises for it.
    #[pyo3(signature = (texts, offsets=false))]
    fn fast_path_share(&self, py: Python<'_>, texts: Vec<String>, offsets: bool) -> f64 {
        if texts.is_empty() {
            return 1.0;
        }
        let takes_fast_path = |text: &String| {
            let ask = || self.engine.takes_fast_path(text, offsets);
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(ask)).unwrap_or(false)
        };
        let fast = py.detach(|| texts.iter().filter(|text| takes_fast_path(text)).count());
        fast as f64 / texts.len() as f64
    }

    /// Per stage: (stage, component, path, reason). See `plan`.
    fn plan(&self) -> Vec<(String, String, String, String)> {
        self.engine
            .plan_report()
            .stages
            .into_iter()
            .map(|s| {
                (
                    s.stage.to_string(),
                    s.component,
                    s.path.to_string(),
                    s.reason,
                )
            })
            .collect()
    }
}

impl CoreTokenizer {
    fn new(engine: Engine) -> Self {
        let ints = IdInts::new(engine.hf().get_vocab_size(true));
        CoreTokenizer {
            engine: Arc::new(engine),
            ints: Arc::new(ints),
        }
    }

    /// The engine (for the core's other Python functions).
    pub(super) fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The ints of its ids (for the lists of the core's other functions).
    pub(super) fn id_ints(&self) -> &Arc<IdInts> {
        &self.ints
    }
}
