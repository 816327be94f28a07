//! `Tensor`: an integer result buffer (int64, or int32 where the caller asked)
//! that numpy, torch and CuPy take without a copy, through DLPack
//! (`__dlpack__`, `__dlpack_device__`) or, for host memory, the buffer
//! protocol. The buffer is host memory or device memory from the CUDA backend
//! (freed, back into the driver's pool, when the last tensor or DLPack
//! consumer lets go of it, after the work queued by then on the consumer
//! streams it was exported to).

use super::errors::to_py;
use crate::dlpack::{self, DLDevice, Export};
use crate::engine::device::{as_bytes, as_bytes_mut, ConsumerStream, DevBuf, Location, Pod};
use crate::layout::Dtype;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBool;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::borrow::Cow;
use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::Arc;

/// Host values in one of the output dtypes.
pub enum Values {
    Int64(Vec<i64>),
    Int32(Vec<i32>),
}

impl Values {
    fn dtype(&self) -> Dtype {
        match self {
            Values::Int64(_) => Dtype::Int64,
            Values::Int32(_) => Dtype::Int32,
        }
    }

    fn len(&self) -> usize {
        match self {
            Values::Int64(v) => v.len(),
            Values::Int32(v) => v.len(),
        }
    }

    /// The values as int64 (borrowed when they are int64).
    fn widened(&self) -> Cow<'_, [i64]> {
        match self {
            Values::Int64(v) => Cow::Borrowed(v),
            Values::Int32(v) => Cow::Owned(v.iter().map(|&x| i64::from(x)).collect()),
        }
    }

    /// The values' bytes, native order.
    fn bytes(&self) -> &[u8] {
        match self {
            Values::Int64(v) => as_bytes(v),
            Values::Int32(v) => as_bytes(v),
        }
    }

    /// `n` zeros of `dtype`.
    fn zeros(dtype: Dtype, n: usize) -> Self {
        match dtype {
            Dtype::Int64 => Values::Int64(vec![0; n]),
            Dtype::Int32 => Values::Int32(vec![0; n]),
        }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Values::Int64(v) => as_bytes_mut(v),
            Values::Int32(v) => as_bytes_mut(v),
        }
    }
}

/// Host memory that consumers may write through (numpy/torch views are writable).
pub struct HostBuffer(UnsafeCell<Values>);

// SAFETY: the Vec is never resized after construction; element writes come only
// from consumers' views, as with any numpy array shared between threads.
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// The values (consumers may have written through their views).
    fn values(&self) -> &Values {
        // SAFETY: the Vec is never resized; element writes by consumers are plain integer stores.
        unsafe { &*self.0.get() }
    }

    fn ptr(&self) -> *mut u8 {
        // SAFETY: only the pointer is taken; the Vec itself is never resized.
        match unsafe { &mut *self.0.get() } {
            Values::Int64(v) => v.as_mut_ptr().cast(),
            Values::Int32(v) => v.as_mut_ptr().cast(),
        }
    }
}

/// The memory under a tensor: values on the host or on a device.
pub enum Storage {
    Host(HostBuffer),
    Device(DevBuf, Dtype),
}

impl Storage {
    /// Host int64 values as a shared storage.
    pub fn host(values: Vec<i64>) -> Arc<Self> {
        Self::host_values(Values::Int64(values))
    }

    pub fn host_values(values: Values) -> Arc<Self> {
        Arc::new(Storage::Host(HostBuffer(UnsafeCell::new(values))))
    }

    pub fn device(buffer: DevBuf, dtype: Dtype) -> Arc<Self> {
        Arc::new(Storage::Device(buffer, dtype))
    }

    pub fn dtype(&self) -> Dtype {
        match self {
            Storage::Host(h) => h.values().dtype(),
            Storage::Device(_, dtype) => *dtype,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Storage::Host(h) => h.values().len(),
            Storage::Device(d, dtype) => d.bytes() / dtype.size(),
        }
    }

