//! The SentencePiece-style pre-tokenizer of converted tokenizers: optional
//! `WhitespaceSplit`, then `Metaspace` (spaces as its replacement character,
//! prepended per `prepend_scheme`, the text cut before each replacement when
//! `split`), exactly as the crate applies them to a normalized piece
//! (pre_tokenizers/metaspace.rs, whitespace.rs). Shared by the Unigram and
//! SentencePiece-BPE plans; no pre-tokenizer at all is one word per piece.
//! Any other pre-tokenizer whose steps are Split steps (`Whitespace`,
//! `Digits`, `Punctuation`, `CharDelimiterSplit`, `BertPreTokenizer`,
//! `Split`, Sequences of them), perhaps closed by `Metaspace`, splits each
//! piece with the compiled chain of the byte-level plan ([`StepChain`],
//! cuda/gt_chain.cuh) before Metaspace.

use super::bytelevel::{sequence_steps, SplitEngine, SplitStep};
use super::normalize::PieceNormalizer;
use crate::kernels::{self, GtChain};
use serde_json::Value;
use std::sync::Arc;

/// Where `Metaspace` puts its replacement before a piece (`prepend_scheme`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Prepend {
    Always,
    /// Only before the piece that starts the original text.
    First,
    Never,
}

impl Prepend {
    /// Whether `Metaspace` puts `replacement` before `part` (which starts the
    /// original text when `first`): per the scheme, unless the part is empty
    /// (the crate's `prepend` does nothing to an empty string) or starts with
    /// a space (which becomes the replacement).
    fn before(self, part: &str, replacement: char, first: bool) -> bool {
        let scheme = match self {
            Prepend::Always => true,
            Prepend::First => first,
            Prepend::Never => false,
        };
        scheme && !part.is_empty() && !part.starts_with([replacement, ' '])
    }
}

/// The pre-tokenizer: optional `WhitespaceSplit` or a chain of Split
/// steps, then optional `Metaspace`.
#[derive(Clone, Debug, PartialEq)]
pub struct Words {
    whitespace_split: bool,
    /// The Split steps before Metaspace, when they are not `WhitespaceSplit` alone.
    chain: Option<StepChain>,
    /// (replacement, prepend scheme, split at the replacement)
    metaspace: Option<(char, Prepend, bool)>,
}

/// Split steps compiled for the shared kernels (`gt_chain_words`), each
/// piece split by them as the crate's `PreTokenizedString::split` does.
#[derive(Clone)]
pub struct StepChain(Arc<ChainTables>);

/// The steps (owning the compiled tables), their kernel chain and their
/// description for `tok.plan`.
struct ChainTables {
    _steps: Vec<SplitStep>,
    chain: GtChain,
    name: String,
}

// SAFETY: the chain points into the steps' tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for ChainTables {}
// SAFETY: as above.
unsafe impl Sync for ChainTables {}

impl std::fmt::Debug for StepChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.name)
    }
}

impl PartialEq for StepChain {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl StepChain {
    /// The chain of pre-tokenizers `items` (as tokenizer.json writes them),
    /// or why the kernels cannot run it.
    fn build(items: &[&Value]) -> Result<StepChain, String> {
        let (steps, chain) = sequence_steps(items, SplitEngine::from_env())?;
        let chain = chain.ok_or_else(|| {
            let why = steps.iter().find_map(|s| match &s.matcher {
                super::bytelevel::Matcher::Oniguruma(_, why) => Some(why.clone()),
                _ => None,
            });
            why.unwrap_or_else(|| {
                format!(
                    "{} Split steps: longer than the kernels' chain",
                    steps.len()
                )
            })
        })?;
        let name = steps
            .iter()
            .map(SplitStep::describe)
            .collect::<Vec<_>>()
            .join(", ");
        Ok(StepChain(Arc::new(ChainTables {
            _steps: steps,
            chain,
            name,
        })))
    }

