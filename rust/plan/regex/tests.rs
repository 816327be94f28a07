//! The compiled scanner against Oniguruma (the crate's `SysRegex`, with
//! onig's `find_iter`): real tokenizers' patterns on every code point, on
//! pairs of characters of every class, on the corpus, on random text; random
//! patterns from a small grammar; and the Split behaviours and the crate's
//! other splitting pre-tokenizers against the crate itself.

use super::*;
use crate::kernels::{self, GtChainStep};
use crate::plan::bytelevel::SCANNERS;
use tokenizers::utils::SysRegex;

/// Public pre-tokenizer patterns (tokenizer.json's text; the hand-written
/// scanners' patterns are added from `SCANNERS`).
const PATTERNS: [(&str, &str); 13] = [
    // tiktoken's p50k_base / r50k_base (GPT-2's ByteLevel pattern)
    (
        "p50k",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    ),
    // Mistral's Tekken (tekken.json, Mistral-Nemo's tokenizer.json)
    (
        "tekken",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    // tiktoken's own cl100k_base, with possessive quantifiers
    (
        "cl100k-tiktoken",
        r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s",
    ),
    // Megatron-LM's PATTERN_TIKTOKEN (its tiktoken tokenizer's first pattern)
    (
        "megatron-tiktoken",
        r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    ),
    // BLOOM
    ("bloom", r" ?[^(\s|[.,!?…。，、।۔،])]+"),
    // Falcon's digit triples
    ("falcon", r"[0-9][0-9][0-9]"),
    // DeepSeek LLM / Coder's steps
    ("deepseek-llm-newlines", r"[\r\n]"),
    ("deepseek-llm-punct", r"\s?[!-/:-~！-／：-～‘-‟　-。]+"),
    ("deepseek-llm-trailing", r"\s+$"),
    ("deepseek-llm-cjk", r"[一-龥ࠀ-一가-퟿]+"),
    // Llama-3 spelled without (?i) (llama.cpp's smaug / dbrx)
    (
        "smaug",
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    // Kimi K2: class intersections and \p{Han}
    (
        "kimi-k2",
        r"[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    // Chameleon (llama.cpp's list): literals, counted groups, lazy-free alternations
    (
        "chameleon",
        r"<sentinel:[0-9]+>|(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z|([\t\n]|    |  )|\p{N}|[\p{P}!-/:-@\[-`{-~]|'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    ),
];

/// DeepSeek LLM's letter step: ranges of Latin, Greek, Cyrillic... letters.
const DEEPSEEK_LLM_LETTERS: &str = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\u{1F7D}ᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-\u{1FD3}ῖ-\u{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+";

/// Every real pattern: (name, text).
fn real_patterns() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = SCANNERS
        .iter()
        .map(|(p, id)| (format!("scanner {id}"), p.to_string()))
        .collect();
    out.extend(PATTERNS.iter().map(|(n, p)| (n.to_string(), p.to_string())));
    out.push(("deepseek-llm-letters".into(), DEEPSEEK_LLM_LETTERS.into()));
    out
}

/// A compiled pattern as one kernel step (Isolated), with the loop over
/// ASCII words `ascii` (`GtChainStep.ascii`; 0: none).
fn step_of(regex: &CompiledRegex, ascii: u32) -> GtChainStep {
    GtChainStep {
        pattern: kernels::PAT_REGEX,
        ascii,
        regex: regex.view(),
        ..Default::default()
    }
}

/// The matches the compiled tables find in `text`, with onig's `find_iter` rule.
fn compiled_matches(regex: &CompiledRegex, text: &str) -> Vec<(usize, usize)> {
    step_matches(&step_of(regex, 0), text)
}

fn step_matches(step: &GtChainStep, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    kernels::step_ranges(step, text, &mut |a, b, m| {
        if m {
            out.push((a, b))
        }
    });
    out
}

fn oniguruma_matches(regex: &SysRegex, text: &str) -> Vec<(usize, usize)> {
    if text.is_empty() {
        return Vec::new(); // the crate's find_matches never searches an empty piece
    }
    regex.find_iter(text).collect()
}

/// Compares the two on every text; panics on the first difference. A
/// pattern with a loop over ASCII words (cl100k's, Qwen's) is run with it
/// and without it.
fn assert_same(name: &str, pattern: &str, regex: &CompiledRegex, texts: &[String]) {
    let oniguruma = SysRegex::new(pattern).unwrap();
    let ascii = crate::plan::bytelevel::ascii_words(pattern);
    let mut steps = vec![step_of(regex, 0)];
    if ascii != 0 {
        steps.push(step_of(regex, ascii));
    }
    for text in texts {
        let expected = oniguruma_matches(&oniguruma, text);
        for step in &steps {
            let got = step_matches(step, text);
            if got == expected {
                continue;
            }
            let name = format!("{name} (ASCII loop {})", step.ascii);
            let at = got
                .iter()
                .zip(&expected)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(expected.len()));
            panic!(
                "{name} ({pattern}) on {text:?}: compiled {:?} != oniguruma {:?}",
                &got[at..(at + 3).min(got.len())],
                &expected[at..(at + 3).min(expected.len())]
            );
        }
    }
}

/// A small seeded generator (xorshift64*): tests stay reproducible and bounded.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Up to three members of each class of the compiled pattern (first, middle,
/// last), read back from its class table.
fn representatives(regex: &CompiledRegex) -> Vec<char> {
    let (_, _, block_of, blocks) = regex.arrays();
    let mut members: Vec<Vec<char>> = vec![Vec::new(); regex.size().1 as usize];
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        let cp = c as usize;
        let class = blocks[block_of[cp >> 7] as usize * 128 + (cp & 127)] as usize;
        members[class].push(c);
    }
    let mut out = Vec::new();
    for m in members.iter().filter(|m| !m.is_empty()) {
        out.extend([m[0], m[m.len() / 2], m[m.len() - 1]]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Characters every pattern family treats specially.
const TRICKY: &str = " \t\n\r\u{a0}\u{3000}\u{85}\u{2028}'sStTrReEvVmMlLdDſK\u{212a}ß\u{fb06}0٣Ⅻaé東あア\u{301}!./-_😀\u{feff}";

#[test]
fn real_patterns_compile() {
    for (name, pattern) in real_patterns() {
        let regex = CompiledRegex::compile(&pattern).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (states, classes, bytes) = regex.size();
        assert!(
            states < 200 && bytes < 100_000,
            "{name}: {states} states, {classes} classes, {bytes} bytes"
        );
    }
}

#[test]
fn real_patterns_match_oniguruma_on_the_corpus_and_edge_cases() {
    let texts = crate::test_texts::sample_texts(17);
    for (name, pattern) in real_patterns() {
        assert_same(
            &name,
            &pattern,
            &CompiledRegex::compile(&pattern).unwrap(),
            &texts,
        );
    }
}

/// Every code point, alone as a subject and in a line of its own kind.
#[test]
fn real_patterns_match_oniguruma_on_every_code_point() {
    let chars: Vec<char> = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
    // Each code point after a space and doubled, before a letter, a digit
    // and a newline: one long subject per 4096 code points.
    let lines: Vec<String> = chars
        .chunks(4096)
        .map(|chunk| {
            chunk
                .iter()
                .map(|&c| format!(" {c}{c}a{c}1{c}\n"))
                .collect()
        })
        .collect();
    let mut rng = Rng(7);
    let alone: Vec<String> = (0..20_000).map(|_| rng.pick(&chars).to_string()).collect();
    for (name, pattern) in real_patterns() {
        let regex = CompiledRegex::compile(&pattern).unwrap();
        assert_same(&name, &pattern, &regex, &lines);
        assert_same(&name, &pattern, &regex, &alone);
    }
}

/// Every pair (and triple a b a) of the pattern's class representatives and
/// the characters patterns treat specially, each its own subject.
#[test]
fn real_patterns_match_oniguruma_on_pairs_of_every_class() {
    for (name, pattern) in real_patterns() {
        let regex = CompiledRegex::compile(&pattern).unwrap();
        let mut reps = representatives(&regex);
        reps.extend(TRICKY.chars());
        reps.sort_unstable();
        reps.dedup();
        let mut texts = Vec::with_capacity(2 * reps.len() * reps.len());
        for &a in &reps {
            texts.push(a.to_string());
            for &b in &reps {
                texts.push(format!("{a}{b}"));
                texts.push(format!("{a}{b}{a}"));
            }
        }
        assert_same(&name, &pattern, &regex, &texts);
    }
}

/// Random text over the characters that matter (and the patterns' own classes).
fn random_texts(rng: &mut Rng, alphabet: &[char], count: usize, max_len: usize) -> Vec<String> {
    (0..count)
        .map(|_| {
            let len = rng.below(max_len + 1);
            (0..len).map(|_| *rng.pick(alphabet)).collect()
        })
        .collect()
}

#[test]
fn real_patterns_match_oniguruma_on_random_text() {
    let mut rng = Rng(0x5eed);
    for (name, pattern) in real_patterns() {
        let regex = CompiledRegex::compile(&pattern).unwrap();
        let mut alphabet = representatives(&regex);
        alphabet.extend(TRICKY.chars());
        // Weight the common classes: spaces, letters, digits, punctuation.
        alphabet.extend("    \n\n  aaeeT1'.".chars());
        let texts = random_texts(&mut rng, &alphabet, 3000, 24);
        assert_same(&name, &pattern, &regex, &texts);
    }
}

/// Every real pattern against Oniguruma on the texts `make` draws (one
/// generator through all patterns) from the pattern's class representatives
/// and the characters patterns treat specially.
fn each_real_pattern_on(mut rng: Rng, make: impl Fn(&mut Rng, &[char]) -> Vec<String>) {
    for (name, pattern) in real_patterns() {
        let regex = CompiledRegex::compile(&pattern).unwrap();
        let mut alphabet = representatives(&regex);
        alphabet.extend(TRICKY.chars());
        let texts = make(&mut rng, &alphabet);
        assert_same(&name, &pattern, &regex, &texts);
    }
}

/// Random text made of runs (1 to 20 characters drawn from one small group:
/// letters, spaces, digits, punctuation, mixed ASCII, or one character of
/// `alphabet`): a state's loop (`\p{L}+`, `\s+(?!\S)`) meets runs of every
/// length up to 20, longer than the 8 or 16 bytes a block-at-a-time reading of
/// the loop would take, ending at every offset of such a block.
fn runs_texts(rng: &mut Rng, alphabet: &[char], count: usize) -> Vec<String> {
    const GROUPS: [&str; 6] = [
        "abcXYZse",
        "    ",
        " \t\n",
        "0123456789",
        ".!-_/(",
        "ab 1.\n'sT",
    ];
    (0..count)
        .map(|_| {
            let mut text = String::new();
            for _ in 0..1 + rng.below(5) {
                let len = 1 + rng.below(20);
                match rng.below(GROUPS.len() + 1) {
                    g if g < GROUPS.len() => {
                        let group: Vec<char> = GROUPS[g].chars().collect();
                        text.extend((0..len).map(|_| *rng.pick(&group)));
                    }
                    _ => text.extend(std::iter::repeat_n(*rng.pick(alphabet), len)),
                }
            }
            text
        })
        .collect()
}

#[test]
fn real_patterns_match_oniguruma_on_runs() {
    each_real_pattern_on(Rng(0x2b1f), |rng, alphabet| runs_texts(rng, alphabet, 2000));
}

/// Long subjects of short ASCII pieces (hundreds of words), now and then a
/// character of the pattern's own classes or a tricky one: the ASCII run
/// scan (`gt_rx_scan_ascii`) goes on across hundreds of word ends of every
/// kind, stops before non-ASCII, backtracks (space runs before a word, `'s`
/// after one) and meets the end of the subject at every offset.
fn long_word_texts(rng: &mut Rng, alphabet: &[char], count: usize) -> Vec<String> {
    const PIECES: [&str; 24] = [
        "the", " cat", "a", " ", "  ", "   ", "\n", "\n\n", " \n", "'s", "'T", "'ll", "1", "42",
        "1234567", ".", " (", "?!", "--", "\t", " x", "Hello", "\r\n", "_",
    ];
    (0..count)
        .map(|_| {
            let mut text = String::new();
            for _ in 0..rng.below(400) {
                if rng.below(40) == 0 {
                    text.push(*rng.pick(alphabet));
                } else {
                    text.push_str(rng.pick::<&str>(&PIECES));
                }
            }
            text
        })
        .collect()
}

#[test]
fn real_patterns_match_oniguruma_on_long_word_runs() {
    each_real_pattern_on(Rng(0x64_0064), |rng, alphabet| {
        long_word_texts(rng, alphabet, 300)
    });
}

/// Long subjects of words beyond ASCII, next to ASCII ones: two-byte
/// letters of each case (Latin, Greek, Cyrillic, Hebrew, Arabic), letters of
/// the classes o200k's case runs share (Lt, Lm, Lo, marks), punctuation of two
/// and three bytes (« ’ — …), white space and digits that are not ASCII, and
/// letters of three and four bytes: the word loop reads the first kinds
/// itself and stops before the others (`gt_word_kind`, `gt_letter_run`),
/// at every place in a word and after every kind of lead.
fn wide_word_texts(rng: &mut Rng, alphabet: &[char], count: usize) -> Vec<String> {
    const PIECES: [&str; 40] = [
        "café",
        " été",
        "É",
        "ÉCOLE",
        " Ärger",
        "naïve",
        "ß",
        "Ωμέγα",
        " Москва",
        "ПРИВЕТ",
        "שלום",
        " مرحبا",
        "ǅ",
        "ʰ",
        "e\u{301}",
        " \u{301}",
        "ſ",
        "'ſ",
        "'é",
        "«",
        "»",
        " «mot»",
        "’",
        "l’été",
        "—",
        "…",
        "\u{a0}",
        " \u{a0}",
        "\u{85}",
        "٣",
        "²",
        "東京",
        " あ",
        "𝔸",
        "×",
        "÷",
        "the",
        " ",
        "  ",
        "\n",
    ];
    const ASCII: [&str; 12] = [
        " cat", "a", "'s", "'T", "1", "42", ".", " (", "\t", "Hello", "\r\n", "_",
    ];
    (0..count)
        .map(|_| {
            let mut text = String::new();
            for _ in 0..rng.below(200) {
                match rng.below(20) {
                    0 => text.push(*rng.pick(alphabet)),
                    1..=8 => text.push_str(rng.pick::<&str>(&ASCII)),
                    _ => text.push_str(rng.pick::<&str>(&PIECES)),
                }
            }
            text
        })
        .collect()
}

#[test]
fn real_patterns_match_oniguruma_on_words_beyond_ascii() {
    each_real_pattern_on(Rng(0x77_1de), |rng, alphabet| {
        wide_word_texts(rng, alphabet, 600)
    });
}

/// A random pattern from a small grammar of what tokenizer patterns use:
/// alternations of sequences of classes, literals, groups, quantifiers
/// (greedy, lazy, possessive, counted), (?i) groups, lookarounds, anchors.
fn random_pattern(rng: &mut Rng, depth: usize) -> String {
    const ATOMS: [&str; 24] = [
        r"\p{L}",
        r"\p{N}",
        r"\s",
        r"\S",
        r"[^\s\p{L}\p{N}]",
        r"[\r\n]",
        r"\p{Lu}",
        r"\p{Ll}",
        "a",
        "s",
        "t",
        " ",
        "'",
        r"\.",
        "1",
        "[a-c]",
        "[^a]",
        ".",
        r"\d",
        r"\w",
        r"[\p{L}\p{M}]",
        "é",
        "東",
        r"\p{P}",
    ];
    // ("(?i:ss)", which "ß" matches, is refused: `refusals_say_why`.)
    const FOLDED: [&str; 7] = [
        "(?i:s)",
        "(?i:'s|'t)",
        "(?i:ll|re)",
        "(?i:[sdmt])",
        "(?i:k)",
        "(?i:'d)",
        "(?i:f)",
    ];
    const LOOKS: [&str; 8] = [
        r"(?!\S)",
        r"(?=\s)",
        r"(?!\p{L})",
        "$",
        "^",
        r"\b",
        r"\z",
        r"(?<=\s)",
    ];
    const QUANTS: [&str; 11] = ["", "", "", "?", "*", "+", "{1,3}", "{2}", "??", "*?", "+?"];
    // Possessive forms, over one class only (over more, they are refused).
    const POSSESSIVE: [&str; 3] = ["?+", "++", "*+"];
    let alternatives = 1 + rng.below(if depth == 0 { 4 } else { 2 });
    let mut out = Vec::new();
    for _ in 0..alternatives {
        let mut seq = String::new();
        for _ in 0..1 + rng.below(3) {
            let roll = rng.below(20);
            let atom = if roll < 13 || depth >= 2 {
                let atom = rng.pick(&ATOMS).to_string();
                if rng.below(5) == 0 {
                    seq.push_str(&atom);
                    seq.push_str(rng.pick::<&str>(&POSSESSIVE));
                    continue;
                }
                atom
            } else if roll < 15 {
                rng.pick(&FOLDED).to_string()
            } else if roll < 17 {
                seq.push_str(rng.pick::<&str>(&LOOKS));
                continue;
            } else {
                format!("(?:{})", random_pattern(rng, depth + 1))
            };
            seq.push_str(&atom);
            seq.push_str(rng.pick::<&str>(&QUANTS));
        }
        out.push(seq);
    }
    out.join("|")
}

#[test]
fn random_patterns_match_oniguruma() {
    let mut rng = Rng(0xabcdef);
    let alphabet: Vec<char> = "aasteé東 \n\r'.1٣KſßſT\u{fb06}\u{fb00}ff!_ \u{3000}"
        .chars()
        .collect();
    let (mut compiled, mut tried) = (0, 0);
    for _ in 0..400 {
        let pattern = random_pattern(&mut rng, 0);
        if SysRegex::new(&pattern).is_err() {
            continue; // not a pattern Oniguruma takes (a tokenizer could not hold it)
        }
        tried += 1;
        let regex = match CompiledRegex::compile(&pattern) {
            Ok(regex) => regex,
            Err(why) => {
                eprintln!("refused {pattern}: {why}");
                continue;
            }
        };
        compiled += 1;
        let texts = random_texts(&mut rng, &alphabet, 150, 12);
        assert_same("random", &pattern, &regex, &texts);
    }
    // Most random patterns are in the compiled subset (the rest say why).
    assert!(compiled * 10 >= tried * 8, "{compiled} of {tried} compiled");
}

#[test]
fn refusals_say_why() {
    for (pattern, why) in [
        (r"(a)\1", "escape"),
        (r"(?>ab)", "atomic"),
        (r"a(?=bc)", "lookaround longer"),
        (r"a\Z", "escape"),
        (r"(?i:é)", "non-ASCII"),
        (r"(?i:ss)", "folds"),
        (r"(?i:[^a])", "(?i)"),
        (r"(?x) a", "option"),
        (r"(?:a|)*", "nothing"),
        (r"(?:ab)*+", "possessive"),
    ] {
        let err = CompiledRegex::compile(pattern).unwrap_err();
        assert!(err.contains(why), "{pattern}: {err}");
    }
}

/// What a case-insensitive literal folds to is Oniguruma's: 'k' takes the
/// Kelvin sign, 's' the long s.
#[test]
fn case_folds_are_oniguruma_s() {
    let regex = CompiledRegex::compile("(?i:k)|(?i:s)").unwrap();
    let texts: Vec<String> = ["k", "K", "\u{212a}", "s", "S", "\u{17f}", "x"]
        .map(String::from)
        .to_vec();
    assert_same("folds", "(?i:k)|(?i:s)", &regex, &texts);
    assert_eq!(
        compiled_matches(&regex, "\u{212a}\u{17f}"),
        [(0, 3), (3, 5)]
    );
}

/// The lookahead idiom, spelled out: a run of white space, less its last
/// character when a non-space follows.
#[test]
fn white_space_runs_give_back_their_last_character() {
    let pattern = r"\s+(?!\S)|\s+";
    let regex = CompiledRegex::compile(pattern).unwrap();
    assert_eq!(compiled_matches(&regex, "   a"), [(0, 2), (2, 3)]);
    assert_eq!(compiled_matches(&regex, " a"), [(0, 1)]);
    assert_eq!(compiled_matches(&regex, "a   "), [(1, 4)]);
    assert_eq!(compiled_matches(&regex, "\n\n b"), [(0, 2), (2, 3)]);
}

/// Empty matches follow onig's find_iter: never right where the last match ended.
#[test]
fn empty_matches_are_oniguruma_s() {
    for pattern in ["a*", "", "x?", r"\b", "$", "(?=a)|b"] {
        let regex = CompiledRegex::compile(pattern).unwrap();
        let texts: Vec<String> = ["", "a", "aab", "ba", "xx a", "a\nb"]
            .map(String::from)
            .to_vec();
        assert_same("empty", pattern, &regex, &texts);
    }
}

/// The crate's pre-tokenizer `step`'s words (byte offsets) of `text`.
fn crate_words(step: &tokenizers::PreTokenizerWrapper, text: &str) -> Vec<(usize, usize)> {
    use tokenizers::{OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};
    let mut pieces = PreTokenizedString::from(text);
    step.pre_tokenize(&mut pieces).unwrap();
    pieces
        .get_splits(OffsetReferential::Original, OffsetType::Byte)
        .iter()
        .map(|(_, offsets, _)| *offsets)
        .collect()
}

/// Split steps of every behaviour, inverted or not, on every engine; and the
/// crate's splitting pre-tokenizers: the kernels' words are the crate's.
#[test]
fn behaviours_and_splitting_pre_tokenizers_match_the_crate() {
    use crate::plan::bytelevel::{plan_steps, SplitEngine};
    let mut texts = crate::test_texts::sample_texts(61);
    texts.extend(
        [
            "",
            " ",
            "a",
            "  a  b ",
            "1,234.5 x",
            "a--b",
            "你好，世界！ ok?",
        ]
        .map(String::from),
    );
    let mut specs: Vec<serde_json::Value> = Vec::new();
    let patterns = [SCANNERS[0].0, SCANNERS[1].0, r"\s+", r"\p{N}", "-", r"a*"];
    for pattern in patterns {
        for behavior in [
            "Isolated",
            "Removed",
            "MergedWithPrevious",
            "MergedWithNext",
            "Contiguous",
        ] {
            for invert in [false, true] {
                specs.push(serde_json::json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert}));
            }
        }
    }
    specs.push(serde_json::json!({"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false}));
    specs.push(serde_json::json!({"type": "Split", "pattern": {"String": ", "}, "behavior": "Removed", "invert": true}));
    for behavior in [
        "Isolated",
        "Removed",
        "MergedWithPrevious",
        "MergedWithNext",
        "Contiguous",
    ] {
        specs.push(serde_json::json!({"type": "Punctuation", "behavior": behavior}));
    }
    specs.extend([
        serde_json::json!({"type": "Digits", "individual_digits": true}),
        serde_json::json!({"type": "Digits", "individual_digits": false}),
        serde_json::json!({"type": "WhitespaceSplit"}),
        serde_json::json!({"type": "Whitespace"}),
        serde_json::json!({"type": "CharDelimiterSplit", "delimiter": "-"}),
        serde_json::json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            {"type": "Punctuation", "behavior": "Contiguous"},
            {"type": "Split", "pattern": {"Regex": SCANNERS[0].0}, "behavior": "Isolated", "invert": false},
        ]}),
    ]);
    for spec in &specs {
        let crate_step: tokenizers::PreTokenizerWrapper =
            serde_json::from_value(spec.clone()).unwrap();
        for engine in [
            SplitEngine::Scanner,
            SplitEngine::Compiled,
            SplitEngine::Oniguruma,
        ] {
            let (steps, chain) = plan_steps(spec, engine).unwrap();
            for text in &texts {
                let expected = crate_words(&crate_step, text);
                // The Rust path (any engine), and the kernels' chain (no Oniguruma step).
                let mut got = Vec::new();
                crate::cpu::encode::split_words(&steps, text, &mut |a, b| got.push((a, b)));
                assert_eq!(got, expected, "{spec} ({engine:?}) on {text:?}");
                if let Some(chain) = &chain {
                    let mut got = Vec::new();
                    kernels::chain_words(chain, text, &mut |a, b| got.push((a, b)));
                    assert_eq!(got, expected, "{spec} ({engine:?}, kernels) on {text:?}");
                }
            }
        }
    }
}

/// The bytes a search skips: none a match can start at (the tests above
/// match Oniguruma on every code point with the skip in place), and the
/// skip is off where the start reads the character before or a match can
/// be empty.
#[test]
fn first_bytes_rule_out_only_bytes_no_match_starts_at() {
    let digits = CompiledRegex::compile(r"\p{N}{1,3}").unwrap();
    let first = &digits.tables.first_bytes;
    assert_eq!(first.len(), 256);
    assert_eq!(first[b'7' as usize], 1);
    assert_eq!(first[b'a' as usize], 0);
    assert_eq!(first[b' ' as usize], 0);
    assert_eq!(first[0x80], 0, "a continuation byte starts nothing");
    assert_eq!(
        first["٣".as_bytes()[0] as usize],
        1,
        "Arabic-Indic digits are \\p{{N}}"
    );
    assert!(!digits.view().first_bytes.is_null());
    let cjk = CompiledRegex::compile(r"[一-龥]+").unwrap();
    assert_eq!(cjk.tables.first_bytes["中".as_bytes()[0] as usize], 1);
    assert_eq!(cjk.tables.first_bytes[b'a' as usize], 0);
    assert_eq!(cjk.tables.first_bytes["é".as_bytes()[0] as usize], 0);
    // Where every character may start a match, or a match can be empty or
    // look behind, nothing is skipped.
    assert!(CompiledRegex::compile(r"\s+|\S+")
        .unwrap()
        .view()
        .first_bytes
        .is_null());
    assert!(CompiledRegex::compile(r"a*")
        .unwrap()
        .view()
        .first_bytes
        .is_null());
    assert!(CompiledRegex::compile(r"(?<=a)b")
        .unwrap()
        .view()
        .first_bytes
        .is_null());
}
