//! DLPack export of result buffers: the C structs of DLPack 1.0 and the capsules
//! that carry them (versioned `dltensor_versioned` and legacy `dltensor`).
//!
//! Owns: the ABI structs, building a managed tensor around a kept-alive owner,
//! and the capsule destructor that frees an unconsumed tensor. Does not own:
//! choosing the device or stream semantics (the caller passes the device).

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};

/// `DLDeviceType::kDLCPU`.
pub const DEVICE_CPU: i32 = 1;
/// `DLDeviceType::kDLCUDA`.
pub const DEVICE_CUDA: i32 = 2;
/// `DLDataTypeCode::kDLInt`.
const DTYPE_INT: u8 = 0;

const NAME_LEGACY: &CStr = c"dltensor";
const NAME_VERSIONED: &CStr = c"dltensor_versioned";

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

/// What a consumer borrows: a pointer into memory that `owner` keeps alive, and
/// the shape and strides (in elements) the tensor has. Elements are signed
/// integers of `bits` bits.
pub struct Export {
    pub data: *mut u8,
    pub bits: u8,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub device: DLDevice,
    pub owner: Box<dyn Send>,
}

impl Export {
    fn tensor(&mut self) -> DLTensor {
        DLTensor {
            data: self.data.cast(),
            device: self.device,
            ndim: self.shape.len() as i32,
            dtype: DLDataType {
                code: DTYPE_INT,
                bits: self.bits,
                lanes: 1,
            },
            shape: self.shape.as_mut_ptr(),
            strides: self.strides.as_mut_ptr(),
            byte_offset: 0,
        }
    }
}

unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: `managed` and its ctx were made by Box::into_raw in `capsule` and
    // DLPack calls the deleter exactly once.
    unsafe {
        let managed = Box::from_raw(managed);
        drop(Box::from_raw(managed.manager_ctx.cast::<Export>()));
    }
}

unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: as in `delete_legacy`.
    unsafe {
        let managed = Box::from_raw(managed);
        drop(Box::from_raw(managed.manager_ctx.cast::<Export>()));
    }
}

/// Frees the tensor of a capsule nobody consumed (a consumer renames it to
/// `used_dltensor...` and takes over the deleter).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by CPython with a live capsule; the names tell which struct
    // the pointer is, and IsValid/GetPointer on a matching name cannot fail.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME_VERSIONED.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, NAME_VERSIONED.as_ptr())
                .cast::<DLManagedTensorVersioned>();
            if let Some(deleter) = (*p).deleter {
                deleter(p);
            }
        } else if ffi::PyCapsule_IsValid(capsule, NAME_LEGACY.as_ptr()) == 1 {
            let p =
                ffi::PyCapsule_GetPointer(capsule, NAME_LEGACY.as_ptr()).cast::<DLManagedTensor>();
            if let Some(deleter) = (*p).deleter {
                deleter(p);
            }
        }
    }
}

/// Wraps `export` in a DLPack capsule: versioned (DLPack 1.0) when the consumer
/// said it understands it, else the legacy struct.
pub fn capsule(py: Python<'_>, export: Export, versioned: bool) -> PyResult<Bound<'_, PyAny>> {
    let ctx = Box::into_raw(Box::new(export));
    // SAFETY: ctx was just made from a Box and is only freed by a deleter.
    let tensor = unsafe { (*ctx).tensor() };
    let (pointer, name): (*mut c_void, &CStr) = if versioned {
        let managed = Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 0 },
            manager_ctx: ctx.cast(),
            deleter: Some(delete_versioned),
            flags: 0,
            dl_tensor: tensor,
        });
        (Box::into_raw(managed).cast(), NAME_VERSIONED)
    } else {
        let managed = Box::new(DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: ctx.cast(),
            deleter: Some(delete_legacy),
        });
        (Box::into_raw(managed).cast(), NAME_LEGACY)
    };
    // SAFETY: pointer is a live managed tensor; name is 'static; on failure we
    // free it ourselves since no capsule took ownership.
    unsafe {
        let raw = ffi::PyCapsule_New(pointer, name.as_ptr(), Some(capsule_destructor));
        if raw.is_null() {
            if versioned {
                delete_versioned(pointer.cast());
            } else {
                delete_legacy(pointer.cast());
            }
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, raw))
    }
}
