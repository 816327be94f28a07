//! One sequence of a byte-level BPE tokenizer on the CPU: split out added
//! tokens, normalize, split into words with the plan's scanners, then BPE
//! each word through the per-thread cache and the shared kernel.
//!
//! Added tokens (chat templates: `<|im_start|>`, `<think>`...) are found by
//! the crate's own `AddedVocabulary` (its Aho-Corasick, longest match,
//! `single_word`, `lstrip`, `rstrip`, `normalized`), so the segments are
//! exactly the crate's; the text between them goes through the fast engine.

use super::word_cache::{self, WordScratch};
use crate::kernels;
use crate::plan::bytelevel::{Behavior, ByteLevelPlan, SplitStep};
use crate::plan::Piece;
use std::borrow::Cow;
use tokenizers::{AddedVocabulary, NormalizerWrapper, OffsetReferential, OffsetType};

/// One sequence on the fast path: its ids and, when asked for, each token's
/// offsets in characters of `text` (as the crate reports them before its
/// post-processor: a token that ends or starts inside a multi-byte character
/// covers the whole character).
pub struct Encoded {
    pub ids: Vec<u32>,
    pub offsets: Option<Vec<(usize, usize)>>,
    /// With offsets: (position in `ids`, text) of each added token: its token
    /// string is the text of its split (spaces taken by lstrip/rstrip included).
    pub added: Vec<(usize, String)>,
}

/// `text` on the fast path, or None if only the exact path can encode it:
/// text the normalizer would change around an added token (the crate matches
/// normalized added tokens after normalizing, which the fast path does not
/// redo), or offsets of text the normalizer or a prefix space changes.
pub fn encode(
    plan: &ByteLevelPlan,
    plan_id: u64,
    added: &AddedVocabulary,
    text: &str,
    offsets: bool,
) -> Option<Encoded> {
    let mut ids = Vec::with_capacity(text.len() / 3 + 1);
    // Byte spans in `text` of each token, when offsets are wanted.
    let mut spans = offsets.then(Vec::new);
    let mut added_tokens = Vec::new();
    if offsets && plan.prefix_space {
        return None;
    }
    if !plan.has_added_token(text) {
        let normalized = plan.prepare(text)?;
        if offsets && matches!(normalized, Cow::Owned(_)) {
            return None;
        }
        encode_text(plan, plan_id, &normalized, 0, &mut ids, spans.as_mut());
    } else {
        let fine = each_segment(plan, added, text, |segment, span| match segment {
            Segment::Added(id, value) => {
                push_added(&mut ids, spans.as_mut(), &mut added_tokens, id, span, value)
            }
            Segment::Text(piece) => {
                encode_text(plan, plan_id, &piece, span.0, &mut ids, spans.as_mut())
            }
        });
        if !fine {
            return None;
        }
    }
    let offsets = spans.map(|spans| char_offsets(text, &spans));
    Some(Encoded {
        ids,
        offsets,
        added: added_tokens,
    })
}

