//! `#[repr(C)]` mirrors of the structs in `cuda/*.cuh`, the batch kernels'
//! numbering, and the one safe way to view plain data as bytes ([`Pod`]).
//!
//! Every mirror is declared through [`c_mirror!`], which also proves at
//! compile time that it has no padding (padding bytes are uninitialised, so a
//! struct with padding must not be viewed as `&[u8]`): where the C layout
//! would pad, both sides name the gap (`pad_` in C, `_pad` here). Sizes are
//! compared with the C compiler's (`mirrors_match_the_c_layout`), field order
//! by the parity tests, where the host build of the kernels reads these
//! structs with the C layout (a swapped pair of fields gives wrong ids).
//!
//! Pointers in the batch kernels' arguments are addresses (`DevPtr`): device
//! memory on a GPU, host memory under the emulator.

/// Plain data: every byte is initialised (no padding) and every bit pattern
/// is a valid value, so values can be copied to and from raw bytes.
///
/// # Safety
/// Implement only for types with both properties; [`c_mirror!`] checks them
/// for the mirrors.
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: integers have no padding and accept every bit pattern.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for i64 {}
// SAFETY: a float has no padding, and every bit pattern is a value (a NaN at worst).
unsafe impl Pod for f64 {}
// SAFETY: a raw pointer is an address: no padding, any bit pattern is a value
// (only dereferencing needs care, and that is never done through `Pod`).
unsafe impl<T: 'static> Pod for *const T {}
// SAFETY: as above.
unsafe impl<T: 'static> Pod for *mut T {}
// SAFETY: an array of Pod values has no gaps between elements.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// The bytes of a slice of plain values.
pub fn as_bytes<T: Pod>(values: &[T]) -> &[u8] {
    // SAFETY: Pod values have every byte initialised.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
}

/// The bytes of a slice of plain values, to overwrite.
pub fn as_bytes_mut<T: Pod>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: any bytes written leave valid Pod values behind.
    unsafe {
        std::slice::from_raw_parts_mut(values.as_mut_ptr().cast(), std::mem::size_of_val(values))
    }
}

