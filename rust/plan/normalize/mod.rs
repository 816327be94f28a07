//! A tokenizer.json normalizer run on the host, piece by piece (the text
//! between added tokens, which the crate normalizes one piece at a time),
//! with the text it writes and, for offsets, the crate's alignments: where
//! each normalized byte comes from.
//!
//! Every component the crate has is read, and run as a stage ([`Stage`]):
//! - steps that map each code point on its own (`BertNormalizer`,
//!   `Lowercase`, `StripAccents`, `Nmt`, the `ByteLevel` normalizer,
//!   `Replace` of one character, NFD/NFKD), several in a row composed into
//!   one per-code-point table (plan/char_table.rs, cuda/gt_normalize.cuh);
//!   text holding a code point the table flags (where a step depends on its
//!   neighbours) runs those steps one by one, the crate's own;
//! - NFC and NFKC: text of "stable" characters (normal_form.rs) is left as
//!   it is, other text goes through the crate's own;
//! - `Prepend` (before a non-empty piece), `Replace` of a longer string
//!   (leftmost matches in turn, memchr's search), `Replace` of the regexes
//!   `" {2,}"` and `"\s+"` (runs of spaces, of Oniguruma's white space),
//!   `Replace` of any other regex (the crate's pattern: Oniguruma),
//!   `Strip`, and `Precompiled` (charsmap.rs);
//! - anything else (a component a later crate adds): the crate's own.
//!
//! Offsets (`normalize_aligned`): each stage gives each byte it writes the
//! source range the crate's `NormalizedString` gives it: a character written
//! in place of another takes that one's range (a per-code-point step, the
//! table's spans), prepended text the first character's, a replacement the
//! range of the last byte of what it replaces (the byte before, for an
//! empty match; nothing before the start: (0, 0)), the charsmap as the
//! crate's `transform` aligns its changes. A crate component's alignments are
//! read back from its `NormalizedString` and composed with the piece's.

mod charsmap;

use super::char_table::{CharStep, CharTable, Splitter};
use super::normal_form::StableChars;
use crate::kernels;
use charsmap::Charsmap;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
use tokenizers::normalizer::Range;
use tokenizers::tokenizer::pattern::Pattern;
use tokenizers::utils::SysRegex;
use tokenizers::{NormalizedString, Normalizer, NormalizerWrapper};

/// Where each normalized byte comes from: a byte range of the piece.
pub type Aligns = Vec<(u32, u32)>;

/// The runs a `Replace` of `" {2,}"` or `"\s+"` matches.
#[derive(Clone, Copy, PartialEq)]
enum Runs {
    /// Two or more spaces.
    Spaces,
    /// One or more white space characters, as Oniguruma's `\s` has them.
    White,
}

/// One stage of a normalizer (see the module comment).
enum Stage {
    Chars {
        table: Arc<CharTable>,
        /// The tokenizer.json steps, as per-code-point steps.
        char_steps: Vec<CharStep>,
        /// The same steps as the crate's objects, for flagged text.
        steps: Vec<NormalizerWrapper>,
    },
    Forms {
        stable: Vec<&'static StableChars>,
        /// Each step: NFKC (true) or NFC, run without alignments when no
        /// offsets are asked for (`normal_form`).
        compat: Vec<bool>,
        /// The same steps as the crate's objects, for offsets.
        steps: Vec<NormalizerWrapper>,
    },
    Prepend(String),
    Replace {
        from: String,
        to: String,
    },
    Runs {
        runs: Runs,
        to: String,
    },
    Regex {
        regex: SysRegex,
        to: String,
    },
    Precompiled(Box<Charsmap>),
    Strip {
        left: bool,
        right: bool,
    },
    Crate(Box<NormalizerWrapper>),
}

/// The stages of a tokenizer.json normalizer (none for `null`).
pub struct PieceNormalizer {
    stages: Vec<Stage>,
}

/// The components of a normalizer, `Sequence`s flattened.
fn components(normalizer: &Value) -> Result<Vec<&Value>, String> {
    match normalizer {
        Value::Null => Ok(Vec::new()),
        n if n["type"] == "Sequence" => {
            let items = n["normalizers"]
                .as_array()
                .ok_or("unreadable normalizer Sequence")?;
            let mut out = Vec::new();
            for item in items {
                out.extend(components(item)?);
            }
            Ok(out)
        }
        n => Ok(vec![n]),
    }
}

