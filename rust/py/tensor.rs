//! `Tensor`: an int64 result buffer that numpy, torch and CuPy take without a
//! copy, through DLPack (`__dlpack__`, `__dlpack_device__`) or, for host
//! memory, the buffer protocol. The buffer is host memory or device memory
//! from the CUDA backend (freed, back into the driver's pool, when the last
//! tensor or DLPack consumer lets go of it).

use crate::cuda::stream::{DevBuf, Location};
use crate::dlpack::{self, DLDevice, Export};
use crate::kernels::{as_bytes, as_bytes_mut};
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::borrow::Cow;
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Arc;

/// Host memory that consumers may write through (numpy/torch views are writable).
pub struct HostBuffer(UnsafeCell<Vec<i64>>);

// SAFETY: the Vec is never resized after construction; element writes come only
// from consumers' views, as with any numpy array shared between threads.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
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

/// The memory under a tensor: int64 values on the host or on a device.
pub enum Storage {
    Host(HostBuffer),
    Device(DevBuf),
}

impl Storage {
    /// Host values as a shared storage.
    pub fn host(values: Vec<i64>) -> Arc<Self> {
        Arc::new(Storage::Host(HostBuffer(UnsafeCell::new(values))))
    }

    pub fn device(buffer: DevBuf) -> Arc<Self> {
        Arc::new(Storage::Device(buffer))
    }

    /// Number of int64 values.
    pub fn len(&self) -> usize {
        match self {
            Storage::Host(h) => h.len(),
            Storage::Device(d) => d.bytes() / 8,
        }
    }

    /// The values; device memory is copied to the host (call it without the
    /// GIL where the copy may be large).
    pub fn values(&self) -> PyResult<Cow<'_, [i64]>> {
        match self {
            Storage::Host(h) => Ok(Cow::Borrowed(h.values())),
            Storage::Device(d) => d
                .read_vec::<i64>(self.len())
                .map(Cow::Owned)
                .map_err(|e| PyBufferError::new_err(e.to_string())),
        }
    }

    /// The DLPack device and address of the first value.
    fn location(&self) -> (DLDevice, *mut i64) {
        let (device_type, device_id, ptr) = match self {
            Storage::Host(h) => (dlpack::DEVICE_CPU, 0, h.ptr()),
            // Emulated device memory is host memory.
            Storage::Device(d) => match d.location() {
                Location::Host => (dlpack::DEVICE_CPU, 0, d.ptr() as *mut i64),
                Location::Cuda(n) => (dlpack::DEVICE_CUDA, n as i32, d.ptr() as *mut i64),
            },
        };
        (
            DLDevice {
                device_type,
                device_id,
            },
            ptr,
        )
    }

    fn on_host(&self) -> bool {
        self.location().0.device_type == dlpack::DEVICE_CPU
    }
}

/// What `__reduce__` gives pickle: the rebuilding function and its (shape, bytes).
type Reduced<'py> = (Bound<'py, PyAny>, (Vec<usize>, Bound<'py, PyBytes>));

/// An int64 tensor over a shared storage.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct Tensor {
    buffer: Arc<Storage>,
    /// Shape and strides in elements; stored as isize for the buffer protocol.
    shape: Vec<isize>,
    strides_bytes: Vec<isize>,
}

impl Tensor {
    /// A tensor of `shape` over `buffer` (which holds exactly the product of the shape).
    pub fn new(buffer: Arc<Storage>, shape: Vec<usize>) -> Self {
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

    fn values(&self) -> PyResult<Cow<'_, [i64]>> {
        self.buffer.values()
    }

