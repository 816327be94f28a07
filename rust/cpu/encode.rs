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
        let mut spans = offsets.then(|| Vec::with_capacity(ids.capacity()));
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
        let offsets = spans.map(|spans| char_offsets(text, spans));
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
/// or past the end convert as the crate's converter does (`convert`). In an
/// ASCII text a byte is a character: spans within it are their offsets.
pub(crate) fn char_offsets(text: &str, mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let len = text.len();
    if text.is_ascii() {
        // Every span ending within an ASCII text converts to itself (`convert`).
        if spans.iter().all(|&(_, end)| end <= len) {
            return spans;
        }
    } else if in_order(&spans, len) {
        // Tokens in order (nearly always): the characters counted as they come.
        let mut chars = CharCursor::new(text.as_bytes());
        for span in &mut spans {
            *span = (chars.at(span.0), chars.at(span.1 - 1) + 1);
        }
        return spans;
    }
    let chars = CharsOfBytes::new(text);
    for span in &mut spans {
        let (start, end) = *span;
        *span = match (chars.at(start), end > start && end <= len) {
            (Some(first), true) => (first, chars.at(end - 1).map_or(first, |c| c + 1)),
            _ => chars.convert((start, end)),
        };
    }
    spans
}

/// True when every span holds a byte of a text of `len` bytes and the
/// bytes asked for in turn (each span's first, then its last) never go
/// back: what `CharCursor` converts.
fn in_order(spans: &[(usize, usize)], len: usize) -> bool {
    let mut last = 0;
    spans.iter().all(|&(start, end)| {
        let fine = last <= start && start < end && end <= len;
        last = end.wrapping_sub(1);
        fine
    })
}

/// The character index of byte after byte of a text (its own index less
/// the UTF-8 continuation bytes up to it), counted as it goes, eight bytes
/// at a time; the bytes asked for must not go back.
struct CharCursor<'t> {
    bytes: &'t [u8],
    /// Bytes counted: `[0, next)`.
    next: usize,
    /// Continuation bytes in `[0, next)`.
    continuations: usize,
}

impl<'t> CharCursor<'t> {
    fn new(bytes: &'t [u8]) -> Self {
        CharCursor {
            bytes,
            next: 0,
            continuations: 0,
        }
    }

    /// The index of the character holding byte `at` (in the text, and not
    /// before the last byte asked for).
    fn at(&mut self, at: usize) -> usize {
        while self.next <= at {
            let n = (at + 1 - self.next).min(8);
            let word = match self.bytes.get(self.next..self.next + 8) {
                Some(eight) => u64::from_le_bytes(eight.try_into().expect("8 bytes")),
                None => {
                    // The text's last bytes, then zeros (not continuation bytes).
                    let mut word = [0u8; 8];
                    let rest = &self.bytes[self.next..];
                    word[..rest.len()].copy_from_slice(rest);
                    u64::from_le_bytes(word)
                }
            };
            // Bit 7 of each continuation byte (0b10xx_xxxx) of the first `n`.
            let high = word & !(word << 1) & 0x8080_8080_8080_8080 & (u64::MAX >> (64 - 8 * n));
            // One bit per byte, summed into the top byte.
            self.continuations += ((high >> 7).wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize;
            self.next += n;
        }
        at - self.continuations
    }
}

/// Byte offsets -> character offsets exactly as the crate converts them
/// (`BytesToCharOffsetConverter`): the characters holding each edge (an end
/// at the text's end: after the last character); offsets that start at or
/// past the end are left as they are.
pub(crate) fn crate_char_offsets(text: &str, spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let chars = CharsOfBytes::new(text);
    spans.iter().map(|&span| chars.convert(span)).collect()
}

/// The character index of each byte of a text, told from one bit per byte
/// (set on UTF-8 continuation bytes) and the count of those bits before
/// each block of 64 bytes: a byte's index is its own less the continuation
/// bytes up to it. A twelfth of the text's size, built in one pass (a map
/// of one index per byte was 8 times the text, filled a character at a time).
struct CharsOfBytes {
    /// (continuation bits of bytes 64k..64k+64, continuation bytes before 64k).
    blocks: Vec<(u64, usize)>,
    len: usize,
}

impl CharsOfBytes {
    fn new(text: &str) -> Self {
        let bytes = text.as_bytes();
        let mut blocks = Vec::with_capacity(bytes.len().div_ceil(64));
        let mut before = 0;
        for chunk in bytes.chunks(64) {
            let mut bits = 0u64;
            for (i, &b) in chunk.iter().enumerate() {
                // 0b10xx_xxxx: a continuation byte.
                bits |= u64::from((b as i8) < -0x40) << i;
            }
            blocks.push((bits, before));
            before += bits.count_ones() as usize;
        }
        CharsOfBytes {
            blocks,
            len: bytes.len(),
        }
    }

