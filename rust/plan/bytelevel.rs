//! The fast plan for byte-level BPE (GPT-2, cl100k/Llama-3, Qwen2/3,
//! o200k/gpt-oss, DeepSeek-V3, CLIP families): decides from tokenizer.json
//! whether the fast engine reproduces the oracle exactly, and builds its
//! tables.
//!
//! What it accepts, and why that is exact:
//! - normalizer: any, run on each piece of text between added tokens as the
//!   crate runs it there (`PieceNormalizer`, with the crate's alignments for
//!   offsets). Ids depend only on the normalized text.
//! - pre-tokenizer: `ByteLevel` (GPT-2 regex, with or without the prefix
//!   space) or a `Sequence` of Split steps (Split with any behaviour and
//!   invert, Punctuation, Digits, Whitespace, WhitespaceSplit, BertPreTokenizer,
//!   CharDelimiterSplit, UnicodeScripts, nested Sequences) ending in
//!   `ByteLevel(add_prefix_space=false)`, or in `ByteLevel(add_prefix_space=true,
//!   use_regex=false)` (a space before each word, on the host: `word_prefix_space`).
//!   Each step's pattern is compiled to a
//!   leftmost-first DFA (`plan::regex`, cuda/gt_regex.cuh) and the chain runs
//!   in the shared kernels (cuda/gt_chain.cuh) on the CPU and the device; a
//!   pattern the compiler cannot take runs on the crate's own `SysRegex`
//!   (Oniguruma) on the CPU, and `tok.plan` says why.
//! - model: BPE without dropout. With a token for each of the 256 bytes and
//!   no continuing_subword_prefix / end_of_word_suffix, `gt_bpe_word` (a
//!   symbol per byte; CPU and device); otherwise the crate's `merge_word` on
//!   the word's byte-level characters (`gt_spm_word`: affixes, byte
//!   fallback, the unknown token; CPU).
//! - added tokens: a document is split at added tokens as the crate splits
//!   it (plain tokens by `PlainAdded`, others by the crate's own
//!   `AddedVocabulary` without a normalizer, which is the crate's split of
//!   the raw text); a piece whose normalized text holds a token the crate
//!   matches after normalizing (`normalized`) takes the exact path.
//!
//! Why not: each refusal is a reason string shown by `tok.plan`.

use super::alphabet::alphabet;
use super::char_atoms::ATOM_ID;
use super::family::{AddedTokens, Family};
use super::normalize::PieceNormalizer;
use super::regex::charset::{self, CharSet};
use super::regex::{self as compiled_regex, CompiledRegex};
use super::{NormalizedAdded, PlainAdded};
use crate::kernels::{
    self, BytesTable, GtBpeModel, GtChain, GtChainStep, GtPairBits, GtPairSlot, GtPairTable,
    GtRegex, GtSpmModel, PairBits, NONE,
};
use crate::short_words::{self, ShortWords};
use aho_corasick::AhoCorasick;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
use tokenizers::utils::SysRegex;

/// The regexes the hand-written scanners of cuda/gt_pretok.cuh stand for, by
/// exact text, with their `GT_PAT_*` numbers. The first is what the crate's
/// `ByteLevel(use_regex=true)` splits with (GPT-2).
pub(crate) const SCANNERS: [(&str, u32); 7] = [
    (
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
        1,
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        2,
    ),
    (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        3,
    ),
    (
        concat!(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
        ),
        4,
    ),
    (r"\p{N}{1,3}", 5),
    ("[一-龥\u{3040}-ゟ゠-ヿ]+", 6),
    (
        // DeepSeek-V3 writes real CR and LF characters inside two classes here.
        concat!(
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"##,
            "|[^\r\n",
            r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[",
            "\r\n",
            r"]*|\s*[",
            "\r\n",
            r"]+|\s+(?!\S)|\s+"
        ),
        7,
    ),
];

/// `GtChainStep.ascii` for a Split pattern: GPT-2's, cl100k's, Qwen's,
/// o200k's and DeepSeek-V3's word step (by exact text) have a loop over
/// words (ASCII, and beyond it where a character's class decides) in front
/// of their compiled tables (`gt_scan_ascii_words`); others 0.
pub(crate) fn ascii_words(pattern: &str) -> u32 {
    const WITH_LOOP: [u32; 5] = [
        kernels::PAT_GPT2,
        kernels::PAT_CL100K,
        kernels::PAT_QWEN,
        kernels::PAT_O200K,
        kernels::PAT_DS_WORDS,
    ];
    match SCANNERS.iter().find(|(text, _)| *text == pattern) {
        Some(&(_, id)) if WITH_LOOP.contains(&id) => id,
        _ => 0,
    }
}

/// How a Split step finds its matches.
pub enum Matcher {
    /// A hand-written scanner (cuda/gt_pretok.cuh), by its `GT_PAT_*` number.
    Scanner(u32),
    /// The pattern compiled to tables (cuda/gt_regex.cuh).
    Compiled(Box<CompiledRegex>),
    /// The crate's Oniguruma, and why the compiler could not take the pattern.
    Oniguruma(SysRegex, String),
}

/// One step of the pre-tokenizer: a matcher and what the crate's
/// `NormalizedString::split` does with its matches. The crate's
/// pre-tokenizers that split by a class of characters (Punctuation,
/// Digits, WhitespaceSplit, CharDelimiterSplit) and Whitespace are steps
/// like Split's, over a compiled class.
pub struct SplitStep {
    pub matcher: Matcher,
    pub behavior: Behavior,
    pub invert: bool,
    /// `GtChainStep.cuts`: what safe cuts (`gt_next_cut`) the step allows,
    /// proven from its compiled pattern.
    cuts: u32,
    /// `GtChainStep.ascii`: the pattern's loop over words, or 0.
    ascii: u32,
    /// The step as tokenizer.json names it, for `tok.plan`.
    name: String,
}

/// What a Split step does with its matches (the crate's `SplitDelimiterBehavior`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    Isolated,
    Removed,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    /// `GT_SPLIT_*` (cuda/gt_chain.cuh).
    fn code(self) -> u32 {
        match self {
            Behavior::Isolated => 0,
            Behavior::Removed => 1,
            Behavior::MergedWithPrevious => 2,
            Behavior::MergedWithNext => 3,
            Behavior::Contiguous => 4,
        }
    }

    fn parse(name: Option<&str>) -> Result<Behavior, String> {
        Ok(match name {
            Some("Isolated") => Behavior::Isolated,
            Some("Removed") => Behavior::Removed,
            Some("MergedWithPrevious") => Behavior::MergedWithPrevious,
            Some("MergedWithNext") => Behavior::MergedWithNext,
            Some("Contiguous") => Behavior::Contiguous,
            other => return Err(format!("unknown Split behavior {other:?}")),
        })
    }
}

/// Which engine runs a Split pattern (`GPU_TOK_PRETOKENIZER`): "compiled",
/// the default (its tables beat every hand-written scanner, 1.05-3.2x on one
/// core: benches/README.md, "Compiled pre-tokenizers"); "scanner" runs the
/// hand-written scanners where a pattern has one, "oniguruma" the crate's
/// regex for every pattern (peers for tests and benchmarks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitEngine {
    Scanner,
    Compiled,
    Oniguruma,
}

impl SplitEngine {
    /// "scanner", "compiled" or "oniguruma".
    pub fn parse(name: &str) -> Option<SplitEngine> {
        match name {
            "scanner" => Some(SplitEngine::Scanner),
            "compiled" => Some(SplitEngine::Compiled),
            "oniguruma" => Some(SplitEngine::Oniguruma),
            _ => None,
        }
    }

    pub(crate) fn from_env() -> SplitEngine {
        match std::env::var("GPU_TOK_PRETOKENIZER").as_deref() {
            Ok("scanner") => SplitEngine::Scanner,
            Ok("oniguruma") => SplitEngine::Oniguruma,
            _ => SplitEngine::Compiled,
        }
    }
}

