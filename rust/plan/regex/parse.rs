//! A parser for the Oniguruma syntax tokenizer.json patterns are written in
//! (`ONIG_SYNTAX_ONIGURUMA`, what the crate's `SysRegex` compiles with),
//! into a tree the DFA compiler can take. It accepts the part of the syntax
//! whose meaning under Oniguruma's backtracking is also a leftmost-first
//! automaton's, and refuses the rest with the reason:
//!
//! - alternation, groups (capturing, named, `(?:`), greedy and lazy
//!   quantifiers (`{n}?` is `(?:x{n})?` and `{n,m}+` is `(?:x{n,m})+` in this
//!   syntax, not lazy or possessive); possessive `?+ *+ ++` of one
//!   character class (`x*+` is `x*(?!x)`: the loop never gives back);
//! - character classes with ranges, nesting, `&&`, POSIX brackets, `\p{..}`,
//!   `\s \w \d \h` and their negations, `.`; each read from Oniguruma itself
//!   (`charset`);
//! - one-character lookarounds (`(?!\S)`, `(?=[ab])`, `(?<=x)`...) and the
//!   anchors made of them (`^ $ \A \z \b \B`);
//! - `(?i)` over ASCII literals and ASCII classes, folded as Oniguruma folds
//!   them (`(?i:k)` matches U+212A KELVIN SIGN); a run of literals that one
//!   character folds to (`(?i:ss)` matching "ß") is refused.
//!
//! Refused: backreferences, atomic groups, longer lookarounds, `\Z \G \K \R
//! \X`, subexpression calls, conditionals, absent operators, callouts, the
//! `x` option, unbounded loops over what can match nothing.

use super::charset::{oniguruma_class, oniguruma_single_chars, table_class, CharSet};

/// A pattern as a tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    /// Matches the empty string.
    Empty,
    /// One code point from the set.
    Set(CharSet),
    /// A case-folded ASCII literal (its set holds the folds): kept apart to
    /// check multi-character folds across neighbouring literals.
    Folded(char, CharSet),
    Concat(Vec<Node>),
    /// Alternatives, the first preferred.
    Alt(Vec<Node>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
        greedy: bool,
    },
    /// A zero-width test of one character: the next one (`ahead`) or the
    /// previous one; passes when that character is in `set`, or, at the
    /// subject's edge (no character there), when `at_edge`.
    Look {
        ahead: bool,
        set: CharSet,
        at_edge: bool,
    },
}

impl Node {
    /// True when the node can match the empty string.
    pub fn nullable(&self) -> bool {
        match self {
            Node::Empty | Node::Look { .. } => true,
            Node::Set(_) | Node::Folded(..) => false,
            Node::Concat(nodes) => nodes.iter().all(Node::nullable),
            Node::Alt(nodes) => nodes.iter().any(Node::nullable),
            Node::Repeat { node, min, .. } => *min == 0 || node.nullable(),
        }
    }

    /// The one-character set this node is, if it is one.
    fn single_set(&self) -> Option<CharSet> {
        match self {
            Node::Set(set) | Node::Folded(_, set) => Some(set.clone()),
            Node::Concat(nodes) if nodes.len() == 1 => nodes[0].single_set(),
            Node::Alt(nodes) if !nodes.is_empty() => {
                let mut union = CharSet::empty();
                for node in nodes {
                    union = union.union(&node.single_set()?);
                }
                Some(union)
            }
            _ => None,
        }
    }
}

/// The most repetitions one counted quantifier may ask for.
const MAX_COUNT: u32 = 1000;

/// Parses `pattern` (already accepted by Oniguruma) or says why the compiler
/// cannot take it.
pub fn parse(pattern: &str) -> Result<Node, String> {
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        at: 0,
    };
    let node = parser.alternation(Flags::default())?;
    if parser.at != parser.chars.len() {
        return Err(format!("unbalanced ')' at {}", parser.at));
    }
    check_folds(&node)?;
    Ok(node)
}

