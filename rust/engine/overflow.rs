//! Truncation as the crate's `truncate_encodings` does it, without its two
//! hazards: `Encoding::truncate` panics when the stride is not below the
//! length a sequence is cut to, and a pair cut with a stride becomes the
//! cross product of both sequences' windows, each merge cloning the other
//! side's windows again (pairs + `max_length=16` + `stride=4` on long
//! documents grew a process to 23 GB). Here the lengths come first
//! ([`targets`]: the crate's rules and errors, the stride checked where the
//! crate would assert), then how many windows a call makes and how much
//! memory they take ([`Windows::count`], [`check_budget`]), refused with a
//! typed error before anything is built; the windows themselves are cut one
//! at a time ([`window`]).

use crate::error::{Error, Result};
use tokenizers::{Encoding, TruncationDirection, TruncationParams, TruncationStrategy};

/// The crate's messages for what it refuses (`TruncationError`).
const SECOND_NOT_PROVIDED: &str = "Truncation error: Second sequence not provided";
const TOO_SHORT: &str =
    "Truncation error: Sequence to truncate too short to respect the provided max_length";

/// The length each sequence of a row is cut to: None where it is kept whole.
/// `params.max_length` is the room left once the special tokens are counted.
/// The crate's errors where it raises; an [`Error::InvalidArgument`] where it
/// would panic (a stride not below a length it cuts to).
pub fn targets(
    first: usize,
    second: Option<usize>,
    params: &TruncationParams,
    special: usize,
) -> Result<(Option<usize>, Option<usize>)> {
    let cut = |len: usize, to: usize| (to < len).then_some(to);
    let max = params.max_length;
    let found = if max == 0 {
        // The crate empties both (each whole sequence becomes one window).
        (cut(first, 0), second.and_then(|n| cut(n, 0)))
    } else {
        let total = first + second.unwrap_or(0);
        if total <= max {
            return Ok((None, None));
        }
        let to_remove = total - max;
        match (params.strategy, second) {
            (TruncationStrategy::LongestFirst, Some(second)) => {
                let (n1, n2) = longest_first(first, second, max);
                (cut(first, n1), cut(second, n2))
            }
            (TruncationStrategy::LongestFirst, None) => (cut(first, max), None),
            (TruncationStrategy::OnlyFirst, _) => match first > to_remove {
                true => (cut(first, first - to_remove), None),
                false => return Err(Error::Tokenizers(TOO_SHORT.into())),
            },
            (TruncationStrategy::OnlySecond, None) => {
                return Err(Error::Tokenizers(SECOND_NOT_PROVIDED.into()))
            }
            (TruncationStrategy::OnlySecond, Some(second)) => match second > to_remove {
                true => (None, cut(second, second - to_remove)),
                false => return Err(Error::Tokenizers(TOO_SHORT.into())),
            },
        }
    };
    for to in [found.0, found.1].into_iter().flatten() {
        check_stride(params, to, special, second.is_some())?;
    }
    Ok(found)
}

/// The crate's split of `max` between a pair of `n1` and `n2` tokens
/// (longest first: the shorter keeps its length when it can).
fn longest_first(n1: usize, n2: usize, max: usize) -> (usize, usize) {
    let swap = n1 > n2;
    let mut short = n1.min(n2);
    let mut long = match short > max {
        true => short,
        false => short.max(max - short),
    };
    if short + long > max {
        short = max / 2;
        long = short + max % 2;
    }
    if swap {
        (long, short)
    } else {
        (short, long)
    }
}

/// `Encoding::truncate` asserts that a sequence cut to `to` tokens (to > 0)
/// has a stride below `to`: refused with a typed error instead (`special`:
/// the special tokens `params.max_length` left out, for the message).
fn check_stride(params: &TruncationParams, to: usize, special: usize, pair: bool) -> Result<()> {
    if to == 0 || params.stride < to {
        return Ok(());
    }
    let (stride, max_length) = (params.stride, params.max_length + special);
    Err(Error::InvalidArgument(match pair {
        false => format!(
            "truncation stride={stride} must be smaller than max_length={max_length} minus the {special} \
             special tokens added to each sequence"
        ),
        true => format!(
            "truncation stride={stride} must be smaller than the {to} tokens a sequence of this pair is cut \
             to (max_length={max_length} minus the {special} special tokens, shared between the two \
             sequences): lower the stride or raise max_length"
        ),
    }))
}

/// How a sequence of `len` tokens is cut: into windows of `to` tokens that
/// overlap by `stride`, the first one kept (the main row), the others its
/// overflowing rows (the crate's `Encoding::truncate`).
#[derive(Clone, Copy, Debug)]
pub struct Windows {
    pub len: usize,
    /// None: the sequence is kept whole (one window).
    pub to: Option<usize>,
    pub stride: usize,
    pub direction: TruncationDirection,
}

