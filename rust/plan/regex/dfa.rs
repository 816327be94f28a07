//! From a parsed pattern to the tables `cuda/gt_regex.cuh` runs: a
//! leftmost-first DFA over classes of code points.
//!
//! 1. Classes: code points that every set of the pattern treats alike share
//!    a class (a pattern of `\p{L}`, `\p{N}`, `\s` and a few literals has a
//!    dozen); a two-level table maps a code point to its class.
//! 2. NFA: Thompson's construction, each split ordered (the preferred branch
//!    first), as a backtracking engine tries them.
//! 3. DFA: subset construction over ordered thread lists. Stepping a list on
//!    a character visits threads in priority order; a thread that has
//!    matched cuts off every thread after it (they could only give a
//!    match the backtracker never reaches), which is Oniguruma's answer:
//!    the first alternative that matches wins, greedy loops give back only
//!    as far as needed. Matches are seen one character late (the match
//!    flag sits on the transition out of the state where a thread matched),
//!    so one-character lookaheads are exact: a thread waiting on `(?!\S)`
//!    carries the classes the next character may have, and matches (or
//!    not) when that character, or the end, is read. Lookbehinds are
//!    decided when a thread reaches them: the character before is the one
//!    just read, or, at the start, the one before the start position (the
//!    DFA has a start state per class of that character).
//! 4. States that can never match again become the dead state; equivalent
//!    states are merged (Moore's refinement).
//!
//! `\s+(?!\S)` then reads as Oniguruma's: the loop's threads come first,
//! then the lookahead's; on a run of white space followed by a letter, the
//! lookahead thread matched at every space but the last (a space follows),
//! and the letter kills every thread: the match is the run less its last
//! character. On a run that ends the text, the end lets it match whole.

use super::charset::CharSet;
use super::parse::Node;
use std::collections::HashMap;

/// States and table entries a compiled pattern may have at most.
pub const MAX_STATES: usize = 4096;
pub const MAX_ENTRIES: usize = 1 << 20;
/// Classes at most (class ids are bytes).
pub const MAX_CLASSES: usize = 256;
/// NFA instructions at most (counted repetitions expand).
const MAX_INSTS: usize = 100_000;

/// Transition entry flags (`GT_RX_MATCH`, `GT_RX_DEAD`, `GT_RX_ROW`).
pub const MATCH: u32 = 1 << 30;
pub const DEAD: u32 = 1 << 31;
pub const ROW: u32 = MATCH - 1;

/// Code points per block of the class table.
const BLOCK: usize = 128;

/// A set of classes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Bits([u64; 4]);

