//! The kernel sources built into the binary, and the kernel names they define
//! (`gt_<stage>_<variant>`, kept here in one place). The CUDA backend compiles
//! them with NVRTC at first use; CI compile-checks them with the pip NVRTC
//! wheel (`tests/test_kernels_nvrtc.py`) so a kernel that does not compile
//! never lands.

/// Every kernel header and source file, as (file name, text).
pub const FILES: [(&str, &str); 7] = [
    ("gt_common.cuh", include_str!("../../cuda/gt_common.cuh")),
    ("gt_hash.cuh", include_str!("../../cuda/gt_hash.cuh")),
    ("gt_bpe.cuh", include_str!("../../cuda/gt_bpe.cuh")),
    (
        "gt_unicode_table.cuh",
        include_str!("../../cuda/gt_unicode_table.cuh"),
    ),
    ("gt_pretok.cuh", include_str!("../../cuda/gt_pretok.cuh")),
    ("gt_bpe.cu", include_str!("../../cuda/gt_bpe.cu")),
    ("gt_pretok.cu", include_str!("../../cuda/gt_pretok.cu")),
];

/// The `.cu` translation units and the `__global__` kernels each defines.
pub const KERNELS: [(&str, &[&str]); 2] = [
    ("gt_bpe.cu", &["gt_bpe_words"]),
    ("gt_pretok.cu", &["gt_pretok_count", "gt_pretok_fill"]),
];
