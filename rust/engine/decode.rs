//! Decoding at engine speed. The crate's `decode` makes a `String` per token,
//! looks each id up in two hash maps and, to skip special tokens, hashes
//! every token string again; its decoders then walk the strings (ByteLevel
//! looks every character up in a hash map). The decoders real tokenizers
//! use depend on each token alone, plus whether it comes first: so every
//! id's output is worked out once per tokenizer ([`Forms`]: 16 bytes per
//! id, its text in place when short) and a row is a run of fixed-size
//! copies, checked as UTF-8 only when an output is not UTF-8 alone:
//!
//! - `ByteLevel`: each token's bytes (its characters read back through the
//!   byte-level alphabet, or its own UTF-8 when a character is not in it),
//!   the row's bytes then read as UTF-8 with replacement characters;
//! - SentencePiece-style: `Replace` (string patterns), `ByteFallback`
//!   (runs of `<0xXX>` tokens: their bytes when they are UTF-8, else one
//!   U+FFFD per byte), `Fuse`, then `Strip` on the fused text; or
//!   `Metaspace` (the replacement character a space, dropped from the first
//!   token);
//! - `WordPiece`: the continuing prefix dropped, or a space before every
//!   token but the first, each token cleaned up when asked.
//!
//! `skip_special_tokens` drops what the crate drops (ids whose token is a
//! special added token); ids without a token are dropped, as the crate does.
//! transformers' `clean_up_tokenization_spaces` runs on the result when
//! asked. Any other decoder runs through the crate's own `decode`.

use crate::error::{Error, Result};
use serde_json::Value;
use tokenizers::Tokenizer;

/// One id's output and flags in 16 bytes: up to `INLINE` bytes of text in
/// place (a row copies all 16 bytes at once and keeps `len` of them: one
/// memory access and no copy call per id), else where the text lies in the
/// table's `long` bytes. Bytes 14 and 15: the length (`LONG` when not in
/// place) and the flags.
#[derive(Clone, Copy)]
struct Entry([u8; 16]);

const INLINE: usize = 14;
const LONG: u8 = u8::MAX;

impl Entry {
    /// An id past the table: no token.
    const NONE: Entry = Entry([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, MISSING]);

    fn len(self) -> u8 {
        self.0[14]
    }

    fn flags(self) -> u8 {
        self.0[15]
    }

    /// Where a `LONG` entry's text lies in `long`.
    fn span(self) -> std::ops::Range<usize> {
        let word = |at: usize| u32::from_le_bytes(self.0[at..at + 4].try_into().unwrap()) as usize;
        word(0)..word(0) + word(4)
    }
}

/// Every id's entry.
#[derive(Default)]
struct Table {
    entries: Vec<Entry>,
    long: Vec<u8>,
}

impl Table {
    /// The next id's output and flags (`WHOLE` added when `form` is UTF-8).
    fn push(&mut self, form: &[u8], flags: u8) {
        let mut entry = [0u8; 16];
        if form.len() <= INLINE {
            entry[..form.len()].copy_from_slice(form);
            entry[14] = form.len() as u8;
        } else {
            entry[..4].copy_from_slice(&(self.long.len() as u32).to_le_bytes());
            entry[4..8].copy_from_slice(&(form.len() as u32).to_le_bytes());
            entry[14] = LONG;
            self.long.extend_from_slice(form);
        }
        let whole = std::str::from_utf8(form).map_or(0, |_| WHOLE);
        entry[15] = flags | whole;
        self.entries.push(Entry(entry));
    }
}

/// A row's bytes: a zeroed buffer and a cursor, so that an entry's 16
/// bytes can always be stored at the cursor (the bytes past its length are
/// overwritten by the next one, or cut at the end).
struct Row {
    buf: Vec<u8>,
    len: usize,
}

impl Row {
    fn with_capacity(bytes: usize) -> Row {
        Row {
            buf: vec![0; bytes.max(16)],
            len: 0,
        }
    }

    fn room(&mut self, more: usize) {
        if self.len + more > self.buf.len() {
            let grown = (self.buf.len() * 2).max(self.len + more);
            self.buf.resize(grown, 0);
        }
    }

