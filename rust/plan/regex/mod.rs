//! Pre-tokenizer patterns compiled from their text: a parser for the
//! Oniguruma syntax tokenizer.json is written in (`parse`), the code point
//! sets it names read from Oniguruma itself (`charset`), and a
//! leftmost-first DFA over classes of code points (`dfa`) whose tables
//! `cuda/gt_regex.cuh` runs on the CPU and the device. A pattern the
//! compiler cannot take keeps the crate's Oniguruma, and `compile` says why.
//!
//! The other pre-tokenizers that split by a class of characters
//! (Punctuation, Digits, WhitespaceSplit, CharDelimiterSplit) and Whitespace
//! (`\w+|[^\w\s]+` in the `regex` crate's reading) compile to the same
//! tables from the crate's own predicates ([`char_class`], [`whitespace_words`]).

pub mod charset;
pub mod dfa;
pub mod parse;

use crate::kernels::GtRegex;
use charset::CharSet;
use parse::Node;

/// A compiled pattern: the tables `gt_regex.cuh` reads, owned here.
#[derive(Clone, Debug)]
pub struct CompiledRegex {
    tables: dfa::Tables,
}

// The view's pointers point into the Vecs owned alongside, never mutated.
impl CompiledRegex {
    /// Compiles an Oniguruma pattern, or says why it cannot.
    pub fn compile(pattern: &str) -> Result<CompiledRegex, String> {
        Self::from_node(&parse::parse(pattern)?)
    }

    /// Compiles a parsed pattern.
    pub fn from_node(node: &Node) -> Result<CompiledRegex, String> {
        Ok(CompiledRegex {
            tables: dfa::build(node)?,
        })
    }

    /// The C view of the tables (host addresses; valid while `self` lives).
    pub fn view(&self) -> GtRegex {
        let t = &self.tables;
        GtRegex {
            trans: t.trans.as_ptr(),
            starts: t.starts.as_ptr(),
            block_of: t.block_of.as_ptr(),
            blocks: t.blocks.as_ptr(),
            first_bytes: match t.first_bytes.is_empty() {
                true => std::ptr::null(),
                false => t.first_bytes.as_ptr(),
            },
            n_classes: t.n_classes,
            flags: u32::from(t.lookbehind),
        }
    }

    /// The arrays behind the view, for copying to a device: (trans, starts,
    /// block_of, blocks).
    pub fn arrays(&self) -> (&[u32], &[u32], &[u16], &[u8]) {
        let t = &self.tables;
        (&t.trans, &t.starts, &t.block_of, &t.blocks)
    }

    /// Matches never cross a cut before a space after a non-space, and
    /// cutting there changes none (`dfa::Tables::keeps_cuts`).
    pub fn keeps_cuts(&self) -> bool {
        self.tables.keeps_cuts
    }

    /// ... and a match starts at every such cut.
    pub fn bounds_cuts(&self) -> bool {
        self.tables.bounds_cuts
    }

    /// Size, for `tok.plan`: (states, classes, table bytes).
    pub fn size(&self) -> (usize, u32, usize) {
        let t = &self.tables;
        let bytes = 4 * (t.trans.len() + t.starts.len()) + 2 * t.block_of.len() + t.blocks.len();
        (t.states, t.n_classes, bytes)
    }
}

/// One character of `set` (a pre-tokenizer that splits at each character
/// of a class: Punctuation, Digits, WhitespaceSplit, CharDelimiterSplit).
pub fn char_class(set: CharSet) -> Result<CompiledRegex, String> {
    CompiledRegex::from_node(&Node::Set(set))
}

/// The crate's Whitespace pre-tokenizer's pattern `\w+|[^\w\s]+`, with the
/// `regex` crate's classes (its `\w` and `\s` are Unicode's word characters and
/// White_Space, not Oniguruma's).
pub fn whitespace_words() -> Result<CompiledRegex, String> {
    let class = |text: &str| -> Result<CharSet, String> {
        let hir = regex_syntax::parse(text).map_err(|e| e.to_string())?;
        match hir.kind() {
            regex_syntax::hir::HirKind::Class(regex_syntax::hir::Class::Unicode(class)) => {
                Ok(CharSet::from_ranges(
                    class
                        .ranges()
                        .iter()
                        .map(|r| (r.start() as u32, r.end() as u32)),
                ))
            }
            _ => Err(format!("{text} is not a class")),
        }
    };
    let word = class(r"\w")?;
    let other = word.union(&class(r"\s")?).negate();
    let run = |set: CharSet| Node::Repeat {
        node: Box::new(Node::Set(set)),
        min: 1,
        max: None,
        greedy: true,
    };
    CompiledRegex::from_node(&Node::Alt(vec![run(word), run(other)]))
}

/// A string pattern (Split's `String`, which the crate escapes into a regex).
pub fn literal(text: &str) -> Result<CompiledRegex, String> {
    let chars = text
        .chars()
        .map(|c| Node::Set(CharSet::single(c as u32)))
        .collect();
    CompiledRegex::from_node(&Node::Concat(chars))
}

#[cfg(test)]
mod tests;