fn crate_step(item: &Value) -> Result<NormalizerWrapper, String> {
    // From text: Precompiled's charsmap deserializer borrows the base64 string.
    serde_json::from_str(&item.to_string()).map_err(|err| format!("unreadable normalizer: {err}"))
}

impl PieceNormalizer {
    /// The normalizer of tokenizer.json's `normalizer` value, or why it cannot be read.
    pub fn from_spec(normalizer: &Value) -> Result<Self, String> {
        let mut stages: Vec<Stage> = Vec::new();
        // Per-code-point steps waiting to be composed into one table.
        let mut pending: Vec<(CharStep, NormalizerWrapper)> = Vec::new();
        let flush = |pending: &mut Vec<(CharStep, NormalizerWrapper)>, stages: &mut Vec<Stage>| {
            if pending.is_empty() {
                return;
            }
            let (char_steps, steps): (Vec<CharStep>, Vec<NormalizerWrapper>) =
                pending.drain(..).unzip();
            let forms: Option<Vec<&'static StableChars>> = char_steps
                .iter()
                .map(|step| match step {
                    CharStep::Nfc => Some(StableChars::nfc()),
                    CharStep::Nfkc => Some(StableChars::nfkc()),
                    _ => None,
                })
                .collect();
            let stage = match forms {
                Some(stable) => Stage::Forms {
                    compat: char_steps.iter().map(|s| *s == CharStep::Nfkc).collect(),
                    stable,
                    steps,
                },
                None => match CharTable::shared(&char_steps, Splitter::None) {
                    Ok(table) => Stage::Chars {
                        table,
                        char_steps,
                        steps,
                    },
                    // No table holds them (see `CharTable::build`): the crate's steps.
                    Err(_) => {
                        stages.extend(steps.into_iter().map(|s| Stage::Crate(Box::new(s))));
                        return;
                    }
                },
            };
            stages.push(stage);
        };
        for item in components(normalizer)? {
            if let Some(step) = CharStep::from_spec(item) {
                pending.push((step, crate_step(item)?));
                continue;
            }
            flush(&mut pending, &mut stages);
            let text = |key: &str| item[key].as_str().map(str::to_string);
            let stage = match item["type"].as_str() {
                Some("Precompiled") => Stage::Precompiled(Box::new(Charsmap::from_spec(item)?)),
                Some("Prepend") => Stage::Prepend(text("prepend").ok_or("unreadable Prepend")?),
                Some("Strip") => Stage::Strip {
                    left: item["strip_left"].as_bool().unwrap_or(false),
                    right: item["strip_right"].as_bool().unwrap_or(false),
                },
                Some("Replace") => {
                    let to = text("content").ok_or("unreadable Replace")?;
                    match (
                        item["pattern"]["String"].as_str(),
                        item["pattern"]["Regex"].as_str(),
                    ) {
                        (Some(from), _) if !from.is_empty() => Stage::Replace {
                            from: from.to_string(),
                            to,
                        },
                        (_, Some(" {2,}")) => Stage::Runs {
                            runs: Runs::Spaces,
                            to,
                        },
                        (_, Some(r"\s+")) => Stage::Runs {
                            runs: Runs::White,
                            to,
                        },
                        (_, Some(pattern)) => Stage::Regex {
                            regex: SysRegex::new(pattern)
                                .map_err(|e| format!("cannot compile the Replace pattern: {e}"))?,
                            to,
                        },
                        _ => Stage::Crate(Box::new(crate_step(item)?)),
                    }
                }
                _ => Stage::Crate(Box::new(crate_step(item)?)),
            };
            stages.push(stage);
        }
        flush(&mut pending, &mut stages);
        Ok(PieceNormalizer { stages })
    }

    /// True when there is nothing to do.
    pub fn is_identity(&self) -> bool {
        self.stages.is_empty()
    }

    /// When the normalizer is only `Replace(" ", r)` of one character `r`,
    /// after `Prepend(r)` or not (Llama-2, Mistral, Gemma): `r`, and whether
    /// it prepends. A piece is then normalized by reading each of its spaces
    /// as `r`, with a space put before it when it prepends (and it is not
    /// empty).
    pub fn spaces_as(&self) -> Option<(char, bool)> {
        let (prepend, replace) = match &self.stages[..] {
            [Stage::Prepend(p), Stage::Chars { char_steps, .. }] => (Some(p), char_steps),
            [Stage::Chars { char_steps, .. }] => (None, char_steps),
            _ => return None,
        };
        let [CharStep::Replace(' ', to)] = &replace[..] else {
            return None;
        };
        let mut chars = to.chars();
        let (Some(r), None) = (chars.next(), chars.next()) else {
            return None;
        };
        let prepends_r = prepend.is_some_and(|p| p == to);
        (prepend.is_none() || prepends_r).then_some((r, prepends_r))
    }

