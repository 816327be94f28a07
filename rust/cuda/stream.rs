//! What the batch pipeline needs from a device: memory, copies, launches and
//! timestamps, in one ordered stream of work ([`DeviceStream`]). One
//! implementation, `device::DeviceCall`, over a driver: CUDA's on a GPU
//! (`driver::GpuStream`) or the emulator's (`emulator::Emulator` wraps one).

use crate::error::Result;
use crate::kernels::{as_bytes, as_bytes_mut, DevPtr, Kernel, KernelArgs, Pod};
use std::any::Any;
use std::sync::{Arc, Mutex};

/// Frees device memory; shared by every buffer of one device.
pub trait Memory: Send + Sync {
    /// Releases `bytes` at `ptr` (allocated by the same memory), in stream
    /// order: after the work already queued, including the work queued so
    /// far on each of `consumers` (CUDA stream handles other libraries read
    /// the memory on, see [`ConsumerStream`]). Must not fail loudly.
    fn free(&self, ptr: DevPtr, bytes: usize, consumers: &[u64]);
    /// Checks that a consumer may use this memory on stream `handle` (a
    /// stream of the same device); the emulator takes any handle.
    fn check_consumer(&self, _handle: u64) -> Result<()> {
        Ok(())
    }
    /// Copies `dst.len()` bytes from `ptr` once the work queued before is done.
    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()>;
    fn location(&self) -> Location;
}

/// The stream a DLPack consumer will use a CUDA buffer on: the `stream`
/// argument of `__dlpack__` (the array API's convention for CUDA).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumerStream {
    /// None or -1: the consumer synchronises itself (or uses the legacy stream).
    Unordered,
    /// 1: the legacy default stream.
    Legacy,
    /// 2: the per-thread default stream.
    PerThread,
    /// Any other positive value: a `CUstream` / `cudaStream_t` handle.
    Handle(u64),
}

impl ConsumerStream {
    /// Reads the DLPack `stream` value (None is `Unordered`); 0 and values
    /// below -1 are refused, with the reason.
    pub fn from_dlpack(value: Option<i128>) -> std::result::Result<Self, String> {
        match value {
            None | Some(-1) => Ok(ConsumerStream::Unordered),
            Some(0) => Err("stream=0 is ambiguous and not allowed by DLPack; use 1 for the legacy \
                            default stream, 2 for the per-thread default stream, or a stream handle"
                .into()),
            Some(1) => Ok(ConsumerStream::Legacy),
            Some(2) => Ok(ConsumerStream::PerThread),
            Some(v) => u64::try_from(v).map(ConsumerStream::Handle).map_err(|_| {
                format!("stream={v} is not a CUDA stream: expected None, -1, 1, 2 or a stream handle")
            }),
        }
    }

    /// The handle a free must wait for, if any. Exported buffers are freed
    /// after an event on the legacy default stream, which already follows
    /// the work queued on it and on every blocking stream (the per-thread
    /// default streams are blocking); only a handle, which may name a
    /// non-blocking stream (torch's side streams are), needs a wait of its own.
    pub fn wait_handle(self) -> Option<u64> {
        match self {
            ConsumerStream::Handle(h) => Some(h),
            _ => None,
        }
    }
}

/// Device memory that is freed when dropped.
pub struct DevBuf {
    ptr: DevPtr,
    bytes: usize,
    memory: Arc<dyn Memory>,
    /// Consumer streams the free must wait for (see [`DevBuf::export_to`]).
    consumers: Mutex<Vec<u64>>,
}

impl DevBuf {
    /// Wraps memory allocated by `memory`.
    pub fn new(ptr: DevPtr, bytes: usize, memory: Arc<dyn Memory>) -> Self {
        DevBuf {
            ptr,
            bytes,
            memory,
            consumers: Mutex::new(Vec::new()),
        }
    }

    /// Notes that a consumer reads this memory on `stream`: the free waits
    /// for the work queued on it by then, so the memory is not reused while
    /// the consumer may still read it. A stream of another device is refused.
    pub fn export_to(&self, stream: ConsumerStream) -> Result<()> {
        if let Some(handle) = stream.wait_handle() {
            self.memory.check_consumer(handle)?;
            let mut consumers = self.consumers.lock().unwrap_or_else(|e| e.into_inner());
            if !consumers.contains(&handle) {
                consumers.push(handle);
            }
        }
        Ok(())
    }

