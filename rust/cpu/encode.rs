//! One sequence of a byte-level BPE tokenizer on the CPU: split out added
//! tokens, normalize, split into words with the plan's scanners, then BPE
//! each word through the per-thread cache and the shared kernel.
//!
//! Added tokens (chat templates: `<|im_start|>`, `<think>`...) are found by
//! `PlainAdded` or the crate's own `AddedVocabulary` (its Aho-Corasick,
//! longest match, `single_word`, `lstrip`, `rstrip`), so the segments are
//! exactly the crate's; the text between them is normalized piece by piece,
//! as the crate does, and goes through the fast engine.

use super::word_cache::{self, WordScratch};
use super::{Encoded, FastEncode};
use crate::kernels;
use crate::plan::bytelevel::{ByteLevelPlan, Matcher, SplitStep};
use crate::plan::normalize::Aligns;
use crate::plan::Piece;
use std::borrow::Cow;
use tokenizers::{AddedVocabulary, NormalizerWrapper, OffsetReferential, OffsetType};

/// `text` on the fast path, or None if only the exact path can encode it:
/// a piece whose normalized text holds an added token the crate matches
/// after normalizing, a normalizer that fails, or offsets the token lengths
/// cannot tell (`ByteLevelPlan::token_lens`).
impl FastEncode for ByteLevelPlan {
    fn encode_fast(
        &self,
        plan_id: u64,
        added: &AddedVocabulary,
        text: &str,
        offsets: bool,
    ) -> Option<Encoded> {
        let plan = self;
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        // Byte spans in `text` of each token, when offsets are wanted.
        let mut spans = offsets.then(Vec::new);
        let mut added_tokens = Vec::new();
        let mut fine = true;
        let split = each_segment(plan, added, text, |segment, span| match segment {
            Segment::Added(id, value) => {
                push_added(&mut ids, spans.as_mut(), &mut added_tokens, id, span, value)
            }
            Segment::Text(piece, raw) if fine => {
                let aligned = match (&spans, &piece) {
                    (None, _) | (_, Cow::Borrowed(_)) => None,
                    (Some(_), Cow::Owned(_)) => match aligned_piece(plan, raw) {
                        Some(aligned) => Some(aligned),
                        None => {
                            fine = false;
                            return;
                        }
                    },
                };
                let (text, align) = match &aligned {
                    Some((text, align)) => (text.as_str(), Some(align.as_slice())),
                    None => (piece.as_ref(), None),
                };
                fine = encode_text(plan, plan_id, text, span.0, align, &mut ids, spans.as_mut());
            }
            Segment::Text(..) => {}
        });
        if !(split && fine) {
            return None;
        }
        let offsets = spans.map(|spans| char_offsets(text, &spans));
        Some(Encoded {
            ids,
            offsets,
            added: added_tokens,
        })
    }
}

/// A piece between added tokens as the pre-tokenizer sees it (normalized,
/// with the prefix space), with the source of each byte in the piece.
fn aligned_piece(plan: &ByteLevelPlan, piece: &str) -> Option<(String, Aligns)> {
    let (mut text, mut align) = plan.normalizer.normalize_aligned(piece)?;
    if plan.prefix_space && !text.is_empty() && !text.starts_with(' ') {
        // `NormalizedString::prepend`: the space takes the first character's source.
        text.insert(0, ' ');
        align.insert(0, align[0]);
    }
    Some((text, align))
}

/// A stretch of a text that holds added tokens, as the fast engine takes it.
pub enum Segment<'s> {
    /// Text between added tokens, ready for the pre-tokenizer (normalized,
    /// with the plan's prefix space), and the text it was.
    Text(Cow<'s, str>, &'s str),
    /// An added token's id and its text.
    Added(u32, &'s str),
}

