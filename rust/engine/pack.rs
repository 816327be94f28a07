//! Packing: post-processed encodings, or single sequences' ids and their
//! template, -> one contiguous buffer per output field, in the layout of
//! `crate::layout`.

use crate::error::Result;
use crate::kernels::GtTemplate;
use crate::layout::{self, row_layout, Batch, Outputs};
use crate::memory::try_vec;
use tokenizers::{Encoding, PaddingDirection, PaddingParams};

/// Packs `encodings` (post-processed, unpadded) into a [`Batch`].
pub fn pack(
    encodings: &[Encoding],
    padding: Option<&PaddingParams>,
    want: Outputs,
) -> Result<Batch> {
    let lengths: Vec<usize> = encodings.iter().map(Encoding::len).collect();
    let mut batch = laid_out(&lengths, padding, want)?;
    for (i, e) in encodings.iter().enumerate() {
        let pad = batch.padding_of(i);
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
    Ok(batch)
}

/// A single sequence (truncated, not post-processed): its ids and, when the
/// call asks for offsets, each token's character offsets.
pub struct Sequence {
    pub ids: Vec<u32>,
    pub offsets: Option<Vec<(usize, usize)>>,
}

/// Packs single sequences given as ids (and offsets) with `template`'s
/// special tokens around each: what [`pack`] gives for the encodings the
/// post-processor would make of them, without making them (the special
/// tokens' offsets are (0, 0), as the crate's post-processors give them).
pub fn pack_sequences(
    rows: &[Sequence],
    template: &GtTemplate,
    padding: Option<&PaddingParams>,
    want: Outputs,
) -> Result<Batch> {
    let (n_prefix, n_suffix) = (template.n_prefix as usize, template.n_suffix as usize);
    let lengths: Vec<usize> = rows
        .iter()
        .map(|r| n_prefix + r.ids.len() + n_suffix)
        .collect();
    let mut batch = laid_out(&lengths, padding, want)?;
    let left = padding.is_some_and(|p| matches!(p.direction, PaddingDirection::Left));
    let (prefix, suffix) = (0..n_prefix, n_prefix..n_prefix + n_suffix);
    let wide = |values: &[u32]| values.iter().map(|&v| i64::from(v)).collect::<Vec<i64>>();
    let (ids, type_ids) = (wide(&template.ids), wide(&template.type_ids));
    let seq_type = i64::from(template.seq_type_id);
    for (i, Sequence { ids: row, offsets }) in rows.iter().enumerate() {
        let pad = batch.padding_of(i);
        if left {
            push_padding(&mut batch, pad, padding);
        }
        // Field by field, each a run of copies the compiler vectorises.
        batch.ids.extend_from_slice(&ids[prefix.clone()]);
        batch.ids.extend(row.iter().map(|&id| i64::from(id)));
        batch.ids.extend_from_slice(&ids[suffix.clone()]);
        let n = n_prefix + row.len() + n_suffix;
        if let Some(v) = batch.attention_mask.as_mut() {
            v.resize(v.len() + n, 1);
        }
        if let Some(v) = batch.type_ids.as_mut() {
            v.extend_from_slice(&type_ids[prefix.clone()]);
            v.resize(v.len() + row.len(), seq_type);
            v.extend_from_slice(&type_ids[suffix.clone()]);
        }
        if let Some(v) = batch.special_tokens_mask.as_mut() {
            v.resize(v.len() + n_prefix, 1);
            v.resize(v.len() + row.len(), 0);
            v.resize(v.len() + n_suffix, 1);
        }
        if let Some(v) = batch.offsets.as_mut() {
            let offsets = offsets.as_deref().unwrap_or_default();
            // A broken row must not pad past its end (an internal error, not wrong offsets).
            assert_eq!(
                offsets.len(),
                row.len(),
                "a row with offsets has one per id"
            );
            v.resize(v.len() + 2 * n_prefix, 0);
            v.extend(offsets.iter().flat_map(|&(s, e)| [s as i64, e as i64]));
            v.resize(v.len() + 2 * (n - offsets.len() - n_prefix), 0);
        }
        if !left {
            push_padding(&mut batch, pad, padding);
        }
    }
    Ok(batch)
}

/// An empty batch laid out for rows of `lengths` (row starts, width and
/// lengths set), each wanted field with room for every token. Every buffer is
/// allocated fallibly: a user's padding length decides their size.
fn laid_out(lengths: &[usize], padding: Option<&PaddingParams>, want: Outputs) -> Result<Batch> {
    let (row_starts, width) = row_layout(lengths, padding, want.bytes_per_token())?;
    let total = *row_starts.last().unwrap_or(&0) as usize;
    let field = |on: bool, name: &str| on.then(|| try_vec::<i64>(total, name)).transpose();
    let mut row_lengths = try_vec(lengths.len(), "the row lengths")?;
    row_lengths.extend(lengths.iter().map(|&len| len as i64));
    Ok(Batch {
        ids: try_vec(total, layout::INPUT_IDS)?,
        attention_mask: field(want.attention_mask, layout::ATTENTION_MASK)?,
        type_ids: field(want.type_ids, layout::TOKEN_TYPE_IDS)?,
        special_tokens_mask: field(want.special_tokens_mask, layout::SPECIAL_TOKENS_MASK)?,
        offsets: want
            .offsets
            .then(|| try_vec(total.saturating_mul(2), layout::OFFSET_MAPPING))
            .transpose()?,
        width,
        row_starts,
        lengths: row_lengths,
    })
}

impl Batch {
    /// Padding tokens row `i` gets (its laid-out length minus its own).
    fn padding_of(&self, i: usize) -> usize {
        (self.row_starts[i + 1] - self.row_starts[i] - self.lengths[i]) as usize
    }
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
    use tokenizers::PaddingStrategy;

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
        )
        .unwrap();
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
            ..Default::default()
        };
        let right = params(
            PaddingStrategy::BatchLongest,
            PaddingDirection::Right,
            Some(4),
        );
        let b = pack(&[enc(&[1, 2, 3]), enc(&[4])], Some(&right), all).unwrap();
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
        )
        .unwrap();
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
        )
        .unwrap();
        assert_eq!(b.ids, vec![1, 2, 3, 4, 9]);
        assert_eq!(b.row_starts, vec![0, 3, 5]);
        assert_eq!(b.width, None);
    }

    #[test]
    fn empty_batch() {
        let fixed = params(PaddingStrategy::Fixed(5), PaddingDirection::Right, None);
        let b = pack(&[], Some(&fixed), Outputs::default()).unwrap();
        assert_eq!(b.rows(), 0);
        assert_eq!(b.width, Some(5));
    }
}