    /// Calls `word(start, end)` with each non-empty word of `text`.
    fn each(&self, text: &str, word: &mut dyn FnMut(usize, usize)) {
        kernels::chain_words(&self.0.chain, text, &mut &mut *word)
    }
}

impl Words {
    /// The pre-tokenizer of tokenizer.json's `pre_tokenizer` value after its
    /// `normalizer`, or why it is not one. A `Split` at the start whose
    /// pattern the normalizer erases (`normalize::erases`) splits nothing and
    /// is left out (Gemma: `Split(" ")` after `Replace(" ", "▁")`).
    pub fn from_spec(pre: &Value, normalizer: &Value) -> Result<Words, String> {
        let mut items: Vec<&Value> = match pre {
            Value::Null => Vec::new(),
            p if p["type"] == "Sequence" => p["pretokenizers"]
                .as_array()
                .ok_or("unreadable pre-tokenizer Sequence")?
                .iter()
                .collect(),
            p => vec![p],
        };
        let splits_nothing = |item: &Value| {
            item["type"] == "Split"
                && !item["invert"].as_bool().unwrap_or(false)
                && item["pattern"]["String"]
                    .as_str()
                    .is_some_and(|p| super::normalize::erases(normalizer, p))
        };
        let leading = items.iter().take_while(|item| splits_nothing(item)).count();
        items.drain(..leading);
        let mut words = Words {
            whitespace_split: false,
            chain: None,
            metaspace: None,
        };
        let plain = items
            .iter()
            .enumerate()
            .all(|(at, item)| match item["type"].as_str() {
                Some("WhitespaceSplit") => at == 0,
                Some("Metaspace") => at + 1 == items.len(),
                _ => false,
            });
        if !plain {
            // Split steps, then perhaps Metaspace: the steps as one chain.
            let split_steps = match items.last() {
                Some(last) if last["type"] == "Metaspace" => &items[..items.len() - 1],
                _ => &items[..],
            };
            let chain = StepChain::build(split_steps)
                .map_err(|why| format!("pre-tokenizer {}: {why}", super::describe(pre)))?;
            words.chain = Some(chain);
            items.drain(..split_steps.len());
        }
        for (at, item) in items.iter().enumerate() {
            match item["type"].as_str() {
                Some("WhitespaceSplit") if at == 0 => words.whitespace_split = true,
                Some("Metaspace") if at + 1 == items.len() => {
                    let mut chars = item["replacement"].as_str().unwrap_or("").chars();
                    let (Some(replacement), None) = (chars.next(), chars.next()) else {
                        return Err("Metaspace replacement is not one character".into());
                    };
                    // Files from before prepend_scheme carry add_prefix_space only: the
                    // crate then defaults to "always" (false loads only with "never").
                    let prepend = match item["prepend_scheme"].as_str() {
                        Some("always") | None => Prepend::Always,
                        Some("first") => Prepend::First,
                        Some("never") => Prepend::Never,
                        other => return Err(format!("Metaspace prepend_scheme {other:?}")),
                    };
                    let split = item["split"].as_bool().unwrap_or(true);
                    words.metaspace = Some((replacement, prepend, split));
                }
                _ => {
                    return Err(format!(
                        "pre-tokenizer {}: covered are Split steps, Metaspace last, none, or a \
                         Split the normalizer leaves nothing to split",
                        super::describe(pre)
                    ))
                }
            }
        }
        Ok(words)
    }

    /// Refuses `prepend_scheme: first` after a normalizer: it reads where a
    /// piece sat in the original text, which only the crate's alignments know
    /// once a normalizer may have moved it.
    pub fn check_normalizer(&self, normalizer: &PieceNormalizer) -> Result<(), String> {
        let first = self
            .metaspace
            .is_some_and(|(_, prepend, _)| prepend == Prepend::First);
        match first && !normalizer.is_identity() {
            true => Err(
                "Metaspace prepend_scheme \"first\" after a normalizer (it reads \
                         original offsets)"
                    .into(),
            ),
            false => Ok(()),
        }
    }

    /// Metaspace's replacement when the words are `WhitespaceSplit` then
    /// `Metaspace` with prepend_scheme "always" and `split` (T5, XLM-R,
    /// ALBERT): the form a device cuts itself (`gt_metaspace_words`).
    pub fn whitespace_metaspace(&self) -> Option<char> {
        match self.metaspace {
            Some((r, Prepend::Always, true)) if self.whitespace_split && self.chain.is_none() => {
                Some(r)
            }
            _ => None,
        }
    }

    /// True when every piece is one word, as it is.
    pub fn is_identity(&self) -> bool {
        !self.whitespace_split && self.chain.is_none() && self.metaspace.is_none()
    }

    /// The pre-tokenizer `pre` (this one's spec), with its Split steps'
    /// engines when they run as a chain, for `tok.plan`.
    pub fn describe(&self, pre: &Value) -> String {
        match &self.chain {
            Some(chain) => format!(
                "{} as Split steps (cuda/gt_chain.cuh): {}",
                super::describe(pre),
                chain.0.name
            ),
            None => super::describe(pre),
        }
    }

