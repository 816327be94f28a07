//! Packing: encodings -> one contiguous buffer per output field.
//!
//! Rows are laid out back to back (CSR: `row_starts[i]..row_starts[i + 1]`), with
//! padding written in place, so a padded batch whose rows all have the same
//! length is also a `[B, L]` tensor over the same memory. Padding follows the
//! `tokenizers` crate's `pad_encodings` exactly: the target is the fixed length
//! or the longest row, rounded up to `pad_to_multiple_of`; a row already longer
//! than the target is left as it is (so a batch can stay ragged).

use tokenizers::{Encoding, PaddingDirection, PaddingParams, PaddingStrategy};

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

/// Packs `encodings` (post-processed, unpadded) into a [`Batch`].
pub fn pack(encodings: &[Encoding], padding: Option<&PaddingParams>, want: Outputs) -> Batch {
    let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
    let (row_starts, width) = row_layout(&lengths, padding);
    let total = *row_starts.last().unwrap_or(&0) as usize;

    let field = |on: bool| on.then(|| Vec::<i64>::with_capacity(total));
    let mut batch = Batch {
        ids: Vec::with_capacity(total),
        attention_mask: field(want.attention_mask),
        type_ids: field(want.type_ids),
        special_tokens_mask: field(want.special_tokens_mask),
        offsets: want.offsets.then(|| Vec::with_capacity(2 * total)),
        ..Batch::default()
    };

    for (i, e) in encodings.iter().enumerate() {
        let pad = (row_starts[i + 1] - row_starts[i]) as usize - e.len();
        let left = padding.is_some_and(|p| matches!(p.direction, PaddingDirection::Left));
        if left {
            push_padding(&mut batch, pad, padding);
        }
        batch.ids.extend(e.get_ids().iter().map(|&v| i64::from(v)));
        if let Some(v) = batch.attention_mask.as_mut() {
            v.extend(e.get_attention_mask().iter().map(|&x| i64::from(x)));
        }
        if let Some(v) = batch.type_ids.as_mut() {
            v.extend(e.get_type_ids().iter().map(|&x| i64::from(x)));
        }
        if let Some(v) = batch.special_tokens_mask.as_mut() {
            v.extend(e.get_special_tokens_mask().iter().map(|&x| i64::from(x)));
        }
        if let Some(v) = batch.offsets.as_mut() {
            for &(start, end) in e.get_offsets() {
                v.extend([start as i64, end as i64]);
            }
        }
        if !left {
            push_padding(&mut batch, pad, padding);
        }
    }

    batch.width = width;
    batch.row_starts = row_starts;
    batch.lengths = lengths.iter().map(|&len| len as i64).collect();
    batch
}

fn push_padding(batch: &mut Batch, n: usize, padding: Option<&PaddingParams>) {
    let Some(p) = padding else { return };
    if n == 0 {
        return;
    }
    let repeat =
        |v: &mut Vec<i64>, value: i64, times: usize| v.extend(std::iter::repeat_n(value, times));
    repeat(&mut batch.ids, i64::from(p.pad_id), n);
    if let Some(v) = batch.attention_mask.as_mut() {
        repeat(v, 0, n);
    }
    if let Some(v) = batch.type_ids.as_mut() {
        repeat(v, i64::from(p.pad_type_id), n);
    }
    if let Some(v) = batch.special_tokens_mask.as_mut() {
        repeat(v, 1, n);
    }
    if let Some(v) = batch.offsets.as_mut() {
        repeat(v, 0, 2 * n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(ids: &[u32]) -> Encoding {
        let n = ids.len();
        Encoding::new(
            ids.to_vec(),
            vec![0; n],
            vec![String::new(); n],
            vec![None; n],
            (0..n).map(|i| (i, i + 1)).collect(),
            vec![0; n],
            vec![1; n],
            vec![],
            Default::default(),
        )
    }

    fn params(
        strategy: PaddingStrategy,
        direction: PaddingDirection,
        multiple: Option<usize>,
    ) -> PaddingParams {
        PaddingParams {
            strategy,
            direction,
            pad_to_multiple_of: multiple,
            pad_id: 9,
            pad_type_id: 3,
            pad_token: "<pad>".into(),
        }
    }

    #[test]
    fn ragged_without_padding() {
        let b = pack(
            &[enc(&[1, 2, 3]), enc(&[4])],
            None,
            Outputs {
                attention_mask: true,
                ..Default::default()
            },
        );
        assert_eq!(b.row_starts, vec![0, 3, 4]);
        assert_eq!(b.ids, vec![1, 2, 3, 4]);
        assert_eq!(b.attention_mask.unwrap(), vec![1, 1, 1, 1]);
        assert_eq!(b.width, None);
    }

    #[test]
    fn longest_right_and_left_with_multiple() {
        let all = Outputs {
            attention_mask: true,
            type_ids: true,
            special_tokens_mask: true,
            offsets: true,
        };
        let right = params(
            PaddingStrategy::BatchLongest,
            PaddingDirection::Right,
            Some(4),
        );
        let b = pack(&[enc(&[1, 2, 3]), enc(&[4])], Some(&right), all);
        assert_eq!(b.width, Some(4));
        assert_eq!(b.ids, vec![1, 2, 3, 9, 4, 9, 9, 9]);
        assert_eq!(b.attention_mask.unwrap(), vec![1, 1, 1, 0, 1, 0, 0, 0]);
        assert_eq!(b.type_ids.unwrap(), vec![0, 0, 0, 3, 0, 3, 3, 3]);
        assert_eq!(b.special_tokens_mask.unwrap(), vec![0, 0, 0, 1, 0, 1, 1, 1]);
        assert_eq!(&b.offsets.unwrap()[8..12], &[0, 1, 0, 0]);
        let left = params(PaddingStrategy::BatchLongest, PaddingDirection::Left, None);
        let b = pack(
            &[enc(&[1, 2, 3]), enc(&[4])],
            Some(&left),
            Outputs::default(),
        );
        assert_eq!(b.ids, vec![1, 2, 3, 9, 9, 4]);
        assert_eq!(b.width, Some(3));
    }

    #[test]
    fn fixed_shorter_than_a_row_stays_ragged() {
        let fixed = params(PaddingStrategy::Fixed(2), PaddingDirection::Right, None);
        let b = pack(
            &[enc(&[1, 2, 3]), enc(&[4])],
            Some(&fixed),
            Outputs::default(),
        );
        assert_eq!(b.ids, vec![1, 2, 3, 4, 9]);
        assert_eq!(b.row_starts, vec![0, 3, 5]);
        assert_eq!(b.width, None);
    }

    #[test]
    fn empty_batch() {
        let fixed = params(PaddingStrategy::Fixed(5), PaddingDirection::Right, None);
        let b = pack(&[], Some(&fixed), Outputs::default());
        assert_eq!(b.rows(), 0);
        assert_eq!(b.width, Some(5));
    }
}
