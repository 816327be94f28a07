//! Where each token of a word lies in it, from the lengths of the tokens
//! before it: a vocabulary token covers its own bytes (SentencePiece and
//! Unigram tokens are normalized text), a byte-fallback token of
//! SentencePiece-style BPE one byte, the unknown token what is left of its
//! word. The crate's Unigram gives each byte token the span of the whole
//! unknown piece it spells (its fused unknown characters): told like the
//! unknown token, one such token takes the rest (a one-byte piece), more
//! are not told. A word whose spans do not add up (two unknown tokens, or a
//! surprise) is not told: the caller takes the crate's path for it.

use std::collections::HashMap;

/// How a per-word plan tells its tokens' spans: the token lengths, and the
/// crate's model for a word they cannot tell (its tokens with their byte
/// spans in the word; None when the crate fails on it). No `crate_word` for a
/// BPE model without an unknown token: it drops unknown characters, and the
/// crate's spans then run on from the dropped character to the end of the
/// pre-token, past the word (the crate's whole pre-token is needed).
pub struct SpanSource<'a> {
    pub lens: &'a [u32],
    pub crate_word: Option<&'a CrateWord<'a>>,
}

/// The crate's model on one word: its tokens with their byte spans.
pub type CrateWord<'a> = dyn Fn(&str) -> Option<Vec<(u32, (usize, usize))>> + 'a;

/// A token length the vocabulary does not give (the unknown token's).
pub const UNKNOWN_LEN: u32 = u32::MAX;

/// Passes each of a word's ids with its byte span (the word starts at
/// `start` and is `len` bytes long); false, passing nothing, when the spans
/// do not add up to the word.
pub fn push_spans(
    ids: &[u32],
    lens: &[u32],
    start: usize,
    len: usize,
    token: &mut dyn FnMut(u32, (usize, usize)),
) -> bool {
    let len_of = |id: u32| lens.get(id as usize).copied().unwrap_or(UNKNOWN_LEN);
    let unknown = ids.iter().filter(|&&id| len_of(id) == UNKNOWN_LEN).count();
    let known: usize = ids
        .iter()
        .map(|&id| len_of(id))
        .filter(|&n| n != UNKNOWN_LEN)
        .map(|n| n as usize)
        .sum();
    let rest = match (unknown, len.checked_sub(known)) {
        (0, Some(0)) => 0,
        (1, Some(rest)) if rest > 0 => rest,
        _ => return false,
    };
    // Every token covers at least a byte (an empty vocabulary entry never
    // comes out of the models; if one did, its span could not be told).
    if ids.iter().any(|&id| len_of(id) == 0) {
        return false;
    }
    let mut at = start;
    for &id in ids {
        let n = match len_of(id) {
            UNKNOWN_LEN => rest,
            n => n as usize,
        };
        token(id, (at, at + n));
        at += n;
    }
    true
}

/// Bytes of normalized text each id covers: its token's length (from
/// `vocab`, token -> id), `byte_len` for the byte-fallback ids (1, or
/// UNKNOWN_LEN where byte tokens share their piece's span), UNKNOWN_LEN for
/// the unknown token and for ids the vocabulary does not name.
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

    fn spans(ids: &[u32], lens: &[u32], len: usize) -> Option<Vec<(u32, (usize, usize))>> {
        let mut out = Vec::new();
        push_spans(ids, lens, 10, len, &mut |id, span| out.push((id, span))).then_some(out)
    }

    #[test]
    fn spans_follow_the_token_lengths_and_the_unknown_token_takes_the_rest() {
        // ids 0: "▁a" (4 bytes), 1: a byte token, 2: unknown.
        let lens = [4, 1, UNKNOWN_LEN];
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
    fn byte_tokens_that_share_their_pieces_span_are_told_only_alone() {
        let vocab: HashMap<String, u32> = [("▁a", 0), ("<0x0A>", 1), ("<0xC3>", 2), ("<0xA9>", 3)]
            .into_iter()
            .map(|(t, id)| (t.to_string(), id))
            .collect();
        let mut byte_ids = [crate::kernels::NONE; 256];
        (byte_ids[0x0A], byte_ids[0xC3], byte_ids[0xA9]) = (1, 2, 3);
        let bpe = token_lens(&vocab, &byte_ids, 1, crate::kernels::NONE);
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
