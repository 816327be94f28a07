//! The host build of the shared kernel logic (`cuda/*.cuh`, compiled by
//! build.rs through `cuda/gt_host.cpp`): its C entry points and safe wrappers
//! over them. The algorithms live in the headers only; this file just calls
//! them.

use super::abi::{
    GtBpeModel, GtBpeScratch, GtBytesSlot, GtBytesTable, GtChain, GtChainStep, GtCharTable,
    GtLaneCheck, GtLaneCounts, GtLaneHazard, GtMergeEntry, GtPairBits, GtPairSlot, GtPairTable,
    GtRegex, GtSpmCuts, GtSpmModel, GtUnigramModel, GtUnigramScratch, GtWordPieceModel,
    GtWpScratch, Kernel, AFFIX_MAX, NONE, PAIR_ID_LIMIT, PAIR_RANK_LIMIT, ROUND_SHARE_GPU,
    ROUND_SHARE_HOST,
};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

extern "C" {
    fn gt_host_bpe_word(
        model: *const GtBpeModel,
        bytes: *const u8,
        n: u32,
        scratch: GtBpeScratch,
        out: *mut u32,
        share: u32,
    ) -> u32;
    fn gt_host_bpe_words_turns(
        model: *const GtBpeModel,
        bytes: *const u8,
        starts: *const u32,
        lens: *const u32,
        k: u32,
        out: *mut u32,
        rooms: *const u32,
        counts: *mut u32,
    );
    fn gt_host_turn_max() -> u32;
    fn gt_host_bpe_merge_step(
        merges: *const GtPairTable,
        ids: *mut u32,
        rank: *mut u32,
        n: *mut u32,
    ) -> u32;
    fn gt_host_cjk_led(first: u32, second: u32) -> i32;
    fn gt_host_has_cjk(bytes: *const u8, n: u32) -> i32;
    fn gt_host_chain_pieces(
        chain: *const GtChain,
        model: *const GtBpeModel,
        pairs: *const GtPairBits,
        text: *const u8,
        n: u32,
        word: unsafe extern "C" fn(*mut c_void, u32, u32),
        ctx: *mut c_void,
    );
    fn gt_host_spm_word(
        model: *const GtSpmModel,
        bytes: *const u8,
        n: u32,
        scratch: GtBpeScratch,
        out: *mut u32,
        share: u32,
    ) -> u32;
    fn gt_host_spm_room(model: *const GtSpmModel, n: u32) -> u32;
    fn gt_host_chars_kept(table: *const GtCharTable, text: *const u8, n: u32, pos: u32) -> u32;
    fn gt_host_chars_normalize(
        table: *const GtCharTable,
        text: *const u8,
        n: u32,
        out: *mut u8,
        from: *mut u32,
        to: *mut u32,
    ) -> u32;
    fn gt_host_unigram_word(
        model: *const GtUnigramModel,
        bytes: *const u8,
        n: u32,
        scratch: GtUnigramScratch,
        out: *mut u32,
    ) -> u32;
    fn gt_host_pair_insert(slots: *mut GtPairSlot, mask: u64, left: u32, right: u32, rank: u32);
    fn gt_host_bytes_insert(
        slots: *mut GtBytesSlot,
        mask: u64,
        filter: *mut u64,
        filter_mask: u64,
        bytes: *const u8,
        n: u32,
        start: u32,
        id: u32,
    );
    fn gt_host_spm_next_cut(cuts: *const GtSpmCuts, text: *const u8, end: u32, from: u32) -> u32;
    fn gt_host_is_white_space(cp: u32) -> i32;
    #[cfg(test)]
    fn gt_host_spm_cut_between(cuts: *const GtSpmCuts, a: u32, b: u32) -> i32;
    fn gt_host_pair_rank(table: *const GtPairTable, left: u32, right: u32) -> u32;
    fn gt_host_pair_bits_add(words: *mut u64, mask: u64, left: u32, right: u32);
    fn gt_host_pair_maybe(bits: *const GtPairBits, left: u32, right: u32) -> i32;
    fn gt_host_bytes_find(table: *const GtBytesTable, bytes: *const u8, n: u32) -> u32;
    fn gt_host_find(pattern: u32, text: *const u8, end: u32, pos: u32, start: *mut u32) -> u32;
    fn gt_host_chain_words(
        chain: *const GtChain,
        text: *const u8,
        n: u32,
        word: unsafe extern "C" fn(*mut c_void, u32, u32),
        ctx: *mut c_void,
    );
    fn gt_host_step_ranges(
        step: *const GtChainStep,
        text: *const u8,
        n: u32,
        range: unsafe extern "C" fn(*mut c_void, u32, u32, i32),
        ctx: *mut c_void,
    );
    fn gt_host_behave(
        behavior: u32,
        ranges: *const u32,
        n: u32,
        piece: unsafe extern "C" fn(*mut c_void, u32, u32),
        ctx: *mut c_void,
    );
    fn gt_host_rx_find(
        rx: *const GtRegex,
        text: *const u8,
        end: u32,
        pos: u32,
        start: *mut u32,
    ) -> u32;
    fn gt_host_wordpiece_text(
        model: *const GtWordPieceModel,
        text: *const u8,
        n: u32,
        scratch: GtWpScratch,
        ids: *mut u32,
        starts: *mut u32,
        ends: *mut u32,
    ) -> u32;
    fn gt_host_wp_needs_exact(model: *const GtWordPieceModel, text: *const u8, n: u32) -> i32;
    fn gt_host_wordpiece_words(
        model: *const GtWordPieceModel,
        text: *const u8,
        n: u32,
        norm: *mut u8,
        word: unsafe extern "C" fn(*mut c_void, *const u8, u32),
        ctx: *mut c_void,
    ) -> u32;
    fn gt_host_wordpiece_word(
        model: *const GtWordPieceModel,
        word: *const u8,
        n: u32,
        out: *mut u32,
    ) -> u32;
    fn gt_host_next_cut(text: *const u8, end: u32, from: u32) -> u32;
    fn gt_host_class(cp: u32) -> u32;
    fn gt_host_run(kernel: u32, args: *const u8, begin: u32, end: u32) -> i32;
    fn gt_host_run_checked(
        kernel: u32,
        args: *const u8,
        begin: u32,
        end: u32,
        check: *const GtLaneCheck,
        found: *mut GtLaneHazard,
    ) -> i32;
    fn gt_host_lane_counts(out: *mut GtLaneCounts);
    fn gt_host_struct_sizes(out: *mut u64, n: u32) -> u32;
    #[cfg(test)]
    fn gt_host_constants(out: *mut u32);
}