impl SplitStep {
    /// A step over an Oniguruma `pattern`: the compiled pattern (or its
    /// hand-written scanner where one stands for it and `engine` asks for
    /// scanners), else Oniguruma with the compiler's reason.
    pub fn for_pattern(
        pattern: &str,
        behavior: Behavior,
        invert: bool,
        engine: SplitEngine,
    ) -> Result<Self, String> {
        let oniguruma =
            SysRegex::new(pattern).map_err(|e| format!("cannot compile the Split pattern: {e}"))?;
        let name = format!(
            "Split({pattern:?}, {behavior:?}{})",
            if invert { ", invert" } else { "" }
        );
        let compiled = match engine {
            SplitEngine::Oniguruma => Err("GPU_TOK_PRETOKENIZER=oniguruma".to_string()),
            _ => CompiledRegex::compile(pattern),
        };
        let compiled = match compiled {
            Ok(compiled) => compiled,
            Err(why) => {
                let matcher = Matcher::Oniguruma(oniguruma, why);
                return Ok(SplitStep {
                    matcher,
                    behavior,
                    invert,
                    cuts: 0,
                    ascii: 0,
                    name,
                });
            }
        };
        let cuts = cut_flags(&compiled, behavior);
        let scanner = SCANNERS.iter().find(|(text, _)| *text == pattern);
        let matcher = match (scanner, engine) {
            (Some(&(_, id)), SplitEngine::Scanner) => Matcher::Scanner(id),
            _ => Matcher::Compiled(Box::new(compiled)),
        };
        Ok(SplitStep {
            matcher,
            behavior,
            invert,
            cuts,
            ascii: ascii_words(pattern),
            name,
        })
    }

    /// A step over a compiled class or pattern (the non-Split pre-tokenizers).
    fn compiled(
        name: &str,
        compiled: Result<CompiledRegex, String>,
        behavior: Behavior,
        invert: bool,
    ) -> Result<Self, String> {
        let compiled = compiled.map_err(|e| format!("{name}: {e}"))?;
        Ok(SplitStep {
            cuts: cut_flags(&compiled, behavior),
            ascii: 0,
            matcher: Matcher::Compiled(Box::new(compiled)),
            behavior,
            invert,
            name: name.to_string(),
        })
    }

    /// The kernels' view of the step (tables in host memory), None when
    /// Oniguruma runs it.
    pub fn kernel_step(&self) -> Option<GtChainStep> {
        let (pattern, regex) = match &self.matcher {
            Matcher::Scanner(id) => (*id, GtRegex::default()),
            Matcher::Compiled(compiled) => (kernels::PAT_REGEX, compiled.view()),
            Matcher::Oniguruma(..) => return None,
        };
        Some(GtChainStep {
            pattern,
            behavior: self.behavior_code(),
            cuts: self.cuts,
            // The loop over words stands in front of compiled tables only.
            ascii: if pattern == kernels::PAT_REGEX {
                self.ascii
            } else {
                0
            },
            regex,
        })
    }

    /// `GtChainStep.behavior`: the behaviour's `GT_SPLIT_*`, and `GT_SPLIT_INVERT`.
    pub fn behavior_code(&self) -> u32 {
        self.behavior.code()
            | if self.invert {
                kernels::SPLIT_INVERT
            } else {
                0
            }
    }

    /// Which engine runs the step, for `tok.plan`.
    pub(crate) fn describe(&self) -> String {
        let engine = match &self.matcher {
            Matcher::Scanner(_) => "hand-written scanner (cuda/gt_pretok.cuh)".to_string(),
            Matcher::Compiled(c) => {
                let (states, classes, bytes) = c.size();
                let ascii = match self.ascii {
                    0 => "",
                    _ => {
                        "; words by their own loop on the CPU (ASCII, and letters and punctuation \
                          beyond it), gt_scan_ascii_words"
                    }
                };
                format!(
                    "compiled DFA (cuda/gt_regex.cuh: {states} states over {classes} classes of \
                     characters, {} KiB{ascii})",
                    bytes.div_ceil(1024)
                )
            }
            Matcher::Oniguruma(_, why) => format!("the crate's Oniguruma regex, CPU only ({why})"),
        };
        format!("{}: {engine}", self.name)
    }
}

/// `GtChainStep.cuts` of a step over `compiled` with `behavior`: a
/// boundary at every cut survives only behaviours that never join ranges.
fn cut_flags(compiled: &CompiledRegex, behavior: Behavior) -> u32 {
    let keeps = compiled.keeps_cuts();
    let joins = !matches!(behavior, Behavior::Isolated | Behavior::Removed);
    let mut flags = 0;
    if keeps {
        flags |= kernels::CUT_KEEPS;
        if compiled.bounds_cuts() && !joins {
            flags |= kernels::CUT_BOUNDS;
        }
    }
    flags
}

/// Everything the fast engine needs for one byte-level BPE tokenizer: its
/// tables (shared by the tokenizers that differ only in their added tokens;
/// read through `Deref`) and what it knows of its added tokens.
pub struct ByteLevelPlan {
    shared: Arc<ByteLevelTables>,
    /// Texts of the added tokens; None when there are none. A text holding
    /// none is one piece.
    pub added: Option<AhoCorasick>,
    /// The added tokens the crate matches in normalized text (`normalized`),
    /// by their texts and normalized texts: a piece holding one after the
    /// normalizer takes the exact path. None when there are none.
    normalized_added: Option<NormalizedAdded>,
    /// When every added token is plain: the crate's split, without its alignments.
    pub plain_added: Option<PlainAdded>,
}

impl Family for ByteLevelPlan {
    /// Builds the plan, or says why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String> {
        let normalizer = PieceNormalizer::from_spec(&spec["normalizer"])?;
        let (splits, word_prefix_space) = splits(&spec["pre_tokenizer"])?;
        let prefix_space = spec["pre_tokenizer"]["type"].as_str() == Some("ByteLevel")
            && spec["pre_tokenizer"]["add_prefix_space"]
                .as_bool()
                .unwrap_or(true);
        let model = &spec["model"];
        check_bpe_model(model)?;
        let (added, normalized_added) = added_tokens(&spec["added_tokens"], &normalizer)?;
        let plain_added = PlainAdded::from_spec(&spec["added_tokens"]);
        let alphabet = alphabet();
        let byte_of: std::collections::HashMap<char, u8> = alphabet
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        let decode = |token: &str| -> Option<Vec<u8>> {
            token.chars().map(|c| byte_of.get(&c).copied()).collect()
        };
        let vocab = model["vocab"]
            .as_object()
            .ok_or("model.vocab is not an object")?;
        // serde_json's map is a BTreeMap: index it once for the ~3 lookups per merge.
        let ids: rustc_hash::FxHashMap<&str, u32> = vocab
            .iter()
            .filter_map(|(t, id)| Some((t.as_str(), id.as_u64()? as u32)))
            .collect();
        let id_of = |token: &str| ids.get(token).copied();