    fn device_name(&self) -> String {
        let (device, _) = self.buffer.location();
        if device.device_type == dlpack::DEVICE_CUDA {
            format!("cuda:{}", device.device_id)
        } else {
            "cpu".into()
        }
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

    /// Where the data lives: "cpu" or "cuda:N".
    #[getter]
    fn device(&self) -> String {
        self.device_name()
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.shape.len()
    }

    fn __len__(&self) -> usize {
        self.shape.first().map_or(0, |&d| d as usize)
    }

    /// The same values in host memory: this tensor when it is there already,
    /// else a copy from the device.
    fn cpu(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        let this = slf.get();
        if this.buffer.on_host() {
            return Ok(slf);
        }
        let values = slf.py().detach(|| this.values().map(|v| v.into_owned()))?;
        let copy = Tensor {
            buffer: Storage::host(values),
            shape: this.shape.clone(),
            strides_bytes: this.strides_bytes.clone(),
        };
        Bound::new(slf.py(), copy)
    }

    /// Pickling (DataLoader workers, multiprocessing): the shape and the values
    /// as bytes. A CUDA tensor is copied to the host and arrives as a host tensor.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let this = slf.get();
        let values = py.detach(|| this.values().map(|v| v.into_owned()))?;
        let shape = this.shape.iter().map(|&d| d as usize).collect();
        let rebuild = py.get_type::<Tensor>().getattr("_from_bytes")?;
        Ok((rebuild, (shape, PyBytes::new(py, as_bytes(&values)))))
    }

    /// A host tensor of `shape` from int64 values in native byte order (what
    /// `__reduce__` gives).
    #[staticmethod]
    fn _from_bytes(shape: Vec<usize>, data: &[u8]) -> PyResult<Self> {
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n.checked_mul(8) == Some(data.len()))
            .ok_or_else(|| PyValueError::new_err("the data does not hold the shape's values"))?;
        let mut values = vec![0i64; n];
        as_bytes_mut(&mut values).copy_from_slice(data);
        Ok(Tensor::new(Storage::host(values), shape))
    }

    /// The values as (nested) Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        nested_list(py, &self.values()?, &self.shape)
    }

    fn __repr__(&self) -> String {
        format!(
            "gpu_tok.Tensor(shape={:?}, dtype=int64, device={})",
            self.shape,
            self.device_name()
        )
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        let (device, _) = self.buffer.location();
        (device.device_type, device.device_id)
    }

    /// DLPack export. `stream` must be None or -1 for host memory; for device
    /// memory any stream is fine: the data are complete when a call returns
    /// (its stream was synchronised), so no consumer stream has to wait. A
    /// device tensor asked for on the CPU (`dl_device`) is copied unless
    /// `copy=False`. A `max_version` of (1, x) or later gets a versioned capsule.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let on_host = self.buffer.on_host();
        if let Some(stream) = stream {
            if on_host && !stream.is_none() && stream.extract::<i64>().ok() != Some(-1) {
                return Err(PyValueError::new_err(
                    "stream must be None or -1 for a CPU tensor",
                ));
            }
        }
        let here = self.__dlpack_device__();
        let to_host =
            match dl_device {
                Some(device) if device == here => false,
                Some(device) if device == (dlpack::DEVICE_CPU, 0) && copy != Some(false) => true,
                Some(device) => {
                    return Err(PyBufferError::new_err(format!(
                    "this tensor lives on DLPack device {here:?}; cannot export it to {device:?}{}",
                    if copy == Some(false) { " without a copy" } else { "" }
                )))
                }
                None => false,
            };
        let buffer = if copy == Some(true) && on_host || to_host {
            Storage::host(self.values()?.into_owned())
        } else if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "copy=True of a device tensor: copy it with the consumer (e.g. torch's .clone())",
            ));
        } else {
            Arc::clone(&self.buffer)
        };
        let (device, data) = buffer.location();
        let export = Export {
            data,
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            strides: self.strides_bytes.iter().map(|&s| (s / 8) as i64).collect(),
            device,
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
        if !this.buffer.on_host() {
            return Err(PyBufferError::new_err(
                "this tensor lives on a GPU; use DLPack (torch.from_dlpack, cupy.from_dlpack) or .tolist()",
            ));
        }
        let (_, data) = this.buffer.location();
        // SAFETY: `view` is a valid Py_buffer provided by CPython; the pointers we
        // store (shape, strides, format) live in `slf`, which `view.obj` keeps alive.
        unsafe {
            (*view).obj = slf.clone().into_any().into_ptr();
            (*view).buf = data.cast();
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