    /// The consumer streams recorded so far.
    pub fn consumers(&self) -> Vec<u64> {
        self.consumers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn location(&self) -> Location {
        self.memory.location()
    }

    /// What frees this memory.
    pub fn memory(&self) -> Arc<dyn Memory> {
        self.memory.clone()
    }

    /// The same memory, freed by `memory` instead (see [`DeviceStream::export`]).
    pub fn with_memory(mut self, memory: Arc<dyn Memory>) -> DevBuf {
        self.memory = memory; // the old handle goes; the memory itself is not freed
        self
    }

    /// The first `n` values of `T`, copied to the host.
    pub fn read_vec<T: Pod + Default>(&self, n: usize) -> Result<Vec<T>> {
        assert!(
            std::mem::size_of::<T>() * n <= self.bytes.max(8),
            "read past the end of a buffer"
        );
        let mut out = vec![T::default(); n];
        self.memory.read(self.ptr, as_bytes_mut(&mut out))?;
        Ok(out)
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        let consumers = self.consumers.get_mut().unwrap_or_else(|e| e.into_inner());
        self.memory.free(self.ptr, self.bytes, consumers);
    }
}

/// Where a device's memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// Host memory (the emulator).
    Host,
    /// A CUDA device, by ordinal.
    Cuda(usize),
}

/// A point in a stream of work, for timing. Opaque: each implementation
/// stores its own kind of timestamp and reads it back in `elapsed_ms`.
pub struct Mark(Box<dyn Any + Send>);

impl Mark {
    pub fn new<T: Any + Send>(stamp: T) -> Mark {
        Mark(Box::new(stamp))
    }

    /// The timestamp, if this mark holds a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

/// One ordered stream of device work: calls on one value run in order.
pub trait DeviceStream {
    fn location(&self) -> Location;
    /// Uninitialised device memory (at least 8 bytes, 8-byte aligned).
    fn alloc(&self, bytes: usize) -> Result<DevBuf>;
    /// Copies `src` to `dst` at byte `offset`. `src` may be reused once this returns.
    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()>;
    /// A new buffer of `bytes`, written by `fill` through host staging memory
    /// (pinned and reused on a GPU, so the copy runs at full bus speed and
    /// nothing is copied twice on the host).
    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf>;
    /// `upload_with`, the copy running beside this stream's queued work (on
    /// a GPU, on a second stream this one waits for before its later work),
    /// so that the next chunk's input crosses the bus while this one computes.
    fn upload_beside(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        self.upload_with(bytes, fill)
    }
    /// Copies from `src` at byte `offset` into `dst`, waiting for earlier work.
    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()>;
    /// Runs `n` threads of `kernel` with `args` (its argument struct).
    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()>;
    /// Marks this point of the stream.
    fn mark(&self) -> Result<Mark>;
    /// Milliseconds between two marks (waits for the later one).
    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64>;
    /// Text bytes per chunk: chunks keep scratch memory within what is free.
    fn chunk_bytes(&self) -> usize;
    /// Waits until every queued operation is done (other streams may then use
    /// the memory written so far).
    fn synchronize(&self) -> Result<()>;
    /// Hands `buf` to consumers outside this stream (tensors): it is then
    /// freed only after this stream's work and the consumers' default stream.
    fn export(&self, buf: DevBuf) -> DevBuf;
    /// Notes that kernels only read `buf` from now on (a model's tables, which
    /// every call reads): the emulator then checks them as read-only.
    fn read_only(&self, _buf: &DevBuf) {}
    /// Milliseconds the calling thread spent on the device's behalf so far
    /// (the emulator: waiting for its streams, whose threads run the kernels
    /// and copies, and filling fresh device memory), so that the rest of a
    /// call's wall time is its host-side cost; None on a real device.
    fn emulated_device_ms(&self) -> Option<f64> {
        None
    }
    /// The most device memory in use at once so far (the emulator's count).
    fn emulated_peak_bytes(&self) -> Option<usize> {
        None
    }
}

/// Typed helpers over [`DeviceStream`].
pub trait DeviceStreamExt: DeviceStream {
    /// A buffer holding `values`.
    fn upload_new<T: Pod>(&self, values: &[T]) -> Result<DevBuf> {
        let buf = self.alloc(std::mem::size_of_val(values))?;
        self.upload(&buf, 0, as_bytes(values))?;
        Ok(buf)
    }

    /// `n` values of `T` from the start of `src`.
    fn download_vec<T: Pod + Default>(
        &self,
        src: &DevBuf,
        offset: usize,
        n: usize,
    ) -> Result<Vec<T>> {
        let mut out = vec![T::default(); n];
        self.download(src, offset, as_bytes_mut(&mut out))?;
        Ok(out)
    }

    /// One `u32` at element index `index`.
    fn read_u32(&self, src: &DevBuf, index: usize) -> Result<u32> {
        Ok(self.download_vec::<u32>(src, 4 * index, 1)?[0])
    }

    fn run<A: KernelArgs>(&self, kernel: Kernel, args: &A, n: u32) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.launch(kernel, args.as_bytes(), n)
    }
}

impl<D: DeviceStream + ?Sized> DeviceStreamExt for D {}
