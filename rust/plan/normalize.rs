//! A normalizer run on the host, piece by piece, with the text it writes and
//! nothing else (no alignments): the crate's own components, except those
//! that real SentencePiece-style tokenizers carry and that are cheap to run
//! without the crate's per-byte alignment vectors:
//! - `Prepend` (before a non-empty piece) and `Replace` of a string, left to
//!   right (Llama-2, Mistral, Gemma);
//! - `Precompiled` (SentencePiece's charsmap), grapheme by grapheme exactly
//!   as the crate applies it (normalizers/precompiled.rs), through the
//!   crate's own charsmap lookup;
//! - `Replace` of the regex `" {2,}"` by `" "`: runs of spaces to one.
//!
//! Offsets: `normalize_aligned` also gives each normalized byte's source, as
//! the crate's alignments record it, for every step but the crate's own
//! components (those leave offsets to the crate's normalization,
//! `engine/aligned.rs`).

use serde_json::Value;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use tokenizers::normalizers::Precompiled;
use tokenizers::{NormalizedString, Normalizer, NormalizerWrapper};
use unicode_segmentation::UnicodeSegmentation;

enum Step {
    Prepend(String),
    Replace(String, String),
    Precompiled(Box<Charsmap>),
    CollapseSpaces,
    Crate(Box<NormalizerWrapper>),
}

struct Charsmap {
    map: Precompiled,
    /// What each code point needs (`Class`), a block of 256 at a time, filled
    /// on first use.
    blocks: Vec<OnceLock<[Class; 256]>>,
    /// A bit per code point, set once its block is filled and it is Plain:
    /// most non-ASCII text is Plain, and this dense map (CJK's letters in
    /// 3 kB) is read where the blocks missed the cache.
    plain_bits: Vec<AtomicU64>,
    /// The first block, read without the lock on the hot path.
    ascii: [Class; 128],
    /// `ascii` with the whitespace characters the charsmap maps to
    /// whitespace ("\n" and "\t" to " " in XLM-R's) as Plain: for text that
    /// is only cut into whitespace-separated words, which such a mapping
    /// leaves as they are (`normalize_for_whitespace_words`).
    ascii_in_words: [Class; 128],
    /// The mapping of each mapped ASCII character ("\n" and "\t" are " " in
    /// XLM-R's): one newline in 40 characters made the charsmap's trie walk
    /// most of the normalizer's time.
    ascii_mapped: [Box<str>; 128],
    /// True when every printable ASCII character (" " to "~") is Plain, as
    /// in every charsmap seen: text is then skipped 8 bytes at a time.
    printable_plain: bool,
}

/// What a code point needs from the charsmap normalization.
#[derive(Clone, Copy, PartialEq)]
enum Class {
    /// Kept as it is.
    Plain,
    /// Replaced by its mapping.
    Mapped,
    /// May join the next or previous character into one grapheme: the text
    /// goes through the crate's grapheme-by-grapheme rule.
    Joins,
}

impl Charsmap {
    fn class_of(&self, c: char) -> Class {
        let code = c as usize;
        self.blocks[code >> 8].get_or_init(|| {
            let classes = std::array::from_fn(|low| {
                char::from_u32(((code >> 8) << 8 | low) as u32)
                    .map_or(Class::Plain, |c| self.classify(c))
            });
            for (word, bits) in classes.chunks(64).enumerate() {
                let plain = bits.iter().enumerate().fold(0u64, |acc, (i, &class)| {
                    acc | u64::from(class == Class::Plain) << i
                });
                self.plain_bits[(code >> 8) * 4 + word].fetch_or(plain, Ordering::Relaxed);
            }
            classes
        })[code & 0xFF]
    }

    /// The first character from `at` in `bytes` (valid UTF-8) not known to
    /// be Plain, or the end: printable ASCII 8 bytes at a time, other ASCII
    /// through `ascii`, runs of non-ASCII characters in a loop of their own.
    fn after_plain(&self, ascii: &[Class; 128], bytes: &[u8], mut at: usize) -> usize {
        while at < bytes.len() {
            if self.printable_plain {
                at = after_printable_ascii(bytes, at);
                if at == bytes.len() {
                    break;
                }
            }
            if bytes[at] < 0x80 {
                if ascii[bytes[at] as usize] != Class::Plain {
                    return at;
                }
                at += 1;
                continue;
            }
            while let Some(len) = self.plain_len_at(bytes, at) {
                at += len;
                if bytes.get(at).is_none_or(|&b| b < 0x80) {
                    break;
                }
            }
            if bytes.get(at).is_some_and(|&b| b >= 0x80) {
                return at;
            }
        }
        at
    }

