//! The UTF-8 of a batch of Python `str`, for the engine (one `&str` per row).
//!
//! Two builds, one seam. The stable-ABI build (the `abi3` feature: one wheel
//! for every CPython >= 3.11) asks CPython for each string's UTF-8
//! (`PyUnicode_AsUTF8AndSize`): free for ASCII strings, whose data already is
//! UTF-8, but a non-ASCII string is encoded (and the result cached on it) by
//! one thread under the GIL, 0.6-1 s per GB. A per-version build (the default
//! for source installs) reads each string's own PEP 393 buffer (1, 2 or 4
//! bytes per code point, `PyUnicode_KIND`/`PyUnicode_DATA`) under the GIL,
//! then counts and encodes it on the pool without the GIL: ASCII strings are
//! borrowed as they are, the others are encoded into one buffer
//! (Latin-1 and two-byte strings by simdutf's SIMD conversions). The call's
//! own list of the `str` objects keeps them alive, and a `str` never changes
//! once made, so their buffers hold still while the GIL is released.

use super::errors;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::borrow::Cow;

/// The UTF-8 of every string of a batch: borrowed from the strings where it
/// already is UTF-8, else from `encoded`.
pub struct Utf8Texts<'a> {
    rows: Vec<Row<'a>>,
    /// The UTF-8 of the rows that had to be encoded, back to back.
    encoded: String,
}

enum Row<'a> {
    Borrowed(&'a str),
    #[cfg_attr(feature = "abi3", allow(dead_code))] // only per-version builds encode
    Encoded(std::ops::Range<usize>),
}

impl<'a> Utf8Texts<'a> {
    /// Rows that are UTF-8 already (Arrow's).
    pub fn borrowed(rows: &[&'a str]) -> Self {
        Utf8Texts {
            rows: rows.iter().map(|row| Row::Borrowed(row)).collect(),
            encoded: String::new(),
        }
    }

    /// One `&str` per string, in order.
    pub fn strs(&self) -> Vec<&str> {
        self.rows
            .iter()
            .map(|row| match row {
                Row::Borrowed(text) => *text,
                Row::Encoded(span) => &self.encoded[span.clone()],
            })
            .collect()
    }
}

/// The error for `what[i]`, a string with no UTF-8 form (a lone surrogate).
pub(super) fn not_text(what: &str, i: usize, why: impl std::fmt::Display) -> crate::error::Error {
    crate::error::Error::InvalidArgument(format!(
        "{what}[{i}] cannot be encoded as UTF-8 ({why}); lone surrogates are not text"
    ))
}

/// The UTF-8 of `strings`; a lone surrogate gets an `InvalidInputError`
/// naming the first string that has one.
#[cfg(feature = "abi3")]
pub fn of_strings<'a>(
    py: Python<'_>,
    strings: &'a [Bound<'_, PyString>],
    what: &str,
) -> PyResult<Utf8Texts<'a>> {
    let rows = strings
        .iter()
        .enumerate()
        .map(|(i, s)| match s.to_str() {
            Ok(text) => Ok(Row::Borrowed(text)),
            Err(err) => Err(errors::to_py(py, not_text(what, i, err.value(py)))),
        })
        .collect::<PyResult<_>>()?;
    Ok(Utf8Texts {
        rows,
        encoded: String::new(),
    })
}

/// The UTF-8 of `strings`; a lone surrogate gets an `InvalidInputError`
/// naming the first string that has one.
#[cfg(not(feature = "abi3"))]
pub fn of_strings<'a>(
    py: Python<'_>,
    strings: &'a [Bound<'_, PyString>],
    what: &str,
) -> PyResult<Utf8Texts<'a>> {
    let units = strings
        .iter()
        .map(code_points::of)
        .collect::<PyResult<Vec<_>>>()?;
    errors::detach_work(py, || code_points::to_utf8(&units, what))
}

/// The UTF-8 of one string (`what[0]` in its error), on the calling thread:
/// CPython's own (`PyUnicode_AsUTF8AndSize`, cached on the string).
#[cfg(feature = "abi3")]
pub fn of_string<'a>(
    py: Python<'_>,
    s: &'a Bound<'_, PyString>,
    what: &str,
) -> PyResult<Cow<'a, str>> {
    s.to_str()
        .map(Cow::Borrowed)
        .map_err(|err| errors::to_py(py, not_text(what, 0, err.value(py))))
}

