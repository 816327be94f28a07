//! The device seam: where a call runs, named once. The Python classes
//! (`crate::py`) ask the engine for a [`Device`] and never reach the backends
//! themselves; this module is the one place that turns a device string into a
//! backend (parsed here only: Python passes the user's string through), sets
//! up its stream, and decides what a device out of memory means for a call
//! that only wants host results (the CPU computes it instead, see
//! [`Engine::encode_on`]).
//!
//! The rest of what `py` shows of the device backend (the diagnostics of
//! `gpu_tok.info()`, the kernel build tools, DLPack's device buffers) is named
//! at the end of this file: the seam's whole surface in one list.

use super::{Engine, Input, Settings};
use crate::cuda::driver::{gpu, GpuStream};
use crate::cuda::emulator::Emulator;
use crate::error::{Error, Result};
use crate::layout::Batch;

/// Where a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU engine; results in host memory.
    Cpu,
    /// CUDA device `n`; results in its memory.
    Cuda(usize),
    /// The CUDA pipeline on the host (for tests): text bytes per chunk, and at
    /// most this much memory in use (allocations past it fail as out of memory).
    Emulator {
        chunk_bytes: usize,
        memory_limit: Option<usize>,
    },
}

/// The emulator's chunk when its spelling names none.
const EMULATOR_CHUNK: usize = 64 << 10;

impl Device {
    /// `"cpu"`, `"cuda"`, `"cuda:N"`, or `"emulator[:chunk_bytes[:memory_bytes]]"`,
    /// in any case and with spaces around. `"auto"` is not a device: it is the
    /// Python layer's choice between `"cpu"` and a GPU.
    pub fn parse(name: &str) -> Result<Device> {
        let bad = || {
            Error::InvalidArgument(format!(
                "device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not '{name}'"
            ))
        };
        let lower = name.trim().to_ascii_lowercase();
        let mut parts = lower.split(':');
        let mut number = || -> Result<Option<usize>> {
            parts
                .next()
                .map(|n| n.parse::<usize>().map_err(|_| bad()))
                .transpose()
        };
        let device = match lower.split(':').next() {
            Some("cpu") if lower == "cpu" => Device::Cpu,
            Some("cuda") => {
                let _ = number(); // the name
                Device::Cuda(number()?.unwrap_or(0))
            }
            Some("emulator") => {
                let _ = number();
                let chunk_bytes = number()?.unwrap_or(EMULATOR_CHUNK);
                Device::Emulator {
                    chunk_bytes,
                    memory_limit: number()?,
                }
            }
            _ => return Err(bad()),
        };
        match lower.split(':').count() {
            n if n > 3 || (n > 2 && !matches!(device, Device::Emulator { .. })) => Err(bad()),
            _ => Ok(device),
        }
    }

    /// A GPU's or the emulator's ordinal-free kind: "cpu", "cuda" or "emulator".
    pub fn kind(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda(_) => "cuda",
            Device::Emulator { .. } => "emulator",
        }
    }
}

/// A call's result: host buffers, or buffers on the device it ran on.
pub enum Placed {
    Host(Batch),
    Device(DeviceBatch),
}

/// A call the device had no memory for, computed on the CPU instead: what the
/// device said (the Python layer warns with it).
pub struct Fallback(pub String);

impl Fallback {
    /// The warning's text.
    pub fn message(&self) -> String {
        format!(
            "gpu_tok: the GPU ran out of memory ({}); device='auto' computed this call on the CPU",
            self.0
        )
    }
}