        let mut byte_ids = [NONE; 256];
        for (b, c) in alphabet.iter().enumerate() {
            byte_ids[b] = id_of(&c.to_string()).unwrap_or(NONE);
        }
        let (prefix, suffix) = affixes(model);
        let merges = merge_table(&model["merges"], id_of, prefix.len())?;
        let ignore_merges = model["ignore_merges"].as_bool().unwrap_or(false);
        let chars = match byte_ids.contains(&NONE) || (prefix, suffix) != ("", "") {
            true => Some(CharsModel::build(model, &ids, &merges, ignore_merges)?),
            false => None,
        };
        let vocab_words: Vec<(Vec<u8>, u32)> = vocab
            .iter()
            .filter_map(|(t, id)| Some((decode(t)?, id.as_u64()? as u32)))
            .collect();
        let mut token_bytes = vec![
            0u32;
            vocab_words
                .iter()
                .map(|(_, id)| *id as usize + 1)
                .max()
                .unwrap_or(0)
        ];
        for (bytes, id) in &vocab_words {
            token_bytes[*id as usize] = bytes.len() as u32;
        }
        let whole_words: &[(Vec<u8>, u32)] = if ignore_merges { &vocab_words } else { &[] };
        let words = BytesTable::build(whole_words.iter().map(|(b, id)| (b.as_slice(), *id)));
        let merges_view = merges.view();
        // Only a model with a token for every byte reads them (`gt_bpe_word`).
        let byte_pair_ranks: Vec<u32> = match chars {
            Some(_) => Vec::new(),
            None => (0..1usize << 16)
                .map(|pair| {
                    let (a, b) = (byte_ids[pair >> 8], byte_ids[pair & 0xFF]);
                    kernels::pair_rank(&merges_view, a, b).unwrap_or(NONE)
                })
                .collect(),
        };
        let char_atoms = match chars {
            Some(_) => Vec::new(),
            None => {
                super::char_atoms::char_atoms(&merges_view, &merges.slots, &byte_ids, &vocab_words)
            }
        };
        let steps: Option<Vec<GtChainStep>> = splits.iter().map(SplitStep::kernel_step).collect();
        let chain = steps.and_then(|steps| GtChain::new(&steps));
        // Where a word may be cut (`gt_bpe_cut`): only where characters start
        // as atoms, not under ignore_merges, and in the words of the shared
        // kernels' split (`kernels::chain_pieces`).
        let char_pairs = match char_atoms.is_empty() || ignore_merges || chain.is_none() {
            true => None,
            false => Some(super::char_atoms::char_pairs(&vocab_words)),
        };
        let view = GtBpeModel {
            merges: merges_view,
            vocab: words.view(),
            byte_pair_ranks: match byte_pair_ranks.is_empty() {
                true => std::ptr::null(),
                false => byte_pair_ranks.as_ptr(),
            },
            char_atoms: match char_atoms.is_empty() {
                true => std::ptr::null(),
                false => char_atoms.as_ptr(),
            },
            byte_ids,
            ignore_merges: u32::from(ignore_merges),
            _pad: 0,
        };
        let mut tables = ByteLevelTables {
            normalizer,
            chain,
            prefix_space,
            word_prefix_space,
            splits,
            model: view,
            merges,
            words,
            byte_pair_ranks,
            char_atoms,
            char_pairs,
            word_model: view,
            own_words: None,
            short_vocab: ShortWords::with_slots(2),
            vocab_words,
            token_bytes,
            chars,
        };
        // Built before the tables are shared: every plan with other added
        // tokens (`with_added_tokens`) reads the same.
        tables.build_word_tables();
        Ok(ByteLevelPlan {
            shared: Arc::new(tables),
            added,
            normalized_added,
            plain_added,
        })
    }

    fn report(&self) -> [String; 3] {
        [
            format!(
                "per piece between added tokens, with the crate's alignments for offsets: {}",
                self.normalizer.describe()
            ),
            self.describe_splits(),
            match self.one_token_per_byte() {
                true => format!(
                    "byte-level BPE kernel (cuda/gt_bpe.cuh) with a per-thread word cache; {} characters \
                     start their merges as one token (rust/plan/char_atoms.rs){}; offsets too",
                    self.char_atoms.iter().filter(|&&e| e & ATOM_ID != ATOM_ID).count(),
                    match self.char_pairs {
                        Some(_) => ", and runs of CJK characters are cut where no token holds two \
                                    neighbours side by side (gt_bpe_cut) on the CPU",
                        None => "",
                    }
                ),
                false => "BPE over each word's byte-level characters with affixes, byte fallback and the \
                          unknown token (cuda/gt_spm.cuh), a per-thread word cache; offsets too (CPU)"
                    .into(),
            },
        ]
    }

    /// Split steps that are scanners or compiled patterns, and words that
    /// take a token per byte (`gt_bpe_word`).
    fn runs_on_device(&self) -> bool {
        self.chain.is_some() && self.one_token_per_byte() && !self.word_prefix_space
    }
}

impl AddedTokens for ByteLevelPlan {
    /// This plan with other added tokens: the tables shared, the rest built.
    fn with_added_tokens(&self, added_tokens: &Value) -> Result<Self, String> {
        let (added, normalized_added) = self::added_tokens(added_tokens, &self.normalizer)?;
        Ok(ByteLevelPlan {
            shared: Arc::clone(&self.shared),
            added,
            normalized_added,
            plain_added: PlainAdded::from_spec(added_tokens),
        })
    }

    /// Gives the plain added tokens the ids the crate gave them (`id_of`, e.g.
    /// its `token_to_id`); without an id for each, the crate's split is used.
    fn resolve_added_ids(&mut self, id_of: impl Fn(&str) -> Option<u32>) -> Result<(), String> {
        PlainAdded::resolve(&mut self.plain_added, id_of);
        Ok(())
    }
}

impl std::ops::Deref for ByteLevelPlan {
    type Target = ByteLevelTables;

    fn deref(&self) -> &ByteLevelTables {
        &self.shared
    }
}

/// What the plan builds from the model, normalizer and pre-tokenizer: the
/// same for every set of added tokens ([`ByteLevelPlan::with_added_tokens`]).
pub struct ByteLevelTables {
    /// The normalizer, run on each piece between added tokens.
    pub normalizer: PieceNormalizer,
    /// Split steps, applied in order to every piece (Isolated behaviour).
    pub splits: Vec<SplitStep>,
    /// `ByteLevel(add_prefix_space=true)` on its own: a space is put before
    /// each piece of text that does not start with one (the crate does it to
    /// each piece between added tokens, before splitting it into words).
    pub prefix_space: bool,
    /// A Sequence closed by `ByteLevel(add_prefix_space=true,
    /// use_regex=false)`: a space is put before each word the steps make
    /// that does not start with one (the crate prepends it to each split;
    /// it takes the word's first character's source). The host does it
    /// (`cpu::encode`); a device does not take such a plan.
    pub word_prefix_space: bool,
    /// The split steps as one chain for the shared kernels (and so the
    /// GPU), when none needs Oniguruma; its tables are the steps' (host memory).
    pub chain: Option<GtChain>,
    model: GtBpeModel,
    merges: MergeTable,
    /// Whole-word table the model view points into (empty without ignore_merges).
    words: BytesTable,
    /// The ranks `model.byte_pair_ranks` points to.
    byte_pair_ranks: Vec<u32>,
    /// The atoms `model.char_atoms` points to (empty: none).
    char_atoms: Vec<u32>,
    /// The characters some token holds side by side, where words may be cut
    /// (`gt_bpe_cut`); None: no cuts (no atoms, or ignore_merges).
    char_pairs: Option<PairBits>,
    /// The model words are encoded with: `model`, but looking each word of
    /// over 15 bytes up first in the tokens that are their own BPE
    /// (`own_words`), so a word that is one token skips the merge loop;
    /// exact either way (shorter words are in `short_vocab`).
    word_model: GtBpeModel,
    /// The tokens of over 15 bytes that are their own BPE, without
    /// ignore_merges (with it, `words` holds every token and `word_model`
    /// is `model`).
    own_words: Option<BytesTable>,
    /// Every token of up to 15 bytes -> the ids BPE gives its bytes: the
    /// CPU's first answer for a word its cache has not seen.
    short_vocab: ShortWords,
    /// Without ignore_merges: every vocabulary token as bytes, with its id.
    vocab_words: Vec<(Vec<u8>, u32)>,
    /// Bytes of text each vocabulary token stands for, by id (for offsets).
    token_bytes: Vec<u32>,
    /// A model that reads a word's byte-level characters (`gt_spm_word`):
    /// for BPE with affixes, byte fallback, or bytes without a token.
    chars: Option<CharsModel>,
}