/// The UTF-8 of one string (`what[0]` in its error), on the calling thread:
/// borrowed when the string is ASCII, else encoded from its code points (a
/// call's one text: no pool, and no UTF-8 copy left cached on the caller's
/// string, as CPython's encoder leaves one).
#[cfg(not(feature = "abi3"))]
pub fn of_string<'a>(
    py: Python<'_>,
    s: &'a Bound<'_, PyString>,
    what: &str,
) -> PyResult<Cow<'a, str>> {
    let units = code_points::of(s)?;
    code_points::one_to_utf8(units, what).map_err(|err| errors::to_py(py, err))
}

#[cfg(not(feature = "abi3"))]
mod code_points {
    //! A `str`'s own code points (PEP 393), and their UTF-8 made on the pool.

    use super::{not_text, Row, Utf8Texts};
    use pyo3::ffi;
    use pyo3::prelude::*;
    use pyo3::types::PyString;
    use std::borrow::Cow;
    use std::sync::{Mutex, PoisonError};

    /// A string's code points as CPython stores them: one, two or four bytes each.
    #[derive(Clone, Copy)]
    pub enum CodePoints<'a> {
        /// Flagged ASCII by CPython: UTF-8 as it is.
        Ascii(&'a [u8]),
        One(&'a [u8]),
        Two(&'a [u16]),
        Four(&'a [u32]),
    }

    /// The code points of `s`, borrowed for as long as `s` is.
    pub fn of<'a>(s: &'a Bound<'_, PyString>) -> PyResult<CodePoints<'a>> {
        let op = s.as_ptr();
        // SAFETY: `op` is a live str (the Bound holds a reference) and the GIL
        // is held. `PyUnicode_READY` (a no-op from 3.12) makes a legacy string
        // canonical; after it, DATA holds GET_LENGTH code points of KIND bytes,
        // which stay put and unchanged while the reference lives (a str is
        // immutable; CPython only resizes one it holds the sole reference to).
        unsafe {
            if ffi::PyUnicode_READY(op) != 0 {
                return Err(PyErr::fetch(s.py()));
            }
            let len = usize::try_from(ffi::PyUnicode_GET_LENGTH(op)).unwrap_or(0);
            if len == 0 {
                return Ok(CodePoints::One(&[]));
            }
            let data = ffi::PyUnicode_DATA(op);
            // The flag is a bitfield pyo3 reads up to 3.13; later, ASCII is
            // found by counting (`to_utf8`).
            #[cfg(not(Py_3_14))]
            if ffi::PyUnicode_IS_ASCII(op) != 0 {
                return Ok(CodePoints::Ascii(std::slice::from_raw_parts(
                    data as *const u8,
                    len,
                )));
            }
            Ok(match ffi::PyUnicode_KIND(op) {
                ffi::PyUnicode_1BYTE_KIND => {
                    CodePoints::One(std::slice::from_raw_parts(data as *const u8, len))
                }
                ffi::PyUnicode_2BYTE_KIND => {
                    CodePoints::Two(std::slice::from_raw_parts(data as *const u16, len))
                }
                _ => CodePoints::Four(std::slice::from_raw_parts(data as *const u32, len)),
            })
        }
    }

    impl<'a> CodePoints<'a> {
        fn len(&self) -> usize {
            match self {
                CodePoints::Ascii(u) | CodePoints::One(u) => u.len(),
                CodePoints::Two(u) => u.len(),
                CodePoints::Four(u) => u.len(),
            }
        }

        fn bytes(&self) -> usize {
            match self {
                CodePoints::Ascii(u) | CodePoints::One(u) => u.len(),
                CodePoints::Two(u) => u.len() * 2,
                CodePoints::Four(u) => u.len() * 4,
            }
        }

        fn slice(&self, range: std::ops::Range<usize>) -> CodePoints<'a> {
            match self {
                CodePoints::Ascii(u) => CodePoints::Ascii(&u[range]),
                CodePoints::One(u) => CodePoints::One(&u[range]),
                CodePoints::Two(u) => CodePoints::Two(&u[range]),
                CodePoints::Four(u) => CodePoints::Four(&u[range]),
            }
        }

        /// Bytes of UTF-8; None when a code point is a surrogate.
        fn utf8_len(&self) -> Option<usize> {
            match self {
                CodePoints::Ascii(u) => Some(u.len()),
                CodePoints::One(u) => Some(latin1_utf8_len(u)),
                CodePoints::Two(u) => ucs2_utf8_len(u),
                CodePoints::Four(u) => utf8_len(u),
            }
        }

        /// Writes the UTF-8 into `out` (none of the code points a surrogate:
        /// `utf8_len` checked); returns the bytes written, short of
        /// `out.len()` only if the code points do not fit.
        fn encode(&self, out: &mut [u8]) -> usize {
            match self {
                CodePoints::Ascii(u) => match out.get_mut(..u.len()) {
                    Some(room) => {
                        room.copy_from_slice(u);
                        u.len()
                    }
                    None => 0,
                },
                // simdutf writes exactly as many bytes as it counts: 0 unless
                // that is the span's length.
                CodePoints::One(u) if simdutf::utf8_length_from_latin1(u) == out.len() => {
                    // SAFETY: `u` is readable for its length and `out` is
                    // writable for the UTF-8 length of `u` (checked above);
                    // they do not overlap (a str's buffer, our own Vec).
                    unsafe {
                        simdutf::convert_latin1_to_utf8(u.as_ptr(), u.len(), out.as_mut_ptr())
                    }
                }
                // UCS-2 without surrogates (`utf8_len` refused them) is valid
                // UTF-16; the validating conversion writes 0 bytes else.
                CodePoints::Two(u) if simdutf::utf8_length_from_utf16le(u) == out.len() => {
                    // SAFETY: as above.
                    unsafe {
                        simdutf::convert_utf16le_to_utf8(u.as_ptr(), u.len(), out.as_mut_ptr())
                    }
                }
                CodePoints::One(_) | CodePoints::Two(_) => 0,
                CodePoints::Four(u) => encode_ucs4(u, out),
            }
        }

        /// What CPython's UTF-8 encoder says of the first run of surrogates
        /// (it reports the whole run): "... in position 3-4: ...".
        fn surrogate_error(&self) -> String {
            let code_points: Vec<u32> = match self {
                CodePoints::Ascii(_) | CodePoints::One(_) => Vec::new(),
                CodePoints::Two(u) => u.iter().map(|&c| c.into()).collect(),
                CodePoints::Four(u) => u.to_vec(),
            };
            let at = code_points
                .iter()
                .position(|&c| is_surrogate(c))
                .unwrap_or(0);
            let run = code_points[at..]
                .iter()
                .take_while(|&&c| is_surrogate(c))
                .count();
            let reason = "surrogates not allowed";
            match run {
                0 | 1 => {
                    let c = code_points.get(at).copied().unwrap_or(0);
                    format!("'utf-8' codec can't encode character '\\u{c:04x}' in position {at}: {reason}")
                }
                _ => format!(
                    "'utf-8' codec can't encode characters in position {at}-{}: {reason}",
                    at + run - 1
                ),
            }
        }
    }

    fn is_surrogate(c: u32) -> bool {
        c & !0x7FF == 0xD800
    }

    /// Code points a task counts or encodes: long strings are cut so that
    /// one huge string still spreads over the pool.
    const PER_TASK: usize = 256 << 10;

    /// A piece of row `row`'s code points.
    struct Piece<'a> {
        row: usize,
        code_points: CodePoints<'a>,
    }

    /// The UTF-8 of `strings`: counted and checked on the pool, ASCII rows
    /// borrowed, the others encoded on the pool into one buffer.
    pub fn to_utf8<'a>(
        strings: &[CodePoints<'a>],
        what: &str,
    ) -> crate::error::Result<Utf8Texts<'a>> {
        let pool = crate::pool::current();
        let flagged = |s: &CodePoints| matches!(s, CodePoints::Ascii(_));
        let total_bytes = strings
            .iter()
            .filter(|s| !flagged(s))
            .map(CodePoints::bytes)
            .sum();
        // Strings flagged ASCII need no work: a batch of them none on the pool.
        let pieces: Vec<Piece<'a>> = strings
            .iter()
            .enumerate()
            .filter(|(_, s)| !flagged(s))
            .flat_map(|(row, s)| {
                (0..s.len().div_ceil(PER_TASK)).map(move |k| Piece {
                    row,
                    code_points: s.slice(k * PER_TASK..s.len().min((k + 1) * PER_TASK)),
                })
            })
            .collect();
        let lens = pool.map_sized(pieces.len(), total_bytes, |i| {
            Ok::<_, crate::error::Error>(pieces[i].code_points.utf8_len())
        })?;
        let mut row_lens = vec![Some(0usize); strings.len()];
        for (piece, len) in pieces.iter().zip(&lens) {
            let row = &mut row_lens[piece.row];
            *row = row.zip(*len).map(|(a, b)| a + b);
        }
        if let Some(i) = row_lens.iter().position(Option::is_none) {
            return Err(not_text(what, i, strings[i].surrogate_error()));
        }
        let row_lens: Vec<usize> = row_lens.into_iter().flatten().collect();
        // ASCII strings (one byte per code point, as many bytes of UTF-8) are
        // UTF-8 already; the others get a span of the buffer.
        let ascii = |i: usize| match strings[i] {
            CodePoints::Ascii(_) => true,
            CodePoints::One(u) => row_lens[i] == u.len(),
            _ => false,
        };
        let mut end = 0;
        let rows = strings
            .iter()
            .zip(&row_lens)
            .enumerate()
            .map(|(i, (s, &len))| match s {
                CodePoints::Ascii(u) | CodePoints::One(u) if ascii(i) => {
                    // SAFETY: every byte is below 0x80 (flagged so by CPython,
                    // or counted above): ASCII is UTF-8.
                    Row::Borrowed(unsafe { std::str::from_utf8_unchecked(u) })
                }
                _ => {
                    end += len;
                    Row::Encoded(end - len..end)
                }
            })
            .collect();
        let mut buffer = vec![0u8; end];
        let mut rest = buffer.as_mut_slice();
        let mut slots = Vec::with_capacity(pieces.len());
        for (piece, len) in pieces.iter().zip(&lens) {
            let len = if ascii(piece.row) {
                0
            } else {
                len.unwrap_or(0)
            };
            let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
            slots.push(Mutex::new(slot));
            rest = tail;
        }
        pool.map_sized(pieces.len(), total_bytes, |i| {
            let mut slot = slots[i].lock().unwrap_or_else(PoisonError::into_inner);
            match slot.is_empty() || pieces[i].code_points.encode(&mut slot) == slot.len() {
                true => Ok(()),
                false => Err(crate::error::Error::InvalidArgument(format!(
                    "{what}[{}] changed while it was read",
                    pieces[i].row
                ))),
            }
        })?;
        // SAFETY: each piece starts on a code point and is the UTF-8 of its
        // code points, none a surrogate (checked above), as `encode` writes
        // them (and fills its span exactly, checked); pieces lie back to back.
        let encoded = unsafe { String::from_utf8_unchecked(buffer) };
        Ok(Utf8Texts { rows, encoded })
    }