    /// The words of a normalized piece that starts the original text
    /// (`first`) or not, each passed to `word`.
    pub fn each(&self, piece: &str, first: bool, mut word: impl FnMut(&str)) {
        // One buffer for the whole piece: Metaspace rewrites each part into it.
        let mut text = String::new();
        let mut metaspace = |part: &str, first: bool| match self.metaspace {
            None => word(part),
            Some((replacement, prepend, split)) => {
                text.clear();
                if prepend.before(part, replacement, first) {
                    text.push(replacement);
                }
                for (n, between_spaces) in part.split(' ').enumerate() {
                    if n > 0 {
                        text.push(replacement);
                    }
                    text.push_str(between_spaces);
                }
                match split {
                    true => split_before(&text, replacement).for_each(&mut word),
                    false if !text.is_empty() => word(&text),
                    false => {}
                }
            }
        };
        match (&self.chain, self.whitespace_split) {
            (Some(chain), _) => chain.each(piece, &mut |start, end| {
                metaspace(&piece[start..end], first && start == 0)
            }),
            (None, true) => {
                for (n, (start, part)) in whitespace_words(piece).enumerate() {
                    metaspace(part, first && n == 0 && start == 0);
                }
            }
            (None, false) => metaspace(piece, first),
        }
    }
}

impl Words {
    /// [`Words::each`] with alignments: each word with the source range of
    /// each of its bytes (`align` gives the piece's), as the crate's
    /// `Metaspace` aligns them: a replacement takes its space's range, a
    /// prepended one the first character's.
    pub fn each_aligned(
        &self,
        piece: &str,
        align: &[(u32, u32)],
        first: bool,
        mut word: impl FnMut(&str, &[(u32, u32)]),
    ) {
        let (mut text, mut text_align) = (String::new(), Vec::new());
        let mut metaspace =
            |part: &str, part_align: &[(u32, u32)], first: bool| match self.metaspace {
                None => word(part, part_align),
                Some((replacement, prepend, split)) => {
                    text.clear();
                    text_align.clear();
                    let width = replacement.len_utf8();
                    if prepend.before(part, replacement, first) {
                        text.push(replacement);
                        text_align.extend(std::iter::repeat_n(part_align[0], width));
                    }
                    for (at, c) in part.char_indices() {
                        match c {
                            ' ' => {
                                text.push(replacement);
                                text_align.extend(std::iter::repeat_n(part_align[at], width));
                            }
                            c => {
                                text.push(c);
                                text_align.extend_from_slice(&part_align[at..at + c.len_utf8()]);
                            }
                        }
                    }
                    match split {
                        true => {
                            for w in split_before(&text, replacement) {
                                let at = w.as_ptr() as usize - text.as_ptr() as usize;
                                word(w, &text_align[at..at + w.len()]);
                            }
                        }
                        false if !text.is_empty() => word(&text, &text_align),
                        false => {}
                    }
                }
            };
        match (&self.chain, self.whitespace_split) {
            (Some(chain), _) => chain.each(piece, &mut |start, end| {
                metaspace(&piece[start..end], &align[start..end], first && start == 0)
            }),
            (None, true) => {
                for (n, (start, part)) in whitespace_words(piece).enumerate() {
                    let part_align = &align[start..start + part.len()];
                    metaspace(part, part_align, first && n == 0 && start == 0);
                }
            }
            (None, false) => metaspace(piece, align, first),
        }
    }
}

/// `text` cut before every `at` (the crate's `MergedWithNext` split): pieces
/// that each start with `at`, but perhaps the first.
fn split_before(text: &str, at: char) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let skip = rest.chars().next().map_or(0, char::len_utf8);
        let end = rest[skip..].find(at).map_or(rest.len(), |i| i + skip);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

/// Words between runs of Unicode whitespace (`WhitespaceSplit`), with their
/// byte starts.
fn whitespace_words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .map(move |w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_before_keeps_the_mark_with_the_next_word() {
        let words: Vec<&str> = split_before("▁a▁▁b c", '▁').collect();
        assert_eq!(words, ["▁a", "▁", "▁b c"]);
        let words: Vec<&str> = split_before("ab▁", '▁').collect();
        assert_eq!(words, ["ab", "▁"]);
    }

    #[test]
    fn whitespace_words_have_their_starts() {
        let words: Vec<(usize, &str)> = whitespace_words(" a\u{3000}bc  d").collect();
        assert_eq!(words, [(1, "a"), (5, "bc"), (9, "d")]);
    }

    #[test]
    fn pre_tokenizers_outside_the_plan_are_refused() {
        let whitespace_last = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            {"type": "WhitespaceSplit"}]});
        assert!(Words::from_spec(&whitespace_last, &Value::Null).is_err());
        let fixed = serde_json::json!({"type": "FixedLength", "length": 3});
        assert!(Words::from_spec(&fixed, &Value::Null).is_err());
        let metaspace_first = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
            {"type": "Digits", "individual_digits": true}]});
        assert!(Words::from_spec(&metaspace_first, &Value::Null).is_err());
    }

    #[test]
    fn a_split_the_normalizer_leaves_nothing_to_split_is_no_step() {
        let split = serde_json::json!({"type": "Split", "pattern": {"String": " "},
                                       "behavior": "MergedWithPrevious", "invert": false});
        let replace =
            serde_json::json!({"type": "Replace", "pattern": {"String": " "}, "content": "▁"});
        assert!(Words::from_spec(&split, &replace).unwrap().is_identity());
        // Without the normalizer it splits: a chain step.
        assert!(!Words::from_spec(&split, &Value::Null)
            .unwrap()
            .is_identity());
        let mut inverted = split.clone();
        inverted["invert"] = true.into();
        assert!(!Words::from_spec(&inverted, &replace).unwrap().is_identity());
    }

    /// The words of `text` under pre-tokenizer `spec`, without a normalizer.
    fn words(spec: Value, text: &str, first: bool) -> Vec<String> {
        let mut out = Vec::new();
        Words::from_spec(&spec, &Value::Null)
            .unwrap()
            .each(text, first, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn split_steps_then_metaspace_split_each_piece_as_the_crate() {
        let whitespace = serde_json::json!({"type": "Whitespace"});
        assert_eq!(
            words(whitespace, "ab, c-d  e", true),
            ["ab", ",", "c", "-", "d", "e"]
        );
        let bert = serde_json::json!({"type": "BertPreTokenizer"});
        assert_eq!(words(bert, " a.b\u{3000}c", true), ["a", ".", "b", "c"]);
        let digits = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "CharDelimiterSplit", "delimiter": "-"},
            {"type": "Digits", "individual_digits": true},
            {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true}]});
        assert_eq!(
            words(digits.clone(), "a1 b-22", true),
            ["▁a", "1", "▁b", "2", "2"]
        );
        // Only the word at the start of the original text takes "first"'s mark.
        assert_eq!(words(digits.clone(), "-a", true), ["a"]);
        let mut out = Vec::new();
        Words::from_spec(&digits, &Value::Null)
            .unwrap()
            .each_aligned("x-9", &[(0, 1), (1, 2), (2, 3)], true, |w, a| {
                out.push((w.to_string(), a.to_vec()))
            });
        let mark = (0, 1);
        assert_eq!(
            out,
            [
                ("▁x".to_string(), vec![mark, mark, mark, (0, 1)]),
                ("9".to_string(), vec![(2, 3)])
            ]
        );
    }

    #[test]
    fn words_follow_each_prepend_scheme() {
        let metaspace = |scheme: &str, split: bool| {
            serde_json::json!({"type": "Metaspace", "replacement": "▁",
                               "prepend_scheme": scheme, "split": split})
        };
        assert_eq!(words(metaspace("always", true), "a b", false), ["▁a", "▁b"]);
        assert_eq!(words(metaspace("first", true), "a b", false), ["a", "▁b"]);
        assert_eq!(words(metaspace("first", false), "a b", true), ["▁a▁b"]);
        assert_eq!(words(metaspace("never", false), "▁a", true), ["▁a"]);
        assert_eq!(
            words(metaspace("always", true), "", true),
            Vec::<String>::new()
        );
        let whitespace_first = serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"}, metaspace("first", true)]});
        assert_eq!(words(whitespace_first.clone(), "a b", true), ["▁a", "b"]);
        assert_eq!(words(whitespace_first, " a b", true), ["a", "b"]);
        let old_format = serde_json::json!({"type": "Metaspace", "replacement": "▁",
                                            "add_prefix_space": true});
        assert_eq!(words(old_format, "a b", false), ["▁a", "▁b"]);
    }
}