impl Windows {
    /// How many windows (the main one included).
    pub fn count(&self) -> usize {
        match self.to {
            None => 1,
            // The crate empties the sequence: the whole of it overflows as one window.
            Some(0) => 2,
            Some(to) => 1 + (self.len - to).div_ceil(to - self.stride),
        }
    }

    /// The token range of window `i` (< `count()`).
    pub fn range(&self, i: usize) -> std::ops::Range<usize> {
        let Some(to) = self.to else {
            return 0..self.len;
        };
        if to == 0 {
            return if i == 0 { 0..0 } else { 0..self.len };
        }
        let step = to - self.stride;
        match self.direction {
            TruncationDirection::Right => {
                let start = i * step;
                start..(start + to).min(self.len)
            }
            TruncationDirection::Left => {
                let stop = self.len - i * step;
                stop.saturating_sub(to)..stop
            }
        }
    }

    /// Tokens in all the windows together.
    pub fn tokens(&self) -> usize {
        (0..self.count()).map(|i| self.range(i).len()).sum()
    }
}

/// Window `range` of `encoding`, as `Encoding::truncate` makes it (no
/// sequence ranges, no overflowing rows).
pub fn window(encoding: &Encoding, range: std::ops::Range<usize>) -> Encoding {
    let r = range;
    Encoding::new(
        encoding.get_ids()[r.clone()].to_vec(),
        encoding.get_type_ids()[r.clone()].to_vec(),
        encoding.get_tokens()[r.clone()].to_vec(),
        encoding.get_word_ids()[r.clone()].to_vec(),
        encoding.get_offsets()[r.clone()].to_vec(),
        encoding.get_special_tokens_mask()[r.clone()].to_vec(),
        encoding.get_attention_mask()[r].to_vec(),
        Vec::new(),
        Default::default(),
    )
}

/// Truncates a row to its main window only: what `truncate_encodings` keeps
/// in place, without building the overflowing windows nobody asked for.
pub fn truncate_main(
    first: Encoding,
    second: Option<Encoding>,
    params: &TruncationParams,
    special: usize,
) -> Result<(Encoding, Option<Encoding>)> {
    let (to_first, to_second) = targets(
        first.len(),
        second.as_ref().map(Encoding::len),
        params,
        special,
    )?;
    let main = |encoding: Encoding, to: Option<usize>| match to {
        None => encoding,
        Some(_) => {
            let cut = Windows {
                len: encoding.len(),
                to,
                stride: params.stride,
                direction: params.direction,
            };
            window(&encoding, cut.range(0))
        }
    };
    Ok((main(first, to_first), second.map(|s| main(s, to_second))))
}

/// The windows of a pair, in the crate's order: the main row (first windows
/// 0 and 0), then for each overflowing window i of the first sequence, i
/// with each window of the second, then the first's main window with each
/// overflowing window of the second (`Encoding::merge_with`).
pub fn pair_order(first: usize, second: usize) -> impl Iterator<Item = (usize, usize)> {
    let main = std::iter::once((0, 0));
    let first_over = (1..first).flat_map(move |i| (0..second).map(move |j| (i, j)));
    let second_over = (1..second).map(|j| (0, j));
    main.chain(first_over).chain(second_over)
}

/// Rough bytes one built token costs until the call returns: the crate's
/// `Encoding` fields (ids, type ids, word ids, offsets, masks, its token
/// string), the packed fields and the per-token maps kept with the batch.
pub const BYTES_PER_TOKEN: usize = 160;
/// Rough bytes per window besides its tokens (its `Encoding`'s vectors).
pub const BYTES_PER_WINDOW: usize = 400;

