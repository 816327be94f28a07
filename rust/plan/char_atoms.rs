//! The characters a byte-level word may start its merges as one token (its
//! "atom"), instead of as its bytes: `GtBpeModel.char_atoms`, read by
//! `gt_bpe_symbols` (cuda/gt_bpe.cuh, where the three conditions below and
//! why they give the oracle's ids are written down).
//!
//! A CJK character is three bytes, which BPE joins in two merges in every
//! word it is in; on text of such characters those merges are most of the
//! merge loop's work, and a word's symbols are a third as many from atoms.

use crate::kernels::{self, GtPairSlot, GtPairTable, PairBits};

/// Code points the table covers (the characters of two and three bytes).
pub const CHARS: usize = 0x10000;

/// `gt_bpe_symbols`' flags: the neighbours next to which a character must
/// start as its bytes (the side condition 2 fails on), above its atom's id.
pub const ATOM_ID: u32 = 0x00FF_FFFF;
pub const NOT_AFTER_ASCII: u32 = 1 << 24;
pub const NOT_AFTER_CHAR: u32 = 1 << 25;
pub const NOT_BEFORE_ASCII: u32 = 1 << 26;
pub const NOT_BEFORE_CHAR: u32 = 1 << 27;
/// Not before a listed character (a whole-character token that a merge
/// joins with a partial symbol of this character ranks low enough).
pub const NOT_BEFORE_LISTED: u32 = 1 << 28;
/// Listed: some merge joins a character's partial end with a token that
/// starts with this character (set whether or not it has an atom).
pub const LISTED: u32 = 1 << 29;

/// Bits of the filter per pair: 32 keep collisions (pairs left uncut) to
/// ~2-3% in 128 KB for real vocabularies (20-30k pairs), which stays in the
/// CPU's caches where the exact table (512 KB-1 MB) did not.
const PAIR_FILTER_BITS: usize = 32;

/// Every two characters of two or three bytes that some token in
/// `token_bytes` holds side by side, as a filter keyed by their code
/// points: where a word's two neighbouring atoms are no such pair, no merge
/// joins them, so `gt_bpe_cut` cuts the word there.
pub fn char_pairs(token_bytes: &[(Vec<u8>, u32)]) -> PairBits {
    let mut pairs = std::collections::HashSet::new();
    for (bytes, _) in token_bytes {
        // Whole characters only: a token's partial ones are never beside a
        // character that starts as an atom (it is one symbol from the start).
        for chunk in bytes.utf8_chunks() {
            let mut chars = chunk.valid().chars().map(u32::from);
            let Some(mut before) = chars.next() else {
                continue;
            };
            for c in chars {
                if (0x80..CHARS as u32).contains(&before) && (0x80..CHARS as u32).contains(&c) {
                    pairs.insert((before, c));
                }
                before = c;
            }
        }
    }
    PairBits::of(pairs.into_iter(), PAIR_FILTER_BITS)
}