    fn entry(&mut self, entry: Entry, long: &[u8]) {
        match entry.len() {
            LONG => self.bytes(&long[entry.span()]),
            len => {
                self.room(16);
                self.buf[self.len..self.len + 16].copy_from_slice(&entry.0);
                self.len += len as usize;
            }
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.room(bytes.len());
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    fn into_bytes(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }
}

/// How a row's tokens become its text.
enum Kind {
    /// `ByteLevel`: each token's bytes; the row's bytes read as UTF-8 (lossy).
    Bytes,
    /// SentencePiece-style: each token's text (after `Replace`), byte tokens
    /// gathered into runs (`ByteFallback`), a different first token for
    /// `Metaspace`, and `Strip` on the whole text.
    Pieces { strip: Option<(char, usize)> },
    /// `WordPiece`: the first token's text, else the continuing form.
    WordPiece,
}

/// The per-id outputs of a tokenizer's decoder (see the module comment).
pub struct Forms {
    kind: Kind,
    /// Each id's output (for `WordPiece`, as a continuing token; for a
    /// byte token, its byte) and flags.
    forms: Table,
    /// The first token's output where it differs (`Metaspace`, `WordPiece`).
    first: Option<Table>,
}

/// An id without a token.
const MISSING: u8 = 1;
/// A special added token.
const SPECIAL: u8 = 2;
/// A `<0xXX>` token, with `ByteFallback`.
const BYTE: u8 = 4;
/// The output is UTF-8 on its own (a row of such outputs needs no check).
const WHOLE: u8 = 8;

impl Forms {
    /// The forms for `hf`'s decoder, or None when the crate must decode.
    pub fn build(hf: &Tokenizer) -> Option<Forms> {
        let spec = serde_json::to_value(hf.get_decoder()?).ok()?;
        let steps: Vec<&Value> = match spec["type"].as_str()? {
            "Sequence" => spec["decoders"].as_array()?.iter().collect(),
            _ => vec![&spec],
        };
        let mut replaces: Vec<(String, String)> = Vec::new();
        let (mut byte_fallback, mut fused, mut strip) = (false, false, None);
        let mut kind = None;
        let mut metaspace = None;
        let mut wordpiece = None;
        for (k, step) in steps.iter().enumerate() {
            let alone = steps.len() == 1;
            match step["type"].as_str()? {
                "ByteLevel" if alone => kind = Some(Kind::Bytes),
                "Metaspace" if alone => {
                    let replacement = step["replacement"].as_str()?.chars().next()?;
                    metaspace = Some((replacement, step["prepend_scheme"].as_str()? != "never"));
                }
                "WordPiece" if alone => {
                    let cleanup = step["cleanup"].as_bool()?;
                    wordpiece = Some((step["prefix"].as_str()?.to_string(), cleanup));
                    kind = Some(Kind::WordPiece);
                }
                // Per-token steps, in the crate's order, before the tokens are fused.
                "Replace" if !byte_fallback && !fused => replaces.push((
                    step["pattern"]["String"].as_str()?.to_string(),
                    step["content"].as_str()?.to_string(),
                )),
                "ByteFallback" if !byte_fallback && !fused => byte_fallback = true,
                "Fuse" if !fused => fused = true,
                // On the fused text only; the crate's trailing strip can panic: its own decode then.
                "Strip" if fused && k + 1 == steps.len() && step["stop"].as_u64()? == 0 => {
                    let content = step["content"].as_str()?.chars().next()?;
                    strip = Some((content, usize::try_from(step["start"].as_u64()?).ok()?));
                }
                _ => return None,
            }
        }
        let kind = kind.unwrap_or(Kind::Pieces { strip });
        let added = hf.get_added_vocabulary();
        let ids = hf
            .get_vocab(true)
            .into_values()
            .max()
            .map_or(0, |m| m as usize + 1);
        let mut forms = Table::default();
        let mut first = (metaspace.is_some() || wordpiece.is_some()).then(Table::default);
        let alphabet = byte_level_of();
        for id in 0..ids {
            let Some(token) = hf.id_to_token(id as u32) else {
                forms.push(b"", MISSING);
                if let Some(first) = first.as_mut() {
                    first.push(b"", MISSING);
                }
                continue;
            };
            let flags = match added.is_special_token(&token) {
                true => SPECIAL,
                false => 0,
            };
            match &kind {
                Kind::Bytes => {
                    let bytes: Option<Vec<u8>> = token.chars().map(&alphabet).collect();
                    forms.push(bytes.as_deref().unwrap_or(token.as_bytes()), flags);
                }
                Kind::WordPiece => {
                    let (prefix, cleanup) = wordpiece.as_ref()?;
                    let clean = |s: String| if *cleanup { wordpiece_cleanup(&s) } else { s };
                    let later = match token.strip_prefix(prefix.as_str()) {
                        Some(rest) => rest.to_string(),
                        None => format!(" {token}"),
                    };
                    forms.push(clean(later).as_bytes(), flags);
                    first.as_mut()?.push(clean(token).as_bytes(), flags);
                }
                Kind::Pieces { .. } => {
                    let mut text = token;
                    for (pattern, content) in &replaces {
                        text = text.replace(pattern.as_str(), content);
                    }
                    if let Some(byte) = byte_fallback.then(|| fallback_byte(&text)).flatten() {
                        forms.push(&[byte], flags | BYTE);
                        if let Some(first) = first.as_mut() {
                            first.push(&[byte], flags | BYTE);
                        }
                        continue;
                    }
                    match metaspace {
                        Some((replacement, drop_first)) => {
                            let spaced: String = text
                                .chars()
                                .map(|c| if c == replacement { ' ' } else { c })
                                .collect();
                            forms.push(spaced.as_bytes(), flags);
                            let first_form: String = match drop_first {
                                true => text.chars().filter(|&c| c != replacement).collect(),
                                false => spaced,
                            };
                            first.as_mut()?.push(first_form.as_bytes(), flags);
                        }
                        None => forms.push(text.as_bytes(), flags),
                    }
                }
            }
        }
        Some(Forms { kind, forms, first })
    }

    /// The text of one row of ids (see the module comment): one pass of
    /// 16-byte copies, and no UTF-8 check when every output is UTF-8.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool, clean_up: bool) -> String {
        let mut row = Decoding {
            forms: self,
            skipped: match skip_special_tokens {
                true => MISSING | SPECIAL,
                false => MISSING,
            },
            first: self.first.as_ref(),
            run: Vec::new(),
            out: Row::with_capacity(ids.len() * 4),
            whole: true,
        };
        for chunk in ids.chunks(GATHER) {
            // The entries first, in a loop of independent loads (the table
            // is larger than the caches: their misses then overlap), then the
            // copies.
            let mut entries = [Entry::NONE; GATHER];
            for (slot, &id) in entries.iter_mut().zip(chunk) {
                *slot = self
                    .forms
                    .entries
                    .get(id as usize)
                    .copied()
                    .unwrap_or(Entry::NONE);
            }
            for (&entry, &id) in entries.iter().zip(chunk) {
                row.push(entry, id);
            }
        }
        let Decoding {
            mut run,
            mut out,
            whole,
            ..
        } = row;
        flush_bytes(&mut run, &mut out);
        let bytes = out.into_bytes();
        let mut text = match whole {
            // SAFETY: every output copied was UTF-8 on its own (`WHOLE`, checked
            // when the table was built) and byte runs are written as UTF-8
            // (`flush_bytes`): their concatenation is UTF-8.
            true => unsafe { String::from_utf8_unchecked(bytes) },
            false => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
            },
        };
        if let Kind::Pieces {
            strip: Some((content, start)),
        } = self.kind
        {
            let cut: usize = text
                .chars()
                .take(start)
                .take_while(|&c| c == content)
                .map(char::len_utf8)
                .sum();
            text.drain(..cut);
        }
        if clean_up {
            text = clean_up_tokenization(&text);
        }
        text
    }
}