/// Declares a `#[repr(C)]` mirror of a C struct: `Clone + Copy`, [`Pod`], and
/// a compile-time proof that its size is the sum of its fields' (no padding).
macro_rules! c_mirror {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* $vis:vis $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy)]
        pub struct $name { $($(#[$fmeta])* $vis $field: $ty),* }

        const _: () = {
            fn fields_are_pod() {
                fn pod<T: Pod>() {}
                $(pod::<$ty>();)*
            }
            let _ = fields_are_pod;
            assert!(
                std::mem::size_of::<$name>() == 0 $(+ std::mem::size_of::<$ty>())*,
                concat!(stringify!($name), " has padding: name the gap in C and here")
            );
        };

        // SAFETY: repr(C), every field Pod, no padding (both checked above).
        unsafe impl Pod for $name {}
    };
}

// ---- per-word kernels (cuda/gt_hash.cuh, gt_bpe.cuh, gt_pretok.cuh) --------

c_mirror! {
    /// `GtPairSlot` (cuda/gt_hash.cuh): one slot of a merge table (pair key and rank, packed).
    pub struct GtPairSlot {
        pub packed: u64,
    }
}

impl Default for GtPairSlot {
    /// A free slot.
    fn default() -> Self {
        GtPairSlot { packed: PAIR_EMPTY }
    }
}

impl GtPairSlot {
    /// The slot's pair (left, right) and rank, None when it is free
    /// (`packed`: key << GT_PAIR_RANK_BITS | rank, the key left << GT_PAIR_ID_BITS | right).
    pub fn pair_and_rank(&self) -> Option<((u32, u32), u32)> {
        if self.packed == PAIR_EMPTY {
            return None;
        }
        let key = self.packed >> PAIR_RANK_BITS;
        let pair = (
            (key >> PAIR_ID_BITS) as u32,
            (key & u64::from(PAIR_ID_LIMIT)) as u32,
        );
        Some((pair, (self.packed & u64::from(PAIR_RANK_LIMIT)) as u32))
    }
}

c_mirror! {
    /// `GtPairTable` (cuda/gt_hash.cuh): merge (left, right) -> (rank, merged id).
    pub struct GtPairTable {
        pub slots: *const GtPairSlot,
        pub mask: u64,
        /// Each merge's id, by rank.
        pub merged_of_rank: *const u32,
    }
}

c_mirror! {
    /// `GtPairBits` (cuda/gt_hash.cuh): a filter of (left, right) pairs, one bit
    /// per hash of a pair.
    pub struct GtPairBits {
        pub words: *const u64,
        pub mask: u64,
    }
}

c_mirror! {
    /// `GtSpmCuts` (cuda/gt_spm.cuh): where SentencePiece BPE cuts a piece into words.
    pub struct GtSpmCuts {
        pub bits: *const u32,
        pub joined: GtPairTable,
        pub n_known: u32,
        pub unknown_alone: u32,
        pub enabled: u32,
        pub space_as: u32,
    }
}

impl GtSpmCuts {
    /// No cut proven: each piece is one word.
    pub fn disabled() -> Self {
        GtSpmCuts {
            bits: std::ptr::null(),
            joined: GtPairTable {
                slots: std::ptr::null(),
                mask: 0,
                merged_of_rank: std::ptr::null(),
            },
            n_known: 0,
            unknown_alone: 0,
            enabled: 0,
            space_as: 0,
        }
    }
}

c_mirror! {
    /// `GtBytesSlot` (cuda/gt_hash.cuh): one slot of a byte-string table.
    #[derive(Default)]
    pub struct GtBytesSlot {
        pub hash: u64,
        pub start: u32,
        pub id: u32,
    }
}

c_mirror! {
    /// `GtBytesTable` (cuda/gt_hash.cuh): byte string -> id.
    pub struct GtBytesTable {
        pub slots: *const GtBytesSlot,
        pub blob: *const u8,
        pub filter: *const u64,
        pub mask: u64,
        pub filter_mask: u64,
    }
}

c_mirror! {
    /// `GtBpeModel` (cuda/gt_bpe.cuh).
    pub struct GtBpeModel {
        pub merges: GtPairTable,
        pub vocab: GtBytesTable,
        /// Rank of the merge of two bytes' tokens, by (first << 8 | second); null: look them up.
        pub byte_pair_ranks: *const u32,
        /// The token each character of U+0080..U+FFFF starts a word's merges as,
        /// by code point, with flags (plan/char_atoms.rs); null: every character its bytes.
        pub char_atoms: *const u32,
        pub byte_ids: [u32; 256],
        pub ignore_merges: u32,
        pub _pad: u32,
    }
}

c_mirror! {
    /// `GtSpmModel` (cuda/gt_spm.cuh).
    pub struct GtSpmModel {
        pub merges: GtPairTable,
        pub vocab: GtBytesTable,
        pub byte_ids: [u32; 256],
        pub unk_id: u32,
        pub fuse_unk: u32,
        pub ignore_merges: u32,
        pub space_len: u32,
        pub space_utf8: [u8; 4],
        pub _pad: u32,
        pub prefix_len: u32,
        pub suffix_len: u32,
        pub prefix: [u8; AFFIX_MAX],
        pub suffix: [u8; AFFIX_MAX],
    }
}

/// `GT_AFFIX_MAX` (cuda/gt_spm.cuh): the longest continuing_subword_prefix or
/// end_of_word_suffix a `GtSpmModel` holds, in bytes.
pub const AFFIX_MAX: usize = 16;

c_mirror! {
    /// `GtUnigramModel` (cuda/gt_unigram.cuh).
    pub struct GtUnigramModel {
        pub pieces: GtBytesTable,
        pub scores: *const f64,
        pub unk_score: f64,
        pub byte_ids: [u32; 256],
        pub unk_id: u32,
        pub lead_len: u32,
        pub lead_utf8: [u8; 4],
        pub _pad: u32,
    }
}

c_mirror! {
    /// `GtUnigramScratch` (cuda/gt_unigram.cuh).
    pub struct GtUnigramScratch {
        pub best: *mut f64,
        pub from: *mut u32,
        pub id: *mut u32,
    }
}

c_mirror! {
    /// `GtCharTable` (cuda/gt_normalize.cuh): per-code-point normalizer and pre-tokenizer entries.
    pub struct GtCharTable {
        pub blocks: *const u16,
        pub entries: *const u32,
        pub blob: *const u8,
        /// Host only (null on a device): see cuda/gt_wordpiece.cuh.
        pub exact_prefixes: *const u64,
    }
}

c_mirror! {
    /// `GtWordPieceModel` (cuda/gt_wordpiece.cuh).
    pub struct GtWordPieceModel {
        pub chars: GtCharTable,
        pub first: GtBytesTable,
        pub rest: GtBytesTable,
        pub first_max: u32,
        pub rest_max: u32,
        pub unk_id: u32,
        pub max_chars: u32,
    }
}

c_mirror! {
    /// `GtWpScratch` (cuda/gt_wordpiece.cuh).
    pub struct GtWpScratch {
        pub norm: *mut u8,
        pub from: *mut u32,
        pub to: *mut u32,
    }
}

impl GtBpeModel {
    /// A model with no tables, for launches that encode no words.
    pub fn null() -> Self {
        GtBpeModel {
            merges: GtPairTable {
                slots: std::ptr::null(),
                mask: 0,
                merged_of_rank: std::ptr::null(),
            },
            vocab: GtBytesTable {
                slots: std::ptr::null(),
                blob: std::ptr::null(),
                filter: std::ptr::null(),
                mask: 0,
                filter_mask: 0,
            },
            byte_pair_ranks: std::ptr::null(),
            char_atoms: std::ptr::null(),
            byte_ids: [0; 256],
            ignore_merges: 0,
            _pad: 0,
        }
    }
}

c_mirror! {
    /// `GtMergeEntry` (cuda/gt_bpe.cuh): one entry of the merge heap.
    #[derive(Default)]
    pub struct GtMergeEntry {
        rank: u32,
        pos: u32,
    }
}

c_mirror! {
    /// `GtBpeScratch` (cuda/gt_bpe.cuh): caller-owned scratch of one word.
    pub struct GtBpeScratch {
        pub ids: *mut u32,
        pub prev: *mut i32,
        pub next: *mut i32,
        pub heap: *mut GtMergeEntry,
    }
}

/// `GT_MAX_STEPS`.
pub const MAX_STEPS: usize = 4;

c_mirror! {
    /// `GtRegex` (cuda/gt_regex.cuh): a compiled pattern's tables.
    #[derive(Debug, PartialEq, Eq)]
    pub struct GtRegex {
        pub trans: *const u32,
        pub starts: *const u32,
        pub block_of: *const u16,
        pub blocks: *const u8,
        pub first_bytes: *const u8,
        pub n_classes: u32,
        pub flags: u32,
    }
}

impl Default for GtRegex {
    fn default() -> Self {
        GtRegex {
            trans: std::ptr::null(),
            starts: std::ptr::null(),
            block_of: std::ptr::null(),
            blocks: std::ptr::null(),
            first_bytes: std::ptr::null(),
            n_classes: 0,
            flags: 0,
        }
    }
}

/// `GT_PAT_REGEX`: a step whose pattern is compiled.
pub const PAT_REGEX: u32 = 0xFF;
/// `GT_PAT_GPT2`, `_CL100K`, `_QWEN`, `_O200K`, `_DS_WORDS`: the patterns
/// with a loop over ASCII words (`GtChainStep.ascii`, `gt_scan_ascii_words`).
pub const PAT_GPT2: u32 = 1;
pub const PAT_CL100K: u32 = 2;
pub const PAT_QWEN: u32 = 3;
pub const PAT_O200K: u32 = 4;
pub const PAT_DS_WORDS: u32 = 7;
/// `GT_SPLIT_INVERT`: a step's matches and gaps swap roles.
pub const SPLIT_INVERT: u32 = 8;

c_mirror! {
    /// `GtChainStep` (cuda/gt_chain.cuh): one Split step.
    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct GtChainStep {
        pub pattern: u32,
        pub behavior: u32,
        pub cuts: u32,
        /// One of the `PAT_*` above for the pattern's loop over ASCII words, else 0.
        pub ascii: u32,
        pub regex: GtRegex,
    }
}

c_mirror! {
    /// `GtChain` (cuda/gt_chain.cuh): a pre-tokenizer's Split steps.
    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct GtChain {
        pub n: u32,
        pub _pad: u32,
        pub steps: [GtChainStep; MAX_STEPS],
    }
}

/// Empty-slot marker of the pair table (`GT_PAIR_EMPTY`).
pub const PAIR_EMPTY: u64 = u64::MAX;
/// Bits of an id and of a rank in a pair slot (`GT_PAIR_ID_BITS`, `GT_PAIR_RANK_BITS`).
pub const PAIR_ID_BITS: u32 = 21;
pub const PAIR_RANK_BITS: u32 = 22;
/// Ids a pair table can hold are below this (`GT_PAIR_ID_LIMIT`).
pub const PAIR_ID_LIMIT: u32 = (1 << PAIR_ID_BITS) - 1;
/// Ranks a pair table can hold are below this (`GT_PAIR_RANK_LIMIT`).
pub const PAIR_RANK_LIMIT: u32 = (1 << PAIR_RANK_BITS) - 1;
/// "Not found" (`GT_NONE`).
pub const NONE: u32 = u32::MAX;

// ---- the batch kernels (cuda/gt_batch.cuh) ---------------------------------

/// The kernels, in the order of `GT_BATCH_KERNELS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    PretokCount,
    PretokFill,
    OrderCount,
    OrderFill,
    BpeWords,
    BpeLongWords,
    SpmWords,
    SpmLongWords,
    UnigramWords,
    WordPieceWords,
    Compact,
    ScanSum,
    ScanApply,
    PartSpans,
    RowSpans,
    Pack,
}

