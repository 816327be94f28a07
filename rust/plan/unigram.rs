//! The fast plan for Unigram tokenizers (T5, XLM-R, ALBERT and anything the
//! `tokenizers` Unigram trainer writes): the model is the Viterbi kernel
//! (`GtUnigramModel`, cuda/gt_unigram.cuh) behind the per-thread word cache;
//! the pre-tokenizer is `Metaspace` (every `prepend_scheme`, `split` or not),
//! alone or after `WhitespaceSplit`, or none.
//!
//! The normalizer runs on each piece of text between added tokens, as the
//! crate runs it there ([`PieceNormalizer`]: `Precompiled` and the
//! collapse-spaces `Replace` without alignments, any other component the
//! crate's own): the text it writes is what the words are cut from, so any
//! normalizer is exact. Only `prepend_scheme: first` reads
//! where a piece came from in the original text; the plan takes it only
//! without a normalizer, where that is the piece's own position.

use super::normalize::PieceNormalizer;
use super::PlainAdded;
use crate::kernels::{BytesTable, GtUnigramModel, NONE};
use rustc_hash::FxHashMap;
use serde_json::Value;

/// Where `Metaspace` puts its replacement before a piece (`prepend_scheme`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Prepend {
    Always,
    /// Only before the piece that starts the original text.
    First,
    Never,
}

/// The pre-tokenizer: optional `WhitespaceSplit`, then optional `Metaspace`.
#[derive(Clone, Debug, PartialEq)]
struct Words {
    whitespace_split: bool,
    /// (replacement, prepend scheme, split at the replacement)
    metaspace: Option<(char, Prepend, bool)>,
}

pub struct UnigramPlan {
    normalizer: PieceNormalizer,
    words: Words,
    model: GtUnigramModel,
    /// Owned here: `model` points into them.
    _tables: (BytesTable, Vec<f64>),
    /// When every added token is plain: the crate's split, without its alignments.
    pub plain_added: Option<PlainAdded>,
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for UnigramPlan {}
// SAFETY: as above.
unsafe impl Sync for UnigramPlan {}

impl UnigramPlan {
    /// The plan, or why this tokenizer is not for it.
    pub fn build(spec: &Value) -> Result<Self, String> {
        let model = &spec["model"];
        let normalizer = PieceNormalizer::from_spec(&spec["normalizer"])?;
        let words = pre_tokenizer_words(&spec["pre_tokenizer"])?;
        if !normalizer.is_identity()
            && words
                .metaspace
                .is_some_and(|(_, prepend, _)| prepend == Prepend::First)
        {
            return Err(
                "Metaspace prepend_scheme \"first\" after a normalizer (it reads \
                        original offsets)"
                    .into(),
            );
        }
        let added = &spec["added_tokens"];
        let plain_added = PlainAdded::from_spec(added);
        if plain_added.is_none() && added.as_array().is_some_and(|a| !a.is_empty()) {
            return Err(
                "added tokens that are normalized, strip spaces or match single words".into(),
            );
        }
        let (table, scores, unk_score) = pieces(&model["vocab"])?;
        let unk_id = match &model["unk_id"] {
            Value::Null => NONE,
            id => id
                .as_u64()
                .filter(|&id| (id as usize) < scores.len())
                .ok_or("unk_id is not an id of the vocabulary")? as u32,
        };
        let mut byte_ids = [NONE; 256];
        if model["byte_fallback"].as_bool().unwrap_or(false) {
            let vocab = model["vocab"]
                .as_array()
                .ok_or("model.vocab is not a list")?;
            let id_of: FxHashMap<&str, u32> = vocab
                .iter()
                .enumerate()
                .filter_map(|(id, entry)| Some((entry[0].as_str()?, id as u32)))
                .collect();
            for (b, slot) in byte_ids.iter_mut().enumerate() {
                *slot = id_of
                    .get(format!("<0x{b:02X}>").as_str())
                    .copied()
                    .unwrap_or(NONE);
            }
        }
        let model = GtUnigramModel {
            pieces: table.view(),
            scores: scores.as_ptr(),
            unk_score,
            byte_ids,
            unk_id,
            _pad: 0,
        };
        let description = format!(
            "{}; each word's Viterbi path through the per-thread word cache",
            super::describe(&spec["pre_tokenizer"])
        );
        Ok(UnigramPlan {
            normalizer,
            words,
            model,
            _tables: (table, scores),
            plain_added,
            description,
        })
    }

    /// The C view of the tables.
    pub fn model(&self) -> &GtUnigramModel {
        &self.model
    }

