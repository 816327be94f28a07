//! Whether a text is already in NFC or NFKC, answered from one bit per code
//! point. Most documents are (the normalizer then leaves them alone), and the
//! per-character quick check of `unicode-normalization-alignments` (a
//! combining-class hash and a property search per non-ASCII character) was
//! the largest part of a device call's host work.
//!
//! A character is *stable* for a form when the crate's quick check says Yes
//! for it and its combining class is 0. A text of stable characters passes
//! that quick check (no character is No or Maybe, and no combining class can
//! be out of order), so it is in the form: exactly what the crate's own
//! `is_nfc` / `is_nfkc` answers. A text with any other character is left to
//! them.

use std::sync::OnceLock;
use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::{is_nfc_quick, is_nfkc_quick, IsNormalized};

/// Code points per block of the two-level table.
const BLOCK: usize = 256;
const BLOCKS: usize = 0x110000 / BLOCK;

/// One bit per code point, in blocks shared where alike.
pub struct StableChars {
    /// Block number of each 256 code points.
    index: Vec<u16>,
    blocks: Vec<[u64; BLOCK / 64]>,
    /// A bit per 64 code points that are all stable (2 kB): read from a
    /// character's first bytes, with no decoding and one load.
    whole_groups: Vec<u64>,
}

impl StableChars {
    /// The stable characters of NFC, built once per process.
    pub fn nfc() -> &'static StableChars {
        static TABLE: OnceLock<StableChars> = OnceLock::new();
        TABLE.get_or_init(|| StableChars::build(|c| is_nfc_quick(std::iter::once(c))))
    }

    /// The stable characters of NFKC, built once per process.
    pub fn nfkc() -> &'static StableChars {
        static TABLE: OnceLock<StableChars> = OnceLock::new();
        TABLE.get_or_init(|| StableChars::build(|c| is_nfkc_quick(std::iter::once(c))))
    }

    fn build(quick_check: impl Fn(char) -> IsNormalized) -> StableChars {
        let mut table = StableChars {
            index: Vec::with_capacity(BLOCKS),
            blocks: Vec::new(),
            whole_groups: vec![0; 0x110000 / 64 / 64],
        };
        for block in 0..BLOCKS {
            let mut bits = [0u64; BLOCK / 64];
            for offset in 0..BLOCK {
                let stable = char::from_u32((block * BLOCK + offset) as u32).is_some_and(|c| {
                    canonical_combining_class(c) == 0 && quick_check(c) == IsNormalized::Yes
                });
                bits[offset / 64] |= u64::from(stable) << (offset % 64);
            }
            let at = match table.blocks.iter().position(|b| *b == bits) {
                Some(at) => at,
                None => {
                    table.blocks.push(bits);
                    table.blocks.len() - 1
                }
            };
            table.index.push(at as u16);
            for (k, &word) in bits.iter().enumerate() {
                let group = block * BLOCK / 64 + k;
                table.whole_groups[group / 64] |= u64::from(word == u64::MAX) << (group % 64);
            }
        }
        table
    }

    /// True when the 64 code points from `group * 64` are all stable.
    fn whole_group(&self, group: u32) -> bool {
        let group = group as usize;
        (self.whole_groups[group / 64] >> (group % 64)) & 1 == 1
    }

    fn is_stable(&self, c: u32) -> bool {
        let block = &self.blocks[self.index[c as usize / BLOCK] as usize];
        let offset = c as usize % BLOCK;
        (block[offset / 64] >> (offset % 64)) & 1 == 1
    }

    /// True when every character of `text` is stable (so `text` is in the
    /// form); false says nothing (the crate's check decides).
    pub fn all_stable(&self, text: &str) -> bool {
        let bytes = text.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            // ASCII is stable in both forms: skipped eight bytes at a time,
            // straight to the first other byte (the lowest high bit).
            if let Some(word) = bytes.get(i..i + 8) {
                let high =
                    u64::from_le_bytes(word.try_into().unwrap_or([0; 8])) & 0x8080_8080_8080_8080;
                if high == 0 {
                    i += 8;
                    continue;
                }
                i += high.trailing_zeros() as usize / 8;
            } else if bytes[i] < 0x80 {
                i += 1;
                continue;
            }
            // Non-ASCII characters, in a run. `text` is valid UTF-8: the lead
            // byte gives the length, and all bytes but the last give the
            // character's group of 64.
            while let Some(&lead) = bytes.get(i).filter(|&&b| b >= 0x80) {
                let tail = |k: usize| u32::from(bytes[i + k] & 0x3F);
                let (len, group) = match lead {
                    0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
                    0xE0..=0xEF => (3, u32::from(lead & 0x0F) << 6 | tail(1)),
                    _ => (4, u32::from(lead & 0x07) << 12 | tail(1) << 6 | tail(2)),
                };
                if !self.whole_group(group) && !self.is_stable(group << 6 | tail(len - 1)) {
                    return false;
                }
                i += len;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_normalization_alignments::{is_nfc, is_nfkc};

    /// Every code point alone, after a letter and before a combining mark:
    /// where the table says stable, the crate's check agrees.
    #[test]
    fn stable_texts_are_normalized_for_the_crate() {
        for (table, check) in [
            (StableChars::nfc(), is_nfc as fn(&str) -> bool),
            (StableChars::nfkc(), is_nfkc),
        ] {
            let mut stable = 0;
            for c in (0..0x110000u32).filter_map(char::from_u32) {
                for text in [format!("{c}"), format!("a{c}"), format!("{c}xyz{c}")] {
                    if table.all_stable(&text) {
                        assert!(check(&text), "U+{:04X} in {text:?}", c as u32);
                        stable += 1;
                    }
                }
                // The crate's answer must hold even next to a mark.
                let marked = format!("{c}\u{301}");
                assert!(!table.all_stable(&marked));
            }
            assert!(stable > 3 * 200_000, "most code points are stable");
        }
    }

    /// A character at every place of the 8-byte words ASCII is skipped in,
    /// alone or in a run: an unstable one is found wherever it stands.
    #[test]
    fn every_place_of_an_ascii_word_is_checked() {
        let nfc = StableChars::nfc();
        for (c, stable) in [
            ('é', true),
            ('日', true),
            ('😀', true),
            ('\u{301}', false),
            ('\u{212B}', false),
        ] {
            for at in 0..17 {
                for run in [1, 3] {
                    let text = format!(
                        "{}{}{}",
                        "a".repeat(at),
                        c.to_string().repeat(run),
                        "b".repeat(20)
                    );
                    assert_eq!(nfc.all_stable(&text), stable, "{text:?}");
                    let after = format!("{}日{}", "a".repeat(at), c.to_string().repeat(run));
                    assert_eq!(nfc.all_stable(&after), stable, "{after:?}");
                }
            }
        }
    }

    /// Characters the quick check cannot pass are not stable.
    #[test]
    fn unstable_characters_are_refused() {
        let nfc = StableChars::nfc();
        let nfkc = StableChars::nfkc();
        assert!(nfc.all_stable("plain ascii text, long enough for words"));
        assert!(nfc.all_stable("日本語のテキスト и кириллица"));
        assert!(!nfc.all_stable("e\u{301}")); // a combining mark
        assert!(!nfc.all_stable("\u{212B}")); // ANGSTROM SIGN: NFC is U+00C5
        assert!(nfc.all_stable("\u{FB01}")); // the fi ligature is NFC...
        assert!(!nfkc.all_stable("\u{FB01}")); // ...but not NFKC
        assert!(!nfkc.all_stable("ＡＢＣ")); // fullwidth letters
    }
}
