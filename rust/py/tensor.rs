//! `Tensor`: an int64 result buffer that numpy, torch and CuPy take without a
//! copy, through DLPack (`__dlpack__`, `__dlpack_device__`) or the buffer
//! protocol. Owns host buffers today; device buffers join with the CUDA backend.

use crate::dlpack::{self, DLDevice, Export};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Arc;

/// Host memory that consumers may write through (numpy/torch views are writable).
pub struct HostBuffer(UnsafeCell<Vec<i64>>);

// SAFETY: the Vec is never resized after construction; element writes come only
// from consumers' views, as with any numpy array shared between threads.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// Takes ownership of `values`.
    pub fn new(values: Vec<i64>) -> Arc<Self> {
        Arc::new(HostBuffer(UnsafeCell::new(values)))
    }

    /// The values (consumers may have written through their views).
    pub fn values(&self) -> &[i64] {
        // SAFETY: the buffer is never resized; element writes by consumers are plain int64 stores.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len()) }
    }

    fn ptr(&self) -> *mut i64 {
        // SAFETY: only the pointer is taken; the Vec itself is never touched mutably.
        unsafe { (*self.0.get()).as_mut_ptr() }
    }

    fn len(&self) -> usize {
        // SAFETY: reading the length of a Vec that is never resized.
        unsafe { (*self.0.get()).len() }
    }
}

/// An int64 tensor over a shared host buffer.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct Tensor {
    buffer: Arc<HostBuffer>,
    /// Shape and strides in elements; stored as isize for the buffer protocol.
    shape: Vec<isize>,
    strides_bytes: Vec<isize>,
}

impl Tensor {
    /// A tensor of `shape` over `buffer` (which holds exactly the product of the shape).
    pub fn new(buffer: Arc<HostBuffer>, shape: Vec<usize>) -> Self {
        debug_assert_eq!(buffer.len(), shape.iter().product::<usize>());
        let mut strides_bytes = vec![0isize; shape.len()];
        let mut step = 8isize;
        for (stride, &dim) in strides_bytes.iter_mut().zip(shape.iter()).rev() {
            *stride = step;
            step *= dim.max(1) as isize;
        }
        Tensor {
            buffer,
            shape: shape.iter().map(|&d| d as isize).collect(),
            strides_bytes,
        }
    }

    fn values(&self) -> &[i64] {
        self.buffer.values()
    }
}

fn nested_list<'py>(
    py: Python<'py>,
    values: &[i64],
    shape: &[isize],
) -> PyResult<Bound<'py, PyAny>> {
    match shape {
        [] => Ok(values
            .first()
            .copied()
            .unwrap_or(0)
            .into_pyobject(py)?
            .into_any()),
        [_] => Ok(PyList::new(py, values)?.into_any()),
        [rows, rest @ ..] => {
            let width: usize = rest.iter().map(|&d| d as usize).product();
            let items = (0..*rows as usize)
                .map(|r| nested_list(py, &values[r * width..(r + 1) * width], rest))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
    }
}

#[pymethods]
impl Tensor {
    /// The tensor's shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.shape)
    }

    /// Always "int64".
    #[getter]
    fn dtype(&self) -> &'static str {
        "int64"
    }

    /// Where the data lives: "cpu".
    #[getter]
    fn device(&self) -> &'static str {
        "cpu"
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    fn __len__(&self) -> usize {
        self.shape.first().map_or(0, |&d| d as usize)
    }

    /// The values as (nested) Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        nested_list(py, self.values(), &self.shape)
    }

    fn __repr__(&self) -> String {
        format!(
            "gpu_tok.Tensor(shape={:?}, dtype=int64, device=cpu)",
            self.shape
        )
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CPU, 0)
    }

    /// DLPack export. `stream` must be None or -1 for host memory; a
    /// `max_version` of (1, x) or later gets a versioned capsule.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(stream) = stream {
            if !stream.is_none() && stream.extract::<i64>().ok() != Some(-1) {
                return Err(PyValueError::new_err(
                    "stream must be None or -1 for a CPU tensor",
                ));
            }
        }
        if let Some(device) = dl_device {
            if device != (dlpack::DEVICE_CPU, 0) {
                return Err(PyBufferError::new_err(format!(
                    "this tensor lives on the CPU; cannot export it to DLPack device {device:?}"
                )));
            }
        }
        let buffer = if copy == Some(true) {
            HostBuffer::new(self.values().to_vec())
        } else {
            Arc::clone(&self.buffer)
        };
        let export = Export {
            data: buffer.ptr(),
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            strides: self.strides_bytes.iter().map(|&s| (s / 8) as i64).collect(),
            device: DLDevice {
                device_type: dlpack::DEVICE_CPU,
                device_id: 0,
            },
            owner: Box::new(buffer),
        };
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        dlpack::capsule(py, export, versioned)
    }

    /// Buffer protocol: a C-contiguous int64 ("q") view.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("view is null"));
        }
        let this = slf.get();
        // SAFETY: `view` is a valid Py_buffer provided by CPython; the pointers we
        // store (shape, strides, format) live in `slf`, which `view.obj` keeps alive.
        unsafe {
            (*view).obj = slf.clone().into_any().into_ptr();
            (*view).buf = this.buffer.ptr().cast();
            (*view).len = (this.buffer.len() * 8) as isize;
            (*view).itemsize = 8;
            (*view).readonly = 0;
            (*view).ndim = this.shape.len() as c_int;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                c"q".as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                this.shape.as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                this.strides_bytes.as_ptr().cast_mut()
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}
