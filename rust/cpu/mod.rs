//! CPU backend: one sequence at a time on the engine's threads, calling the
//! host build of the shared kernel logic (`crate::kernels`): byte-level BPE
//! per word behind a per-thread word cache (`encode`), SentencePiece-style
//! BPE per word behind the same cache (`spm`), Unigram per word behind it
//! too (`unigram`), WordPiece per text (`wordpiece`).

pub mod encode;
pub mod spm;
pub mod token_spans;
pub mod unigram;
pub mod word_cache;
pub mod wordpiece;

use crate::plan::{PerWord, PlainAdded};
use encode::{char_offsets, push_added};
use token_spans::{push_spans, SpanSource};
use tokenizers::AddedVocabulary;
use word_cache::WordScratch;

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

/// A piece of a text as a per-word model sees it.
pub enum Part<'w> {
    /// An added token's id.
    Added(u32),
    /// A word to encode.
    Word(&'w str),
}

/// Takes a word and the source range of each of its bytes.
pub type AlignedWord<'a> = dyn FnMut(&str, &[(u32, u32)]) + 'a;

/// A family's part on the CPU backend, implemented in the family's module:
/// one sequence on the fast path (with per-token `offsets` or not), or None
/// when the plan or the document leaves it to the exact path. The per-word
/// families tell offsets only from the engine's token spans
/// (`engine/aligned.rs` calls their `encode` with a `SpanSource`): asked for
/// offsets here, they leave the text to the exact path.
pub trait FastEncode {
    fn encode_fast(
        &self,
        plan_id: u64,
        added: &AddedVocabulary,
        text: &str,
        offsets: bool,
    ) -> Option<Encoded>;

    /// The plan as a per-word plan ([`WordPlan`]), for the engine's aligned
    /// offsets; None for the other families.
    fn word_plan(&self) -> Option<&dyn WordPlan> {
        None
    }
}

/// What the CPU backend (and the engine's aligned offsets,
/// `engine/aligned.rs`) asks of the per-word plans (SentencePiece BPE,
/// Unigram) beyond what they share in the plan ([`PerWord`]: plain added
/// tokens, a normalizer per piece): their words, their kernel, and how their
/// tokens cover a word. Implemented in each family's module.
pub trait WordPlan: PerWord {
    /// The plan's ids of one word (its kernel); false when it cannot encode it.
    fn encode_word(&self, word: &[u8], scratch: &mut WordScratch, out: &mut Vec<u32>) -> bool;
    /// The words of one of the crate's pre-tokens.
    fn each_pre_token_word(&self, pre_token: &str, word: &mut dyn FnMut(&str));
    /// Bytes of the model's (continuing_subword_prefix, end_of_word_suffix).
    fn affixes(&self) -> (usize, usize);
    /// (byte-fallback ids, bytes of text one covers, unknown id) of the
    /// model (`token_spans`).
    fn special_ids(&self) -> (&[u32; 256], u32, u32);
    /// True when the crate names an unknown token by the text it covers.
    fn unknown_is_text(&self) -> bool;
    /// True when a word whose spans the token lengths cannot tell goes to
    /// the crate's model for them (`SpanSource::crate_word`).
    fn asks_crate_for_spans(&self) -> bool;
    /// `text` with offsets from the engine's token spans.
    fn encode_with_spans(
        &self,
        plan_id: u64,
        text: &str,
        spans: &SpanSource<'_>,
    ) -> Option<Encoded>;
    /// The words of a normalized piece that starts the original text (`first`) or not.
    fn each_word(&self, normalized: &str, first: bool, word: &mut dyn FnMut(&str));
    /// [`WordPlan::each_word`] with each word's alignments.
    fn each_word_aligned(
        &self,
        normalized: &str,
        align: &[(u32, u32)],
        first: bool,
        word: &mut AlignedWord<'_>,
    );
}

/// A piece of a text as a per-word plan normalizes it (`T`: the
/// normalizer's text, or a device's `DevicePiece`).
pub enum NormalizedPart<T> {
    /// An added token's id.
    Added(u32),
    /// The text between added tokens after the normalizer; true when it
    /// starts the original text.
    Text(T, bool),
}

