//! `CoreTokenizer.encode_ids`: one `str` to a list of ids on the calling
//! thread, for `Tokenizer.encode`'s plain case (a call costs ~1 us beside the
//! engine's work, against ~18 us through `encode_batch` and its wrappers).
//! No pool, no batch object; the GIL is released only for a text long enough
//! to pay for releasing it.

use super::errors::{detach_work, from_panic, to_py};
use super::id_ints::IdInts;
use super::lists;
use super::utf8;
use crate::engine::Engine;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

/// Texts of at least this many bytes are encoded without the GIL (other
/// Python threads run meanwhile); shorter ones take less time than the
/// release and re-acquire cost others.
const DETACH_BYTES: usize = 2048;

/// The ids of `text` alone (see `Engine::encode_ids`) as a Python list.
pub(super) fn encode_ids<'py>(
    py: Python<'py>,
    engine: &Engine,
    ints: &IdInts,
    text: &Bound<'py, PyString>,
    add_special_tokens: bool,
) -> PyResult<Bound<'py, PyList>> {
    // A lone surrogate fails as in a batch (the error names `texts[0]`).
    let text = utf8::of_string(py, text, "texts")?;
    let text = text.as_ref();
    let work = || engine.encode_ids(text, add_special_tokens);
    let ids = match text.len() >= DETACH_BYTES {
        true => detach_work(py, work)?,
        false => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            Ok(Ok(ids)) => ids,
            Ok(Err(err)) => return Err(to_py(py, err)),
            Err(payload) => return Err(from_panic(py, payload)),
        },
    };
    lists::ids_list(py, ints, &ids)
}