    /// The length of the non-ASCII character at `at` in `bytes` (valid
    /// UTF-8) when it is known to be Plain (`plain_bits`).
    fn plain_len_at(&self, bytes: &[u8], at: usize) -> Option<usize> {
        let tail = |i: usize| u32::from(bytes.get(at + i).copied().unwrap_or(0) & 0x3F);
        let lead = u32::from(bytes[at]);
        let (len, code) = match lead {
            0xC0..=0xDF => (2, (lead & 0x1F) << 6 | tail(1)),
            0xE0..=0xEF => (3, (lead & 0x0F) << 12 | tail(1) << 6 | tail(2)),
            _ => (
                4,
                (lead & 0x07) << 18 | tail(1) << 12 | tail(2) << 6 | tail(3),
            ),
        };
        let word = self
            .plain_bits
            .get(code as usize >> 6)?
            .load(Ordering::Relaxed);
        (word >> (code & 63) & 1 == 1).then_some(len)
    }

    /// A character joins graphemes when it forms one with a neighbour: after
    /// a letter (Extend, ZWJ, SpacingMark), before one (Prepend), with itself
    /// (Hangul jamo, regional indicators) or before "\n" (CR). Every
    /// grapheme of two or more characters holds one such character.
    fn classify(&self, c: char) -> Class {
        let one = |a: char, b: char| {
            let mut buffer = [0u8; 8];
            let len = a.encode_utf8(&mut buffer).len();
            let len = len + b.encode_utf8(&mut buffer[len..]).len();
            std::str::from_utf8(&buffer[..len])
                .is_ok_and(|pair| pair.graphemes(true).nth(1).is_none())
        };
        if one('a', c) || one(c, 'a') || one(c, c) || one(c, '\n') {
            return Class::Joins;
        }
        let mut buffer = [0u8; 4];
        match self.map.transform(c.encode_utf8(&mut buffer)) {
            Some(_) => Class::Mapped,
            None => Class::Plain,
        }
    }
}

/// The steps of a tokenizer.json normalizer (none for `null`).
pub struct PieceNormalizer {
    steps: Vec<Step>,
}

impl PieceNormalizer {
    /// The normalizer of tokenizer.json's `normalizer` value, or why it cannot be read.
    pub fn from_spec(normalizer: &Value) -> Result<Self, String> {
        let items: Vec<&Value> = match normalizer {
            Value::Null => Vec::new(),
            n if n["type"] == "Sequence" => n["normalizers"]
                .as_array()
                .ok_or("unreadable normalizer Sequence")?
                .iter()
                .collect(),
            n => vec![n],
        };
        let read = |item: &Value| -> Result<Step, String> {
            let unreadable = |err: serde_json::Error| format!("unreadable normalizer: {err}");
            match item["type"].as_str() {
                Some("Precompiled") => {
                    // From text: its charsmap deserializer borrows the base64 string.
                    let map: Precompiled =
                        serde_json::from_str(&item.to_string()).map_err(unreadable)?;
                    let blocks = (0..=char::MAX as usize >> 8)
                        .map(|_| OnceLock::new())
                        .collect();
                    let mut charsmap = Charsmap {
                        map,
                        blocks,
                        plain_bits: (0..=char::MAX as usize >> 6)
                            .map(|_| AtomicU64::new(0))
                            .collect(),
                        ascii: [Class::Plain; 128],
                        ascii_in_words: [Class::Plain; 128],
                        ascii_mapped: std::array::from_fn(|_| Box::default()),
                        printable_plain: false,
                    };
                    charsmap.ascii = std::array::from_fn(|b| charsmap.class_of(b as u8 as char));
                    charsmap.ascii_mapped = std::array::from_fn(|b| {
                        let c = (b as u8 as char).to_string();
                        charsmap.map.transform(&c).unwrap_or_default().into()
                    });
                    charsmap.ascii_in_words = std::array::from_fn(|b| {
                        let mapped = &charsmap.ascii_mapped[b];
                        let blank = !mapped.is_empty() && mapped.chars().all(char::is_whitespace);
                        let mapped_alone = charsmap.ascii[b] == Class::Mapped; // (CR joins LF)
                        match (b as u8 as char).is_whitespace() && mapped_alone && blank {
                            true => Class::Plain,
                            false => charsmap.ascii[b],
                        }
                    });
                    charsmap.printable_plain = charsmap.ascii[0x20..0x7F]
                        .iter()
                        .all(|&c| c == Class::Plain);
                    Ok(Step::Precompiled(Box::new(charsmap)))
                }
                Some("Replace")
                    if item["pattern"]["Regex"] == " {2,}" && item["content"] == " " =>
                {
                    Ok(Step::CollapseSpaces)
                }
                Some("Prepend") => item["prepend"]
                    .as_str()
                    .map(|p| Step::Prepend(p.to_string()))
                    .ok_or_else(|| "unreadable Prepend".to_string()),
                Some("Replace") => {
                    match (item["pattern"]["String"].as_str(), item["content"].as_str()) {
                        (Some(from), Some(to)) if !from.is_empty() => {
                            Ok(Step::Replace(from.to_string(), to.to_string()))
                        }
                        _ => Ok(Step::Crate(Box::new(
                            serde_json::from_value(item.clone()).map_err(unreadable)?,
                        ))),
                    }
                }
                _ => Ok(Step::Crate(Box::new(
                    serde_json::from_value(item.clone()).map_err(unreadable)?,
                ))),
            }
        };
        let steps = items.into_iter().map(read).collect::<Result<Vec<_>, _>>()?;
        Ok(PieceNormalizer { steps })
    }

