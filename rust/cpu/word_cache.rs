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
//! words' ids go straight into the caller's output in their order (a hit's
//! up to three ids in one 16-byte store; the others into holes filled once
//! they are known: [`WordCache::finish`]). Other families, and byte-level plans
//! that read characters (affixes, byte fallback, an unknown token), give
//! words one at a time ([`WordCache::encode_word`]).

use super::{Encoded, Part};
use crate::kernels::{Scratch, UnigramScratch};
use crate::short_words::{packed, packed_at, Lookup, ShortWords};
use rustc_hash::FxHashMap;
use std::cell::{RefCell, RefMut};

/// Words longer than this are not cached (rare, and they would crowd the
/// cache). Long enough for code's identifier chains and the whitespace-free
/// runs a Unigram tokenizer's words can be, which do repeat.
const MAX_CACHED_WORD: usize = 256;
/// Whether a word of more than 15 bytes is kept in the cache: not over
/// MAX_CACHED_WORD bytes.
fn long_word_cached(word: &[u8]) -> bool {
    word.len() <= MAX_CACHED_WORD
}

/// `long_word_cached` for the byte-level engine's chunks, which also leave
/// out a run of CJK characters (`kernels::cjk_led`): it seldom comes again
/// (a hash, an insert and a key's allocation for every one cost more than
/// the rare hit saves), and the pieces it is cut into are cached instead
/// (`kernels::chain_pieces`).
fn chunk_word_cached(word: &[u8]) -> bool {
    long_word_cached(word) && !crate::kernels::cjk_led(word)
}

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
    /// The words whose ids the first pass could not write, in order.
    holes: Vec<Hole>,
    /// The length of the output after each word's first pass (only when
    /// the caller wants each word's ids).
    ends: Vec<usize>,
    /// Ids of holes the vocabulary table or a later look at the cache
    /// answered (`Found::Hit`).
    hits: Vec<u32>,
    /// The words (spans) the kernel encodes, by miss number, and the word of each.
    miss_spans: Vec<(usize, usize)>,
    miss_words: Vec<usize>,
    miss_ids: Vec<u32>,
    miss_counts: Vec<u32>,
    miss_starts: Vec<u32>,
}

/// A word of the chunk (its number) whose ids go at `at` of the output.
struct Hole {
    word: u32,
    at: usize,
    found: Found,
}

impl Hole {
    fn new(word: usize, at: usize, found: Found) -> Self {
        Hole {
            word: word as u32,
            at,
            found,
        }
    }
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

/// Called with each word's span in the text and its ids, in order (for
/// the token spans of offsets).
pub type EachWord<'e> = dyn FnMut((usize, usize), &[u32]) + 'e;

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
            None if long_word_cached(word) => {
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
        out: &mut Vec<u32>,
        each: Option<&mut EachWord<'_>>,
    ) {
        let key = packed_at(text, start, end).unwrap_or(0);
        if key != 0 {
            self.short.prefetch(key);
        }
        self.chunk.words.push((start, end, key));
        if self.chunk.words.len() == CHUNK {
            self.finish(text, vocab, kernel, out, each);
        }
    }

