//! CUDA backend. So far: the probe that says whether a driver and NVRTC are
//! there, without ever crashing a GPU-less host, and the kernel sources built
//! into the binary. Device tables, launches, buffers and streams are still to
//! come; until then `device="cuda"` raises `CudaUnavailableError`.

pub mod probe;
pub mod sources;
