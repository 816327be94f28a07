//! The crate's `UnicodeScripts` pre-tokenizer as a compiled Split step.
//!
//! The crate cuts a piece before each character whose script (its private
//! `get_script`, with SentencePiece's fix-ups: Hiragana, Katakana and
//! U+30FC read as Han, the space as `Any`) is not `Any` and differs from
//! the last script that was not `Any`; characters of script `Any` (the
//! space, unassigned code points) stay with the word before them, and those
//! at the start of a piece, before any other, are dropped (its first cut
//! falls after them). So its words are the matches of `S (S | Any)*` over
//! the scripts S, the gaps (only ever at the start) removed: a Split with
//! `Removed` and `invert`, leftmost-first like every compiled step.
//!
//! The script of each code point is read from the crate itself, by running
//! its pre-tokenizer on probe strings once per process (no copied table):
//! whether a character joins the word of a Latin and of a Greek letter
//! before it tells `Any`; cuts in the run of every other code point in order
//! tell where the script changes, and a probe of two characters whether two
//! runs share one.

use super::regex::charset::CharSet;
use super::regex::parse::Node;
use super::regex::CompiledRegex;
use std::sync::OnceLock;
use tokenizers::pre_tokenizers::unicode_scripts::UnicodeScripts;
use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

/// Code points probed in one string (keeps the crate's per-byte alignments small).
const CHUNK: u32 = 0x8000;

/// The crate's pieces of `text`: their byte starts.
fn starts(text: &str) -> Result<Vec<usize>, String> {
    let mut pre = PreTokenizedString::from(text);
    UnicodeScripts::new()
        .pre_tokenize(&mut pre)
        .map_err(|e| format!("UnicodeScripts: {e}"))?;
    Ok(pre
        .get_splits(OffsetReferential::Original, OffsetType::Byte)
        .into_iter()
        .map(|(_, (start, _), _)| start)
        .collect())
}

/// For each of `chars`, whether the crate starts a piece at it when it
/// follows `sep` (each probe is `sep c`, one after the other, closed by `sep`).
fn starts_after(sep: char, chars: &[char]) -> Result<Vec<bool>, String> {
    let mut text = String::with_capacity(chars.len() * 6 + 2);
    let mut at = Vec::with_capacity(chars.len());
    for &c in chars {
        text.push(sep);
        at.push(text.len());
        text.push(c);
    }
    text.push(sep);
    let cuts = starts(&text)?;
    Ok(at.iter().map(|a| cuts.binary_search(a).is_ok()).collect())
}

/// True when the crate reads `a` and `b` as one script.
fn same_script(a: char, b: char) -> Result<bool, String> {
    Ok(starts(&format!("{a}{b}"))?.len() == 1)
}

/// The code points of script `Any`, then those of each other script, as the
/// crate reads them.
fn classes() -> Result<(CharSet, Vec<CharSet>), String> {
    let mut any = Vec::new();
    // (representative, code points) of each script found so far.
    let mut scripts: Vec<(char, Vec<u32>)> = Vec::new();
    // The last code point of the previous chunk that is not `Any`, and its script.
    let mut last: Option<(char, usize)> = None;
    let mut lo = 0u32;
    while lo <= char::MAX as u32 {
        let hi = (lo + CHUNK).min(char::MAX as u32 + 1);
        let chars: Vec<char> = (lo..hi).filter_map(char::from_u32).collect();
        let (latin, greek) = (starts_after('a', &chars)?, starts_after('α', &chars)?);
        let mut scripted = Vec::with_capacity(chars.len() + 1);
        scripted.extend(last.map(|(c, _)| c));
        for (i, &c) in chars.iter().enumerate() {
            match latin[i] || greek[i] {
                true => scripted.push(c),
                false => any.push(c as u32),
            }
        }
        if scripted.is_empty() {
            lo = hi;
            continue;
        }
        // The crate cuts this run where the script changes.
        let text: String = scripted.iter().collect();
        let cuts = starts(&text)?;
        let mut script = last.map(|(_, s)| s);
        let mut cut = cuts.iter().peekable();
        for (at, c) in text.char_indices() {
            if cut.next_if(|&&x| x == at).is_some() && !(at == 0 && last.is_some()) {
                let mut found = None;
                for (n, (rep, _)) in scripts.iter().enumerate() {
                    if same_script(*rep, c)? {
                        found = Some(n);
                        break;
                    }
                }
                script = Some(found.unwrap_or_else(|| {
                    scripts.push((c, Vec::new()));
                    scripts.len() - 1
                }));
            }
            let Some(n) = script else {
                return Err("UnicodeScripts: a run without a script".into());
            };
            if at > 0 || last.is_none() {
                scripts[n].1.push(c as u32);
            }
            last = Some((c, n));
        }
        lo = hi;
    }
    let set = |cps: &[u32]| CharSet::from_ranges(cps.iter().map(|&c| (c, c)));
    Ok((set(&any), scripts.iter().map(|(_, cps)| set(cps)).collect()))
}

/// The pattern of the crate's `UnicodeScripts` words, `S (S | Any)*` for
/// each script S, compiled (its step: `Removed`, `invert`). Built once.
pub fn compiled() -> Result<CompiledRegex, String> {
    static BUILT: OnceLock<Result<CompiledRegex, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let (any, scripts) = classes()?;
            let words = scripts
                .into_iter()
                .map(|script| {
                    let rest = Node::Repeat {
                        node: Box::new(Node::Set(script.union(&any))),
                        min: 0,
                        max: None,
                        greedy: true,
                    };
                    Node::Concat(vec![Node::Set(script), rest])
                })
                .collect();
            CompiledRegex::from_node(&Node::Alt(words))
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_read_the_crates_scripts() {
        let (any, scripts) = classes().unwrap();
        assert!(any.contains(' ' as u32) && any.contains(0x378) && !any.contains('.' as u32));
        let script_of = |c: char| scripts.iter().position(|s| s.contains(c as u32));
        assert_eq!(script_of('a'), script_of('Z'));
        assert_eq!(script_of('a'), script_of('ḁ'));
        assert_ne!(script_of('a'), script_of('α'));
        // SentencePiece's fix-ups: kana and U+30FC are Han.
        assert_eq!(script_of('東'), script_of('タ'));
        assert_eq!(script_of('東'), script_of('ー'));
        assert_eq!(script_of('東'), script_of('の'));
        // Every code point in one class.
        let total: usize = scripts
            .iter()
            .chain([&any])
            .flat_map(|s| s.ranges().iter().map(|(a, b)| (b - a + 1) as usize))
            .sum();
        assert_eq!(total, 0x110000 - 0x800);
    }
}