/// BPE over a word's byte-level characters, for what `gt_bpe_word` (one
/// token per byte) cannot do: the crate's `merge_word` with affixes, byte
/// fallback and the unknown token, through `gt_spm_word`.
struct CharsModel {
    model: GtSpmModel,
    /// Every token by its text: `model.vocab` points into it.
    _vocab: BytesTable,
    /// The affixes' lengths in characters (each a byte of text when the
    /// vocabulary holds the characters of text).
    prefix_chars: u32,
    suffix_chars: u32,
    /// The byte-fallback and unknown ids: a word with one has offsets only
    /// the exact path can tell.
    special: Vec<u32>,
    /// Characters of each token's text, by id.
    token_chars: Vec<u32>,
    /// Each token's text starts with the prefix / ends with the suffix, by id.
    affixed: Vec<(bool, bool)>,
}

impl CharsModel {
    fn build(
        model: &Value,
        ids: &rustc_hash::FxHashMap<&str, u32>,
        merges: &MergeTable,
        ignore_merges: bool,
    ) -> Result<CharsModel, String> {
        let (unk_id, byte_ids) = unk_and_byte_ids(model, ids)?;
        let vocab = BytesTable::build(ids.iter().map(|(t, &id)| (t.as_bytes(), id)));
        let (prefix, suffix) = affixes(model);
        let size = ids.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let (mut token_chars, mut affixed) = (vec![0u32; size], vec![(false, false); size]);
        for (token, &id) in ids {
            token_chars[id as usize] = token.chars().count() as u32;
            affixed[id as usize] = (
                !prefix.is_empty() && token.starts_with(prefix),
                !suffix.is_empty() && token.ends_with(suffix),
            );
        }
        let special = special_ids(unk_id, &byte_ids);
        Ok(CharsModel {
            model: GtSpmModel {
                merges: merges.view(),
                vocab: vocab.view(),
                byte_ids,
                unk_id,
                fuse_unk: u32::from(model["fuse_unk"].as_bool().unwrap_or(false)),
                ignore_merges: u32::from(ignore_merges),
                space_len: 0,
                space_utf8: [0; 4],
                _pad: 0,
                prefix_len: prefix.len() as u32,
                suffix_len: suffix.len() as u32,
                prefix: affix_bytes(prefix),
                suffix: affix_bytes(suffix),
            },
            _vocab: vocab,
            prefix_chars: prefix.chars().count() as u32,
            suffix_chars: suffix.chars().count() as u32,
            special,
            token_chars,
            affixed,
        })
    }
}

/// The arrays behind [`GtBpeModel`], for copying to a device.
pub struct ModelTables<'a> {
    pub merges: &'a MergeTable,
    /// Rank of each two bytes' merge (`GtBpeModel.byte_pair_ranks`).
    pub byte_pair_ranks: &'a [u32],
    /// Each character's atom (`GtBpeModel.char_atoms`; empty: none).
    pub char_atoms: &'a [u32],
    /// Whole words (every token with ignore_merges, else empty).
    pub words: &'a BytesTable,
}

// SAFETY: `model` holds pointers into the Vecs and table owned alongside it,
// which are never mutated after construction; reading them from many threads is safe.
unsafe impl Send for ByteLevelTables {}
// SAFETY: as above.
unsafe impl Sync for ByteLevelTables {}

impl ByteLevelTables {
    /// The CPU's tables for words it has not seen, for a model with a token
    /// for every byte (the others encode each word with `chars`): every
    /// token of up to 15 bytes with the ids BPE gives its bytes
    /// (`short_vocab`), and the longer tokens that are their own BPE, looked
    /// up by `word_model` before its merge loop (with ignore_merges, `words`
    /// holds every token already).
    fn build_word_tables(&mut self) {
        let ignore_merges = self.model.ignore_merges != 0;
        if self.chars.is_none() {
            let bpe = self.bpe_of_each(&self.vocab_words);
            let short = self.vocab_words.iter().zip(&bpe);
            self.short_vocab = ShortWords::of(
                short
                    .filter(|((bytes, _), _)| bytes.len() <= short_words::MAX_BYTES)
                    .map(|((bytes, _), ids)| (bytes.as_slice(), ids.as_slice()))
                    .collect::<Vec<_>>()
                    .into_iter(),
            );
            if !ignore_merges {
                let own = self
                    .vocab_words
                    .iter()
                    .zip(&bpe)
                    .filter(|((bytes, id), ids)| {
                        bytes.len() > short_words::MAX_BYTES && ids.as_slice() == [*id]
                    });
                let own = BytesTable::build(
                    own.map(|((bytes, id), _)| (bytes.as_slice(), *id))
                        .collect::<Vec<_>>()
                        .into_iter(),
                );
                self.word_model.vocab = own.view();
                self.word_model.ignore_merges = 1;
                self.own_words = Some(own);
            }
        }
        if ignore_merges {
            self.vocab_words = Vec::new(); // `words` holds them
        }
    }

    /// The BPE of each token's bytes with the model (on the pool).
    fn bpe_of_each(&self, tokens: &[(Vec<u8>, u32)]) -> Vec<Vec<u32>> {
        const PER_TASK: usize = 4096;
        let tasks = tokens.len().div_ceil(PER_TASK);
        let parts: Vec<Vec<Vec<u32>>> = crate::pool::current()
            .map(tasks, |t| {
                let mut scratch = kernels::Scratch::default();
                let end = ((t + 1) * PER_TASK).min(tokens.len());
                let bpe = tokens[t * PER_TASK..end].iter().map(|(bytes, _)| {
                    let mut ids = Vec::new();
                    kernels::bpe_word(&self.model, bytes, &mut scratch, &mut ids);
                    ids
                });
                Ok::<_, ()>(bpe.collect())
            })
            .unwrap_or_default();
        parts.into_iter().flatten().collect()
    }

    /// Every token of up to 15 bytes with the ids BPE gives its bytes (empty
    /// for a model that reads characters, `chars`).
    pub fn short_vocab(&self) -> &ShortWords {
        &self.short_vocab
    }

    /// The model to encode words with: `model`'s ids, each word that is
    /// one token found by a lookup instead of the merge loop.
    pub fn word_model(&self) -> &GtBpeModel {
        &self.word_model
    }

    /// The pair table of the characters some token holds side by side, for
    /// `kernels::chain_pieces` (`gt_bpe_cut`); None where words are not cut.
    pub fn char_pairs(&self) -> Option<GtPairBits> {
        self.char_pairs.as_ref().map(PairBits::view)
    }
}

impl ByteLevelPlan {
    /// The C view of the BPE tables.
    pub fn model(&self) -> &GtBpeModel {
        &self.model
    }

    /// Bytes of text the vocabulary token `id` stands for (0 if none).
    pub fn token_len(&self, id: u32) -> usize {
        self.token_bytes.get(id as usize).map_or(0, |&n| n as usize)
    }

    /// True when the words go through `gt_bpe_word` (a token for every byte,
    /// no affixes): what a device runs.
    pub fn one_token_per_byte(&self) -> bool {
        self.chars.is_none()
    }

    /// Appends the ids of one word (its bytes, as the pre-tokenizer gives
    /// them) to `out`; false, appending nothing, when the kernel cannot.
    pub fn encode_word(
        &self,
        word: &[u8],
        scratch: &mut kernels::Scratch,
        out: &mut Vec<u32>,
    ) -> bool {
        match &self.chars {
            None => {
                kernels::bpe_word(self.model(), word, scratch, out);
                true
            }
            Some(chars) => {
                let alphabet = alphabet();
                let text: String = word.iter().map(|&b| alphabet[b as usize]).collect();
                kernels::spm_word(&chars.model, text.as_bytes(), scratch, out)
            }
        }
    }