    /// Encodes the words taken since the last chunk: appends their ids to
    /// `out` in order, and calls `each((start, end), ids)` for each word when
    /// given. A word the cache lacks is looked up in `vocab` (a word of up
    /// to 15 bytes in it has the ids it holds), else encoded by `kernel`
    /// with the chunk's other new words.
    ///
    /// The words the cache holds (nearly all) have their ids written
    /// straight into `out` as they are looked up; the others leave a hole
    /// there, filled once they are known by one pass that moves each run
    /// of hits between two holes once.
    pub fn finish(
        &mut self,
        text: &[u8],
        vocab: Option<&ShortWords>,
        kernel: &BatchKernel<'_>,
        out: &mut Vec<u32>,
        each: Option<&mut EachWord<'_>>,
    ) {
        let mut chunk = std::mem::take(&mut self.chunk);
        chunk.holes.clear();
        chunk.hits.clear();
        chunk.miss_spans.clear();
        chunk.miss_words.clear();
        chunk.ends.clear();
        let want_ends = each.is_some();
        let base = out.len();
        // What the cache knows (each short word's line was asked for when
        // it came). Room for 4 ids a word, as a hit writes them, is made
        // once, and again after a word whose ids may be longer.
        let words = chunk.words.len();
        out.reserve(4 * words);
        for (i, &(start, end, key)) in chunk.words.iter().enumerate() {
            if key != 0 {
                let (ids, hit) = self.short.line_ids(key);
                if hit {
                    let at = out.len();
                    debug_assert!(ids[3] <= 3, "an inline entry holds at most 3 ids");
                    debug_assert!(out.capacity() - at >= 4);
                    // SAFETY: `out` has room for 4 more ids (reserved for
                    // every word from this one on); the first `ids[3]` (at
                    // most 3) written are the word's ids, the rest lie past
                    // the new length.
                    unsafe {
                        out.as_mut_ptr()
                            .add(at)
                            .cast::<[u32; 4]>()
                            .write_unaligned(ids);
                        out.set_len(at + ids[3] as usize);
                    }
                } else {
                    let found = match self.short.lookup(key) {
                        Lookup::Ids(ids) => {
                            out.extend_from_slice(ids);
                            out.reserve(4 * (words - i));
                            None
                        }
                        Lookup::Pending(miss) => Some(Found::Miss(miss)),
                        Lookup::Absent => {
                            if let Some(vocab) = vocab {
                                vocab.prefetch(key);
                            }
                            Some(Found::Vocab)
                        }
                    };
                    if let Some(found) = found {
                        chunk.holes.push(Hole::new(i, out.len(), found));
                    }
                }
            } else {
                let word = &text[start..end];
                let cached = chunk_word_cached(word);
                let found = match cached.then(|| self.words.get(word)).flatten() {
                    Some(&(at, len)) if len != PENDING => {
                        out.extend_from_slice(&self.ids[at as usize..(at + len) as usize]);
                        out.reserve(4 * (words - i));
                        None
                    }
                    Some(&(miss, _)) => Some(Found::Miss(miss)),
                    None => {
                        let miss = chunk.miss_spans.len() as u32;
                        chunk.miss_spans.push((start, end));
                        chunk.miss_words.push(i);
                        if cached && self.words.len() < MAX_LONG_ENTRIES {
                            self.words.insert(word.into(), (miss, PENDING));
                            self.long_bytes += word.len();
                        }
                        Some(Found::Miss(miss))
                    }
                };
                if let Some(found) = found {
                    chunk.holes.push(Hole::new(i, out.len(), found));
                }
            }
            if want_ends {
                chunk.ends.push(out.len());
            }
        }
        // The vocabulary table (its lines were asked for above), then the
        // cache again: an earlier word of this pass may be the same.
        for h in 0..chunk.holes.len() {
            if !matches!(chunk.holes[h].found, Found::Vocab) {
                continue;
            }
            let i = chunk.holes[h].word as usize;
            let (start, end, key) = chunk.words[i];
            if let Some(Lookup::Ids(ids)) = vocab.map(|v| v.lookup(key)) {
                chunk.holes[h].found = hit(&mut chunk.hits, ids);
                self.make_room(ids.len());
                self.short.insert(key, ids);
                continue;
            }
            chunk.holes[h].found = match self.short.lookup(key) {
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
            let word = &text[start..end];
            if key != 0 || chunk_word_cached(word) {
                self.keep((key != 0).then_some(key), word, ids);
            }
            at += count;
        }
        chunk.fill_holes(out);
        if let Some(each) = each {
            chunk.each_word(out, base, each);
        }
        chunk.words.clear();
        self.chunk = chunk;
    }
}

impl Chunk {
    /// The ids of the word a hole is for (once every word is looked up).
    fn hole_ids(&self, found: Found) -> &[u32] {
        match found {
            Found::Hit(at, len) => &self.hits[at as usize..(at + len) as usize],
            Found::Miss(miss) => {
                let at = self.miss_starts[miss as usize] as usize;
                &self.miss_ids[at..at + self.miss_counts[miss as usize] as usize]
            }
            Found::Vocab => unreachable!("every word was looked up"),
        }
    }

    /// Puts each hole's ids into `out` at its place, from the last hole
    /// back, moving the hits after it up by the ids still to come before.
    fn fill_holes(&self, out: &mut Vec<u32>) {
        let extra: usize = self
            .holes
            .iter()
            .map(|h| self.hole_ids(h.found).len())
            .sum();
        let (mut read_end, mut write_end) = (out.len(), out.len() + extra);
        out.resize(write_end, 0);
        for hole in self.holes.iter().rev() {
            let at = hole.at;
            let after = read_end - at;
            out.copy_within(at..read_end, write_end - after);
            let ids = self.hole_ids(hole.found);
            write_end -= after + ids.len();
            out[write_end..write_end + ids.len()].copy_from_slice(ids);
            read_end = at;
        }
        debug_assert_eq!(read_end, write_end);
    }

    /// Calls `each((start, end), ids)` for the chunk's words in order, their ids
    /// in `out` from `base` (after `fill_holes`).
    fn each_word(&self, out: &[u32], base: usize, each: &mut EachWord<'_>) {
        // A word's ids: what it wrote in the first pass (`ends`, nothing for
        // a hole), then its hole's.
        let (mut written, mut at) = (base, base);
        let mut holes = self.holes.iter().peekable();
        for (i, (&(start, word_end, _), &end)) in self.words.iter().zip(&self.ends).enumerate() {
            let mut len = end - written;
            written = end;
            if let Some(hole) = holes.next_if(|h| h.word as usize == i) {
                len += self.hole_ids(hole.found).len();
            }
            each((start, word_end), &out[at..at + len]);
            at += len;
        }
    }
}

/// Copies a hole's ids into the chunk's `hits` (the cache may start over
/// before the chunk's holes are filled).
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