/// The crate's split of `text` at its added tokens, in order, each segment
/// with its byte span in `text` (what the CPU encoder and the device rows
/// share); false when only the exact path can encode it.
pub fn each_segment<'s>(
    plan: &ByteLevelPlan,
    added: &AddedVocabulary,
    text: &'s str,
    mut segment: impl FnMut(Segment<'s>, (usize, usize)),
) -> bool {
    let crate_split;
    let splits: Vec<Piece<'s>> = match &plan.plain_added {
        _ if !plan.has_added_token(text) => vec![(text, (0, text.len()), None)],
        Some(plain) => match plain.split(text) {
            Some(splits) => splits,
            None => return false,
        },
        None => {
            // The crate's split of the raw text, the one it makes before
            // normalizing, as long as no token it matches is one it would
            // match only after normalizing (without a normalizer, such
            // tokens are matched in the raw pieces, as here: DeepSeek-V3).
            crate_split = added.extract_and_normalize(None::<&NormalizerWrapper>, text);
            let splits = crate_split.get_splits(OffsetReferential::Original, OffsetType::Byte);
            let decoder = added.get_added_tokens_decoder();
            let normalized_apart = !plan.normalizer.is_identity();
            let mut pieces = Vec::with_capacity(splits.len());
            for (_, (start, end), tokens) in splits {
                let token = tokens.as_ref().and_then(|t| t.first());
                let apart = |t: &tokenizers::Token| {
                    decoder
                        .get(&t.id)
                        .is_none_or(|a| a.normalized && normalized_apart)
                };
                if token.is_some_and(apart) {
                    return false;
                }
                let piece = &text[start..end];
                pieces.push((piece, (start, end), token.map(|t| (t.id, piece))));
            }
            pieces
        }
    };
    for (piece, span, token) in splits {
        match token {
            // The crate's token string is the text it matched (spaces taken by
            // lstrip / rstrip included).
            Some((id, value)) => segment(Segment::Added(id, value), span),
            None => match plan.normalize(piece) {
                Some(normalized) => {
                    let normalized = plan.with_prefix_space(normalized);
                    segment(Segment::Text(normalized, piece), span)
                }
                None => return false,
            },
        }
    }
    true
}

/// Appends an added token found in the text: its id and, when spans are
/// kept, its byte span and its text (its token string: spaces taken by
/// lstrip / rstrip included).
pub(super) fn push_added(
    ids: &mut Vec<u32>,
    spans: Option<&mut Vec<(usize, usize)>>,
    added: &mut Vec<(usize, String)>,
    id: u32,
    span: (usize, usize),
    text: &str,
) {
    if let Some(spans) = spans {
        spans.push(span);
        added.push((ids.len(), text.to_string()));
    }
    ids.push(id);
}

/// Byte spans -> character offsets; a span edge inside a character widens to
/// the whole character (the fast paths' spans of byte-level tokens, which the
/// crate aligns to whole characters before converting). Spans that start at
/// or past the end convert as the crate's converter does (`convert`).
pub(crate) fn char_offsets(text: &str, spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let chars = CharsOfBytes::new(text);
    spans
        .iter()
        .map(
            |&(start, end)| match (chars.at(start), end > start && end <= text.len()) {
                (Some(first), true) => (first, chars.at(end - 1).map_or(first, |c| c + 1)),
                _ => chars.convert((start, end)),
            },
        )
        .collect()
}

/// Byte offsets -> character offsets exactly as the crate converts them
/// (`BytesToCharOffsetConverter`): the characters holding each edge (an end
/// at the text's end: after the last character); offsets that start at or
/// past the end are left as they are.
pub(crate) fn crate_char_offsets(text: &str, spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let chars = CharsOfBytes::new(text);
    spans.iter().map(|&span| chars.convert(span)).collect()
}

/// The character index of each byte of a text.
struct CharsOfBytes(Vec<usize>);

impl CharsOfBytes {
    fn new(text: &str) -> Self {
        let mut char_of_byte = vec![0usize; text.len()];
        for (index, (at, c)) in text.char_indices().enumerate() {
            char_of_byte[at..at + c.len_utf8()].fill(index);
        }
        CharsOfBytes(char_of_byte)
    }

    fn at(&self, byte: usize) -> Option<usize> {
        self.0.get(byte).copied()
    }

    /// The crate's `BytesToCharOffsetConverter::convert`, its fallback to the
    /// byte offsets included.
    fn convert(&self, (start, end): (usize, usize)) -> (usize, usize) {
        match (self.at(start), self.at(end)) {
            (Some(first), Some(last)) => (first, last),
            (Some(first), None) => {
                let last = end
                    .checked_sub(1)
                    .and_then(|b| self.at(b))
                    .unwrap_or(first + 1);
                (first, last + 1)
            }
            _ => (start, end),
        }
    }
}

/// Appends the ids of normalized `text`, free of added tokens, to `ids`; with
/// `spans`, each token's byte span in the original text: `text` is the piece
/// at byte `base` of it, each byte from its source in the piece (`align`;
/// none: itself). False when the token lengths cannot tell the spans (the
/// exact path), or a word is too long for the kernel.
fn encode_text(
    plan: &ByteLevelPlan,
    plan_id: u64,
    text: &str,
    base: usize,
    align: Option<&[(u32, u32)]>,
    ids: &mut Vec<u32>,
    spans: Option<&mut Vec<(usize, usize)>>,
) -> bool {
    let spaced;
    let (piece, align) = match plan.word_prefix_space {
        true => {
            spaced = spaced_words(plan, text, align, spans.is_some());
            let piece = Words {
                text: &spaced.0,
                words: Some(&spaced.2),
            };
            (piece, spaced.1.as_deref())
        }
        false => (Words { text, words: None }, align),
    };
    match plan.one_token_per_byte() {
        true => encode_words_batched(plan, plan_id, piece, base, align, ids, spans),
        false => encode_words_one_by_one(plan, plan_id, piece, base, align, ids, spans),
    }
}

