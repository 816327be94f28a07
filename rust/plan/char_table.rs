//! Per-code-point tables (`GtCharTable`, cuda/gt_normalize.cuh): what a
//! normalizer that maps each code point on its own turns each code point
//! into, and, for the WordPiece family, each normalized code point's class
//! for the pre-tokenizer.
//!
//! The steps ([`CharStep`]) are the crate's normalizers that act on one code
//! point at a time (`BertNormalizer`, `Lowercase`, `StripAccents`, `Nmt`,
//! the `ByteLevel` normalizer, `Replace` of one character), and NFD, NFKD,
//! NFC and NFKC where a code point's result does not depend on its
//! neighbours; a Sequence of them composes into one table. Every entry is
//! computed from the functions the `tokenizers` crate itself calls (the same
//! `unicode_categories` and `unicode-normalization-alignments` versions, the
//! same std `char::to_lowercase`), and tests compare the table with the
//! crate's normalizers on every code point, alone and between neighbours.
//!
//! Why a code point's output is its own: every per-code-point step of the
//! crate writes each character's replacement in place (its alignments give
//! all of it the span of the character it replaces), so composing them maps
//! each input code point to a string of its own. The exceptions are flagged
//! (`EXACT`), and text holding a flagged code point takes the steps one by
//! one on the host (WordPiece: the exact path):
//! - NF(K)D sorts combining marks by class across code points. No reordering
//!   can cross a code point whose decomposition starts with a character of
//!   class 0, and a reordering changes nothing visible when every mark with
//!   a class is removed by the steps after it (`StripAccents`, BERT's accent
//!   stripping): a table flags the smaller of the two sets of code points
//!   that break these (`Reorder`).
//! - NF(K)C composes with neighbours: a code point is left as it is only
//!   when what it has become is all "stable" characters (quick check Yes,
//!   class 0: `normal_form.rs`), which compose with nothing.
//!
//! Tables are built once per process for each configuration (about 0.1 s).

use super::bytelevel::alphabet;
use super::normal_form::StableChars;
use crate::kernels::GtCharTable;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::char::{canonical_combining_class, is_combining_mark};
use unicode_normalization_alignments::UnicodeNormalization;

// Entry bits, as in cuda/gt_normalize.cuh.
const WORD: u32 = 0;
const SPACE: u32 = 1;
const PUNCT: u32 = 2;
const DROP: u32 = 1 << 2;
const MAP: u32 = 2 << 2;
const EXACT: u32 = 1 << 4;
const BLOCKS: usize = 0x1100;
/// Bytes of replacements a table holds: blob offsets are 24 bits.
const BLOB_MAX: usize = 1 << 24;

/// `BertNormalizer`'s options, `strip_accents` resolved (it follows
/// `lowercase` when unset, as in the crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BertOptions {
    pub clean_text: bool,
    pub handle_chinese_chars: bool,
    pub strip_accents: bool,
    pub lowercase: bool,
}

/// A normalizer step that maps each code point on its own (see the module
/// comment for NF(K)D and NF(K)C).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CharStep {
    Bert(BertOptions),
    Lowercase,
    StripAccents,
    Nmt,
    /// The `ByteLevel` normalizer: each byte as its byte-level character.
    ByteLevel,
    /// `Replace` of one character by a string.
    Replace(char, String),
    Nfd,
    Nfkd,
    Nfc,
    Nfkc,
}

impl CharStep {
    /// The step for tokenizer.json's normalizer `item`, when it maps each
    /// code point on its own (a `Replace` of one character by at most 255
    /// bytes, the longest a table entry holds).
    pub fn from_spec(item: &serde_json::Value) -> Option<CharStep> {
        let flag = |key: &str, default: bool| item[key].as_bool().unwrap_or(default);
        Some(match item["type"].as_str()? {
            "BertNormalizer" => {
                let lowercase = flag("lowercase", true);
                CharStep::Bert(BertOptions {
                    clean_text: flag("clean_text", true),
                    handle_chinese_chars: flag("handle_chinese_chars", true),
                    strip_accents: item["strip_accents"].as_bool().unwrap_or(lowercase),
                    lowercase,
                })
            }
            "Lowercase" => CharStep::Lowercase,
            "StripAccents" => CharStep::StripAccents,
            "Nmt" => CharStep::Nmt,
            "ByteLevel" => CharStep::ByteLevel,
            "NFD" => CharStep::Nfd,
            "NFKD" => CharStep::Nfkd,
            "NFC" => CharStep::Nfc,
            "NFKC" => CharStep::Nfkc,
            "Replace" => {
                let mut from = item["pattern"]["String"].as_str()?.chars();
                let to = item["content"].as_str()?;
                match (from.next(), from.next()) {
                    (Some(c), None) if to.len() < 256 => CharStep::Replace(c, to.to_string()),
                    _ => return None,
                }
            }
            _ => return None,
        })
    }
}

