//! Rows with everything the crate's `Encoding` carries: word ids, sequence
//! ids, token strings and offsets (the per-token maps of transformers'
//! `BatchEncoding`), overflowing windows with a stride, pre-split words
//! (`is_split_into_words`) and `split_special_tokens`.
//!
//! Each sequence goes through the crate's own added-token split, normalizer
//! and pre-tokenizer, which record where every pre-token came from; the
//! model runs on the fast engine for each pre-token where the plan has one
//! (`split_tokens`: the word cache and the shared kernels), else the crate's;
//! the crate's `into_encoding` then gives words and offsets. So the maps are
//! the crate's by construction, and only the model step, which the parity
//! suites hold to the crate's ids, is ours. Truncation windows come from
//! `overflow` (counted and refused before they are built), each window pair
//! goes through the post-processor on its own, and padding is the crate's.

use super::overflow::{self, Windows};
use super::{Engine, Settings};
use crate::cpu::word_cache;
use crate::error::{Error, Result};
use crate::kernels;
use crate::layout::Batch;
use crate::plan::bytelevel::ByteLevelPlan;
use crate::plan::each_family;
use crate::plan::spm::SpmPlan;
use crate::plan::unigram::UnigramPlan;
use crate::plan::wordpiece::WordPiecePlan;
use crate::pool;
use std::sync::OnceLock;
use tokenizers::{AddedVocabulary, Encoding, Model, PreTokenizer, Token};

/// Bytes a crate `Encoding` holds per token: ids, type ids, masks, word,
/// offsets and the token's string (a copy of the pad token's in padding).
const ENCODING_BYTES_PER_TOKEN: usize = 160;

/// One sequence of a row: a text, or words given one by one.
pub enum Sequence<'a> {
    Text(&'a str),
    Words(Vec<&'a str>),
}

impl Sequence<'_> {
    fn bytes(&self) -> usize {
        match self {
            Sequence::Text(text) => text.len(),
            Sequence::Words(words) => words.iter().map(|w| w.len()).sum(),
        }
    }
}

/// One input row: a sequence, or a pair.
pub type RichInput<'a> = (Sequence<'a>, Option<Sequence<'a>>);

/// A call's settings beyond [`Settings`].
#[derive(Clone, Debug, Default)]
pub struct RichSettings {
    pub base: Settings,
    /// Every window of a truncated row (`return_overflowing_tokens`), not just the first.
    pub overflow: bool,
    /// Special tokens in the text are encoded as text (`split_special_tokens`).
    pub split_special_tokens: bool,
}

/// The packed batch (one row per window), each row's crate `Encoding`
/// (padded as the crate pads it), and the input row each window comes from.
pub struct RichBatch {
    pub batch: Batch,
    pub encodings: Vec<Encoding>,
    pub sample_of_row: Vec<usize>,
}

/// What the rich path builds once per engine.
#[derive(Default)]
pub struct RichState {
    /// The added vocabulary with `encode_special_tokens` set (`split_special_tokens`).
    split_special: OnceLock<AddedVocabulary>,
    /// A WordPiece model's continuing prefix and unknown id.
    wordpiece: OnceLock<Option<(String, Option<u32>)>>,
}

