//! Decoding at engine speed. The crate's `decode` makes a `String` per token,
//! looks each id up in two hash maps and, to skip special tokens, hashes
//! every token string again; its decoders then walk the strings (ByteLevel
//! looks every character up in a hash map). The decoders real tokenizers
//! use depend on each token alone, plus whether it comes first: so every
//! id's output is worked out once per tokenizer ([`Forms`]) and a row is a
//! run of copies:
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

/// Every id's output, back to back: `bytes[ends[id - 1]..ends[id]]`.
#[derive(Default)]
struct Table {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Table {
    fn push(&mut self, form: &[u8]) {
        self.bytes.extend_from_slice(form);
        self.ends.push(self.bytes.len() as u32);
    }

    fn get(&self, id: usize) -> &[u8] {
        let start = if id == 0 {
            0
        } else {
            self.ends[id - 1] as usize
        };
        &self.bytes[start..self.ends[id] as usize]
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
    /// Each id's output (for `WordPiece`, as a continuing token).
    forms: Table,
    /// The first token's output where it differs (`Metaspace`, `WordPiece`).
    first: Option<Table>,
    /// Per id: `MISSING` (no token), `SPECIAL` (a special added token),
    /// `BYTE` (a `<0xXX>` token, with `ByteFallback`).
    flags: Vec<u8>,
    /// The byte of each byte token.
    byte_of: Vec<u8>,
}

const MISSING: u8 = 1;
const SPECIAL: u8 = 2;
const BYTE: u8 = 4;

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
        let mut flags = vec![0u8; ids];
        let mut byte_of = vec![0u8; ids];
        let alphabet = byte_level_of();
        for id in 0..ids {
            let Some(token) = hf.id_to_token(id as u32) else {
                flags[id] = MISSING;
                forms.push(b"");
                if let Some(first) = first.as_mut() {
                    first.push(b"");
                }
                continue;
            };
            if added.is_special_token(&token) {
                flags[id] = SPECIAL;
            }
            match &kind {
                Kind::Bytes => {
                    let bytes: Option<Vec<u8>> = token.chars().map(&alphabet).collect();
                    forms.push(bytes.as_deref().unwrap_or(token.as_bytes()));
                }
                Kind::WordPiece => {
                    let (prefix, cleanup) = wordpiece.as_ref()?;
                    let clean = |s: String| if *cleanup { wordpiece_cleanup(&s) } else { s };
                    let later = match token.strip_prefix(prefix.as_str()) {
                        Some(rest) => rest.to_string(),
                        None => format!(" {token}"),
                    };
                    forms.push(clean(later).as_bytes());
                    first.as_mut()?.push(clean(token).as_bytes());
                }
                Kind::Pieces { .. } => {
                    let mut text = token;
                    for (pattern, content) in &replaces {
                        text = text.replace(pattern.as_str(), content);
                    }
                    if let Some(byte) = byte_fallback.then(|| fallback_byte(&text)).flatten() {
                        flags[id] |= BYTE;
                        byte_of[id] = byte;
                    }
                    match metaspace {
                        Some((replacement, drop_first)) => {
                            let spaced: String = text
                                .chars()
                                .map(|c| if c == replacement { ' ' } else { c })
                                .collect();
                            forms.push(spaced.as_bytes());
                            let first_form: String = match drop_first {
                                true => text.chars().filter(|&c| c != replacement).collect(),
                                false => spaced,
                            };
                            first.as_mut()?.push(first_form.as_bytes());
                        }
                        None => forms.push(text.as_bytes()),
                    }
                }
            }
        }
        Some(Forms {
            kind,
            forms,
            first,
            flags,
            byte_of,
        })
    }

    /// The text of one row of ids (see the module comment).
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool, clean_up: bool) -> String {
        let mut out: Vec<u8> = Vec::with_capacity(ids.len() * 4);
        let mut run: Vec<u8> = Vec::new();
        let mut kept = 0usize;
        for &id in ids {
            let id = id as usize;
            let flag = match self.flags.get(id) {
                Some(&flag) => flag,
                None => continue,
            };
            if flag & MISSING != 0 || (flag & SPECIAL != 0 && skip_special_tokens) {
                continue;
            }
            if flag & BYTE != 0 {
                run.push(self.byte_of[id]);
                kept += 1;
                continue;
            }
            flush_bytes(&mut run, &mut out);
            let form = match (&self.first, kept) {
                (Some(first), 0) => first.get(id),
                _ => self.forms.get(id),
            };
            out.extend_from_slice(form);
            kept += 1;
        }
        flush_bytes(&mut run, &mut out);
        let mut text = match String::from_utf8(out) {
            Ok(text) => text,
            Err(err) => String::from_utf8_lossy(err.as_bytes()).into_owned(),
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

/// A run of byte tokens, as `ByteFallback` writes it: its text when the
/// bytes are UTF-8, else U+FFFD for each byte.
fn flush_bytes(run: &mut Vec<u8>, out: &mut Vec<u8>) {
    if run.is_empty() {
        return;
    }
    match std::str::from_utf8(run) {
        Ok(_) => out.extend_from_slice(run),
        Err(_) => (0..run.len()).for_each(|_| out.extend_from_slice("\u{FFFD}".as_bytes())),
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
        let mut out = Vec::new();
        flush_bytes(&mut vec![0xE6, 0x97, 0xA5], &mut out);
        flush_bytes(&mut vec![0xE6, 0x97], &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "日\u{FFFD}\u{FFFD}");
        assert_eq!(fallback_byte("<0x41>"), Some(0x41));
        assert_eq!(fallback_byte("<0xZZ>"), None);
    }
}