impl Bits {
    fn full(n: usize) -> Bits {
        let mut b = Bits::default();
        for k in 0..n {
            b.set(k);
        }
        b
    }
    fn set(&mut self, k: usize) {
        self.0[k / 64] |= 1 << (k % 64);
    }
    fn has(&self, k: usize) -> bool {
        self.0[k / 64] >> (k % 64) & 1 == 1
    }
    fn and(self, o: Bits) -> Bits {
        Bits(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }
    fn or(self, o: Bits) -> Bits {
        Bits(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }
    fn minus(self, o: Bits) -> Bits {
        Bits(std::array::from_fn(|i| self.0[i] & !o.0[i]))
    }
    fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

/// The partition of code points into classes.
pub struct Classes {
    pub n: usize,
    /// Class of every code point 0..=0x10FFFF (surrogates included: unused).
    class_of: Vec<u8>,
    /// (first code point, class) of each run of one class, in order.
    starts: Vec<(u32, u8)>,
}

impl Classes {
    /// The coarsest partition that keeps every set whole.
    fn of(sets: &[&CharSet]) -> Result<Classes, String> {
        let mut points: Vec<u32> = vec![0, 0x110000];
        for set in sets {
            for &(a, b) in set.ranges() {
                points.push(a);
                points.push(b + 1);
            }
        }
        points.sort_unstable();
        points.dedup();
        let words = sets.len().div_ceil(64).max(1);
        let mut ids: HashMap<Vec<u64>, u8> = HashMap::new();
        let mut class_of = vec![0u8; 0x110000];
        let mut cursors = vec![0usize; sets.len()];
        let mut starts = Vec::with_capacity(points.len());
        for w in points.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let mut signature = vec![0u64; words];
            for (i, set) in sets.iter().enumerate() {
                let ranges = set.ranges();
                while cursors[i] < ranges.len() && ranges[cursors[i]].1 < lo {
                    cursors[i] += 1;
                }
                if ranges.get(cursors[i]).is_some_and(|r| r.0 <= lo) {
                    signature[i / 64] |= 1 << (i % 64);
                }
            }
            let next = ids.len();
            if next >= MAX_CLASSES && !ids.contains_key(&signature) {
                return Err(format!("more than {MAX_CLASSES} classes of characters"));
            }
            let id = *ids.entry(signature).or_insert(next as u8);
            class_of[lo as usize..hi as usize].fill(id);
            starts.push((lo, id));
        }
        Ok(Classes {
            n: ids.len(),
            class_of,
            starts,
        })
    }

    /// The classes a set is made of (each class is wholly in or out of it).
    fn bits(&self, set: &CharSet) -> Bits {
        let mut b = Bits::default();
        for &(lo, hi) in set.ranges() {
            let mut at = self.starts.partition_point(|&(start, _)| start <= lo) - 1;
            while at < self.starts.len() && self.starts[at].0 <= hi {
                b.set(self.starts[at].1 as usize);
                at += 1;
            }
        }
        b
    }

    /// The class of code point `cp`.
    pub fn of_cp(&self, cp: u32) -> usize {
        self.class_of[cp as usize] as usize
    }

    /// Classes holding a code point that is not White_Space.
    fn not_white_space(&self) -> Vec<bool> {
        let mut out = vec![false; self.n];
        for (cp, &k) in self.class_of.iter().enumerate() {
            if char::from_u32(cp as u32).is_some_and(|c| !c.is_whitespace()) {
                out[k as usize] = true;
            }
        }
        out
    }

    /// The two-level table: a block index per 128 code points, and the
    /// distinct blocks (the first is code points 0..128).
    fn table(&self) -> (Vec<u16>, Vec<u8>) {
        let mut index: HashMap<&[u8], u16> = HashMap::new();
        let mut blocks = Vec::new();
        let mut block_of = Vec::with_capacity(self.class_of.len() / BLOCK);
        for chunk in self.class_of.chunks(BLOCK) {
            let next = index.len() as u16;
            let id = *index.entry(chunk).or_insert_with(|| {
                blocks.extend_from_slice(chunk);
                next
            });
            block_of.push(id);
        }
        (block_of, blocks)
    }
}

#[derive(Clone, Copy, Debug)]
enum Inst {
    Char(Bits, u32),
    /// Both branches, the first preferred.
    Split(u32, u32),
    Look {
        ahead: bool,
        pass: Bits,
        at_edge: bool,
        next: u32,
    },
    Match,
}

struct Nfa {
    insts: Vec<Inst>,
    has_lookbehind: bool,
}

impl Nfa {
    fn push(&mut self, inst: Inst) -> Result<u32, String> {
        if self.insts.len() >= MAX_INSTS {
            return Err("the pattern expands past the automaton budget".into());
        }
        self.insts.push(inst);
        Ok(self.insts.len() as u32 - 1)
    }

    /// Compiles `node` to run before `next`; returns its entry.
    fn compile(&mut self, node: &Node, next: u32, classes: &Classes) -> Result<u32, String> {
        Ok(match node {
            Node::Empty => next,
            Node::Set(set) | Node::Folded(_, set) => {
                self.push(Inst::Char(classes.bits(set), next))?
            }
            Node::Concat(items) => {
                let mut at = next;
                for item in items.iter().rev() {
                    at = self.compile(item, at, classes)?;
                }
                at
            }
            Node::Alt(items) => {
                let entries: Vec<u32> = items
                    .iter()
                    .map(|item| self.compile(item, next, classes))
                    .collect::<Result<_, _>>()?;
                let mut at = *entries.last().ok_or("an empty alternation")?;
                for &entry in entries.iter().rev().skip(1) {
                    at = self.push(Inst::Split(entry, at))?;
                }
                at
            }
            Node::Look {
                ahead,
                set,
                at_edge,
            } => {
                self.has_lookbehind |= !ahead;
                self.push(Inst::Look {
                    ahead: *ahead,
                    pass: classes.bits(set),
                    at_edge: *at_edge,
                    next,
                })?
            }
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => {
                let order = |body: u32, exit: u32| match greedy {
                    true => Inst::Split(body, exit),
                    false => Inst::Split(exit, body),
                };
                let mut tail = next;
                match max {
                    None => {
                        let at = self.push(Inst::Match)?; // placeholder
                        let body = self.compile(node, at, classes)?;
                        self.insts[at as usize] = order(body, next);
                        tail = at;
                    }
                    Some(max) => {
                        for _ in *min..*max {
                            let body = self.compile(node, tail, classes)?;
                            tail = self.push(order(body, next))?;
                        }
                    }
                }
                for _ in 0..*min {
                    tail = self.compile(node, tail, classes)?;
                }
                tail
            }
        })
    }
}

/// What must hold of the next character for a thread to go on: its class
/// in `next`, or, at the end of the subject, `edge`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Cond {
    next: Bits,
    edge: bool,
}

impl Cond {
    fn is_empty(&self) -> bool {
        self.next.is_empty() && !self.edge
    }
    fn allows(&self, class: Option<usize>) -> bool {
        match class {
            Some(k) => self.next.has(k),
            None => self.edge,
        }
    }
}

type Thread = (u32, Cond);

struct Determinizer<'a> {
    nfa: &'a Nfa,
    all: Cond,
}