/// `text` cut at plain added tokens (the crate's split), each piece between
/// them through `normalize`, in order. False when only the exact path can:
/// an added token that strips spaces or matches single words is in the text,
/// or the normalizer failed (the exact path reports it).
pub fn each_normalized_part<'t, T>(
    plan: &impl WordPlan,
    text: &'t str,
    normalize: impl Fn(&'t str) -> Option<T>,
    mut part: impl FnMut(NormalizedPart<T>),
) -> bool {
    // None: an added token that strips spaces or matches single words.
    let Some(pieces) = PlainAdded::pieces(plan.plain_added(), text) else {
        return false;
    };
    for (piece, (start, _), token) in pieces {
        if let Some((id, _)) = token {
            part(NormalizedPart::Added(id));
            continue;
        }
        let Some(normalized) = normalize(piece) else {
            return false;
        };
        part(NormalizedPart::Text(normalized, start == 0));
    }
    true
}

/// `text` as a per-word model sees it, in order: plain added tokens and the
/// words of each normalized piece between them (`each_normalized_part`, whose
/// false this returns).
pub fn each_part(plan: &impl WordPlan, text: &str, mut part: impl FnMut(Part<'_>)) -> bool {
    let normalize = |piece| plan.normalize(piece);
    each_normalized_part(plan, text, normalize, |piece| match piece {
        NormalizedPart::Added(id) => part(Part::Added(id)),
        NormalizedPart::Text(normalized, first) => {
            plan.each_word(&normalized, first, &mut |word| part(Part::Word(word)))
        }
    })
}

/// `text` with offsets on a per-word plan: `each_part`'s walk with
/// alignments (the crate's split of added tokens, each piece normalized with
/// them, its words with theirs), each word's ids through the cache and
/// `kernel`, each token's span from the token lengths (`token_spans`; a
/// word they cannot tell is the crate model's, `spans.crate_word`) mapped
/// back through its word's alignments, then to characters as the crate
/// converts them. None when only the crate can: an irregular added token, a
/// normalizer the plan cannot align.
pub fn encode_with_offsets(
    plan: &impl WordPlan,
    plan_id: u64,
    text: &str,
    source: &SpanSource<'_>,
    kernel: impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool,
) -> Option<Encoded> {
    let pieces = PlainAdded::pieces(plan.plain_added(), text)?;
    let (mut ids, mut spans, mut added) = (Vec::new(), Vec::new(), Vec::new());
    let fine = word_cache::with_cache(plan_id, |cache| {
        for (piece, (start, end), token) in pieces {
            if let Some((id, value)) = token {
                push_added(
                    &mut ids,
                    Some(&mut spans),
                    &mut added,
                    id,
                    (start, end),
                    value,
                );
                continue;
            }
            let Some((normalized, align)) = plan.normalize_aligned(piece) else {
                return false;
            };
            let mut told = true;
            plan.each_word_aligned(&normalized, &align, start == 0, &mut |word, word_align| {
                if !told {
                    return;
                }
                let mut span = |(a, b): (usize, usize)| {
                    spans.push((
                        start + word_align[a].0 as usize,
                        start + word_align[b - 1].1 as usize,
                    ))
                };
                let first = ids.len();
                if !cache.encode_word(word.as_bytes(), &mut ids, &kernel) {
                    told = false;
                } else if !push_spans(
                    &ids[first..],
                    source.lens,
                    source.affixes,
                    0,
                    word.len(),
                    &mut |_, s| span(s),
                ) {
                    // The crate's model on this word: the same ids, with their spans.
                    ids.truncate(first);
                    let tokens = source.crate_word.and_then(|crate_word| crate_word(word));
                    // Spans inside the word and not empty, as the crate's tokens are.
                    let inside = |&(_, (a, b)): &(u32, (usize, usize))| a < b && b <= word.len();
                    match tokens.filter(|tokens| tokens.iter().all(inside)) {
                        Some(tokens) => tokens.into_iter().for_each(|(id, s)| {
                            ids.push(id);
                            span(s)
                        }),
                        None => told = false,
                    }
                }
            });
            if !told {
                return false;
            }
        }
        true
    });
    fine.then(|| Encoded {
        offsets: Some(char_offsets(text, spans)),
        ids,
        added,
    })
}