#[derive(Clone, Copy, Default)]
struct Flags {
    /// `(?i)`: ignore case.
    fold: bool,
    /// `(?m)`: `.` matches a newline too (Oniguruma syntax).
    dot_all: bool,
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.at + offset).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn next(&mut self) -> Result<char, String> {
        let c = self.peek().ok_or("the pattern ends too early")?;
        self.at += 1;
        Ok(c)
    }

    /// alternatives up to ')' or the end.
    fn alternation(&mut self, flags: Flags) -> Result<Node, String> {
        let mut alternatives = vec![];
        loop {
            let (concat, ended_by_option) = self.concatenation(flags)?;
            alternatives.push(concat);
            if ended_by_option {
                // `(?i)` took the rest of the group, alternatives included.
                break;
            }
            if !self.eat('|') {
                break;
            }
        }
        Ok(if alternatives.len() == 1 {
            alternatives.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(alternatives)
        })
    }

    /// Items up to '|', ')' or the end; true when an isolated option
    /// (`(?i)`) made the rest of the group part of this concatenation.
    fn concatenation(&mut self, flags: Flags) -> Result<(Node, bool), String> {
        let mut items: Vec<Node> = vec![];
        loop {
            match self.peek() {
                None | Some('|') | Some(')') => break,
                Some('(') if self.peek_at(1) == Some('?') && self.isolated_option_ahead() => {
                    let flags = self.options(flags)?;
                    if !self.eat(')') {
                        return Err("malformed option group".into());
                    }
                    let rest = self.alternation(flags)?;
                    items.push(rest);
                    return Ok((concat(items), true));
                }
                _ => {
                    let atom = self.atom(flags)?;
                    let atom = self.quantifiers(atom)?;
                    items.push(atom);
                }
            }
        }
        Ok((concat(items), false))
    }

    /// True at `(?imx-imx)` (an option group without ':').
    fn isolated_option_ahead(&self) -> bool {
        let mut i = self.at + 2;
        while let Some(&c) = self.chars.get(i) {
            match c {
                'i' | 'm' | 'x' | 'W' | 'D' | 'S' | 'P' | '-' => i += 1,
                ')' => return i > self.at + 2,
                _ => return false,
            }
        }
        false
    }

    /// Reads option letters (after "(?") up to ':' or ')' (not consumed).
    fn options(&mut self, mut flags: Flags) -> Result<Flags, String> {
        self.at += 2;
        let mut on = true;
        while let Some(c) = self.peek() {
            match c {
                ':' | ')' => return Ok(flags),
                '-' => on = false,
                'i' => flags.fold = on,
                'm' => flags.dot_all = on,
                other => return Err(format!("option (?{other}) is not covered")),
            }
            self.at += 1;
        }
        Err("unterminated option group".into())
    }

    fn atom(&mut self, flags: Flags) -> Result<Node, String> {
        let c = self.next()?;
        match c {
            '(' => self.group(flags),
            '[' => {
                let start = self.at - 1;
                let set = self.class()?;
                self.fold_class(set, start, flags)
            }
            '.' => Ok(Node::Set(if flags.dot_all {
                CharSet::all()
            } else {
                CharSet::single('\n' as u32).negate()
            })),
            // The subject's start, or after a newline but not at the end
            // (Oniguruma's ANCR_BEGIN_LINE).
            '^' => Ok(Node::Alt(vec![
                Node::Look {
                    ahead: false,
                    set: CharSet::empty(),
                    at_edge: true,
                },
                Node::Concat(vec![
                    Node::Look {
                        ahead: false,
                        set: CharSet::single('\n' as u32),
                        at_edge: false,
                    },
                    Node::Look {
                        ahead: true,
                        set: CharSet::all(),
                        at_edge: false,
                    },
                ]),
            ])),
            '$' => Ok(Node::Look {
                ahead: true,
                set: CharSet::single('\n' as u32),
                at_edge: true,
            }),
            '\\' => self.escape(flags),
            '*' | '+' | '?' => Err("a quantifier without a target".into()),
            c => self.literal(c, flags),
        }
    }

    /// A literal character, case-folded under (?i).
    fn literal(&self, c: char, flags: Flags) -> Result<Node, String> {
        if !flags.fold {
            return Ok(Node::Set(CharSet::single(c as u32)));
        }
        if !c.is_ascii() {
            return Err(format!(
                "(?i) over the non-ASCII literal {c:?} is not covered"
            ));
        }
        let escaped = if c.is_ascii_alphanumeric() {
            c.to_string()
        } else {
            format!("\\x{{{:x}}}", c as u32)
        };
        Ok(Node::Folded(
            c,
            oniguruma_class(&format!("(?i:{escaped})"))?,
        ))
    }

    /// A class that (?i) applies to: its folds, read from Oniguruma by the
    /// class's own text; only ASCII, non-negated classes are taken.
    fn fold_class(&self, set: CharSet, start: usize, flags: Flags) -> Result<Node, String> {
        if !flags.fold {
            return Ok(Node::Set(set));
        }
        let text: String = self.chars[start..self.at].iter().collect();
        if !set.is_ascii() || text.starts_with("[^") {
            return Err(format!("(?i) over the class {text} is not covered"));
        }
        Ok(Node::Set(oniguruma_class(&format!("(?i:{text})"))?))
    }

    fn group(&mut self, flags: Flags) -> Result<Node, String> {
        if !self.eat('?') {
            return self.group_body(flags);
        }
        match self.peek() {
            Some(':') => {
                self.at += 1;
                self.group_body(flags)
            }
            Some('=') | Some('!') => {
                let negate = self.next()? == '!';
                let body = self.group_body(flags)?;
                look(body, true, negate)
            }
            Some('<') if matches!(self.peek_at(1), Some('=') | Some('!')) => {
                self.at += 1;
                let negate = self.next()? == '!';
                let body = self.group_body(flags)?;
                look(body, false, negate)
            }
            Some('<') | Some('\'') => {
                let close = if self.next()? == '<' { '>' } else { '\'' };
                while self.next()? != close {}
                self.group_body(flags)
            }
            Some('#') => {
                while self.next()? != ')' {}
                Ok(Node::Empty)
            }
            Some(c) if "imxWDSP-".contains(c) => {
                self.at -= 2;
                let inner = self.options(flags)?;
                if !self.eat(':') {
                    return Err("malformed option group".into());
                }
                self.group_body(inner)
            }
            Some('>') => Err("atomic groups (?>...) are not covered".into()),
            Some(c) => Err(format!("group (?{c}...) is not covered")),
            None => Err("unterminated group".into()),
        }
    }

    /// The alternatives of a group, and its ')'.
    fn group_body(&mut self, flags: Flags) -> Result<Node, String> {
        let node = self.alternation(flags)?;
        if !self.eat(')') {
            return Err("unterminated group".into());
        }
        Ok(node)
    }

    /// Quantifiers after an atom, in Oniguruma's reading.
    fn quantifiers(&mut self, mut node: Node) -> Result<Node, String> {
        loop {
            let (min, max, counted) = match self.peek() {
                Some('*') => (0, None, false),
                Some('+') => (1, None, false),
                Some('?') => (0, Some(1), false),
                Some('{') => match self.interval() {
                    Some((min, max, len)) => {
                        self.at += len - 1;
                        (min, max, true)
                    }
                    None => return Ok(node), // a literal '{', read as the next atom
                },
                _ => return Ok(node),
            };
            self.at += 1;
            if let Node::Look { .. } = node {
                return Err("a quantified lookaround".into());
            }
            let fixed = counted && max == Some(min);
            let mut greedy = true;
            if !fixed && self.peek() == Some('?') {
                // Lazy (`{n}?` is a repetition then '?': read by the next turn).
                self.at += 1;
                greedy = false;
            } else if !counted && self.peek() == Some('+') {
                // Possessive (`{n,m}+` is a repetition then '+').
                self.at += 1;
                node = possessive(node, min, max)?;
                continue;
            }
            if max.is_some_and(|m| m > MAX_COUNT) || min > MAX_COUNT {
                return Err(format!("a repetition count over {MAX_COUNT}"));
            }
            if max.is_none() && node.nullable() {
                return Err("an unbounded loop over what can match nothing".into());
            }
            node = Node::Repeat {
                node: Box::new(node),
                min,
                max,
                greedy,
            };
        }
    }

    /// `{n}`, `{n,}`, `{n,m}`, `{,m}` at the cursor: (min, max, length), or
    /// None when the brace is a literal.
    fn interval(&self) -> Option<(u32, Option<u32>, usize)> {
        let rest: String = self.chars[self.at..].iter().take(24).collect();
        let close = rest.find('}')?;
        let body = &rest[1..close];
        let number = |s: &str| -> Option<Option<u32>> {
            if s.is_empty() {
                return Some(None);
            }
            s.chars()
                .all(|c| c.is_ascii_digit())
                .then(|| s.parse().ok().map(Some))?
        };
        let (min, max) = match body.split_once(',') {
            None => {
                let n = number(body)??;
                (n, Some(n))
            }
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a.is_none() && b.is_none() {
                    return None;
                }
                (a.unwrap_or(0), b)
            }
        };
        if max.is_some_and(|m| m < min) {
            return None; // `{n,m}` with n > m is a possessive form we do not take
        }
        Some((min, max, rest[..=close].chars().count()))
    }

    fn escape(&mut self, flags: Flags) -> Result<Node, String> {
        let c = self.next()?;
        let word = || oniguruma_class(r"\w");
        match c {
            'A' => Ok(Node::Look {
                ahead: false,
                set: CharSet::empty(),
                at_edge: true,
            }),
            'z' => Ok(Node::Look {
                ahead: true,
                set: CharSet::empty(),
                at_edge: true,
            }),
            'b' | 'B' => {
                // (?<=\w)(?!\w) | (?<!\w)(?=\w), or its complement for \B
                let w = word()?;
                let not_w = w.negate();
                let side = |before: &CharSet, after: &CharSet, before_edge, after_edge| {
                    Node::Concat(vec![
                        Node::Look {
                            ahead: false,
                            set: before.clone(),
                            at_edge: before_edge,
                        },
                        Node::Look {
                            ahead: true,
                            set: after.clone(),
                            at_edge: after_edge,
                        },
                    ])
                };
                Ok(if c == 'b' {
                    Node::Alt(vec![
                        side(&w, &not_w, false, true),
                        side(&not_w, &w, true, false),
                    ])
                } else {
                    Node::Alt(vec![
                        side(&w, &w, false, false),
                        side(&not_w, &not_w, true, true),
                    ])
                })
            }
            _ => match self.class_escape(c, false)? {
                None => self.literal(c, flags),
                Some(set) if is_char_escape(c) => {
                    // One character: a literal (folded under (?i)).
                    let cp = set.ranges().first().map_or(0, |r| r.0);
                    self.literal(char::from_u32(cp).ok_or("not a scalar value")?, flags)
                }
                Some(_) if flags.fold => Err(format!("(?i) over \\{c} is not covered")),
                Some(set) => Ok(Node::Set(set)),
            },
        }
    }

    /// The set an escape stands for (`\s`, `\p{L}`, `\x{41}`, `\n`...), None
    /// for an escaped punctuation character (itself), or why not covered.
    fn class_escape(&mut self, c: char, in_class: bool) -> Result<Option<CharSet>, String> {
        let single = |cp: u32| Ok(Some(CharSet::single(cp)));
        match c {
            't' => single(0x09),
            'n' => single(0x0A),
            'v' => single(0x0B),
            'f' => single(0x0C),
            'r' => single(0x0D),
            'a' => single(0x07),
            'e' => single(0x1B),
            'b' if in_class => single(0x08),
            'x' => {
                let cp = if self.eat('{') {
                    self.hex_until('}')?
                } else {
                    let mut digits = String::new();
                    while digits.len() < 2 && self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
                        digits.push(self.next()?);
                    }
                    let value = u32::from_str_radix(&digits, 16).map_err(|_| "malformed \\x")?;
                    if value >= 0x80 {
                        return Err(
                            "\\xHH over 0x7F is a raw byte in Oniguruma: not covered".into()
                        );
                    }
                    value
                };
                single(cp)
            }
            'u' => {
                let digits: String = (0..4).map(|_| self.next()).collect::<Result<_, _>>()?;
                single(u32::from_str_radix(&digits, 16).map_err(|_| "malformed \\u")?)
            }
            's' | 'S' => negated(table_class("s").ok_or("no \\s")?, c == 'S'),
            'w' | 'W' | 'd' | 'D' | 'h' | 'H' => {
                let lower = c.to_ascii_lowercase();
                negated(
                    oniguruma_class(&format!("\\{lower}"))?,
                    c.is_ascii_uppercase(),
                )
            }
            'p' | 'P' => {
                if !self.eat('{') {
                    return Err("\\p without a braced name".into());
                }
                let mut name = String::new();
                loop {
                    match self.next()? {
                        '}' => break,
                        c => name.push(c),
                    }
                }
                let (negate_name, name) = match name.strip_prefix('^') {
                    Some(rest) => (true, rest.to_string()),
                    None => (false, name),
                };
                let set = match table_class(&name).filter(|_| name != "s") {
                    Some(set) => set,
                    None => oniguruma_class(&format!("\\p{{{name}}}"))?,
                };
                negated(set, negate_name != (c == 'P'))
            }
            c if c.is_ascii_alphanumeric() => Err(format!("escape \\{c} is not covered")),
            _ => Ok(None),
        }
    }

    fn hex_until(&mut self, close: char) -> Result<u32, String> {
        let mut digits = String::new();
        loop {
            match self.next()? {
                c if c == close => break,
                c => digits.push(c),
            }
        }
        let value = u32::from_str_radix(digits.trim(), 16).map_err(|_| "malformed hex escape")?;
        if char::from_u32(value).is_none() {
            return Err(format!("\\x{{{digits}}} is not a scalar value"));
        }
        Ok(value)
    }

    /// A bracket class after its '[': the set it matches.
    fn class(&mut self) -> Result<CharSet, String> {
        let negate = self.eat('^');
        if self.peek() == Some(']') {
            return Err("a class opening with ']' is not covered".into());
        }
        let mut result: Option<CharSet> = None;
        let mut current = CharSet::empty();
        let mut first = true;
        loop {
            let c = self.next().map_err(|_| "unterminated class")?;
            match c {
                ']' => break,
                '&' if self.peek() == Some('&') => {
                    self.at += 1;
                    result = Some(match result {
                        None => current,
                        Some(r) => r.intersect(&current),
                    });
                    current = CharSet::empty();
                }
                '[' if self.peek() == Some(':') => {
                    let start = self.at - 1;
                    let close = (self.at..self.chars.len().saturating_sub(1))
                        .find(|&i| self.chars[i] == ':' && self.chars[i + 1] == ']')
                        .ok_or("unterminated POSIX bracket")?;
                    let text: String = self.chars[start..close + 2].iter().collect();
                    self.at = close + 2;
                    current = current.union(&oniguruma_class(&format!("[{text}]"))?);
                }
                '[' => {
                    let inner = self.class()?;
                    current = current.union(&inner);
                }
                _ => {
                    let low = match c {
                        '\\' => {
                            let e = self.next()?;
                            match self.class_escape(e, true)? {
                                None => CharSet::single(e as u32),
                                Some(set) => set,
                            }
                        }
                        c => CharSet::single(c as u32),
                    };
                    let is_char = low.ranges().len() == 1 && low.ranges()[0].0 == low.ranges()[0].1;
                    let range_follows = self.peek() == Some('-')
                        && !matches!(self.peek_at(1), Some(']') | None)
                        && !first_is_dash(c, first);
                    if is_char && range_follows {
                        self.at += 1;
                        let hi = match self.next()? {
                            '\\' => {
                                let e = self.next()?;
                                match self.class_escape(e, true)? {
                                    None => e as u32,
                                    Some(set)
                                        if set.ranges().len() == 1
                                            && set.ranges()[0].0 == set.ranges()[0].1 =>
                                    {
                                        set.ranges()[0].0
                                    }
                                    Some(_) => return Err("a range ending in a class".into()),
                                }
                            }
                            '[' => return Err("a range ending in '['".into()),
                            c => c as u32,
                        };
                        let lo = low.ranges()[0].0;
                        if hi < lo {
                            return Err("an empty range".into());
                        }
                        current = current.union(&CharSet::from_ranges([(lo, hi)]));
                    } else {
                        current = current.union(&low);
                    }
                }
            }
            first = false;
        }
        let set = match result {
            None => current,
            Some(r) => r.intersect(&current),
        };
        Ok(if negate { set.negate() } else { set })
    }
}

