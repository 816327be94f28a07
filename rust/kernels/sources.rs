//! The kernel sources built into the binary, and the kernels they define. The
//! CUDA backend compiles them with NVRTC at first use (`cuda::jit`); CI compile-checks
//! them with the pip NVRTC wheel (`tests/test_kernels_nvrtc.py`) so a kernel
//! that does not compile never lands.

use super::abi::Kernel;

/// Every kernel header and source file, as (file name, text).
pub const FILES: [(&str, &str); 13] = [
    ("gt_common.cuh", include_str!("../../cuda/gt_common.cuh")),
    ("gt_hash.cuh", include_str!("../../cuda/gt_hash.cuh")),
    ("gt_bpe.cuh", include_str!("../../cuda/gt_bpe.cuh")),
    (
        "gt_unicode_table.cuh",
        include_str!("../../cuda/gt_unicode_table.cuh"),
    ),
    ("gt_pretok.cuh", include_str!("../../cuda/gt_pretok.cuh")),
    (
        "gt_normalize.cuh",
        include_str!("../../cuda/gt_normalize.cuh"),
    ),
    ("gt_regex.cuh", include_str!("../../cuda/gt_regex.cuh")),
    ("gt_chain.cuh", include_str!("../../cuda/gt_chain.cuh")),
    ("gt_spm.cuh", include_str!("../../cuda/gt_spm.cuh")),
    ("gt_unigram.cuh", include_str!("../../cuda/gt_unigram.cuh")),
    (
        "gt_wordpiece.cuh",
        include_str!("../../cuda/gt_wordpiece.cuh"),
    ),
    ("gt_batch.cuh", include_str!("../../cuda/gt_batch.cuh")),
    ("gt_batch.cu", include_str!("../../cuda/gt_batch.cu")),
];

/// The one translation unit: every batch kernel is in it.
pub const UNIT: &str = "gt_batch.cu";

/// The `.cu` translation units and the `__global__` kernels each defines.
pub fn kernels() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![(UNIT, Kernel::ALL.iter().map(|k| k.name()).collect())]
}
