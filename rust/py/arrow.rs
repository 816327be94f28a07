//! Zero-copy input from Apache Arrow string arrays (pyarrow `StringArray` /
//! `LargeStringArray`, or anything with `__arrow_c_array__`), through the
//! Arrow C data interface: one UTF-8 buffer plus offsets, borrowed for the
//! duration of a call. The capsules stay alive (and so the buffers) while we
//! read; releasing the array is left to the capsule, as the interface allows.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use std::ffi::{c_char, c_void, CStr};

#[repr(C)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

#[repr(C)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// The strings of an Arrow array, borrowed; `_capsules` keep them alive.
pub struct ArrowStrings<'py> {
    _capsules: (Bound<'py, PyAny>, Bound<'py, PyAny>),
    pub rows: Vec<&'py str>,
}

/// Reads `obj` as an Arrow string array if it offers `__arrow_c_array__`;
/// Ok(None) when it does not.
pub fn strings<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Option<ArrowStrings<'py>>> {
    if !obj.hasattr("__arrow_c_array__")? {
        return Ok(None);
    }
    let pair = obj.call_method0("__arrow_c_array__")?;
    let (schema, array): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair.extract()?;
    let schema_ptr = capsule_pointer(&schema, c"arrow_schema")?.cast::<ArrowSchema>();
    let array_ptr = capsule_pointer(&array, c"arrow_array")?.cast::<ArrowArray>();
    // SAFETY: the capsules hold valid, unreleased ArrowSchema/ArrowArray structs
    // (the C data interface's contract) and live as long as `schema`/`array`.
    let (format, a) = unsafe { (CStr::from_ptr((*schema_ptr).format), &*array_ptr) };
    let wide = match format.to_bytes() {
        b"u" => false,
        b"U" => true,
        other => {
            return Err(PyTypeError::new_err(format!(
                "{what} must be an Arrow string array (format 'u' or 'U'), not format {:?}",
                String::from_utf8_lossy(other)
            )))
        }
    };
    if a.n_buffers != 3 || a.length < 0 || a.offset < 0 {
        return Err(PyValueError::new_err(format!(
            "{what}: malformed Arrow string array"
        )));
    }
    let (n, first) = (a.length as usize, a.offset as usize);
    // SAFETY: a string array has three buffers: validity (may be null), offsets
    // (offset + length + 1 entries) and data (as long as the last offset).
    let (validity, offsets, data) = unsafe {
        let b = std::slice::from_raw_parts(a.buffers, 3);
        (b[0].cast::<u8>(), b[1], b[2].cast::<u8>())
    };
    let offset_at = |i: usize| -> i64 {
        // SAFETY: i <= first + n, within the offsets buffer (see above).
        unsafe {
            if wide {
                *offsets.cast::<i64>().add(i)
            } else {
                i64::from(*offsets.cast::<i32>().add(i))
            }
        }
    };
    let malformed = |detail: String| {
        PyValueError::new_err(format!("{what}: malformed Arrow string array ({detail})"))
    };
    let is_null = |i: usize| -> bool {
        // SAFETY: the validity bitmap has a bit for every row, offset included.
        a.null_count != 0
            && !validity.is_null()
            && unsafe { (*validity.add(i / 8) >> (i % 8)) & 1 == 0 }
    };
    let (start, end) = (offset_at(first), offset_at(first + n));
    if start < 0 || end < start {
        return Err(malformed(format!("its offsets run from {start} to {end}")));
    }
    let (start, end) = (start as usize, end as usize);
    // SAFETY: the data buffer holds at least `end` bytes.
    let bytes: &'py [u8] =
        unsafe { std::slice::from_raw_parts(if data.is_null() { [].as_ptr() } else { data }, end) };
    let text = obj
        .py()
        .detach(|| validated_utf8(&bytes[start..end]))
        .map_err(|e| PyValueError::new_err(format!("{what} holds invalid UTF-8: {e}")))?;
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        if is_null(first + i) {
            return Err(PyTypeError::new_err(format!(
                "{what}[{i}] is null; only strings can be encoded"
            )));
        }
        let (lo, hi) = (offset_at(first + i), offset_at(first + i + 1));
        if lo < start as i64 || hi < lo || hi > end as i64 {
            return Err(malformed(format!(
                "row {i} spans {lo}..{hi}, outside {start}..{end} or backwards"
            )));
        }
        let (lo, hi) = (lo as usize - start, hi as usize - start);
        let row = text.get(lo..hi).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{what}[{i}] does not start and end on UTF-8 character boundaries"
            ))
        })?;
        rows.push(row);
    }
    Ok(Some(ArrowStrings {
        _capsules: (schema, array),
        rows,
    }))
}

