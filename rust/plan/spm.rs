//! The fast plan for SentencePiece-style BPE (Llama-2, Mistral, Gemma): a
//! normalizer run per piece ([`PieceNormalizer`], any normalizer, with the
//! crate's alignments for offsets; Llama-2's `Prepend` and `Replace` put
//! `"▁"` before the text and for spaces), or none and a `Metaspace`
//! pre-tokenizer doing the same (the newer conversions; [`Words`]), and a
//! BPE model over characters with `byte_fallback`, `fuse_unk`,
//! `ignore_merges` and the affixes (`GtSpmModel`,
//! cuda/gt_spm.cuh: the crate's own BPE rule, for any BPE without a
//! pre-tokenizer).
//!
//! The crate runs BPE over each whole piece of text between added tokens.
//! The plan cuts it into words where it proves no merge can cross the cut
//! ([`Cuts`]): between two characters that are tokens of their own and are
//! never adjacent inside any token. Then words repeat (`"▁the"`, one CJK
//! character), and go through the per-thread word cache like byte-level words.
//! The cut tables are C (`GtSpmCuts`): a device cuts its pieces with them too.
//!
//! For a device, Llama-2's normalizer is left to the model: it reads each
//! space as "▁" (`device_views`, `device_piece`), so the host does not rewrite
//! the text.

use super::bytelevel::{
    affix_bytes, affixes, check_bpe_model, merge_table, special_ids, unk_and_byte_ids, MergeTable,
};
use super::family::{Family, PerWord, PerWordPlan, WordTables};
use super::metaspace::Words;
use super::normalize::PieceNormalizer;
use super::{DevicePiece, NormalizedAdded, PlainAdded};
use crate::kernels::{self, BytesTable, GtPairSlot, GtPairTable, GtSpmCuts, GtSpmModel, NONE};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::sync::Arc;

/// The plan: its tables and the split of its added tokens.
pub type SpmPlan = PerWordPlan<SpmTables>;

impl Family for SpmPlan {
    /// The plan, or why this tokenizer is not for it.
    fn build(spec: &Value) -> Result<Self, String> {
        let words = Words::from_spec(&spec["pre_tokenizer"], &spec["normalizer"])?;
        let normalizer = PieceNormalizer::from_spec(&spec["normalizer"])?;
        words.check_normalizer(&normalizer)?;
        let model = &spec["model"];
        check_bpe_model(model)?;
        let plain_added = PlainAdded::for_word_plan(&spec["added_tokens"])?;
        let normalized_added = NormalizedAdded::from_spec(&spec["added_tokens"], &normalizer)?;
        let vocab = model["vocab"]
            .as_object()
            .ok_or("model.vocab is not a map")?;
        let ids: FxHashMap<&str, u32> = vocab
            .iter()
            .filter_map(|(t, id)| Some((t.as_str(), u32::try_from(id.as_u64()?).ok()?)))
            .collect();
        if ids.len() != vocab.len() {
            return Err("a vocabulary id is not a u32".into());
        }
        let id_of = |token: &str| ids.get(token).copied();
        let (prefix, suffix) = affixes(model);
        let merges = merge_table(&model["merges"], id_of, prefix.len())?;
        let (unk_id, byte_ids) = unk_and_byte_ids(model, &ids)?;
        let table = BytesTable::build(ids.iter().map(|(t, &id)| (t.as_bytes(), id)));
        let ignore_merges = model["ignore_merges"].as_bool().unwrap_or(false);
        let special = special_ids(unk_id, &byte_ids);
        let every_byte = byte_ids.iter().all(|&id| id != NONE);
        // With affixes a cut would make a new first and last character, which
        // the model reads with other affixes: no cut.
        let cuts = match (prefix, suffix) {
            ("", "") => Cuts::proven(&ids, &model["merges"], &special, ignore_merges, every_byte),
            _ => None,
        };
        let model = GtSpmModel {
            merges: merges.view(),
            vocab: table.view(),
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
        };
        // The device reads spaces as the normalizer's replacement, which must be
        // a token (so one byte never becomes several byte-fallback ids), and
        // not when the whole piece is looked up first (ignore_merges).
        let spaces_as = normalizer.spaces_as().filter(|(r, _)| {
            words.is_identity() && !ignore_merges && ids.contains_key(r.to_string().as_str())
        });
        let split = match words.is_identity() {
            true => super::describe(&spec["normalizer"]),
            false => words.describe(&spec["pre_tokenizer"]),
        };
        let description = match cuts {
            Some(_) => format!(
                "{split}; words cut between two characters no merge can join (proved from the merges)"
            ),
            None => format!(
                "{split}; each word whole (ignore_merges, affixes, or merges over byte-fallback tokens)"
            ),
        };
        let shared = Arc::new(SpmTables {
            normalizer,
            words,
            cuts,
            model,
            spaces_as,
            tables: (merges, table),
            description,
        });
        Ok(SpmPlan {
            shared,
            plain_added,
            normalized_added,
        })
    }

