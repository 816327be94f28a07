//! Per-code-point tables for the WordPiece family (`GtCharTable`,
//! cuda/gt_wordpiece.cuh): what `BertNormalizer` turns each code point into,
//! and each normalized code point's class for the pre-tokenizer.
//!
//! Every entry is computed from the functions the `tokenizers` crate itself
//! calls (the same `unicode_categories` and `unicode-normalization-alignments`
//! versions, the same std `char::to_lowercase`), and a test compares the
//! table with the crate's normalizer and pre-tokenizer on every code point.
//! Tables are built once per process for each configuration (about 0.1 s).

use crate::kernels::GtCharTable;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::canonical_combining_class;
use unicode_normalization_alignments::UnicodeNormalization;

// Entry bits, as in cuda/gt_wordpiece.cuh.
const WORD: u32 = 0;
const SPACE: u32 = 1;
const PUNCT: u32 = 2;
const DROP: u32 = 1 << 2;
const MAP: u32 = 2 << 2;
const EXACT: u32 = 1 << 4;
const BLOCKS: usize = 0x1100;

/// `BertNormalizer`'s options, `strip_accents` resolved (it follows
/// `lowercase` when unset, as in the crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BertOptions {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

/// How the pre-tokenizer splits normalized text into words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Splitter {
    /// `BertPreTokenizer`: whitespace splits, each punctuation character is a word.
    Bert,
    /// `WhitespaceSplit`: whitespace splits.
    Whitespace,
}

/// The arrays behind a [`GtCharTable`].
pub struct CharTable {
    blocks: Vec<u16>,
    entries: Vec<u32>,
    blob: Vec<u8>,
    /// A bit per UTF-8 (lead, second) byte pair that starts an exact code point.
    exact_prefixes: Vec<u64>,
    /// The most bytes of normalized text one byte of input can become.
    pub growth: usize,
    /// Every code point becomes at most one character per byte of its own,
    /// so a text of n bytes has at most n tokens (what the device assumes).
    pub tokens_fit: bool,
}

impl CharTable {
    /// The table for this normalizer (None: no normalizer) and pre-tokenizer,
    /// built on first use and shared by every tokenizer that needs it.
    pub fn shared(normalizer: Option<BertOptions>, splitter: Splitter) -> Arc<CharTable> {
        type Cache = Mutex<HashMap<(Option<BertOptions>, Splitter), Arc<CharTable>>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let mut tables = cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tables
            .entry((normalizer, splitter))
            .or_insert_with(|| Arc::new(CharTable::build(normalizer, splitter)))
            .clone()
    }

    fn build(normalizer: Option<BertOptions>, splitter: Splitter) -> CharTable {
        let mut table = CharTable {
            blocks: Vec::with_capacity(BLOCKS),
            entries: Vec::new(),
            blob: Vec::new(),
            exact_prefixes: vec![0; (1 << 16) / 64],
            growth: 1,
            tokens_fit: true,
        };
        let mut blocks_seen: HashMap<Vec<u32>, u16> = HashMap::new();
        let mut blob_seen: HashMap<String, u32> = HashMap::new();
        for block in 0..BLOCKS as u32 {
            let entries: Vec<u32> = (0..256)
                .map(|low| {
                    let Some(c) = char::from_u32(block << 8 | low) else {
                        return WORD; // surrogates: never in a str
                    };
                    let (entry, out) = entry(c, normalizer, splitter);
                    if entry & EXACT != 0 {
                        let mut bytes = [0; 4];
                        let bytes = c.encode_utf8(&mut bytes).as_bytes();
                        let prefix = usize::from(bytes[0]) << 8 | usize::from(bytes[1]);
                        table.exact_prefixes[prefix / 64] |= 1 << (prefix % 64);
                    }
                    table.growth = table.growth.max(out.len().div_ceil(c.len_utf8()));
                    table.tokens_fit &= out.chars().count() <= c.len_utf8();
                    if entry & MAP == 0 {
                        return entry;
                    }
                    let at = *blob_seen.entry(out.clone()).or_insert_with(|| {
                        let at = table.blob.len() as u32;
                        table.blob.push(out.len() as u8);
                        table.blob.extend_from_slice(out.as_bytes());
                        at
                    });
                    entry | at << 8
                })
                .collect();
            let next = blocks_seen.len() as u16;
            let number = *blocks_seen.entry(entries.clone()).or_insert_with(|| {
                table.entries.extend_from_slice(&entries);
                next
            });
            table.blocks.push(number);
        }
        assert!(table.blob.len() < 1 << 24, "blob offsets are 24 bits");
        table
    }

