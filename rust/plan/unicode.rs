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

    /// Code points per block of the two-level table.
    const BLOCK: usize = 128;

    /// Code points of one or two bytes of UTF-8, whose classes are also
    /// listed directly (one read: the word loop's letters beyond ASCII).
    const TWO_BYTE: usize = 0x800;

    /// The classes as a two-level table: each block of 128 code points names
    /// one of the distinct blocks, whose entries index a palette of the
    /// distinct class bits (3 reads per lookup instead of a binary search).
    fn render(bits: &[u32]) -> String {
        let mut palette: Vec<u32> = bits.to_vec();
        palette.sort_unstable();
        palette.dedup();
        assert!(palette.len() <= 256, "class bits fit a u8 palette index");
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        let mut block_of = Vec::new();
        for chunk in bits.chunks(BLOCK) {
            let entries: Vec<u8> = chunk
                .iter()
                .map(|b| palette.binary_search(b).unwrap() as u8)
                .collect();
            let at = match blocks.iter().position(|b| *b == entries) {
                Some(at) => at,
                None => {
                    blocks.push(entries);
                    blocks.len() - 1
                }
            };
            block_of.push(at);
        }
        assert!(blocks.len() <= 256, "block numbers fit a u8");
        let mut out = String::from(
            "// gt_unicode_table.cuh: GENERATED from Oniguruma by rust/plan/unicode.rs\n\
             // (GPU_TOK_REGENERATE=1 cargo test --release unicode). Do not edit.\n\
             // Class bits of a code point cp: gt_class_palette[gt_class_blocks[\n\
             // gt_class_block_of[cp / 128]][cp % 128]]; below U+0800 also\n\
             // gt_class_two_byte[cp].\n#pragma once\n\n",
        );
        let list = |out: &mut String, values: &mut dyn Iterator<Item = u32>, per_line: usize| {
            for (i, v) in values.enumerate() {
                if i % per_line == 0 {
                    out.push_str("\n    ");
                }
                write!(out, "{v},").unwrap();
            }
            out.push_str("\n};\n\n");
        };
        write!(
            out,
            "GT_TABLE const gt_u16 gt_class_palette[{}] = {{",
            palette.len()
        )
        .unwrap();
        list(&mut out, &mut palette.iter().copied(), 16);
        write!(
            out,
            "GT_TABLE const gt_u8 gt_class_block_of[{}] = {{",
            block_of.len()
        )
        .unwrap();
        list(&mut out, &mut block_of.iter().map(|&b| b as u32), 32);
        write!(
            out,
            "GT_TABLE const gt_u16 gt_class_two_byte[{TWO_BYTE}] = {{"
        )
        .unwrap();
        list(&mut out, &mut bits[..TWO_BYTE].iter().copied(), 32);
        write!(
            out,
            "GT_TABLE const gt_u8 gt_class_blocks[{}][{BLOCK}] = {{",
            blocks.len()
        )
        .unwrap();
        for block in &blocks {
            out.push_str("\n    {");
            for (i, v) in block.iter().enumerate() {
                if i % 64 == 0 && i > 0 {
                    out.push_str("\n     ");
                }
                write!(out, "{v},").unwrap();
            }
            out.push('}');
            out.push(',');
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

    /// The compiled lookup (`gt_class`) gives Oniguruma's classes for every
    /// code point, and none past the last.
    #[test]
    fn class_lookup_matches_oniguruma() {
        let bits = class_bits();
        for (cp, &expected) in bits.iter().enumerate() {
            assert_eq!(
                crate::kernels::unicode_class(cp as u32),
                expected,
                "U+{cp:04X}"
            );
        }
        for cp in [0x110000, 0x1FFFFF, u32::MAX] {
            assert_eq!(crate::kernels::unicode_class(cp), 0);
        }
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
