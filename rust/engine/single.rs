//! One text, ids only, on the caller's thread: `tok.encode(text)` without a
//! batch. The same stages as a one-row [`Engine::encode_batch`] without
//! truncation or padding (the template's special tokens around the fast
//! path's ids, or the full per-document `Encoding` where the post-processor
//! is not a fixed template), so its ids are that row's ids; only the pool,
//! the packing into buffers and the batch object are left out.

use super::{Engine, Settings};
use crate::error::Result;

impl Engine {
    /// The ids of `text` alone, as `encode_batch(&[(text, None)])` gives them
    /// with `add_special_tokens` and no truncation or padding.
    pub fn encode_ids(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>> {
        let settings = Settings {
            add_special_tokens,
            ..Settings::default()
        };
        let input = [(text, None)];
        self.check_settings(&input, &settings)?;
        let Some(template) = self.packable_template(&input, &settings) else {
            return Ok(self.encode_one(input[0], &settings)?.get_ids().to_vec());
        };
        let ids = self.sequence_ids(text, &settings)?;
        let (n_prefix, n_suffix) = (template.n_prefix as usize, template.n_suffix as usize);
        if n_prefix + n_suffix == 0 {
            return Ok(ids);
        }
        let mut row = Vec::with_capacity(n_prefix + ids.len() + n_suffix);
        row.extend_from_slice(&template.ids[..n_prefix]);
        row.extend_from_slice(&ids);
        row.extend_from_slice(&template.ids[n_prefix..n_prefix + n_suffix]);
        Ok(row)
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::{Engine, Settings};

    /// A WordLevel tokenizer whose post-processor is `post` (JSON).
    fn word_level(post: &str) -> Engine {
        Engine::from_json(&format!(
            r#"{{
              "version": "1.0", "truncation": null, "padding": null,
              "added_tokens": [{{"id": 0, "content": "[CLS]", "single_word": false, "lstrip": false,
                                "rstrip": false, "normalized": false, "special": true}}],
              "normalizer": null, "pre_tokenizer": {{"type": "Whitespace"}},
              "post_processor": {post}, "decoder": null,
              "model": {{"type": "WordLevel", "vocab": {{"[CLS]": 0, "a": 1, "b": 2, "c": 3, "[UNK]": 4}},
                        "unk_token": "[UNK]"}}
            }}"#
        ))
        .unwrap()
    }

    /// The row `encode_batch` packs for `text` (input_ids only).
    fn batch_row(engine: &Engine, text: &str, add_special_tokens: bool) -> Vec<u32> {
        let settings = Settings {
            add_special_tokens,
            ..Settings::default()
        };
        let batch = engine.encode_batch(&[(text, None)], &settings).unwrap();
        batch.ids.iter().map(|&id| id as u32).collect()
    }

    #[test]
    fn one_text_gives_the_batch_row() {
        let template = r#"{"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[CLS]", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]}}}"#;
        // Nine ids around the sequence: more than a `GtTemplate` holds, so the
        // row goes through the per-document `Encoding` (`encode_one`).
        let long = template.replace(
            r#""ids": [0], "tokens": ["[CLS]"]"#,
            &format!(
                r#""ids": [{}], "tokens": [{}]"#,
                ["0"; 9].join(","),
                [r#""[CLS]""#; 9].join(",")
            ),
        );
        assert!(word_level(&long).cached_single_template(true).is_none());
        for post in [template, "null", &long] {
            let engine = word_level(post);
            for text in ["", "a b c", "c x  a", "[CLS] b"] {
                for special in [false, true] {
                    let got = engine.encode_ids(text, special).unwrap();
                    assert_eq!(
                        got,
                        batch_row(&engine, text, special),
                        "{post} {text:?} {special}"
                    );
                }
            }
        }
        let engine = word_level(template);
        assert_eq!(engine.encode_ids("a b", true).unwrap(), [0, 1, 2, 0]);
        assert_eq!(engine.encode_ids("a b", false).unwrap(), [1, 2]);
    }
}