impl Kernel {
    pub const ALL: [Kernel; 16] = [
        Kernel::PretokCount,
        Kernel::PretokFill,
        Kernel::OrderCount,
        Kernel::OrderFill,
        Kernel::BpeWords,
        Kernel::BpeLongWords,
        Kernel::SpmWords,
        Kernel::SpmLongWords,
        Kernel::UnigramWords,
        Kernel::WordPieceWords,
        Kernel::Compact,
        Kernel::ScanSum,
        Kernel::ScanApply,
        Kernel::PartSpans,
        Kernel::RowSpans,
        Kernel::Pack,
    ];

    /// The `__global__` function's name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::PretokCount => "gt_pretok_count",
            Kernel::PretokFill => "gt_pretok_fill",
            Kernel::OrderCount => "gt_order_count",
            Kernel::OrderFill => "gt_order_fill",
            Kernel::BpeWords => "gt_bpe_words",
            Kernel::BpeLongWords => "gt_bpe_long_words",
            Kernel::SpmWords => "gt_spm_words",
            Kernel::SpmLongWords => "gt_spm_long_words",
            Kernel::UnigramWords => "gt_unigram_words",
            Kernel::WordPieceWords => "gt_wordpiece_words",
            Kernel::Compact => "gt_compact",
            Kernel::ScanSum => "gt_scan_sum",
            Kernel::ScanApply => "gt_scan_apply",
            Kernel::PartSpans => "gt_part_spans",
            Kernel::RowSpans => "gt_row_spans",
            Kernel::Pack => "gt_pack",
        }
    }

    /// True for a block-cooperative kernel (`GT_EACH_LANE`, `GT_SYNC`): its
    /// threads are the lanes of whole blocks of `LANES`, so a launch's thread
    /// count is a multiple of `LANES` (on a GPU, a lane left out of a block
    /// would miss its barriers).
    pub fn in_blocks(self) -> bool {
        matches!(
            self,
            Kernel::OrderCount | Kernel::OrderFill | Kernel::BpeLongWords | Kernel::SpmLongWords
        )
    }

    /// Position in `GT_BATCH_KERNELS` (the host build's kernel number).
    pub fn number(self) -> u32 {
        self as u32
    }
}

