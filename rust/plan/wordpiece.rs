//! The fast plan for BERT-style WordPiece tokenizers: any normalizer,
//! `BertPreTokenizer` or `WhitespaceSplit` (classes of the kernel's table),
//! or any other pre-tokenizer of Split steps (the compiled chain of
//! `metaspace::Words`, on the host), a `WordPiece` model, and added tokens. The tables behind `GtWordPieceModel` (cuda/gt_wordpiece.cuh): the
//! per-code-point table ([`CharTable`]) and two hashes of the vocabulary
//! (whole tokens; continuing pieces without their prefix).
//!
//! A normalizer whose steps all map code points on their own is composed
//! into the kernel's table: the kernel normalizes. Any other normalizer, or
//! `normalized` added tokens (the crate looks for them in each normalized
//! piece), and the host normalizes each piece (`PieceNormalizer`, with the
//! crate's alignments for offsets) for a kernel whose table only splits.

use super::char_table::{CharStep, CharTable, Splitter};
use super::family::{Family, PerWordPlan, WordTables};
use super::metaspace::Words;
use super::normalize::{Aligns, PieceNormalizer};
use super::{NormalizedAdded, PlainAdded};
use crate::kernels::{BytesTable, GtWordPieceModel};
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;

/// The plan: its tables and the split of its added tokens.
pub type WordPiecePlan = PerWordPlan<WordPieceTables>;

impl Family for WordPiecePlan {
    /// The plan, or why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String> {
        let model = &spec["model"];
        if model["type"] != "WordPiece" {
            return Err("the model is not WordPiece".into());
        }
        let steps = char_steps(&spec["normalizer"]);
        let normalizer = PieceNormalizer::from_spec(&spec["normalizer"])?;
        // BertPreTokenizer and WhitespaceSplit: classes of the kernel's table
        // (the faster route); any other Split steps: the compiled chain cuts
        // the host-normalized piece and the kernel reads each word whole.
        let (splitter, words) = match spec["pre_tokenizer"]["type"].as_str() {
            Some("BertPreTokenizer") => (Splitter::Bert, None),
            Some("WhitespaceSplit") => (Splitter::Whitespace, None),
            _ => {
                let words = Words::from_spec(&spec["pre_tokenizer"], &spec["normalizer"])?;
                words.check_normalizer(&normalizer)?;
                (Splitter::None, Some(words))
            }
        };
        let plain_added = PlainAdded::for_word_plan(&spec["added_tokens"])?;
        let normalized_added = NormalizedAdded::from_spec(&spec["added_tokens"], &normalizer)?;
        let vocab = model["vocab"]
            .as_object()
            .ok_or("the WordPiece vocabulary is not a map")?;
        let unk = model["unk_token"].as_str().unwrap_or("[UNK]");
        let unk_id = vocab
            .get(unk)
            .and_then(Value::as_u64)
            .ok_or("the unknown token is not in the vocabulary (the crate reports it)")?;
        let prefix = model["continuing_subword_prefix"].as_str().unwrap_or("##");
        let max_chars = model["max_input_chars_per_word"].as_u64().unwrap_or(100);
        let mut tokens = Vec::with_capacity(vocab.len());
        for (token, id) in vocab {
            let id = id.as_u64().and_then(|id| u32::try_from(id).ok());
            tokens.push((token.as_bytes(), id.ok_or("a vocabulary id is not a u32")?));
        }
        let rest: Vec<(&[u8], u32)> = tokens
            .iter()
            .filter_map(|&(t, id)| Some((t.strip_prefix(prefix.as_bytes())?, id)))
            .collect();
        let longest =
            |entries: &[(&[u8], u32)]| entries.iter().map(|e| e.0.len()).max().unwrap_or(0);
        let (first_max, rest_max) = (longest(&tokens), longest(&rest));
        let split_chars = CharTable::shared(&[], splitter)?;
        // Steps the table cannot hold (a blob over its offsets) are the host's too.
        // Chain words: the host normalizes (the table would split nothing).
        let chars = steps
            .filter(|_| words.is_none())
            .and_then(|steps| CharTable::shared(&steps, splitter).ok());
        let first = BytesTable::build(tokens.into_iter());
        let rest = BytesTable::build(rest.into_iter());
        let split_model = GtWordPieceModel {
            chars: split_chars.view(),
            first: first.view(),
            rest: rest.view(),
            first_max: first_max as u32,
            rest_max: rest_max as u32,
            unk_id: unk_id as u32,
            max_chars: u32::try_from(max_chars).unwrap_or(u32::MAX),
        };
        let model = GtWordPieceModel {
            chars: chars.as_ref().map_or(split_model.chars, |c| c.view()),
            ..split_model
        };
        let description = match &words {
            None => format!(
                "{} as classes in the per-code-point table (cuda/gt_wordpiece.cuh)",
                super::describe(&spec["pre_tokenizer"]),
            ),
            Some(words) => format!(
                "{}; each word whole through the WordPiece kernel, on the host only \
                 (the device kernel cuts words by its table's classes)",
                words.describe(&spec["pre_tokenizer"]),
            ),
        };
        let shared = Arc::new(WordPieceTables {
            chars,
            split_chars,
            vocab_tables: [first, rest],
            model,
            split_model,
            normalizer,
            words,
            description,
        });
        Ok(WordPiecePlan {
            shared,
            plain_added,
            normalized_added,
        })
    }

    fn report(&self) -> [String; 3] {
        [
            self.describe_normalizer(),
            self.describe(),
            "WordPiece kernel (cuda/gt_wordpiece.cuh): greedy longest match over hashes of the vocabulary"
                .into(),
        ]
    }

    /// True when a text of n bytes has at most n tokens (the device's room)
    /// and the kernel's table cuts the words (not the host's chain).
    fn runs_on_device(&self) -> bool {
        self.words.is_none() && self.kernel_chars().tokens_fit
    }
}