/// Bytes of a column each task validates: a few per core on a typical batch.
const VALIDATED_PER_TASK: usize = 1 << 20;

/// `bytes` as a str: validated with SIMD, in parallel over the CPU pool in
/// pieces that start on a character (the whole column is read: one thread
/// took ~90 ms per GB, serial time a device call cannot hide), with std's
/// error where it fails.
fn validated_utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    validated_in_pieces(bytes, VALIDATED_PER_TASK)
}

/// `validated_utf8` with pieces of about `piece` bytes.
fn validated_in_pieces(bytes: &[u8], piece: usize) -> Result<&str, std::str::Utf8Error> {
    let starts = piece_starts(bytes, piece);
    let valid = crate::pool::current()
        .map_sized(starts.len() - 1, bytes.len(), |i| {
            simdutf8::basic::from_utf8(&bytes[starts[i]..starts[i + 1]]).map(|_| ())
        })
        .is_ok();
    match valid {
        // SAFETY: the pieces are valid UTF-8 and back to back: so is the whole.
        true => Ok(unsafe { std::str::from_utf8_unchecked(bytes) }),
        false => std::str::from_utf8(bytes),
    }
}

/// Where `bytes` is cut into pieces of about `size`: 0, then each cut moved
/// back to a byte that is not a UTF-8 continuation byte (at most 3 steps in
/// valid text; a cut that would reach the previous one is dropped), then
/// `bytes.len()`.
fn piece_starts(bytes: &[u8], size: usize) -> Vec<usize> {
    let mut starts = vec![0];
    let mut at = size;
    while at < bytes.len() {
        let mut cut = at;
        while cut > 0 && bytes[cut] & 0xC0 == 0x80 && at - cut < 3 {
            cut -= 1;
        }
        if cut > *starts.last().unwrap_or(&0) {
            starts.push(cut);
        }
        at += size;
    }
    starts.push(bytes.len());
    starts
}

fn capsule_pointer(obj: &Bound<'_, PyAny>, name: &CStr) -> PyResult<*mut c_void> {
    let capsule = obj.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(name))?;
    Ok(ptr.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_the_column_and_start_on_characters() {
        let text = "a€𝄞é".repeat(50);
        let bytes = text.as_bytes();
        for size in 1..=12 {
            let starts = piece_starts(bytes, size);
            assert_eq!((starts[0], *starts.last().unwrap()), (0, bytes.len()));
            assert!(starts.windows(2).all(|w| w[0] < w[1]), "size {size}");
            assert!(starts[..starts.len() - 1]
                .iter()
                .all(|&s| text.is_char_boundary(s)));
            assert_eq!(validated_in_pieces(bytes, size), Ok(text.as_str()));
            // A bad byte anywhere fails, with std's error.
            for at in (0..bytes.len()).step_by(7) {
                let mut bad = bytes.to_vec();
                bad[at] = 0xFF;
                let err = std::str::from_utf8(&bad).unwrap_err();
                assert_eq!(validated_in_pieces(&bad, size), Err(err), "{size} {at}");
            }
        }
        // Invalid text: cuts still move forward, and the error is std's.
        let invalid = [0x80u8; 9];
        let starts = piece_starts(&invalid, 2);
        assert!(starts.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(
            validated_utf8(&invalid).unwrap_err(),
            std::str::from_utf8(&invalid).unwrap_err()
        );
    }
}
