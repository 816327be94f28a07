//! SentencePiece's charsmap (the `Precompiled` normalizer) run as the crate
//! runs it (normalizers/precompiled.rs), grapheme by grapheme, through the
//! crate's own charsmap lookup, but fast on the text it leaves alone: a
//! class per code point (kept, mapped, or joining a grapheme: then the
//! crate's grapheme-by-grapheme rule for that text), printable ASCII
//! skipped 8 bytes at a time. With alignments, as the crate's `transform`
//! aligns the list of (character, change) it builds (`aligned_charsmap`).

use super::Aligns;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use tokenizers::normalizers::Precompiled;
use unicode_segmentation::UnicodeSegmentation;

pub(super) struct Charsmap {
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
pub(super) enum Class {
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

impl Charsmap {
    /// The charsmap of a `Precompiled` normalizer's tokenizer.json `item`.
    pub(super) fn from_spec(item: &Value) -> Result<Charsmap, String> {
        // From text: its charsmap deserializer borrows the base64 string.
        let map: Precompiled = serde_json::from_str(&item.to_string())
            .map_err(|err| format!("unreadable Precompiled normalizer: {err}"))?;
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
        Ok(charsmap)
    }

    /// `text` as the crate's charsmap normalizes it (borrowed when unchanged).
    pub(super) fn normalize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        precompiled(self, &self.ascii, text)
    }

    /// As [`Charsmap::normalize`], for text that is only cut into
    /// whitespace-separated words: whitespace the charsmap maps to
    /// whitespace is left as it is (`ascii_in_words`).
    pub(super) fn normalize_for_words<'t>(&self, text: &'t str) -> Cow<'t, str> {
        precompiled(self, &self.ascii_in_words, text)
    }

    /// `text` normalized with alignments (`align`: the source of each byte of
    /// `text`), or None when the charsmap leaves it as it is.
    pub(super) fn normalize_aligned(
        &self,
        text: &str,
        align: &[(u32, u32)],
    ) -> Option<(String, Aligns)> {
        match precompiled(self, &self.ascii, text) {
            Cow::Borrowed(_) => None,
            Cow::Owned(_) => Some(aligned_charsmap(&self.map, text, align)),
        }
    }
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
}