/// A '-' first in a class is a literal, never a range's start.
fn first_is_dash(c: char, first: bool) -> bool {
    first && c == '-'
}

/// True for escapes that stand for one character (`\n`, `\x{..}`).
fn is_char_escape(c: char) -> bool {
    matches!(c, 't' | 'n' | 'v' | 'f' | 'r' | 'a' | 'e' | 'x' | 'u')
}

fn negated(set: CharSet, negate: bool) -> Result<Option<CharSet>, String> {
    Ok(Some(if negate { set.negate() } else { set }))
}

fn concat(mut items: Vec<Node>) -> Node {
    match items.len() {
        0 => Node::Empty,
        1 => items.pop().unwrap_or(Node::Empty),
        _ => {
            // Nested concatenations are flattened (so literal runs are seen whole).
            let mut flat = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Node::Concat(inner) => flat.extend(inner),
                    item => flat.push(item),
                }
            }
            Node::Concat(flat)
        }
    }
}

/// A one-character lookaround from its body.
fn look(body: Node, ahead: bool, negate: bool) -> Result<Node, String> {
    let set = body
        .single_set()
        .ok_or("a lookaround longer than one character is not covered")?;
    Ok(if negate {
        // passes where the character is not in the set, and at the edge
        Node::Look {
            ahead,
            set: set.negate(),
            at_edge: true,
        }
    } else {
        Node::Look {
            ahead,
            set,
            at_edge: false,
        }
    })
}