impl Engine {
    /// Encodes `inputs` on `device` (`chunk_bytes`: text bytes per device
    /// chunk instead of the device's own choice). `host_results`: the caller
    /// wants the results in host memory (`device="auto"`), so a device out of
    /// memory is not an error: the CPU computes the same results, and the
    /// [`Fallback`] says why. Without it, out of memory is the caller's error.
    pub fn encode_on(
        &self,
        device: Device,
        chunk_bytes: Option<usize>,
        host_results: bool,
        inputs: &[Input<'_>],
        settings: &Settings,
    ) -> Result<(Placed, Option<Fallback>)> {
        if chunk_bytes == Some(0) {
            return Err(Error::InvalidArgument(
                "chunk_bytes must be positive".into(),
            ));
        }
        let on_device = match device {
            Device::Cpu => return Ok((Placed::Host(self.encode_batch(inputs, settings)?), None)),
            Device::Emulator {
                chunk_bytes: chunk,
                memory_limit,
            } => {
                let chunk = chunk_bytes.unwrap_or(chunk);
                let dev = match memory_limit {
                    Some(limit) => Emulator::with_memory_limit(chunk, limit),
                    None => Emulator::new(chunk),
                };
                self.encode_batch_on(&dev, inputs, settings)
            }
            Device::Cuda(ordinal) => GpuStream::acquire(&gpu(ordinal)?, chunk_bytes)
                .and_then(|stream| self.encode_batch_on(&stream, inputs, settings)),
        };
        match on_device {
            Ok(batch) => Ok((Placed::Device(batch), None)),
            Err(Error::CudaOutOfMemory(why)) if host_results => {
                let fallback = Fallback(Error::CudaOutOfMemory(why).to_string());
                Ok((
                    Placed::Host(self.encode_batch(inputs, settings)?),
                    Some(fallback),
                ))
            }
            Err(err) => Err(err),
        }
    }
}

// What else `py` shows of the device backend, by name.
/// Device buffers and their consumers (DLPack), and a batch's timings.
pub use crate::cuda::pipeline::{DeviceBatch, Timings};
pub use crate::cuda::stream::{ConsumerStream, DevBuf, Location};
/// The probe, the kernels' compiler and cache, the prebuilt kernels, the
/// emulator's records and the GPU's set-up, for `gpu_tok.info()` and the tools.
pub use crate::cuda::{driver, emulator, jit, prebuilt, probe};
/// The kernel sources (for NVRTC checks), the long-word rounds' shares, and
/// byte views of the plain values device buffers hold.
pub use crate::kernels::{as_bytes, as_bytes_mut, set_round_shares, sources, Pod};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_parsed_once_here() {
        assert_eq!(Device::parse("cpu").unwrap(), Device::Cpu);
        assert_eq!(Device::parse(" CUDA ").unwrap(), Device::Cuda(0));
        assert_eq!(Device::parse("cuda:3").unwrap(), Device::Cuda(3));
        assert_eq!(
            Device::parse("emulator").unwrap(),
            Device::Emulator {
                chunk_bytes: EMULATOR_CHUNK,
                memory_limit: None
            }
        );
        assert_eq!(
            Device::parse("emulator:4096:2000").unwrap(),
            Device::Emulator {
                chunk_bytes: 4096,
                memory_limit: Some(2000)
            }
        );
        for bad in [
            "",
            "auto",
            "gpu",
            "cuda:",
            "cuda:x",
            "cuda:1:2",
            "cpu:0",
            "emulator:1:2:3",
        ] {
            let err = Device::parse(bad).unwrap_err().to_string();
            assert!(err.contains("device must be"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn out_of_memory_falls_back_to_the_cpu_only_for_host_results() {
        let engine = Engine::from_json(
            r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
                "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
                "post_processor": null, "decoder": null,
                "model": {"type": "WordLevel", "vocab": {"hello": 0, "world": 1, "[UNK]": 2},
                          "unk_token": "[UNK]"}}"#,
        )
        .unwrap();
        let inputs = vec![("hello world ".repeat(200).leak() as &str, None); 8];
        let settings = Settings::default();
        let tiny = Device::Emulator {
            chunk_bytes: 4096,
            memory_limit: Some(2000),
        };
        match engine.encode_on(tiny, None, false, &inputs, &settings) {
            Err(Error::CudaOutOfMemory(_)) => {}
            other => panic!("expected out of memory, got ok={}", other.is_ok()),
        }
        let (placed, fallback) = engine
            .encode_on(tiny, None, true, &inputs, &settings)
            .unwrap();
        let Placed::Host(batch) = placed else {
            panic!("the fallback's results are on the host")
        };
        assert_eq!(
            batch.ids,
            engine.encode_batch(&inputs, &settings).unwrap().ids
        );
        let message = fallback.expect("a fallback is reported").message();
        assert!(
            message.starts_with("gpu_tok: the GPU ran out of memory ("),
            "{message}"
        );
        assert!(message.ends_with("); device='auto' computed this call on the CPU"));
    }
}