impl Engine {
    /// Encodes `inputs` with the crate's full encodings (see the module comment).
    pub fn encode_rich(
        &self,
        inputs: &[RichInput<'_>],
        settings: &RichSettings,
    ) -> Result<RichBatch> {
        let shapes: Vec<super::Input<'_>> = inputs
            .iter()
            .map(|(_, pair)| ("", pair.as_ref().map(|_| "")))
            .collect();
        let base = &settings.base;
        self.check_settings(&shapes, base)?;
        let pool = pool::current();
        let bytes = inputs
            .iter()
            .map(|(a, b)| a.bytes() + b.as_ref().map_or(0, Sequence::bytes))
            .sum();
        let sequences = pool.map_sized(inputs.len(), bytes, |i| {
            let (first, second) = &inputs[i];
            let first = self.encode_full(first, 0, settings.split_special_tokens)?;
            let second = second
                .as_ref()
                .map(|s| self.encode_full(s, 1, settings.split_special_tokens))
                .transpose()?;
            Ok::<_, Error>((first, second))
        })?;
        let cuts = self.cuts(&sequences, settings)?;
        let rows = pool.map_sized(inputs.len(), bytes, |i| {
            let (first, second) = &sequences[i];
            self.windows(first, second.as_ref(), &cuts[i], settings)
        })?;
        let mut encodings = Vec::with_capacity(rows.iter().map(Vec::len).sum());
        let mut sample_of_row = Vec::with_capacity(encodings.capacity());
        for (i, windows) in rows.into_iter().enumerate() {
            sample_of_row.extend(std::iter::repeat_n(i, windows.len()));
            encodings.extend(windows);
        }
        let batch = super::pack::pack(&encodings, base.padding.as_ref(), base.outputs)?;
        if let Some(p) = &base.padding {
            // The crate's Encodings take far more per token than the packed
            // batch, and the crate aborts on a failed allocation.
            let padded = batch.row_starts.last().map_or(0, |&n| n as usize);
            crate::memory::check(
                "the padded encodings",
                padded.checked_mul(ENCODING_BYTES_PER_TOKEN),
                || "max_length with padding='max_length', or the batch".into(),
            )?;
            for (i, e) in encodings.iter_mut().enumerate() {
                let len = (batch.row_starts[i + 1] - batch.row_starts[i]) as usize;
                e.pad(len, p.pad_id, p.pad_type_id, &p.pad_token, p.direction);
            }
        }
        Ok(RichBatch {
            batch,
            encodings,
            sample_of_row,
        })
    }

    /// How each row is cut: the windows of each sequence (one, uncut, without
    /// truncation), checked against the crate's rules and, with overflow,
    /// against memory before any window is built.
    fn cuts(
        &self,
        sequences: &[(Encoding, Option<Encoding>)],
        settings: &RichSettings,
    ) -> Result<Vec<(Windows, Option<Windows>)>> {
        let base = &settings.base;
        let whole = |len: usize| Windows {
            len,
            to: None,
            stride: 0,
            direction: Default::default(),
        };
        let mut windows = 0u128;
        let mut tokens = 0u128;
        let cuts = sequences
            .iter()
            .map(|(first, second)| {
                let second_len = second.as_ref().map(Encoding::len);
                let Some(trunc) = &base.truncation else {
                    return Ok((whole(first.len()), second_len.map(whole)));
                };
                let params = self.room_params(trunc, second.is_some(), base.add_special_tokens);
                let special = trunc.max_length - params.max_length;
                let (to_first, to_second) =
                    overflow::targets(first.len(), second_len, &params, special)?;
                let cut = |len: usize, to: Option<usize>| Windows {
                    len,
                    to,
                    stride: trunc.stride,
                    direction: trunc.direction,
                };
                let a = cut(first.len(), to_first);
                let b = second_len.map(|n| cut(n, to_second));
                if settings.overflow {
                    let (na, nb) = (a.count() as u128, b.map_or(1, |b| b.count()) as u128);
                    let special = match base.add_special_tokens {
                        true => self.added_special_tokens(second.is_some()) as u128,
                        false => 0,
                    };
                    windows = windows.saturating_add(na * nb);
                    let row_tokens = (a.tokens() as u128 * nb)
                        .saturating_add(b.map_or(0, |b| b.tokens() as u128) * na)
                        .saturating_add(na * nb * special);
                    tokens = tokens.saturating_add(row_tokens);
                }
                Ok((a, b))
            })
            .collect::<Result<Vec<_>>>()?;
        if let (true, Some(trunc)) = (settings.overflow, &base.truncation) {
            overflow::check_budget(windows, tokens, trunc)?;
        }
        Ok(cuts)
    }

    /// The post-processed windows of one row, in the crate's order (only the
    /// first without overflow).
    fn windows(
        &self,
        first: &Encoding,
        second: Option<&Encoding>,
        (a, b): &(Windows, Option<Windows>),
        settings: &RichSettings,
    ) -> Result<Vec<Encoding>> {
        let base = &settings.base;
        let cut = |e: &Encoding, w: &Windows, i: usize| match w.to {
            None => e.clone(),
            Some(_) => overflow::window(e, w.range(i)),
        };
        let count = |w: &Windows| if settings.overflow { w.count() } else { 1 };
        let bare = self.hf.get_post_processor().is_none();
        match (second, b) {
            (Some(second), Some(b)) => overflow::pair_order(count(a), count(b))
                .map(|(i, j)| {
                    let (mut x, mut y) = (cut(first, a, i), cut(second, b, j));
                    if !bare {
                        return self.post_process_window(
                            x,
                            i > 0,
                            Some((y, j > 0)),
                            base.add_special_tokens,
                        );
                    }
                    // Without a post-processor the crate numbers the sequences
                    // of its main encodings only, not of their overflowing windows.
                    if i == 0 {
                        x.set_sequence_id(0);
                    }
                    if j == 0 {
                        y.set_sequence_id(1);
                    }
                    Ok(Encoding::merge([x, y], false))
                })
                .collect(),
            _ => (0..count(a))
                .map(|i| {
                    self.post_process_window(cut(first, a, i), i > 0, None, base.add_special_tokens)
                })
                .collect(),
        }
    }

    /// One window of a row through the post-processor as the crate hands it
    /// over: a window that overflowed (`x_over`, `y_over`) as the overflowing
    /// encoding of a main one (empty here), since processors treat those
    /// differently (`process` sets the type ids of main encodings only, and
    /// processors have a branch of their own for overflowing ones); the
    /// result is picked out of the merge in `Encoding::merge_with`'s order.
    fn post_process_window(
        &self,
        x: Encoding,
        x_over: bool,
        y: Option<(Encoding, bool)>,
        add_special_tokens: bool,
    ) -> Result<Encoding> {
        let as_given = |e: Encoding, over: bool| match over {
            false => e,
            true => {
                let mut main = Encoding::default();
                main.set_overflowing(vec![e]);
                main
            }
        };
        let y_over = y.as_ref().is_some_and(|(_, over)| *over);
        let second = y.map(|(e, over)| as_given(e, over));
        let mut merged = self.post_process(as_given(x, x_over), second, add_special_tokens)?;
        // merge_with's overflowing rows: (x over, y main), (x over, y over), (x main, y over).
        let pick = match (x_over, y_over) {
            (false, false) => return Ok(merged),
            (true, true) => 1,
            _ => 0,
        };
        merged
            .take_overflowing()
            .into_iter()
            .nth(pick)
            .ok_or_else(|| Error::Tokenizers("post-processing lost an overflowing window".into()))
    }

    /// One sequence with the crate's word ids, offsets (characters) and
    /// token strings, its tokens of type `type_id`.
    fn encode_full(
        &self,
        sequence: &Sequence<'_>,
        type_id: u32,
        split_special: bool,
    ) -> Result<Encoding> {
        match sequence {
            Sequence::Text(text) => self.encode_words_of(text, type_id, None, split_special),
            // The crate encodes each word as a text of its own, offsets within the word.
            Sequence::Words(words) => Ok(Encoding::merge(
                words
                    .iter()
                    .enumerate()
                    .map(|(i, word)| {
                        self.encode_words_of(word, type_id, Some(i as u32), split_special)
                    })
                    .collect::<Result<Vec<_>>>()?,
                false,
            )),
        }
    }

    /// `text` through the crate's added-token split, normalizer and
    /// pre-tokenizer, the model on each pre-token (fast where the plan has
    /// one), and the crate's `into_encoding` (`word`: every token's word id,
    /// for pre-split words; else the pre-token's index).
    fn encode_words_of(
        &self,
        text: &str,
        type_id: u32,
        word: Option<u32>,
        split_special: bool,
    ) -> Result<Encoding> {
        let hf = &self.hf;
        let added = match split_special {
            true => self.rich.split_special.get_or_init(|| {
                let mut added = hf.get_added_vocabulary().clone();
                added.set_encode_special_tokens(true);
                added
            }),
            false => hf.get_added_vocabulary(),
        };
        let mut pretokenized = added.extract_and_normalize(hf.get_normalizer(), text);
        if let Some(pre_tokenizer) = hf.get_pre_tokenizer() {
            pre_tokenizer
                .pre_tokenize(&mut pretokenized)
                .map_err(Error::tokenizers)?;
        }
        pretokenized
            .tokenize(|normalized| {
                let pre_token = normalized.get();
                match self.split_tokens(pre_token) {
                    Some(tokens) => Ok(tokens),
                    None => hf.get_model().tokenize(pre_token),
                }
            })
            .map_err(Error::tokenizers)?;
        super::aligned::char_offset_encoding(pretokenized, text, word, type_id)
    }

    /// The tokens of one pre-token with their byte spans in it and their
    /// strings, on the fast model of the plan's family
    /// ([`PreTokenTokens`]); None where the plan has none or cannot tell
    /// (the crate's model then takes the pre-token).
    fn split_tokens(&self, pre_token: &str) -> Option<Vec<Token>> {
        let fast = self.fast.as_ref().ok()?;
        each_family!(fast, plan => plan.pre_token_tokens(self, pre_token))
    }
}

/// A family's tokens of one of the crate's pre-tokens, with their byte spans
/// in it and their strings (`Engine::split_tokens`); None when they cannot
/// be told.
trait PreTokenTokens {
    fn pre_token_tokens(&self, engine: &Engine, pre_token: &str) -> Option<Vec<Token>>;
}

/// The `Token`s of `ids` at `spans`, named by the crate's vocabulary.
fn named_tokens(
    engine: &Engine,
    ids: &[u32],
    spans: impl IntoIterator<Item = (usize, usize)>,
) -> Vec<Token> {
    let value = |id: u32| engine.hf.id_to_token(id).unwrap_or_default();
    ids.iter()
        .zip(spans)
        .map(|(&id, span)| Token::new(id, value(id), span))
        .collect()
}

impl PreTokenTokens for ByteLevelPlan {
    fn pre_token_tokens(&self, engine: &Engine, pre_token: &str) -> Option<Vec<Token>> {
        // The pre-token is written in byte-level characters: back to bytes.
        let bytes = byte_level_bytes(pre_token)?;
        let mut ids = Vec::new();
        word_cache::with_cache(engine.id, |cache| {
            cache.encode_word(&bytes, &mut ids, |w, s, o| {
                kernels::bpe_word(self.model(), w, &mut s.bpe, o);
                true
            })
        });
        // A token of n bytes spans n byte-level characters of the pre-token.
        let mut chars = pre_token
            .char_indices()
            .map(|(at, _)| at)
            .chain([pre_token.len()]);
        let mut at = chars.next()?;
        let mut spans = Vec::with_capacity(ids.len());
        for &id in &ids {
            let n = self.token_len(id);
            let end = match n {
                0 => return None,
                n => chars.nth(n - 1)?,
            };
            spans.push((at, end));
            at = end;
        }
        (at == pre_token.len()).then(|| named_tokens(engine, &ids, spans))
    }
}

impl PreTokenTokens for WordPiecePlan {
    fn pre_token_tokens(&self, engine: &Engine, pre_token: &str) -> Option<Vec<Token>> {
        let value = |id: u32| engine.hf.id_to_token(id).unwrap_or_default();
        let (prefix, unk) = engine
            .rich
            .wordpiece
            .get_or_init(|| wordpiece_of(engine))
            .as_ref()?;
        let unk = *unk;
        let mut ids = Vec::new();
        kernels::wordpiece_word(self.model(), pre_token.as_bytes(), &mut ids);
        if ids.len() == 1 && Some(ids[0]) == unk {
            return Some(vec![Token::new(
                ids[0],
                value(ids[0]),
                (0, pre_token.len()),
            )]);
        }
        // A piece after the first is its text behind the continuing prefix.
        let mut spans = Vec::with_capacity(ids.len());
        let mut at = 0;
        for (k, &id) in ids.iter().enumerate() {
            let token = value(id);
            let n = match k {
                0 => token.len(),
                _ => token.strip_prefix(prefix.as_str())?.len(),
            };
            let end = at + n;
            if n == 0 || pre_token.get(at..end)? != &token[token.len() - n..] {
                return None;
            }
            spans.push((at, end));
            at = end;
        }
        (at == pre_token.len()).then(|| named_tokens(engine, &ids, spans))
    }
}

/// The per-word families: their tokens from the engine's aligned path
/// (`engine/aligned.rs`).
impl PreTokenTokens for SpmPlan {
    fn pre_token_tokens(&self, engine: &Engine, pre_token: &str) -> Option<Vec<Token>> {
        engine.per_word_tokens(self, pre_token)
    }
}

impl PreTokenTokens for UnigramPlan {
    fn pre_token_tokens(&self, engine: &Engine, pre_token: &str) -> Option<Vec<Token>> {
        engine.per_word_tokens(self, pre_token)
    }
}

/// A WordPiece model's continuing prefix and unknown id.
fn wordpiece_of(engine: &Engine) -> Option<(String, Option<u32>)> {
    match engine.hf.get_model() {
        tokenizers::models::ModelWrapper::WordPiece(wp) => Some((
            wp.continuing_subword_prefix.clone(),
            wp.token_to_id(&wp.unk_token),
        )),
        _ => None,
    }
}

/// The bytes a byte-level pre-token stands for; None if a character is not
/// one of the 256 byte-level characters.
fn byte_level_bytes(pre_token: &str) -> Option<Vec<u8>> {
    static BYTE_OF: OnceLock<Vec<i16>> = OnceLock::new();
    let byte_of = BYTE_OF.get_or_init(|| {
        let alphabet = crate::plan::alphabet::alphabet();
        let mut table = vec![-1i16; 324];
        for (b, c) in alphabet.iter().enumerate() {
            table[*c as usize] = b as i16;
        }
        table
    });
    pre_token
        .chars()
        .map(|c| match byte_of.get(c as usize) {
            Some(&b) if b >= 0 => Some(b as u8),
            _ => None,
        })
        .collect()
}