/// For each code point below U+10000: the token its bytes merge into alone
/// (`ATOM_ID` where it always starts as its bytes), with the flags of the
/// neighbours it cannot start as it next to, and `LISTED`. Empty when no
/// character has an atom. `byte_ids`: each byte's token; `token_bytes`:
/// each token's bytes, by id (a token missing from it counts as starting
/// and ending with any byte, which can only refuse more atoms).
/// `merges` views the pair table `slots`.
pub fn char_atoms(
    merges: &GtPairTable,
    slots: &[GtPairSlot],
    byte_ids: &[u32; 256],
    token_bytes: &[(Vec<u8>, u32)],
) -> Vec<u32> {
    let bounds = Bounds::of(slots, token_bytes);
    let mut atoms = vec![ATOM_ID; CHARS];
    let mut found = false;
    let mut buf = [0u8; 4];
    for cp in 0x80..CHARS as u32 {
        let Some(c) = char::from_u32(cp) else {
            continue;
        }; // surrogates
        let bytes = c.encode_utf8(&mut buf).as_bytes();
        let mut symbols: Vec<u32> = bytes.iter().map(|&b| byte_ids[b as usize]).collect();
        let mut ranks: Vec<u32> = symbols
            .windows(2)
            .map(|pair| kernels::pair_rank(merges, pair[0], pair[1]).unwrap_or(kernels::NONE))
            .collect();
        // The character alone, merged by the kernel's own step, with the
        // ends of each partial state and the highest rank merged.
        let (mut left_ends, mut right_ends) = (Vec::new(), Vec::new());
        let mut highest = 0;
        while symbols.len() > 1 {
            left_ends.push(symbols[0]);
            right_ends.push(symbols[symbols.len() - 1]);
            let Some(rank) = kernels::bpe_merge_step(merges, &mut symbols, &mut ranks) else {
                break;
            };
            highest = highest.max(rank);
        }
        let [atom] = symbols[..] else { continue };
        if atom >= ATOM_ID || bounds.lowest(&bounds.either_side, atom) <= highest {
            continue; // condition 3
        }
        let fails = |table: &Vec<u32>, ends: &[u32]| {
            ends.iter().any(|&id| bounds.lowest(table, id) <= highest)
        };
        let flags = [
            (NOT_AFTER_ASCII, fails(&bounds.after_ascii, &left_ends)),
            (NOT_AFTER_CHAR, fails(&bounds.after_char, &left_ends)),
            (NOT_BEFORE_ASCII, fails(&bounds.before_ascii, &right_ends)),
            (NOT_BEFORE_CHAR, fails(&bounds.before_part, &right_ends)),
            (NOT_BEFORE_LISTED, fails(&bounds.before_whole, &right_ends)),
        ];
        atoms[cp as usize] = flags
            .iter()
            .filter(|(_, fails)| *fails)
            .fold(atom, |e, (flag, _)| e | flag);
        found = true;
    }
    if !found {
        return Vec::new();
    }
    for (entry, listed) in atoms.iter_mut().zip(&bounds.listed) {
        if *listed {
            *entry |= LISTED;
        }
    }
    atoms
}

/// The lowest rank of the merges that may join a token with a neighbouring
/// character's symbol, by token id (`u32::MAX`: none). A neighbour on the
/// left ends with an ASCII byte or a continuation byte (0x80..0xBF: the end
/// of a character of two or more bytes); one on the right starts with an
/// ASCII byte or a lead byte (0xC0..).
struct Bounds {
    /// Merges (s, token) with s ending with an ASCII byte.
    after_ascii: Vec<u32>,
    /// Merges (s, token) with s ending with a continuation byte.
    after_char: Vec<u32>,
    /// Merges (token, t) with t starting with an ASCII byte.
    before_ascii: Vec<u32>,
    /// Merges (token, t) with t starting with a lead byte whose character
    /// t does not hold whole.
    before_part: Vec<u32>,
    /// Merges (token, t) with t starting with a whole character of two or
    /// more bytes.
    before_whole: Vec<u32>,
    /// By code point: the first character of the t of a merge (u, t) whose
    /// u is continuation bytes only (a partial end of some character).
    listed: Vec<bool>,
    /// Merges with the token on either side.
    either_side: Vec<u32>,
}

/// What a merge's side tells about the characters around it.
#[derive(Clone, Copy)]
struct Ends {
    /// First and last byte (0x100: not known, so any).
    first: u16,
    last: u16,
    /// Continuation bytes only: it can be a character's partial end.
    continuation_only: bool,
    /// The code point of its first character when it holds it whole and
    /// it has two or more bytes.
    whole_first: Option<u32>,
}

impl Ends {
    const UNKNOWN: Ends = Ends {
        first: 0x100,
        last: 0x100,
        continuation_only: true,
        whole_first: None,
    };

    fn of(bytes: &[u8]) -> Ends {
        let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
            return Ends::UNKNOWN;
        };
        let len = match first {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0.. => 4,
            _ => 0,
        };
        let whole_first = bytes
            .get(..len)
            .and_then(|head| std::str::from_utf8(head).ok())
            .and_then(|head| head.chars().next())
            .map(u32::from);
        Ends {
            first: first.into(),
            last: last.into(),
            continuation_only: bytes.iter().all(|b| (0x80..0xC0).contains(b)),
            whole_first,
        }
    }
}