    /// The UTF-8 of one string's code points: borrowed when they are ASCII.
    pub fn one_to_utf8<'a>(s: CodePoints<'a>, what: &str) -> crate::error::Result<Cow<'a, str>> {
        let Some(len) = s.utf8_len() else {
            return Err(not_text(what, 0, s.surrogate_error()));
        };
        if let CodePoints::Ascii(u) | CodePoints::One(u) = s {
            if len == u.len() {
                // SAFETY: every byte is below 0x80 (as many bytes of UTF-8 as
                // code points): ASCII is UTF-8.
                return Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(u) }));
            }
        }
        let mut out = vec![0u8; len];
        if s.encode(&mut out) != len {
            return Err(crate::error::Error::InvalidArgument(format!(
                "{what}[0] changed while it was read"
            )));
        }
        // SAFETY: `encode` wrote the UTF-8 of code points none of which is a
        // surrogate (`utf8_len` checked), filling `out` exactly (checked).
        Ok(Cow::Owned(unsafe { String::from_utf8_unchecked(out) }))
    }

    /// Bytes of UTF-8 for Latin-1 code points: one more for each from 0x80
    /// (counted in blocks whose sums fit a byte, which vectorise well).
    fn latin1_utf8_len(units: &[u8]) -> usize {
        let high: usize = units
            .chunks(255)
            .map(|block| block.iter().fold(0u8, |sum, &b| sum + (b >> 7)) as usize)
            .sum();
        units.len() + high
    }

    /// Bytes of UTF-8 for two-byte code points; None when one is a surrogate.
    fn ucs2_utf8_len(units: &[u16]) -> Option<usize> {
        let mut extra = 0usize;
        let mut surrogates = 0u16;
        // 16-bit sums (at most 2 per code point): twice the lanes of 32-bit ones.
        for block in units.chunks(1 << 14) {
            let mut block_extra = 0u16;
            for &c in block {
                block_extra += (c >= 0x80) as u16 + (c >= 0x800) as u16;
                surrogates |= (c & 0xF800 == 0xD800) as u16;
            }
            extra += block_extra as usize;
        }
        (surrogates == 0).then_some(units.len() + extra)
    }

    /// Code points in a block counted with 32-bit sums.
    const BLOCK: usize = 4096;

    /// Bytes of UTF-8 for `units`; None when one is a surrogate.
    fn utf8_len<U: Copy + Into<u32>>(units: &[U]) -> Option<usize> {
        let mut extra = 0usize;
        let mut surrogates = 0u32;
        for block in units.chunks(BLOCK) {
            let mut block_extra = 0u32;
            for &u in block {
                let c: u32 = u.into();
                block_extra += (c >= 0x80) as u32 + (c >= 0x800) as u32 + (c >= 0x1_0000) as u32;
                surrogates |= is_surrogate(c) as u32;
            }
            extra += block_extra as usize;
        }
        (surrogates == 0).then_some(units.len() + extra)
    }

    /// Writes the UTF-8 of four-byte code points (strings with a character
    /// beyond the BMP: rare) into `out`; returns the bytes written, 0 if
    /// they do not fit.
    fn encode_ucs4(units: &[u32], out: &mut [u8]) -> usize {
        let mut at = 0;
        for &c in units {
            let Some(c) = char::from_u32(c) else { return 0 };
            let Some(room) = out.get_mut(at..at + c.len_utf8()) else {
                return 0;
            };
            at += c.encode_utf8(room).len();
        }
        at
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn utf8_of(text: &str) -> String {
            let code_points: Vec<u32> = text.chars().map(u32::from).collect();
            let max = code_points.iter().copied().max().unwrap_or(0);
            let narrow8: Vec<u8> = code_points.iter().map(|&c| c as u8).collect();
            let narrow16: Vec<u16> = code_points.iter().map(|&c| c as u16).collect();
            let strings = match max {
                0..0x100 => CodePoints::One(&narrow8),
                0x100..0x1_0000 => CodePoints::Two(&narrow16),
                _ => CodePoints::Four(&code_points),
            };
            let texts = to_utf8(&[strings], "texts").unwrap();
            texts.strs()[0].to_string()
        }

        #[test]
        fn every_width_encodes_as_std_does() {
            let long_mixed = "ab é€ 😀 ".repeat(PER_TASK / 3);
            let runs_of_each_width =
                "a".repeat(40) + &"é".repeat(17) + &"日".repeat(17) + "aé日" + &"ü€x".repeat(11);
            for text in [
                "",
                "plain ascii, more than sixteen characters long",
                "café crème brûlée, latin-1 only ÿ",
                "€uro and ascii runs of sixteen or more characters, then 日本語",
                "astral 😀 and 𝄞 among ascii and é and €",
                "\u{7f}\u{80}\u{7ff}\u{800}\u{ffff}\u{10000}\u{10ffff}",
                &long_mixed,
                &runs_of_each_width,
                &runs_of_each_width[1..],
                &runs_of_each_width[..runs_of_each_width.len() - 1],
            ] {
                assert_eq!(utf8_of(text), text);
            }
        }

        #[test]
        fn surrogates_are_refused_naming_the_first_string() {
            let good: Vec<u16> = "ok €".encode_utf16().collect();
            let bad = [0x61u16, 0xDC00, 0x62];
            let bad4 = [0x1F600u32, 0xD800];
            let strings = [
                CodePoints::Two(&good),
                CodePoints::Two(&bad),
                CodePoints::Four(&bad4),
            ];
            let err = to_utf8(&strings, "texts").err().unwrap().to_string();
            assert!(err.contains("texts[1]"), "{err}");
            assert!(err.contains("'\\udc00' in position 1"), "{err}");
            // A high and a low surrogate side by side are two code points in
            // a str, not a pair (UTF-16 would join them into one character).
            let pair = [0x61u16, 0xD83D, 0xDE00];
            let err = to_utf8(&[CodePoints::Two(&pair)], "texts")
                .err()
                .unwrap()
                .to_string();
            assert!(err.contains("texts[0]"), "{err}");
            assert!(err.contains("characters in position 1-2:"), "{err}");
        }

        #[test]
        fn code_points_that_do_not_fit_their_span_write_short() {
            let two: Vec<u16> = "ab日".encode_utf16().collect();
            let four = [0x61u32, 0x1F600];
            for (code_points, fits) in [
                (CodePoints::Ascii(b"abc"), 3),
                (CodePoints::One(b"a\xe9"), 3),
                (CodePoints::Two(&two), 5),
                (CodePoints::Four(&four), 5),
            ] {
                let mut out = vec![0u8; fits];
                assert_eq!(code_points.encode(&mut out), fits);
                let mut short = vec![0u8; fits - 1];
                assert!(code_points.encode(&mut short) < fits);
            }
        }
    }
}