    /// True when there is nothing to do.
    pub fn is_identity(&self) -> bool {
        self.steps.is_empty()
    }

    /// When the normalizer is only `Replace(" ", r)` of one character `r`,
    /// after `Prepend(r)` or not (Llama-2, Mistral): `r`, and whether it
    /// prepends. A piece is then normalized by reading each of its spaces as
    /// `r`, with a space put before it when it prepends (and it is not empty).
    pub fn spaces_as(&self) -> Option<(char, bool)> {
        let (prepend, replace) = match &self.steps[..] {
            [Step::Prepend(p), Step::Replace(from, to)] => (Some(p), (from, to)),
            [Step::Replace(from, to)] => (None, (from, to)),
            _ => return None,
        };
        let mut chars = replace.1.chars();
        let (Some(r), None) = (chars.next(), chars.next()) else {
            return None;
        };
        let prepends_r = prepend.is_some_and(|p| p == replace.1);
        (replace.0 == " " && (prepend.is_none() || prepends_r)).then_some((r, prepends_r))
    }

    /// True when [`PieceNormalizer::normalize_aligned`] can follow every step.
    pub fn aligns(&self) -> bool {
        !self.steps.iter().any(|step| matches!(step, Step::Crate(_)))
    }

    /// `piece` normalized, with the byte range of `piece` each normalized byte
    /// comes from: the crate's alignments (`NormalizedString`). A byte starts
    /// aligned to its character; `prepend` gives its text the first
    /// character's range; a `replace` (strings, runs of spaces) gives the
    /// replacement the range of the last byte of what it replaces; the
    /// charsmap follows the crate's `transform` (see `aligned_charsmap`).
    /// None unless [`PieceNormalizer::aligns`].
    pub fn normalize_aligned(&self, piece: &str) -> Option<(String, Aligns)> {
        if !self.aligns() || u32::try_from(piece.len()).is_err() {
            return None;
        }
        let mut text = piece.to_string();
        let mut align: Aligns = piece
            .char_indices()
            .flat_map(|(at, c)| {
                let range = (at as u32, (at + c.len_utf8()) as u32);
                std::iter::repeat_n(range, c.len_utf8())
            })
            .collect();
        for step in &self.steps {
            let matches: Vec<(usize, usize)> = match step {
                Step::Prepend(p) if !text.is_empty() => {
                    text.insert_str(0, p);
                    align.splice(0..0, std::iter::repeat_n(align[0], p.len()));
                    continue;
                }
                Step::Replace(from, _) => text
                    .match_indices(from.as_str())
                    .map(|(at, m)| (at, at + m.len()))
                    .collect(),
                Step::CollapseSpaces => space_runs(&text),
                Step::Precompiled(charsmap) => {
                    if let Cow::Owned(_) = precompiled(charsmap, &charsmap.ascii, &text) {
                        (text, align) = aligned_charsmap(&charsmap.map, &text, &align);
                    }
                    continue;
                }
                _ => continue,
            };
            let to = match step {
                Step::Replace(_, to) => to.as_str(),
                _ => " ",
            };
            if !matches.is_empty() {
                (text, align) = replaced(&text, &align, &matches, to);
            }
        }
        Some((text, align))
    }