    fn report(&self) -> [String; 3] {
        [
            format!(
                "per piece between added tokens, with the crate's alignments for offsets: {}",
                self.describe_normalizer()
            ),
            self.describe(),
            "BPE kernel over characters with byte fallback (cuda/gt_spm.cuh) and a per-thread word cache"
                .into(),
        ]
    }

    /// True when a device can encode the words: each byte gives at most one
    /// id (no affixes, whose byte fallback can give more).
    fn runs_on_device(&self) -> bool {
        self.model.prefix_len == 0 && self.model.suffix_len == 0
    }
}

impl WordTables for SpmTables {
    fn normalizer(&self) -> &PieceNormalizer {
        &self.normalizer
    }
}

/// What the plan builds from the model, normalizer and pre-tokenizer: the
/// same for every set of added tokens (`AddedTokens::with_added_tokens`).
pub struct SpmTables {
    normalizer: PieceNormalizer,
    /// The pre-tokenizer's words (one per piece without one).
    pub words: Words,
    /// Where pieces can be cut into words; None when no cut is proven safe.
    pub cuts: Option<Cuts>,
    model: GtSpmModel,
    /// The normalizer's replacement of spaces, and whether it prepends one,
    /// when the device reads spaces as it (`device_piece`).
    spaces_as: Option<(char, bool)>,
    /// Owned here: `model` points into them (merges, vocabulary).
    tables: (MergeTable, BytesTable),
    description: String,
}

// SAFETY: `model` holds pointers into the tables owned alongside it, never
// mutated after construction; reading them from many threads is safe.
unsafe impl Send for SpmTables {}
// SAFETY: as above.
unsafe impl Sync for SpmTables {}

impl SpmPlan {
    /// The C view of the tables.
    pub fn model(&self) -> &GtSpmModel {
        &self.model
    }

    /// Where pieces are cut into words (disabled when no cut is proven).
    pub fn cuts_view(&self) -> GtSpmCuts {
        self.cuts.as_ref().map_or(GtSpmCuts::disabled(), Cuts::view)
    }

    /// How the normalizer runs, for `tok.plan`.
    pub fn describe_normalizer(&self) -> String {
        match self.spaces_as {
            Some(_) => {
                "Prepend and Replace of spaces, read as the text is (cuda/gt_spm.cuh)".into()
            }
            None => self.normalizer.describe(),
        }
    }

    /// The model and cuts for text from `device_piece` (spaces read as the
    /// normalizer's replacement where it allows).
    pub fn device_views(&self) -> (GtSpmModel, GtSpmCuts) {
        let (mut model, mut cuts) = (self.model, self.cuts_view());
        if let Some((r, _)) = self.spaces_as {
            r.encode_utf8(&mut model.space_utf8);
            model.space_len = r.len_utf8() as u32;
            cuts.space_as = r as u32;
        }
        (model, cuts)
    }

    /// A piece of text (between added tokens) as the device reads it: with
    /// the normalizer's spaces left for the device to read as its replacement
    /// (a space before a non-empty piece for its `Prepend`), else normalized
    /// here. None when the normalizer fails (the exact path reports it).
    pub fn device_piece<'t>(&self, piece: &'t str) -> Option<DevicePiece<'t>> {
        let (text, spaced) = match self.spaces_as {
            // With normalized added tokens the host normalizes to look for them.
            Some(_) if self.normalized_added.is_some() && self.normalize(piece).is_none() => {
                return None
            }
            Some((_, prepend)) => (piece.into(), prepend && !piece.is_empty()),
            None => (self.normalize(piece)?, false),
        };
        Some(DevicePiece { text, spaced })
    }

    /// The arrays the model view points into (merges, vocabulary), for a device.
    pub fn tables(&self) -> (&MergeTable, &BytesTable) {
        (&self.tables.0, &self.tables.1)
    }

    /// How the plan normalizes and splits, for `tok.plan`.
    pub fn describe(&self) -> String {
        self.description.clone()
    }
}