    /// The bytes of a word each of its tokens `ids` covers, in order; None
    /// when only the exact path can tell (a byte-fallback or unknown token,
    /// or lengths that do not add up to the word's `len`).
    pub fn token_lens(&self, ids: &[u32], len: usize) -> Option<Vec<usize>> {
        let Some(chars) = &self.chars else {
            return Some(ids.iter().map(|&id| self.token_len(id)).collect());
        };
        let last = ids.len().checked_sub(1)?;
        let mut lens = Vec::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            if chars.special.contains(&id) {
                return None;
            }
            let (prefixed, suffixed) = *chars.affixed.get(id as usize)?;
            let mut n = *chars.token_chars.get(id as usize)? as usize;
            if i > 0 && chars.prefix_chars > 0 {
                n = n
                    .checked_sub(chars.prefix_chars as usize)
                    .filter(|_| prefixed)?;
            }
            if i == last && chars.suffix_chars > 0 {
                n = n
                    .checked_sub(chars.suffix_chars as usize)
                    .filter(|_| suffixed)?;
            }
            lens.push(n);
        }
        (lens.iter().sum::<usize>() == len && !lens.contains(&0)).then_some(lens)
    }

    /// The vocabulary tokens whose bytes BPE-encode to exactly that token. A
    /// word found here is that one token whatever the merges (BPE depends on
    /// the bytes only): the GPU looks words up here before the merge loop.
    /// None with `ignore_merges`: then every token is, and `tables().words`
    /// holds them all.
    pub fn self_encoding_words(&self) -> Option<BytesTable> {
        if self.model.ignore_merges != 0 {
            return None;
        }
        let bpe = self.bpe_of_each(&self.vocab_words);
        let own = self
            .vocab_words
            .iter()
            .zip(&bpe)
            .filter(|((_, id), ids)| ids.as_slice() == [*id]);
        Some(BytesTable::build(
            own.map(|((bytes, id), _)| (bytes.as_slice(), *id))
                .collect::<Vec<_>>()
                .into_iter(),
        ))
    }

    /// The arrays the model view points into.
    pub fn tables(&self) -> ModelTables<'_> {
        ModelTables {
            merges: &self.merges,
            byte_pair_ranks: &self.byte_pair_ranks,
            char_atoms: &self.char_atoms,
            words: &self.words,
        }
    }

    /// How words are found, for `tok.plan`: each step's engine, and where
    /// the chain runs.
    pub fn describe_splits(&self) -> String {
        let steps: Vec<String> = self.splits.iter().map(SplitStep::describe).collect();
        let place = match (&self.chain, self.word_prefix_space) {
            (Some(_), false) => "on the CPU and the device",
            (Some(_), true) => {
                "then a space before each word (ByteLevel add_prefix_space); on the \
                                CPU (the device's rows of such a plan are encoded by the host)"
            }
            (None, _) => "on the CPU (the device's rows of such a plan are encoded by the host)",
        };
        format!("{}; {place}", steps.join(", then "))
    }

    /// `piece` (text between added tokens) after the normalizer; None when
    /// the normalizer fails or writes text holding a normalized added token
    /// (the crate would split it there: the exact path).
    pub fn normalize<'t>(&self, piece: &'t str) -> Option<Cow<'t, str>> {
        let normalized = self.normalizer.normalize(piece)?;
        let held = NormalizedAdded::held_in(self.normalized_added.as_ref(), &normalized);
        (!held).then_some(normalized)
    }

    /// True when `text` contains an added token's text.
    pub fn has_added_token(&self, text: &str) -> bool {
        self.added.as_ref().is_some_and(|ac| ac.is_match(text))
    }

    /// True when some added tokens are matched in normalized text.
    pub fn has_normalized_added(&self) -> bool {
        self.normalized_added.is_some()
    }

    /// `text` normalized for the fast engine (CPU or device), or None if only
    /// the crate's added-token split can encode it (it contains an added
    /// token's text), or only the exact path (see `normalize`).
    pub fn prepare<'t>(&self, text: &'t str) -> Option<Cow<'t, str>> {
        if self.has_added_token(text) {
            return None;
        }
        Some(self.with_prefix_space(self.normalize(text)?))
    }

    /// `piece` as the pre-tokenizer sees it: with a space in front when the
    /// plan's `ByteLevel` adds one and the (non-empty) piece does not start
    /// with a space.
    pub fn with_prefix_space<'t>(&self, piece: Cow<'t, str>) -> Cow<'t, str> {
        // The crate never hands an empty piece to the pre-tokenizer.
        if self.prefix_space && !piece.is_empty() && !piece.starts_with(' ') {
            Cow::Owned(format!(" {piece}"))
        } else {
            piece
        }
    }
}

/// A `Split` step of tokenizer.json.
fn split_step(step: &Value, engine: SplitEngine) -> Result<SplitStep, String> {
    let invert = step["invert"].as_bool().unwrap_or(false);
    let behavior = Behavior::parse(step["behavior"].as_str())?;
    match (
        step["pattern"]["Regex"].as_str(),
        step["pattern"]["String"].as_str(),
    ) {
        (Some(pattern), _) => SplitStep::for_pattern(pattern, behavior, invert, engine),
        (None, Some(text)) => SplitStep::compiled(
            &format!(
                "Split(String {text:?}, {behavior:?}{})",
                if invert { ", invert" } else { "" }
            ),
            compiled_regex::literal(text),
            behavior,
            invert,
        ),
        _ => Err("a Split without a pattern".into()),
    }
}

/// `char::is_ascii_punctuation || is_punctuation` (the crate's Punctuation).
fn is_punctuation(c: char) -> bool {
    use unicode_categories::UnicodeCategories;
    c.is_ascii_punctuation() || c.is_punctuation()
}

/// A pre-tokenizer of tokenizer.json as the Split steps it amounts to
/// (nested Sequences flattened), appended to `out`.
fn pre_tokenizer_steps(
    step: &Value,
    engine: SplitEngine,
    out: &mut Vec<SplitStep>,
) -> Result<(), String> {
    let kind = step["type"].as_str().unwrap_or("?");
    let one = match kind {
        "Split" => split_step(step, engine)?,
        "Sequence" => {
            for inner in step["pretokenizers"]
                .as_array()
                .ok_or("Sequence without a list")?
            {
                pre_tokenizer_steps(inner, engine, out)?;
            }
            return Ok(());
        }
        // The crate's BertPreTokenizer: whitespace removed, then punctuation isolated.
        "BertPreTokenizer" => {
            let whitespace = charset::predicate_set("whitespace", char::is_whitespace);
            let whitespace = compiled_regex::char_class(whitespace);
            out.push(SplitStep::compiled(
                "BertPreTokenizer(whitespace)",
                whitespace,
                Behavior::Removed,
                false,
            )?);
            let class =
                compiled_regex::char_class(charset::predicate_set("punctuation", is_punctuation));
            SplitStep::compiled(
                "BertPreTokenizer(punctuation)",
                class,
                Behavior::Isolated,
                false,
            )?
        }
        "UnicodeScripts" => SplitStep::compiled(
            "UnicodeScripts",
            super::scripts::compiled(),
            Behavior::Removed,
            true,
        )?,
        "Punctuation" => {
            let behavior = Behavior::parse(step["behavior"].as_str().or(Some("Isolated")))?;
            let name = format!("Punctuation({behavior:?})");
            let class =
                compiled_regex::char_class(charset::predicate_set("punctuation", is_punctuation));
            SplitStep::compiled(&name, class, behavior, false)?
        }
        "Digits" => {
            let individual = step["individual_digits"].as_bool().unwrap_or(false);
            let behavior = if individual {
                Behavior::Isolated
            } else {
                Behavior::Contiguous
            };
            let class =
                compiled_regex::char_class(charset::predicate_set("numeric", char::is_numeric));
            SplitStep::compiled(
                &format!("Digits(individual_digits={individual})"),
                class,
                behavior,
                false,
            )?
        }
        "WhitespaceSplit" => {
            let class = compiled_regex::char_class(charset::predicate_set(
                "whitespace",
                char::is_whitespace,
            ));
            SplitStep::compiled("WhitespaceSplit", class, Behavior::Removed, false)?
        }
        "Whitespace" => SplitStep::compiled(
            "Whitespace",
            compiled_regex::whitespace_words(),
            Behavior::Removed,
            true,
        )?,
        "CharDelimiterSplit" => {
            let delimiter = step["delimiter"].as_str().and_then(|d| {
                let mut chars = d.chars();
                chars.next().filter(|_| chars.next().is_none())
            });
            let delimiter =
                delimiter.ok_or("CharDelimiterSplit without one delimiter character")?;
            let class = compiled_regex::char_class(CharSet::single(delimiter as u32));
            SplitStep::compiled(
                &format!("CharDelimiterSplit({delimiter:?})"),
                class,
                Behavior::Removed,
                false,
            )?
        }
        other => return Err(format!("pre-tokenizer step {other} is not covered yet")),
    };
    out.push(one);
    Ok(())
}

