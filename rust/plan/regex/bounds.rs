//! Word ends over ASCII text read from a table instead of the DFA: for a
//! compiled pattern, whether a match ends between two characters, as a
//! function of the two characters before and the two after (the block
//! scan of `cuda/gt_regex.cuh`, `gt_rx_scan_blocks`, host only). It owns the
//! derivation and its proof; the DFA (`dfa.rs`) stays the matcher.
//!
//! The DFA is the oracle. `Sim` reads classes as `gt_rx_scan_ascii` does
//! (one match after another, each starting where the last one ended, a
//! backtrack to the last match end when a match dies without one), with its
//! state as a `Cfg`: the DFA row and the classes read since the match's last
//! possible end. The configurations that scan can be in before any character
//! are found by a search over every class string (`reachable`); the table's
//! entry for a window of four characters a b | c d is then decided by running
//! every reachable configuration through every window of DFA classes whose
//! bytes map to a b c d:
//!
//! - yes: every run ends a match at the cut (before c);
//! - no: every run ends one after the cut, or holds a possible end after it
//!   in a match that started before it (the match will end there or later);
//! - undecided otherwise: the runs disagree, or one needs more context (a
//!   digit run cut every three digits, a contraction after `'`), or one
//!   stops where `gt_rx_scan_ascii` stops (no match may start, no match end
//!   to give back to). Bytes of 0x80 and above are undecided.
//!
//! Rare classes: a class of ASCII bytes only, none a letter, a digit or a
//! space (`'` of the contractions, `\r` and `\n` where the pattern names
//! them) starts a zone in which the table does not hold: the configurations
//! are only those whose last `SAFE` counted characters that are not white space
//! hold no rare one (after `\n` and any white space, `\s*[\r\n]` may still
//! give back the whole run; after `'`, `'ll` may still match). The scan
//! keeps that count (`GT_RX_RARE`, `GT_RX_WHITE` in the byte's class) and
//! takes no word end from a window that starts inside a zone. `SAFE` is
//! the fewest counted characters (0 to `MAX_SAFE`) that decide as many
//! windows as `MAX_SAFE` does. A class that
//! holds a non-ASCII character counts as the scan counts its bytes: white
//! space (no count) if it holds no ASCII byte that counts.
//!
//! ASCII bytes go to at most 15 block classes (4 bits, so a window is a
//! 16-bit index): the DFA's ASCII classes grouped by their first transition
//! (so `s` and `a`, which only `'s` tells apart, share one; a window whose
//! answer depends on which is undecided). Patterns with a lookbehind, an
//! empty match, more than 15 groups or a search past its budget get no table;
//! so do those it would not speed up: a rare class of white space (every
//! newline a zone: cl100k, Qwen) or more than 10% of the ASCII windows
//! undecided (benches/README.md, "The scan7 round").

use super::dfa::{DEAD, MATCH, ROW};
use std::collections::{HashMap, HashSet};

/// Table entries.
pub const NO: u8 = 0;
pub const YES: u8 = 1;
pub const UNDECIDED: u8 = 2;
/// The block class of bytes 0x80 and above.
pub const NON_ASCII: u8 = 15;
/// Window entries: 4 block classes of 4 bits.
pub const ENTRIES: usize = 1 << 16;
/// `class_of` flags: a rare byte; a byte that does not count (white space,
/// non-ASCII).
pub const RARE: u8 = 0x10;
pub const WHITE: u8 = 0x20;
/// Counted characters after a rare one before the table holds, at most
/// (each pattern takes the fewest that decide as many windows; the scan
/// reads its count at `class_of[256]`).
pub const MAX_SAFE: u8 = 3;

/// How a class moves the count since the last rare character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rare,
    White,
    Counted,
}

/// Classes read since the last possible match end, at most.
const MAX_HIST: usize = 12;
/// Reachable configurations at most.
const MAX_CFGS: usize = 50_000;

/// The block classifier of a pattern: the block class of each byte (and at
/// 256 the count of counted bytes after a rare one it needs), and the
/// entry (NO / YES / UNDECIDED) of each window a b | c d at
/// `a << 12 | b << 8 | c << 4 | d`.
#[derive(Clone, Debug)]
pub struct BlockTable {
    pub class_of: Vec<u8>,
    pub bounds: Vec<u8>,
}

/// The classes read since a match's last possible end.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Hist {
    None,
    Some(Vec<u8>),
    /// More than MAX_HIST: a backtrack there is not followed.
    Far,
}

