//! The kernel ABI: the bottom layer every other module builds on.
//!
//! The logic of every hot stage is written once, in `cuda/*.cuh`. This layer
//! is everything Rust needs to call it, and nothing else:
//! - [`abi`]: `#[repr(C)]` mirrors of the C structs (checked for padding and
//!   size), the batch kernels' numbering and names, and [`abi::Pod`], the
//!   only way plain data is viewed as bytes;
//! - [`host`]: the host build of the kernels (`cuda/gt_host.cpp`, compiled by
//!   build.rs) behind safe wrappers: per-word BPE, scanners, safe cuts, the
//!   hash-table builders, and the batch kernels for the emulator;
//! - [`sources`]: the kernel sources built into the binary, for NVRTC.

pub mod abi;
pub mod host;
pub mod sources;

pub use abi::*;
pub use host::*;