/// A piece's text and its words: the plan's steps split it (None), or
/// they are given (byte ranges in order).
#[derive(Clone, Copy)]
struct Words<'t> {
    text: &'t str,
    words: Option<&'t [(usize, usize)]>,
}

impl Words<'_> {
    fn each(self, plan: &ByteLevelPlan, found: &mut impl FnMut(usize, usize)) {
        match self.words {
            Some(words) => words.iter().for_each(|&(start, end)| found(start, end)),
            None => each_word(plan, self.text, found),
        }
    }
}

/// `ByteLevel(add_prefix_space=true)` closing the Sequence: the words of
/// `text` after the steps, each after a space unless it starts with one
/// (the crate's `prepend`: the space takes the first character's source),
/// written out one after the other; with `spans`, each byte's source
/// (`align`, or itself); and the words' ranges in the text written.
fn spaced_words(
    plan: &ByteLevelPlan,
    text: &str,
    align: Option<&[(u32, u32)]>,
    spans: bool,
) -> (String, Option<Aligns>, Vec<(usize, usize)>) {
    let mut spaced = String::with_capacity(text.len() + text.len() / 4 + 1);
    let mut spaced_align = spans.then(|| Vec::with_capacity(spaced.capacity()));
    let source = |at: usize| match align {
        Some(align) => align[at],
        None => (at as u32, at as u32 + 1),
    };
    let mut words = Vec::new();
    each_word(plan, text, &mut |start, end| {
        let at = spaced.len();
        let word = &text[start..end];
        if !word.starts_with(' ') {
            spaced.push(' ');
            if let Some(out) = spaced_align.as_mut() {
                out.push(source(start));
            }
        }
        spaced.push_str(word);
        if let Some(out) = spaced_align.as_mut() {
            out.extend((start..end).map(source));
        }
        words.push((at, spaced.len()));
    });
    (spaced, spaced_align, words)
}