    fn at(&self, byte: usize) -> Option<usize> {
        if byte >= self.len {
            return None;
        }
        let (bits, before) = self.blocks[byte / 64];
        let up_to = bits & (u64::MAX >> (63 - byte % 64));
        Some(byte - before - up_to.count_ones() as usize)
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
    /// `found(start, end)` for each word; with `cut`, runs of CJK characters
    /// the steps made come in the pieces that merge on their own
    /// (`kernels::chain_pieces`: for words the byte-level kernel merges,
    /// never for words that are given or that get a space before each).
    fn each(self, plan: &ByteLevelPlan, cut: bool, found: &mut impl FnMut(usize, usize)) {
        match (self.words, &plan.chain, plan.char_pairs()) {
            (Some(words), ..) => words.iter().for_each(|&(start, end)| found(start, end)),
            (None, Some(chain), Some(pairs)) if cut && kernels::has_cjk(self.text.as_bytes()) => {
                kernels::chain_pieces(chain, (plan.model(), &pairs), self.text, found)
            }
            (None, ..) => each_word(plan, self.text, found),
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
    // Each word's token spans, when wanted: a word of one token (most) is
    // its span; the others' tokens cover their lengths in turn.
    let mut spans_of = spans.map(|spans| {
        spans.reserve(text.len() / 3 + 1);
        move |(start, end): (usize, usize), word_ids: &[u32]| match (word_ids, align) {
            ([_], None) => spans.push((base + start, base + end)),
            _ => {
                let lens = word_ids.iter().map(|&id| plan.token_len(id));
                push_spans(spans, base, align, start, lens);
            }
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
        piece.each(plan, true, &mut found);
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
        piece.each(plan, false, &mut encode);
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

#[cfg(test)]
mod tests {
    use super::*;

    type Offsets = Vec<(usize, usize)>;

    /// (`char_offsets`, `crate_char_offsets`) through a map of each byte's
    /// character (what `CharsOfBytes` was), for every span.
    fn by_map(text: &str, spans: &[(usize, usize)]) -> (Offsets, Offsets) {
        let mut char_of_byte = vec![0usize; text.len()];
        for (index, (at, c)) in text.char_indices().enumerate() {
            char_of_byte[at..at + c.len_utf8()].fill(index);
        }
        let at = |byte: usize| char_of_byte.get(byte).copied();
        let convert = |(start, end): (usize, usize)| match (at(start), at(end)) {
            (Some(first), Some(last)) => (first, last),
            (Some(first), None) => {
                let last = end.checked_sub(1).and_then(at).unwrap_or(first + 1);
                (first, last + 1)
            }
            _ => (start, end),
        };
        let widened = spans
            .iter()
            .map(
                |&(start, end)| match (at(start), end > start && end <= text.len()) {
                    (Some(first), true) => (first, at(end - 1).map_or(first, |c| c + 1)),
                    _ => convert((start, end)),
                },
            )
            .collect();
        (widened, spans.iter().map(|&span| convert(span)).collect())
    }

    #[test]
    fn char_offsets_from_continuation_bits_are_the_maps() {
        let long: String = "aé✓😀 ".repeat(40);
        let texts = [
            "plain ascii text",
            "héllo wörld ✓ 😀 end",
            "😀😀",
            "",
            "é",
            &long,
        ];
        for text in texts {
            let len = text.len();
            // Tokens one after the other (of 1..=3 bytes, edges inside
            // characters included), overlapping ones, out of order, empty,
            // and past the end.
            let mut cases: Vec<Vec<(usize, usize)>> = Vec::new();
            for step in 1..=3 {
                cases.push(
                    (0..len)
                        .step_by(step)
                        .map(|s| (s, (s + step).min(len)))
                        .collect(),
                );
            }
            cases.push(vec![(0, len.min(2)), (len.min(1), len)]);
            cases.push(vec![(len.min(3), len), (0, len.min(2))]);
            cases.push(vec![
                (0, 0),
                (len, len),
                (len, len + 2),
                (len.min(1), len + 3),
            ]);
            cases.push(vec![(len.saturating_sub(1), len + 1), (len + 4, len + 5)]);
            for spans in cases {
                let (widened, converted) = by_map(text, &spans);
                assert_eq!(
                    char_offsets(text, spans.clone()),
                    widened,
                    "{text:?} {spans:?}"
                );
                assert_eq!(
                    crate_char_offsets(text, &spans),
                    converted,
                    "{text:?} {spans:?}"
                );
            }
        }
    }
}