impl Bounds {
    fn of(slots: &[GtPairSlot], token_bytes: &[(Vec<u8>, u32)]) -> Bounds {
        let ids = 1 + token_bytes.iter().map(|&(_, id)| id).max().unwrap_or(0) as usize;
        let mut ends = vec![Ends::UNKNOWN; ids];
        for (bytes, id) in token_bytes {
            ends[*id as usize] = Ends::of(bytes);
        }
        let ends_of = |id: u32| ends.get(id as usize).copied().unwrap_or(Ends::UNKNOWN);
        let mut bounds = Bounds {
            after_ascii: vec![u32::MAX; ids],
            after_char: vec![u32::MAX; ids],
            before_ascii: vec![u32::MAX; ids],
            before_part: vec![u32::MAX; ids],
            before_whole: vec![u32::MAX; ids],
            listed: vec![false; CHARS],
            either_side: vec![u32::MAX; ids],
        };
        let lower = |table: &mut Vec<u32>, id: u32, rank: u32| {
            if table.len() <= id as usize {
                table.resize(id as usize + 1, u32::MAX);
            }
            let slot = &mut table[id as usize];
            *slot = (*slot).min(rank);
        };
        for ((left, right), rank) in slots.iter().filter_map(GtPairSlot::pair_and_rank) {
            let (u, t) = (ends_of(left), ends_of(right));
            if u.last < 0x80 || u.last == 0x100 {
                lower(&mut bounds.after_ascii, right, rank);
            }
            if (0x80..0xC0).contains(&u.last) || u.last == 0x100 {
                lower(&mut bounds.after_char, right, rank);
            }
            if t.first < 0x80 || t.first == 0x100 {
                lower(&mut bounds.before_ascii, left, rank);
            }
            if t.first >= 0xC0 {
                match t.whole_first {
                    Some(cp) => {
                        lower(&mut bounds.before_whole, left, rank);
                        if u.continuation_only && (cp as usize) < CHARS {
                            bounds.listed[cp as usize] = true;
                        }
                    }
                    None => lower(&mut bounds.before_part, left, rank),
                }
            }
            lower(&mut bounds.either_side, left, rank);
            lower(&mut bounds.either_side, right, rank);
        }
        bounds
    }