impl Determinizer<'_> {
    /// Appends the threads reachable from `inst` without reading, in
    /// priority order; `prev` is the class of the character just read
    /// (None at the subject's start). A thread of an NFA state already
    /// present keeps only the next characters the earlier one does not take.
    fn closure(
        &self,
        inst: u32,
        cond: Cond,
        prev: Option<usize>,
        out: &mut Vec<Thread>,
        covered: &mut HashMap<u32, Cond>,
    ) -> Result<(), String> {
        let mut stack = vec![(inst, cond)];
        let mut steps = 0usize;
        while let Some((at, cond)) = stack.pop() {
            steps += 1;
            if steps > 4 * MAX_INSTS {
                return Err("the pattern loops without reading".into());
            }
            match self.nfa.insts[at as usize] {
                Inst::Split(first, second) => {
                    stack.push((second, cond));
                    stack.push((first, cond));
                }
                Inst::Look {
                    ahead: true,
                    pass,
                    at_edge,
                    next,
                } => {
                    let narrowed = Cond {
                        next: cond.next.and(pass),
                        edge: cond.edge && at_edge,
                    };
                    if !narrowed.is_empty() {
                        stack.push((next, narrowed));
                    }
                }
                Inst::Look {
                    ahead: false,
                    pass,
                    at_edge,
                    next,
                } => {
                    let passes = match prev {
                        Some(k) => pass.has(k),
                        None => at_edge,
                    };
                    if passes {
                        stack.push((next, cond));
                    }
                }
                Inst::Char(..) | Inst::Match => {
                    let seen = covered.entry(at).or_insert(Cond {
                        next: Bits::default(),
                        edge: false,
                    });
                    let left = Cond {
                        next: cond.next.minus(seen.next),
                        edge: cond.edge && !seen.edge,
                    };
                    if !left.is_empty() {
                        seen.next = seen.next.or(left.next);
                        seen.edge |= left.edge;
                        out.push((at, left));
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads class `class` (None: the end of the subject) from `threads`:
    /// the threads after it, and whether a thread matched just before it.
    fn step(
        &self,
        threads: &[Thread],
        class: Option<usize>,
    ) -> Result<(Vec<Thread>, bool), String> {
        let mut out = Vec::new();
        let mut covered = HashMap::new();
        for &(at, cond) in threads {
            if !cond.allows(class) {
                continue;
            }
            match self.nfa.insts[at as usize] {
                Inst::Match => return Ok((out, true)),
                Inst::Char(set, next) => {
                    if let Some(k) = class.filter(|&k| set.has(k)) {
                        self.closure(next, self.all, Some(k), &mut out, &mut covered)?;
                    }
                }
                _ => unreachable!("threads hold only Char and Match"),
            }
        }
        Ok((out, false))
    }
}

/// A compiled pattern's tables and what the plan needs to know of it.
#[derive(Clone, Debug)]
pub struct Tables {
    pub n_classes: u32,
    /// Rows of n_classes + 1 entries (the last: the end of the subject):
    /// next row | MATCH (a match ended before this character) | DEAD.
    pub trans: Vec<u32>,
    /// Start row by the class of the character before (n_classes: none).
    pub starts: Vec<u32>,
    pub block_of: Vec<u16>,
    pub blocks: Vec<u8>,
    /// By byte, whether a match may start there (1) or not (0), for a host
    /// search to skip what cannot start one; empty where the start reads the
    /// character before, a match can be empty, or every character may start
    /// one (see `first_bytes`).
    pub first_bytes: Vec<u8>,
    /// The start depends on the character before.
    pub lookbehind: bool,
    /// The pattern can match the empty string.
    pub nullable: bool,
    /// Cutting a subject before a space that follows a non-space changes
    /// no match, only splits a gap that crosses the cut (`gt_next_cut`).
    pub keeps_cuts: bool,
    /// ... and a match always starts at such a cut.
    pub bounds_cuts: bool,
    pub states: usize,
}

/// Compiles a parsed pattern.
pub fn build(node: &Node) -> Result<Tables, String> {
    let mut sets: Vec<&CharSet> = Vec::new();
    collect_sets(node, &mut sets);
    let space = CharSet::single(' ' as u32);
    sets.push(&space);
    sets.sort();
    sets.dedup();
    let classes = Classes::of(&sets)?;
    let n = classes.n;
    let mut nfa = Nfa {
        insts: Vec::new(),
        has_lookbehind: false,
    };
    let done = nfa.push(Inst::Match)?;
    let start = nfa.compile(node, done, &classes)?;
    let det = Determinizer {
        nfa: &nfa,
        all: Cond {
            next: Bits::full(n),
            edge: true,
        },
    };

    // Subset construction; state 0 is the dead state (no threads).
    let mut states: Vec<Vec<Thread>> = vec![Vec::new()];
    let mut ids: HashMap<Vec<Thread>, u32> = HashMap::from([(Vec::new(), 0)]);
    let mut intern = |threads: Vec<Thread>, states: &mut Vec<Vec<Thread>>| -> Result<u32, String> {
        if let Some(&id) = ids.get(&threads) {
            return Ok(id);
        }
        if states.len() >= MAX_STATES || states.len() * (n + 1) >= MAX_ENTRIES {
            return Err(format!(
                "the automaton passes its budget ({MAX_STATES} states, {MAX_ENTRIES} entries)"
            ));
        }
        states.push(threads.clone());
        ids.insert(threads, states.len() as u32 - 1);
        Ok(states.len() as u32 - 1)
    };
    let mut starts = Vec::with_capacity(n + 1);
    for prev in (0..n).map(Some).chain([None]) {
        if !nfa.has_lookbehind && prev.is_some() {
            starts.push(u32::MAX); // filled below: the same as the edge's
            continue;
        }
        let mut threads = Vec::new();
        det.closure(start, det.all, prev, &mut threads, &mut HashMap::new())?;
        starts.push(intern(threads, &mut states)?);
    }
    let edge_start = starts[n];
    for s in starts.iter_mut() {
        if *s == u32::MAX {
            *s = edge_start;
        }
    }
    // (target, matched) per state and class; the last column is the end.
    let mut edges: Vec<Vec<(u32, bool)>> = Vec::new();
    let mut at = 0;
    while at < states.len() {
        let threads = states[at].clone();
        let mut row = Vec::with_capacity(n + 1);
        for class in (0..n).map(Some).chain([None]) {
            let (next, matched) = det.step(&threads, class)?;
            let target = if class.is_some() {
                intern(next, &mut states)?
            } else {
                0
            };
            row.push((target, matched));
        }
        edges.push(row);
        at += 1;
    }
    let (edges, starts) = minimize(prune(edges), starts);
    Ok(tables(&classes, edges, starts, nfa.has_lookbehind))
}

fn collect_sets<'n>(node: &'n Node, out: &mut Vec<&'n CharSet>) {
    match node {
        Node::Empty => {}
        Node::Set(set) | Node::Folded(_, set) | Node::Look { set, .. } => out.push(set),
        Node::Concat(items) | Node::Alt(items) => items.iter().for_each(|i| collect_sets(i, out)),
        Node::Repeat { node, .. } => collect_sets(node, out),
    }
}

/// Sends every transition into a state that can never match again to the
/// dead state (so the scanner stops there).
fn prune(mut edges: Vec<Vec<(u32, bool)>>) -> Vec<Vec<(u32, bool)>> {
    let mut live: Vec<bool> = edges.iter().map(|row| row.iter().any(|e| e.1)).collect();
    loop {
        let mut changed = false;
        for s in 0..edges.len() {
            if !live[s] && edges[s].iter().any(|&(t, _)| live[t as usize]) {
                live[s] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for row in edges.iter_mut() {
        for e in row.iter_mut() {
            if !live[e.0 as usize] {
                e.0 = 0;
            }
        }
    }
    edges
}

/// Merges equivalent states (Moore's partition refinement); the dead state
/// stays state 0.
fn minimize(edges: Vec<Vec<(u32, bool)>>, starts: Vec<u32>) -> (Vec<Vec<(u32, bool)>>, Vec<u32>) {
    let mut block: Vec<u32> = (0..edges.len()).map(|s| u32::from(s != 0)).collect();
    let mut count = 2;
    loop {
        let mut ids: HashMap<(u32, Vec<(u32, bool)>), u32> = HashMap::new();
        ids.insert(
            (
                block[0],
                edges[0]
                    .iter()
                    .map(|&(t, m)| (block[t as usize], m))
                    .collect(),
            ),
            0,
        );
        let next: Vec<u32> = (0..edges.len())
            .map(|s| {
                let signature: Vec<(u32, bool)> = edges[s]
                    .iter()
                    .map(|&(t, m)| (block[t as usize], m))
                    .collect();
                let len = ids.len() as u32;
                *ids.entry((block[s], signature)).or_insert(len)
            })
            .collect();
        let stable = ids.len() == count;
        count = ids.len();
        block = next;
        if stable {
            break;
        }
    }
    let mut merged = vec![Vec::new(); count];
    for (s, row) in edges.iter().enumerate() {
        let b = block[s] as usize;
        if merged[b].is_empty() {
            merged[b] = row.iter().map(|&(t, m)| (block[t as usize], m)).collect();
        }
    }
    let starts = starts.iter().map(|&s| block[s as usize]).collect();
    (merged, starts)
}

/// Where the start needs no character before and no match is empty: by
/// byte, 1 where a match may start (an ASCII character whose class the start
/// row takes; a lead byte one of whose code points' classes it takes), 0
/// elsewhere (continuation bytes included). A search that skips the 0 bytes
/// stops at every character where the DFA's first step would not die: a
/// pattern that matches rarely (DeepSeek's digits and CJK steps) is then
/// searched a byte at a time with one lookup, not a class and a transition.
fn first_bytes(start_row: &[(u32, bool)], block_of: &[u16], blocks: &[u8]) -> Vec<u8> {
    let starts_with = |class: u8| start_row[class as usize].0 != 0;
    let class_of =
        |cp: u32| blocks[block_of[(cp >> 7) as usize] as usize * 128 + (cp & 127) as usize];
    let block_starts: Vec<bool> = blocks
        .chunks(128)
        .map(|b| b.iter().any(|&c| starts_with(c)))
        .collect();
    // Whether a code point in [lo, hi) may start a match: whole blocks by
    // their flag, the rest one by one.
    let any_in = |lo: u32, hi: u32| {
        let mut cp = lo;
        while cp < hi {
            if cp % 128 == 0 && cp + 128 <= hi {
                if block_starts[block_of[(cp >> 7) as usize] as usize] {
                    return true;
                }
                cp += 128;
            } else {
                if starts_with(class_of(cp)) {
                    return true;
                }
                cp += 1;
            }
        }
        false
    };
    let first: Vec<u8> = (0..=255u32)
        .map(|b| {
            u8::from(match b {
                0x00..=0x7F => starts_with(class_of(b)),
                0xC2..=0xDF => any_in((b & 0x1F) << 6, ((b & 0x1F) << 6) + 64),
                0xE0..=0xEF => any_in((b & 0x0F) << 12, ((b & 0x0F) << 12) + (1 << 12)),
                0xF0..=0xF4 => any_in(
                    (b & 0x07) << 18,
                    (((b & 0x07) << 18) + (1 << 18)).min(0x11_0000),
                ),
                _ => false,
            })
        })
        .collect();
    // A pattern that may start at every character (GPT-2's, Qwen's) skips
    // nothing: no table, so its search pays no lookup for it.
    let starts_anywhere = (0x00..=0x7F).chain(0xC2..=0xF4).all(|b| first[b] == 1);
    match starts_anywhere {
        true => Vec::new(),
        false => first,
    }
}

/// The kernel's tables, and the facts the plan needs.
fn tables(
    classes: &Classes,
    edges: Vec<Vec<(u32, bool)>>,
    starts: Vec<u32>,
    lookbehind: bool,
) -> Tables {
    let n = classes.n;
    let width = (n + 1) as u32;
    let entry = |(t, m): (u32, bool)| -> u32 {
        let flags = if m { MATCH } else { 0 } | if t == 0 { DEAD } else { 0 };
        (t * width) | flags
    };
    let mut trans = Vec::with_capacity(edges.len() * (n + 1));
    for (s, row) in edges.iter().enumerate() {
        for (k, &e) in row.iter().enumerate() {
            let e = if s == 0 { (0, false) } else { e };
            trans.push(if k == n { entry((0, e.1)) } else { entry(e) });
        }
    }
    let (block_of, blocks) = classes.table();
    let lookbehind = lookbehind && starts.iter().any(|&s| s != starts[n]);
    let nullable = starts
        .iter()
        .any(|&s| edges[s as usize].iter().any(|&(_, m)| m));

    // Cuts (see `Tables::keeps_cuts`): x a class with a non-space member,
    // ' ' the space's class.
    let non_space = classes.not_white_space();
    let space = classes.of_cp(' ' as u32);
    let mut reachable = vec![false; edges.len()];
    let mut todo: Vec<u32> = starts.clone();
    while let Some(s) = todo.pop() {
        if std::mem::replace(&mut reachable[s as usize], true) {
            continue;
        }
        todo.extend(edges[s as usize][..n].iter().map(|&(t, _)| t));
    }
    let after_non_space: Vec<u32> = (0..edges.len())
        .filter(|&s| reachable[s] && s != 0)
        .flat_map(|s| (0..n).filter(|&k| non_space[k]).map(move |k| (s, k)))
        .map(|(s, k)| edges[s][k].0)
        .filter(|&t| t != 0)
        .collect();
    let keeps_cuts = !nullable
        && (0..n).all(|k| !non_space[k] || starts[k] == starts[n])
        && after_non_space.iter().all(|&q| {
            let (target, matched) = edges[q as usize][space];
            target == 0 && matched == edges[q as usize][n].1
        });
    let bounds_cuts = keeps_cuts
        && (0..n).filter(|&k| non_space[k]).all(|k| {
            let (after, _) = edges[starts[k] as usize][space];
            after != 0 && edges[after as usize].iter().all(|&(_, m)| m)
        });
    let first_bytes = match lookbehind || nullable {
        true => Vec::new(),
        false => first_bytes(&edges[starts[n] as usize], &block_of, &blocks),
    };
    Tables {
        n_classes: n as u32,
        trans,
        starts: starts.iter().map(|&s| s * width).collect(),
        block_of,
        blocks,
        first_bytes,
        lookbehind,
        nullable,
        keeps_cuts,
        bounds_cuts,
        states: edges.len(),
    }
}