/// `GtChainStep.cuts`: the step keeps the words around a safe cut
/// (`gt_next_cut`), except that a piece across it is cut in two.
pub const CUT_KEEPS: u32 = 1;
/// ... and always has a piece boundary there (so no word crosses it).
pub const CUT_BOUNDS: u32 = 2;

impl GtChain {
    /// The chain of `steps`, or None if it is too long.
    pub fn new(steps: &[GtChainStep]) -> Option<Self> {
        let mut chain = GtChain {
            n: u32::try_from(steps.len()).ok()?,
            ..Default::default()
        };
        chain.steps.get_mut(..steps.len())?.copy_from_slice(steps);
        Some(chain)
    }

    /// Whether texts may be cut at safe points for this chain: every step up
    /// to one that bounds the cut keeps it (later steps then only split
    /// pieces that already end there).
    pub fn can_cut(&self) -> bool {
        for step in &self.steps[..(self.n as usize).min(self.steps.len())] {
            if step.cuts & CUT_KEEPS == 0 {
                return false;
            }
            if step.cuts & CUT_BOUNDS != 0 {
                return true;
            }
        }
        false
    }
}

/// The kernels' word callback for `emit` (`ctx`: a `&mut F`), generic so
/// that it calls `emit` directly (inlined: one call per word from the
/// kernel, none through a `dyn`).
unsafe extern "C" fn emit_word<F: FnMut(usize, usize)>(ctx: *mut c_void, start: u32, end: u32) {
    // SAFETY: `ctx` is the `&mut F` its caller passed with this callback, alive for the call.
    let emit = unsafe { &mut *ctx.cast::<F>() };
    emit(start as usize, end as usize);
}

/// Calls `emit(start, end)` for each word of `text` after the Split chain
/// (`gt_chain_words`). The chain's tables must be host memory.
pub fn chain_words<F: FnMut(usize, usize)>(chain: &GtChain, text: &str, emit: &mut F) {
    assert!(text.len() < NONE as usize, "pieces are limited to 4 GiB");
    // SAFETY: `text` is valid UTF-8 of the given length; the chain's tables
    // are live host arrays (its owner's); the callback context outlives the
    // call and is only used during it.
    unsafe {
        gt_host_chain_words(
            chain,
            text.as_ptr(),
            text.len() as u32,
            emit_word::<F>,
            (emit as *mut F).cast(),
        )
    }
}

/// Whether `text` holds a CJK character or kana (`gt_has_cjk`).
pub fn has_cjk(text: &[u8]) -> bool {
    let n = text.len().min(NONE as usize - 1) as u32;
    // SAFETY: `text` is readable for `n <= text.len()` bytes.
    unsafe { gt_host_has_cjk(text.as_ptr(), n) != 0 }
}

/// `chain_words`, each run of CJK characters cut into the pieces that merge
/// on their own (`gt_bpe_cut`: `model`'s atoms, `pairs` the characters some
/// token holds side by side), as words of their own. The tables must be host
/// memory.
pub fn chain_pieces<F: FnMut(usize, usize)>(
    chain: &GtChain,
    (model, pairs): (&GtBpeModel, &GtPairBits),
    text: &str,
    emit: &mut F,
) {
    assert!(text.len() < NONE as usize, "pieces are limited to 4 GiB");
    // SAFETY: as in `chain_words`; the model's atoms and the pair table are
    // live host arrays (their owner's), the pair table with free slots.
    unsafe {
        gt_host_chain_pieces(
            chain,
            model,
            pairs,
            text.as_ptr(),
            text.len() as u32,
            emit_word::<F>,
            (emit as *mut F).cast(),
        )
    }
}

/// Calls `emit(start, end, is_match)` for the matches of one Split step in
/// `text` and the gaps between them (`gt_step_ranges`, before the step's
/// behaviour); nothing for an empty text.
pub fn step_ranges(step: &GtChainStep, text: &str, emit: &mut dyn FnMut(usize, usize, bool)) {
    unsafe extern "C" fn range(ctx: *mut c_void, start: u32, end: u32, is_match: i32) {
        // SAFETY: `ctx` is the `&mut &mut dyn FnMut` passed below, alive for the call.
        let emit = unsafe { &mut *ctx.cast::<&mut dyn FnMut(usize, usize, bool)>() };
        emit(start as usize, end as usize, is_match != 0);
    }
    assert!(text.len() < NONE as usize, "pieces are limited to 4 GiB");
    if text.is_empty() {
        return;
    }
    let mut emit = emit;
    // SAFETY: as in `chain_words`.
    unsafe {
        gt_host_step_ranges(
            step,
            text.as_ptr(),
            text.len() as u32,
            range,
            (&mut emit as *mut &mut dyn FnMut(usize, usize, bool)).cast(),
        )
    }
}

/// The pieces a Split behaviour (`GtChainStep.behavior`) makes of `ranges`
/// (start, end, is_match, in order: a step's matches and gaps), empty ones
/// dropped (`GtBehave`).
pub fn behave(behavior: u32, ranges: &[(usize, usize, bool)]) -> Vec<(usize, usize)> {
    unsafe extern "C" fn piece(ctx: *mut c_void, start: u32, end: u32) {
        // SAFETY: `ctx` is the `&mut Vec` passed below, alive for the call.
        let out = unsafe { &mut *ctx.cast::<Vec<(usize, usize)>>() };
        if end > start {
            out.push((start as usize, end as usize));
        }
    }
    let flat: Vec<u32> = ranges
        .iter()
        .flat_map(|&(a, b, m)| [a as u32, b as u32, u32::from(m)])
        .collect();
    let mut out: Vec<(usize, usize)> = Vec::new();
    // SAFETY: `flat` holds ranges.len() triples; the callback context is
    // `out`, alive for the call.
    unsafe {
        gt_host_behave(
            behavior,
            flat.as_ptr(),
            ranges.len() as u32,
            piece,
            (&mut out as *mut Vec<(usize, usize)>).cast(),
        )
    };
    out
}