impl WordTables for WordPieceTables {
    fn normalizer(&self) -> &PieceNormalizer {
        &self.normalizer
    }
}

/// What the plan builds from the model, normalizer and pre-tokenizer: the
/// same for every set of added tokens (`AddedTokens::with_added_tokens`).
pub struct WordPieceTables {
    /// The kernel's table when it normalizes: the normalizer's steps and the
    /// pre-tokenizer's classes; None when some step does not map code points alone.
    chars: Option<Arc<CharTable>>,
    /// The table of the pre-tokenizer's classes alone, for text the host normalized.
    split_chars: Arc<CharTable>,
    /// The hashes of whole tokens and of continuing pieces, owned here: the models point into them.
    vocab_tables: [BytesTable; 2],
    /// Points into `chars` and the vocabulary tables (`split_model` when `chars` is None).
    model: GtWordPieceModel,
    /// Points into `split_chars` and the vocabulary tables.
    split_model: GtWordPieceModel,
    /// The normalizer as the host runs it, piece by piece.
    normalizer: PieceNormalizer,
    /// The pre-tokenizer when it is not a class of the table (Split steps,
    /// perhaps Metaspace: `Words`): the host cuts each normalized piece.
    words: Option<Words>,
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for WordPieceTables {}
// SAFETY: as above.
unsafe impl Sync for WordPieceTables {}

impl WordPiecePlan {
    /// True when the host normalizes each piece ([`WordPiecePlan::normalize`])
    /// and the kernel only splits and encodes: a normalizer the kernel's table
    /// cannot hold, or `normalized` added tokens to look for in its output.
    pub fn host_normalizes(&self) -> bool {
        self.chars.is_none() || self.normalized_added.is_some()
    }

    /// The table the kernel runs: the normalizer's and the pre-tokenizer's,
    /// or the pre-tokenizer's alone when the host normalizes.
    fn kernel_chars(&self) -> &CharTable {
        match &self.chars {
            Some(chars) if !self.host_normalizes() => chars,
            _ => &self.split_chars,
        }
    }

    /// The C view of the tables the kernel runs (see [`WordPiecePlan::kernel_chars`]).
    pub fn model(&self) -> &GtWordPieceModel {
        match self.host_normalizes() {
            true => &self.split_model,
            false => &self.model,
        }
    }

