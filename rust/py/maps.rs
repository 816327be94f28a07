//! `encode_rich` and `CoreMaps`: rows with the per-token maps of
//! transformers' `BatchEncoding` (word ids, sequence ids, token strings,
//! char/word/token lookups), overflowing windows, pre-split words and
//! `split_special_tokens`, computed by the engine (`engine::maps`).
//!
//! `CoreMaps` holds each row's crate `Encoding` (padded as the crate pads
//! it) and answers every lookup with the crate's own method, so the
//! semantics are `tokenizers`' by construction. It pickles to a compact byte
//! string, so the maps travel with a batch to another process.

use super::batch::CoreBatch;
use super::errors::detach_work;
use super::inputs;
use super::settings::{call_settings, check_pairs, Padding, Truncation};
use super::tokenizer::CoreTokenizer;
use crate::engine::maps::{RichInput, RichSettings, Sequence};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};
use tokenizers::Encoding;

/// Every row's crate `Encoding` and the input row each comes from.
#[pyclass(frozen, module = "gpu_tok._core")]
pub struct CoreMaps {
    rows: Vec<Encoding>,
    samples: Vec<usize>,
}

impl CoreMaps {
    fn row(&self, i: usize) -> PyResult<&Encoding> {
        self.rows.get(i).ok_or_else(|| {
            PyIndexError::new_err(format!("row {i} out of range ({} rows)", self.rows.len()))
        })
    }
}

#[pymethods]
impl CoreMaps {
    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// The input row (sample) each row comes from (`overflow_to_sample_mapping`).
    fn samples(&self) -> Vec<usize> {
        self.samples.clone()
    }

    fn ids(&self, i: usize) -> PyResult<Vec<u32>> {
        Ok(self.row(i)?.get_ids().to_vec())
    }

    fn type_ids(&self, i: usize) -> PyResult<Vec<u32>> {
        Ok(self.row(i)?.get_type_ids().to_vec())
    }

    fn tokens(&self, i: usize) -> PyResult<Vec<String>> {
        Ok(self.row(i)?.get_tokens().to_vec())
    }

    fn offsets(&self, i: usize) -> PyResult<Vec<(usize, usize)>> {
        Ok(self.row(i)?.get_offsets().to_vec())
    }

    fn attention_mask(&self, i: usize) -> PyResult<Vec<u32>> {
        Ok(self.row(i)?.get_attention_mask().to_vec())
    }

    fn special_tokens_mask(&self, i: usize) -> PyResult<Vec<u32>> {
        Ok(self.row(i)?.get_special_tokens_mask().to_vec())
    }

    fn word_ids(&self, i: usize) -> PyResult<Vec<Option<u32>>> {
        Ok(self.row(i)?.get_word_ids().to_vec())
    }

    fn sequence_ids(&self, i: usize) -> PyResult<Vec<Option<usize>>> {
        Ok(self.row(i)?.get_sequence_ids())
    }

    fn n_sequences(&self, i: usize) -> PyResult<usize> {
        Ok(self.row(i)?.n_sequences())
    }

    fn length(&self, i: usize) -> PyResult<usize> {
        Ok(self.row(i)?.len())
    }

    fn token_to_sequence(&self, i: usize, token: usize) -> PyResult<Option<usize>> {
        Ok(self.row(i)?.token_to_sequence(token))
    }

    fn token_to_chars(&self, i: usize, token: usize) -> PyResult<Option<(usize, usize)>> {
        Ok(self
            .row(i)?
            .token_to_chars(token)
            .map(|(_, offsets)| offsets))
    }

    fn token_to_word(&self, i: usize, token: usize) -> PyResult<Option<u32>> {
        Ok(self.row(i)?.token_to_word(token).map(|(_, word)| word))
    }

    fn word_to_tokens(
        &self,
        i: usize,
        word: u32,
        sequence: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.row(i)?.word_to_tokens(word, sequence))
    }

    fn word_to_chars(
        &self,
        i: usize,
        word: u32,
        sequence: usize,
    ) -> PyResult<Option<(usize, usize)>> {
        Ok(self.row(i)?.word_to_chars(word, sequence))
    }

    fn char_to_token(&self, i: usize, pos: usize, sequence: usize) -> PyResult<Option<usize>> {
        Ok(self.row(i)?.char_to_token(pos, sequence))
    }

    fn char_to_word(&self, i: usize, pos: usize, sequence: usize) -> PyResult<Option<u32>> {
        Ok(self.row(i)?.char_to_word(pos, sequence))
    }

    /// The maps as bytes (for pickling; `from_bytes` reads them back).
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &wire::write(&self.rows, &self.samples))
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        let (rows, samples) =
            wire::read(data).ok_or_else(|| PyValueError::new_err("not the bytes of a CoreMaps"))?;
        Ok(CoreMaps { rows, samples })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let from_bytes = slf.get_type().getattr("from_bytes")?;
        let data = slf.get().to_bytes(py);
        PyTuple::new(py, [from_bytes, PyTuple::new(py, [data])?.into_any()])
    }
}