/// The leftmost match of a compiled pattern in `text` at or after byte
/// `pos` (a character boundary, at most `text.len()`), as (start, end).
pub fn rx_find(rx: &GtRegex, text: &str, pos: usize) -> Option<(usize, usize)> {
    assert!(text.len() < NONE as usize && pos <= text.len() && text.is_char_boundary(pos));
    let mut start = 0u32;
    // SAFETY: `text` is valid UTF-8, `pos` a boundary in it; the tables are
    // live host arrays (the view's owner's); the scan reads only inside text.
    let end =
        unsafe { gt_host_rx_find(rx, text.as_ptr(), text.len() as u32, pos as u32, &mut start) };
    (end != NONE).then_some((start as usize, end as usize))
}

/// The scanners' class bits of code point `cp` (`gt_class`; GT_L, GT_N...).
pub fn unicode_class(cp: u32) -> u32 {
    // SAFETY: a pure lookup, any value (out of range gives 0).
    unsafe { gt_host_class(cp) }
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

/// The first SentencePiece cut of `text` at or after `from` (>= 1), or
/// `text.len()` (`gt_spm_next_cut`: where BPE on each side is BPE on the whole).
pub fn spm_next_cut(cuts: &GtSpmCuts, text: &str, from: usize) -> usize {
    assert!(from >= 1 && text.len() < NONE as usize);
    if from >= text.len() {
        return text.len();
    }
    // SAFETY: `text` is valid UTF-8 (so byte 0 starts a character) and the
    // search reads only inside it; `cuts` points to live tables (its owner's).
    unsafe { gt_host_spm_next_cut(cuts, text.as_ptr(), text.len() as u32, from as u32) as usize }
}

/// Unicode White_Space (`gt_is_white_space`, the kernels' WhitespaceSplit test).
pub fn is_white_space(c: char) -> bool {
    // SAFETY: a pure function of its argument.
    unsafe { gt_host_is_white_space(c as u32) != 0 }
}

/// True when a SentencePiece word may end between `a` and `b` (`gt_spm_cut_between`).
#[cfg(test)]
pub fn spm_cut_between(cuts: &GtSpmCuts, a: char, b: char) -> bool {
    // SAFETY: `cuts` points to live tables (its owner's), or is disabled and
    // then still readable (the lookups read only inside its tables).
    unsafe { gt_host_spm_cut_between(cuts, a as u32, b as u32) != 0 }
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

/// Per-thread scratch for `bpe_word`, grown to the longest word seen, and
/// for `bpe_words`.
#[derive(Default)]
pub struct Scratch {
    ids: Vec<u32>,
    prev: Vec<i32>,
    next: Vec<i32>,
    heap: Vec<GtMergeEntry>,
    turns: Turns,
}

/// The arrays `gt_bpe_words_turns` reads and writes.
#[derive(Default)]
struct Turns {
    starts: Vec<u32>,
    lens: Vec<u32>,
    rooms: Vec<u32>,
    counts: Vec<u32>,
    out: Vec<u32>,
    /// Each word's id when it is one vocabulary token (ignore_merges), else NONE.
    whole: Vec<u32>,
}

/// Longest word (in bytes) `bpe_words` merges in turns (`GT_TURN_MAX`).
pub fn turn_max() -> usize {
    // SAFETY: returns a constant.
    unsafe { gt_host_turn_max() as usize }
}

/// Byte-level BPE of the words `text[start..end)` of `spans` with `model`
/// (`gt_bpe_word`'s ids): appends each word's ids to `ids` and their count
/// to `counts`, in order. Words of at most `turn_max()` bytes go through
/// the merge loop side by side (`gt_bpe_words_turns`), after the whole-word
/// lookup of the model's ignore_merges for those of `whole_from` bytes or
/// more (the caller has looked the shorter ones up). Longer words go through
/// `gt_bpe_word` one by one.
pub fn bpe_words(
    model: &GtBpeModel,
    whole_from: usize,
    text: &[u8],
    spans: &[(usize, usize)],
    scratch: &mut Scratch,
    ids: &mut Vec<u32>,
    counts: &mut Vec<u32>,
) {
    assert!(
        text.len() < u32::MAX as usize,
        "pieces are limited to 4 GiB"
    );
    let short = turn_max();
    let t = &mut scratch.turns;
    t.starts.clear();
    t.lens.clear();
    t.rooms.clear();
    t.whole.clear();
    let mut room = 0u32;
    for &(start, end) in spans {
        assert!(
            start < end && end <= text.len(),
            "a word must be a non-empty span of the text"
        );
        let whole = match model.ignore_merges != 0 && end - start >= whole_from {
            // SAFETY: the model's tables outlive the call; reads the word's bytes.
            true => unsafe {
                gt_host_bytes_find(&model.vocab, text[start..].as_ptr(), (end - start) as u32)
            },
            false => NONE,
        };
        t.whole.push(whole);
        if whole == NONE && end - start <= short {
            t.starts.push(start as u32);
            t.lens.push((end - start) as u32);
            t.rooms.push(room);
            room += (end - start) as u32;
        }
    }
    let k = t.lens.len();
    t.counts.clear();
    t.counts.resize(k, 0);
    t.out.clear();
    t.out.resize(room as usize, 0);
    if k > 0 {
        // SAFETY: each word lies inside `text` (checked) and has 1..=short
        // bytes; `out` holds each word's room (its length) at its offset;
        // `counts` holds k entries; the model's tables outlive the call.
        unsafe {
            gt_host_bpe_words_turns(
                model,
                text.as_ptr(),
                t.starts.as_ptr(),
                t.lens.as_ptr(),
                k as u32,
                t.out.as_mut_ptr(),
                t.rooms.as_ptr(),
                t.counts.as_mut_ptr(),
            )
        }
    }
    let mut turn = 0;
    for (i, &(start, end)) in spans.iter().enumerate() {
        let at = ids.len();
        if scratch.turns.whole[i] != NONE {
            ids.push(scratch.turns.whole[i]);
        } else if end - start <= short {
            let room = scratch.turns.rooms[turn] as usize;
            let count = scratch.turns.counts[turn] as usize;
            ids.extend_from_slice(&scratch.turns.out[room..room + count]);
            turn += 1;
        } else {
            bpe_word(model, &text[start..end], scratch, ids);
        }
        counts.push((ids.len() - at) as u32);
    }
}

impl Scratch {
    fn reserve(&mut self, n: usize) {
        if self.ids.len() < n {
            self.ids.resize(n, 0);
            self.prev.resize(n, 0);
            self.next.resize(n, 0);
            self.heap.resize(2 * n, GtMergeEntry::default());
        }
    }
}

/// The long words' schedules in use (`gt_bpe_rounds`' share): the CPU
/// backend's, and the devices' (a GPU's and the emulator's).
static HOST_SHARE: AtomicU32 = AtomicU32::new(ROUND_SHARE_HOST);
static DEVICE_SHARE: AtomicU32 = AtomicU32::new(ROUND_SHARE_GPU);
/// The largest share a test may set: 1/share of a long word's symbols is at least one.
pub const MAX_ROUND_SHARE: u32 = 1024;

/// The shares long words are merged with: (CPU backend, devices).
pub fn round_shares() -> (u32, u32) {
    (
        HOST_SHARE.load(Ordering::Relaxed),
        DEVICE_SHARE.load(Ordering::Relaxed),
    )
}

/// Sets the CPU backend's and the devices' shares (those given), so that
/// tests run each backend with the other's schedule; returns the previous
/// ones. Results never depend on them, only the work does.
pub fn set_round_shares(host: Option<u32>, device: Option<u32>) -> Result<(u32, u32), String> {
    for share in [host, device].into_iter().flatten() {
        if !(1..=MAX_ROUND_SHARE).contains(&share) {
            return Err(format!(
                "a round share must be between 1 and {MAX_ROUND_SHARE}, not {share}"
            ));
        }
    }
    let before = round_shares();
    if let Some(share) = host {
        HOST_SHARE.store(share, Ordering::Relaxed);
    }
    if let Some(share) = device {
        DEVICE_SHARE.store(share, Ordering::Relaxed);
    }
    Ok(before)
}

/// BPE of one word (`gt_bpe_word`): appends its ids to `out`.
pub fn bpe_word(model: &GtBpeModel, word: &[u8], scratch: &mut Scratch, out: &mut Vec<u32>) {
    let share = round_shares().0;
    // SAFETY: the model's tables outlive the call (owned by the plan);
    // gt_bpe_word writes at most n ids and uses only the scratch it is given.
    let done = unsafe {
        run_word(word, word.len(), scratch, out, |bytes, n, s, ids| {
            gt_host_bpe_word(model, bytes, n, s, ids, share)
        })
    };
    assert!(done, "word too long for the BPE kernel");
}

/// SentencePiece-style BPE of one word (`gt_spm_word`): appends its ids to
/// `out`. False, appending nothing, for a word over 1 GiB (the exact path).
pub fn spm_word(
    model: &GtSpmModel,
    word: &[u8],
    scratch: &mut Scratch,
    out: &mut Vec<u32>,
) -> bool {
    let share = round_shares().0;
    if word.len() >= u32::MAX as usize / 4 / (1 + AFFIX_MAX) {
        return false;
    }
    // SAFETY: reads the model's two affix lengths.
    let room = unsafe { gt_host_spm_room(model, word.len() as u32) } as usize;
    // SAFETY: as for `bpe_word`: gt_spm_word writes at most `room` ids
    // (gt_spm_room) and uses only the scratch it is given.
    unsafe {
        run_word(word, room, scratch, out, |bytes, n, s, ids| {
            gt_host_spm_word(model, bytes, n, s, ids, share)
        })
    }
}

/// Runs a per-word kernel given n bytes, scratch for `room` symbols (twice
/// as many heap entries) and room for `room` ids; it returns how many ids it
/// wrote. False, running nothing, for a word too long for the scratch's u32
/// indices.
///
/// # Safety
/// `kernel` must write at most `room` ids and use only the scratch it is given.
unsafe fn run_word(
    word: &[u8],
    room: usize,
    scratch: &mut Scratch,
    out: &mut Vec<u32>,
    kernel: impl FnOnce(*const u8, u32, GtBpeScratch, *mut u32) -> u32,
) -> bool {
    let n = word.len();
    if n == 0 {
        return true;
    }
    if room >= u32::MAX as usize / 4 {
        return false;
    }
    scratch.reserve(room);
    let at = out.len();
    out.resize(at + room, 0);
    let s = GtBpeScratch {
        ids: scratch.ids.as_mut_ptr(),
        prev: scratch.prev.as_mut_ptr(),
        next: scratch.next.as_mut_ptr(),
        heap: scratch.heap.as_mut_ptr(),
    };
    // SAFETY: `out` has room for the n ids past `at`.
    let count = kernel(word.as_ptr(), n as u32, s, unsafe {
        out.as_mut_ptr().add(at)
    });
    out.truncate(at + count as usize);
    true
}

/// Per-thread scratch for [`unigram_word`], grown to the longest word seen.
#[derive(Default)]
pub struct UnigramScratch {
    best: Vec<f64>,
    from: Vec<u32>,
    id: Vec<u32>,
}

/// Unigram of one word (`gt_unigram_word`): appends its ids to `out`.
/// Returns false, appending nothing, when a character has no token and the
/// model no unknown token (the crate may fail on such a word), or for a word
/// of 4 GiB: the exact path decides.
pub fn unigram_word(
    model: &GtUnigramModel,
    word: &[u8],
    scratch: &mut UnigramScratch,
    out: &mut Vec<u32>,
) -> bool {
    let n = word.len();
    if n >= u32::MAX as usize {
        return false; // the exact path
    }
    if scratch.best.len() <= n {
        scratch.best.resize(n + 1, 0.0);
        scratch.from.resize(n + 1, 0);
        scratch.id.resize(n + 1, 0);
    }
    let at = out.len();
    out.resize(at + n, 0);
    let s = GtUnigramScratch {
        best: scratch.best.as_mut_ptr(),
        from: scratch.from.as_mut_ptr(),
        id: scratch.id.as_mut_ptr(),
    };
    // SAFETY: the model's tables outlive the call (owned by the plan); the
    // scratch holds n + 1 entries per array and `out` room for the n ids the
    // kernel writes at most.
    let count = unsafe {
        gt_host_unigram_word(model, word.as_ptr(), n as u32, s, out.as_mut_ptr().add(at))
    };
    if count == NONE {
        out.truncate(at);
        return false;
    }
    out.truncate(at + count as usize);
    true
}

/// The words of `text` after WordPiece's normalizer and pre-tokenizer (whose
/// normalized form is at most `growth` times as long), each passed to `emit`
/// (`gt_chars_normalize`, `gt_wp_words`). False, calling nothing, when only the
/// exact path can encode the text.
pub fn wordpiece_words(
    model: &GtWordPieceModel,
    growth: usize,
    text: &[u8],
    scratch: &mut WordPieceScratch,
    emit: &mut dyn FnMut(&[u8]),
) -> bool {
    unsafe extern "C" fn word(ctx: *mut c_void, bytes: *const u8, n: u32) {
        // SAFETY: `ctx` is the `&mut &mut dyn FnMut` passed below, alive for the call.
        let emit = unsafe { &mut *ctx.cast::<&mut dyn FnMut(&[u8])>() };
        // SAFETY: `bytes` points at n bytes of the normalized scratch, alive for the call.
        emit(unsafe { std::slice::from_raw_parts(bytes, n as usize) });
    }
    let room = text.len() * growth;
    if room >= u32::MAX as usize {
        return false; // the exact path
    }
    if scratch.norm.len() < room {
        scratch.norm.resize(room, 0);
    }
    let mut emit = emit;
    // SAFETY: the model's tables outlive the call; norm holds `room` bytes, the
    // most the normalized text takes; the callback context outlives the call.
    let k = unsafe {
        gt_host_wordpiece_words(
            model,
            text.as_ptr(),
            text.len() as u32,
            scratch.norm.as_mut_ptr(),
            word,
            (&mut emit as *mut &mut dyn FnMut(&[u8])).cast(),
        )
    };
    k != NONE
}

/// WordPiece of one normalized word (`gt_wordpiece_word`): appends its ids.
pub fn wordpiece_word(model: &GtWordPieceModel, word: &[u8], out: &mut Vec<u32>) {
    let n = u32::try_from(word.len()).expect("word over 4 GiB");
    let at = out.len();
    // A word's tokens each take at least one of its characters (or it is one [UNK]).
    out.resize(at + word.len().max(1), 0);
    // SAFETY: the model's tables outlive the call; `out` has room for the
    // word's tokens past `at`.
    let count =
        unsafe { gt_host_wordpiece_word(model, word.as_ptr(), n, out.as_mut_ptr().add(at)) };
    out.truncate(at + count as usize);
}

/// True when `text` holds a code point that only the exact path encodes
/// (`gt_wp_needs_exact`).
pub fn wordpiece_needs_exact(model: &GtWordPieceModel, text: &[u8]) -> bool {
    let Ok(n) = u32::try_from(text.len()) else {
        return true; // over 4 GiB: the host's exact path
    };
    // SAFETY: the model's tables outlive the call (owned by the plan); reads n bytes of text.
    unsafe { gt_host_wp_needs_exact(model, text.as_ptr(), n) != 0 }
}

/// `text` through a per-code-point table (`gt_chars_normalize`) whose
/// output is at most `growth` bytes per byte of input: Some(None) when the
/// table leaves it as it is, None at a code point it flags (or for a text of
/// 4 GiB).
pub fn chars_normalize(table: &GtCharTable, growth: usize, text: &str) -> Option<Option<String>> {
    u32::try_from(text.len().checked_mul(growth)?).ok()?;
    // SAFETY: the table's arrays outlive the call (owned by the plan); reads
    // the text's bytes.
    let kept = unsafe { gt_host_chars_kept(table, text.as_ptr(), text.len() as u32, 0) } as usize;
    if kept == text.len() {
        return Some(None);
    }
    let rest = &text.as_bytes()[kept..];
    let mut out = Vec::with_capacity(kept + rest.len() * growth);
    out.extend_from_slice(&text.as_bytes()[..kept]);
    // SAFETY: `out` has room for `growth` bytes per byte of `rest` past
    // `kept` (the most the table writes); without spans the kernel writes no
    // from/to.
    let written = unsafe {
        gt_host_chars_normalize(
            table,
            rest.as_ptr(),
            rest.len() as u32,
            out.as_mut_ptr().add(kept),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if written == NONE {
        return None;
    }
    // SAFETY: the kernel wrote `written` bytes past `kept`.
    unsafe { out.set_len(kept + written as usize) };
    // The table writes whole characters: kept ones and valid UTF-8 replacements.
    String::from_utf8(out).ok().map(Some)
}

/// [`chars_normalize`] with the span in `text` of the code point each output
/// byte comes from (`from`, `to`); the output even when unchanged. None at
/// a code point the table flags.
pub fn chars_normalize_aligned(
    table: &GtCharTable,
    growth: usize,
    text: &str,
) -> Option<(String, Vec<u32>, Vec<u32>)> {
    let room = u32::try_from(text.len().checked_mul(growth)?).ok()? as usize;
    let (mut out, mut from, mut to) = (vec![0u8; room], vec![0u32; room], vec![0u32; room]);
    // SAFETY: the table's arrays outlive the call; out, from and to hold
    // `growth` entries per byte of text, the most the table writes.
    let written = unsafe {
        gt_host_chars_normalize(
            table,
            text.as_ptr(),
            text.len() as u32,
            out.as_mut_ptr(),
            from.as_mut_ptr(),
            to.as_mut_ptr(),
        )
    };
    if written == NONE {
        return None;
    }
    let written = written as usize;
    out.truncate(written);
    from.truncate(written);
    to.truncate(written);
    Some((String::from_utf8(out).ok()?, from, to))
}

/// Per-thread buffers for [`wordpiece_text`], grown to the longest text seen.
#[derive(Default)]
pub struct WordPieceScratch {
    norm: Vec<u8>,
    from: Vec<u32>,
    to: Vec<u32>,
    starts: Vec<u32>,
    ends: Vec<u32>,
}

/// WordPiece of one text (`gt_wordpiece_text`) whose normalized form is at
/// most `growth` times as long: appends its ids to `ids` and, with `spans`,
/// each token's byte span in `text` plus `base`. Returns false, appending
/// nothing, when only the exact path can encode the text.
pub fn wordpiece_text(
    model: &GtWordPieceModel,
    growth: usize,
    text: &[u8],
    scratch: &mut WordPieceScratch,
    ids: &mut Vec<u32>,
    spans: Option<&mut Vec<(usize, usize)>>,
    base: usize,
) -> bool {
    let room = text.len() * growth;
    assert!(
        room < u32::MAX as usize,
        "text too long for the WordPiece kernel"
    );
    if scratch.norm.len() < room {
        scratch.norm.resize(room, 0);
    }
    if spans.is_some() && scratch.from.len() < room {
        for v in [
            &mut scratch.from,
            &mut scratch.to,
            &mut scratch.starts,
            &mut scratch.ends,
        ] {
            v.resize(room, 0);
        }
    }
    let at = ids.len();
    ids.resize(at + room, 0);
    let with_spans = spans.is_some();
    let buffers = GtWpScratch {
        norm: scratch.norm.as_mut_ptr(),
        from: scratch.from.as_mut_ptr(),
        to: scratch.to.as_mut_ptr(),
    };
    let (starts, ends) = match with_spans {
        true => (scratch.starts.as_mut_ptr(), scratch.ends.as_mut_ptr()),
        false => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    // SAFETY: the model's tables outlive the call (owned by the plan); norm,
    // ids (and with spans from/to/starts/ends) hold `room` entries, the most the
    // normalized text and its tokens can take; without spans the kernel never
    // touches from/to/starts/ends.
    let count = unsafe {
        gt_host_wordpiece_text(
            model,
            text.as_ptr(),
            text.len() as u32,
            buffers,
            ids.as_mut_ptr().add(at),
            starts,
            ends,
        )
    };
    if count == NONE {
        ids.truncate(at);
        return false;
    }
    let count = count as usize;
    ids.truncate(at + count);
    if let Some(spans) = spans {
        let pairs = scratch.starts[..count].iter().zip(&scratch.ends[..count]);
        spans.extend(pairs.map(|(&s, &e)| (base + s as usize, base + e as usize)));
    }
    true
}

/// One merge of `ids` (`gt_bpe_merge_step`), whose pairs' ranks are `ranks`
/// (NONE: no merge; one fewer than the ids): the lowest-ranked pair,
/// leftmost on ties, merged in place, both shortened by one; its rank, or
/// None (nothing changed) when no pair merges.
pub fn bpe_merge_step(
    table: &GtPairTable,
    ids: &mut Vec<u32>,
    ranks: &mut Vec<u32>,
) -> Option<u32> {
    assert!(!ids.is_empty() && ranks.len() + 1 == ids.len());
    let mut n = ids.len() as u32;
    // SAFETY: `ids` holds n symbols and `ranks` n - 1 ranks, as the step
    // reads and writes; the table's slots are live (its owner's).
    let rank =
        unsafe { gt_host_bpe_merge_step(table, ids.as_mut_ptr(), ranks.as_mut_ptr(), &mut n) };
    ids.truncate(n as usize);
    ranks.truncate(n as usize - 1);
    (rank != NONE).then_some(rank)
}

/// Whether `word` starts a run of CJK characters (`gt_cjk_led`).
pub fn cjk_led(word: &[u8]) -> bool {
    let byte = |i: usize| word.get(i).copied().map_or(0, u32::from);
    // SAFETY: a pure function of two integers.
    !word.is_empty() && unsafe { gt_host_cjk_led(byte(0), byte(1)) != 0 }
}

/// Rank of the pair (left, right) in a pair table (`gt_pair_rank`), or None.
pub fn pair_rank(table: &GtPairTable, left: u32, right: u32) -> Option<u32> {
    // SAFETY: `table` views live slots (its owner's) with free slots left, so
    // the probe ends inside them.
    let rank = unsafe { gt_host_pair_rank(table, left, right) };
    (rank != NONE).then_some(rank)
}

/// A filter of (left, right) pairs (`GtPairBits`), owning its words: a
/// pair added is always "maybe"; one not added is "no" but for collisions.
pub struct PairBits {
    words: Vec<u64>,
    mask: u64,
}

impl PairBits {
    /// A filter of `pairs` with about `bits_per_pair` bits for each (a
    /// power of two, at least 4096 in all: a few pairs collide seldom).
    pub fn of(pairs: impl ExactSizeIterator<Item = (u32, u32)>, bits_per_pair: usize) -> Self {
        let bits = (pairs.len() * bits_per_pair).next_power_of_two().max(4096);
        let mut filter = PairBits {
            words: vec![0; bits / 64],
            mask: bits as u64 - 1,
        };
        for (left, right) in pairs {
            // SAFETY: `words` holds (mask + 1) / 64 words, which every bit the mask keeps indexes.
            unsafe { gt_host_pair_bits_add(filter.words.as_mut_ptr(), filter.mask, left, right) };
        }
        filter
    }

    /// The C view (borrowing the words).
    pub fn view(&self) -> GtPairBits {
        GtPairBits {
            words: self.words.as_ptr(),
            mask: self.mask,
        }
    }

    /// Whether the pair may be in the set (`gt_pair_maybe`).
    pub fn maybe(&self, left: u32, right: u32) -> bool {
        // SAFETY: the view borrows live words sized for its mask.
        unsafe { gt_host_pair_maybe(&self.view(), left, right) != 0 }
    }
}

/// Inserts a pair into a pair table (`gt_pair_insert`); the last insert of a
/// pair wins. Ids must be below `PAIR_ID_LIMIT` and the rank below
/// `PAIR_RANK_LIMIT` (checked: the packed slot has no room for more).
pub fn pair_insert(slots: &mut [GtPairSlot], pair: (u32, u32), rank: u32) {
    assert!(slots.len().is_power_of_two());
    assert!(pair.0 < PAIR_ID_LIMIT && pair.1 < PAIR_ID_LIMIT && rank < PAIR_RANK_LIMIT);
    // SAFETY: a power-of-two slot array (checked) that the caller sized to keep
    // free slots, so the probe ends inside it.
    unsafe {
        gt_host_pair_insert(
            slots.as_mut_ptr(),
            slots.len() as u64 - 1,
            pair.0,
            pair.1,
            rank,
        )
    }
}

/// Borrowed arrays of a [`BytesTable`].
pub struct BytesTableArrays<'a> {
    pub slots: &'a [GtBytesSlot],
    pub blob: &'a [u8],
    pub filter: &'a [u64],
}

/// Owned arrays of a byte-string table (see `GtBytesTable`).
pub struct BytesTable {
    slots: Vec<GtBytesSlot>,
    blob: Vec<u8>,
    filter: Vec<u64>,
}

impl BytesTable {
    /// A table for (bytes, id) entries, each byte string given once.
    pub fn build<'a>(entries: impl ExactSizeIterator<Item = (&'a [u8], u32)>) -> Self {
        let capacity = (2 * entries.len()).next_power_of_two().max(2);
        // 16 filter bits per entry (at least one u64 word).
        let filter_bits = (16 * entries.len()).next_power_of_two().max(64);
        let mut t = BytesTable {
            slots: vec![GtBytesSlot::default(); capacity],
            blob: Vec::new(),
            filter: vec![0; filter_bits / 64],
        };
        for (bytes, id) in entries {
            let start = u32::try_from(t.blob.len()).expect("byte-string table over 4 GiB");
            let len = u32::try_from(bytes.len()).expect("a byte string over 4 GiB");
            t.blob.extend_from_slice(&len.to_le_bytes());
            t.blob.extend_from_slice(bytes);
            // SAFETY: a power-of-two slot array with at least half the slots free, and a
            // power-of-two filter of filter_bits bits.
            unsafe {
                gt_host_bytes_insert(
                    t.slots.as_mut_ptr(),
                    capacity as u64 - 1,
                    t.filter.as_mut_ptr(),
                    filter_bits as u64 - 1,
                    bytes.as_ptr(),
                    len,
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
            slots: self.slots.as_ptr(),
            blob: self.blob.as_ptr(),
            filter: self.filter.as_ptr(),
            mask: self.slots.len() as u64 - 1,
            filter_mask: 64 * self.filter.len() as u64 - 1,
        }
    }

    /// The arrays, for copying to a device.
    pub fn arrays(&self) -> BytesTableArrays<'_> {
        BytesTableArrays {
            slots: &self.slots,
            blob: &self.blob,
            filter: &self.filter,
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

/// Runs threads `[begin, end)` of batch kernel `kernel` as [`host_run`]
/// does, from the emulator's build (cuda/gt_host_checked.cpp): the lanes of
/// block-cooperative code run shuffled, phase by phase, and their shared
/// accesses are checked (cuda/gt_lane_check.h) as `check` asks. `begin` is a
/// multiple of `LANES` for a block-cooperative kernel. Returns what the check
/// found (`found` is 0 when nothing).
///
/// # Safety
/// As for [`host_run`].
pub unsafe fn host_run_checked(
    kernel: Kernel,
    args: &[u8],
    begin: u32,
    end: u32,
    check: &GtLaneCheck,
) -> GtLaneHazard {
    let mut found = GtLaneHazard {
        found: 0,
        write: 0,
        first: 0,
        second: 0,
        block: 0,
        phase: 0,
        syncs: 0,
        n_barriers: 0,
        barriers: [0; super::abi::LANE_BARRIERS],
    };
    // SAFETY: the caller's contract; `check` and `found` are live structs of the C layout.
    let rc = unsafe {
        gt_host_run_checked(
            kernel.number(),
            args.as_ptr(),
            begin,
            end,
            check,
            &mut found,
        )
    };
    assert_eq!(rc, 0, "the host build lacks kernel {}", kernel.name());
    found
}

/// What the calling thread's last [`host_run_checked`] counted (all zero
/// unless its check asked to count).
pub fn host_lane_counts() -> GtLaneCounts {
    let mut counts = GtLaneCounts {
        read_sectors: 0,
        write_sectors: 0,
        threads: 0,
        working: 0,
        tail: 0,
        atomics: 0,
        atomics_untracked: 0,
        n_atomic_words: 0,
        _pad: 0,
        atomic_word: [0; super::abi::COUNT_ATOMIC_WORDS],
        atomic_hits: [0; super::abi::COUNT_ATOMIC_WORDS],
    };
    // SAFETY: writes one struct of the C layout, from this thread's own state.
    unsafe { gt_host_lane_counts(&mut counts) };
    counts
}

/// The C compiler's sizes of the mirrored structs, in the order of
/// `gt_host_struct_sizes` (cuda/gt_host.cpp).
pub fn c_struct_sizes() -> Vec<u64> {
    let mut sizes = vec![0u64; 40];
    // SAFETY: writes at most `sizes.len()` entries.
    let n = unsafe { gt_host_struct_sizes(sizes.as_mut_ptr(), sizes.len() as u32) };
    sizes.truncate(n as usize);
    sizes
}

/// The C side's `GT_WORK_CLASSES`, `GT_LANES`, `GT_LONG_WORD`,
/// `GT_ROUND_SHARE_HOST`, `GT_ROUND_SHARE_GPU` and `GT_HOST_LONG_WORD`,
/// which Rust mirrors.
#[cfg(test)]
pub fn c_constants() -> [u32; 6] {
    let mut out = [0u32; 6];
    // SAFETY: writes 6 entries.
    unsafe { gt_host_constants(out.as_mut_ptr()) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::plan::bytelevel::{chain_of, pattern_of, SplitEngine};

    /// The scanner chains of the real families (GT_PAT_* in cuda/gt_pretok.cuh).
    const CHAINS: [&[u32]; 5] = [&[1], &[2], &[3], &[4], &[5, 6, 7]];

    /// The chain of the scanners' patterns, run by `engine`.
    fn chain(
        ids: &[u32],
        engine: SplitEngine,
    ) -> (Vec<crate::plan::bytelevel::SplitStep>, GtChain) {
        let patterns: Vec<&str> = ids.iter().map(|&id| pattern_of(id)).collect();
        chain_of(&patterns, engine)
    }

    fn words(chain: &GtChain, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        chain_words(chain, text, &mut |a, b| out.push(text[a..b].to_string()));
        out
    }

    /// Runs of CJK characters come in pieces where two neighbouring atoms
    /// are no pair the table holds, and only there; other words, and a text
    /// without a CJK lead byte, come whole.
    #[test]
    fn chain_pieces_cut_runs_of_atoms_where_no_pair_is_held() {
        let (_steps, chain) = chain(&[3], SplitEngine::Scanner);
        // Atoms (id = code point, no flags) for four characters, and one pair held.
        let mut atoms = vec![crate::plan::char_atoms::ATOM_ID; crate::plan::char_atoms::CHARS];
        for c in ['\u{4e2d}', '\u{6587}', '\u{5b57}', '\u{306e}'] {
            atoms[c as usize] = c as u32;
        }
        let model = GtBpeModel {
            char_atoms: atoms.as_ptr(),
            ..GtBpeModel::null()
        };
        let held = ('\u{4e2d}' as u32, '\u{6587}' as u32);
        let pairs = PairBits::of([held].into_iter(), 4096);
        // The filter holds the pair, and (by its size) none of the others here.
        let chars = ['\u{4e2d}', '\u{6587}', '\u{5b57}', '\u{306e}', '\u{7a7a}'].map(u32::from);
        for a in chars {
            for b in chars {
                assert_eq!(pairs.maybe(a, b), (a, b) == held, "{a:x} {b:x}");
            }
        }
        let pairs = pairs.view();
        let pieces = |text: &str| {
            let mut out = Vec::new();
            chain_pieces(&chain, (&model, &pairs), text, &mut |a, b| {
                out.push(text[a..b].to_string())
            });
            out
        };
        // A character without an atom (U+7A7A) is never beside a cut.
        assert_eq!(
            pieces("hello \u{4e2d}\u{6587}\u{5b57}\u{306e}\u{7a7a}\u{5b57}, \u{5b57}\u{5b57}"),
            [
                "hello",
                " \u{4e2d}\u{6587}",
                "\u{5b57}",
                "\u{306e}\u{7a7a}\u{5b57}",
                ",",
                " \u{5b57}",
                "\u{5b57}"
            ]
        );
        assert_eq!(
            pieces("plain words, no runs"),
            words(&chain, "plain words, no runs")
        );
    }

    #[test]
    fn cjk_leads_are_found_anywhere_and_only_there() {
        let run = "\u{4e2d}";
        for at in [0, 1, 63, 64, 65, 127, 200] {
            let text = format!("{}{run}{}", "a".repeat(at), "b".repeat(70));
            assert!(has_cjk(text.as_bytes()), "{at}");
        }
        // Latin, Cyrillic, Hangul (EA..ED) and emoji (F0) bytes are no CJK lead.
        assert!(!has_cjk(
            "plain \u{e9}\u{436} \u{d55c} \u{1f600}"
                .repeat(40)
                .as_bytes()
        ));
        assert!(!has_cjk(b""));
        assert!(cjk_led(run.as_bytes()) && cjk_led(format!(" {run}").as_bytes()));
        assert!(!cjk_led(b"word") && !cjk_led("\u{d55c}".as_bytes()) && !cjk_led(b""));
    }

    /// The cut rule is proven from each pattern's compiled automaton: the
    /// chains whose steps split at every space may be cut, the others not.
    #[test]
    fn only_chains_that_split_at_spaces_are_cut() {
        for ids in CHAINS {
            assert!(chain(ids, SplitEngine::Scanner).1.can_cut(), "{ids:?}");
        }
        for ids in [&[][..], &[5], &[6], &[5, 6]] {
            assert!(!chain(ids, SplitEngine::Scanner).1.can_cut(), "{ids:?}");
        }
        // Why: with digits alone, "ab cd" is one word; a cut at the space would make two.
        let (_steps, digits) = chain(&[5], SplitEngine::Scanner);
        assert_eq!(words(&digits, "ab cd"), ["ab cd"]);
        assert_eq!(next_cut(b"ab cd", 1), 2);
    }

    #[test]
    fn next_cut_is_the_first_space_after_a_character_that_is_not_white_space() {
        let rule = |t: &[u8], from: usize| {
            let before = |p: usize| {
                let start = (0..p).rev().find(|&i| t[i] & 0xC0 != 0x80).unwrap_or(0);
                std::str::from_utf8(&t[start..p]).ok()?.chars().next()
            };
            (from..t.len())
                .find(|&p| {
                    t[p] == b' '
                        && before(p).is_some_and(|c| match c.is_ascii() {
                            true => c.is_ascii_graphic(),
                            false => !c.is_whitespace(),
                        })
                })
                .unwrap_or(t.len())
        };
        // Spaces on each side of the 8-byte blocks, after what may not cut.
        for text in crate::test_texts::sample_texts(17)
            .into_iter()
            .chain((0..40).map(|n| {
                format!(
                    "{}a {}é \t {}\u{3000} \u{a0} я 😀 ",
                    "x".repeat(n),
                    "語".repeat(n % 7),
                    " ".repeat(n % 3)
                )
            }))
        {
            let bytes = text.as_bytes();
            for from in 1..bytes.len() {
                assert_eq!(
                    next_cut(bytes, from),
                    rule(bytes, from),
                    "{text:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn white_space_is_rusts_on_every_code_point() {
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(is_white_space(c), c.is_whitespace(), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn cutting_at_safe_points_keeps_the_words() {
        for (ids, engine) in CHAINS
            .iter()
            .flat_map(|ids| [(ids, SplitEngine::Scanner), (ids, SplitEngine::Compiled)])
        {
            let (_steps, splits) = chain(ids, engine);
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
                assert_eq!(pieces, whole, "chain {ids:?} ({engine:?}) on {text:?}");
            }
        }
    }
}