/// `x?+`, `x*+`, `x++` of a one-character class x: the greedy loop, then
/// the next character is not an x (what the loop never gives back).
fn possessive(node: Node, min: u32, max: Option<u32>) -> Result<Node, String> {
    let set = node
        .single_set()
        .ok_or("a possessive quantifier over more than one character class is not covered")?;
    let not_next = Node::Look {
        ahead: true,
        set: set.negate(),
        at_edge: true,
    };
    Ok(match max {
        Some(1) => Node::Alt(vec![Node::Set(set), not_next]),
        _ => Node::Concat(vec![
            Node::Repeat {
                node: Box::new(Node::Set(set)),
                min,
                max,
                greedy: true,
            },
            not_next,
        ]),
    })
}

/// Refuses patterns where one character could match several case-folded
/// literals (`(?i:ss)` matches "ß"): every run of neighbouring folded
/// literals is looked up in Oniguruma. (Oniguruma folds only within a
/// string of literals, never across a quantifier: `(?i:s)+` does not match
/// "ß"; runs across separate groups, which it does not fold either, are
/// refused too, to be safe.)
fn check_folds(node: &Node) -> Result<(), String> {
    let mut pieces: Vec<String> = Vec::new();
    collect_fold_runs(node, &mut pieces);
    if pieces.is_empty() {
        return Ok(());
    }
    let escape = |s: &str| -> String {
        s.chars()
            .map(|c| format!("\\x{{{:x}}}", c as u32))
            .collect()
    };
    let alternatives: Vec<String> = pieces.iter().map(|p| escape(p)).collect();
    let found = oniguruma_single_chars(&format!("(?i:{})", alternatives.join("|")))?;
    match found.first() {
        None => Ok(()),
        Some(cp) => Err(format!(
            "(?i): U+{cp:04X} folds to several of the pattern's literals (not covered)"
        )),
    }
}

/// The 2- and 3-letter strings of folded literals that can stand side by side.
fn collect_fold_runs(node: &Node, out: &mut Vec<String>) {
    match node {
        Node::Concat(items) => {
            let mut run = String::new();
            let flush = |run: &mut String, out: &mut Vec<String>| {
                let chars: Vec<char> = run.chars().collect();
                for len in 2..=3 {
                    for w in chars.windows(len) {
                        out.push(w.iter().collect());
                    }
                }
                run.clear();
            };
            for item in items {
                match item {
                    Node::Folded(c, _) => run.push(*c),
                    other => {
                        flush(&mut run, out);
                        collect_fold_runs(other, out);
                    }
                }
            }
            flush(&mut run, out);
        }
        Node::Alt(items) => items.iter().for_each(|n| collect_fold_runs(n, out)),
        Node::Repeat { node, .. } => collect_fold_runs(node, out),
        _ => {}
    }
}