    /// The arrays behind the view (blocks, entries, blob), for a device.
    pub fn arrays(&self) -> (&[u16], &[u32], &[u8]) {
        (&self.blocks, &self.entries, &self.blob)
    }

    /// The C view; valid while `self` lives.
    pub fn view(&self) -> GtCharTable {
        GtCharTable {
            blocks: self.blocks.as_ptr(),
            entries: self.entries.as_ptr(),
            blob: self.blob.as_ptr(),
            exact_prefixes: self.exact_prefixes.as_ptr(),
        }
    }
}

/// The entry of `c` (class, action, exact flag; no blob offset yet) and what
/// the normalizer turns it into.
fn entry(c: char, normalizer: Option<BertOptions>, splitter: Splitter) -> (u32, String) {
    let class = match splitter {
        _ if c.is_whitespace() => SPACE,
        Splitter::Bert if c.is_ascii_punctuation() || c.is_punctuation() => PUNCT,
        _ => WORD,
    };
    let (out, exact) = match normalizer {
        Some(options) => normalized(c, options),
        None => (c.to_string(), false),
    };
    let action = match out.as_str() {
        "" => DROP,
        same if same.chars().eq(std::iter::once(c)) => 0,
        _ => MAP,
    };
    (class | action | if exact { EXACT } else { 0 }, out)
}

/// `c` after `BertNormalizer` (its steps in its order, on this one
/// character), and whether the crate's NFD could reorder what is left of it
/// with its neighbours (a kept character with a non-zero combining class).
fn normalized(c: char, o: BertOptions) -> (String, bool) {
    let mut chars = vec![c];
    if o.clean_text {
        let control = !matches!(c, '\t' | '\n' | '\r') && c.is_other();
        if c == '\0' || c == '\u{fffd}' || control {
            chars.clear();
        } else if matches!(c, '\t' | '\n' | '\r') || c.is_whitespace() {
            chars = vec![' '];
        }
    }
    if o.handle_chinese_chars && is_chinese_char(c) && !chars.is_empty() {
        chars = vec![' ', c, ' '];
    }
    let mut exact = false;
    if o.strip_accents {
        let text: String = chars.iter().collect();
        chars = text
            .nfd()
            .map(|(c, _)| c)
            .filter(|c| !c.is_mark_nonspacing())
            .collect();
        exact = chars.iter().any(|&c| canonical_combining_class(c) != 0);
    }
    if o.lowercase {
        chars = chars.into_iter().flat_map(char::to_lowercase).collect();
    }
    (chars.into_iter().collect(), exact)
}

