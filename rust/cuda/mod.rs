//! CUDA backend. The batch pipeline (`pipeline`) is written once against the
//! [`stream::DeviceStream`] trait and runs on a GPU through the driver
//! (`driver`, cudarc) or, for tests on machines without one, on the host
//! emulator (`emulator`), which runs the very same kernel functions thread by
//! thread. Kernels (`crate::kernels`) come prebuilt with the package
//! (`prebuilt`) or are compiled at first use by NVRTC and cached on disk
//! (`jit`); the probe (`probe`) decides, without ever crashing, whether a GPU
//! is usable.
//!
//! Imports inside: pipeline -> stream <- {driver, emulator}; driver -> prebuilt -> jit, probe.

pub mod driver;
pub mod emulator;
pub mod jit;
pub mod pipeline;
pub mod prebuilt;
pub mod probe;
pub mod stream;
