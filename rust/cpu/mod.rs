//! CPU backend: the engine's fork-aware thread pool, the host build of the
//! shared kernel logic (`cuda/*.cuh`, called through `kernels`), and the
//! per-thread word cache in front of the BPE kernel.

pub mod kernels;
pub mod pool;
pub mod word_cache;
