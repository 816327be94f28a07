//! CPU backend: one sequence at a time on the engine's threads, calling the
//! host build of the shared kernel logic (`crate::kernels`) per word, behind a
//! per-thread word cache.

pub mod encode;
pub mod word_cache;
