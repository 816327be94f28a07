//! Where each token of a word lies in it, from the lengths of the tokens
//! before it: a vocabulary token covers its own bytes (SentencePiece and
//! Unigram tokens are normalized text) less the BPE affixes it carries (the
//! `continuing_subword_prefix` on every token after a word's first, the
//! `end_of_word_suffix` on its last: the crate's `merge_word` looks each
//! character up with them), a byte-fallback token of SentencePiece-style BPE
//! one byte, the unknown token what is left of its word. The crate's Unigram
//! gives each byte token the span of the whole unknown piece it spells (its
//! fused unknown characters): told like the unknown token, one such token
//! takes the rest (a one-byte piece), more are not told. A word whose spans
//! do not add up (two unknown tokens, or a surprise) is not told: the caller
//! takes the crate's path for it.

use std::collections::HashMap;

/// How a per-word plan tells its tokens' spans: the token lengths, and the
/// crate's model for a word they cannot tell (its tokens with their byte
/// spans in the word; None when the crate fails on it). No `crate_word` for a
/// BPE model without an unknown token: it drops unknown characters, and the
/// crate's spans then run on from the dropped character to the end of the
/// pre-token, past the word (the crate's whole pre-token is needed).
pub struct SpanSource<'a> {
    pub lens: &'a [u32],
    /// Bytes of the model's (prefix, suffix) (see the module comment).
    pub affixes: (usize, usize),
    pub crate_word: Option<&'a CrateWord<'a>>,
}

/// The crate's model on one word: its tokens with their byte spans.
pub type CrateWord<'a> = dyn Fn(&str) -> Option<Vec<(u32, (usize, usize))>> + 'a;

/// A token length the vocabulary does not give (the unknown token's).
pub const UNKNOWN_LEN: u32 = u32::MAX;
/// A byte-fallback token's length: one byte, never with an affix.
pub const BYTE_LEN: u32 = u32::MAX - 1;

/// Passes each of a word's ids with its byte span (the word starts at
/// `start` and is `len` bytes long; `affixes`: the model's (prefix, suffix)
/// bytes); false, passing nothing, when the spans do not add up to the word.
pub fn push_spans(
    ids: &[u32],
    lens: &[u32],
    (prefix, suffix): (usize, usize),
    start: usize,
    len: usize,
    token: &mut dyn FnMut(u32, (usize, usize)),
) -> bool {
    let last = ids.len().wrapping_sub(1);
    // Bytes of the word each token covers (None: the unknown token's rest);
    // an affix it should carry and cannot: not told.
    let covered = |(i, &id): (usize, &u32)| -> Option<Option<usize>> {
        match lens.get(id as usize).copied().unwrap_or(UNKNOWN_LEN) {
            UNKNOWN_LEN => Some(None),
            BYTE_LEN => Some(Some(1)),
            n => {
                let prefixed = if i > 0 { prefix } else { 0 };
                let suffixed = if i == last { suffix } else { 0 };
                (n as usize).checked_sub(prefixed + suffixed).map(Some)
            }
        }
    };
    let Some(covers) = ids
        .iter()
        .enumerate()
        .map(covered)
        .collect::<Option<Vec<_>>>()
    else {
        return false;
    };
    let unknown = covers.iter().filter(|n| n.is_none()).count();
    let known: usize = covers.iter().flatten().sum();
    let rest = match (unknown, len.checked_sub(known)) {
        (0, Some(0)) => 0,
        (1, Some(rest)) if rest > 0 => rest,
        _ => return false,
    };
    // Every token covers at least a byte (an empty vocabulary entry never
    // comes out of the models; if one did, its span could not be told).
    if covers.contains(&Some(0)) {
        return false;
    }
    let mut at = start;
    for (&id, n) in ids.iter().zip(covers) {
        let n = n.unwrap_or(rest);
        token(id, (at, at + n));
        at += n;
    }
    true
}