/// The scan's state before a character.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Cfg {
    /// A match starts at this character.
    Start,
    /// Inside a match: the row, and the classes since its last possible end.
    Mid { row: u32, hist: Hist },
}

struct Sim<'a> {
    trans: &'a [u32],
    start: u32,
}

impl Sim<'_> {
    /// Reads one character of class `c` at `pos`: the next state, with the
    /// match ends found pushed to `ends`; None where `gt_rx_scan_ascii` stops.
    fn feed(&self, cfg: &Cfg, c: u8, pos: i32, ends: &mut Vec<i32>) -> Option<Cfg> {
        let first = |c: u8| {
            let r = self.trans[(self.start + u32::from(c)) as usize];
            (r & (DEAD | MATCH) == 0).then_some(r & ROW)
        };
        match cfg {
            Cfg::Start => first(c).map(|row| Cfg::Mid {
                row,
                hist: Hist::None,
            }),
            Cfg::Mid { row, hist } => {
                let e = self.trans[(row + u32::from(c)) as usize];
                if e & DEAD == 0 {
                    let hist = match hist {
                        _ if e & MATCH != 0 => Hist::Some(vec![c]),
                        Hist::Some(h) if h.len() >= MAX_HIST => Hist::Far,
                        Hist::Some(h) => Hist::Some([&h[..], &[c]].concat()),
                        other => other.clone(),
                    };
                    Some(Cfg::Mid { row: e & ROW, hist })
                } else if e & MATCH != 0 {
                    let row = first(c)?;
                    ends.push(pos);
                    Some(Cfg::Mid {
                        row,
                        hist: Hist::None,
                    })
                } else {
                    // Back to the last possible end; read again from there.
                    // (From Far: unknown characters, so the scan's own stop.)
                    let Hist::Some(h) = hist else { return None };
                    let at = pos - h.len() as i32;
                    let row = first(h[0])?;
                    ends.push(at);
                    let mut cfg = Cfg::Mid {
                        row,
                        hist: Hist::None,
                    };
                    for (i, &k) in h[1..].iter().chain([&c]).enumerate() {
                        cfg = self.feed(&cfg, k, at + 1 + i as i32, ends)?;
                    }
                    Some(cfg)
                }
            }
        }
    }
}

/// Every configuration the scan can be in before a character (over every
/// class, ASCII or not) outside a rare class's zone, or None past the
/// budget. The search runs over (configuration, count since the last rare
/// class); a match starts with any count (the scan may start anywhere). A
/// backtrack from Far adds nothing: what it reads again is a string read
/// from Start, which the search reads too.
fn reachable(sim: &Sim, kinds: &[Kind], safe: u8) -> Option<HashSet<Cfg>> {
    let mut seen: HashSet<(Cfg, u8)> = (0..=safe).map(|d| (Cfg::Start, d)).collect();
    let mut todo: Vec<(Cfg, u8)> = seen.iter().cloned().collect();
    let mut ends = Vec::new();
    while let Some((cfg, d)) = todo.pop() {
        for (c, kind) in kinds.iter().enumerate() {
            let d = match kind {
                Kind::Rare => 0,
                Kind::White => d,
                Kind::Counted => (d + 1).min(safe),
            };
            ends.clear();
            if let Some(next) = sim.feed(&cfg, c as u8, 0, &mut ends) {
                if seen.insert((next.clone(), d)) {
                    todo.push((next, d));
                }
            }
            if seen.len() > MAX_CFGS {
                return None;
            }
        }
    }
    Some(
        seen.into_iter()
            .filter(|&(_, d)| d == safe)
            .map(|(cfg, _)| cfg)
            .collect(),
    )
}

const OUT_YES: u8 = 1;
const OUT_NO: u8 = 2;
const OUT_UNDECIDED: u8 = 4;

/// The outcome of a run whose reads pushed `ends` (the cut is at 2).
fn decided(ends: &[i32]) -> Option<u8> {
    if ends.contains(&2) {
        Some(OUT_YES)
    } else if ends.iter().any(|&e| e > 2) {
        Some(OUT_NO)
    } else {
        None
    }
}

struct Windows<'a> {
    sim: &'a Sim<'a>,
    members: Vec<Vec<u8>>,
    bounds: Vec<u8>,
}