/// Where the BPE of a normalized piece can be cut into independent words.
///
/// Why a cut between characters `a` and `b` is exact when both are tokens of
/// their own and no token the merges can build has `a` then `b` inside it:
/// every symbol then starts as the token of one character (no byte fallback,
/// no unknown token, so nothing fuses across the cut), and a merged symbol
/// is the token whose text is its two parts' text, as long as no merge takes
/// a byte-fallback or unknown token as a part (checked). So every symbol is
/// a token the merges build from single characters (`reachable`: found by
/// applying every merge whose parts are built, until none adds one; tokens
/// the vocabulary has but no merge builds, such as Gemma's HTML tags and
/// runs of "▁", do not count), and a symbol spanning the cut would be one
/// holding `ab`. Not with `ignore_merges`: the crate looks up the whole
/// piece, and a word found whole in the vocabulary might not be.
///
/// With byte fallback for every byte, a character that is not a token is cut
/// off on both sides too: it becomes `<0xXX>` tokens, which no merge takes
/// (checked), and it never becomes the unknown token, which could fuse.
pub struct Cuts {
    /// `GtSpmCuts.bits`: ASCII pairs no word ends between (adjacent inside
    /// a token, or, unless `unknown_alone`, one is not a token), then the
    /// characters that are tokens (one bit per code point up to the highest).
    bits: Vec<u32>,
    /// The other pairs adjacent inside a token, by code point.
    joined: Vec<GtPairSlot>,
    /// A character that is not a token is its bytes alone (see above).
    unknown_alone: bool,
}

impl Cuts {
    fn proven(
        ids: &FxHashMap<&str, u32>,
        merges: &Value,
        special: &[u32],
        ignore_merges: bool,
        every_byte: bool,
    ) -> Option<Cuts> {
        let parts_are_plain = merges.as_array()?.iter().all(|merge| {
            let (a, b) = super::bytelevel::merge_parts(merge).unwrap_or(("", ""));
            [a, b]
                .iter()
                .all(|part| ids.get(part).is_none_or(|id| !special.contains(id)))
        });
        if ignore_merges || !parts_are_plain {
            return None;
        }
        let set = |bits: &mut Vec<u32>, i: usize| {
            if bits.len() <= i / 32 {
                bits.resize(i / 32 + 1, 0);
            }
            bits[i / 32] |= 1 << (i % 32);
        };
        let mut bits = vec![0; ASCII_WORDS];
        let mut reachable: FxHashSet<String> = FxHashSet::default();
        for (token, id) in ids {
            let mut chars = token.chars();
            if let (Some(c), None, false) = (chars.next(), chars.next(), special.contains(id)) {
                set(&mut bits, ASCII_WORDS * 32 + c as usize);
                reachable.insert(token.to_string());
            }
        }
        let parts: Vec<(&str, &str)> = merges
            .as_array()?
            .iter()
            .filter_map(|merge| super::bytelevel::merge_parts(merge).ok())
            .collect();
        loop {
            let before = reachable.len();
            for (a, b) in &parts {
                if reachable.contains(*a) && reachable.contains(*b) {
                    reachable.insert(format!("{a}{b}"));
                }
            }
            if reachable.len() == before {
                break;
            }
        }
        let mut joined = FxHashSet::default();
        for token in &reachable {
            for (a, b) in token.chars().zip(token.chars().skip(1)) {
                match a.is_ascii() && b.is_ascii() {
                    true => set(&mut bits, a as usize * 128 + b as usize),
                    false => drop(joined.insert((a as u32, b as u32))),
                }
            }
        }
        // An ASCII pair's bit is the whole answer (`gt_spm_cut_between`): a
        // pair with a character that is not a token is joined too, unless
        // such characters are cut off (their bits are never set above:
        // every character of a reachable token is a token).
        let known = |bits: &[u32], c: usize| {
            let i = ASCII_WORDS * 32 + c;
            bits.get(i / 32).is_some_and(|w| (w >> (i % 32)) & 1 == 1)
        };
        let pairs = (0..128).flat_map(|a| (0..128).map(move |b| (a, b)));
        for (a, b) in pairs.filter(|_| !every_byte) {
            let both_tokens = known(&bits, a) && known(&bits, b);
            if !both_tokens {
                set(&mut bits, a * 128 + b);
            }
        }
        let mut slots = vec![GtPairSlot::default(); (2 * joined.len()).next_power_of_two().max(2)];
        for pair in joined {
            kernels::pair_insert(&mut slots, pair, 0);
        }
        Some(Cuts {
            bits,
            joined: slots,
            unknown_alone: every_byte,
        })
    }

