//! CUDA backend. The batch pipeline (`pipeline`) is written once against the
//! [`stream::DeviceStream`] trait, which `device` implements once, over a
//! [`device::Driver`]: the CUDA driver (`driver`, cudarc) on a GPU or, for
//! tests on machines without one, the emulator's (`emulated`, wrapped by
//! `emulator`), whose streams run asynchronously with a hazard checker and
//! whose launches run the very same kernel functions thread by thread. Kernels (`crate::kernels`) come prebuilt with the package
//! (`prebuilt`) or are compiled at first use by NVRTC and cached on disk
//! (`jit`); the probe (`probe`) decides, without ever crashing, whether a GPU
//! is usable.
//!
//! Imports inside: pipeline -> stream <- device <- {driver, emulated} <- emulator;
//! driver -> prebuilt -> jit, probe.

pub mod device;
pub mod driver;
pub mod emulated;
pub mod emulator;
pub mod jit;
pub mod pipeline;
pub mod prebuilt;
pub mod probe;
pub mod stream;
