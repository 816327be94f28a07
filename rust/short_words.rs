//! A table from words of up to 15 bytes to their ids, in the layout the CPU
//! engine reads for every word of a text: the word's bytes and length packed
//! into a u128 key, open addressing with linear probing, and a 32-byte entry
//! that holds the key and up to three ids, so a lookup, hit or miss, usually
//! reads one cache line after one multiply: two entries share each 64-byte
//! line, and a word's probe starts at the first entry of its line, so its
//! first two slots (where a table at most half full keeps most words) are
//! the line that was prefetched.
//! Results of more than three ids live in a side array.
//!
//! Two kinds of table use it: each thread's word cache (`cpu::word_cache`,
//! mutable, private to its thread) and a plan's vocabulary table (every
//! vocabulary token of up to 15 bytes with the ids the plan's own kernel
//! gives it, built once, shared read-only), which answers a word the cache
//! has not seen when that word is one of the tokens.

/// Longest word the table holds.
pub const MAX_BYTES: usize = 15;
/// Ids an entry holds itself.
const INLINE_IDS: usize = 3;
/// `count` of an entry whose ids are not known yet (`ids[0]`: the caller's
/// own number for the word, see [`ShortWords::mark_pending`]).
const PENDING: u32 = u32::MAX;

/// The bytes of a word of at most 15 bytes, and its length, as one integer
/// (little-endian bytes, the length in the top byte; never 0, the free
/// slot's key), read with a few overlapping loads rather than a copy of a
/// variable length; None for a longer or empty word.
pub fn packed(word: &[u8]) -> Option<u128> {
    let n = word.len();
    let first8 = |w: &[u8]| w.first_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c));
    let last8 = |w: &[u8]| w.last_chunk::<8>().map_or(0, |c| u64::from_le_bytes(*c));
    let first4 = |w: &[u8]| {
        w.first_chunk::<4>()
            .map_or(0, |c| u64::from(u32::from_le_bytes(*c)))
    };
    let last4 = |w: &[u8]| {
        w.last_chunk::<4>()
            .map_or(0, |c| u64::from(u32::from_le_bytes(*c)))
    };
    let (low, high) = match n {
        1..=3 => {
            let at = |i: usize| u64::from(word[i]) << (8 * i);
            (at(0) | at(n / 2) | at(n - 1), 0)
        }
        4..=7 => (first4(word) | last4(word) << (8 * (n - 4)), 0),
        8 => (first8(word), 0),
        9..=MAX_BYTES => (first8(word), last8(word) >> (8 * (16 - n))),
        _ => return None,
    };
    Some(u128::from(low) | u128::from(high | (n as u64) << 56) << 64)
}

/// `packed(&text[start..end])`, from one 16-byte load where the text has
/// 16 bytes from `start` (the word's bytes masked by its length), so the
/// word's length picks no branch.
#[inline]
pub fn packed_at(text: &[u8], start: usize, end: usize) -> Option<u128> {
    let n = end - start;
    if n == 0 || n > MAX_BYTES {
        return None;
    }
    match text.get(start..).and_then(|rest| rest.first_chunk::<16>()) {
        Some(chunk) => {
            let word = u128::from_le_bytes(*chunk) & ((1u128 << (8 * n)) - 1);
            Some(word | (n as u128) << 120)
        }
        None => packed(&text[start..end]),
    }
}

/// One entry: the packed word (0: a free slot) and its ids, or where they
/// start in `ShortWords::spill` when there are more than [`INLINE_IDS`].
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct Entry {
    key: u128,
    ids: [u32; INLINE_IDS],
    count: u32,
}

/// Two entries, one cache line: a probe's first two slots.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Line([Entry; 2]);

// `ShortWords::entries` reads the lines as entries in a row.
const _: () = assert!(std::mem::size_of::<Line>() == 2 * std::mem::size_of::<Entry>());

/// What a table knows of a word.
pub enum Lookup<'t> {
    Ids(&'t [u32]),
    /// Marked pending with this number.
    Pending(u32),
    Absent,
}

/// See the module comment.
pub struct ShortWords {
    /// The slots, two to a line (slot i is `lines[i / 2].0[i % 2]`).
    lines: Vec<Line>,
    used: usize,
    /// 64 - log2(slots): the hash's top bits pick the first slot.
    shift: u32,
    spill: Vec<u32>,
}

impl ShortWords {
    /// An empty table of `count` slots (a power of two), holding at most
    /// half as many words.
    pub fn with_slots(count: usize) -> Self {
        assert!(count.is_power_of_two() && count >= 2);
        ShortWords {
            lines: crate::memory_hints::filled(count / 2, Line::default()),
            used: 0,
            shift: 64 - count.trailing_zeros(),
            spill: Vec::new(),
        }
    }