/// A device (or emulated) address.
pub type DevPtr = u64;

/// A batch kernel's argument struct, passed by value.
pub trait KernelArgs: Pod {
    fn as_bytes(&self) -> &[u8] {
        as_bytes(std::slice::from_ref(self))
    }
}

c_mirror! {
    pub struct GtPretokArgs {
        pub chain: GtChain,
        pub metaspace: u32,
        pub _pad: u32,
        pub text: DevPtr,
        pub piece_bounds: DevPtr,
        pub word_counts: DevPtr,
        pub first_word: DevPtr,
        pub word_starts: DevPtr,
        pub word_lens: DevPtr,
        pub cuts: GtSpmCuts,
    }
}

c_mirror! {
    /// `GtWords` (cuda/gt_batch.cuh): a chunk's words and where their ids go.
    pub struct GtWords {
        pub text: DevPtr,
        pub word_starts: DevPtr,
        pub word_lens: DevPtr,
        pub out: DevPtr,
        pub tok_counts: DevPtr,
        pub n_words: DevPtr,
        pub order: DevPtr,
        pub class_counts: DevPtr,
        /// The launch's threads: thread t takes order positions t, t + stride, ...
        pub stride: u32,
        pub _pad: u32,
    }
}

c_mirror! {
    /// `GtOrderArgs` (cuda/gt_batch.cuh): words in order of work.
    pub struct GtOrderArgs {
        pub text: DevPtr,
        pub word_starts: DevPtr,
        pub word_lens: DevPtr,
        pub n_words: DevPtr,
        pub shortcut: GtBytesTable,
        pub class_counts: DevPtr,
        pub order: DevPtr,
        /// The launch's blocks: block b takes the blocks of words b, b + blocks, ...
        pub blocks: u32,
        pub _pad: u32,
    }
}