/// How the pre-tokenizer splits normalized text into words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Splitter {
    /// `BertPreTokenizer`: whitespace splits, each punctuation character is a word.
    Bert,
    /// `WhitespaceSplit`: whitespace splits.
    Whitespace,
    /// No classes (a normalizer's table alone).
    None,
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
    /// No code point is flagged: the table alone is the normalizer.
    pub never_exact: bool,
}

/// Which code points an NF(K)D step flags (module comment): those whose
/// decomposition starts with a mark (`Leading`), or those that keep a mark
/// with a class to the end of the steps (`Surviving`).
#[derive(Clone, Copy, PartialEq)]
enum Reorder {
    Leading,
    Surviving,
}

impl CharTable {
    /// The table for these normalizer steps (none: no normalizer) and
    /// pre-tokenizer, built on first use and shared by every tokenizer that
    /// needs it; or why there is none (see `build`).
    pub fn shared(steps: &[CharStep], splitter: Splitter) -> Result<Arc<CharTable>, String> {
        type Cache = Mutex<HashMap<(Vec<CharStep>, Splitter), Arc<CharTable>>>;
        static CACHE: OnceLock<Cache> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (steps.to_vec(), splitter);
        if let Some(table) = cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&key)
        {
            return Ok(table.clone());
        }
        // Built outside the lock: tokenizers with other tables load meanwhile.
        let table = Arc::new(CharTable::build(steps, splitter)?);
        let mut tables = cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(tables.entry(key).or_insert(table).clone())
    }

    /// The table, or why there is none: steps that give more distinct
    /// replacements than the blob's 24-bit offsets reach (`ByteLevel` twice).
    fn build(steps: &[CharStep], splitter: Splitter) -> Result<CharTable, String> {
        // NF(K)D: flag the smaller of the two sets that make reordering harmless.
        let reorder = match steps
            .iter()
            .any(|s| matches!(s, CharStep::Nfd | CharStep::Nfkd))
        {
            false => Reorder::Leading,
            true => {
                let count = |rule| {
                    (0..=0x10FFFF)
                        .filter_map(char::from_u32)
                        .filter(|&c| normalized(c, steps, rule).1)
                        .count()
                };
                match count(Reorder::Surviving) < count(Reorder::Leading) {
                    true => Reorder::Surviving,
                    false => Reorder::Leading,
                }
            }
        };
        let mut table = CharTable {
            blocks: Vec::with_capacity(BLOCKS),
            entries: Vec::new(),
            blob: Vec::new(),
            exact_prefixes: vec![0; (1 << 16) / 64],
            growth: 1,
            tokens_fit: true,
            never_exact: true,
        };
        let mut blocks_seen: HashMap<Vec<u32>, u16> = HashMap::new();
        let mut blob_seen: HashMap<String, u32> = HashMap::new();
        for block in 0..BLOCKS as u32 {
            let entries: Vec<u32> = (0..256)
                .map(|low| {
                    let Some(c) = char::from_u32(block << 8 | low) else {
                        return WORD; // surrogates: never in a str
                    };
                    let (entry, out) = entry(c, steps, reorder, splitter);
                    if entry & EXACT != 0 {
                        let mut bytes = [0; 4];
                        let bytes = c.encode_utf8(&mut bytes).as_bytes();
                        let prefix = usize::from(bytes[0]) << 8 | usize::from(bytes[1]);
                        table.exact_prefixes[prefix / 64] |= 1 << (prefix % 64);
                        table.never_exact = false;
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
        // Past BLOB_MAX the offsets wrapped: the table is dropped unused.
        match table.blob.len() < BLOB_MAX {
            true => Ok(table),
            false => Err(format!(
                "its steps give {} bytes of distinct replacements, more than one table holds ({BLOB_MAX})",
                table.blob.len()
            )),
        }
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
fn entry(c: char, steps: &[CharStep], reorder: Reorder, splitter: Splitter) -> (u32, String) {
    let class = match splitter {
        Splitter::None => WORD,
        _ if c.is_whitespace() => SPACE,
        Splitter::Bert if c.is_ascii_punctuation() || c.is_punctuation() => PUNCT,
        _ => WORD,
    };
    let (out, exact) = normalized(c, steps, reorder);
    let action = match out.as_str() {
        "" => DROP,
        same if same.chars().eq(std::iter::once(c)) => 0,
        _ => MAP,
    };
    (class | action | if exact { EXACT } else { 0 }, out)
}

/// `c` after `steps`, in order, and whether a step could act differently
/// on it among neighbours (see the module comment; `reorder`: which code
/// points NF(K)D flags).
fn normalized(c: char, steps: &[CharStep], reorder: Reorder) -> (String, bool) {
    let mut text = c.to_string();
    let mut exact = false;
    for (at, step) in steps.iter().enumerate() {
        text = match step {
            CharStep::Bert(options) => {
                let (out, flagged) = bert(&text, *options);
                exact |= flagged;
                out
            }
            CharStep::Lowercase => text.chars().flat_map(char::to_lowercase).collect(),
            CharStep::StripAccents => text.chars().filter(|&c| !is_combining_mark(c)).collect(),
            CharStep::Nmt => text.chars().filter_map(nmt).collect(),
            CharStep::ByteLevel => {
                let alphabet = alphabet();
                text.bytes().map(|b| alphabet[b as usize]).collect()
            }
            CharStep::Replace(from, to) => {
                let mut out = String::with_capacity(text.len());
                for c in text.chars() {
                    match c == *from {
                        true => out.push_str(to),
                        false => out.push(c),
                    }
                }
                out
            }
            CharStep::Nfd | CharStep::Nfkd => {
                let out: String = match step {
                    CharStep::Nfd => text.nfd().map(|(c, _)| c).collect(),
                    _ => text.nfkd().map(|(c, _)| c).collect(),
                };
                let marked = |c: char| canonical_combining_class(c) != 0;
                exact |= match reorder {
                    Reorder::Leading => out.chars().next().is_some_and(marked),
                    Reorder::Surviving => out.chars().filter(|&m| marked(m)).any(|m| {
                        !normalized(m, &steps[at + 1..], Reorder::Leading)
                            .0
                            .is_empty()
                    }),
                };
                out
            }
            CharStep::Nfc | CharStep::Nfkc => {
                let stable = match step {
                    CharStep::Nfc => StableChars::nfc(),
                    _ => StableChars::nfkc(),
                };
                exact |= !stable.all_stable(&text);
                text
            }
        };
    }
    (text, exact)
}

/// `text` after `BertNormalizer` (its steps in its order), and whether the
/// crate's NFD could reorder what is left of it with its neighbours (a kept
/// character with a non-zero combining class).
fn bert(text: &str, o: BertOptions) -> (String, bool) {
    let mut chars: Vec<char> = text.chars().collect();
    if o.clean_text {
        chars = chars
            .into_iter()
            .filter_map(|c| {
                let control = !matches!(c, '\t' | '\n' | '\r') && c.is_other();
                if c == '\0' || c == '\u{fffd}' || control {
                    None
                } else if matches!(c, '\t' | '\n' | '\r') || c.is_whitespace() {
                    Some(' ')
                } else {
                    Some(c)
                }
            })
            .collect();
    }
    if o.handle_chinese_chars {
        chars = chars
            .into_iter()
            .flat_map(|c| match is_chinese_char(c) {
                true => vec![' ', c, ' '],
                false => vec![c],
            })
            .collect();
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

/// The crate's `Nmt` normalizer on one character: control characters
/// dropped, other white space as a space.
fn nmt(c: char) -> Option<char> {
    match c as u32 {
        0x0001..=0x0008 | 0x000B | 0x000E..=0x001F | 0x007F | 0x008F | 0x009F => None,
        0x0009
        | 0x000A
        | 0x000C
        | 0x000D
        | 0x1680
        | 0x200B..=0x200F
        | 0x2028
        | 0x2029
        | 0x2581
        | 0xFEFF
        | 0xFFFD => Some(' '),
        _ => Some(c),
    }
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
            let table = CharTable::build(&[CharStep::Bert(options)], Splitter::Bert).unwrap();
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

    /// Composed steps against the crate's normalizers, run one after the
    /// other: every code point (a stride of them for the slower cases)
    /// between neighbours, the text and each character's source, wherever
    /// the table flags none of the text's code points; and the table flags
    /// few.
    #[test]
    fn composed_steps_map_every_code_point_as_the_crate_does() {
        use tokenizers::normalizer::Range;
        use tokenizers::NormalizerWrapper;
        let specs: [(&str, usize); 6] = [
            (
                r#"[{"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]"#,
                1,
            ),
            (
                r#"[{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]"#,
                1,
            ),
            (r#"[{"type": "NFKD"}, {"type": "Lowercase"}]"#, 3),
            (
                r#"[{"type": "Nmt"}, {"type": "NFC"}, {"type": "ByteLevel"}]"#,
                5,
            ),
            (
                r#"[{"type": "StripAccents"}, {"type": "NFKC"}, {"type": "Replace", "pattern": {"String": "a"}, "content": ""}]"#,
                5,
            ),
            (
                r#"[{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": false}, {"type": "NFD"}]"#,
                7,
            ),
        ];
        for (spec, stride) in specs {
            let items: Vec<serde_json::Value> = serde_json::from_str(spec).unwrap();
            let steps: Vec<CharStep> = items
                .iter()
                .map(|i| CharStep::from_spec(i).unwrap())
                .collect();
            let crate_steps: Vec<NormalizerWrapper> = items
                .iter()
                .map(|i| serde_json::from_value(i.clone()).unwrap())
                .collect();
            let table = CharTable::build(&steps, Splitter::None).unwrap();
            let flagged = |c: char| {
                let cp = c as usize;
                table.entries[(table.blocks[cp >> 8] as usize) << 8 | (cp & 0xFF)] & EXACT != 0
            };
            let mut flags = 0;
            for c in (0..=0x10FFFF).step_by(stride).filter_map(char::from_u32) {
                flags += usize::from(flagged(c));
                for (before, after) in [("a", "b"), ("\u{e9}", "x\u{300}")] {
                    let text = format!("{before}{c}{after}");
                    if text.chars().any(flagged) {
                        continue;
                    }
                    let mut expected = NormalizedString::from(text.as_str());
                    for step in &crate_steps {
                        step.normalize(&mut expected).unwrap();
                    }
                    let mut ours = String::new();
                    let mut sources = Vec::new();
                    for (at, c) in text.char_indices() {
                        let out = through_table(&table, c).unwrap();
                        sources.extend(out.chars().map(|_| at..at + c.len_utf8()));
                        ours.push_str(&out);
                    }
                    assert_eq!(
                        ours,
                        expected.get(),
                        "{spec}: U+{:04X} in {text:?}",
                        c as u32
                    );
                    for ((at, ch), source) in ours.char_indices().zip(sources) {
                        let range =
                            expected.convert_offsets(Range::Normalized(at..at + ch.len_utf8()));
                        assert_eq!(
                            range,
                            Some(source),
                            "{spec}: U+{:04X} in {text:?}",
                            c as u32
                        );
                    }
                }
            }
            // NFKC leaves alone only what its quick check passes (about 5,000 code points fail it).
            assert!(
                flags * stride < 6000,
                "{spec}: {} code points flagged",
                flags * stride
            );
        }
    }

    #[test]
    fn every_code_point_splits_as_the_crate_does() {
        for splitter in [Splitter::Bert, Splitter::Whitespace] {
            let table = CharTable::build(&[], splitter).unwrap();
            for c in (0..=0x10FFFF).filter_map(char::from_u32) {
                // Alone: whitespace leaves nothing. After a letter: punctuation is a word of its own.
                let pieces = |text: String| {
                    let mut pre = PreTokenizedString::from(text);
                    match splitter {
                        Splitter::Bert => BertPreTokenizer.pre_tokenize(&mut pre).unwrap(),
                        Splitter::Whitespace => WhitespaceSplit.pre_tokenize(&mut pre).unwrap(),
                        Splitter::None => unreachable!("not among the splitters tested"),
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
        let table = CharTable::shared(&[], Splitter::Bert).unwrap();
        assert_eq!(table.blocks.len(), BLOCKS);
        assert!(
            table.entries.len() < 256 * 400,
            "{} entries",
            table.entries.len()
        );
        assert!(Arc::ptr_eq(
            &table,
            &CharTable::shared(&[], Splitter::Bert).unwrap()
        ));
    }

    #[test]
    fn steps_with_too_many_replacements_have_no_table() {
        // ByteLevel twice: ~1.1M distinct replacements of up to 16 bytes.
        let twice = [CharStep::ByteLevel, CharStep::ByteLevel];
        let err = CharTable::build(&twice, Splitter::None).err().unwrap();
        assert!(err.contains("more than one table holds"), "{err}");
        assert!(CharTable::build(&twice[..1], Splitter::None).is_ok());
    }
}