/// One sequence of a row as read from Python: a `str`, or pre-split words.
enum Owned<'py> {
    Text(Bound<'py, PyString>),
    Words(Vec<Bound<'py, PyString>>),
}

/// The rows of `obj` (an iterable of `str`, or with `words` of lists of `str`).
fn read_rows<'py>(obj: &Bound<'py, PyAny>, words: bool, what: &str) -> PyResult<Vec<Owned<'py>>> {
    if !words {
        return Ok(inputs::texts(obj, what)?
            .into_iter()
            .map(Owned::Text)
            .collect());
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a list of word lists (is_split_into_words=True), not a str"
        )));
    }
    let iter = obj
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a list of word lists")))?;
    iter.enumerate()
        .map(|(i, item)| {
            Ok(Owned::Words(inputs::texts(
                &item?,
                &format!("{what}[{i}]"),
            )?))
        })
        .collect()
}

/// The UTF-8 of a row read by [`read_rows`], borrowed.
fn borrow<'a>(py: Python<'_>, owned: &'a Owned<'_>, what: &str) -> PyResult<Sequence<'a>> {
    match owned {
        Owned::Text(text) => Ok(Sequence::Text(
            inputs::utf8(py, std::slice::from_ref(text), what)?[0],
        )),
        Owned::Words(words) => Ok(Sequence::Words(inputs::utf8(py, words, what)?)),
    }
}

/// Encodes rows with their per-token maps: `(batch, maps)`. `texts` (and
/// `pairs`) are lists of `str`, or with `pretokenized` lists of word lists.
#[pyfunction]
#[pyo3(signature = (tokenizer, texts, pairs=None, *, pretokenized=false, split_special_tokens=false,
                    overflow=false, add_special_tokens=true, truncation=None, padding=None,
                    attention_mask=false, type_ids=false, special_tokens_mask=false, offsets=false,
                    dtype="int64"))]
#[allow(clippy::too_many_arguments)]
pub fn encode_rich(
    py: Python<'_>,
    tokenizer: PyRef<'_, CoreTokenizer>,
    texts: &Bound<'_, PyAny>,
    pairs: Option<&Bound<'_, PyAny>>,
    pretokenized: bool,
    split_special_tokens: bool,
    overflow: bool,
    add_special_tokens: bool,
    truncation: Option<PyRef<'_, Truncation>>,
    padding: Option<PyRef<'_, Padding>>,
    attention_mask: bool,
    type_ids: bool,
    special_tokens_mask: bool,
    offsets: bool,
    dtype: &str,
) -> PyResult<(CoreBatch, CoreMaps)> {
    let (base, dtype) = call_settings(
        add_special_tokens,
        truncation,
        padding,
        attention_mask,
        type_ids,
        special_tokens_mask,
        offsets,
        dtype,
    )?;
    let firsts = read_rows(texts, pretokenized, "texts")?;
    let seconds = pairs
        .map(|p| read_rows(p, pretokenized, "text_pair"))
        .transpose()?;
    check_pairs(firsts.len(), seconds.as_ref().map(Vec::len))?;
    let mut inputs: Vec<RichInput<'_>> = Vec::with_capacity(firsts.len());
    for (i, first) in firsts.iter().enumerate() {
        let a = borrow(py, first, &format!("texts[{i}]"))?;
        let b = match &seconds {
            Some(seconds) => Some(borrow(py, &seconds[i], &format!("text_pair[{i}]"))?),
            None => None,
        };
        inputs.push((a, b));
    }
    let settings = RichSettings {
        base,
        overflow,
        split_special_tokens,
    };
    let engine = tokenizer.engine();
    let rich = detach_work(py, || engine.encode_rich(&inputs, &settings))?;
    let batch =
        detach_work(py, || CoreBatch::new(rich.batch, dtype))?.with_id_ints(tokenizer.id_ints());
    Ok((
        batch,
        CoreMaps {
            rows: rich.encodings,
            samples: rich.sample_of_row,
        },
    ))
}

/// The byte layout of pickled maps: little-endian u64 counts, then per row
/// its token count, ids, type ids, special and attention masks (u32 each),
/// word ids (u32, u32::MAX for none), offsets (two u64), token strings
/// (u32 lengths, then the bytes), and its sequence ranges (count, then
/// sequence, start, end); the samples last.
mod wire {
    use tokenizers::Encoding;

    const NONE: u32 = u32::MAX;