/// The CJK ideograph blocks `BertNormalizer` puts spaces around (the crate's list).
fn is_chinese_char(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::normalizers::BertNormalizer;
    use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
    use tokenizers::pre_tokenizers::whitespace::WhitespaceSplit;
    use tokenizers::{
        NormalizedString, Normalizer, OffsetReferential, OffsetType, PreTokenizedString,
        PreTokenizer,
    };

    /// What the table says `c` becomes (None: the exact path).
    fn through_table(table: &CharTable, c: char) -> Option<String> {
        let cp = c as usize;
        let e = table.entries[(table.blocks[cp >> 8] as usize) << 8 | (cp & 0xFF)];
        if e & EXACT != 0 {
            return None;
        }
        Some(match e & (3 << 2) {
            0 => c.to_string(),
            DROP => String::new(),
            _ => {
                let at = (e >> 8) as usize;
                let n = table.blob[at] as usize;
                String::from_utf8(table.blob[at + 1..at + 1 + n].to_vec()).unwrap()
            }
        })
    }

    /// A WordPiece model around `table` alone (no vocabulary), for its scans.
    fn model_of(table: &CharTable) -> crate::kernels::GtWordPieceModel {
        let empty = crate::kernels::GtBytesTable {
            slots: std::ptr::null(),
            blob: std::ptr::null(),
            filter: std::ptr::null(),
            mask: 0,
            filter_mask: 0,
        };
        crate::kernels::GtWordPieceModel {
            chars: table.view(),
            first: empty,
            rest: empty,
            first_max: 0,
            rest_max: 0,
            unk_id: 0,
            max_chars: 0,
        }
    }

    fn class(table: &CharTable, c: char) -> u32 {
        let cp = c as usize;
        table.entries[(table.blocks[cp >> 8] as usize) << 8 | (cp & 0xFF)] & 3
    }

    #[test]
    fn every_code_point_normalizes_as_the_crate_does() {
        for (clean, chinese, strip, lower) in [(true, true, true, true), (true, true, false, false)]
        {
            let options = BertOptions {
                clean_text: clean,
                handle_chinese_chars: chinese,
                strip_accents: strip,
                lowercase: lower,
            };
            let table = CharTable::build(Some(options), Splitter::Bert);
            let crate_normalizer = BertNormalizer::new(clean, chinese, Some(strip), lower);
            let model = model_of(&table);
            let mut exact = 0;
            let mut first_exact = None;
            for c in (0..=0x10FFFF).filter_map(char::from_u32) {
                // The host's scan (its prefix bits) finds exactly the exact code points.
                let flagged =
                    crate::kernels::wordpiece_needs_exact(&model, format!("a{c}b").as_bytes());
                assert_eq!(
                    flagged,
                    through_table(&table, c).is_none(),
                    "U+{:04X}",
                    c as u32
                );
                let mut normalized = NormalizedString::from(c.to_string());
                crate_normalizer.normalize(&mut normalized).unwrap();
                match through_table(&table, c) {
                    Some(out) => assert_eq!(out, normalized.get(), "U+{:04X}", c as u32),
                    // gt_wp_needs_exact skips ASCII without a lookup.
                    None if c.is_ascii() => panic!("ASCII U+{:04X} flagged exact", c as u32),
                    None => {
                        exact += 1;
                        first_exact.get_or_insert(c);
                    }
                }
                let bytes = normalized.get().len();
                assert!(bytes <= table.growth * c.len_utf8(), "U+{:04X}", c as u32);
                let chars = normalized.get().chars().count();
                assert!(
                    !table.tokens_fit || chars <= c.len_utf8(),
                    "U+{:04X}",
                    c as u32
                );
            }
            // BERT's normalizers leave the device one token of room per byte.
            assert!(table.tokens_fit);
            // Only kept marks with a combining class go to the exact path: 96
            // rare ones (musical symbols, Glagolitic, Arabic annotation marks...),
            // newer than the crate's Unicode categories, which so do not strip them.
            assert!(exact <= 128, "{exact} code points flagged");
            // The scan reads ASCII 8 bytes at a time: an exact code point is
            // found at every place in and after such runs, and "é" is not one.
            // (Only accents stripped after NFD can be reordered.)
            assert_eq!(first_exact.is_some(), strip);
            let Some(exact) = first_exact else { continue };
            for len in 0..24 {
                for at in 0..=len {
                    let mut text: Vec<char> =
                        "The quick brown fox jumps".chars().take(len).collect();
                    let scan = |text: &[char]| {
                        let text: String = text.iter().collect();
                        crate::kernels::wordpiece_needs_exact(&model, text.as_bytes())
                    };
                    text.insert(at, 'é');
                    assert!(!scan(&text), "{text:?}");
                    text[at] = exact;
                    assert!(scan(&text), "{text:?}");
                    // At the end of a run of other non-ASCII characters.
                    text.splice(at..at, ['é', '日']);
                    assert!(scan(&text), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn every_code_point_splits_as_the_crate_does() {
        for splitter in [Splitter::Bert, Splitter::Whitespace] {
            let table = CharTable::build(None, splitter);
            for c in (0..=0x10FFFF).filter_map(char::from_u32) {
                // Alone: whitespace leaves nothing. After a letter: punctuation is a word of its own.
                let pieces = |text: String| {
                    let mut pre = PreTokenizedString::from(text);
                    match splitter {
                        Splitter::Bert => BertPreTokenizer.pre_tokenize(&mut pre).unwrap(),
                        Splitter::Whitespace => WhitespaceSplit.pre_tokenize(&mut pre).unwrap(),
                    }
                    pre.get_splits(OffsetReferential::Original, OffsetType::Byte)
                        .len()
                };
                let expected = match (pieces(c.to_string()), pieces(format!("a{c}"))) {
                    (0, _) => SPACE,
                    (_, 2) => PUNCT,
                    _ => WORD,
                };
                assert_eq!(class(&table, c), expected, "U+{:04X}", c as u32);
            }
        }
    }

    #[test]
    fn blocks_are_shared() {
        let table = CharTable::shared(None, Splitter::Bert);
        assert_eq!(table.blocks.len(), BLOCKS);
        assert!(
            table.entries.len() < 256 * 400,
            "{} entries",
            table.entries.len()
        );
        assert!(Arc::ptr_eq(
            &table,
            &CharTable::shared(None, Splitter::Bert)
        ));
    }
}