/// Ids per gather of entries (`Forms::decode`).
const GATHER: usize = 32;

/// One row being decoded.
struct Decoding<'f> {
    forms: &'f Forms,
    /// The flags of the ids left out.
    skipped: u8,
    /// The first kept token's table (`Metaspace`, `WordPiece`), until that token.
    first: Option<&'f Table>,
    /// Pending `ByteFallback` bytes.
    run: Vec<u8>,
    out: Row,
    /// Every output so far is UTF-8 on its own.
    whole: bool,
}

impl Decoding<'_> {
    /// Id `id`, whose entry in the forms' table is `entry`.
    fn push(&mut self, entry: Entry, id: u32) {
        let flags = entry.flags();
        if flags & self.skipped != 0 {
            return;
        }
        if flags & BYTE != 0 {
            self.run.push(entry.0[0]);
            self.first = None;
            return;
        }
        flush_bytes(&mut self.run, &mut self.out);
        let (entry, table) = match self.first.take() {
            Some(table) => (table.entries[id as usize], table),
            None => (entry, &self.forms.forms),
        };
        self.whole &= entry.flags() & WHOLE != 0;
        self.out.entry(entry, &table.long);
    }
}

/// A run of byte tokens, as `ByteFallback` writes it: its text when the
/// bytes are UTF-8, else U+FFFD for each byte.
fn flush_bytes(run: &mut Vec<u8>, out: &mut Row) {
    if run.is_empty() {
        return;
    }
    match std::str::from_utf8(run) {
        Ok(_) => out.bytes(run),
        Err(_) => (0..run.len()).for_each(|_| out.bytes("\u{FFFD}".as_bytes())),
    }
    run.clear();
}