fn is_plain_byte_level(step: &Value, use_regex: bool) -> bool {
    step["type"].as_str() == Some("ByteLevel")
        && !step["add_prefix_space"].as_bool().unwrap_or(true)
        && step["use_regex"].as_bool().unwrap_or(true) == use_regex
}

/// The Split steps of a byte-level pre-tokenizer: `ByteLevel` alone (the
/// GPT-2 pattern), or a `Sequence` of steps ending in `ByteLevel` without a
/// prefix space (its own GPT-2 split, with `use_regex`) or with one and
/// without `use_regex`; and whether each word then takes a prefix space.
fn splits(pre_tokenizer: &Value) -> Result<(Vec<SplitStep>, bool), String> {
    let engine = SplitEngine::from_env();
    let gpt2 = |out: &mut Vec<SplitStep>| -> Result<(), String> {
        out.push(SplitStep::for_pattern(
            SCANNERS[0].0,
            Behavior::Isolated,
            false,
            engine,
        )?);
        Ok(())
    };
    let mut out = Vec::new();
    let standalone = pre_tokenizer["type"].as_str() == Some("ByteLevel")
        && pre_tokenizer["use_regex"].as_bool().unwrap_or(true);
    if standalone {
        gpt2(&mut out)?;
        return Ok((out, false));
    }
    let steps = match pre_tokenizer["type"].as_str() {
        Some("Sequence") => pre_tokenizer["pretokenizers"]
            .as_array()
            .ok_or("Sequence without a list")?,
        _ => {
            return Err(
                "pre-tokenizer is not a byte-level family covered by the fast engine".into(),
            )
        }
    };
    let Some((last, rest)) = steps.split_last() else {
        return Err("empty pre-tokenizer Sequence".into());
    };
    if rest.iter().any(super::mentions_byte_level) {
        // Its byte-to-character map changes what the later steps match.
        return Err(
            "ByteLevel before other steps of the Sequence: only ByteLevel as the last \
                    step is covered"
                .into(),
        );
    }
    let regex_last = is_plain_byte_level(last, true);
    // ByteLevel(add_prefix_space=true, use_regex=false) puts a space before
    // each word the steps make (`ByteLevelTables::word_prefix_space`).
    let word_prefix_space = last["type"] == "ByteLevel"
        && last["add_prefix_space"].as_bool().unwrap_or(true)
        && !last["use_regex"].as_bool().unwrap_or(true);
    if !regex_last && !word_prefix_space && !is_plain_byte_level(last, false) {
        return Err(match last["type"] == "ByteLevel" {
            true => "the Sequence ends in ByteLevel(add_prefix_space=true, use_regex=true), \
                     which puts a space before every word the steps make, then splits them: \
                     not covered"
                .into(),
            false => "the Sequence does not end in ByteLevel".into(),
        });
    }
    for step in rest {
        pre_tokenizer_steps(step, engine, &mut out)?;
    }
    if regex_last {
        gpt2(&mut out)?;
    }
    Ok((out, word_prefix_space))
}

/// What every fast BPE plan needs of the model: BPE, no dropout, a subword
/// prefix and suffix of at most `AFFIX_MAX` bytes.
pub(super) fn check_bpe_model(model: &Value) -> Result<(), String> {
    if model["type"].as_str() != Some("BPE") {
        return Err("model is not BPE".into());
    }
    if model["dropout"].as_f64().is_some_and(|d| d > 0.0) {
        return Err("BPE dropout is random: exact path".into());
    }
    for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
        if model[key]
            .as_str()
            .is_some_and(|s| s.len() > kernels::AFFIX_MAX)
        {
            return Err(format!(
                "BPE {key} longer than {} bytes",
                kernels::AFFIX_MAX
            ));
        }
    }
    Ok(())
}

/// The BPE model's unknown token's id and, with `byte_fallback`, each byte's
/// `<0xXX>` token (NONE where there is none), as the chars models read them.
pub(super) fn unk_and_byte_ids(
    model: &Value,
    ids: &rustc_hash::FxHashMap<&str, u32>,
) -> Result<(u32, [u32; 256]), String> {
    let id_of = |token: &str| ids.get(token).copied();
    let unk_id = match model["unk_token"].as_str() {
        Some(unk) => {
            id_of(unk).ok_or("the unknown token is not in the vocabulary (the crate reports it)")?
        }
        None => NONE,
    };
    let mut byte_ids = [NONE; 256];
    if model["byte_fallback"].as_bool().unwrap_or(false) {
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = id_of(&format!("<0x{b:02X}>")).unwrap_or(NONE);
        }
    }
    Ok((unk_id, byte_ids))
}

/// The ids a chars model makes without merges: the byte tokens and the unknown token.
pub(super) fn special_ids(unk_id: u32, byte_ids: &[u32; 256]) -> Vec<u32> {
    byte_ids
        .iter()
        .copied()
        .chain([unk_id])
        .filter(|&id| id != NONE)
        .collect()
}

/// An affix as the kernels hold it (checked at most `AFFIX_MAX` bytes).
pub(super) fn affix_bytes(text: &str) -> [u8; kernels::AFFIX_MAX] {
    let mut bytes = [0u8; kernels::AFFIX_MAX];
    bytes[..text.len()].copy_from_slice(text.as_bytes());
    bytes
}

/// The BPE model's continuing_subword_prefix and end_of_word_suffix ("" for none).
pub(super) fn affixes(model: &Value) -> (&str, &str) {
    let text = |key: &str| model[key].as_str().unwrap_or("");
    (
        text("continuing_subword_prefix"),
        text("end_of_word_suffix"),
    )
}

/// The arrays of a `GtPairTable`: slots (left id, right id) -> rank, and
/// each merge's id by rank; or, when the merges' ids rise with their ranks
/// (tokens numbered in merge order, as most vocabularies are), slots ->
/// the merged id itself, which then orders merges as their ranks do, and no
/// second array (`merged_of_rank` empty: the merge loop reads one table).
pub struct MergeTable {
    pub slots: Vec<GtPairSlot>,
    pub merged_of_rank: Vec<u32>,
}

impl MergeTable {
    /// The C view; valid while `self` lives and is not mutated.
    pub fn view(&self) -> GtPairTable {
        GtPairTable {
            slots: self.slots.as_ptr(),
            mask: self.slots.len() as u64 - 1,
            merged_of_rank: match self.merged_of_rank.is_empty() {
                true => std::ptr::null(),
                false => self.merged_of_rank.as_ptr(),
            },
        }
    }
}