    /// The C view (`GtSpmCuts`); valid while `self` lives.
    pub fn view(&self) -> GtSpmCuts {
        GtSpmCuts {
            bits: self.bits.as_ptr(),
            joined: GtPairTable {
                slots: self.joined.as_ptr(),
                mask: self.joined.len() as u64 - 1,
                merged_of_rank: std::ptr::null(),
            },
            n_known: ((self.bits.len() - ASCII_WORDS) * 32) as u32,
            unknown_alone: u32::from(self.unknown_alone),
            enabled: 1,
            space_as: 0,
        }
    }

    /// The arrays the view points into (bits, pair slots), for a device.
    pub fn arrays(&self) -> (&[u32], &[GtPairSlot]) {
        (&self.bits, &self.joined)
    }

    /// True when a word can end between `a` and `b` (the tests' question;
    /// the paths cut with `gt_spm_next_cut`).
    #[cfg(test)]
    pub fn between(&self, a: char, b: char) -> bool {
        kernels::spm_cut_between(&self.view(), a, b)
    }
}

/// `GT_SPM_ASCII_WORDS`: the ASCII pair bits before the known characters'.
const ASCII_WORDS: usize = 128 * 128 / 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_between_known_characters_no_token_joins() {
        let vocab = [
            "▁", "a", "b", "c", "東", "京", "▁a", "ab", "東京", "<0xE2>", "<unk>",
        ];
        let ids: FxHashMap<&str, u32> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| (*t, i as u32))
            .collect();
        let merges = serde_json::json!(["▁ a", "a b", "東 京"]);
        let special = [9, 10];
        let cuts = Cuts::proven(&ids, &merges, &special, false, false).unwrap();
        // A token no merge builds joins nothing.
        let mut with_unreachable = ids.clone();
        with_unreachable.insert("b▁c", 11);
        let unreachable = Cuts::proven(&with_unreachable, &merges, &special, false, false).unwrap();
        assert!(unreachable.between('b', '▁') && unreachable.between('▁', 'c'));
        assert!(!cuts.between('▁', 'a') && !cuts.between('a', 'b') && !cuts.between('東', '京'));
        assert!(cuts.between('b', '▁') && cuts.between('b', 'c') && cuts.between('京', 'a'));
        assert!(
            !cuts.between('c', 'x'),
            "x is not a token: its bytes or [UNK] may fuse"
        );
        assert!(
            Cuts::proven(&ids, &merges, &special, true, false).is_none(),
            "ignore_merges"
        );
        let over_bytes = serde_json::json!(["<0xE2> a"]);
        assert!(Cuts::proven(&ids, &over_bytes, &special, false, true).is_none());
        let alone = Cuts::proven(&ids, &merges, &special, false, true).unwrap();
        assert!(alone.between('c', 'x') && alone.between('x', 'y') && !alone.between('a', 'b'));

        // The next cut from a byte: to a character start, then the first pair a word may end between.
        let text = "▁abc東京▁a";
        let next = |from| kernels::spm_next_cut(&cuts.view(), text, from);
        assert_eq!((next(1), next(5), next(6), next(7)), (5, 5, 6, 12));
        assert_eq!(
            next(13),
            text.len(),
            "▁a is one token: no cut before the end"
        );
        assert_eq!(
            kernels::spm_next_cut(&GtSpmCuts::disabled(), text, 1),
            text.len()
        );
    }
}
