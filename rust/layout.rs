//! The layout of a packed batch, shared by the CPU packer (`engine::pack`)
//! and the device packer (`cuda::pipeline`), so the two compare value for value.
//!
//! Rows are laid out back to back (CSR: `row_starts[i]..row_starts[i + 1]`), with
//! padding written in place, so a padded batch whose rows all have the same
//! length is also a `[B, L]` tensor over the same memory. Padding follows the
//! `tokenizers` crate's `pad_encodings` exactly: the target is the fixed length
//! or the longest row, rounded up to `pad_to_multiple_of`; a row already longer
//! than the target is left as it is (so a batch can stay ragged).

use crate::error::{Error, Result};
use crate::memory;
use tokenizers::{PaddingParams, PaddingStrategy};

/// Which optional fields a caller wants, and in which integer type.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outputs {
    pub attention_mask: bool,
    pub type_ids: bool,
    pub special_tokens_mask: bool,
    pub offsets: bool,
    pub dtype: Dtype,
}

/// The integer type of the output fields (ids, masks, offsets). int64 is what
/// transformers returns; int32 holds every id and offset of real inputs in
/// half the bytes. Row offsets and lengths stay int64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dtype {
    #[default]
    Int64,
    Int32,
}

impl Dtype {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "int64" => Ok(Dtype::Int64),
            "int32" => Ok(Dtype::Int32),
            _ => Err(Error::InvalidArgument(format!(
                "dtype must be \"int64\" or \"int32\", not {name:?}"
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Int64 => "int64",
            Dtype::Int32 => "int32",
        }
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            Dtype::Int64 => 8,
            Dtype::Int32 => 4,
        }
    }
}

/// `values` as int32, or an error naming `field` when one does not fit.
pub fn narrow(values: &[i64], field: &str) -> Result<Vec<i32>> {
    let mut out = memory::try_vec(values.len(), field)?;
    for &v in values {
        out.push(i32::try_from(v).map_err(|_| {
            Error::InvalidArgument(format!(
                "dtype=\"int32\": {field} holds {v}, which int32 cannot hold; use dtype=\"int64\""
            ))
        })?);
    }
    Ok(out)
}

/// A packed batch: `row_starts` has one entry per row plus one.
#[derive(Debug, Default)]
pub struct Batch {
    pub row_starts: Vec<i64>,
    /// Tokens in each row before padding.
    pub lengths: Vec<i64>,
    pub ids: Vec<i64>,
    pub attention_mask: Option<Vec<i64>>,
    pub type_ids: Option<Vec<i64>>,
    pub special_tokens_mask: Option<Vec<i64>>,
    /// Two entries (start, end) per token, in characters of the input string.
    pub offsets: Option<Vec<i64>>,
    /// `Some(L)` when padding was asked for and every row has length `L`.
    pub width: Option<usize>,
}

impl Batch {
    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.row_starts.len().saturating_sub(1)
    }

    /// The fields this batch holds, by name, in [`FIELDS`]' order.
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, &Vec<i64>)> {
        let values = [
            Some(&self.ids),
            self.attention_mask.as_ref(),
            self.type_ids.as_ref(),
            self.special_tokens_mask.as_ref(),
            self.offsets.as_ref(),
        ];
        FIELDS
            .into_iter()
            .zip(values)
            .filter_map(|(name, values)| Some((name, values?)))
    }

    /// [`Batch::fields`], taken.
    pub fn into_fields(self) -> impl Iterator<Item = (&'static str, Vec<i64>)> {
        let values = [
            Some(self.ids),
            self.attention_mask,
            self.type_ids,
            self.special_tokens_mask,
            self.offsets,
        ];
        FIELDS
            .into_iter()
            .zip(values)
            .filter_map(|(name, values)| Some((name, values?)))
    }
}

/// The output fields' names (transformers' keys), written once: the order the
/// core hands them out in (Python puts them in transformers' key order).
pub const FIELDS: [&str; 5] = [
    INPUT_IDS,
    ATTENTION_MASK,
    TOKEN_TYPE_IDS,
    SPECIAL_TOKENS_MASK,
    OFFSET_MAPPING,
];
pub const INPUT_IDS: &str = "input_ids";
pub const ATTENTION_MASK: &str = "attention_mask";
pub const TOKEN_TYPE_IDS: &str = "token_type_ids";
pub const SPECIAL_TOKENS_MASK: &str = "special_tokens_mask";
/// Two values (start, end) per token.
pub const OFFSET_MAPPING: &str = "offset_mapping";

impl Outputs {
    /// Bytes of host memory per token at the call's peak: int64 ids plus each
    /// optional field (offsets: two values), and their int32 copies while
    /// both are held when int32 was asked for.
    pub fn bytes_per_token(&self) -> usize {
        let fields = 1
            + usize::from(self.attention_mask)
            + usize::from(self.type_ids)
            + usize::from(self.special_tokens_mask)
            + 2 * usize::from(self.offsets);
        let copy = match self.dtype {
            Dtype::Int64 => 0,
            Dtype::Int32 => 4,
        };
        (8 + copy) * fields
    }
}

/// The length every row is padded to, as `tokenizers::utils::padding::pad_encodings`
/// computes it; None when it does not fit in a usize.
fn pad_target(lengths: impl Iterator<Item = usize>, params: &PaddingParams) -> Option<usize> {
    let mut target = match params.strategy {
        PaddingStrategy::Fixed(size) => size,
        PaddingStrategy::BatchLongest => lengths.max().unwrap_or(0),
    };
    if let Some(multiple) = params.pad_to_multiple_of.filter(|&m| m > 0) {
        if target % multiple > 0 {
            target = target.checked_add(multiple - target % multiple)?;
        }
    }
    Some(target)
}

