//! Sets of code points, and where the compiler gets them: Oniguruma's own
//! classes (the scanners' generated table for `\p{L}`, `\s`... and, for any
//! other class, Oniguruma itself run over every code point), or a Rust
//! predicate (the crate's `char::is_numeric`, `is_whitespace`...).
//!
//! Nothing here knows a Unicode version: every set is read from the engine
//! the oracle uses, so the compiled scanner and the oracle agree on every
//! code point whatever Unicode each was built with.

use crate::kernels;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use tokenizers::utils::SysRegex;

/// The last code point.
pub const MAX_CP: u32 = 0x10FFFF;
const SURROGATES: (u32, u32) = (0xD800, 0xDFFF);

/// A set of Unicode scalar values: sorted, disjoint, non-adjacent inclusive
/// ranges (surrogates never belong).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CharSet(Vec<(u32, u32)>);

impl CharSet {
    pub fn empty() -> Self {
        CharSet(Vec::new())
    }

    /// Every scalar value.
    pub fn all() -> Self {
        CharSet(vec![(0, SURROGATES.0 - 1), (SURROGATES.1 + 1, MAX_CP)])
    }

    pub fn single(c: u32) -> Self {
        Self::from_ranges([(c, c)])
    }

    /// The set of the given ranges (any order, overlapping or not).
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        let mut ranges: Vec<(u32, u32)> = ranges
            .into_iter()
            .filter(|&(a, b)| a <= b && a <= MAX_CP)
            .map(|(a, b)| (a, b.min(MAX_CP)))
            .collect();
        ranges.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(ranges.len());
        for (a, b) in ranges {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        CharSet(out).intersect_raw(&[(0, SURROGATES.0 - 1), (SURROGATES.1 + 1, MAX_CP)])
    }

    /// The scalar values for which `f` holds.
    pub fn from_fn(f: impl Fn(char) -> bool) -> Self {
        let mut ranges = Vec::new();
        let mut open: Option<u32> = None;
        for cp in 0..=MAX_CP + 1 {
            let member = char::from_u32(cp).is_some_and(&f);
            match (member, open) {
                (true, None) => open = Some(cp),
                (false, Some(start)) => {
                    ranges.push((start, cp - 1));
                    open = None;
                }
                _ => {}
            }
        }
        Self::from_ranges(ranges)
    }

    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, cp: u32) -> bool {
        let at = self.0.partition_point(|&(_, b)| b < cp);
        self.0.get(at).is_some_and(|&(a, _)| a <= cp)
    }

    pub fn union(&self, other: &CharSet) -> CharSet {
        Self::from_ranges(self.0.iter().chain(&other.0).copied())
    }

    pub fn intersect(&self, other: &CharSet) -> CharSet {
        self.intersect_raw(&other.0)
    }

    fn intersect_raw(&self, other: &[(u32, u32)]) -> CharSet {
        let (mut i, mut j, mut out) = (0, 0, Vec::new());
        while i < self.0.len() && j < other.len() {
            let (a, b) = (self.0[i], other[j]);
            let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
            if lo <= hi {
                out.push((lo, hi));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        CharSet(out)
    }

    /// Every scalar value not in the set.
    pub fn negate(&self) -> CharSet {
        let mut out = Vec::new();
        let mut next = 0u32;
        for &(a, b) in &self.0 {
            if a > next {
                out.push((next, a - 1));
            }
            next = b + 1;
        }
        if next <= MAX_CP {
            out.push((next, MAX_CP));
        }
        CharSet(out).intersect(&CharSet::all())
    }

    /// True when every member is ASCII.
    pub fn is_ascii(&self) -> bool {
        self.0.last().is_none_or(|&(_, b)| b < 0x80)
    }
}

/// The classes of the scanners' generated table (cuda/gt_unicode_table.cuh),
/// by the Oniguruma name they were generated from.
const TABLE_CLASSES: [(&str, u32); 11] = [
    ("L", 1 << 0),
    ("N", 1 << 1),
    ("s", 1 << 2),
    ("Lu", 1 << 3),
    ("Ll", 1 << 4),
    ("Lt", 1 << 5),
    ("Lm", 1 << 6),
    ("Lo", 1 << 7),
    ("M", 1 << 8),
    ("P", 1 << 9),
    ("S", 1 << 10),
];

/// `\s` (name "s") or `\p{name}` for the classes of the generated table,
/// which tests check against Oniguruma on every code point; None for others.
pub fn table_class(name: &str) -> Option<CharSet> {
    static SETS: OnceLock<Vec<CharSet>> = OnceLock::new();
    let at = TABLE_CLASSES.iter().position(|(n, _)| *n == name)?;
    let sets = SETS.get_or_init(|| {
        TABLE_CLASSES
            .iter()
            .map(|&(_, bit)| CharSet::from_fn(|c| kernels::unicode_class(c as u32) & bit != 0))
            .collect()
    });
    Some(sets[at].clone())
}

/// `CharSet::from_fn(f)` for the predicate named `name`, computed once per
/// process (a scan of every code point: up to ~0.1 s with a slow predicate
/// such as `is_punctuation`, paid at each tokenizer load otherwise).
pub fn predicate_set(name: &'static str, f: fn(char) -> bool) -> CharSet {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, CharSet>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(set) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(name) {
        return set.clone();
    }
    let set = CharSet::from_fn(f);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(name, set.clone());
    set
}

