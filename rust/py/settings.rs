//! `Truncation` and `Padding`: the per-call settings as small frozen classes,
//! checked once when they are made. The Python layer resolves user arguments
//! and tokenizer.json defaults into them (`gpu_tok._settings`); the core only
//! ever receives valid ones, as the `tokenizers` crate's own parameter types.

use crate::engine::Settings;
use crate::layout::{Dtype, Outputs};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tokenizers::{
    PaddingDirection, PaddingParams, PaddingStrategy, TruncationDirection, TruncationParams,
    TruncationStrategy,
};

fn side_name(left: bool) -> &'static str {
    if left {
        "left"
    } else {
        "right"
    }
}

/// "left" -> true, "right" -> false, anything else a ValueError naming `what`.
fn parse_side(what: &str, side: &str) -> PyResult<bool> {
    match side {
        "left" => Ok(true),
        "right" => Ok(false),
        other => Err(PyValueError::new_err(format!(
            "{what} must be 'right' or 'left', not {other:?}"
        ))),
    }
}

/// Truncation of each row: at most `max_length` tokens, special tokens included.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct Truncation {
    pub params: TruncationParams,
}

#[pymethods]
impl Truncation {
    #[new]
    #[pyo3(signature = (max_length, strategy="longest_first", side="right", stride=0))]
    fn new(max_length: usize, strategy: &str, side: &str, stride: usize) -> PyResult<Self> {
        let strategy = match strategy {
            "longest_first" => TruncationStrategy::LongestFirst,
            "only_first" => TruncationStrategy::OnlyFirst,
            "only_second" => TruncationStrategy::OnlySecond,
            other => {
                return Err(PyValueError::new_err(format!(
                    "truncation strategy must be 'longest_first', 'only_first' or 'only_second', not {other:?}"
                )))
            }
        };
        let direction = if parse_side("truncation side", side)? {
            TruncationDirection::Left
        } else {
            TruncationDirection::Right
        };
        Ok(Truncation {
            params: TruncationParams {
                max_length,
                strategy,
                direction,
                stride,
            },
        })
    }

    #[getter]
    fn max_length(&self) -> usize {
        self.params.max_length
    }

    #[getter]
    fn strategy(&self) -> &'static str {
        match self.params.strategy {
            TruncationStrategy::LongestFirst => "longest_first",
            TruncationStrategy::OnlyFirst => "only_first",
            TruncationStrategy::OnlySecond => "only_second",
        }
    }

    #[getter]
    fn side(&self) -> &'static str {
        side_name(self.params.direction == TruncationDirection::Left)
    }

    #[getter]
    fn stride(&self) -> usize {
        self.params.stride
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Truncation>()
            .is_ok_and(|o| self.key() == o.get().key())
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.key())
    }

    fn __repr__(&self) -> String {
        format!(
            "Truncation(max_length={}, strategy='{}', side='{}', stride={})",
            self.max_length(),
            self.strategy(),
            self.side(),
            self.stride()
        )
    }

    /// Pickling: the constructor's arguments.
    fn __getnewargs__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (
            self.max_length(),
            self.strategy(),
            self.side(),
            self.stride(),
        )
            .into_pyobject(py)
    }
}

impl Truncation {
    fn key(&self) -> (usize, &'static str, &'static str, usize) {
        (
            self.max_length(),
            self.strategy(),
            self.side(),
            self.stride(),
        )
    }
}

/// Padding of each row: to a fixed `length`, or (None) to the longest row;
/// then up to a multiple of `pad_to_multiple_of`.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct Padding {
    pub params: PaddingParams,
}

#[pymethods]
impl Padding {
    #[new]
    #[pyo3(signature = (length=None, side="right", pad_to_multiple_of=None, pad_id=0, pad_type_id=0, pad_token=""))]
    fn new(
        length: Option<usize>,
        side: &str,
        pad_to_multiple_of: Option<usize>,
        pad_id: u32,
        pad_type_id: u32,
        pad_token: &str,
    ) -> PyResult<Self> {
        let direction = if parse_side("padding side", side)? {
            PaddingDirection::Left
        } else {
            PaddingDirection::Right
        };
        if pad_to_multiple_of == Some(0) {
            return Err(PyValueError::new_err(
                "pad_to_multiple_of must be a positive integer",
            ));
        }
        Ok(Padding {
            params: PaddingParams {
                strategy: length.map_or(PaddingStrategy::BatchLongest, PaddingStrategy::Fixed),
                direction,
                pad_to_multiple_of,
                pad_id,
                pad_type_id,
                pad_token: pad_token.to_string(),
            },
        })
    }