/// Refuses, before anything is built, a call whose windows would not fit in
/// memory, naming the settings that make them so many.
pub fn check_budget(windows: u128, tokens: u128, params: &TruncationParams) -> Result<()> {
    let bytes = tokens
        .saturating_mul(BYTES_PER_TOKEN as u128)
        .saturating_add(windows.saturating_mul(BYTES_PER_WINDOW as u128));
    let cause = || {
        format!(
            "return_overflowing_tokens with max_length={} (minus the special tokens) and stride={} makes \
             {windows} rows of {tokens} tokens in all: raise max_length, lower the stride, or send fewer \
             or shorter texts per call",
            params.max_length, params.stride
        )
    };
    crate::memory::check(
        "the overflowing windows",
        usize::try_from(bytes).ok(),
        cause,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(max_length: usize, stride: usize, strategy: TruncationStrategy) -> TruncationParams {
        TruncationParams {
            max_length,
            stride,
            strategy,
            direction: TruncationDirection::Right,
        }
    }

    fn encoding(n: usize) -> Encoding {
        Encoding::new(
            (0..n as u32).collect(),
            vec![0; n],
            (0..n).map(|i| i.to_string()).collect(),
            (0..n as u32).map(Some).collect(),
            (0..n).map(|i| (i, i + 1)).collect(),
            vec![0; n],
            vec![1; n],
            vec![],
            Default::default(),
        )
    }

    /// The crate's windows: the main encoding then its overflowing ones.
    fn crate_windows(
        n: usize,
        to: usize,
        stride: usize,
        direction: TruncationDirection,
    ) -> Vec<Vec<u32>> {
        let mut e = encoding(n);
        e.truncate(to, stride, direction);
        let mut out = vec![e.get_ids().to_vec()];
        out.extend(e.get_overflowing().iter().map(|o| o.get_ids().to_vec()));
        out
    }

    #[test]
    fn windows_are_the_crates() {
        for direction in [TruncationDirection::Right, TruncationDirection::Left] {
            for n in 0..14 {
                for to in 0..n + 2 {
                    for stride in 0..to.max(1) {
                        let cut = Windows {
                            len: n,
                            to: (to < n).then_some(to),
                            stride,
                            direction,
                        };
                        let ours: Vec<Vec<u32>> = (0..cut.count())
                            .map(|i| cut.range(i).map(|t| t as u32).collect())
                            .collect();
                        let theirs = crate_windows(n, to, stride, direction);
                        assert_eq!(ours, theirs, "n={n} to={to} stride={stride} {direction:?}");
                        assert_eq!(cut.tokens(), theirs.iter().map(Vec::len).sum::<usize>());
                    }
                }
            }
        }
    }

    #[test]
    fn targets_follow_the_crate_and_refuse_its_panics() {
        use tokenizers::utils::truncation::truncate_encodings;
        for strategy in [
            TruncationStrategy::LongestFirst,
            TruncationStrategy::OnlyFirst,
            TruncationStrategy::OnlySecond,
        ] {
            for (n1, n2) in [(0, 0), (3, 0), (9, 2), (2, 9), (7, 7), (20, 5), (1, 30)] {
                for second in [None, Some(n2)] {
                    for max in 0..12 {
                        for stride in 0..4 {
                            let p = TruncationParams {
                                max_length: max,
                                stride,
                                strategy,
                                direction: TruncationDirection::Right,
                            };
                            let ours = targets(n1, second, &p, 2);
                            let theirs = std::panic::catch_unwind(|| {
                                truncate_encodings(encoding(n1), second.map(encoding), &p)
                                    .map(|(a, b)| (a.len(), b.map(|b| b.len())))
                                    .map_err(|e| e.to_string())
                            });
                            let at =
                                format!("{strategy:?} {n1} {second:?} max={max} stride={stride}");
                            match (ours, theirs) {
                                (Ok((a, b)), Ok(Ok((la, lb)))) => {
                                    assert_eq!(a.unwrap_or(n1), la, "{at}");
                                    assert_eq!(b.or(second), lb, "{at}");
                                }
                                (Err(Error::Tokenizers(m)), Ok(Err(theirs))) => {
                                    assert_eq!(m, theirs, "{at}")
                                }
                                (Err(Error::InvalidArgument(m)), Err(_)) => {
                                    assert!(m.contains("stride"), "{at}: {m}")
                                }
                                (ours, theirs) => panic!("{at}: {ours:?} vs {:?}", theirs.is_ok()),
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pairs_overflow_in_the_crates_order() {
        let order: Vec<_> = pair_order(3, 2).collect();
        assert_eq!(order, [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (0, 1)]);
        assert_eq!(pair_order(1, 1).count(), 1);
    }

    #[test]
    fn main_window_only() {
        let p = params(5, 1, TruncationStrategy::LongestFirst);
        let (a, b) = truncate_main(encoding(9), Some(encoding(4)), &p, 0).unwrap();
        assert_eq!((a.len(), b.map(|b| b.len())), (3, Some(2)));
        assert!(a.get_overflowing().is_empty());
        let p = params(3, 3, TruncationStrategy::LongestFirst);
        let Err(Error::InvalidArgument(why)) = truncate_main(encoding(9), None, &p, 2) else {
            panic!("a stride of max_length was accepted");
        };
        assert!(
            why.contains("stride=3 must be smaller than max_length=5"),
            "{why}"
        );
    }

    #[test]
    fn a_huge_overflow_is_refused_before_building() {
        let p = params(12, 4, TruncationStrategy::LongestFirst);
        let err = check_budget(1 << 40, 1 << 50, &p).unwrap_err();
        assert!(err.to_string().contains("stride=4"), "{err}");
        assert!(check_budget(10, 100, &p).is_ok());
    }
}
