//! Per-thread word cache around the shared per-word kernels.
//!
//! Real text repeats its words: most pre-tokens were seen before, so a hit
//! skips the merge loop entirely. The cache is per thread (no lock, no sharing;
//! `tokenizers` PR #2028 measured +62% from that on 88 threads) and tagged with
//! the plan it belongs to, so two tokenizers never mix entries.
//!
//! Words of up to 15 bytes (nearly all) are kept in a [`ShortWords`] table,
//! longer ones in a map. On text seen once a tenth of the words are new, and
//! each lookup of an 8 MB table, and each table read of a new word's merge
//! loop, is a trip to memory; so the byte-level engine (a plan with a token
//! for every byte) gives its words a chunk at a time ([`WordCache::push_word`]): the cache line of each word
//! is asked for as the word is found, the words the cache lacks are looked
//! up in the plan's vocabulary table (`vocab`: every short token, with the
//! ids the kernel gives it), and those still unknown go to a kernel that
//! encodes them all side by side, which overlaps their table reads. The
//! words come out in their order. Other families, and byte-level plans
//! that read characters (affixes, byte fallback, an unknown token), give
//! words one at a time ([`WordCache::encode_word`]).

use super::encode::Encoded;
use super::Part;
use crate::kernels::{Scratch, UnigramScratch};
use crate::short_words::{packed, Lookup, ShortWords};
use rustc_hash::FxHashMap;
use std::cell::{RefCell, RefMut};

/// Words longer than this are not cached (rare, and they would crowd the
/// cache). Long enough for code's identifier chains and the whitespace-free
/// runs a Unigram tokenizer's words can be, which do repeat.
const MAX_CACHED_WORD: usize = 256;
/// Slots of the short-word table when a thread's cache starts, and at most
/// (8 MB): it doubles while half full, and starts over when full at the most.
const FIRST_SLOTS: usize = 1 << 12;
const MAX_SLOTS: usize = 1 << 18;
/// Entries of words over 15 bytes kept before the cache starts over.
const MAX_LONG_ENTRIES: usize = 1 << 16;
/// Bytes of cached words over 15 bytes and of ids kept outside the short
/// table's entries before the cache starts over: bounds a thread's cache at
/// a few tens of MB.
const MAX_BYTES: usize = 16 << 20;
/// Words encoded together by [`WordCache::push_word`].
const CHUNK: usize = 256;
/// A long word's entry whose ids are not known yet (its length field).
const PENDING: u32 = u32::MAX;

/// Cached word -> ids, plus the kernels' scratch and a chunk's buffers.
pub struct WordCache {
    plan_id: u64,
    short: ShortWords,
    /// Words of 16..=MAX_CACHED_WORD bytes -> (start, len) in `ids`, or
    /// (the chunk's number for it, PENDING).
    words: FxHashMap<Box<[u8]>, (u32, u32)>,
    /// Bytes of the keys in `words`.
    long_bytes: usize,
    /// Ids of the long words.
    ids: Vec<u32>,
    scratch: WordScratch,
    chunk: Chunk,
}

impl Default for WordCache {
    fn default() -> Self {
        WordCache {
            plan_id: 0,
            short: ShortWords::with_slots(FIRST_SLOTS),
            words: FxHashMap::default(),
            long_bytes: 0,
            ids: Vec::new(),
            scratch: WordScratch::default(),
            chunk: Chunk::default(),
        }
    }
}

/// The per-word kernels' scratch, one per family of kernel.
#[derive(Default)]
pub struct WordScratch {
    pub bpe: Scratch,
    pub unigram: UnigramScratch,
}

/// The words of a chunk and what is known of them.
#[derive(Default)]
struct Chunk {
    /// (start, end, packed key or 0) of each word in the text.
    words: Vec<(usize, usize, u128)>,
    /// Where each word's ids are: `hits` (start, len), or the miss numbered.
    found: Vec<Found>,
    hits: Vec<u32>,
    /// The words (spans) the kernel encodes, by miss number, and the word of each.
    miss_spans: Vec<(usize, usize)>,
    miss_words: Vec<usize>,
    miss_ids: Vec<u32>,
    miss_counts: Vec<u32>,
    miss_starts: Vec<u32>,
}

#[derive(Clone, Copy)]
enum Found {
    Hit(u32, u32),
    Miss(u32),
    /// Not in the cache: the vocabulary table may have it.
    Vocab,
}

/// Encodes the words (spans of a text) a chunk's cache and vocabulary table
/// do not know: appends each one's ids to `ids` and their count to `counts`.
/// It must encode every word.
pub type BatchKernel<'k> =
    dyn Fn(&[u8], &[(usize, usize)], &mut WordScratch, &mut Vec<u32>, &mut Vec<u32>) + 'k;

