//! The host build of the shared kernel logic (`cuda/*.cuh`, compiled by
//! build.rs through `cuda/gt_host.cpp`): its C entry points and safe wrappers
//! over them. The algorithms live in the headers only; this file just calls
//! them.

use super::abi::{GtBpeModel, GtBpeScratch, GtBytesTable, GtMergeEntry, GtSplits, Kernel, NONE};
use std::ffi::c_void;

extern "C" {
    fn gt_host_bpe_word(
        model: *const GtBpeModel,
        bytes: *const u8,
        n: u32,
        scratch: GtBpeScratch,
        out: *mut u32,
    ) -> u32;
    fn gt_host_pair_insert(
        keys: *mut u64,
        ranks: *mut u32,
        merged: *mut u32,
        mask: u64,
        left: u32,
        right: u32,
        rank: u32,
        merged_id: u32,
    );
    fn gt_host_bytes_insert(
        hashes: *mut u64,
        starts: *mut u32,
        lens: *mut u32,
        ids: *mut u32,
        mask: u64,
        bytes: *const u8,
        n: u32,
        start: u32,
        id: u32,
    );
    fn gt_host_bytes_find(table: *const GtBytesTable, bytes: *const u8, n: u32) -> u32;
    fn gt_host_find(pattern: u32, text: *const u8, end: u32, pos: u32, start: *mut u32) -> u32;
    fn gt_host_split_words(
        splits: *const GtSplits,
        text: *const u8,
        n: u32,
        word: unsafe extern "C" fn(*mut c_void, u32, u32),
        ctx: *mut c_void,
    );
    fn gt_host_next_cut(text: *const u8, end: u32, from: u32) -> u32;
    fn gt_host_chain_can_cut(splits: *const GtSplits) -> i32;
    fn gt_host_run(kernel: u32, args: *const u8, begin: u32, end: u32) -> i32;
    fn gt_host_struct_sizes(out: *mut u64, n: u32) -> u32;
}

impl GtSplits {
    /// The chain of scanners `patterns`, or None if it is too long.
    pub fn new(patterns: &[u32]) -> Option<Self> {
        let mut splits = GtSplits {
            n: u32::try_from(patterns.len()).ok()?,
            ..Default::default()
        };
        splits
            .patterns
            .get_mut(..patterns.len())?
            .copy_from_slice(patterns);
        Some(splits)
    }

    /// Whether texts may be cut at safe points for this chain (`gt_chain_can_cut`).
    pub fn can_cut(&self) -> bool {
        // SAFETY: reads the struct only.
        unsafe { gt_host_chain_can_cut(self) != 0 }
    }
}

/// Calls `emit(start, end)` for each word of `text` after the scanner chain
/// `splits` (`gt_split_words`).
pub fn split_words(splits: &GtSplits, text: &str, emit: &mut dyn FnMut(usize, usize)) {
    unsafe extern "C" fn word(ctx: *mut c_void, start: u32, end: u32) {
        // SAFETY: `ctx` is the `&mut &mut dyn FnMut` passed below, alive for the call.
        let emit = unsafe { &mut *ctx.cast::<&mut dyn FnMut(usize, usize)>() };
        emit(start as usize, end as usize);
    }
    assert!(text.len() < NONE as usize, "pieces are limited to 4 GiB");
    let mut emit = emit;
    // SAFETY: `text` is valid UTF-8 of the given length; the callback context
    // outlives the call and is only used during it.
    unsafe {
        gt_host_split_words(
            splits,
            text.as_ptr(),
            text.len() as u32,
            word,
            (&mut emit as *mut &mut dyn FnMut(usize, usize)).cast(),
        )
    }
}

/// The first safe cut of `text` at or after `from` (>= 1), or `text.len()`
/// (`gt_next_cut`: the words of the two sides are the words of the whole).
pub fn next_cut(text: &[u8], from: usize) -> usize {
    assert!(from >= 1 && text.len() < NONE as usize);
    if from >= text.len() {
        return text.len();
    }
    // SAFETY: reads text[from - 1 .. len), inside the slice.
    unsafe { gt_host_next_cut(text.as_ptr(), text.len() as u32, from as u32) as usize }
}