    /// `piece` normalized; None when a crate component fails (the exact path
    /// reports it).
    pub fn normalize<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        let mut text = Cow::Borrowed(piece);
        for step in &self.steps {
            text = match step {
                Step::Prepend(p) if !text.is_empty() => Cow::Owned(format!("{p}{text}")),
                Step::Prepend(_) => text,
                Step::Replace(from, to) => with_replaced(text, from, to),
                Step::Precompiled(charsmap) => {
                    match precompiled(charsmap, &charsmap.ascii, &text) {
                        Cow::Borrowed(_) => text,
                        Cow::Owned(changed) => Cow::Owned(changed),
                    }
                }
                Step::CollapseSpaces if text.contains("  ") => Cow::Owned(collapse_spaces(&text)),
                Step::CollapseSpaces => text,
                Step::Crate(normalizer) => {
                    let mut normalized = NormalizedString::from(text.as_ref());
                    normalizer.normalize(&mut normalized).ok()?;
                    Cow::Owned(normalized.get().to_string())
                }
            };
        }
        Some(text)
    }

    /// True when `normalize_for_whitespace_words` can stand in for
    /// `normalize`: the steps are charsmaps and collapsed spaces, which
    /// change whitespace only into whitespace.
    pub fn keeps_whitespace_words(&self) -> bool {
        self.steps
            .iter()
            .all(|step| matches!(step, Step::Precompiled(_) | Step::CollapseSpaces))
    }

    /// A piece normalized as far as its whitespace-separated words go (for
    /// `WhitespaceSplit`, when `keeps_whitespace_words`): each whitespace
    /// character the charsmap maps to whitespace, and each run of spaces, is
    /// left as it is, so most text needs no copy.
    pub fn normalize_for_whitespace_words<'t>(&self, piece: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(piece);
        for step in &self.steps {
            if let Step::Precompiled(charsmap) = step {
                if let Cow::Owned(changed) = precompiled(charsmap, &charsmap.ascii_in_words, &text)
                {
                    text = Cow::Owned(changed);
                }
            }
        }
        text
    }
}

/// `text` with every `from` replaced by `to` (as it is when there is none),
/// found with memchr's substring search: `str::replace` finds a `char` with
/// one memchr call per match, which cost more than the copy on text whose
/// every fifth byte is a space.
fn with_replaced<'t>(text: Cow<'t, str>, from: &str, to: &str) -> Cow<'t, str> {
    let finder = memchr::memmem::Finder::new(from.as_bytes());
    let mut found = finder.find_iter(text.as_bytes()).peekable();
    if from.is_empty() || found.peek().is_none() {
        return text;
    }
    let mut out = String::with_capacity(text.len() + text.len() / 4 * to.len());
    let mut last = 0;
    for at in found {
        out.push_str(&text[last..at]);
        out.push_str(to);
        last = at + from.len();
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// The crate's `Precompiled::normalize`, text only. Text whose characters
/// each form a grapheme of their own (no `Class::Joins`) is each character
/// mapped or kept; other text follows the crate's rule: a grapheme of under 6
/// bytes that the charsmap maps (on its shortest mapped prefix: the crate's
/// `transform`) becomes that mapping whole; otherwise each character is
/// mapped or kept.
fn precompiled<'t>(charsmap: &Charsmap, ascii: &[Class; 128], text: &'t str) -> Cow<'t, str> {
    let bytes = text.as_bytes();
    // Kept characters are copied in runs, up to each mapped one.
    let (mut out, mut copied, mut at) = (None::<String>, 0, 0);
    let mut buffer = [0u8; 4];
    while at < bytes.len() {
        at = charsmap.after_plain(ascii, bytes, at);
        if at == bytes.len() {
            break;
        }
        let c = text[at..].chars().next().unwrap_or_default();
        let class = match c.is_ascii() {
            true => ascii[c as usize],
            false => charsmap.class_of(c),
        };
        match class {
            Class::Plain => {}
            Class::Mapped => {
                let mapped = match c.is_ascii() {
                    true => &charsmap.ascii_mapped[c as usize],
                    false => charsmap
                        .map
                        .transform(c.encode_utf8(&mut buffer))
                        .unwrap_or_default(),
                };
                let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
                out.push_str(&text[copied..at]);
                out.push_str(mapped);
                copied = at + c.len_utf8();
            }
            Class::Joins => return Cow::Owned(by_graphemes(&charsmap.map, text)),
        }
        at += c.len_utf8();
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(text),
    }
}