/// The ids of a text a per-word model sees as parts (`each_part` gives
/// added-token ids and words, false when only the exact path can encode the
/// text), each word through this thread's cache (for plan `plan_id`) and
/// `kernel` (ids only); None when the text or a word needs the exact path.
pub fn encode_parts(
    plan_id: u64,
    capacity: usize,
    each_part: impl FnOnce(&mut dyn FnMut(Part<'_>)) -> bool,
    kernel: impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool,
) -> Option<Encoded> {
    let mut ids = Vec::with_capacity(capacity);
    let mut words_fine = true;
    let text_fine = with_cache(plan_id, |cache| {
        each_part(&mut |part| match part {
            Part::Added(id) => ids.push(id),
            Part::Word(word) => words_fine &= cache.encode_word(word.as_bytes(), &mut ids, &kernel),
        })
    });
    (text_fine && words_fine).then_some(Encoded {
        ids,
        offsets: None,
        added: Vec::new(),
    })
}

thread_local! {
    static CACHE: RefCell<WordCache> = RefCell::new(WordCache::default());
}

/// Runs `f` with this thread's cache, emptied first if it belonged to another plan.
pub fn with_cache<R>(plan_id: u64, f: impl FnOnce(&mut WordCache) -> R) -> R {
    CACHE.with(|cell| {
        let mut cache = ResetOnPanic(cell.borrow_mut());
        if cache.0.plan_id != plan_id {
            cache.0.clear();
            cache.0.plan_id = plan_id;
        }
        f(&mut cache.0)
    })
}

/// A panic inside a call (caught at the Python edge) can leave words marked
/// pending or half pushed; the thread's next call must not read them, so the
/// cache starts over.
struct ResetOnPanic<'a>(RefMut<'a, WordCache>);

impl Drop for ResetOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *self.0 = WordCache::default();
        }
    }
}

impl WordCache {
    fn clear(&mut self) {
        self.short.clear();
        self.words.clear();
        self.long_bytes = 0;
        self.ids.clear();
    }

    /// Room for one more short word: the table doubles, or at its largest
    /// (or over the byte budget) the cache starts over.
    fn make_room(&mut self, spilled: usize) {
        if 4 * (self.short.spilled() + spilled + self.ids.len()) + self.long_bytes >= MAX_BYTES {
            self.clear();
        }
        if self.short.is_full() {
            match self.short.slots() < MAX_SLOTS {
                true => self.short.grow(),
                false => self.clear(),
            }
        }
    }

    /// Keeps the ids of a word: short (`key`) or long (`word`; not cached
    /// over MAX_CACHED_WORD bytes).
    fn keep(&mut self, key: Option<u128>, word: &[u8], ids: &[u32]) {
        match key {
            Some(key) => {
                self.make_room(ids.len());
                self.short.insert(key, ids);
            }
            None if word.len() <= MAX_CACHED_WORD => {
                if self.words.len() >= MAX_LONG_ENTRIES
                    || self.long_bytes + 4 * (self.ids.len() + ids.len()) + word.len() >= MAX_BYTES
                {
                    self.clear();
                }
                let entry = (self.ids.len() as u32, ids.len() as u32);
                self.ids.extend_from_slice(ids);
                if self.words.insert(word.into(), entry).is_none() {
                    self.long_bytes += word.len();
                }
            }
            None => {}
        }
    }

    /// Appends the ids of `word` to `out`: cached, else from `kernel` (a
    /// per-word kernel such as `kernels::bpe_word`, the same for every call
    /// with this cache's plan). False when the kernel could not encode the
    /// word (it appended nothing; nothing is cached).
    pub fn encode_word(
        &mut self,
        word: &[u8],
        out: &mut Vec<u32>,
        kernel: impl Fn(&[u8], &mut WordScratch, &mut Vec<u32>) -> bool,
    ) -> bool {
        let key = packed(word);
        match key {
            Some(key) => {
                if let Lookup::Ids(ids) = self.short.lookup(key) {
                    out.extend_from_slice(ids);
                    return true;
                }
            }
            None => match self.words.get(word) {
                Some(&(start, len)) if len != PENDING => {
                    out.extend_from_slice(&self.ids[start as usize..(start + len) as usize]);
                    return true;
                }
                _ => {}
            },
        }
        let at = out.len();
        if !kernel(word, &mut self.scratch, out) {
            return false;
        }
        self.keep(key, word, &out[at..]);
        true
    }

    /// Takes the next word `text[start..end)` of a text (non-empty) whose
    /// words come in order, and asks for its cache line; every CHUNK words,
    /// encodes them (`finish`'s arguments).
    pub fn push_word(
        &mut self,
        text: &[u8],
        (start, end): (usize, usize),
        vocab: Option<&ShortWords>,
        kernel: &BatchKernel<'_>,
        emit: &mut dyn FnMut(usize, &[u32]),
    ) {
        let key = packed(&text[start..end]).unwrap_or(0);
        if key != 0 {
            self.short.prefetch(key);
        }
        self.chunk.words.push((start, end, key));
        if self.chunk.words.len() == CHUNK {
            self.finish(text, vocab, kernel, emit);
        }
    }