/// Bytes of normalized text each id covers: its token's length (from
/// `vocab`, token -> id, affixes included), `byte_len` for the byte-fallback
/// ids (BYTE_LEN, or UNKNOWN_LEN where byte tokens share their piece's span),
/// UNKNOWN_LEN for the unknown token and for ids the vocabulary does not name.
pub fn token_lens(
    vocab: &HashMap<String, u32>,
    byte_ids: &[u32; 256],
    byte_len: u32,
    unk_id: u32,
) -> Vec<u32> {
    let size = vocab.values().max().map_or(0, |&m| m as usize + 1);
    let mut lens = vec![UNKNOWN_LEN; size];
    for (token, &id) in vocab {
        lens[id as usize] = token.len() as u32;
    }
    for &id in byte_ids {
        if let Some(len) = lens.get_mut(id as usize) {
            *len = byte_len;
        }
    }
    if let Some(len) = lens.get_mut(unk_id as usize) {
        *len = UNKNOWN_LEN;
    }
    lens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn affixed(
        ids: &[u32],
        lens: &[u32],
        affixes: (usize, usize),
        len: usize,
    ) -> Option<Vec<(u32, (usize, usize))>> {
        let mut out = Vec::new();
        push_spans(ids, lens, affixes, 10, len, &mut |id, span| {
            out.push((id, span))
        })
        .then_some(out)
    }

    fn spans(ids: &[u32], lens: &[u32], len: usize) -> Option<Vec<(u32, (usize, usize))>> {
        affixed(ids, lens, (0, 0), len)
    }

    #[test]
    fn spans_follow_the_token_lengths_and_the_unknown_token_takes_the_rest() {
        // ids 0: "▁a" (4 bytes), 1: a byte token, 2: unknown.
        let lens = [4, BYTE_LEN, UNKNOWN_LEN];
        assert_eq!(
            spans(&[0, 1], &lens, 5),
            Some(vec![(0, (10, 14)), (1, (14, 15))])
        );
        assert_eq!(
            spans(&[0, 2, 0], &lens, 11),
            Some(vec![(0, (10, 14)), (2, (14, 17)), (0, (17, 21))])
        );
        // Spans that do not add up, or two unknown tokens: not told.
        assert_eq!(spans(&[0, 1], &lens, 6), None);
        assert_eq!(spans(&[2, 2], &lens, 6), None);
        assert_eq!(spans(&[0, 2], &lens, 4), None);
        // A token of no bytes cannot be told.
        assert_eq!(spans(&[0, 3], &[4, 1, UNKNOWN_LEN, 0], 4), None);
        // An id the table does not name is told like the unknown token.
        assert_eq!(spans(&[7], &lens, 4), Some(vec![(7, (10, 14))]));
    }

    #[test]
    fn affixes_are_not_text_of_the_word() {
        // "a" (1), "@@b" (3), "c</w>" (5), "@@c</w>" (7), a byte token, unknown;
        // prefix "@@" (2 bytes), suffix "</w>" (4).
        let lens = [1, 3, 5, 7, BYTE_LEN, UNKNOWN_LEN];
        let affixes = (2, 4);
        // "a" "@@b" "@@c</w>" over "abc".
        assert_eq!(
            affixed(&[0, 1, 3], &lens, affixes, 3),
            Some(vec![(0, (10, 11)), (1, (11, 12)), (3, (12, 13))])
        );
        // "a", the unknown token (3 bytes), "@@b" last would need the suffix: not told.
        assert_eq!(affixed(&[0, 5, 1], &lens, affixes, 5), None);
        // "a", the unknown token, "@@c</w>": the unknown token gets 3 bytes, not 9.
        assert_eq!(
            affixed(&[0, 5, 3], &lens, affixes, 5),
            Some(vec![(0, (10, 11)), (5, (11, 14)), (3, (14, 15))])
        );
        // Byte tokens carry no affix, even last.
        assert_eq!(
            affixed(&[0, 4], &lens, affixes, 2),
            Some(vec![(0, (10, 11)), (4, (11, 12))])
        );
    }

    #[test]
    fn byte_tokens_that_share_their_pieces_span_are_told_only_alone() {
        let vocab: HashMap<String, u32> = [("▁a", 0), ("<0x0A>", 1), ("<0xC3>", 2), ("<0xA9>", 3)]
            .into_iter()
            .map(|(t, id)| (t.to_string(), id))
            .collect();
        let mut byte_ids = [crate::kernels::NONE; 256];
        (byte_ids[0x0A], byte_ids[0xC3], byte_ids[0xA9]) = (1, 2, 3);
        let bpe = token_lens(&vocab, &byte_ids, BYTE_LEN, crate::kernels::NONE);
        let unigram = token_lens(&vocab, &byte_ids, UNKNOWN_LEN, crate::kernels::NONE);
        // "▁a" + "é" (two byte tokens): one byte each in BPE; the crate's Unigram gives
        // both the span of "é", which lengths cannot tell.
        assert_eq!(
            spans(&[0, 2, 3], &bpe, 6),
            Some(vec![(0, (10, 14)), (2, (14, 15)), (3, (15, 16))])
        );
        assert_eq!(spans(&[0, 2, 3], &unigram, 6), None);
        // One byte token alone spells a one-byte piece: told either way.
        assert_eq!(
            spans(&[0, 1], &unigram, 5),
            Some(vec![(0, (10, 14)), (1, (14, 15))])
        );
    }
}