/// The leftmost match of scanner `pattern` (`GT_PAT_*` in cuda/gt_pretok.cuh)
/// in `text` at or after byte `pos`, as (start, end).
pub fn find(pattern: u32, text: &str, pos: usize) -> Option<(usize, usize)> {
    assert!(text.len() < NONE as usize, "pieces are limited to 4 GiB");
    let mut start = 0u32;
    // SAFETY: `text` is valid UTF-8 of length `end`, and `pos` is on a char
    // boundary (0 or the end of a previous match); the scanner reads only
    // inside [0, end).
    let end = unsafe {
        gt_host_find(
            pattern,
            text.as_ptr(),
            text.len() as u32,
            pos as u32,
            &mut start,
        )
    };
    (end != NONE).then_some((start as usize, end as usize))
}

/// Per-thread scratch for `bpe_word`, grown to the longest word seen.
#[derive(Default)]
pub struct Scratch {
    ids: Vec<u32>,
    prev: Vec<i32>,
    next: Vec<i32>,
    len: Vec<u32>,
    heap: Vec<GtMergeEntry>,
}

impl Scratch {
    fn reserve(&mut self, n: usize) {
        if self.ids.len() < n {
            self.ids.resize(n, 0);
            self.prev.resize(n, 0);
            self.next.resize(n, 0);
            self.len.resize(n, 0);
            self.heap.resize(3 * n, GtMergeEntry::default());
        }
    }
}

/// BPE of one word (`gt_bpe_word`): appends its ids to `out`.
pub fn bpe_word(model: &GtBpeModel, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
    let n = word.len();
    if n == 0 {
        return;
    }
    assert!(
        n < u32::MAX as usize / 4,
        "word too long for the BPE kernel"
    );
    scratch.reserve(n);
    let at = out.len();
    out.resize(at + n, 0);
    let s = GtBpeScratch {
        ids: scratch.ids.as_mut_ptr(),
        prev: scratch.prev.as_mut_ptr(),
        next: scratch.next.as_mut_ptr(),
        len: scratch.len.as_mut_ptr(),
        heap: scratch.heap.as_mut_ptr(),
    };
    // SAFETY: the model's tables outlive the call (owned by the plan); scratch
    // holds n entries (3n for the heap) and `out` has room for n ids, the most
    // a word of n bytes can produce.
    let count =
        unsafe { gt_host_bpe_word(model, word.as_ptr(), n as u32, s, out.as_mut_ptr().add(at)) };
    out.truncate(at + count as usize);
}

/// Inserts a merge into pair-table arrays (`gt_pair_insert`); the last insert of a pair wins.
pub fn pair_insert(
    keys: &mut [u64],
    ranks: &mut [u32],
    merged: &mut [u32],
    pair: (u32, u32),
    rank: u32,
    id: u32,
) {
    let mask = keys.len() as u64 - 1;
    assert!(
        keys.len().is_power_of_two() && ranks.len() == keys.len() && merged.len() == keys.len()
    );
    // SAFETY: the three arrays have the same power-of-two length (checked), and
    // the caller sized them to keep free slots, so the probe ends inside them.
    unsafe {
        gt_host_pair_insert(
            keys.as_mut_ptr(),
            ranks.as_mut_ptr(),
            merged.as_mut_ptr(),
            mask,
            pair.0,
            pair.1,
            rank,
            id,
        )
    }
}

/// Borrowed arrays of a [`BytesTable`].
pub struct BytesTableArrays<'a> {
    pub hashes: &'a [u64],
    pub starts: &'a [u32],
    pub lens: &'a [u32],
    pub ids: &'a [u32],
    pub blob: &'a [u8],
}

/// Owned arrays of a byte-string table (see `GtBytesTable`).
pub struct BytesTable {
    hashes: Vec<u64>,
    starts: Vec<u32>,
    lens: Vec<u32>,
    ids: Vec<u32>,
    blob: Vec<u8>,
}