    pub fn write(rows: &[Encoding], samples: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let u64 = |out: &mut Vec<u8>, v: usize| out.extend((v as u64).to_le_bytes());
        let u32s = |out: &mut Vec<u8>, v: &mut dyn Iterator<Item = u32>| {
            v.for_each(|x| out.extend(x.to_le_bytes()))
        };
        u64(&mut out, rows.len());
        for e in rows {
            u64(&mut out, e.len());
            u32s(&mut out, &mut e.get_ids().iter().copied());
            u32s(&mut out, &mut e.get_type_ids().iter().copied());
            u32s(&mut out, &mut e.get_special_tokens_mask().iter().copied());
            u32s(&mut out, &mut e.get_attention_mask().iter().copied());
            u32s(
                &mut out,
                &mut e.get_word_ids().iter().map(|w| w.unwrap_or(NONE)),
            );
            for &(start, end) in e.get_offsets() {
                u64(&mut out, start);
                u64(&mut out, end);
            }
            u32s(&mut out, &mut e.get_tokens().iter().map(|t| t.len() as u32));
            e.get_tokens().iter().for_each(|t| out.extend(t.as_bytes()));
            let ranges = ranges(e);
            u64(&mut out, ranges.len());
            for (seq, start, end) in ranges {
                u64(&mut out, seq);
                u64(&mut out, start);
                u64(&mut out, end);
            }
        }
        u64(&mut out, samples.len());
        samples.iter().for_each(|&s| u64(&mut out, s));
        out
    }

    /// Ranges the crate's lookups behave the same with as with `e`'s own
    /// (which it does not expose): (sequence, start, end) for sequences 0..n
    /// from the per-token sequence ids (each sequence's tokens are
    /// contiguous). A sequence without tokens gets 0..0: where its empty
    /// range lies changes no lookup, that it exists changes `n_sequences`.
    fn ranges(e: &Encoding) -> Vec<(usize, usize, usize)> {
        // Without ranges the crate takes any index up to the length as sequence 0.
        if e.token_to_sequence(e.len()).is_some() {
            return Vec::new();
        }
        let ids = e.get_sequence_ids();
        (0..e.n_sequences())
            .map(|seq| {
                let mut at = ids
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| **s == Some(seq))
                    .map(|(k, _)| k);
                match at.next() {
                    Some(first) => (seq, first, at.next_back().unwrap_or(first) + 1),
                    None => (seq, 0, 0),
                }
            })
            .collect()
    }

    struct Reader<'a> {
        data: &'a [u8],
    }

    impl Reader<'_> {
        fn take(&mut self, n: usize) -> Option<&[u8]> {
            if self.data.len() < n {
                return None;
            }
            let (head, rest) = self.data.split_at(n);
            self.data = rest;
            Some(head)
        }
        fn u64(&mut self) -> Option<usize> {
            let v = u64::from_le_bytes(self.take(8)?.try_into().ok()?);
            usize::try_from(v).ok()
        }
        fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
            let bytes = self.take(n.checked_mul(4)?)?;
            Some(
                bytes
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
                    .collect(),
            )
        }
    }

    pub fn read(data: &[u8]) -> Option<(Vec<Encoding>, Vec<usize>)> {
        let mut r = Reader { data };
        let n_rows = r.u64()?;
        let mut rows = Vec::with_capacity(n_rows.min(data.len() / 8));
        for _ in 0..n_rows {
            let n = r.u64()?;
            if n > r.data.len() {
                return None;
            }
            let ids = r.u32s(n)?;
            let type_ids = r.u32s(n)?;
            let special = r.u32s(n)?;
            let attention = r.u32s(n)?;
            let words = r
                .u32s(n)?
                .into_iter()
                .map(|w| (w != NONE).then_some(w))
                .collect();
            let offsets = (0..n)
                .map(|_| Some((r.u64()?, r.u64()?)))
                .collect::<Option<Vec<_>>>()?;
            let lens = r.u32s(n)?;
            let tokens = lens
                .iter()
                .map(|&len| String::from_utf8(r.take(len as usize)?.to_vec()).ok())
                .collect::<Option<Vec<_>>>()?;
            let n_ranges = r.u64()?;
            let mut ranges = ahash::AHashMap::new();
            for _ in 0..n_ranges {
                let (seq, start, end) = (r.u64()?, r.u64()?, r.u64()?);
                if start > end || end > n {
                    return None;
                }
                ranges.insert(seq, start..end);
            }
            rows.push(Encoding::new(
                ids,
                type_ids,
                tokens,
                words,
                offsets,
                special,
                attention,
                Vec::new(),
                ranges,
            ));
        }
        let n_samples = r.u64()?;
        let samples = (0..n_samples)
            .map(|_| r.u64())
            .collect::<Option<Vec<_>>>()?;
        (r.data.is_empty() && samples.len() == rows.len()).then_some((rows, samples))
    }
}