/// `GT_WORK_CLASSES`: the work classes words are ordered by.
pub const WORK_CLASSES: usize = 13;
/// `GT_LANES`: threads per block of every batch kernel (a block-cooperative
/// one's lanes).
pub const LANES: u32 = 256;
/// `GT_LONG_WORD`: bytes from which a word is long on a device (the last
/// work class, first in the order), which a block merges (`gt_long_word`).
pub const LONG_WORD: usize = 2048;
/// `GT_HOST_LONG_WORD`: bytes from which the CPU backend merges a word in a
/// block's rounds (one thread running the lanes) instead of the heap merge.
pub const HOST_LONG_WORD: usize = 16384;
/// `GT_ROUND_SHARE_HOST` and `GT_ROUND_SHARE_GPU`: a long word's round is
/// applied when it merges at least 1/share of the symbols (`gt_bpe_rounds`):
/// the CPU backend's share, and a device's (a GPU's lanes share a round's
/// look-ups). The emulator runs the GPU's.
pub const ROUND_SHARE_HOST: u32 = 4;
pub const ROUND_SHARE_GPU: u32 = 32;

c_mirror! {
    /// `GtLaneCheck` (cuda/gt_lane_check.h): what an emulated launch asks of
    /// the check of block lanes.
    pub struct GtLaneCheck {
        /// > 0: the barrier (GT_SYNC) of this id does nothing (tests).
        pub removed: u32,
        /// 1: count the launch's global accesses ([`GtLaneCounts`]).
        pub count: u32,
        /// The lanes' shuffled orders.
        pub seed: u64,
    }
}

c_mirror! {
    /// `GtLaneHazard` (cuda/gt_lane_check.h): a race the check found (if
    /// `found`) between two lanes of one block in one phase.
    pub struct GtLaneHazard {
        pub found: u32,
        /// 1: the second access was a write.
        pub write: u32,
        /// The lane that touched the location first, then the one that raced with it.
        pub first: u32,
        pub second: u32,
        pub block: u32,
        /// GT_SYNCs the block had passed.
        pub phase: u32,
        /// The most GT_SYNCs a block of the launch passed.
        pub syncs: u32,
        /// The distinct barriers the launch passed (ids: line and file).
        pub n_barriers: u32,
        pub barriers: [u32; LANE_BARRIERS],
    }
}

c_mirror! {
    /// `GtLaneCounts` (cuda/gt_lane_check.h): what a range of a launch's
    /// threads did to global memory, for the device cost model. A warp is
    /// charged each distinct 32-byte sector it touched once (reads and
    /// writes apart), over the accesses the kernels declare.
    pub struct GtLaneCounts {
        pub read_sectors: u64,
        pub write_sectors: u64,
        pub threads: u64,
        /// Threads (lanes) that took an item of work (`GT_WORK_ITEM`).
        pub working: u64,
        /// The most sectors one thread touched.
        pub tail: u64,
        pub atomics: u64,
        /// Atomics on words past the first `COUNT_ATOMIC_WORDS` of the range.
        pub atomics_untracked: u64,
        pub n_atomic_words: u32,
        pub _pad: u32,
        /// The words atomics hit (addresses), and how many each took.
        pub atomic_word: [u64; COUNT_ATOMIC_WORDS],
        pub atomic_hits: [u64; COUNT_ATOMIC_WORDS],
    }
}

/// `GT_COUNT_ATOMIC_WORDS`: the distinct atomic words a range of threads tracks.
pub const COUNT_ATOMIC_WORDS: usize = 16;