    fn lowest(&self, table: &[u32], id: u32) -> u32 {
        table.get(id as usize).copied().unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn char_pairs_are_the_whole_characters_tokens_hold_side_by_side() {
        let tokens: Vec<(Vec<u8>, u32)> = [
            "\u{4e2d}\u{6587}".as_bytes().to_vec(), // two CJK characters
            b"x\xc3\xa9\xc3\xa8".to_vec(),          // ASCII, then two of two bytes
            ["\u{65e5}".as_bytes(), &"\u{672c}".as_bytes()[..2]].concat(), // a partial second
        ]
        .into_iter()
        .zip(0..)
        .collect();
        let pairs = char_pairs(&tokens);
        let held = |a: char, b: char| pairs.maybe(a.into(), b.into());
        assert!(held('\u{4e2d}', '\u{6587}'));
        assert!(held('\u{e9}', '\u{e8}'));
        assert!(!held('\u{6587}', '\u{4e2d}'));
        assert!(!held('x', '\u{e9}'), "ASCII never starts as an atom");
        assert!(
            !held('\u{65e5}', '\u{672c}'),
            "a partial character is never beside an atom"
        );
    }
    use crate::plan::alphabet::alphabet;
    use crate::plan::bytelevel::ByteLevelPlan;
    use crate::plan::family::Family;

    /// A byte-level BPE plan with the 256 byte tokens and these merges (of
    /// byte strings), ranked in this order.
    fn plan(merges: &[(&[u8], &[u8])]) -> ByteLevelPlan {
        let chars = alphabet();
        let text = |bytes: &[u8]| -> String { bytes.iter().map(|&b| chars[b as usize]).collect() };
        let mut vocab = serde_json::Map::new();
        for b in 0..=255u8 {
            vocab.insert(text(&[b]), vocab.len().into());
        }
        for (left, right) in merges {
            let made = text(&[*left, *right].concat());
            if !vocab.contains_key(&made) {
                vocab.insert(made, vocab.len().into());
            }
        }
        let merges: Vec<String> = merges
            .iter()
            .map(|(l, r)| format!("{} {}", text(l), text(r)))
            .collect();
        let spec = serde_json::json!({
            "normalizer": null,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": true},
            "added_tokens": [],
            "model": {"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": false,
                      "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false},
        });
        ByteLevelPlan::build(&spec).expect("a byte-level plan")
    }

    /// The character's atom entry, when it has an atom.
    fn entry(plan: &ByteLevelPlan, c: char) -> Option<u32> {
        let atoms = plan.tables().char_atoms;
        atoms
            .get(c as usize)
            .copied()
            .filter(|&e| e & ATOM_ID != ATOM_ID)
    }

    const E_ACUTE: &[u8] = "é".as_bytes(); // C3 A9

    #[test]
    fn a_character_merged_whole_is_an_atom_with_no_flags() {
        let plan = plan(&[(b"\xC3", b"\xA9")]);
        let e = entry(&plan, 'é').expect("é has an atom");
        assert_eq!(e & !ATOM_ID, 0);
        assert_eq!(e & ATOM_ID, 256, "the merge's token");
        assert_eq!(entry(&plan, 'ж'), None, "no merge joins its bytes");
    }

    #[test]
    fn a_lower_merge_with_a_neighbour_flags_that_side() {
        // " " + é's lead byte merges first: after an ASCII byte é must start as bytes.
        let after_space = plan(&[(b" ", b"\xC3"), (b"\xC3", b"\xA9")]);
        assert_eq!(
            entry(&after_space, 'é').map(|e| e & !ATOM_ID),
            Some(NOT_AFTER_ASCII)
        );
        // é's last byte + a lead byte merges first: before another character.
        let before_char = plan(&[(b"\xA9", b"\xD0"), (b"\xC3", b"\xA9")]);
        assert_eq!(
            entry(&before_char, 'é').map(|e| e & !ATOM_ID),
            Some(NOT_BEFORE_CHAR)
        );
        // Ranked after é's own merge, the same merges flag nothing.
        let later = plan(&[(b"\xC3", b"\xA9"), (b" ", b"\xC3"), (b"\xA9", b"\xD0")]);
        assert_eq!(entry(&later, 'é').map(|e| e & !ATOM_ID), Some(0));
    }

    #[test]
    fn a_partial_end_joined_with_a_whole_character_flags_only_that_character() {
        // é's last byte + the token ж, ranked below é's own merge: é must
        // start as its bytes before ж (listed), not before every character.
        let plan = plan(&[
            (b"\xD0", b"\xB6"),
            (b"\xA9", "ж".as_bytes()),
            (b"\xC3", b"\xA9"),
        ]);
        assert_eq!(
            entry(&plan, 'é').map(|e| e & !ATOM_ID),
            Some(NOT_BEFORE_LISTED)
        );
        let atoms = plan.tables().char_atoms;
        assert_ne!(atoms['ж' as usize] & LISTED, 0);
        assert_eq!(atoms['ü' as usize] & LISTED, 0);
        assert_eq!(atoms['ü' as usize] & ATOM_ID, ATOM_ID, "no atom");
    }

    #[test]
    fn bytes_that_are_no_character_start_as_bytes() {
        // U+4042 is E4 81 82; E4 41 42 (a lead byte before ASCII) would
        // read as the same code point if the continuation bytes were not checked.
        let plan = plan(&[(b"\x81", b"\x82"), (b"\xE4", b"\x81\x82")]);
        assert!(entry(&plan, '\u{4042}').is_some());
        let (mut scratch, mut ids) = (Default::default(), Vec::new());
        kernels::bpe_word(plan.model(), b"\xE4AB", &mut scratch, &mut ids);
        assert_eq!(
            ids,
            [b'\xE4', b'A', b'B'].map(|b| plan.model().byte_ids[b as usize])
        );
        ids.clear();
        kernels::bpe_word(plan.model(), "\u{4042}".as_bytes(), &mut scratch, &mut ids);
        assert_eq!(ids, [entry(&plan, '\u{4042}').unwrap() & ATOM_ID]);
    }

    #[test]
    fn a_merge_of_the_token_ranked_below_its_own_makes_no_atom() {
        // "éyz": bytes first merge y z (rank 0), é (rank 2), then nothing: [é, yz];
        // from an atom, é y (rank 1) would come first: [éy, z].
        let plan = plan(&[(b"y", b"z"), (E_ACUTE, b"y"), (b"\xC3", b"\xA9")]);
        assert_eq!(entry(&plan, 'é'), None);
    }
}