    /// The most bytes of kernel-normalized text one byte of its input can become.
    pub fn growth(&self) -> usize {
        self.kernel_chars().growth
    }

    /// A piece of text (between added tokens) as the kernel reads it:
    /// normalized by the host when it normalizes, else as it is. None when
    /// the normalizer fails (the exact path reports it) or writes a
    /// normalized added token (the crate splits there).
    pub fn kernel_text<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        if !self.host_normalizes() {
            return Some(Cow::Borrowed(piece));
        }
        let normalized = self.normalizer.normalize(piece)?;
        let held = NormalizedAdded::held_in(self.normalized_added.as_ref(), &normalized);
        (!held).then_some(normalized)
    }

    /// [`WordPiecePlan::kernel_text`] with its alignments (the byte range of
    /// `piece` each byte comes from) when the host normalizes; None for them
    /// when the kernel does (it maps spans itself).
    pub fn kernel_text_aligned<'t>(
        &self,
        piece: &'t str,
    ) -> Option<(Cow<'t, str>, Option<Aligns>)> {
        if !self.host_normalizes() {
            return Some((Cow::Borrowed(piece), None));
        }
        let (normalized, align) = self.normalizer.normalize_aligned(piece)?;
        let held = NormalizedAdded::held_in(self.normalized_added.as_ref(), &normalized);
        (!held).then_some((Cow::Owned(normalized), Some(align)))
    }

    /// The arrays the model view points into (code points, first pieces,
    /// continuing pieces), for a device.
    pub fn tables(&self) -> (&CharTable, &BytesTable, &BytesTable) {
        (
            self.kernel_chars(),
            &self.vocab_tables[0],
            &self.vocab_tables[1],
        )
    }

    /// The pieces of kernel text ([`WordPiecePlan::kernel_text`]) free of
    /// added tokens for the device (the ends of each): `text` cut before
    /// ASCII spaces into pieces of about `piece_bytes` (whitespace splits
    /// words and the kernel's table maps each code point alone, so the
    /// pieces' tokens are the text's), or None when a code point needs the
    /// exact path.
    pub fn piece_ends(&self, text: &str, piece_bytes: usize) -> Option<Vec<u32>> {
        if self.words.is_some()
            || crate::kernels::wordpiece_needs_exact(self.model(), text.as_bytes())
        {
            return None;
        }
        let bytes = text.as_bytes();
        let mut ends = Vec::new();
        let mut from = 0;
        while bytes.len() - from > piece_bytes {
            match bytes[from + piece_bytes..].iter().position(|&b| b == b' ') {
                Some(at) => {
                    let cut = from + piece_bytes + at;
                    ends.push(u32::try_from(cut).ok()?);
                    from = cut;
                }
                None => break,
            }
        }
        ends.push(u32::try_from(bytes.len()).ok()?);
        Some(ends)
    }

    /// The host's words of a normalized piece when the pre-tokenizer is a
    /// chain of Split steps (`Words`); None when the kernel's table cuts them.
    pub fn chain_words(&self) -> Option<&Words> {
        self.words.as_ref()
    }

    /// How the plan normalizes, for `tok.plan`.
    pub fn describe_normalizer(&self) -> String {
        match self.host_normalizes() {
            false => "per-code-point table built from the crate's Unicode data \
                      (cuda/gt_wordpiece.cuh); offsets too"
                .into(),
            true => format!(
                "per piece between added tokens on the host, with the crate's alignments for \
                 offsets: {}",
                self.normalizer.describe()
            ),
        }
    }

    /// How the plan pre-tokenizes, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }
}

/// The normalizer as per-code-point steps (none for no normalizer), to
/// compose into one table: any normalizer whose every step maps code points
/// on their own (`CharStep`); None for any other (the host normalizes).
fn char_steps(normalizer: &Value) -> Option<Vec<CharStep>> {
    let items: Vec<&Value> = match normalizer {
        Value::Null => Vec::new(),
        n if n["type"] == "Sequence" => n["normalizers"].as_array()?.iter().collect(),
        n => vec![n],
    };
    items.into_iter().map(CharStep::from_spec).collect()
}