/// `GT_LANE_BARRIERS`: the most distinct barriers a launch reports.
pub const LANE_BARRIERS: usize = 16;

// As cuda/gt_host_checked.cpp asserts for the C side.
const _: () = assert!(
    std::mem::size_of::<GtLaneCheck>() == 16
        && std::mem::size_of::<GtLaneHazard>() == 96
        && std::mem::size_of::<GtLaneCounts>() == 320
);

/// `GT_LANE_EVERY` and `GT_LANE_SEVERAL`: lane numbers of a hazard that
/// stand for code every lane runs, and for reads by several lanes.
pub const LANE_EVERY: u32 = 0xFFFE;
pub const LANE_SEVERAL: u32 = 0xFFFD;

impl std::fmt::Display for GtLaneHazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = |lane: u32| match lane {
            LANE_EVERY => "every lane".to_string(),
            LANE_SEVERAL => "several lanes".to_string(),
            lane => format!("lane {lane}"),
        };
        let (done, did) = match self.write {
            1 => ("touched", "wrote"),
            _ => ("wrote", "read"),
        };
        write!(
            f,
            "{} {did} a location {} {done} in the same phase (block {}, after {} barriers)",
            who(self.second),
            who(self.first),
            self.block,
            self.phase
        )
    }
}

c_mirror! {
    /// `GtMergeScratch` (cuda/gt_batch.cuh): the BPE families' scratch.
    pub struct GtMergeScratch {
        pub ids: DevPtr,
        pub prev: DevPtr,
        pub next: DevPtr,
        pub heap: DevPtr,
    }
}

c_mirror! {
    pub struct GtBpeArgs {
        pub model: GtBpeModel,
        pub words: GtWords,
        pub scratch: GtMergeScratch,
        /// The long words' schedule (`round_shares`).
        pub round_share: u32,
        /// The long words' launch: block b takes long words b, b + long_blocks, ...
        pub long_blocks: u32,
    }
}

c_mirror! {
    pub struct GtSpmArgs {
        pub model: GtSpmModel,
        pub words: GtWords,
        pub scratch: GtMergeScratch,
        /// The long words' schedule (`round_shares`).
        pub round_share: u32,
        /// As in `GtBpeArgs`.
        pub long_blocks: u32,
    }
}

c_mirror! {
    pub struct GtUnigramArgs {
        pub model: GtUnigramModel,
        pub words: GtWords,
        pub best: DevPtr,
        pub from: DevPtr,
        pub id: DevPtr,
    }
}

c_mirror! {
    pub struct GtWordPieceArgs {
        pub model: GtWordPieceModel,
        pub words: GtWords,
        pub norm: DevPtr,
        pub growth: u64,
    }
}

c_mirror! {
    pub struct GtCompactArgs {
        pub word_starts: DevPtr,
        pub tok_offsets: DevPtr,
        pub bpe_out: DevPtr,
        pub raw_ids: DevPtr,
        pub n_words: DevPtr,
        /// The launch's threads (grid-stride, as `GtWords`).
        pub stride: u32,
        pub _pad: u32,
    }
}

c_mirror! {
    pub struct GtScanArgs {
        pub values: DevPtr,
        pub tile_sums: DevPtr,
        pub n: u32,
        pub tile: u32,
        /// A count on the device (at most n) of the values to scan; 0: n.
        pub count: DevPtr,
    }
}

/// `GT_MAX_TEMPLATE`.
pub const MAX_TEMPLATE: usize = 8;

c_mirror! {
    #[derive(Debug, Default, PartialEq, Eq)]
    pub struct GtTemplate {
        pub n_prefix: u32,
        pub n_suffix: u32,
        pub ids: [u32; MAX_TEMPLATE],
        pub type_ids: [u32; MAX_TEMPLATE],
        pub seq_type_id: u32,
    }
}

c_mirror! {
    #[derive(Debug, Default)]
    pub struct GtRowSource {
        pub piece_begin: u32,
        pub piece_end: u32,
        pub host_begin: u32,
        pub host_end: u32,
    }
}

c_mirror! {
    /// `GtRowSpan`: written and read by the kernels only.
    pub struct GtRowSpan {
        pub part_begin: u32,
        pub part_end: u32,
        pub skip: u32,
        pub keep: u32,
    }
}

