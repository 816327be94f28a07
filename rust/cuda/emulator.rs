//! The host emulator: a [`DeviceStream`] whose memory is host memory and whose
//! launches run the kernel functions of `cuda/gt_batch.cuh` (compiled for the
//! host by build.rs) for every thread index, spread over the engine's pool.
//! It lets CI run the whole CUDA pipeline — decomposition, scans, scratch
//! layout, packing — without a GPU; only launch and copy mechanics differ.

use super::stream::{DevBuf, DeviceStream, Location, Mark, Memory};
use crate::error::Result;
use crate::kernels::{self, DevPtr, Kernel};
use std::sync::Arc;
use std::time::Instant;

/// Emulated device; `chunk_bytes` is small in tests to force many chunks.
pub struct Emulator {
    memory: Arc<HostMemory>,
    chunk_bytes: usize,
}

struct HostMemory;

impl Memory for HostMemory {
    fn free(&self, ptr: DevPtr, bytes: usize) {
        let words = bytes.div_ceil(8).max(1);
        let slice = std::ptr::slice_from_raw_parts_mut(ptr as *mut u64, words);
        // SAFETY: `ptr` came from `alloc` below: a leaked Box<[u64]> of `words` elements.
        drop(unsafe { Box::from_raw(slice) });
    }

    fn read(&self, ptr: DevPtr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the caller (DevBuf::read_vec) checked the buffer holds dst.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(ptr as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn location(&self) -> Location {
        Location::Host
    }
}

impl Emulator {
    pub fn new(chunk_bytes: usize) -> Self {
        Emulator {
            memory: Arc::new(HostMemory),
            chunk_bytes: chunk_bytes.max(1),
        }
    }
}

/// Threads per task when spreading a launch over the pool.
const THREADS_PER_TASK: u32 = 256;

impl DeviceStream for Emulator {
    fn location(&self) -> Location {
        Location::Host
    }

    fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        let words = bytes.div_ceil(8).max(1);
        // Filled with a pattern, not zeros: a kernel that reads memory it never
        // wrote shows up as wrong ids in the parity tests.
        let memory: Box<[u64]> = vec![0xA5A5_A5A5_A5A5_A5A5u64; words].into_boxed_slice();
        let ptr = Box::into_raw(memory) as *mut u64 as DevPtr;
        Ok(DevBuf::new(ptr, bytes, self.memory.clone()))
    }

    fn upload(&self, dst: &DevBuf, offset: usize, src: &[u8]) -> Result<()> {
        assert!(
            offset + src.len() <= dst.bytes(),
            "upload past the end of a buffer"
        );
        // SAFETY: dst is a live host allocation of at least offset + len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                (dst.ptr() as *mut u8).add(offset),
                src.len(),
            )
        };
        Ok(())
    }

    fn upload_with(&self, bytes: usize, fill: &(dyn Fn(&mut [u8]) + Sync)) -> Result<DevBuf> {
        let buf = self.alloc(bytes)?;
        // SAFETY: a fresh host allocation of at least `bytes` bytes, not shared yet.
        fill(unsafe { std::slice::from_raw_parts_mut(buf.ptr() as *mut u8, bytes) });
        Ok(buf)
    }

    fn download(&self, src: &DevBuf, offset: usize, dst: &mut [u8]) -> Result<()> {
        assert!(
            offset + dst.len() <= src.bytes(),
            "download past the end of a buffer"
        );
        // SAFETY: src is a live host allocation of at least offset + len bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (src.ptr() as *const u8).add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }

    fn launch(&self, kernel: Kernel, args: &[u8], n: u32) -> Result<()> {
        let tasks = n.div_ceil(THREADS_PER_TASK) as usize;
        crate::pool::current().map(tasks, |t| {
            let begin = t as u32 * THREADS_PER_TASK;
            let end = (begin + THREADS_PER_TASK).min(n);
            // SAFETY: the pipeline built `args` for this kernel over live host
            // buffers sized for n threads; threads write disjoint outputs, as on a GPU.
            unsafe { kernels::host_run(kernel, args, begin, end) };
            Ok(())
        })?;
        Ok(())
    }

    fn mark(&self) -> Result<Mark> {
        Ok(Mark::new(Instant::now()))
    }

    fn elapsed_ms(&self, from: &Mark, to: &Mark) -> Result<f64> {
        match (from.get::<Instant>(), to.get::<Instant>()) {
            (Some(a), Some(b)) => Ok(b.duration_since(*a).as_secs_f64() * 1e3),
            _ => Ok(0.0),
        }
    }

    fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn export(&self, buf: DevBuf) -> DevBuf {
        buf
    }
}