    /// The values in host memory, in their dtype: a copy (from the device, for
    /// device memory; call it without the GIL where the copy may be large).
    pub fn host_copy(&self) -> PyResult<Values> {
        let values = match self {
            Storage::Host(h) => match h.values() {
                Values::Int64(v) => Values::Int64(v.clone()),
                Values::Int32(v) => Values::Int32(v.clone()),
            },
            Storage::Device(d, Dtype::Int64) => Values::Int64(read(d, self.len())?),
            Storage::Device(d, Dtype::Int32) => Values::Int32(read(d, self.len())?),
        };
        Ok(values)
    }

    /// The values as int64; device memory is copied to the host (call it
    /// without the GIL where the copy may be large).
    pub fn values(&self) -> PyResult<Cow<'_, [i64]>> {
        match self {
            Storage::Host(h) => Ok(h.values().widened()),
            Storage::Device(..) => Ok(Cow::Owned(match self.host_copy()? {
                Values::Int64(v) => v,
                Values::Int32(v) => v.into_iter().map(i64::from).collect(),
            })),
        }
    }

    /// The DLPack device and address of the first value.
    fn location(&self) -> (DLDevice, *mut u8) {
        let (device_type, device_id, ptr) = match self {
            Storage::Host(h) => (dlpack::DEVICE_CPU, 0, h.ptr()),
            // Emulated device memory is host memory.
            Storage::Device(d, _) => match d.location() {
                Location::Host => (dlpack::DEVICE_CPU, 0, d.ptr() as *mut u8),
                Location::Cuda(n) => (dlpack::DEVICE_CUDA, n as i32, d.ptr() as *mut u8),
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

/// The `stream` argument of `__dlpack__`, checked: None, or an int (not a bool).
fn consumer_stream(stream: Option<&Bound<'_, PyAny>>) -> PyResult<ConsumerStream> {
    let value = match stream {
        None => None,
        Some(s) if s.is_none() => None,
        Some(s) if s.is_instance_of::<PyBool>() => {
            return Err(PyTypeError::new_err(
                "stream must be None or an int, not a bool",
            ))
        }
        Some(s) => Some(s.extract::<i128>().map_err(|_| {
            PyTypeError::new_err(format!(
                "stream must be None or an int (a CUDA stream handle), not {}",
                s.get_type()
                    .name()
                    .map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        })?),
    };
    ConsumerStream::from_dlpack(value).map_err(PyValueError::new_err)
}

fn read<T: Pod + Default>(d: &DevBuf, n: usize) -> PyResult<Vec<T>> {
    d.read_vec::<T>(n)
        .map_err(|e| PyBufferError::new_err(e.to_string()))
}

/// What `__reduce__` gives pickle: the rebuilding function and its (shape, bytes, dtype).
type Reduced<'py> = (
    Bound<'py, PyAny>,
    (Vec<usize>, Bound<'py, PyBytes>, &'static str),
);

/// An integer tensor over a shared storage.
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
        let mut step = buffer.dtype().size() as isize;
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

    /// "int64" or "int32".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.buffer.dtype().name()
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
        let values = slf.py().detach(|| this.buffer.host_copy())?;
        let copy = Tensor {
            buffer: Storage::host_values(values),
            shape: this.shape.clone(),
            strides_bytes: this.strides_bytes.clone(),
        };
        Bound::new(slf.py(), copy)
    }

    /// Pickling (DataLoader workers, multiprocessing): the shape, the values
    /// as bytes and the dtype. A CUDA tensor is copied to the host and arrives
    /// as a host tensor.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let this = slf.get();
        let values = py.detach(|| this.buffer.host_copy())?;
        let shape = this.shape.iter().map(|&d| d as usize).collect();
        let rebuild = py.get_type::<Tensor>().getattr("_from_bytes")?;
        let dtype = values.dtype().name();
        Ok((rebuild, (shape, PyBytes::new(py, values.bytes()), dtype)))
    }

    /// A host tensor of `shape` from `dtype` values in native byte order (what
    /// `__reduce__` gives).
    #[staticmethod]
    #[pyo3(signature = (shape, data, dtype="int64"))]
    fn _from_bytes(shape: Vec<usize>, data: &[u8], dtype: &str) -> PyResult<Self> {
        let dtype = Dtype::parse(dtype).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let n = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n.checked_mul(dtype.size()) == Some(data.len()))
            .ok_or_else(|| PyValueError::new_err("the data does not hold the shape's values"))?;
        let mut values = Values::zeros(dtype, n);
        values.bytes_mut().copy_from_slice(data);
        Ok(Tensor::new(Storage::host_values(values), shape))
    }

    /// The values as (nested) Python lists.
    fn tolist<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        nested_list(py, &self.values()?, &self.shape)
    }

    fn __repr__(&self) -> String {
        format!(
            "gpu_tok.Tensor(shape={:?}, dtype={}, device={})",
            self.shape,
            self.buffer.dtype().name(),
            self.device_name()
        )
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        let (device, _) = self.buffer.location();
        (device.device_type, device.device_id)
    }

    /// DLPack export. `stream` must be None or -1 for host memory. For device
    /// memory it is the consumer's CUDA stream (None or -1: none given, 1:
    /// the legacy default stream, 2: the per-thread default stream, else a
    /// stream handle of the tensor's device; 0 is refused as DLPack says):
    /// the data are complete when a call returns (its stream was
    /// synchronised), so the consumer's stream never has to wait for them;
    /// and the memory is not reused until the work queued on a stream handle
    /// by the time the tensor dies is done. Emulated device memory (host
    /// memory) takes these values too and records the waits, for tests. A
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
        let device_memory = match &*self.buffer {
            Storage::Device(d, _) => Some(d),
            Storage::Host(_) => None,
        };
        let consumer = consumer_stream(stream.as_ref());
        let consumer = match device_memory {
            // Emulated device memory checks and records streams as a GPU would.
            Some(_) => consumer?,
            None => match consumer {
                Ok(ConsumerStream::Unordered) => ConsumerStream::Unordered,
                Err(err) if !err.is_instance_of::<PyValueError>(py) => return Err(err),
                _ => {
                    return Err(PyValueError::new_err(
                        "stream must be None or -1 for a CPU tensor",
                    ))
                }
            },
        };
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
            Storage::host_values(py.detach(|| self.buffer.host_copy())?)
        } else if copy == Some(true) {
            return Err(PyBufferError::new_err(
                "copy=True of a device tensor: copy it with the consumer (e.g. torch's .clone())",
            ));
        } else {
            if let Some(d) = device_memory {
                d.export_to(consumer).map_err(|e| to_py(py, e))?;
            }
            Arc::clone(&self.buffer)
        };
        let (device, data) = buffer.location();
        let size = buffer.dtype().size();
        let export = Export {
            data,
            bits: 8 * size as u8,
            shape: self.shape.iter().map(|&d| d as i64).collect(),
            strides: self
                .strides_bytes
                .iter()
                .map(|&s| s as i64 / size as i64)
                .collect(),
            device,
            owner: Box::new(buffer),
        };
        let versioned = max_version.is_some_and(|(major, _)| major >= 1);
        dlpack::capsule(py, export, versioned)
    }

    /// Buffer protocol: a C-contiguous int64 ("q") or int32 ("i") view.
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
            let (size, format) = match this.buffer.dtype() {
                Dtype::Int64 => (8, c"q"),
                Dtype::Int32 => (4, c"i"),
            };
            (*view).len = (this.buffer.len() * size) as isize;
            (*view).itemsize = size as isize;
            (*view).readonly = 0;
            (*view).ndim = this.shape.len() as c_int;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                format.as_ptr().cast_mut()
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