c_mirror! {
    /// `GtPartSpan`: written and read by the kernels only.
    pub struct GtPartSpan {
        pub dev_begin: u32,
        pub dev_end: u32,
        pub host_begin: u32,
        pub host_end: u32,
    }
}

c_mirror! {
    /// `gt_part_spans` and `gt_row_spans`.
    pub struct GtRowArgs {
        pub sources: DevPtr,
        pub row_parts: DevPtr,
        pub first_word: DevPtr,
        pub tok_offsets: DevPtr,
        pub parts: DevPtr,
        pub part_starts: DevPtr,
        pub tmpl: GtTemplate,
        pub truncate: u32,
        pub max_seq: u32,
        pub truncate_left: u32,
        pub spans: DevPtr,
        pub lengths: DevPtr,
    }
}

c_mirror! {
    pub struct GtPackArgs {
        pub spans: DevPtr,
        pub parts: DevPtr,
        pub part_starts: DevPtr,
        pub lengths: DevPtr,
        /// The chunk's rows' starts in the whole output; the outputs point at `row_base`.
        pub row_starts: DevPtr,
        pub row_base: u64,
        pub n_rows: u32,
        /// 8: the outputs are int64; 4: int32.
        pub value_bytes: u32,
        pub raw_ids: DevPtr,
        pub host_ids: DevPtr,
        pub tmpl: GtTemplate,
        pub pad_left: u32,
        pub pad_id: u32,
        pub pad_type_id: u32,
        pub ids: DevPtr,
        pub attention_mask: DevPtr,
        pub type_ids: DevPtr,
        pub special_tokens_mask: DevPtr,
    }
}

impl KernelArgs for GtPretokArgs {}
impl KernelArgs for GtOrderArgs {}
impl KernelArgs for GtBpeArgs {}
impl KernelArgs for GtSpmArgs {}
impl KernelArgs for GtUnigramArgs {}
impl KernelArgs for GtWordPieceArgs {}
impl KernelArgs for GtCompactArgs {}
impl KernelArgs for GtScanArgs {}
impl KernelArgs for GtRowArgs {}
impl KernelArgs for GtPackArgs {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn mirrors_match_the_c_layout() {
        let rust = [
            size_of::<GtPretokArgs>(),
            size_of::<GtPretokArgs>(),
            size_of::<GtOrderArgs>(),
            size_of::<GtOrderArgs>(),
            size_of::<GtBpeArgs>(),
            size_of::<GtBpeArgs>(),
            size_of::<GtSpmArgs>(),
            size_of::<GtSpmArgs>(),
            size_of::<GtUnigramArgs>(),
            size_of::<GtWordPieceArgs>(),
            size_of::<GtCompactArgs>(),
            size_of::<GtScanArgs>(),
            size_of::<GtScanArgs>(),
            size_of::<GtRowArgs>(),
            size_of::<GtRowArgs>(),
            size_of::<GtPackArgs>(),
            size_of::<GtRowSpan>(),
            size_of::<GtMergeEntry>(),
            size_of::<GtBpeModel>(),
            size_of::<GtChain>(),
            size_of::<GtTemplate>(),
            size_of::<GtRowSource>(),
            size_of::<GtCharTable>(),
            size_of::<GtWordPieceModel>(),
            size_of::<GtWpScratch>(),
            size_of::<GtSpmModel>(),
            size_of::<GtBytesSlot>(),
            size_of::<GtUnigramModel>(),
            size_of::<GtUnigramScratch>(),
            size_of::<GtPairSlot>(),
            size_of::<GtPartSpan>(),
            size_of::<GtSpmCuts>(),
            size_of::<GtRegex>(),
            size_of::<GtChainStep>(),
            size_of::<GtPairBits>(),
        ];
        let c: Vec<usize> = super::super::host::c_struct_sizes()
            .into_iter()
            .map(|s| s as usize)
            .collect();
        assert_eq!(c, rust);
        let constants = super::super::host::c_constants();
        assert_eq!(
            constants,
            [
                WORK_CLASSES as u32,
                LANES,
                LONG_WORD as u32,
                ROUND_SHARE_HOST,
                ROUND_SHARE_GPU,
                HOST_LONG_WORD as u32
            ]
        );
    }

    #[test]
    fn kernel_numbers_follow_the_list() {
        for (i, k) in Kernel::ALL.iter().enumerate() {
            assert_eq!(k.number() as usize, i, "{}", k.name());
        }
    }
}
