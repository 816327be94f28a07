//! `decode_rows`: rows of ids -> texts, the ids read straight from the
//! Python lists (exact ints through the C API, one type check each; other
//! items through `inputs::token_ids`, which names the offending one), the
//! decoding on the engine's pool without the GIL (`engine::decode`).

use super::errors::detach_work;
use super::inputs;
use super::tokenizer::CoreTokenizer;
use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

/// The ids of one row, or None when an item is not an exact int in 0..2**32
/// (the caller then reads the row the slow way, for its error or conversion).
fn exact_ids(row: &Bound<'_, PyAny>) -> Option<Vec<u32>> {
    let (ptr, len, is_list) = if let Ok(list) = row.cast::<PyList>() {
        (list.as_ptr(), list.len(), true)
    } else if let Ok(tuple) = row.cast::<PyTuple>() {
        (tuple.as_ptr(), tuple.len(), false)
    } else {
        return None;
    };
    let mut ids = Vec::with_capacity(len);
    for i in 0..len {
        // SAFETY: `ptr` is a live list or tuple (held by `row`, with the GIL) and
        // i < its length, which nothing can change while we hold the GIL and
        // call no Python code; the item is a borrowed reference it keeps alive.
        let item = unsafe {
            match is_list {
                true => ffi::PyList_GetItem(ptr, i as ffi::Py_ssize_t),
                false => ffi::PyTuple_GetItem(ptr, i as ffi::Py_ssize_t),
            }
        };
        if item.is_null() {
            return None;
        }
        // SAFETY: `item` is a valid object pointer (above); PyLong_Type is the
        // interpreter's static int type. An exact int excludes bool and subclasses.
        if unsafe { ffi::Py_TYPE(item) != std::ptr::addr_of_mut!(ffi::PyLong_Type) } {
            return None;
        }
        // SAFETY: `item` is an exact int; an overflow sets an error, cleared below.
        let value = unsafe { ffi::PyLong_AsLongLong(item) };
        if value == -1 {
            // SAFETY: with the GIL held; clears the overflow error, if any.
            unsafe { ffi::PyErr_Clear() };
            return None;
        }
        ids.push(u32::try_from(value).ok()?);
    }
    Some(ids)
}

/// The text of each row of `rows` (a list of lists or tuples of ints), as the
/// tokenizer's decoder gives it; `clean_up`: transformers'
/// `clean_up_tokenization_spaces` on each.
#[pyfunction]
#[pyo3(signature = (tokenizer, rows, skip_special_tokens=true, clean_up=false))]
pub fn decode_rows(
    py: Python<'_>,
    tokenizer: PyRef<'_, CoreTokenizer>,
    rows: &Bound<'_, PyAny>,
    skip_special_tokens: bool,
    clean_up: bool,
) -> PyResult<Vec<String>> {
    let rows = rows
        .cast::<PyList>()
        .map_err(|_| PyTypeError::new_err("rows must be a list of id lists"))?;
    let ids = rows
        .iter()
        .enumerate()
        .map(|(i, row)| match exact_ids(&row) {
            Some(ids) => Ok(ids),
            None => inputs::token_ids(&row, &format!("sequences[{i}]")),
        })
        .collect::<PyResult<Vec<_>>>()?;
    let engine = tokenizer.engine();
    detach_work(py, || {
        engine.decode_rows(&ids, skip_special_tokens, clean_up)
    })
}
