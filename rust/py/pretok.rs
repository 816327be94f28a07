//! Pre-tokenizers on their own, for tests and benchmarks: the words the fast
//! engine's Split chain finds in a text, and its time over a list of texts,
//! with the engine chosen ("scanner": hand-written scanners where a pattern
//! has one, "compiled": compiled patterns, "oniguruma": the crate's regex).

use crate::cpu::encode;
use crate::kernels::{self, GtChain};
use crate::plan::bytelevel::{plan_steps, Engine, SplitStep};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::time::Instant;

/// The steps of a pre-tokenizer given as tokenizer.json's JSON.
fn steps(pre_tokenizer: &str, engine: &str) -> PyResult<(Vec<SplitStep>, Option<GtChain>)> {
    let engine = Engine::parse(engine).ok_or_else(|| {
        PyValueError::new_err(format!(
            "engine must be \"scanner\", \"compiled\" or \"oniguruma\", not {engine:?}"
        ))
    })?;
    let spec: serde_json::Value = serde_json::from_str(pre_tokenizer)
        .map_err(|e| PyValueError::new_err(format!("pre_tokenizer is not JSON: {e}")))?;
    plan_steps(&spec, engine).map_err(PyValueError::new_err)
}

/// Each word's byte span in `text` (the kernels' chain when every step runs
/// there, else the CPU's Rust path).
fn words(
    steps: &[SplitStep],
    chain: Option<&GtChain>,
    text: &str,
    emit: &mut dyn FnMut(usize, usize),
) {
    match chain {
        Some(chain) => kernels::chain_words(chain, text, emit),
        None => encode::split_words(steps, text, emit),
    }
}

/// The words `pre_tokenizer` (tokenizer.json JSON of one pre-tokenizer,
/// e.g. a Split or a Sequence) makes of each of `texts`, as byte spans (one
/// compilation for all the texts).
#[pyfunction]
pub fn split_words(
    pre_tokenizer: &str,
    engine: &str,
    texts: Vec<String>,
) -> PyResult<Vec<Vec<(usize, usize)>>> {
    let (steps, chain) = steps(pre_tokenizer, engine)?;
    Ok(texts
        .iter()
        .map(|text| {
            let mut out = Vec::new();
            words(&steps, chain.as_ref(), text, &mut |a, b| out.push((a, b)));
            out
        })
        .collect())
}

/// Times `pre_tokenizer` over `texts`, one thread, `repeats` times: (words
/// in one pass, seconds of each pass).
#[pyfunction]
pub fn time_split(
    pre_tokenizer: &str,
    engine: &str,
    texts: Vec<String>,
    repeats: usize,
) -> PyResult<(usize, Vec<f64>)> {
    let (steps, chain) = steps(pre_tokenizer, engine)?;
    // The GIL stays held: the chain's raw table pointers are not Send, and
    // this one-thread timer has nothing to share it with.
    let mut count = 0;
    let mut seconds = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        count = 0;
        let clock = Instant::now();
        for text in &texts {
            words(&steps, chain.as_ref(), text, &mut |_, _| count += 1);
        }
        seconds.push(clock.elapsed().as_secs_f64());
    }
    Ok((count, seconds))
}
