//! The fast plan for BERT-style WordPiece tokenizers: `BertNormalizer` (or
//! none), `BertPreTokenizer` or `WhitespaceSplit`, a `WordPiece` model, and
//! plain added tokens. The tables behind `GtWordPieceModel`
//! (cuda/gt_wordpiece.cuh): the per-code-point table ([`CharTable`]) and two
//! hashes of the vocabulary (whole tokens; continuing pieces without their
//! prefix).

use super::char_table::{CharStep, CharTable, Splitter};
use super::PlainAdded;
use crate::kernels::{BytesTable, GtWordPieceModel};
use serde_json::Value;
use std::sync::Arc;

/// The plan: its tables (shared by the tokenizers that differ only in their
/// added tokens; read through `Deref`) and the split of its added tokens.
pub struct WordPiecePlan {
    shared: Arc<WordPieceTables>,
    /// When every added token is plain: the crate's split, without its alignments.
    pub plain_added: Option<PlainAdded>,
}

impl std::ops::Deref for WordPiecePlan {
    type Target = WordPieceTables;

    fn deref(&self) -> &WordPieceTables {
        &self.shared
    }
}

/// What the plan builds from the model, normalizer and pre-tokenizer: the
/// same for every set of added tokens ([`WordPiecePlan::with_added_tokens`]).
pub struct WordPieceTables {
    chars: Arc<CharTable>,
    /// The hashes of whole tokens and of continuing pieces, owned here: `model` points into them.
    vocab_tables: [BytesTable; 2],
    /// Points into `chars` and the vocabulary tables.
    model: GtWordPieceModel,
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for WordPieceTables {}
// SAFETY: as above.
unsafe impl Sync for WordPieceTables {}

impl WordPiecePlan {
    /// The plan, or why this tokenizer is not for it.
    pub fn build(spec: &Value) -> Result<Self, String> {
        let model = &spec["model"];
        if model["type"] != "WordPiece" {
            return Err("the model is not WordPiece".into());
        }
        let normalizer = char_steps(&spec["normalizer"])?;
        let splitter = match spec["pre_tokenizer"]["type"].as_str() {
            Some("BertPreTokenizer") => Splitter::Bert,
            Some("WhitespaceSplit") => Splitter::Whitespace,
            _ => {
                return Err(format!(
                "pre_tokenizer {}: the WordPiece plan covers BertPreTokenizer and WhitespaceSplit",
                super::describe(&spec["pre_tokenizer"])
            ))
            }
        };
        PlainAdded::refuse_normalized(&spec["added_tokens"])?;
        let plain_added = PlainAdded::for_word_plan(&spec["added_tokens"])?;
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
        let chars = CharTable::shared(&normalizer, splitter)
            .map_err(|why| format!("normalizer {}: {why}", super::describe(&spec["normalizer"])))?;
        let first = BytesTable::build(tokens.into_iter());
        let rest = BytesTable::build(rest.into_iter());
        let model = GtWordPieceModel {
            chars: chars.view(),
            first: first.view(),
            rest: rest.view(),
            first_max: first_max as u32,
            rest_max: rest_max as u32,
            unk_id: unk_id as u32,
            max_chars: u32::try_from(max_chars).unwrap_or(u32::MAX),
        };
        let description = format!(
            "{} as classes in the per-code-point table (cuda/gt_wordpiece.cuh)",
            super::describe(&spec["pre_tokenizer"]),
        );
        let shared = Arc::new(WordPieceTables {
            chars,
            vocab_tables: [first, rest],
            model,
            description,
        });
        Ok(WordPiecePlan {
            shared,
            plain_added,
        })
    }

    /// This plan with other added tokens: the tables shared, the split built.
    pub fn with_added_tokens(&self, added_tokens: &Value) -> Result<Self, String> {
        PlainAdded::refuse_normalized(added_tokens)?;
        Ok(WordPiecePlan {
            shared: Arc::clone(&self.shared),
            plain_added: PlainAdded::for_word_plan(added_tokens)?,
        })
    }

    /// The C view of the tables.
    pub fn model(&self) -> &GtWordPieceModel {
        &self.model
    }

    /// The most bytes of normalized text one byte of input can become.
    pub fn growth(&self) -> usize {
        self.chars.growth
    }

    /// The arrays the model view points into (code points, first pieces,
    /// continuing pieces), for a device.
    pub fn tables(&self) -> (&CharTable, &BytesTable, &BytesTable) {
        (&*self.chars, &self.vocab_tables[0], &self.vocab_tables[1])
    }

    /// True when a text of n bytes has at most n tokens (the device's room).
    pub fn tokens_fit_bytes(&self) -> bool {
        self.chars.tokens_fit
    }

    /// The pieces of text free of added tokens for the device (the ends of
    /// each): `text` cut before ASCII spaces into pieces of about
    /// `piece_bytes` (whitespace splits words and normalization maps each
    /// code point alone, so the pieces' tokens are the text's), or None when
    /// a code point needs the exact path.
    pub fn piece_ends(&self, text: &str, piece_bytes: usize) -> Option<Vec<u32>> {
        if crate::kernels::wordpiece_needs_exact(&self.model, text.as_bytes()) {
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

    /// How the plan normalizes and pre-tokenizes, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }

    /// Gives the plain added tokens the crate's ids (see
    /// [`PlainAdded::resolve`]); an error when one has none (the plan then
    /// cannot split text at them).
    pub fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        PlainAdded::resolve_all(&mut self.plain_added, id_of)
    }
}

/// The normalizer as per-code-point steps (none for no normalizer): any
/// normalizer whose every step maps code points on their own
/// (`CharStep`), composed into one table.
fn char_steps(normalizer: &Value) -> Result<Vec<CharStep>, String> {
    let items: Vec<&Value> = match normalizer {
        Value::Null => Vec::new(),
        n if n["type"] == "Sequence" => n["normalizers"]
            .as_array()
            .ok_or("unreadable normalizer Sequence")?
            .iter()
            .collect(),
        n => vec![n],
    };
    items
        .into_iter()
        .map(|item| {
            CharStep::from_spec(item).ok_or_else(|| {
                format!(
                    "normalizer {}: the WordPiece plan covers normalizers that map each code point \
                     on its own (BertNormalizer, Lowercase, StripAccents, NFD...)",
                    super::describe(normalizer)
                )
            })
        })
        .collect()
}