impl Windows<'_> {
    /// Decides every window extending `prefix` (depth block classes, as an
    /// index), from the runs `cfgs` still open and the outcomes `seen` of
    /// those already decided.
    fn fill(&mut self, depth: usize, prefix: usize, cfgs: &HashSet<Cfg>, seen: u8) {
        let span = 1usize << (4 * (4 - depth));
        if seen & OUT_UNDECIDED != 0 || seen == OUT_YES | OUT_NO {
            self.bounds[prefix * span..(prefix + 1) * span].fill(UNDECIDED);
            return;
        }
        if depth == 4 {
            let mut seen = seen;
            for cfg in cfgs {
                // A possible end after the cut in a match that started before it.
                let after = matches!(cfg, Cfg::Mid { hist: Hist::Some(h), .. } if h.len() == 1);
                seen |= if after { OUT_NO } else { OUT_UNDECIDED };
            }
            self.bounds[prefix] = match seen {
                OUT_YES => YES,
                OUT_NO => NO,
                _ => UNDECIDED,
            };
            return;
        }
        let mut ends = Vec::new();
        for b in 0..16 {
            if self.members[b].is_empty() {
                let span = span >> 4;
                let at = (prefix << 4) | b;
                self.bounds[at * span..(at + 1) * span].fill(UNDECIDED);
                continue;
            }
            let mut next: HashSet<Cfg> = HashSet::new();
            let mut out = seen;
            for cfg in cfgs {
                for &c in &self.members[b] {
                    ends.clear();
                    let got = self.sim.feed(cfg, c, depth as i32, &mut ends);
                    match (decided(&ends), got) {
                        (Some(o), _) => out |= o,
                        (None, Some(cfg)) => {
                            next.insert(cfg);
                        }
                        (None, None) => out |= OUT_UNDECIDED,
                    }
                }
            }
            self.fill(depth + 1, (prefix << 4) | b, &next, out);
        }
    }
}

/// The block table of a compiled pattern, or None (see the module's doc).
/// `trans`/`start`: the DFA's rows and start row; `ascii`: the class of each
/// byte 0..128; `kinds`: each class's.
pub fn derive(trans: &[u32], start: u32, ascii: &[u8], kinds: &[Kind]) -> Option<BlockTable> {
    // A rare class of white space (cl100k's and Qwen's `[\r\n]`) makes a
    // zone of every newline and the indentation after it: measured, the
    // hand-overs then cost what the table saves (benches/README.md, "The
    // scan7 round"), so such patterns keep the DFA alone.
    if (0..128u8)
        .any(|b| b.is_ascii_whitespace() && kinds[ascii[b as usize] as usize] == Kind::Rare)
    {
        return None;
    }
    let mut group_of: HashMap<u32, u8> = HashMap::new();
    let mut class_of = vec![NON_ASCII | WHITE; 256];
    let mut members: Vec<Vec<u8>> = vec![Vec::new(); 16];
    for (b, &c) in ascii.iter().enumerate().take(128) {
        let key = trans[(start + u32::from(c)) as usize];
        let next = group_of.len() as u8;
        let g = *group_of.entry(key).or_insert(next);
        if g >= NON_ASCII {
            return None;
        }
        class_of[b] = g | match kinds[c as usize] {
            Kind::Rare => RARE,
            Kind::White => WHITE,
            Kind::Counted => 0,
        };
        if !members[g as usize].contains(&c) {
            members[g as usize].push(c);
        }
    }
    let sim = Sim { trans, start };
    let table = |safe: u8| -> Option<Vec<u8>> {
        let cfgs = reachable(&sim, kinds, safe)?;
        let mut windows = Windows {
            sim: &sim,
            members: members.clone(),
            bounds: vec![UNDECIDED; ENTRIES],
        };
        windows.fill(0, 0, &cfgs, 0);
        Some(windows.bounds)
    };
    let decided = |b: &[u8]| b.iter().filter(|&&v| v != UNDECIDED).count();
    let most = table(MAX_SAFE)?;
    let best = decided(&most);
    if best == 0 {
        return None;
    }
    let (safe, bounds) = (0..MAX_SAFE)
        .find_map(|safe| {
            table(safe)
                .filter(|b| decided(b) == best)
                .map(|b| (safe, b))
        })
        .unwrap_or((MAX_SAFE, most));
    // A table that leaves many windows of ASCII text to the DFA costs more
    // in hand-overs than it saves (DeepSeek's and Tekken's steps decide
    // 14-16% of them, GPT-2's 98%).
    let groups = group_of.len();
    let ascii_windows = (0..ENTRIES).filter(|&i| (0..4).all(|k| (i >> (4 * k)) & 15 < groups));
    let (all, open) = ascii_windows.fold((0, 0), |(a, o), i| {
        (a + 1, o + usize::from(bounds[i] == UNDECIDED))
    });
    if open * 10 > all {
        return None;
    }
    class_of.push(safe);
    Some(BlockTable { class_of, bounds })
}
