//! CUDA backend. Today: the probe that says whether a driver and NVRTC are
//! there, without ever crashing a GPU-less host. The kernels, buffers and
//! streams land with the CUDA backend issue.

pub mod probe;
pub mod sources;