/// The first byte from `at` that is not printable ASCII (" " to "~"), read
/// 8 bytes at a time: one byte at a time was most of the charsmap's time.
fn after_printable_ascii(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(block) = bytes.get(at..at + 8) {
        let w = u64::from_le_bytes(block.try_into().unwrap_or_default());
        // A byte under 0x20 borrows into its high bit, one of 0x7F or more
        // has it after adding 1 (or before). A borrow or carry goes on only
        // from such a byte, so the lowest flag is the first one.
        let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let high = (w.wrapping_add(ONES) | w) & HIGH;
        let flags = control | high;
        if flags != 0 {
            return at + flags.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    at + bytes[at..]
        .iter()
        .take_while(|b| (0x20..0x7F).contains(*b))
        .count()
}

/// The crate's rule, grapheme by grapheme.
fn by_graphemes(p: &Precompiled, text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for grapheme in text.graphemes(true) {
        if grapheme.len() < 6 {
            if let Some(mapped) = p.transform(grapheme) {
                out.push_str(mapped);
                continue;
            }
        }
        for (at, c) in grapheme.char_indices() {
            match p.transform(&grapheme[at..at + c.len_utf8()]) {
                Some(mapped) => out.push_str(mapped),
                None => out.push(c),
            }
        }
    }
    out
}

/// Where each normalized byte comes from: a byte range of the piece.
pub type Aligns = Vec<(u32, u32)>;

/// `text` with each of `matches` (byte ranges, in order) replaced by `to`, as
/// the crate's `NormalizedString::replace` aligns it: the replacement takes
/// the range of the match's last byte.
fn replaced(
    text: &str,
    align: &[(u32, u32)],
    matches: &[(usize, usize)],
    to: &str,
) -> (String, Aligns) {
    let (mut out, mut out_align) = (
        String::with_capacity(text.len()),
        Vec::with_capacity(align.len()),
    );
    let mut last = 0;
    for &(start, end) in matches {
        out.push_str(&text[last..start]);
        out_align.extend_from_slice(&align[last..start]);
        out.push_str(to);
        out_align.extend(std::iter::repeat_n(align[end - 1], to.len()));
        last = end;
    }
    out.push_str(&text[last..]);
    out_align.extend_from_slice(&align[last..]);
    (out, out_align)
}

/// The byte ranges of the runs of two or more spaces (the regex `" {2,}"`).
fn space_runs(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let end = at + bytes[at..].iter().take_while(|&&b| b == b' ').count();
        if end - at >= 2 {
            runs.push((at, end));
        }
        at = end.max(at + 1);
    }
    runs
}

/// The charsmap normalization with alignments: the crate's
/// `Precompiled::normalize` builds a list of (character, change) grapheme by
/// grapheme (a mapping's first character replaces, its others are inserted;
/// a mapping to nothing removes the character into the previous entry), and
/// `NormalizedString::transform` aligns it: a replacing character takes the
/// range of the character it replaces, an inserted one the previous byte's
/// (or (0, 0) at the start).
fn aligned_charsmap(p: &Precompiled, text: &str, align: &[(u32, u32)]) -> (String, Aligns) {
    let mut changes: Vec<(char, isize)> = Vec::with_capacity(text.len());
    // The crate's `replace` (normalizers/precompiled.rs).
    let replace = |changes: &mut Vec<(char, isize)>, old: &str, new: &str| {
        let diff = new.chars().count() as isize - old.chars().count() as isize;
        changes.extend(new.chars().map(|c| (c, 0)));
        if diff > 0 {
            changes
                .iter_mut()
                .rev()
                .take(diff as usize)
                .for_each(|(_, ch)| *ch = 1);
        } else if diff < 0 {
            if let Some((_, ch)) = changes.last_mut() {
                *ch += diff;
            }
        }
    };
    for grapheme in text.graphemes(true) {
        if grapheme.len() < 6 {
            if let Some(mapped) = p.transform(grapheme) {
                replace(&mut changes, grapheme, mapped);
                continue;
            }
        }
        for (at, c) in grapheme.char_indices() {
            let part = &grapheme[at..at + c.len_utf8()];
            match p.transform(part) {
                Some(mapped) => replace(&mut changes, part, mapped),
                None => changes.push((c, 0)),
            }
        }
    }
    let mut source = text.chars();
    let (mut out, mut out_align) = (
        String::with_capacity(text.len()),
        Vec::with_capacity(align.len()),
    );
    let mut offset = 0usize;
    for (c, change) in changes {
        let range = match change {
            1.. if offset == 0 => (0, 0),
            1.. => align[offset - 1],
            _ => align.get(offset).copied().unwrap_or((0, 0)),
        };
        if change <= 0 {
            offset += source.next().map_or(0, char::len_utf8);
        }
        for _ in 0..(-change).max(0) {
            offset += source.next().map_or(0, char::len_utf8);
        }
        out.push(c);
        out_align.extend(std::iter::repeat_n(range, c.len_utf8()));
    }
    (out, out_align)
}

/// Runs of two or more spaces as one space.
fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut after_space = false;
    for c in text.chars() {
        if !(c == ' ' && after_space) {
            out.push(c);
        }
        after_space = c == ' ';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_ascii_is_skipped_to_the_first_other_byte() {
        let rule = |b: &[u8], at: usize| {
            (at..b.len())
                .find(|&i| !(0x20..0x7F).contains(&b[i]))
                .unwrap_or(b.len())
        };
        // Every byte value at every place of a 17-byte text of printable ASCII.
        for odd in 0..=255u8 {
            for place in 0..17 {
                let mut bytes = *b"printable ascii ~";
                bytes[place] = odd;
                for at in 0..bytes.len() {
                    assert_eq!(
                        after_printable_ascii(&bytes, at),
                        rule(&bytes, at),
                        "{bytes:?} at {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn collapse_spaces_keeps_one_of_each_run() {
        assert_eq!(collapse_spaces("a  b   c d \t  e"), "a b c d \t e");
    }

    #[test]
    fn prepend_and_replace_apply_per_piece_in_order() {
        let spec = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]});
        let normalizer = PieceNormalizer::from_spec(&spec).unwrap();
        assert_eq!(normalizer.normalize("a b  c").unwrap(), "▁a▁b▁▁c");
        assert_eq!(normalizer.normalize("").unwrap(), "");
        assert_eq!(normalizer.spaces_as(), Some(('▁', true)));
        // Replace alone; with another Prepend, a longer pattern, or more steps, no.
        let spaces_as = |steps: Value| PieceNormalizer::from_spec(&steps).unwrap().spaces_as();
        let replace =
            serde_json::json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
        assert_eq!(spaces_as(replace.clone()), Some(('▁', false)));
        let other_prepend = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "_"}, replace.clone()]});
        let two_spaces =
            serde_json::json!({"type": "Replace", "pattern": {"String": "  "}, "content": "▁"});
        let then_lowercase = serde_json::json!({"type": "Sequence", "normalizers": [
            replace, {"type": "Lowercase"}]});
        for steps in [other_prepend, two_spaces, then_lowercase] {
            assert_eq!(spaces_as(steps), None);
        }
    }

    #[test]
    fn steps_run_in_order_and_the_crate_takes_the_rest() {
        let spec = serde_json::json!({"type": "Sequence", "normalizers": [
            {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]});
        let normalizer = PieceNormalizer::from_spec(&spec).unwrap();
        assert_eq!(normalizer.normalize("A  B").unwrap(), "a b");
        assert!(PieceNormalizer::from_spec(&Value::Null)
            .unwrap()
            .is_identity());
    }
}