/// The merges of a BPE model (`model.merges`) as a [`MergeTable`]; a merge
/// makes its parts' text, the second's first `prefix_len` bytes (its
/// continuing_subword_prefix) left out, as the crate builds it.
pub(super) fn merge_table(
    merges: &Value,
    id_of: impl Fn(&str) -> Option<u32>,
    prefix_len: usize,
) -> Result<MergeTable, String> {
    let merges = merges.as_array().ok_or("model.merges is not a list")?;
    if merges.len() >= kernels::PAIR_RANK_LIMIT as usize {
        return Err(format!(
            "{} merges: the fast engine's merge table holds fewer than {}",
            merges.len(),
            kernels::PAIR_RANK_LIMIT
        ));
    }
    let mut pairs = Vec::with_capacity(merges.len());
    let mut joined = String::new();
    for merge in merges {
        let (a, b) = merge_parts(merge)?;
        joined.clear();
        joined.push_str(a);
        joined.push_str(
            b.get(prefix_len..)
                .ok_or("a merge is shorter than the subword prefix")?,
        );
        let (Some(ia), Some(ib), Some(im)) = (id_of(a), id_of(b), id_of(&joined)) else {
            return Err(format!(
                "merge {a:?} {b:?} uses tokens outside the vocabulary"
            ));
        };
        if ia.max(ib).max(im) >= kernels::PAIR_ID_LIMIT {
            return Err(format!(
                "token ids from {} on do not fit the fast engine's merge table",
                kernels::PAIR_ID_LIMIT
            ));
        }
        pairs.push((ia, ib, im));
    }
    let ids_are_ranks = pairs.windows(2).all(|w| w[0].2 < w[1].2);
    let capacity = (2 * pairs.len()).next_power_of_two().max(2);
    let mut slots = crate::memory_hints::filled(capacity, GtPairSlot::default());
    for (rank, &(ia, ib, im)) in pairs.iter().enumerate() {
        let value = if ids_are_ranks { im } else { rank as u32 };
        kernels::pair_insert(&mut slots, (ia, ib), value);
    }
    let merged_of_rank = match ids_are_ranks {
        true => Vec::new(),
        false => pairs.iter().map(|&(_, _, im)| im).collect(),
    };
    Ok(MergeTable {
        slots,
        merged_of_rank,
    })
}

pub(super) fn merge_parts(merge: &Value) -> Result<(&str, &str), String> {
    match merge {
        Value::String(s) => {
            let mut parts = s.split(' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(a), Some(b), None) => Ok((a, b)),
                _ => Err(format!("merge {s:?} is not two tokens")),
            }
        }
        Value::Array(items) => match items.as_slice() {
            [Value::String(a), Value::String(b)] => Ok((a, b)),
            _ => Err("a merge is not a pair of strings".into()),
        },
        _ => Err("unreadable merge".into()),
    }
}

/// The automaton over every added token's text, and the normalized tokens'.
type AddedAutomata = (Option<AhoCorasick>, Option<NormalizedAdded>);

fn added_tokens(tokens: &Value, normalizer: &PieceNormalizer) -> Result<AddedAutomata, String> {
    let items = tokens.as_array().map(Vec::as_slice).unwrap_or_default();
    let texts: Vec<&str> = items
        .iter()
        .filter_map(|token| token["content"].as_str().filter(|c| !c.is_empty()))
        .collect();
    let automaton = match texts.is_empty() {
        true => None,
        false => Some(
            AhoCorasick::new(&texts).map_err(|e| format!("cannot index the added tokens: {e}"))?,
        ),
    };
    Ok((automaton, NormalizedAdded::from_spec(tokens, normalizer)?))
}

/// Isolated steps over `patterns` run by `engine`, and their kernel chain
/// (which points into the steps).
/// The Split steps of one pre-tokenizer of tokenizer.json (`Sequence`s
/// flattened), and their kernel chain when no step needs Oniguruma (for
/// tests and `_core.split_words`; the chain points into the steps).
pub fn plan_steps(
    spec: &Value,
    engine: SplitEngine,
) -> Result<(Vec<SplitStep>, Option<GtChain>), String> {
    sequence_steps(&[spec], engine)
}

/// [`plan_steps`] of the pre-tokenizers `items`, applied in turn (a Sequence's).
pub(crate) fn sequence_steps(
    items: &[&Value],
    engine: SplitEngine,
) -> Result<(Vec<SplitStep>, Option<GtChain>), String> {
    let mut steps = Vec::new();
    for item in items {
        pre_tokenizer_steps(item, engine, &mut steps)?;
    }
    let kernel: Option<Vec<GtChainStep>> = steps.iter().map(SplitStep::kernel_step).collect();
    let chain = kernel.and_then(|k| GtChain::new(&k));
    Ok((steps, chain))
}

#[cfg(test)]
pub(crate) fn chain_of(patterns: &[&str], engine: SplitEngine) -> (Vec<SplitStep>, GtChain) {
    let steps: Vec<SplitStep> = patterns
        .iter()
        .map(|p| SplitStep::for_pattern(p, Behavior::Isolated, false, engine).unwrap())
        .collect();
    let kernel: Vec<GtChainStep> = steps.iter().map(|s| s.kernel_step().unwrap()).collect();
    let chain = GtChain::new(&kernel).unwrap();
    (steps, chain)
}

