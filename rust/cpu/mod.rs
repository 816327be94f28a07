//! CPU backend. For now it owns the engine's thread pool; the per-word kernels
//! compiled from `cuda/*.cuh` join it with the fast engine.

pub mod kernels;
pub mod pool;
pub mod word_cache;