    /// True when [`PieceNormalizer::normalize_aligned`] can follow every
    /// stage (every stage can).
    pub fn aligns(&self) -> bool {
        true
    }

    /// How each stage runs, for `tok.plan`.
    pub fn describe(&self) -> String {
        if self.stages.is_empty() {
            return "none".into();
        }
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|stage| match stage {
                Stage::Chars { char_steps, .. } => format!(
                    "{} as one per-code-point table (cuda/gt_normalize.cuh)",
                    char_steps
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join("+")
                ),
                Stage::Forms { .. } => {
                    "NFC/NFKC: a quick check, the crate's tables where the text changes".into()
                }
                Stage::Prepend(_) => "Prepend".into(),
                Stage::Replace { .. } => "Replace of a string (substring search)".into(),
                Stage::Runs { .. } => "Replace of runs of spaces or white space (a scan)".into(),
                Stage::Regex { .. } => {
                    "Replace of a regex (the crate's Oniguruma, on the host)".into()
                }
                Stage::Precompiled(_) => "Precompiled charsmap (per-code-point classes)".into(),
                Stage::Strip { .. } => "Strip".into(),
                Stage::Crate(_) => "the crate's own component".into(),
            })
            .collect();
        stages.join(", then ")
    }

    /// `piece` normalized, with the byte range of `piece` each normalized byte
    /// comes from (the crate's alignments, see the module comment). None when
    /// a crate component fails (the exact path reports it), or for a piece of
    /// 4 GiB.
    pub fn normalize_aligned(&self, piece: &str) -> Option<(String, Aligns)> {
        u32::try_from(piece.len()).ok()?;
        let mut text = piece.to_string();
        let mut align = identity_aligns(piece);
        for stage in &self.stages {
            let matches: Vec<(usize, usize)> = match stage {
                Stage::Chars { table, steps, .. } => {
                    match kernels::chars_normalize_aligned(&table.view(), table.growth, &text) {
                        Some((out, from, to)) => {
                            align = from
                                .iter()
                                .zip(&to)
                                .map(|(&f, &t)| (align[f as usize].0, align[t as usize - 1].1))
                                .collect();
                            text = out;
                        }
                        None => {
                            for step in steps {
                                (text, align) = crate_aligned(step, &text, &align)?;
                            }
                        }
                    }
                    continue;
                }
                Stage::Forms { stable, steps, .. } => {
                    if !stable.iter().all(|s| s.all_stable(&text)) {
                        for step in steps {
                            (text, align) = crate_aligned(step, &text, &align)?;
                        }
                    }
                    continue;
                }
                Stage::Prepend(p) if !text.is_empty() => {
                    text.insert_str(0, p);
                    align.splice(0..0, std::iter::repeat_n(align[0], p.len()));
                    continue;
                }
                Stage::Prepend(_) => continue,
                Stage::Replace { from, .. } => literal_matches(&text, from),
                Stage::Runs { runs, .. } => run_matches(&text, *runs),
                Stage::Regex { regex, .. } => regex_matches(regex, &text)?,
                Stage::Precompiled(charsmap) => {
                    if let Some(changed) = charsmap.normalize_aligned(&text, &align) {
                        (text, align) = changed;
                    }
                    continue;
                }
                Stage::Strip { left, right } => {
                    let (start, end) = strip_range(&text, *left, *right);
                    text = text[start..end].to_string();
                    align = align[start..end].to_vec();
                    continue;
                }
                Stage::Crate(step) => {
                    (text, align) = crate_aligned(step, &text, &align)?;
                    continue;
                }
            };
            let to = match stage {
                Stage::Replace { to, .. } | Stage::Runs { to, .. } | Stage::Regex { to, .. } => to,
                _ => unreachable!("only replacing stages find matches"),
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
        for stage in &self.stages {
            text = match stage {
                Stage::Chars { table, steps, .. } => {
                    match kernels::chars_normalize(&table.view(), table.growth, &text) {
                        Some(None) => text,
                        Some(Some(changed)) => Cow::Owned(changed),
                        None => Cow::Owned(crate_normalized(steps, &text)?),
                    }
                }
                Stage::Forms { stable, compat, .. } => {
                    match stable.iter().all(|s| s.all_stable(&text)) {
                        true => text,
                        false => Cow::Owned(
                            compat
                                .iter()
                                .fold(text.into_owned(), |text, &nfkc| normal_form(&text, nfkc)),
                        ),
                    }
                }
                Stage::Prepend(p) if !text.is_empty() => Cow::Owned(format!("{p}{text}")),
                Stage::Prepend(_) => text,
                Stage::Replace { from, to } => {
                    let matches = literal_matches(&text, from);
                    with_matches_replaced(text, &matches, to)
                }
                Stage::Runs { runs, to } => {
                    let matches = run_matches(&text, *runs);
                    with_matches_replaced(text, &matches, to)
                }
                Stage::Regex { regex, to } => {
                    let matches = regex_matches(regex, &text)?;
                    with_matches_replaced(text, &matches, to)
                }
                Stage::Precompiled(charsmap) => match charsmap.normalize(&text) {
                    Cow::Borrowed(_) => text,
                    Cow::Owned(changed) => Cow::Owned(changed),
                },
                Stage::Strip { left, right } => {
                    let (start, end) = strip_range(&text, *left, *right);
                    match text {
                        Cow::Borrowed(t) => Cow::Borrowed(&t[start..end]),
                        Cow::Owned(t) => Cow::Owned(t[start..end].to_string()),
                    }
                }
                Stage::Crate(step) => {
                    Cow::Owned(crate_normalized(std::slice::from_ref(step), &text)?)
                }
            };
        }
        Some(text)
    }

    /// True when `normalize_for_whitespace_words` can stand in for
    /// `normalize`: the stages are charsmaps and collapsed runs of spaces,
    /// which change whitespace only into whitespace.
    pub fn keeps_whitespace_words(&self) -> bool {
        self.stages.iter().all(|stage| match stage {
            Stage::Precompiled(_) => true,
            Stage::Runs {
                runs: Runs::Spaces,
                to,
            } => to == " ",
            _ => false,
        })
    }

    /// A piece normalized as far as its whitespace-separated words go (for
    /// `WhitespaceSplit`, when `keeps_whitespace_words`): each whitespace
    /// character the charsmap maps to whitespace, and each run of spaces, is
    /// left as it is, so most text needs no copy.
    pub fn normalize_for_whitespace_words<'t>(&self, piece: &'t str) -> Cow<'t, str> {
        let mut text = Cow::Borrowed(piece);
        for stage in &self.stages {
            if let Stage::Precompiled(charsmap) = stage {
                if let Cow::Owned(changed) = charsmap.normalize_for_words(&text) {
                    text = Cow::Owned(changed);
                }
            }
        }
        text
    }
}