/// The pattern text of scanner `id`.
#[cfg(test)]
pub(crate) fn pattern_of(id: u32) -> &'static str {
    SCANNERS.iter().find(|(_, i)| *i == id).unwrap().0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{bpe_word, Scratch};

    /// A byte-level BPE over the 256 byte tokens plus `extra`, with `merges`.
    fn plan(extra: &[&str], merges: &[&str], ignore_merges: bool) -> ByteLevelPlan {
        let mut vocab = serde_json::Map::new();
        for c in alphabet() {
            let id = vocab.len();
            vocab.insert(c.to_string(), id.into());
        }
        for token in extra {
            let id = vocab.len();
            vocab.insert(token.to_string(), id.into());
        }
        let spec = serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
            "added_tokens": [],
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": ignore_merges},
        });
        ByteLevelPlan::build(&spec).unwrap()
    }

    fn encode(plan: &ByteLevelPlan, word: &str) -> Vec<u32> {
        let mut out = Vec::new();
        bpe_word(
            plan.model(),
            word.as_bytes(),
            &mut Scratch::default(),
            &mut out,
        );
        out
    }

    #[test]
    fn where_byte_level_sits_in_the_sequence() {
        let byte_level = |prefix: bool, regex: bool| serde_json::json!({"type": "ByteLevel", "add_prefix_space": prefix, "use_regex": regex});
        let digits = serde_json::json!({"type": "Digits", "individual_digits": true});
        let sequence =
            |items: Vec<Value>| serde_json::json!({"type": "Sequence", "pretokenizers": items});
        // Last, without a prefix space: the steps, then its regex when it has one.
        let (steps, spaced) =
            splits(&sequence(vec![digits.clone(), byte_level(false, true)])).unwrap();
        assert_eq!((steps.len(), spaced), (2, false));
        // Last, with a prefix space and no regex: a space before each word.
        let (steps, spaced) =
            splits(&sequence(vec![digits.clone(), byte_level(true, false)])).unwrap();
        assert_eq!((steps.len(), spaced), (1, true));
        let why = |items| splits(&sequence(items)).err().unwrap();
        assert!(why(vec![digits.clone(), byte_level(true, true)]).contains("use_regex=true"));
        assert!(why(vec![
            byte_level(false, false),
            digits.clone(),
            byte_level(false, false)
        ])
        .contains("ByteLevel before other steps"));
        assert!(
            why(vec![digits, serde_json::json!({"type": "UnicodeScripts"})])
                .contains("does not end in ByteLevel")
        );
    }

    #[test]
    fn merges_lowest_rank_first_then_leftmost() {
        // ids: bytes 0..256, then aa=256, aaa=257, ab=258
        let p = plan(&["aa", "aaa", "ab"], &["a a", "aa a", "a b"], false);
        let a = u32::from(b'a');
        assert_eq!(encode(&p, "a"), vec![a]);
        assert_eq!(encode(&p, "aaaa"), vec![256, 256]); // "a a" twice beats "aa a"
        assert_eq!(encode(&p, "aaa"), vec![257]); // leftmost "a a", then "aa a"
        assert_eq!(encode(&p, "aab"), vec![256, u32::from(b'b')]); // rank 0 wins over "a b"
        assert_eq!(encode(&p, "ab"), vec![258]);
        assert_eq!(encode(&p, ""), Vec::<u32>::new());
    }

    #[test]
    fn ignore_merges_emits_whole_words() {
        // "aaa" is in the vocabulary but no merge builds it from "a"s directly.
        let with = plan(&["aa", "aaa"], &["a a"], true);
        assert_eq!(encode(&with, "aaa"), vec![257]);
        let without = plan(&["aa", "aaa"], &["a a"], false);
        assert_eq!(encode(&without, "aaa"), vec![256, u32::from(b'a')]);
    }

    #[test]
    fn self_encoding_words_are_exactly_the_tokens_bpe_rebuilds() {
        // "aa" is its own BPE (merge "a a"); "aaa" is not: BPE gives "aa" + "a".
        let without = plan(&["aa", "aaa"], &["a a"], false);
        let table = without.self_encoding_words().unwrap();
        assert_eq!(table.find(b"aa"), Some(256));
        assert_eq!(table.find(b"aaa"), None);
        assert_eq!(table.find(b"a"), Some(u32::from(b'a')));
        // With ignore_merges every token stands for itself: the plan's own table.
        let with = plan(&["aa", "aaa"], &["a a"], true);
        assert!(with.self_encoding_words().is_none());
        assert_eq!(with.tables().words.find(b"aaa"), Some(257));
    }

    #[test]
    fn long_runs_stay_fast_and_correct() {
        let p = plan(&["aa", "aaaa"], &["a a", "aa aa"], false);
        let ids = encode(&p, &"a".repeat(100_001));
        assert_eq!(ids.len(), 25_001);
        assert!(ids[..25_000].iter().all(|&id| id == 257));
        assert_eq!(ids[25_000], u32::from(b'a'));
    }

    #[test]
    fn multibyte_words_use_byte_tokens() {
        let p = plan(&[], &[], false);
        let expected: Vec<u32> = "é東".bytes().map(u32::from).collect();
        assert_eq!(encode(&p, "é東"), expected);
    }

    /// Each hand-written scanner finds exactly the matches of the crate's
    /// regex (Oniguruma, the pattern as tokenizer.json writes it), and each
    /// chain of scanners splits into exactly the words of the crate's
    /// `Sequence` of `Split(Isolated)` pre-tokenizers, byte offsets included.
    #[test]
    fn scanners_split_words_as_the_crates_regex_does() {
        use tokenizers::pre_tokenizers::sequence::Sequence;
        use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
        use tokenizers::{
            OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer, SplitDelimiterBehavior,
        };
        let texts = crate::test_texts::sample_texts(3);
        for (pattern, id) in SCANNERS {
            let regex = SysRegex::new(pattern).unwrap();
            for text in &texts {
                let expected: Vec<(usize, usize)> = regex.find_iter(text).collect();
                let mut got = Vec::new();
                let mut pos = 0;
                while let Some((start, end)) = kernels::find(id, text, pos) {
                    assert!(end > start, "scanner {id} matched nothing at {start}");
                    got.push((start, end));
                    pos = end;
                }
                assert_eq!(got, expected, "scanner {id} on {text:?}");
            }
        }
        let chains: [&[u32]; 5] = [&[1], &[2], &[3], &[4], &[5, 6, 7]];
        for chain in chains {
            for engine in [SplitEngine::Scanner, SplitEngine::Compiled] {
                let patterns: Vec<&str> = chain.iter().map(|&id| pattern_of(id)).collect();
                let (_steps, kernel_chain) = chain_of(&patterns, engine);
                let crate_steps = Sequence::new(
                    patterns
                        .iter()
                        .map(|&p| {
                            let pattern = SplitPattern::Regex(p.into());
                            Split::new(pattern, SplitDelimiterBehavior::Isolated, false)
                                .unwrap()
                                .into()
                        })
                        .collect(),
                );
                for text in &texts {
                    let mut pieces = PreTokenizedString::from(text.as_str());
                    crate_steps.pre_tokenize(&mut pieces).unwrap();
                    let expected: Vec<(usize, usize)> = pieces
                        .get_splits(OffsetReferential::Original, OffsetType::Byte)
                        .iter()
                        .map(|(_, offsets, _)| *offsets)
                        .collect();
                    let mut got = Vec::new();
                    kernels::chain_words(&kernel_chain, text, &mut |start, end| {
                        got.push((start, end))
                    });
                    assert_eq!(got, expected, "chain {chain:?} ({engine:?}) on {text:?}");
                }
            }
        }
    }

    #[test]
    fn refusals_say_why() {
        let spec = serde_json::json!({"normalizer": {"type": "Lowercase"}, "pre_tokenizer": null, "model": {}});
        assert!(ByteLevelPlan::build(&spec)
            .err()
            .unwrap()
            .contains("pre-tokenizer"));
    }

    /// The oracle's rule written plainly: merge the lowest-ranked pair,
    /// leftmost on ties, until none merges.
    fn reference(p: &ByteLevelPlan, merges: &[&str], word: &[u8]) -> Vec<u32> {
        let id = |t: &str| {
            p.vocab_words
                .iter()
                .find(|(b, _)| b.as_slice() == t.as_bytes())
                .unwrap()
                .1
        };
        let table: std::collections::HashMap<(u32, u32), (usize, u32)> = merges
            .iter()
            .enumerate()
            .map(|(rank, m)| {
                let (a, b) = m.split_once(' ').unwrap();
                ((id(a), id(b)), (rank, id(&format!("{a}{b}"))))
            })
            .collect();
        let mut ids: Vec<u32> = word
            .iter()
            .map(|&b| p.model().byte_ids[b as usize])
            .collect();
        loop {
            let best = (0..ids.len().saturating_sub(1))
                .filter_map(|i| {
                    table
                        .get(&(ids[i], ids[i + 1]))
                        .map(|&(rank, made)| (rank, i, made))
                })
                .min();
            let Some((_, i, made)) = best else { return ids };
            ids[i] = made;
            ids.remove(i + 1);
        }
    }

    #[test]
    fn words_merged_in_turns_match_one_by_one_and_the_plain_rule() {
        // Chains of merges over "abc" (and "x", which never merges), words of
        // 1..=200 bytes: past GT_SHORT_MERGE (32) and GT_TURN_MAX (128), so
        // the short merge, the turns and the queue all meet the plain rule.
        // Tokens listed in merge order (the slots hold merged ids), then in
        // the reverse order (the slots hold ranks).
        let merges = [
            "a b", "b c", "a a", "c a", "ab c", "aa b", "bc a", "abc a", "aa aa", "ca b", "x x",
        ];
        let tokens = [
            "ab", "bc", "aa", "ca", "abc", "aab", "bca", "abca", "aaaa", "cab", "xx",
        ];
        let reversed: Vec<&str> = tokens.iter().rev().copied().collect();
        for extra in [tokens.as_slice(), reversed.as_slice()] {
            let p = plan(extra, &merges, false);
            let mut seed = 36u64;
            let mut text = Vec::new();
            let mut spans = Vec::new();
            for n in (1..=200).chain(1..=200) {
                let start = text.len();
                for _ in 0..n {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    text.push(b"aaabbcx"[(seed >> 33) as usize % 7]);
                }
                spans.push((start, text.len()));
            }
            let (mut ids, mut counts) = (Vec::new(), Vec::new());
            let mut scratch = Scratch::default();
            crate::kernels::bpe_words(
                p.model(),
                usize::MAX,
                &text,
                &spans,
                &mut scratch,
                &mut ids,
                &mut counts,
            );
            let mut at = 0;
            for (&(start, end), &count) in spans.iter().zip(&counts) {
                let word = &text[start..end];
                let got = &ids[at..at + count as usize];
                at += count as usize;
                let mut one = Vec::new();
                bpe_word(p.model(), word, &mut scratch, &mut one);
                assert_eq!(got, one.as_slice(), "{:?}", std::str::from_utf8(word));
                assert_eq!(
                    one,
                    reference(&p, &merges, word),
                    "{:?}",
                    std::str::from_utf8(word)
                );
            }
            assert_eq!(at, ids.len());
        }
    }
}