    /// The fixed length, or None for "the longest row".
    #[getter]
    fn length(&self) -> Option<usize> {
        match self.params.strategy {
            PaddingStrategy::Fixed(n) => Some(n),
            PaddingStrategy::BatchLongest => None,
        }
    }

    #[getter]
    fn side(&self) -> &'static str {
        side_name(matches!(self.params.direction, PaddingDirection::Left))
    }

    #[getter]
    fn pad_to_multiple_of(&self) -> Option<usize> {
        self.params.pad_to_multiple_of
    }

    #[getter]
    fn pad_id(&self) -> u32 {
        self.params.pad_id
    }

    #[getter]
    fn pad_type_id(&self) -> u32 {
        self.params.pad_type_id
    }

    #[getter]
    fn pad_token(&self) -> &str {
        &self.params.pad_token
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Padding>()
            .is_ok_and(|o| self.key() == o.get().key())
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.key())
    }

    fn __repr__(&self) -> String {
        let opt = |v: Option<usize>| v.map_or("None".to_string(), |n| n.to_string());
        format!(
            "Padding(length={}, side='{}', pad_to_multiple_of={}, pad_id={}, pad_type_id={}, pad_token={:?})",
            opt(self.length()),
            self.side(),
            opt(self.pad_to_multiple_of()),
            self.pad_id(),
            self.pad_type_id(),
            self.pad_token()
        )
    }

    /// Pickling: the constructor's arguments.
    fn __getnewargs__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let (length, side, multiple, pad_id, type_id, token) = self.key();
        (length, side, multiple, pad_id, type_id, token.to_string()).into_pyobject(py)
    }
}

impl Padding {
    #[allow(clippy::type_complexity)]
    fn key(&self) -> (Option<usize>, &'static str, Option<usize>, u32, u32, &str) {
        (
            self.length(),
            self.side(),
            self.pad_to_multiple_of(),
            self.pad_id(),
            self.pad_type_id(),
            self.pad_token(),
        )
    }
}

fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(value)
}

impl From<&TruncationParams> for Truncation {
    fn from(params: &TruncationParams) -> Self {
        Truncation {
            params: params.clone(),
        }
    }
}

impl From<&PaddingParams> for Padding {
    fn from(params: &PaddingParams) -> Self {
        // tokenizer.json may say 0, which the crate reads as "no multiple".
        let pad_to_multiple_of = params.pad_to_multiple_of.filter(|&m| m > 0);
        Padding {
            params: PaddingParams {
                pad_to_multiple_of,
                ..params.clone()
            },
        }
    }
}

/// The engine's settings for one call, from the keyword arguments that
/// `CoreTokenizer.encode_batch` and `encode_rich` share; and the dtype.
#[allow(clippy::too_many_arguments)]
pub fn call_settings(
    add_special_tokens: bool,
    truncation: Option<PyRef<'_, Truncation>>,
    padding: Option<PyRef<'_, Padding>>,
    attention_mask: bool,
    type_ids: bool,
    special_tokens_mask: bool,
    offsets: bool,
    dtype: &str,
) -> PyResult<(Settings, Dtype)> {
    let dtype = Dtype::parse(dtype).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let settings = Settings {
        add_special_tokens,
        truncation: truncation.map(|t| t.params.clone()),
        padding: padding.map(|p| p.params.clone()),
        outputs: Outputs {
            attention_mask,
            type_ids,
            special_tokens_mask,
            offsets,
            dtype,
        },
    };
    Ok((settings, dtype))
}

/// A ValueError unless `text_pair` (when given) has as many rows as `texts`.
pub fn check_pairs(texts: usize, pairs: Option<usize>) -> PyResult<()> {
    match pairs {
        Some(pairs) if pairs != texts => Err(PyValueError::new_err(format!(
            "text_pair has {pairs} items but texts has {texts}; they must match"
        ))),
        _ => Ok(()),
    }
}
