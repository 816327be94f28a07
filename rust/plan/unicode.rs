//! The Unicode classes the pre-token scanners need, generated from Oniguruma
//! itself (the crate's regex engine) so that the scanners and the oracle agree
//! on every code point. The table lives in `cuda/gt_unicode_table.cuh`; the test
//! below regenerates it (GPU_TOK_REGENERATE=1) or checks that it is current.

#[cfg(test)]
mod tests {
    use std::fmt::Write;
    use tokenizers::utils::SysRegex;

    /// (bit, onig class): the GT_L, GT_N, ... constants of gt_pretok.cuh.
    const CLASSES: [(u32, &str); 11] = [
        (1 << 0, r"\p{L}"),
        (1 << 1, r"\p{N}"),
        (1 << 2, r"\s"),
        (1 << 3, r"\p{Lu}"),
        (1 << 4, r"\p{Ll}"),
        (1 << 5, r"\p{Lt}"),
        (1 << 6, r"\p{Lm}"),
        (1 << 7, r"\p{Lo}"),
        (1 << 8, r"\p{M}"),
        (1 << 9, r"\p{P}"),
        (1 << 10, r"\p{S}"),
    ];

    /// Class bits of every scalar value, read from Oniguruma.
    fn class_bits() -> Vec<u32> {
        let chars: Vec<char> = (0..0x110000u32).filter_map(char::from_u32).collect();
        let text: String = chars.iter().collect();
        let mut index_of_byte = vec![usize::MAX; text.len()];
        for (i, (at, _)) in text.char_indices().enumerate() {
            index_of_byte[at] = i;
        }
        let mut bits = vec![0u32; 0x110000];
        for (bit, class) in CLASSES {
            let regex = SysRegex::new(class).unwrap();
            for (start, end) in regex.find_iter(&text) {
                for (at, _) in text[start..end].char_indices() {
                    bits[chars[index_of_byte[start + at]] as usize] |= bit;
                }
            }
        }
        bits
    }

    /// Code points that (?i:x) matches, for each contraction letter x.
    fn case_folds() -> Vec<(char, Vec<u32>)> {
        let chars: Vec<char> = (0..0x110000u32).filter_map(char::from_u32).collect();
        "strevmld"
            .chars()
            .map(|letter| {
                let regex = SysRegex::new(&format!("\\A(?i:{letter})\\z")).unwrap();
                let matches = chars
                    .iter()
                    .filter(|c| regex.find_iter(&c.to_string()).next().is_some())
                    .map(|&c| c as u32)
                    .collect();
                (letter, matches)
            })
            .collect()
    }

    fn render(bits: &[u32]) -> String {
        let mut ranges: Vec<(u32, u32, u32)> = Vec::new();
        for (cp, &b) in bits.iter().enumerate().skip(128) {
            let cp = cp as u32;
            match ranges.last_mut() {
                Some((_, end, last)) if *last == b && *end + 1 == cp => *end = cp,
                _ => ranges.push((cp, cp, b)),
            }
        }
        let mut out = String::from(
            "// gt_unicode_table.cuh: GENERATED from Oniguruma by rust/plan/unicode.rs\n\
             // (GPU_TOK_REGENERATE=1 cargo test --release unicode). Do not edit.\n\
             // Class bits of U+0000..U+007F, then ranges (first, last, bits) from U+0080.\n#pragma once\n\n",
        );
        out.push_str("GT_TABLE const gt_u16 gt_ascii_classes[128] = {");
        for (i, b) in bits[..128].iter().enumerate() {
            if i % 16 == 0 {
                out.push_str("\n    ");
            }
            write!(out, "{b},").unwrap();
        }
        write!(out, "\n}};\n\n#define GT_UNICODE_RANGES {}\nGT_TABLE const gt_u32 gt_unicode_ranges[GT_UNICODE_RANGES][3] = {{", ranges.len()).unwrap();
        for (i, (first, last, b)) in ranges.iter().enumerate() {
            if i % 4 == 0 {
                out.push_str("\n   ");
            }
            write!(out, " {{{first:#x},{last:#x},{b}}},").unwrap();
        }
        out.push_str("\n};\n");
        out
    }

    #[test]
    fn unicode_table_matches_oniguruma() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda/gt_unicode_table.cuh");
        let expected = render(&class_bits());
        if std::env::var("GPU_TOK_REGENERATE").as_deref() == Ok("1") {
            std::fs::write(path, &expected).unwrap();
        }
        let current = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            current == expected,
            "cuda/gt_unicode_table.cuh is stale: GPU_TOK_REGENERATE=1 cargo test --release unicode"
        );
    }

    #[test]
    fn contraction_case_folds_are_the_ones_the_scanners_know() {
        // gt_pretok.cuh folds ASCII case, plus U+017F (long s) for 's'.
        for (letter, matches) in case_folds() {
            let mut known = vec![letter as u32, letter.to_ascii_uppercase() as u32];
            if letter == 's' {
                known.push(0x17F);
            }
            known.sort_unstable();
            assert_eq!(matches, known, "(?i:{letter}) folds differ from gt_fold_eq");
        }
    }
}