/// Where each row starts once padded (B + 1 entries, CSR) and the width when
/// padding made every row the same length: the layout of every [`Batch`].
/// Refuses, before anything is allocated, a layout whose buffers would not fit
/// in the memory this process can get (`bytes_per_token`: see [`Outputs::bytes_per_token`]).
pub fn row_layout(
    lengths: &[usize],
    padding: Option<&PaddingParams>,
    bytes_per_token: usize,
) -> Result<(Vec<i64>, Option<usize>)> {
    if lengths.is_empty() {
        // Nothing to allocate: the crate pads an empty batch without complaint.
        let target = padding.and_then(|p| pad_target(std::iter::empty(), p));
        return Ok((vec![0], padding.map(|_| target.unwrap_or(0))));
    }
    let target = match padding {
        Some(p) => pad_target(lengths.iter().copied(), p),
        None => Some(0),
    };
    let total = target.and_then(|target| {
        lengths
            .iter()
            .try_fold(0usize, |sum, &len| sum.checked_add(len.max(target)))
    });
    check_fits(total, bytes_per_token, padding)?;
    let target = target.unwrap_or_default(); // Some: check_fits refuses a size that overflowed
    let mut row_starts = memory::try_vec(lengths.len() + 1, "the row offsets")?;
    row_starts.push(0i64);
    let mut total = 0usize;
    for &len in lengths {
        total += len.max(target);
        row_starts.push(total as i64);
    }
    let first = lengths.first().map_or(target, |&len| len.max(target));
    let uniform = lengths.iter().all(|&len| len.max(target) == first);
    Ok((row_starts, (padding.is_some() && uniform).then_some(first)))
}

/// The same refusal as [`row_layout`], before any row is encoded: `rows` rows
/// padded to at least the fixed length (when there is one).
pub fn check_padding(
    rows: usize,
    padding: Option<&PaddingParams>,
    bytes_per_token: usize,
) -> Result<()> {
    let Some(params) = padding.filter(|_| rows > 0) else {
        return Ok(());
    };
    let target = pad_target(std::iter::empty(), params);
    check_fits(
        target.and_then(|t| rows.checked_mul(t)),
        bytes_per_token,
        padding,
    )
}

/// `tokens` output tokens (None: more than a usize) of `bytes_per_token` each
/// must fit in the memory this process can still get (`crate::memory`).
fn check_fits(
    tokens: Option<usize>,
    bytes_per_token: usize,
    padding: Option<&PaddingParams>,
) -> Result<()> {
    let bytes = tokens.and_then(|t| t.checked_mul(bytes_per_token));
    memory::check("the output", bytes, || cause(padding))
}

/// The settings that made a batch so big, for the error's "lower ...".
fn cause(padding: Option<&PaddingParams>) -> String {
    let mut causes = Vec::new();
    if let Some(p) = padding {
        if let PaddingStrategy::Fixed(n) = p.strategy {
            causes.push(format!("padding length {n} (max_length with padding='max_length', or with_padding(length=...))"));
        }
        if let Some(m) = p.pad_to_multiple_of {
            causes.push(format!("pad_to_multiple_of={m}"));
        }
    }
    if causes.is_empty() {
        "the rows' lengths".to_string()
    } else {
        causes.join(" and ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::PaddingDirection;

    fn padding(strategy: PaddingStrategy, multiple: Option<usize>) -> PaddingParams {
        PaddingParams {
            strategy,
            direction: PaddingDirection::Right,
            pad_to_multiple_of: multiple,
            pad_id: 0,
            pad_type_id: 0,
            pad_token: String::new(),
        }
    }

    #[test]
    fn layout_pads_in_place_and_reports_uniform_width() {
        let longest = padding(PaddingStrategy::BatchLongest, Some(4));
        let (starts, width) = row_layout(&[3, 1], Some(&longest), 8).unwrap();
        assert_eq!((starts, width), (vec![0, 4, 8], Some(4)));
        let (starts, width) = row_layout(&[3, 1], None, 8).unwrap();
        assert_eq!((starts, width), (vec![0, 3, 4], None));
    }

    #[test]
    fn huge_padding_is_refused_before_allocating() {
        for (strategy, multiple, named) in [
            (
                PaddingStrategy::Fixed(1 << 40),
                None,
                "padding length 1099511627776",
            ),
            (
                PaddingStrategy::BatchLongest,
                Some(1 << 40),
                "pad_to_multiple_of=1099511627776",
            ),
            (
                PaddingStrategy::Fixed(usize::MAX - 1),
                Some(7),
                "pad_to_multiple_of=7",
            ),
            (PaddingStrategy::Fixed(1 << 62), None, "padding length"),
        ] {
            let p = padding(strategy.clone(), multiple);
            let mut results = vec![row_layout(&[1, 2], Some(&p), 8).map(|_| ())];
            if matches!(strategy, PaddingStrategy::Fixed(_)) {
                // Before encoding only a fixed length is known (the longest row may be empty).
                results.push(check_padding(2, Some(&p), 8));
            }
            for result in results {
                let Err(Error::HostMemory(why)) = result else {
                    panic!("{strategy:?} {multiple:?} was accepted");
                };
                assert!(why.contains(named) && why.contains("memory"), "{why}");
            }
        }
        let fine = padding(PaddingStrategy::Fixed(512), Some(8));
        assert!(check_padding(1000, Some(&fine), 40).is_ok());
    }
}
