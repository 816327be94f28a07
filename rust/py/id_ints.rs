//! The Python ints of a tokenizer's token ids, made once and shared by every
//! list of ids it returns. Ints are immutable, so a list can hold the same
//! object as the last one did: an id then costs a reference count, where a
//! new int costs an allocation, its setup and, when the list goes, its
//! deallocation (together ~15% of `tok.encode` on fresh text, as much as the
//! lookups of the words' ids).

use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Ids past this many are not kept (each slot is 8 bytes): a new int each.
const MOST_IDS: usize = 1 << 21;

/// One slot per id, null until the id is first returned, then owning one
/// reference to its int.
pub struct IdInts {
    slots: Box<[AtomicPtr<ffi::PyObject>]>,
}

impl IdInts {
    /// Room for ids below `ids` (up to `MOST_IDS`); the slots' pages are
    /// touched only as ids are met.
    pub fn new(ids: usize) -> Self {
        let slots = (0..ids.min(MOST_IDS))
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        IdInts { slots }
    }

    /// A new reference to the int `id`, or null with a Python error set.
    ///
    /// # Safety
    /// The GIL must be held (the slots are filled under it: the atomics only
    /// make the type `Sync`).
    #[inline]
    pub unsafe fn get(&self, id: u32) -> *mut ffi::PyObject {
        let Some(slot) = self.slots.get(id as usize) else {
            // SAFETY: with the GIL (the caller's promise); null is an error.
            return unsafe { ffi::PyLong_FromUnsignedLong(id.into()) };
        };
        let mut obj = slot.load(Ordering::Relaxed);
        if obj.is_null() {
            // SAFETY: with the GIL; null is an error, returned as is.
            obj = unsafe { ffi::PyLong_FromUnsignedLong(id.into()) };
            if obj.is_null() {
                return obj;
            }
            slot.store(obj, Ordering::Relaxed);
        }
        // SAFETY: the slot's int is alive (the slot owns a reference).
        unsafe { ffi::Py_INCREF(obj) };
        obj
    }

    /// `get` for a value of a field of ids (an id, or any other int: a new one).
    ///
    /// # Safety
    /// The GIL must be held.
    #[inline]
    pub unsafe fn get_value(&self, value: i64) -> *mut ffi::PyObject {
        match u32::try_from(value) {
            // SAFETY: with the GIL (the caller's promise).
            Ok(id) => unsafe { self.get(id) },
            // SAFETY: with the GIL; null is an error.
            Err(_) => unsafe { ffi::PyLong_FromLongLong(value) },
        }
    }
}

impl Drop for IdInts {
    fn drop(&mut self) {
        if self
            .slots
            .iter()
            .all(|slot| slot.load(Ordering::Relaxed).is_null())
        {
            return;
        }
        // Dropped with its tokenizer, normally under the GIL already
        // (attaching again is then free).
        Python::attach(|_py| {
            for slot in self.slots.iter() {
                let obj = slot.load(Ordering::Relaxed);
                if !obj.is_null() {
                    // SAFETY: the slot owns one reference; the GIL is held.
                    unsafe { ffi::Py_DECREF(obj) };
                }
            }
        });
    }
}