    /// A piece of text (between added tokens) after the normalizer; None
    /// when the normalizer fails (the exact path reports it).
    pub fn normalize<'t>(&self, piece: &'t str) -> Option<std::borrow::Cow<'t, str>> {
        self.normalizer.normalize(piece)
    }

    /// The words of a normalized piece that starts the original text
    /// (`first`) or not, each passed to `word`.
    pub fn words(&self, piece: &str, first: bool, mut word: impl FnMut(&str)) {
        let mut metaspace = |text: &str, first: bool| match self.words.metaspace {
            None => word(text),
            Some((replacement, prepend, split)) => {
                let mut buffer = [0u8; 4];
                let rep: &str = replacement.encode_utf8(&mut buffer);
                let mut text = text.replace(' ', rep);
                let before = match prepend {
                    Prepend::Always => true,
                    Prepend::First => first,
                    Prepend::Never => false,
                };
                if before && !text.is_empty() && !text.starts_with(replacement) {
                    text.insert(0, replacement);
                }
                match split {
                    true => split_before(&text, replacement).for_each(&mut word),
                    false if !text.is_empty() => word(&text),
                    false => {}
                }
            }
        };
        match self.words.whitespace_split {
            true => {
                let mut at_start = first;
                for (start, part) in whitespace_words(piece) {
                    metaspace(part, at_start && start == 0);
                    at_start = false;
                }
            }
            false => metaspace(piece, first),
        }
    }

    /// How the plan normalizes and splits, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }

    /// Gives the plain added tokens the crate's ids; an error when one has none.
    pub fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        PlainAdded::resolve_all(&mut self.plain_added, id_of)
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

/// The pre-tokenizer as `Words`, or why it is not one.
fn pre_tokenizer_words(pre: &Value) -> Result<Words, String> {
    let items: Vec<&Value> = match pre {
        Value::Null => Vec::new(),
        p if p["type"] == "Sequence" => p["pretokenizers"]
            .as_array()
            .ok_or("unreadable pre-tokenizer Sequence")?
            .iter()
            .collect(),
        p => vec![p],
    };
    let mut words = Words {
        whitespace_split: false,
        metaspace: None,
    };
    for (at, item) in items.iter().enumerate() {
        match item["type"].as_str() {
            Some("WhitespaceSplit") if at == 0 => words.whitespace_split = true,
            Some("Metaspace") if at + 1 == items.len() => {
                let mut chars = item["replacement"].as_str().unwrap_or("").chars();
                let (Some(replacement), None) = (chars.next(), chars.next()) else {
                    return Err("Metaspace replacement is not one character".into());
                };
                let prepend = match item["prepend_scheme"].as_str() {
                    Some("always") => Prepend::Always,
                    Some("first") => Prepend::First,
                    Some("never") => Prepend::Never,
                    other => return Err(format!("Metaspace prepend_scheme {other:?}")),
                };
                let split = item["split"].as_bool().unwrap_or(true);
                words.metaspace = Some((replacement, prepend, split));
            }
            _ => {
                return Err(format!(
                    "pre-tokenizer {}: the Unigram plan covers [WhitespaceSplit,] Metaspace",
                    super::describe(pre)
                ))
            }
        }
    }
    Ok(words)
}

/// The hash table of tokens and their prefixes (see cuda/gt_unigram.cuh),
/// the scores by id and the unknown token's score, from model.vocab
/// (`[[token, score], ...]`, the id being the position).
fn pieces(vocab: &Value) -> Result<(BytesTable, Vec<f64>, f64), String> {
    const LONGER: u32 = 0x8000_0000; // GT_UNI_LONGER
    const PREFIX: u32 = 0x7FFF_FFFE; // GT_UNI_PREFIX
    let vocab = vocab.as_array().ok_or("model.vocab is not a list")?;
    if vocab.len() >= PREFIX as usize {
        return Err("a vocabulary of 2^31 tokens or more".into());
    }
    let mut scores = Vec::with_capacity(vocab.len());
    // Token -> id, the last of duplicates winning as in the crate's map.
    let mut entries: FxHashMap<&str, u32> = FxHashMap::default();
    for (id, entry) in vocab.iter().enumerate() {
        let (Some(token), Some(score)) = (entry[0].as_str(), entry[1].as_f64()) else {
            return Err("a model.vocab entry is not [token, score]".into());
        };
        scores.push(score);
        if !token.is_empty() {
            entries.insert(token, id as u32);
        }
    }
    // The crate's min_score: over every entry, duplicates included.
    let min_score = scores.iter().copied().fold(f64::INFINITY, f64::min);
    // Every proper prefix of a token that ends on a character: the crate's
    // trie walk goes on past these.
    let mut longer: FxHashMap<&str, u32> = FxHashMap::default();
    for &token in entries.keys() {
        for (end, _) in token.char_indices().skip(1) {
            longer.insert(&token[..end], PREFIX | LONGER);
        }
    }
    let mut table = longer.clone();
    for (&token, &id) in &entries {
        let flag = if longer.contains_key(token) {
            LONGER
        } else {
            0
        };
        table.insert(token, id | flag);
    }
    let table = BytesTable::build(table.iter().map(|(t, &v)| (t.as_bytes(), v)));
    Ok((table, scores, min_score - 10.0))
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
        assert!(pre_tokenizer_words(&whitespace_last).is_err());
        assert!(pre_tokenizer_words(&serde_json::json!({"type": "Whitespace"})).is_err());
    }
}