    /// Encodes the words taken since the last chunk: `emit(start, ids)` for
    /// each, in order. A word the cache lacks is looked up in `vocab` (a
    /// word of up to 15 bytes in it has the ids it holds), else encoded by
    /// `kernel` with the chunk's other new words.
    pub fn finish(
        &mut self,
        text: &[u8],
        vocab: Option<&ShortWords>,
        kernel: &BatchKernel<'_>,
        emit: &mut dyn FnMut(usize, &[u32]),
    ) {
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.found.clear();
        chunk.hits.clear();
        chunk.miss_spans.clear();
        chunk.miss_words.clear();
        // What the cache knows (each short word's line was asked for when it came).
        for (i, &(start, end, key)) in chunk.words.iter().enumerate() {
            let found = if key != 0 {
                match self.short.lookup(key) {
                    Lookup::Ids(ids) => hit(&mut chunk.hits, ids),
                    Lookup::Pending(miss) => Found::Miss(miss),
                    Lookup::Absent => {
                        if let Some(vocab) = vocab {
                            vocab.prefetch(key);
                        }
                        Found::Vocab
                    }
                }
            } else {
                let word = &text[start..end];
                match self.words.get(word) {
                    Some(&(at, len)) if len != PENDING => {
                        hit(&mut chunk.hits, &self.ids[at as usize..(at + len) as usize])
                    }
                    Some(&(miss, _)) => Found::Miss(miss),
                    None => {
                        let miss = chunk.miss_spans.len() as u32;
                        chunk.miss_spans.push((start, end));
                        chunk.miss_words.push(i);
                        if word.len() <= MAX_CACHED_WORD && self.words.len() < MAX_LONG_ENTRIES {
                            self.words.insert(word.into(), (miss, PENDING));
                            self.long_bytes += word.len();
                        }
                        Found::Miss(miss)
                    }
                }
            };
            chunk.found.push(found);
        }
        // The vocabulary table (its lines were asked for above), then the
        // cache again: an earlier word of this pass may be the same.
        for i in 0..chunk.words.len() {
            if !matches!(chunk.found[i], Found::Vocab) {
                continue;
            }
            let (start, end, key) = chunk.words[i];
            if let Some(Lookup::Ids(ids)) = vocab.map(|v| v.lookup(key)) {
                chunk.found[i] = hit(&mut chunk.hits, ids);
                self.make_room(ids.len());
                self.short.insert(key, ids);
                continue;
            }
            chunk.found[i] = match self.short.lookup(key) {
                Lookup::Pending(miss) => Found::Miss(miss),
                Lookup::Ids(ids) => hit(&mut chunk.hits, ids),
                Lookup::Absent => {
                    let miss = chunk.miss_spans.len() as u32;
                    chunk.miss_spans.push((start, end));
                    chunk.miss_words.push(i);
                    self.make_room(0);
                    self.short.mark_pending(key, miss);
                    Found::Miss(miss)
                }
            };
        }
        // The new words, together; then into the cache.
        chunk.miss_ids.clear();
        chunk.miss_counts.clear();
        if !chunk.miss_spans.is_empty() {
            kernel(
                text,
                &chunk.miss_spans,
                &mut self.scratch,
                &mut chunk.miss_ids,
                &mut chunk.miss_counts,
            );
        }
        assert_eq!(
            chunk.miss_counts.len(),
            chunk.miss_spans.len(),
            "the batch kernel encodes every word"
        );
        chunk.miss_starts.clear();
        let mut at = 0;
        for (miss, &count) in chunk.miss_counts.iter().enumerate() {
            chunk.miss_starts.push(at);
            let (start, end) = chunk.miss_spans[miss];
            let key = chunk.words[chunk.miss_words[miss]].2;
            let ids = &chunk.miss_ids[at as usize..(at + count) as usize];
            self.keep((key != 0).then_some(key), &text[start..end], ids);
            at += count;
        }
        // In order.
        for (&(start, _, _), &found) in chunk.words.iter().zip(&chunk.found) {
            let ids = match found {
                Found::Hit(at, len) => &chunk.hits[at as usize..(at + len) as usize],
                Found::Miss(miss) => {
                    let at = chunk.miss_starts[miss as usize] as usize;
                    &chunk.miss_ids[at..at + chunk.miss_counts[miss as usize] as usize]
                }
                Found::Vocab => unreachable!("every word was looked up"),
            };
            emit(start, ids);
        }
        chunk.words.clear();
        self.chunk = chunk;
    }
}

/// Copies a hit's ids into the chunk's `hits` (the cache may start over
/// before the chunk is emitted).
fn hit(hits: &mut Vec<u32>, ids: &[u32]) -> Found {
    let at = hits.len() as u32;
    hits.extend_from_slice(ids);
    Found::Hit(at, ids.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_a_call_leaves_the_next_call_an_empty_cache() {
        let caught = std::panic::catch_unwind(|| {
            with_cache(7, |cache| {
                cache.ids.push(42);
                cache
                    .words
                    .insert(b"a word of twenty bytes".to_vec().into(), (0, 0));
                panic!("a kernel failed mid-call");
            })
        });
        assert!(caught.is_err());
        with_cache(7, |cache| {
            assert!(cache.ids.is_empty() && cache.words.is_empty());
        });
    }
}