/// True when no text the normalizer writes can hold `pattern`, one
/// character: a `Replace` of it by text without it, after which only
/// `Replace`s and `Prepend`s write nothing holding it (Gemma: `Replace(" ",
/// "▁")`, then a `Split(" ")` pre-tokenizer splits nothing).
pub fn erases(normalizer: &Value, pattern: &str) -> bool {
    let mut chars = pattern.chars();
    let (Some(p), None) = (chars.next(), chars.next()) else {
        return false;
    };
    let Ok(items) = components(normalizer) else {
        return false;
    };
    let mut erased = false;
    for item in items {
        let content = match item["type"].as_str() {
            Some("Replace") => item["content"].as_str(),
            Some("Prepend") => item["prepend"].as_str(),
            _ => None,
        };
        erased = match content {
            Some(written) if written.contains(p) => false,
            Some(_) if item["pattern"]["String"].as_str() == Some(pattern) => true,
            Some(_) => erased,
            None => false,
        };
    }
    erased
}

/// Each byte of `piece` aligned to the range of its character.
fn identity_aligns(piece: &str) -> Aligns {
    piece
        .char_indices()
        .flat_map(|(at, c)| {
            let range = (at as u32, (at + c.len_utf8()) as u32);
            std::iter::repeat_n(range, c.len_utf8())
        })
        .collect()
}

/// `text` through the crate's own `steps`; None when one fails.
fn crate_normalized(steps: &[NormalizerWrapper], text: &str) -> Option<String> {
    let mut normalized = NormalizedString::from(text);
    for step in steps {
        step.normalize(&mut normalized).ok()?;
    }
    Some(normalized.get().to_string())
}