impl BytesTable {
    /// A table for (bytes, id) entries, each byte string given once.
    pub fn build<'a>(entries: impl ExactSizeIterator<Item = (&'a [u8], u32)>) -> Self {
        let capacity = (2 * entries.len()).next_power_of_two().max(2);
        let mut t = BytesTable {
            hashes: vec![0; capacity],
            starts: vec![0; capacity],
            lens: vec![0; capacity],
            ids: vec![0; capacity],
            blob: Vec::new(),
        };
        for (bytes, id) in entries {
            let start = t.blob.len() as u32;
            t.blob.extend_from_slice(bytes);
            // SAFETY: equal power-of-two lengths with at least half the slots free.
            unsafe {
                gt_host_bytes_insert(
                    t.hashes.as_mut_ptr(),
                    t.starts.as_mut_ptr(),
                    t.lens.as_mut_ptr(),
                    t.ids.as_mut_ptr(),
                    capacity as u64 - 1,
                    bytes.as_ptr(),
                    bytes.len() as u32,
                    start,
                    id,
                )
            }
        }
        t
    }

    /// The C view; valid while `self` lives and is not mutated.
    pub fn view(&self) -> GtBytesTable {
        GtBytesTable {
            hashes: self.hashes.as_ptr(),
            starts: self.starts.as_ptr(),
            lens: self.lens.as_ptr(),
            ids: self.ids.as_ptr(),
            blob: self.blob.as_ptr(),
            mask: self.hashes.len() as u64 - 1,
        }
    }

    /// The arrays, for copying to a device.
    pub fn arrays(&self) -> BytesTableArrays<'_> {
        BytesTableArrays {
            hashes: &self.hashes,
            starts: &self.starts,
            lens: &self.lens,
            ids: &self.ids,
            blob: &self.blob,
        }
    }

    /// Id of `bytes`, if present.
    pub fn find(&self, bytes: &[u8]) -> Option<u32> {
        let view = self.view();
        // SAFETY: the view points into self's arrays, alive for the call.
        let id = unsafe { gt_host_bytes_find(&view, bytes.as_ptr(), bytes.len() as u32) };
        (id != NONE).then_some(id)
    }
}

/// Runs threads `[begin, end)` of batch kernel `kernel` on the host (the
/// CUDA backend's emulator).
///
/// # Safety
/// `args` must be the kernel's argument struct, whose addresses are host
/// memory sized for the kernel's threads.
pub unsafe fn host_run(kernel: Kernel, args: &[u8], begin: u32, end: u32) {
    // SAFETY: the caller's contract.
    let rc = unsafe { gt_host_run(kernel.number(), args.as_ptr(), begin, end) };
    assert_eq!(rc, 0, "the host build lacks kernel {}", kernel.name());
}

/// The C compiler's sizes of the mirrored structs, in the order of
/// `gt_host_struct_sizes` (cuda/gt_host.cpp).
pub fn c_struct_sizes() -> Vec<u64> {
    let mut sizes = vec![0u64; 32];
    // SAFETY: writes at most `sizes.len()` entries.
    let n = unsafe { gt_host_struct_sizes(sizes.as_mut_ptr(), sizes.len() as u32) };
    sizes.truncate(n as usize);
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scanner chains of the real families (GT_PAT_* in cuda/gt_pretok.cuh).
    const CHAINS: [&[u32]; 5] = [&[1], &[2], &[3], &[4], &[5, 6, 7]];

    fn words(splits: &GtSplits, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        split_words(splits, text, &mut |a, b| out.push(text[a..b].to_string()));
        out
    }

    #[test]
    fn only_chains_that_split_at_spaces_are_cut() {
        for chain in CHAINS {
            assert!(GtSplits::new(chain).unwrap().can_cut(), "{chain:?}");
        }
        for chain in [&[][..], &[5], &[6], &[5, 6]] {
            assert!(!GtSplits::new(chain).unwrap().can_cut(), "{chain:?}");
        }
        // Why: with digits alone, "ab cd" is one word; a cut at the space would make two.
        let digits = GtSplits::new(&[5]).unwrap();
        assert_eq!(words(&digits, "ab cd"), ["ab cd"]);
        assert_eq!(next_cut(b"ab cd", 1), 2);
    }

    #[test]
    fn cutting_at_safe_points_keeps_the_words() {
        for chain in CHAINS {
            let splits = GtSplits::new(chain).unwrap();
            for text in crate::test_texts::sample_texts(17) {
                let whole = words(&splits, &text);
                // Cut at every safe point: the strongest form of the claim.
                let mut pieces = Vec::new();
                let (mut from, bytes) = (0, text.as_bytes());
                while from < bytes.len() {
                    let cut = next_cut(bytes, from + 1);
                    pieces.extend(words(&splits, &text[from..cut]));
                    from = cut;
                }
                assert_eq!(pieces, whole, "chain {chain:?} on {text:?}");
            }
        }
    }
}
