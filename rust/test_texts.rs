//! Texts for the Rust tests: hand-picked edge cases, plus the shared corpus
//! (`../shared/corpus`: edge cases and every `step`-th real document) when it
//! is beside the project, as on developers' machines and in CI, or where
//! `GPU_TOK_SHARED` points).

use std::path::Path;

/// Edge cases and real documents; `step` thins the corpus (1: all of it).
pub fn sample_texts(step: usize) -> Vec<String> {
    let mut texts: Vec<String> = [
        "Hello world, it's 2026! Don't   stop\n\n  now ...  ok?",
        "a  b   c\t\td \r\n e\n f 12345 678 9.5 x",
        "日本語のテキスト と 中文 混合 text 汉字 42 ",
        "emoji 😀 🎉 tail , ; :: -- 'S 'LL 'd ſ ſs",
        "  leading and trailing   ",
        "مرحبا بالعالم 123 Привет мир !!! ??? ",
        "x/y/z a/ b /c https://example.com/a?b=c d",
        "IT'S I'M we'Re they've YOU'LL 'd' ''s",
        "\r\n\r\n\t \u{a0}\u{3000}x\u{2028}y\u{85}z",
    ]
    .map(String::from)
    .to_vec();
    let shared = std::env::var_os("GPU_TOK_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    let corpus = shared.join("corpus");
    texts.extend(jsonl_texts(&corpus.join("edge_cases.jsonl"), 1));
    texts.extend(jsonl_texts(&corpus.join("mixed.jsonl"), step));
    texts
}

/// The `text` field of every `step`-th line of a JSON-lines file (none if absent).
fn jsonl_texts(path: &Path, step: usize) -> Vec<String> {
    let Ok(data) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    data.lines()
        .step_by(step.max(1))
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|doc| doc["text"].as_str().map(String::from))
        .collect()
}