/// `text` in NFKC (`nfkc`) or NFC: the characters the crate's
/// `NormalizedString::nfkc`/`nfc` write (the same iterator of the same
/// crate, `unicode-normalization-alignments`), without the alignments it
/// records for each (offsets, which only `normalize_aligned` needs).
fn normal_form(text: &str, nfkc: bool) -> String {
    use unicode_normalization_alignments::UnicodeNormalization;
    let mut out = String::with_capacity(text.len());
    match nfkc {
        true => out.extend(text.nfkc().map(|(c, _)| c)),
        false => out.extend(text.nfc().map(|(c, _)| c)),
    }
    out
}

/// `text` (whose bytes come from `align`) through the crate's `step`, with
/// the alignments it records composed with `align`: a character it writes
/// in place of one of `text` takes that one's source; one inserted at the
/// very start, (0, 0) as the crate records it.
fn crate_aligned(
    step: &NormalizerWrapper,
    text: &str,
    align: &[(u32, u32)],
) -> Option<(String, Aligns)> {
    let mut normalized = NormalizedString::from(text);
    step.normalize(&mut normalized).ok()?;
    let out = normalized.get().to_string();
    let mut out_align = Vec::with_capacity(out.len());
    for (at, c) in out.char_indices() {
        let range = normalized.convert_offsets(Range::Normalized(at..at + c.len_utf8()))?;
        let source = match range.is_empty() {
            true => (0, 0),
            false => (align[range.start].0, align[range.end - 1].1),
        };
        out_align.extend(std::iter::repeat_n(source, c.len_utf8()));
    }
    Some((out, out_align))
}

/// The byte ranges of `from` in `text`, leftmost first, not overlapping
/// (memchr's substring search: `str::replace` finds a `char` with one memchr
/// call per match, which cost more than the copy on text whose every fifth
/// byte is a space).
fn literal_matches(text: &str, from: &str) -> Vec<(usize, usize)> {
    memchr::memmem::find_iter(text.as_bytes(), from.as_bytes()).fold(Vec::new(), |mut found, at| {
        if found.last().is_none_or(|&(_, end)| at >= end) {
            found.push((at, at + from.len()));
        }
        found
    })
}

/// `text` with each of `matches` (byte ranges, in order) replaced by `to`.
fn with_matches_replaced<'t>(
    text: Cow<'t, str>,
    matches: &[(usize, usize)],
    to: &str,
) -> Cow<'t, str> {
    let unchanged = matches.iter().all(|&(start, end)| &text[start..end] == to);
    if unchanged {
        return text;
    }
    let mut out = String::with_capacity(text.len() + matches.len() * to.len());
    let mut last = 0;
    for &(start, end) in matches {
        out.push_str(&text[last..start]);
        out.push_str(to);
        last = end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// The byte ranges of the runs `runs` matches in `text`, in order.
fn run_matches(text: &str, runs: Runs) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut run: Option<(usize, usize)> = None; // (start, characters)
    let mut close = |run: &mut Option<(usize, usize)>, end: usize| {
        if let Some((start, count)) = run.take() {
            if count >= if runs == Runs::Spaces { 2 } else { 1 } {
                found.push((start, end));
            }
        }
    };
    for (at, c) in text.char_indices() {
        let in_run = match runs {
            Runs::Spaces => c == ' ',
            Runs::White => kernels::is_white_space(c),
        };
        match (in_run, &mut run) {
            (true, Some((_, count))) => *count += 1,
            (true, None) => run = Some((at, 1)),
            (false, _) => close(&mut run, at),
        }
    }
    close(&mut run, text.len());
    found
}

/// The byte ranges the crate's `Replace` replaces for `regex` (its
/// `find_matches`, Oniguruma); None when the crate fails.
fn regex_matches(regex: &SysRegex, text: &str) -> Option<Vec<(usize, usize)>> {
    let matches = regex.find_matches(text).ok()?;
    Some(
        matches
            .into_iter()
            .filter(|&(_, is_match)| is_match)
            .map(|((start, end), _)| (start, end))
            .collect(),
    )
}

/// The range of `text` that `Strip` keeps (white space as std has it, as
/// the crate's `lrstrip` does).
fn strip_range(text: &str, left: bool, right: bool) -> (usize, usize) {
    let start = match left {
        true => text.len() - text.trim_start().len(),
        false => 0,
    };
    let end = match right {
        true => text.trim_end().len(),
        false => text.len(),
    };
    (start, end.max(start))
}