    /// A table of the words given with their ids (each word at most once).
    pub fn of<'w>(words: impl ExactSizeIterator<Item = (&'w [u8], &'w [u32])>) -> Self {
        let mut table = ShortWords::with_slots((2 * words.len()).next_power_of_two().max(2));
        for (word, ids) in words {
            if let Some(key) = packed(word) {
                table.insert(key, ids);
            }
        }
        table
    }

    /// Slots in the table.
    pub fn slots(&self) -> usize {
        2 * self.lines.len()
    }

    fn entries(&self) -> &[Entry] {
        // SAFETY: a Line is two Entries and nothing else (repr(C), 64 bytes),
        // so the lines are 2 * len entries in a row.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), 2 * self.lines.len()) }
    }

    fn entries_mut(&mut self) -> &mut [Entry] {
        // SAFETY: as in `entries`; the borrow is unique.
        unsafe {
            std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), 2 * self.lines.len())
        }
    }

    /// Ids kept outside the entries.
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }

    fn first_slot(&self, key: u128) -> usize {
        let (low, high) = (key as u64, (key >> 64) as u64);
        let slot = (low ^ high.rotate_left(23)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift;
        slot as usize & !1
    }

    /// The slot holding `key`, or the free slot where it would go.
    #[inline]
    fn find(&self, key: u128) -> usize {
        let entries = self.entries();
        let mask = entries.len() - 1;
        let mut slot = self.first_slot(key);
        loop {
            let k = entries[slot].key;
            if k == key || k == 0 {
                return slot;
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Asks for the cache line where `key` is looked up first (a hint only).
    pub fn prefetch(&self, key: u128) {
        let line = &self.lines[self.first_slot(key) / 2];
        crate::memory_hints::prefetch(std::ptr::from_ref(line).cast());
    }

    /// The ids of `key` as the hit path writes them, `[id, id, id, count]`
    /// (the ids past `count` are any), and whether they are the word's: true
    /// when the table holds it with at most three ids in the line where its
    /// probe starts (most words: two slots a line, the table at most half
    /// full), read without a branch on which slot; false when it is absent,
    /// pending, spilled or further along (`lookup` tells).
    #[inline]
    pub fn line_ids(&self, key: u128) -> ([u32; 4], bool) {
        let Line([a, b]) = &self.lines[self.first_slot(key) / 2];
        let entry = if a.key == key { a } else { b };
        let hit = entry.key == key && entry.count as usize <= INLINE_IDS;
        ([entry.ids[0], entry.ids[1], entry.ids[2], entry.count], hit)
    }

    /// What the table holds for `key`.
    pub fn lookup(&self, key: u128) -> Lookup<'_> {
        let entry = &self.entries()[self.find(key)];
        if entry.key != key {
            return Lookup::Absent;
        }
        match entry.count {
            PENDING => Lookup::Pending(entry.ids[0]),
            n if n as usize <= INLINE_IDS => Lookup::Ids(&entry.ids[..n as usize]),
            n => {
                let start = entry.ids[0] as usize;
                Lookup::Ids(&self.spill[start..start + n as usize])
            }
        }
    }

    /// True when one more word would fill the table past half its slots.
    pub fn is_full(&self) -> bool {
        2 * (self.used + 1) > self.slots()
    }

    /// Keeps `ids` (not empty) for `key`, replacing a pending mark. The
    /// table must not be full (`is_full`) when `key` is new.
    pub fn insert(&mut self, key: u128, ids: &[u32]) {
        let mut entry = Entry {
            key,
            count: ids.len() as u32,
            ..Entry::default()
        };
        if ids.len() <= INLINE_IDS {
            entry.ids[..ids.len()].copy_from_slice(ids);
        } else {
            entry.ids[0] = self.spill.len() as u32;
            self.spill.extend_from_slice(ids);
        }
        self.put(entry);
    }

    /// Marks `key` as being worked out by the caller (its number `number`):
    /// a later lookup of the same word in the same pass finds it pending.
    pub fn mark_pending(&mut self, key: u128, number: u32) {
        self.put(Entry {
            key,
            ids: [number, 0, 0],
            count: PENDING,
        });
    }

    fn put(&mut self, entry: Entry) {
        let slot = self.find(entry.key);
        if self.entries()[slot].key == 0 {
            self.used += 1;
        }
        self.entries_mut()[slot] = entry;
    }

    /// Doubles the slots, keeping the words.
    pub fn grow(&mut self) {
        let mut bigger = ShortWords::with_slots(2 * self.slots());
        for entry in self.entries().iter().filter(|e| e.key != 0) {
            let slot = bigger.find(entry.key);
            bigger.entries_mut()[slot] = *entry;
        }
        bigger.used = self.used;
        bigger.spill = std::mem::take(&mut self.spill);
        *self = bigger;
    }

    /// Forgets every word.
    pub fn clear(&mut self) {
        if self.used > 0 {
            self.lines.fill(Line::default());
            self.used = 0;
        }
        self.spill.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_keys_tell_every_short_word_apart() {
        // Every length, and words that differ only in their last byte or length.
        let mut seen = std::collections::HashSet::new();
        for n in 1..=MAX_BYTES {
            for last in [b'a', b'b', 0u8, 0xFF] {
                let mut word = vec![b'x'; n];
                word[n - 1] = last;
                let key = packed(&word).unwrap();
                assert_ne!(key, 0);
                assert!(seen.insert(key), "{word:?}");
                // The key holds the bytes in order, then the length.
                let bytes = key.to_le_bytes();
                assert_eq!(&bytes[..n], word.as_slice());
                assert!(bytes[n..15].iter().all(|&b| b == 0));
                assert_eq!(bytes[15] as usize, n);
            }
        }
        assert_eq!(packed(b""), None);
        assert_eq!(packed(&[b'x'; 16]), None);
    }

    #[test]
    fn packed_at_is_packed_wherever_the_word_lies() {
        let text = b"a few words, then one at the very end: fifteen-bytes";
        for start in 0..text.len() {
            for end in start..=text.len() {
                assert_eq!(
                    packed_at(text, start, end),
                    packed(&text[start..end]),
                    "{start}..{end}"
                );
            }
        }
    }

    #[test]
    fn line_ids_are_a_words_own_or_no_hit() {
        let mut table = ShortWords::with_slots(1 << 12);
        let words: Vec<Vec<u8>> = (0..2000u32).map(|i| format!("w{i}").into_bytes()).collect();
        for (i, word) in words.iter().enumerate() {
            let ids: Vec<u32> = (0..(i % 5) as u32).map(|k| k + i as u32).collect();
            if !ids.is_empty() {
                table.insert(packed(word).unwrap(), &ids);
            }
        }
        let mut hits = 0;
        for word in &words {
            let key = packed(word).unwrap();
            let (ids, hit) = table.line_ids(key);
            match table.lookup(key) {
                Lookup::Ids(want) if want.len() <= 3 => {
                    if hit {
                        hits += 1;
                        assert_eq!(&ids[..ids[3] as usize], want);
                    }
                }
                _ => assert!(!hit),
            }
        }
        // Most words are in the first line of their probe.
        assert!(hits > 2000 * 3 / 5 * 9 / 10, "{hits}");
    }

    #[test]
    fn holds_ids_inline_and_spilled_pending_marks_and_grows() {
        let mut table = ShortWords::with_slots(4);
        let (a, b, c) = (
            packed(b"a").unwrap(),
            packed(b"bb").unwrap(),
            packed(b"ccc").unwrap(),
        );
        table.insert(a, &[1]);
        assert!(matches!(table.lookup(a), Lookup::Ids([1])));
        let (ids, hit) = table.line_ids(a);
        assert!(hit);
        assert_eq!((ids[0], ids[3]), (1, 1));
        assert!(matches!(table.lookup(b), Lookup::Absent));
        table.mark_pending(b, 7);
        assert!(matches!(table.lookup(b), Lookup::Pending(7)));
        assert!(!table.line_ids(b).1);
        table.insert(b, &[2, 3, 4, 5]);
        assert!(matches!(table.lookup(b), Lookup::Ids([2, 3, 4, 5])));
        // Spilled: only `lookup` has them.
        assert!(!table.line_ids(b).1);
        assert_eq!(table.used, 2);
        assert!(table.is_full());
        table.grow();
        table.insert(c, &[6, 7, 8]);
        assert!(matches!(table.lookup(a), Lookup::Ids([1])));
        assert!(matches!(table.lookup(b), Lookup::Ids([2, 3, 4, 5])));
        assert!(matches!(table.lookup(c), Lookup::Ids([6, 7, 8])));
        let (ids, hit) = table.line_ids(c);
        assert!(!hit || ids == [6, 7, 8, 3]);
        table.clear();
        assert!(matches!(table.lookup(b), Lookup::Absent));
        assert_eq!((table.used, table.spilled()), (0, 0));
    }
}