/// `encode_text` for a model with a token for every byte (`gt_bpe_word`):
/// the words a chunk's cache and the plan's vocabulary table lack are
/// encoded together (`kernels::bpe_words`). Always true.
fn encode_words_batched(
    plan: &ByteLevelPlan,
    plan_id: u64,
    piece: Words<'_>,
    base: usize,
    align: Option<&[(u32, u32)]>,
    ids: &mut Vec<u32>,
    spans: Option<&mut Vec<(usize, usize)>>,
) -> bool {
    let text = piece.text;
    let bytes = text.as_bytes();
    ids.reserve(text.len() / 3 + 1);
    // The table holds every token of up to 15 bytes, so only longer words
    // may still be one (ignore_merges).
    let kernel = |text: &[u8],
                  words: &[(usize, usize)],
                  s: &mut WordScratch,
                  out: &mut Vec<u32>,
                  counts: &mut Vec<u32>| {
        let whole_from = crate::short_words::MAX_BYTES + 1;
        kernels::bpe_words(
            plan.word_model(),
            whole_from,
            text,
            words,
            &mut s.bpe,
            out,
            counts,
        )
    };
    // Each word's token spans, when wanted.
    let mut spans_of = spans.map(|spans| {
        move |start: usize, word_ids: &[u32]| {
            let lens = word_ids.iter().map(|&id| plan.token_len(id));
            push_spans(spans, base, align, start, lens);
        }
    });
    word_cache::with_cache(plan_id, |cache| {
        let vocab = Some(plan.short_vocab());
        let mut found = |start: usize, end: usize| {
            let each = spans_of
                .as_mut()
                .map(|f| f as &mut word_cache::EachWord<'_>);
            cache.push_word(bytes, (start, end), vocab, &kernel, ids, each)
        };
        piece.each(plan, &mut found);
        let each = spans_of
            .as_mut()
            .map(|f| f as &mut word_cache::EachWord<'_>);
        cache.finish(bytes, vocab, &kernel, ids, each);
    });
    true
}

/// `encode_text` for a model that reads characters (affixes, byte fallback,
/// the unknown token): each word through the cache and `plan.encode_word`.
fn encode_words_one_by_one(
    plan: &ByteLevelPlan,
    plan_id: u64,
    piece: Words<'_>,
    base: usize,
    align: Option<&[(u32, u32)]>,
    ids: &mut Vec<u32>,
    mut spans: Option<&mut Vec<(usize, usize)>>,
) -> bool {
    let text = piece.text;
    let mut fine = true;
    word_cache::with_cache(plan_id, |cache| {
        let mut encode = |start: usize, end: usize| {
            let first = ids.len();
            let word = &text.as_bytes()[start..end];
            fine &= cache.encode_word(word, ids, |w, s, o| plan.encode_word(w, &mut s.bpe, o));
            let Some(spans) = spans.as_deref_mut() else {
                return;
            };
            match plan.token_lens(&ids[first..], end - start) {
                Some(lens) => push_spans(spans, base, align, start, lens.into_iter()),
                None => fine = false,
            }
        };
        piece.each(plan, &mut encode);
    });
    fine
}

/// Calls `emit(start, end)` with each word of `text` after `splits` (the
/// Rust path of `for_each_word`, whatever the steps).
pub fn split_words(splits: &[SplitStep], text: &str, emit: &mut dyn FnMut(usize, usize)) {
    for_each_word(splits, text, &mut |word: &str| {
        let start = word.as_ptr() as usize - text.as_ptr() as usize;
        emit(start, start + word.len())
    });
}

/// Calls `found(start, end)` with each word of `text` in order, split by
/// the plan's steps.
fn each_word(plan: &ByteLevelPlan, text: &str, found: &mut impl FnMut(usize, usize)) {
    match &plan.chain {
        // No step needs Oniguruma: the shared kernel logic splits (as on the GPU).
        Some(chain) => kernels::chain_words(chain, text, found),
        None => for_each_word(&plan.splits, text, &mut |word: &str| {
            // `word` is a slice of `text`: its position is the pointer difference.
            let start = word.as_ptr() as usize - text.as_ptr() as usize;
            found(start, start + word.len())
        }),
    }
}

/// Appends the byte span in the original text of each token of a word at
/// byte `start` of a piece, the tokens covering `lens` bytes of it in turn:
/// the piece is at byte `base` of the text, each of its bytes from its
/// source (`align`; none: itself).
fn push_spans(
    spans: &mut Vec<(usize, usize)>,
    base: usize,
    align: Option<&[(u32, u32)]>,
    start: usize,
    lens: impl Iterator<Item = usize>,
) {
    let mut at = start;
    for len in lens {
        spans.push(match align {
            Some(align) => (
                base + align[at].0 as usize,
                base + align[at + len - 1].1 as usize,
            ),
            None => (base + at, base + at + len),
        });
        at += len;
    }
}

/// Calls `emit` with each non-empty word (for chains with an Oniguruma step,
/// or longer than the kernels' chain; the others use `gt_chain_words`, the
/// same rule): the pieces of `text` after every Split step
/// (`behaved_pieces`), in order, as the crate's `PreTokenizedString::split`
/// produces them.
fn for_each_word(splits: &[SplitStep], text: &str, emit: &mut impl FnMut(&str)) {
    let Some((step, rest)) = splits.split_first() else {
        if !text.is_empty() {
            emit(text);
        }
        return;
    };
    for (start, end) in behaved_pieces(step, text) {
        for_each_word(rest, &text[start..end], emit);
    }
}

/// The pieces (byte ranges, empty ones dropped) a Split step makes of
/// `text`, as the crate's `NormalizedString::split` makes them: the
/// matcher's matches and the gaps between them in order (`find_matches`),
/// then the step's behaviour (`kernels::behave`, the kernels' own rule).
pub(crate) fn behaved_pieces(step: &SplitStep, text: &str) -> Vec<(usize, usize)> {
    let mut ranges: Vec<(usize, usize, bool)> = Vec::new();
    let kernel = step.kernel_step();
    match (&step.matcher, &kernel) {
        (Matcher::Oniguruma(regex, _), _) => {
            let mut prev = 0;
            for (start, end) in regex.find_iter(text) {
                if prev != start {
                    ranges.push((prev, start, false));
                }
                ranges.push((start, end, true));
                prev = end;
            }
            if prev != text.len() {
                ranges.push((prev, text.len(), false));
            }
        }
        (_, Some(kernel)) => kernels::step_ranges(kernel, text, &mut |start, end, is_match| {
            ranges.push((start, end, is_match))
        }),
        (_, None) => unreachable!("only Oniguruma steps have no kernel step"),
    }
    kernels::behave(step.behavior_code(), &ranges)
}