/// `text` with each of `matches` (byte ranges, in order) replaced by `to`, as
/// the crate's `NormalizedString::replace` aligns it: the replacement takes
/// the range of the byte before the match's end ((0, 0) at the start).
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
        let source = match end {
            0 => (0, 0),
            end => align[end - 1],
        };
        out_align.extend(std::iter::repeat_n(source, to.len()));
        last = end;
    }
    out.push_str(&text[last..]);
    out_align.extend_from_slice(&align[last..]);
    (out, out_align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_found_as_the_regexes_match() {
        assert_eq!(
            run_matches("a  b   c d \t  e", Runs::Spaces),
            [(1, 3), (4, 7), (12, 14)]
        );
        assert_eq!(run_matches(" a\n\u{3000}b", Runs::White), [(0, 1), (2, 6)]);
        assert_eq!(literal_matches("aaaa", "aa"), [(0, 2), (2, 4)]);
        assert_eq!(literal_matches("aaa", "aa"), [(0, 2)]);
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
    fn a_replaced_character_is_erased_unless_written_again() {
        let replace = |from: &str, to: &str| serde_json::json!({"type": "Replace", "pattern": {"String": from}, "content": to});
        let sequence =
            |items: Vec<Value>| serde_json::json!({"type": "Sequence", "normalizers": items});
        assert!(erases(&replace(" ", "▁"), " "));
        assert!(!erases(&replace(" ", "▁ "), " "));
        assert!(!erases(&replace("  ", "▁"), " "));
        assert!(!erases(&Value::Null, " "));
        let prepend = |p: &str| serde_json::json!({"type": "Prepend", "prepend": p});
        assert!(erases(
            &sequence(vec![prepend(" "), replace(" ", "▁")]),
            " "
        ));
        assert!(!erases(
            &sequence(vec![replace(" ", "▁"), prepend(" ")]),
            " "
        ));
        assert!(erases(
            &sequence(vec![replace(" ", "▁"), prepend("▁")]),
            " "
        ));
        let lowercase = serde_json::json!({"type": "Lowercase"});
        assert!(!erases(&sequence(vec![replace(" ", "▁"), lowercase]), " "));
    }

    /// Every kind of stage, against the crate's own normalizer: the text and
    /// the source of every byte, on the edge cases and sample texts.
    #[test]
    fn stages_write_and_align_as_the_crate_does() {
        let specs = [
            r#"{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Lowercase"}]}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "Replace", "pattern": {"String": "e"}, "content": "EE"}]}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"Regex": "[aeiou]+"}, "content": ""}, {"type": "Replace", "pattern": {"Regex": "x*"}, "content": "-"}, {"type": "Replace", "pattern": {"String": "th"}, "content": "TH"}]}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}, {"type": "ByteLevel"}]}"#,
            r#"{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "Strip", "strip_left": false, "strip_right": true}, {"type": "NFD"}, {"type": "Lowercase"}, {"type": "NFC"}]}"#,
            r#"{"type": "NFKC"}"#,
            r#"{"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFKC"}]}"#,
        ];
        let mut texts = crate::test_texts::sample_texts(4);
        texts.extend(
            [
                "",
                " ",
                "  a  ",
                "\te\u{301}\u{323}x  É\u{327}",
                "Ａ\u{fb01} ﬃ İ ẞ ς",
                "\u{1100}\u{1161}\u{11a8} 가\u{11a8}",
                "x\u{301}\u{301}\u{316}y",
                "\u{301}start",
                "東京 x\n\n y\r\n",
                "  ",
                "a\u{300}\u{b4}\u{345}",
                "ｶﾞｷﾞ ① ㍻ ¼ ™ \u{212b}",
            ]
            .map(String::from),
        );
        for spec in specs {
            let value: Value = serde_json::from_str(spec).unwrap();
            let ours = PieceNormalizer::from_spec(&value).unwrap();
            let theirs: NormalizerWrapper = serde_json::from_str(spec).unwrap();
            for text in &texts {
                let mut expected = NormalizedString::from(text.as_str());
                theirs.normalize(&mut expected).unwrap();
                assert_eq!(
                    ours.normalize(text).unwrap(),
                    expected.get(),
                    "{spec} on {text:?}"
                );
                let (out, align) = ours.normalize_aligned(text).unwrap();
                assert_eq!(out, expected.get(), "{spec} on {text:?}");
                for (at, c) in out.char_indices() {
                    let range = expected
                        .convert_offsets(Range::Normalized(at..at + c.len_utf8()))
                        .unwrap();
                    let got = align[at];
                    assert_eq!(
                        (got.0 as usize, got.1 as usize),
                        (range.start, range.end),
                        "{spec} on {text:?}: {c:?} at {at}"
                    );
                }
            }
        }
    }
}