/// The byte of a `<0xXX>` token (`ByteFallback`'s test).
fn fallback_byte(token: &str) -> Option<u8> {
    if token.len() == 6 && token.starts_with("<0x") && token.ends_with('>') {
        u8::from_str_radix(&token[3..5], 16).ok()
    } else {
        None
    }
}

/// The byte a byte-level character stands for.
fn byte_level_of() -> impl Fn(char) -> Option<u8> {
    let alphabet = crate::plan::bytelevel::alphabet();
    let mut table = [None; 324];
    for (b, &c) in alphabet.iter().enumerate() {
        table[c as usize] = Some(b as u8);
    }
    move |c| table.get(c as usize).copied().flatten()
}

/// The `WordPiece` decoder's clean-up of one token (the crate's `cleanup`).
fn wordpiece_cleanup(token: &str) -> String {
    tokenizers::decoders::wordpiece::cleanup(token)
}

/// transformers' `clean_up_tokenization`: the spaces word-level decoders
/// leave before punctuation and inside English contractions, replaced in
/// its order.
pub fn clean_up_tokenization(text: &str) -> String {
    const STEPS: [(&str, &str); 10] = [
        (" .", "."),
        (" ?", "?"),
        (" !", "!"),
        (" ,", ","),
        (" ' ", "'"),
        (" n't", "n't"),
        (" 'm", "'m"),
        (" 's", "'s"),
        (" 've", "'ve"),
        (" 're", "'re"),
    ];
    let mut out = text.to_string();
    for (from, to) in STEPS {
        if memchr::memmem::find(out.as_bytes(), from.as_bytes()).is_some() {
            out = out.replace(from, to);
        }
    }
    out
}

/// The crate's `decode` of one row (decoders `Forms` does not cover), with
/// transformers' clean-up when asked.
pub fn crate_decode(
    hf: &Tokenizer,
    ids: &[u32],
    skip_special_tokens: bool,
    clean_up: bool,
) -> Result<String> {
    let text = hf
        .decode(ids, skip_special_tokens)
        .map_err(Error::tokenizers)?;
    Ok(if clean_up {
        clean_up_tokenization(&text)
    } else {
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_up_follows_transformers_order() {
        assert_eq!(
            clean_up_tokenization("a , b . c ' s it 's do n't"),
            "a, b. c's it's don't"
        );
        assert_eq!(clean_up_tokenization("no change"), "no change");
    }

    #[test]
    fn byte_fallback_runs() {
        let mut out = Row::with_capacity(0);
        flush_bytes(&mut vec![0xE6, 0x97, 0xA5], &mut out);
        flush_bytes(&mut vec![0xE6, 0x97], &mut out);
        assert_eq!(
            String::from_utf8(out.into_bytes()).unwrap(),
            "日\u{FFFD}\u{FFFD}"
        );
        assert_eq!(fallback_byte("<0x41>"), Some(0x41));
        assert_eq!(fallback_byte("<0xZZ>"), None);
    }
}