/// Every scalar value in order, as one string.
fn every_char() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| (0..=MAX_CP).filter_map(char::from_u32).collect())
}

/// The code points Oniguruma matches with `class`, a pattern that matches
/// one code point (`\p{Han}`, `\w`, `[[:alpha:]]`, `(?i:k)`): found by
/// running it over every code point, once per process and class.
pub fn oniguruma_class(class: &str) -> Result<CharSet, String> {
    static CACHE: OnceLock<Mutex<HashMap<String, CharSet>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(set) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(class) {
        return Ok(set.clone());
    }
    let regex = SysRegex::new(&format!("(?:{class})+")).map_err(|e| format!("{class}: {e}"))?;
    let text = every_char();
    let cp_at = |byte: usize| text[byte..].chars().next().map_or(MAX_CP + 1, |c| c as u32);
    let mut ranges = Vec::new();
    for (start, end) in regex.find_iter(text) {
        if end > start {
            let last = text[..end].chars().next_back().map_or(0, |c| c as u32);
            ranges.push((cp_at(start), last));
        }
    }
    let set = CharSet::from_ranges(ranges);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(class.to_string(), set.clone());
    Ok(set)
}

/// Single code points Oniguruma matches with `pattern` as a whole (e.g.
/// `(?i:ss)` matches "ß"): how multi-character case folds are found.
pub fn oniguruma_single_chars(pattern: &str) -> Result<Vec<u32>, String> {
    let regex = SysRegex::new(pattern).map_err(|e| format!("{pattern}: {e}"))?;
    let text = every_char();
    Ok(regex
        .find_iter(text)
        .filter_map(|(start, end)| {
            let mut chars = text[start..end].chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c as u32),
                _ => None,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_algebra() {
        let a = CharSet::from_ranges([(10, 20), (5, 9), (30, 30)]);
        assert_eq!(a.ranges(), &[(5, 20), (30, 30)]);
        let b = CharSet::from_ranges([(15, 31)]);
        assert_eq!(a.intersect(&b).ranges(), &[(15, 20), (30, 30)]);
        assert_eq!(a.union(&b).ranges(), &[(5, 31)]);
        let not_a = a.negate();
        assert!(!not_a.contains(5) && not_a.contains(4) && not_a.contains(21));
        assert!(!not_a.contains(0xD800), "surrogates never belong");
        assert_eq!(not_a.negate(), a);
        assert_eq!(CharSet::all().negate(), CharSet::empty());
        assert!(CharSet::from_ranges([(0xD000, 0xE000)]).contains(0xE000));
        assert!(!CharSet::from_ranges([(0xD000, 0xE000)]).contains(0xDA00));
    }

    /// The table's classes are Oniguruma's (as the generated table is
    /// tested to be), and a class outside the table is read from Oniguruma.
    #[test]
    fn classes_come_from_oniguruma() {
        for name in ["L", "N", "Lu", "M", "P", "S"] {
            assert_eq!(
                table_class(name).unwrap(),
                oniguruma_class(&format!(r"\p{{{name}}}")).unwrap(),
                "{name}"
            );
        }
        assert_eq!(table_class("s").unwrap(), oniguruma_class(r"\s").unwrap());
        let han = oniguruma_class(r"\p{Han}").unwrap();
        assert!(han.contains('東' as u32) && !han.contains('a' as u32));
        assert_eq!(
            oniguruma_class("(?i:k)").unwrap(),
            CharSet::from_ranges([(0x4B, 0x4B), (0x6B, 0x6B), (0x212A, 0x212A)])
        );
        assert_eq!(
            oniguruma_single_chars("(?i:ss)").unwrap(),
            vec![0xDF, 0x1E9E]
        );
    }
}
