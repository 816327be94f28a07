//! Packed fields -> Python lists of rows (`return_tensors=None`, the
//! transformers default), built through the C API with no Python-level work
//! per token. Building the lists was most of a call with offsets: a tuple
//! and two new ints per token. Ints are immutable, so equal values share
//! one object: a small cache by value (token ids repeat; an offset's end is
//! usually the next one's start) turns most of them into a reference count;
//! so do the (start, end) tuples, which recur across a batch's rows. A row
//! of one or two runs of a value (attention masks, type ids) is made by
//! CPython's list repetition, which fills it without a call per item.

use super::id_ints::IdInts;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// Python's cyclic garbage collector paused while lists are built (the
/// previous state restored when dropped). The lists and tuples made here hold
/// only ints, so they form no cycles, but every container allocated counts
/// towards a collection, and each collection walks the tracked objects: about
/// a quarter of a call with offsets lists (0.094 s -> 0.068 s, qwen3 chat).
pub struct GcPause {
    was_enabled: bool,
}

impl GcPause {
    pub fn new(_py: Python<'_>) -> Self {
        // SAFETY: `_py` proves the GIL is held; returns whether it was enabled.
        let was_enabled = unsafe { ffi::PyGC_Disable() } == 1;
        GcPause { was_enabled }
    }
}

