//! The host build of the shared kernel logic (`cuda/*.cuh`, compiled by
//! build.rs): `#[repr(C)]` mirrors of its structs and safe wrappers. The
//! algorithms live in the headers only; this file just calls them.

/// Mirror of `GtPairTable` (cuda/gt_hash.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtPairTable {
    pub keys: *const u64,
    pub ranks: *const u32,
    pub merged: *const u32,
    pub mask: u64,
}

/// Mirror of `GtBytesTable` (cuda/gt_hash.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtBytesTable {
    pub hashes: *const u64,
    pub starts: *const u32,
    pub lens: *const u32,
    pub ids: *const u32,
    pub blob: *const u8,
    pub mask: u64,
}

/// Mirror of `GtBpeModel` (cuda/gt_bpe.cuh).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtBpeModel {
    pub merges: GtPairTable,
    pub vocab: GtBytesTable,
    pub byte_ids: [u32; 256],
    pub ignore_merges: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct GtMergeEntry {
    rank: u32,
    pos: u32,
    merged: u32,
}

#[repr(C)]
struct GtBpeScratch {
    ids: *mut u32,
    prev: *mut i32,
    next: *mut i32,
    len: *mut u32,
    heap: *mut GtMergeEntry,
}

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

/// Empty-slot marker of the pair table (`GT_PAIR_EMPTY`).
pub const PAIR_EMPTY: u64 = u64::MAX;
/// "Not found" (`GT_NONE`).
pub const NONE: u32 = u32::MAX;

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

    /// Id of `bytes`, if present.
    pub fn find(&self, bytes: &[u8]) -> Option<u32> {
        let view = self.view();
        // SAFETY: the view points into self's arrays, alive for the call.
        let id = unsafe { gt_host_bytes_find(&view, bytes.as_ptr(), bytes.len() as u32) };
        (id != NONE).then_some(id)
    }
}
