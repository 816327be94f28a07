//! The batch kernels of `cuda/gt_batch.cuh`: their numbering and `#[repr(C)]`
//! mirrors of their argument structs. Pointers are device addresses (`u64`)
//! on a GPU and host addresses under the emulator; layouts must match the
//! C structs field for field: sizes are checked here
//! (`mirrors_match_the_c_layout`), and field order by the emulator's parity
//! tests, where the host build of the kernels reads these structs with the C
//! layout (a swapped pair of fields gives wrong ids).

use crate::cpu::kernels::{GtBpeModel, GtSplits};

/// The kernels, in the order of `GT_BATCH_KERNELS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    PretokCount,
    PretokFill,
    BpeWords,
    Compact,
    ScanSum,
    ScanApply,
    RowSpans,
    Pack,
}

impl Kernel {
    pub const ALL: [Kernel; 8] = [
        Kernel::PretokCount,
        Kernel::PretokFill,
        Kernel::BpeWords,
        Kernel::Compact,
        Kernel::ScanSum,
        Kernel::ScanApply,
        Kernel::RowSpans,
        Kernel::Pack,
    ];

    /// The `__global__` function's name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::PretokCount => "gt_pretok_count",
            Kernel::PretokFill => "gt_pretok_fill",
            Kernel::BpeWords => "gt_bpe_words",
            Kernel::Compact => "gt_compact",
            Kernel::ScanSum => "gt_scan_sum",
            Kernel::ScanApply => "gt_scan_apply",
            Kernel::RowSpans => "gt_row_spans",
            Kernel::Pack => "gt_pack",
        }
    }

    /// Position in `GT_BATCH_KERNELS` (the emulator's kernel number).
    pub fn number(self) -> u32 {
        Kernel::ALL.iter().position(|&k| k == self).unwrap_or(0) as u32
    }
}

/// A device (or emulated) address.
pub type DevPtr = u64;

/// Argument structs: plain old data, passed to a kernel by value.
///
/// # Safety
/// Implementors are `#[repr(C)]` mirrors of the kernel's C struct.
pub unsafe trait KernelArgs: Copy {
    fn as_bytes(&self) -> &[u8] {
        super::device::as_bytes(std::slice::from_ref(self))
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtPretokArgs {
    pub splits: GtSplits,
    pub text: DevPtr,
    pub piece_bounds: DevPtr,
    pub word_counts: DevPtr,
    pub first_word: DevPtr,
    pub word_starts: DevPtr,
    pub word_lens: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtBpeArgs {
    pub model: GtBpeModel,
    pub text: DevPtr,
    pub word_starts: DevPtr,
    pub word_lens: DevPtr,
    pub scratch_ids: DevPtr,
    pub scratch_prev: DevPtr,
    pub scratch_next: DevPtr,
    pub scratch_len: DevPtr,
    pub scratch_heap: DevPtr,
    pub out: DevPtr,
    pub tok_counts: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtCompactArgs {
    pub word_starts: DevPtr,
    pub tok_offsets: DevPtr,
    pub bpe_out: DevPtr,
    pub raw_ids: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtScanArgs {
    pub values: DevPtr,
    pub tile_sums: DevPtr,
    pub n: u32,
    pub tile: u32,
}

/// `GT_MAX_TEMPLATE`.
pub const MAX_TEMPLATE: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GtTemplate {
    pub n_prefix: u32,
    pub n_suffix: u32,
    pub ids: [u32; MAX_TEMPLATE],
    pub type_ids: [u32; MAX_TEMPLATE],
    pub seq_type_id: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct GtRowSource {
    pub piece_begin: u32,
    pub piece_end: u32,
    pub host_begin: u32,
    pub host_end: u32,
}

/// Mirror of `GtRowSpan` (only its size matters on the host).
pub const ROW_SPAN_BYTES: usize = 6 * 4;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtRowArgs {
    pub sources: DevPtr,
    pub first_word: DevPtr,
    pub tok_offsets: DevPtr,
    pub tmpl: GtTemplate,
    pub truncate: u32,
    pub max_seq: u32,
    pub truncate_left: u32,
    pub spans: DevPtr,
    pub lengths: DevPtr,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GtPackArgs {
    pub spans: DevPtr,
    pub lengths: DevPtr,
    pub row_starts: DevPtr,
    pub n_rows: u32,
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

// SAFETY: each is a repr(C) mirror of the C struct of the same name in cuda/gt_batch.cuh.
unsafe impl KernelArgs for GtPretokArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for GtBpeArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for GtCompactArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for GtScanArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for GtRowArgs {}
// SAFETY: as above.
unsafe impl KernelArgs for GtPackArgs {}

extern "C" {
    fn gt_host_run(kernel: u32, args: *const u8, begin: u32, end: u32) -> i32;
    fn gt_host_args_sizes(out: *mut u64, n: u32) -> u32;
}

/// Runs threads `[begin, end)` of `kernel` on the host (the emulator).
///
/// # Safety
/// `args` must be the kernel's argument struct, whose addresses are host
/// memory sized for the kernel's threads.
pub unsafe fn host_run(kernel: Kernel, args: &[u8], begin: u32, end: u32) {
    // SAFETY: the caller's contract.
    let rc = unsafe { gt_host_run(kernel.number(), args.as_ptr(), begin, end) };
    assert_eq!(rc, 0, "the host build lacks kernel {}", kernel.name());
}

/// The C sizes of the argument structs in kernel order, then of `GtRowSpan`
/// and `GtMergeEntry`.
pub fn c_struct_sizes() -> Vec<u64> {
    let mut sizes = vec![0u64; Kernel::ALL.len() + 2];
    // SAFETY: writes at most `sizes.len()` entries.
    let n = unsafe { gt_host_args_sizes(sizes.as_mut_ptr(), sizes.len() as u32) };
    sizes.truncate(n as usize);
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn mirrors_match_the_c_layout() {
        let rust = [
            size_of::<GtPretokArgs>(),
            size_of::<GtPretokArgs>(),
            size_of::<GtBpeArgs>(),
            size_of::<GtCompactArgs>(),
            size_of::<GtScanArgs>(),
            size_of::<GtScanArgs>(),
            size_of::<GtRowArgs>(),
            size_of::<GtPackArgs>(),
            ROW_SPAN_BYTES,
            size_of::<crate::cpu::kernels::GtMergeEntry>(),
        ];
        let c: Vec<usize> = c_struct_sizes().into_iter().map(|s| s as usize).collect();
        assert_eq!(c, rust);
    }
}
