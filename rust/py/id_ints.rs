//! The Python ints of a tokenizer's token ids, made once and shared by every
//! list of ids it returns. Ints are immutable, so a list can hold the same
//! object as the last one did: an id then costs a reference count, where a
//! new int costs an allocation, its setup and, when the list goes, its
//! deallocation (together ~15% of `tok.encode` on fresh text, as much as the
//! lookups of the words' ids).

use pyo3::ffi;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// Ids past this many are not kept (each slot is 8 bytes): a new int each.
const MOST_IDS: usize = 1 << 21;

/// One slot per id, null until the id is first returned, then owning one
/// reference to its int.
pub struct IdInts {
    slots: Box<[AtomicPtr<ffi::PyObject>]>,
    /// Some slot holds an int (else dropping has nothing to release).
    used: AtomicBool,
}

impl IdInts {
    /// Room for ids below `ids` (up to `MOST_IDS`), every slot null.
    pub fn new(ids: usize) -> Self {
        IdInts {
            slots: (0..ids.min(MOST_IDS))
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            used: AtomicBool::new(false),
        }
    }

    /// A new reference to the int `id`, or null with a Python error set.
    /// Two threads may fill one slot at once (a build without the GIL): the
    /// first int stored wins and the other is dropped; the store publishes
    /// an int fully made (release, then acquire by its readers).
    ///
    /// # Safety
    /// The thread must be attached to the interpreter (hold the GIL where
    /// there is one).
    #[inline]
    pub unsafe fn get(&self, id: u32) -> *mut ffi::PyObject {
        let Some(slot) = self.slots.get(id as usize) else {
            // SAFETY: attached (the caller's promise); null is an error.
            return unsafe { ffi::PyLong_FromUnsignedLong(id.into()) };
        };
        let mut obj = slot.load(Ordering::Acquire);
        if obj.is_null() {
            // SAFETY: attached; null is an error, returned as is.
            let made = unsafe { ffi::PyLong_FromUnsignedLong(id.into()) };
            if made.is_null() {
                return made;
            }
            self.used.store(true, Ordering::Relaxed);
            let null = std::ptr::null_mut();
            obj = match slot.compare_exchange(null, made, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => made,
                Err(first) => {
                    // SAFETY: `made` is ours alone (a new reference), attached.
                    unsafe { ffi::Py_DECREF(made) };
                    first
                }
            };
        }
        // SAFETY: the slot's int is alive (the slot owns a reference).
        unsafe { ffi::Py_INCREF(obj) };
        obj
    }

    /// `get` for a value of a field of ids (an id, or any other int: a new one).
    ///
    /// # Safety
    /// As `get`.
    #[inline]
    pub unsafe fn get_value(&self, value: i64) -> *mut ffi::PyObject {
        match u32::try_from(value) {
            // SAFETY: attached (the caller's promise).
            Ok(id) => unsafe { self.get(id) },
            // SAFETY: attached; null is an error.
            Err(_) => unsafe { ffi::PyLong_FromLongLong(value) },
        }
    }
}

impl Drop for IdInts {
    fn drop(&mut self) {
        if !*self.used.get_mut() {
            return;
        }
        // Dropped with its tokenizer or batch, from their deallocation:
        // attached already (attaching again is then free).
        Python::attach(|_py| {
            for slot in self.slots.iter() {
                let obj = slot.load(Ordering::Relaxed);
                if !obj.is_null() {
                    // SAFETY: the slot owns one reference; attached.
                    unsafe { ffi::Py_DECREF(obj) };
                }
            }
        });
    }
}
