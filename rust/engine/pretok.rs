//! A pre-tokenizer on its own, for tests and benchmarks: the words the fast
//! engine's Split chain finds in a text, with the engine chosen ("scanner":
//! hand-written scanners where a pattern has one, "compiled": compiled
//! patterns, "oniguruma": the crate's regex). `py::pretok` shows it to Python.

use crate::cpu::encode;
use crate::kernels::{self, GtChain};
use crate::plan::bytelevel::{plan_steps, SplitEngine, SplitStep};

/// One pre-tokenizer's steps, compiled once for any number of texts.
pub struct PreTokenizer {
    steps: Vec<SplitStep>,
    /// The kernels' chain, when every step runs there.
    chain: Option<GtChain>,
}

impl PreTokenizer {
    /// `pre_tokenizer`: tokenizer.json's JSON of one pre-tokenizer (a Split,
    /// a Sequence...); `engine`: "scanner", "compiled" or "oniguruma". The
    /// error says what is wrong, for a `ValueError`.
    pub fn new(pre_tokenizer: &str, engine: &str) -> Result<Self, String> {
        let engine = SplitEngine::parse(engine).ok_or_else(|| {
            format!("engine must be \"scanner\", \"compiled\" or \"oniguruma\", not {engine:?}")
        })?;
        let spec: serde_json::Value = serde_json::from_str(pre_tokenizer)
            .map_err(|e| format!("pre_tokenizer is not JSON: {e}"))?;
        let (steps, chain) = plan_steps(&spec, engine)?;
        Ok(PreTokenizer { steps, chain })
    }

    /// Each word's byte span in `text` (the kernels' chain when every step
    /// runs there, else the CPU's Rust path).
    pub fn words(&self, text: &str, emit: &mut dyn FnMut(usize, usize)) {
        match &self.chain {
            Some(chain) => kernels::chain_words(chain, text, &mut &mut *emit),
            None => encode::split_words(&self.steps, text, emit),
        }
    }
}
