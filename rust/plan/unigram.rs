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
//!
//! On a device, `WhitespaceSplit` + `Metaspace` words are cut there
//! (`gt_metaspace_words`): the host only normalizes (`device_piece`).

use super::family::{Family, PerWord, PerWordPlan, WordTables};
use super::metaspace::Words;
use super::normalize::PieceNormalizer;
use super::{DevicePiece, NormalizedAdded, PlainAdded};
use crate::kernels::{BytesTable, GtUnigramModel, NONE};
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::sync::Arc;

/// The plan: its tables and the split of its added tokens.
pub type UnigramPlan = PerWordPlan<UnigramTables>;

impl Family for UnigramPlan {
    /// The plan, or why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String> {
        let model = &spec["model"];
        let normalizer = PieceNormalizer::from_spec(&spec["normalizer"])?;
        let words = Words::from_spec(&spec["pre_tokenizer"], &spec["normalizer"])?;
        words.check_normalizer(&normalizer)?;
        let plain_added = PlainAdded::for_word_plan(&spec["added_tokens"])?;
        let normalized_added = NormalizedAdded::from_spec(&spec["added_tokens"], &normalizer)?;
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
            lead_len: 0,
            lead_utf8: [0; 4],
            _pad: 0,
        };
        // The replacement read from one byte must be a token of its own: a
        // byte then gives at most one id, as a word's room holds.
        let device_lead = words.whitespace_metaspace().filter(|r| {
            let entry = table.find(r.to_string().as_bytes());
            entry.is_some_and(|e| e & !UNI_LONGER != UNI_PREFIX)
        });
        let description = format!(
            "{}; each word's Viterbi path through the per-thread word cache",
            words.describe(&spec["pre_tokenizer"])
        );
        let shared = Arc::new(UnigramTables {
            normalizer,
            words,
            model,
            device_lead,
            tables: (table, scores),
            description,
        });
        Ok(UnigramPlan {
            shared,
            plain_added,
            normalized_added,
        })
    }

    fn report(&self) -> [String; 3] {
        [
            format!(
                "per piece between added tokens, with the crate's alignments for offsets: {}",
                self.describe_normalizer()
            ),
            self.describe(),
            "Unigram Viterbi kernel (cuda/gt_unigram.cuh) over a hash of tokens and their prefixes, \
             with a per-thread word cache"
                .into(),
        ]
    }

    /// True when every word can be encoded (there is an unknown token), so no
    /// word can fail on a device.
    fn runs_on_device(&self) -> bool {
        self.model.unk_id != NONE
    }
}

impl WordTables for UnigramTables {
    fn normalizer(&self) -> &PieceNormalizer {
        &self.normalizer
    }
}

/// What the plan builds from the model, normalizer and pre-tokenizer: the
/// same for every set of added tokens (`AddedTokens::with_added_tokens`).
pub struct UnigramTables {
    normalizer: PieceNormalizer,
    words: Words,
    model: GtUnigramModel,
    /// Metaspace's replacement when a device cuts the words and reads it
    /// from each word's slot (`device_piece`); it is a token.
    device_lead: Option<char>,
    /// Owned here: `model` points into them.
    tables: (BytesTable, Vec<f64>),
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for UnigramTables {}
// SAFETY: as above.
unsafe impl Sync for UnigramTables {}

impl UnigramPlan {
    /// How the normalizer runs, for `tok.plan`.
    pub fn describe_normalizer(&self) -> String {
        self.normalizer.describe()
    }

    /// The C view of the tables.
    pub fn model(&self) -> &GtUnigramModel {
        &self.model
    }

    /// The arrays the model view points into (pieces, scores), for a device.
    pub fn tables(&self) -> (&BytesTable, &[f64]) {
        (&self.tables.0, &self.tables.1)
    }

    /// True when a device cuts the words itself (`gt_metaspace_words`) from
    /// pieces as `device_piece` gives them.
    pub fn device_cuts_words(&self) -> bool {
        self.device_lead.is_some()
    }

    /// The model a device runs (reading each word's slot as Metaspace's
    /// replacement where it cuts the words) and the replacement its
    /// pre-tokenization cuts at (0: the host cuts the words).
    pub fn device_views(&self) -> (GtUnigramModel, u32) {
        let mut model = self.model;
        let Some(r) = self.device_lead else {
            return (model, 0);
        };
        r.encode_utf8(&mut model.lead_utf8);
        model.lead_len = r.len_utf8() as u32;
        (model, r as u32)
    }

    /// A piece of text (between added tokens) for a device that cuts the
    /// words: normalized, after a space when it does not start with
    /// whitespace (its first word's slot, see `gt_metaspace_words`). None
    /// when the normalizer fails (the exact path reports it).
    pub fn device_piece<'t>(&self, piece: &'t str) -> Option<DevicePiece<'t>> {
        // The device cuts only whitespace-separated words: whitespace the
        // normalizer turns into whitespace can stay as it is.
        let text = match self.normalizer.keeps_whitespace_words() {
            // With normalized added tokens the host normalizes to look for them.
            true if self.normalized_added.is_some() && self.normalize(piece).is_none() => {
                return None
            }
            true => self.normalizer.normalize_for_whitespace_words(piece),
            false => self.normalize(piece)?,
        };
        let spaced = text.chars().next().is_some_and(|c| !c.is_whitespace());
        Some(DevicePiece { text, spaced })
    }

    /// The words of a normalized piece that starts the original text
    /// (`first`) or not, each passed to `word`.
    pub fn words(&self, piece: &str, first: bool, word: impl FnMut(&str)) {
        self.words.each(piece, first, word)
    }

    /// [`UnigramPlan::words`] with each word's alignments.
    pub fn words_aligned(
        &self,
        piece: &str,
        align: &[(u32, u32)],
        first: bool,
        word: impl FnMut(&str, &[(u32, u32)]),
    ) {
        self.words.each_aligned(piece, align, first, word)
    }

    /// How the plan normalizes and splits, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }
}

/// `GT_UNI_LONGER`: an entry of the pieces table that longer tokens begin with.
const UNI_LONGER: u32 = 0x8000_0000;
/// `GT_UNI_PREFIX`: an entry that is only a prefix, not a token.
const UNI_PREFIX: u32 = 0x7FFF_FFFE;

/// The hash table of tokens and their prefixes (see cuda/gt_unigram.cuh),
/// the scores by id and the unknown token's score, from model.vocab
/// (`[[token, score], ...]`, the id being the position).
fn pieces(vocab: &Value) -> Result<(BytesTable, Vec<f64>, f64), String> {
    const LONGER: u32 = UNI_LONGER;
    const PREFIX: u32 = UNI_PREFIX;
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
