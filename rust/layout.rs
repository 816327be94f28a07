//! The layout of a packed batch, shared by the CPU packer (`engine::pack`)
//! and the device packer (`cuda::pipeline`), so the two compare value for value.
//!
//! Rows are laid out back to back (CSR: `row_starts[i]..row_starts[i + 1]`), with
//! padding written in place, so a padded batch whose rows all have the same
//! length is also a `[B, L]` tensor over the same memory. Padding follows the
//! `tokenizers` crate's `pad_encodings` exactly: the target is the fixed length
//! or the longest row, rounded up to `pad_to_multiple_of`; a row already longer
//! than the target is left as it is (so a batch can stay ragged).

use tokenizers::{PaddingParams, PaddingStrategy};

/// Which optional fields a caller wants.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outputs {
    pub attention_mask: bool,
    pub type_ids: bool,
    pub special_tokens_mask: bool,
    pub offsets: bool,
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
}

/// The length every row is padded to, as `tokenizers::utils::padding::pad_encodings` computes it.
fn pad_target(lengths: impl Iterator<Item = usize>, params: &PaddingParams) -> usize {
    let mut target = match params.strategy {
        PaddingStrategy::Fixed(size) => size,
        PaddingStrategy::BatchLongest => lengths.max().unwrap_or(0),
    };
    if let Some(multiple) = params.pad_to_multiple_of.filter(|&m| m > 0) {
        if target % multiple > 0 {
            target += multiple - target % multiple;
        }
    }
    target
}

/// Where each row starts once padded (B + 1 entries, CSR) and the width when
/// padding made every row the same length: the layout of every [`Batch`].
pub fn row_layout(lengths: &[usize], padding: Option<&PaddingParams>) -> (Vec<i64>, Option<usize>) {
    let target = padding.map_or(0, |p| pad_target(lengths.iter().copied(), p));
    let mut row_starts = Vec::with_capacity(lengths.len() + 1);
    row_starts.push(0i64);
    let mut total = 0usize;
    for &len in lengths {
        total += len.max(target);
        row_starts.push(total as i64);
    }
    let first = lengths.first().map_or(target, |&len| len.max(target));
    let uniform = lengths.iter().all(|&len| len.max(target) == first);
    (row_starts, (padding.is_some() && uniform).then_some(first))
}
