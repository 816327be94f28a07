//! Reading the user's inputs: a sequence of `str` becomes the call's own list
//! of the strings (it holds them alive for the call; their UTF-8: `utf8.rs`),
//! an Arrow string array its rows. Any other shape gets a clear `TypeError`
//! naming the offending item.

use super::arrow::{self, ArrowStrings};
use super::errors;
use super::utf8::{self, Utf8Texts};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyList, PyString, PyTuple};

/// The items of `obj` (a list, tuple or other iterable of `str`), checked.
/// `what` names the argument in error messages.
pub fn texts<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyString>>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list of str, not a single str (wrap it in a list)"
        )));
    }
    if obj.is_none() || obj.is_instance_of::<PyBytes>() || obj.is_instance_of::<PyByteArray>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list of str, not {}",
            type_name(obj)
        )));
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a list of str, not {}",
            type_name(obj)
        ))
    })?;
    iter.enumerate()
        .map(|(i, item)| {
            let item = item?;
            item.cast_into::<PyString>().map_err(|e| {
                PyTypeError::new_err(format!(
                    "{what}[{i}] must be str, not {}",
                    type_name(&e.into_inner())
                ))
            })
        })
        .collect()
}

/// The UTF-8 of a few strings (one text, a row's words), borrowed as CPython
/// gives it under the GIL; a lone surrogate gets an `InvalidInputError`.
/// Batches of texts take `Texts::utf8`, off the GIL where the build allows.
pub fn utf8<'a>(
    py: Python<'_>,
    strings: &'a [Bound<'_, PyString>],
    what: &str,
) -> PyResult<Vec<&'a str>> {
    strings
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.to_str()
                .map_err(|err| errors::to_py(py, utf8::not_text(what, i, err.value(py))))
        })
        .collect()
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an unknown type".into())
}

/// A batch of input texts: Python strings, or an Arrow string array (zero copy).
pub enum Texts<'py> {
    Python(Vec<Bound<'py, PyString>>),
    Arrow(ArrowStrings<'py>),
}

impl<'py> Texts<'py> {
    /// Reads `obj`: an Arrow string array, else an iterable of `str`.
    pub fn read(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        match arrow::strings(obj, what)? {
            Some(strings) => Ok(Texts::Arrow(strings)),
            None => Ok(Texts::Python(texts(obj, what)?)),
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Texts::Python(v) => v.len(),
            Texts::Arrow(a) => a.rows.len(),
        }
    }

    /// The UTF-8 of every text (`Utf8Texts::strs`): Arrow's as it is,
    /// Python strings' through `utf8::of_strings`.
    pub fn utf8(&self, py: Python<'_>, what: &str) -> PyResult<Utf8Texts<'_>> {
        match self {
            Texts::Python(v) => utf8::of_strings(py, v, what),
            Texts::Arrow(a) => Ok(Utf8Texts::borrowed(&a.rows)),
        }
    }
}

/// Token ids from a list or tuple of ints (numpy integers too), checked in
/// one pass without a Python loop: a bool or a non-int is a `TypeError`, an
/// int outside `0..2**32` an `InvalidInputError`, each naming `what[i]`.
pub fn token_ids(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u32>> {
    if let Ok(list) = obj.cast::<PyList>() {
        let mut ids = Vec::with_capacity(list.len());
        for (i, item) in list.iter().enumerate() {
            ids.push(token_id(&item, what, i)?);
        }
        return Ok(ids);
    }
    if let Ok(tuple) = obj.cast::<PyTuple>() {
        let mut ids = Vec::with_capacity(tuple.len());
        for (i, item) in tuple.iter().enumerate() {
            ids.push(token_id(&item, what, i)?);
        }
        return Ok(ids);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a list of ints, not {}",
        type_name(obj)
    )))
}

fn token_id(item: &Bound<'_, PyAny>, what: &str, i: usize) -> PyResult<u32> {
    let not_an_int = || {
        PyTypeError::new_err(format!(
            "{what}[{i}] must be an int, not {}",
            type_name(item)
        ))
    };
    // Exact ints first: the common case, one type check.
    if item.is_exact_instance_of::<PyInt>() {
        if let Ok(v) = item.extract::<u32>() {
            return Ok(v);
        }
    } else if item.is_instance_of::<PyBool>() {
        return Err(not_an_int());
    }
    let out_of_range = |value: String| {
        let message = format!("{what}[{i}] = {value} is not a valid token id");
        errors::to_py(item.py(), crate::error::Error::InvalidArgument(message))
    };
    match item.extract::<i64>() {
        Ok(v) => u32::try_from(v).map_err(|_| out_of_range(v.to_string())),
        // An int too big for i64 (a numpy integer or index-able object converts too).
        Err(_) if item.is_instance_of::<PyInt>() => Err(out_of_range(item.to_string())),
        Err(_) => Err(not_an_int()),
    }
}