/// A stretch of a text that holds added tokens, as the fast engine takes it.
pub enum Segment<'s> {
    /// Text between added tokens, ready for the pre-tokenizer (with the
    /// plan's prefix space).
    Text(Cow<'s, str>),
    /// An added token's id and its text.
    Added(u32, &'s str),
}

/// The crate's split of `text` at its added tokens, in order, each segment
/// with its byte span in `text` (what the CPU encoder and the device rows
/// share); false when only the exact path can encode it.
pub fn each_segment(
    plan: &ByteLevelPlan,
    added: &AddedVocabulary,
    text: &str,
    mut segment: impl FnMut(Segment<'_>, (usize, usize)),
) -> bool {
    // Without a normalizer the crate's split is the one it makes with it,
    // as long as the text, and every piece between added tokens, is
    // already normalized (checked: the crate normalizes the pieces it
    // matches in).
    if matches!(plan.normalize(text), Cow::Owned(_)) {
        return false;
    }
    let crate_split;
    let splits: Vec<Piece<'_>> = match &plan.plain_added {
        Some(plain) => match plain.split(text) {
            Some(splits) => splits,
            None => return false,
        },
        None => {
            crate_split = added.extract_and_normalize(None::<&NormalizerWrapper>, text);
            let splits = crate_split.get_splits(OffsetReferential::Original, OffsetType::Byte);
            splits
                .into_iter()
                .map(|(piece, offsets, tokens)| {
                    let token = tokens.as_ref().and_then(|t| t.first());
                    (piece, offsets, token.map(|t| (t.id, t.value.as_str())))
                })
                .collect()
        }
    };
    for (piece, span, token) in splits {
        match token {
            Some((id, value)) => segment(Segment::Added(id, value), span),
            None if matches!(plan.normalize(piece), Cow::Borrowed(_)) => {
                let piece = plan.with_prefix_space(Cow::Borrowed(piece));
                segment(Segment::Text(piece), span)
            }
            None => return false,
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
/// the whole character.
pub(crate) fn char_offsets(text: &str, spans: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut char_of_byte = vec![0usize; text.len()];
    for (index, (at, c)) in text.char_indices().enumerate() {
        char_of_byte[at..at + c.len_utf8()].fill(index);
    }
    let char_at = |byte: usize| {
        char_of_byte
            .get(byte)
            .copied()
            .unwrap_or_else(|| text.chars().count())
    };
    spans
        .iter()
        .map(|&(start, end)| match end > start {
            true => (char_of_byte[start], char_of_byte[end - 1] + 1),
            false => (char_at(start), char_at(start)),
        })
        .collect()
}

/// Appends the ids of normalized `text`, free of added tokens, to `ids`; with
/// `spans`, each token's byte span, `text` starting at byte `base`.
fn encode_text(
    plan: &ByteLevelPlan,
    plan_id: u64,
    text: &str,
    base: usize,
    ids: &mut Vec<u32>,
    mut spans: Option<&mut Vec<(usize, usize)>>,
) {
    let bytes = text.as_bytes();
    ids.reserve(text.len() / 3 + 1);
    // Words the cache and the vocabulary table lack, a chunk's together;
    // the table holds every token of up to 15 bytes, so only longer words
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
    let mut emit = |start: usize, word_ids: &[u32]| {
        ids.extend_from_slice(word_ids);
        if let Some(spans) = spans.as_deref_mut() {
            let mut at = base + start;
            for &id in word_ids {
                let len = plan.token_len(id);
                spans.push((at, at + len));
                at += len;
            }
        }
    };
    word_cache::with_cache(plan_id, |cache| {
        let vocab = Some(plan.short_vocab());
        let mut found = |start: usize, end: usize| {
            cache.push_word(bytes, (start, end), vocab, &kernel, &mut emit)
        };
        match &plan.scanner_chain {
            // Every step a scanner: the shared kernel logic splits (as on the GPU).
            Some(chain) => kernels::split_words(chain, text, &mut found),
            None => for_each_word(&plan.splits, text, &mut |word: &str| {
                // `word` is a slice of `text`: its position is the pointer difference.
                let start = word.as_ptr() as usize - text.as_ptr() as usize;
                found(start, start + word.len())
            }),
        }
        cache.finish(bytes, vocab, &kernel, &mut emit);
    });
}

/// Calls `emit` with each non-empty word (for chains with a regex step or
/// another behaviour; all-scanner chains use `gt_split_words`, the same
/// rule): the pieces of `text` after every Split step (Isolated: each match
/// and each gap between matches is a piece; others: `behaved_pieces`), in
/// order, as the crate's `PreTokenizedString::split` produces them.
fn for_each_word(splits: &[SplitStep], text: &str, emit: &mut impl FnMut(&str)) {
    let Some((step, rest)) = splits.split_first() else {
        if !text.is_empty() {
            emit(text);
        }
        return;
    };
    if let SplitStep::Behaved {
        matcher,
        behavior,
        invert,
    } = step
    {
        for (start, end) in behaved_pieces(matcher, *behavior, *invert, text) {
            for_each_word(rest, &text[start..end], emit);
        }
        return;
    }
    let mut prev = 0;
    let mut piece = |start: usize, end: usize, prev: &mut usize| {
        if *prev != start {
            for_each_word(rest, &text[*prev..start], emit);
        }
        for_each_word(rest, &text[start..end], emit);
        *prev = end;
    };
    match step {
        SplitStep::Scanner(pattern) => {
            while let Some((start, end)) = kernels::find(*pattern, text, prev) {
                piece(start, end, &mut prev);
            }
        }
        SplitStep::Regex(regex) => {
            for (start, end) in regex.find_iter(text) {
                piece(start, end, &mut prev);
            }
        }
        SplitStep::Behaved { .. } => unreachable!("handled above"),
    }
    if prev != text.len() {
        for_each_word(rest, &text[prev..], emit);
    }
}

/// The pieces (byte ranges) a Split step of any behaviour makes of `text`,
/// as the crate's `NormalizedString::split` makes them: the matcher's
/// matches and the gaps between them in order (`find_matches`), each flag
/// flipped when `invert`, then merged or dropped per `behavior`.
pub(crate) fn behaved_pieces(
    matcher: &SplitStep,
    behavior: Behavior,
    invert: bool,
    text: &str,
) -> Vec<(usize, usize)> {
    let mut matches: Vec<((usize, usize), bool)> = Vec::new();
    let mut prev = 0;
    let mut found = |start: usize, end: usize| {
        if prev != start {
            matches.push(((prev, start), invert));
        }
        matches.push(((start, end), !invert));
        prev = end;
    };
    match matcher {
        SplitStep::Scanner(pattern) => {
            let mut at = 0;
            while let Some((start, end)) = kernels::find(*pattern, text, at) {
                found(start, end);
                at = end;
            }
        }
        SplitStep::Regex(regex) => regex.find_iter(text).for_each(|(s, e)| found(s, e)),
        SplitStep::Behaved { .. } => {}
    }
    if prev != text.len() || text.is_empty() {
        matches.push(((prev, text.len()), invert));
    }
    // (range, drop it)
    let mut pieces: Vec<((usize, usize), bool)> = Vec::with_capacity(matches.len());
    let mut previous_match = false;
    match behavior {
        Behavior::Isolated => pieces.extend(matches.iter().map(|&(range, _)| (range, false))),
        Behavior::Removed => pieces = matches,
        Behavior::Contiguous | Behavior::MergedWithPrevious => {
            for (range, is_match) in matches {
                let merge = match behavior {
                    Behavior::Contiguous => is_match == previous_match,
                    _ => is_match && !previous_match,
                };
                match pieces.last_mut() {
                    Some(((_, end), _)) if merge => *end = range.1,
                    _ => pieces.push((range, false)),
                }
                previous_match = is_match;
            }
        }
        Behavior::MergedWithNext => {
            for (range, is_match) in matches.into_iter().rev() {
                match pieces.last_mut() {
                    Some(((start, _), _)) if is_match && !previous_match => *start = range.0,
                    _ => pieces.push((range, false)),
                }
                previous_match = is_match;
            }
            pieces.reverse();
        }
    }
    pieces
        .into_iter()
        .filter(|&((start, end), drop)| !drop && end > start)
        .map(|(range, _)| range)
        .collect()
}