    /// The ids the fake kernel gives a word: 1 to 6 of them (inline and
    /// spilled entries), from the word's bytes.
    fn fake_ids(word: &[u8]) -> Vec<u32> {
        let h = word
            .iter()
            .fold(17u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        (0..h % 6 + 1).map(|k| h.wrapping_add(k)).collect()
    }

    /// Encodes `words` (spans of `text`) in calls of `per_call` words
    /// through `cache` as the byte-level engine does; checks the ids and
    /// each word's ids against the fake kernel's.
    fn encode_and_check(
        cache: &mut WordCache,
        text: &[u8],
        words: &[(usize, usize)],
        vocab: &ShortWords,
        per_call: usize,
    ) {
        let kernel = |text: &[u8],
                      spans: &[(usize, usize)],
                      _: &mut WordScratch,
                      out: &mut Vec<u32>,
                      counts: &mut Vec<u32>| {
            for &(start, end) in spans {
                let ids = fake_ids(&text[start..end]);
                out.extend_from_slice(&ids);
                counts.push(ids.len() as u32);
            }
        };
        // Every other call without `each` (ids only, as without offsets).
        for (n, call) in words.chunks(per_call).enumerate() {
            let with_each = n % 2 == 0;
            let mut out = vec![7];
            let mut seen = Vec::new();
            let mut record =
                |(start, _): (usize, usize), ids: &[u32]| seen.push((start, ids.to_vec()));
            for &span in call {
                let each = with_each.then_some(&mut record as &mut EachWord<'_>);
                cache.push_word(text, span, Some(vocab), &kernel, &mut out, each);
            }
            let each = with_each.then_some(&mut record as &mut EachWord<'_>);
            cache.finish(text, Some(vocab), &kernel, &mut out, each);
            let expected: Vec<(usize, Vec<u32>)> = call
                .iter()
                .map(|&(s, e)| (s, fake_ids(&text[s..e])))
                .collect();
            if with_each {
                assert_eq!(seen, expected);
            }
            let flat: Vec<u32> = std::iter::once(7)
                .chain(expected.into_iter().flat_map(|(_, ids)| ids))
                .collect();
            assert_eq!(out, flat);
        }
    }

    #[test]
    fn chunks_give_every_words_ids_in_order_through_hits_holes_and_evictions() {
        // Words of every length around the short table's limit (15 / 16
        // bytes) and the longest cached (256 / 257), repeated (hits, and a
        // word again within its own chunk while pending), then enough new
        // short and long words to fill both tables so the cache starts over
        // mid-chunk.
        let mut text = Vec::new();
        let mut words = Vec::new();
        let mut add = |word: &[u8], text: &mut Vec<u8>| {
            words.push((text.len(), text.len() + word.len()));
            text.extend_from_slice(word);
        };
        for round in 0..3 {
            for n in [1, 2, 3, 4, 7, 8, 9, 14, 15, 16, 17, 31, 255, 256, 257, 300] {
                for c in [b'a', b'b', b'\xff'] {
                    add(&vec![c; n], &mut text);
                    add(&vec![c; n], &mut text);
                }
            }
            // Long words led by a CJK character, which are not cached.
            for n in [6, 7, 30, 86] {
                let run = "\u{5b57}".repeat(n);
                add(run.as_bytes(), &mut text);
                add(run.as_bytes(), &mut text);
            }
            if round == 1 {
                for i in 0..150_000u32 {
                    add(format!("w{i}").as_bytes(), &mut text);
                }
                for i in 0..70_000u32 {
                    add(format!("a long word, number {i:>8}").as_bytes(), &mut text);
                }
            }
        }
        let vocab_words: Vec<(Vec<u8>, Vec<u32>)> =
            [&b"a"[..], b"bb", b"w1", b"w12345", b"bbbbbbbbbbbbbbb"]
                .iter()
                .map(|w| (w.to_vec(), fake_ids(w)))
                .collect();
        let vocab = ShortWords::of(
            vocab_words
                .iter()
                .map(|(w, ids)| (w.as_slice(), ids.as_slice())),
        );
        for per_call in [1, 5, CHUNK - 1, CHUNK, CHUNK + 1, 10_000] {
            let mut cache = WordCache::default();
            encode_and_check(&mut cache, &text, &words, &vocab, per_call);
            // Again: now mostly hits.
            encode_and_check(&mut cache, &text, &words, &vocab, per_call);
            assert!(!cache
                .words
                .keys()
                .any(|w| w.starts_with("\u{5b57}".as_bytes())));
        }
    }
}