impl Drop for GcPause {
    fn drop(&mut self) {
        if self.was_enabled {
            // SAFETY: made under the GIL by `new`, held only as a local of a
            // call that holds the GIL (`to_lists`) and dropped there.
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

/// A direct-mapped cache of Python objects by a 64-bit key, each slot owning
/// one reference (dropped with the cache, or when another key takes the slot).
/// The caller picks a key's slot (`spot`, taken modulo the size): keys met
/// one after the other in nearby slots keep the walk through the table in
/// the CPU's caches.
struct Cache {
    slots: Vec<(u64, *mut ffi::PyObject)>,
    mask: usize,
}

impl Cache {
    /// A cache of about `wanted` slots (a power of two within [64, `most`]).
    fn new(wanted: usize, most: usize) -> Self {
        let size = wanted.clamp(64, most).next_power_of_two();
        Cache {
            slots: vec![(0, std::ptr::null_mut()); size],
            mask: size - 1,
        }
    }

    /// Whether keys at spots `a` and `b` would take the same slot.
    fn same_slot(&self, a: u64, b: u64) -> bool {
        (a ^ b) as usize & self.mask == 0
    }

    /// The object cached for `key` at `spot` (a borrowed reference, valid
    /// until another key takes the slot), made by `make` (a new reference, or
    /// null with a Python error set, which is returned) when absent.
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn get(
        &mut self,
        spot: u64,
        key: u64,
        make: impl FnOnce() -> *mut ffi::PyObject,
    ) -> *mut ffi::PyObject {
        let slot = &mut self.slots[spot as usize & self.mask];
        if slot.1.is_null() || slot.0 != key {
            let made = make();
            if made.is_null() {
                return made;
            }
            if !slot.1.is_null() {
                // SAFETY: the slot owns one reference to this object.
                unsafe { ffi::Py_DECREF(slot.1) };
            }
            *slot = (key, made);
        }
        slot.1
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        for &(_, obj) in &self.slots {
            if !obj.is_null() {
                // SAFETY: each slot owns one reference; a cache lives within a
                // call that holds the GIL (it is never sent to another thread).
                unsafe { ffi::Py_DECREF(obj) };
            }
        }
    }
}

/// The most slots of a cache: 16k (256 KiB), which stays in the CPU's L2
/// cache; 64k slots (all of a large batch's distinct pairs) were slower.
const MOST_SLOTS: usize = 1 << 14;

/// Python ints by value, shared through a cache.
struct Ints(Cache);

impl Ints {
    fn new(tokens: usize) -> Self {
        Ints(Cache::new(tokens, MOST_SLOTS))
    }

    /// A borrowed int of value `v` (valid until the next `get`), or null with
    /// a Python error set.
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn get(&mut self, v: i64) -> *mut ffi::PyObject {
        // SAFETY: with the GIL (the caller's promise); a null result is an error.
        unsafe {
            self.0
                .get(v as u64, v as u64, || ffi::PyLong_FromLongLong(v))
        }
    }
}

/// (start, end) tuples by value, shared through a cache as ints are: tuples
/// are immutable, and in a batch the same offsets recur (rows from one chat
/// template, tokens at the same places), so a recurring pair costs a
/// reference count instead of a tuple, two ints and, after the call, a
/// deallocation.
struct Pairs {
    tuples: Cache,
    ints: Ints,
}

/// Slots per start of the tuple cache: pairs with one start and token
/// lengths that differ modulo this share no slot.
const ENDS_PER_START: u64 = 8;
/// The most slots of the tuple cache (512 KiB): every pair of a batch of
/// chats up to 4k characters each has a slot of its own.
const MOST_PAIR_SLOTS: usize = 1 << 15;

impl Pairs {
    /// The cache for a field of `tokens` pairs, none starting after `last_start`.
    fn new(tokens: usize, last_start: usize) -> Self {
        let wanted = tokens.min((last_start + 1).saturating_mul(ENDS_PER_START as usize));
        Pairs {
            tuples: Cache::new(wanted, MOST_PAIR_SLOTS),
            ints: Ints::new(tokens),
        }
    }

    /// A new reference to an untracked (start, end) tuple, or null with a
    /// Python error set.
    ///
    /// # Safety
    /// The GIL must be held.
    unsafe fn get(&mut self, start: i64, end: i64) -> *mut ffi::PyObject {
        let ints = &mut self.ints;
        let (Ok(s), Ok(e)) = (u32::try_from(start), u32::try_from(end)) else {
            // Beyond 4 G characters (never, in practice): no key, no sharing.
            // SAFETY: with the GIL (the caller's promise).
            return unsafe { pack(ints, start, end) };
        };
        let key = u64::from(s) | (u64::from(e) << 32);
        // Start-major: a row's offsets, in order, walk the table forwards
        // (hashed slots were slower); eight pairs by start (a token's
        // length, modulo 8) before a conflict: with four, a batch of 256
        // chats made 100k tuples for its 30k distinct pairs.
        let spot = u64::from(s) * ENDS_PER_START + (u64::from(e.wrapping_sub(s)) % ENDS_PER_START);
        // SAFETY: with the GIL (the caller's promise).
        unsafe { owned(self.tuples.get(spot, key, || pack(ints, start, end))) }
    }
}

/// A new (start, end) tuple, untracked, or null with an error set.
///
/// # Safety
/// The GIL must be held.
unsafe fn pack(ints: &mut Ints, start: i64, end: i64) -> *mut ffi::PyObject {
    // SAFETY: with the GIL (the caller's promise); null results are errors.
    unsafe {
        // The end's `get` would take the start's slot (and drop its int):
        // the start's int is then owned across it.
        let collide = start != end && ints.0.same_slot(start as u64, end as u64);
        let first = ints.get(start);
        if first.is_null() {
            return first;
        }
        if collide {
            ffi::Py_INCREF(first);
        }
        let second = ints.get(end);
        let tuple = if second.is_null() {
            second
        } else {
            // Counts its own references to both ints.
            ffi::PyTuple_Pack(2, first, second)
        };
        if collide {
            ffi::Py_DECREF(first);
        }
        if !tuple.is_null() {
            // A tuple of two ints is in no cycle: untracked, as the collector
            // would untrack it on its first pass (a pass over every new
            // tuple, right after the call, was ~30% of a call with offsets).
            ffi::PyObject_GC_UnTrack(tuple.cast());
        }
        tuple
    }
}

/// A new reference to `obj` (borrowed, or null: then null).
///
/// # Safety
/// The GIL must be held; `obj` is null or alive.
unsafe fn owned(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    if !obj.is_null() {
        // SAFETY: a live object, with the GIL (the caller's promise).
        unsafe { ffi::Py_INCREF(obj) };
    }
    obj
}

/// A new list of `n` items from `item(i)` (each a new reference, or null
/// with an error set), or the error.
///
/// # Safety
/// The GIL must be held.
unsafe fn list_of(
    py: Python<'_>,
    n: usize,
    mut item: impl FnMut(usize) -> *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: with the GIL; a null result is an error (out of memory).
    let list = unsafe { ffi::PyList_New(n as ffi::Py_ssize_t) };
    if list.is_null() {
        return Err(PyErr::fetch(py));
    }
    for i in 0..n {
        let value = item(i);
        if value.is_null() {
            // SAFETY: the list is ours (a new reference), its unset items are null.
            unsafe { ffi::Py_DECREF(list) };
            return Err(PyErr::fetch(py));
        }
        // SAFETY: i < n, the list's length, and slot i unset; it steals the new reference.
        unsafe { set_item(list, i, value) };
    }
    Ok(list)
}

/// Puts `value` (a new reference, taken over) into the unset slot `i` of a
/// new list: a plain store where the build may read CPython's own structs
/// (version-specific builds), `PyList_SetItem` under the stable ABI.
///
/// # Safety
/// The GIL must be held; `list` is a new list of more than `i` items whose
/// slot `i` is unset (null); `value` is alive.
#[inline]
unsafe fn set_item(list: *mut ffi::PyObject, i: usize, value: *mut ffi::PyObject) {
    #[cfg(not(Py_LIMITED_API))]
    // SAFETY: the caller's promise: in bounds, the slot unset (nothing to drop).
    unsafe {
        ffi::PyList_SET_ITEM(list, i as ffi::Py_ssize_t, value)
    };
    #[cfg(Py_LIMITED_API)]
    // SAFETY: the caller's promise; it cannot fail in bounds.
    unsafe {
        ffi::PyList_SetItem(list, i as ffi::Py_ssize_t, value)
    };
}

/// `[v] * n` as a new list (CPython fills it without a call per item), or the error.
///
/// # Safety
/// The GIL must be held.
unsafe fn repeated(
    py: Python<'_>,
    ints: &mut Ints,
    v: i64,
    n: usize,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: with the GIL (the caller's promise).
    let one = unsafe { list_of(py, 1, |_| owned(ints.get(v)))? };
    // SAFETY: with the GIL; `one` is a list of ours, dropped after.
    let list = unsafe { ffi::PySequence_Repeat(one, n as ffi::Py_ssize_t) };
    // SAFETY: our reference to `one`.
    unsafe { ffi::Py_DECREF(one) };
    if list.is_null() {
        return Err(PyErr::fetch(py));
    }
    Ok(list)
}

/// A row of one or two runs of values (`[a] * n + [b] * m`: masks, type ids,
/// padded rows of one value) as (a, n, b), or None for any other row.
fn two_runs(row: &[i64]) -> Option<(i64, usize, i64)> {
    let first = *row.first()?;
    let cut = row.iter().position(|&v| v != first).unwrap_or(row.len());
    let second = row.get(cut).copied().unwrap_or(first);
    row[cut..]
        .iter()
        .all(|&v| v == second)
        .then_some((first, cut, second))
}

/// `[a] * n + [b] * (len - n)` as a new list, or the error.
///
/// # Safety
/// The GIL must be held.
unsafe fn runs_list(
    py: Python<'_>,
    ints: &mut Ints,
    (a, n, b): (i64, usize, i64),
    len: usize,
) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: with the GIL (the caller's promise); every object
    // here is a new reference of ours, given away or dropped.
    unsafe {
        let head = repeated(py, ints, a, n)?;
        if n == len {
            return Ok(head);
        }
        let tail = match repeated(py, ints, b, len - n) {
            Ok(tail) => tail,
            Err(err) => {
                ffi::Py_DECREF(head);
                return Err(err);
            }
        };
        // `head += tail`: extends `head` in place, returning it (a new reference).
        let joined = ffi::PySequence_InPlaceConcat(head, tail);
        ffi::Py_DECREF(tail);
        ffi::Py_DECREF(head);
        if joined.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok(joined)
    }
}

/// `ids` as a new list of ints shared through `ints`.
pub fn ids_list<'py>(py: Python<'py>, ints: &IdInts, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: `py` proves the GIL is held; `get` gives new references.
    let list = unsafe { list_of(py, ids.len(), |i| ints.get(ids[i]))? };
    // SAFETY: `list` is a new reference to a list; the Bound takes it over.
    let bound = unsafe { Bound::from_owned_ptr(py, list) };
    Ok(bound.cast_into::<PyList>()?)
}

/// The rows of one field (`per_token` values per token: 2 for offsets, as
/// (start, end) tuples) as a list of lists, rows cut at `starts`; token ids
/// from `id_ints` when given.
pub fn rows<'py>(
    py: Python<'py>,
    values: &[i64],
    starts: &[i64],
    per_token: usize,
    id_ints: Option<&IdInts>,
) -> PyResult<Bound<'py, PyList>> {
    let n_rows = starts.len().saturating_sub(1);
    let tokens = starts.last().map_or(0, |&t| t as usize);
    let mut ints = Ints::new(if per_token == 2 || id_ints.is_some() {
        0
    } else {
        tokens
    });
    let mut pairs = (per_token == 2).then(|| {
        let last_start = values
            .iter()
            .step_by(2)
            .max()
            .map_or(0, |&s| s.max(0) as usize);
        Pairs::new(tokens, last_start)
    });
    // SAFETY: `py` proves the GIL is held for every C API call below.
    let outer = unsafe {
        list_of(py, n_rows, |r| {
            let (a, b) = (starts[r] as usize, starts[r + 1] as usize);
            let row = &values[per_token * a..per_token * b];
            let made = match (pairs.as_mut(), id_ints) {
                (Some(pairs), _) => list_of(py, b - a, |k| pairs.get(row[2 * k], row[2 * k + 1])),
                (None, Some(id_ints)) => list_of(py, b - a, |k| id_ints.get_value(row[k])),
                (None, None) => match two_runs(row) {
                    Some(runs) => runs_list(py, &mut ints, runs, row.len()),
                    None => list_of(py, b - a, |k| owned(ints.get(row[k]))),
                },
            };
            // The error is set again by `list_of`'s fetch below: restore it for the caller.
            made.unwrap_or_else(|err| {
                err.restore(py);
                std::ptr::null_mut()
            })
        })?
    };
    // SAFETY: `outer` is a new reference to a list; the Bound takes it over.
    let bound = unsafe { Bound::from_owned_ptr(py, outer) };
    Ok(bound.cast_into::<PyList>()?)
}
