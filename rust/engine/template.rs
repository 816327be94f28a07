//! Single sequences without a per-document `Encoding`: the special tokens the
//! post-processor puts around one sequence, read once per call as a
//! [`GtTemplate`], so rows can be packed straight from their ids (on the CPU
//! by `pack::pack_sequences`, on a device by the pipeline's pack kernel).

use super::{encoding_from_ids, fast_encoding, Engine, Input, Settings};
use crate::kernels::{GtTemplate, MAX_TEMPLATE};
use tokenizers::TruncationStrategy;

/// Single sequences, under a truncation that cuts the one sequence (not
/// "only_second"): what both packed paths need of a call.
fn one_sequence_each(inputs: &[Input<'_>], settings: &Settings) -> bool {
    inputs.iter().all(|(_, pair)| pair.is_none())
        && settings
            .truncation
            .as_ref()
            .is_none_or(|t| t.strategy != TruncationStrategy::OnlySecond)
}

impl Engine {
    /// The template for a call whose rows can be packed from ids alone:
    /// single sequences, no offsets, a truncation that cuts the one sequence
    /// (not "only_second"), and a post-processor that is a fixed template.
    pub fn packable_template(
        &self,
        inputs: &[Input<'_>],
        settings: &Settings,
    ) -> Option<GtTemplate> {
        let packable = !settings.outputs.offsets && one_sequence_each(inputs, settings);
        packable.then(|| self.cached_single_template(settings.add_special_tokens))?
    }

    /// The template for a call with offsets whose rows can be packed from
    /// ids and offsets: as `packable_template`, for a post-processor that
    /// reads no token strings, leaves the sequence's offsets as they are and
    /// gives the special tokens it adds (0, 0) (`keeps_offsets`).
    pub fn offsets_template(
        &self,
        inputs: &[Input<'_>],
        settings: &Settings,
    ) -> Option<GtTemplate> {
        let packable = settings.outputs.offsets
            && !self.tokens_for_offsets
            && one_sequence_each(inputs, settings);
        let add_special_tokens = settings.add_special_tokens;
        packable.then(|| {
            *self.offsets_templates[usize::from(add_special_tokens)].get_or_init(|| {
                let template = self.cached_single_template(add_special_tokens)?;
                self.keeps_offsets(&template, add_special_tokens)
                    .then_some(template)
            })
        })?
    }

    /// True when the post-processor, asked with offsets, gives a single
    /// sequence's offsets back as they were, between `template`'s special
    /// tokens at (0, 0) (what the crate's processors do, unless they trim).
    fn keeps_offsets(&self, template: &GtTemplate, add_special_tokens: bool) -> bool {
        const SEQ: [u32; 3] = [u32::MAX - 3, u32::MAX - 2, u32::MAX - 1];
        let offsets = vec![(1, 2), (3, 6), (7, 9)];
        let encoding = fast_encoding(SEQ.to_vec(), Some(offsets.clone()), None, 0);
        let Ok(done) = self.post_process(encoding, None, add_special_tokens) else {
            return false;
        };
        let specials = |n: u32| std::iter::repeat_n((0, 0), n as usize);
        let expected: Vec<(usize, usize)> = specials(template.n_prefix)
            .chain(offsets)
            .chain(specials(template.n_suffix))
            .collect();
        done.get_offsets() == expected.as_slice()
    }

    /// `single_template`, asked of the post-processor once per engine.
    pub fn cached_single_template(&self, add_special_tokens: bool) -> Option<GtTemplate> {
        *self.single_templates[usize::from(add_special_tokens)]
            .get_or_init(|| self.single_template(add_special_tokens))
    }

    /// The special tokens the post-processor puts around a single sequence,
    /// found by asking it (sequences of 1 and 3 sentinel ids), or None when
    /// its output is not "prefix + sequence + suffix" with special tokens
    /// marked as such.
    pub fn single_template(&self, add_special_tokens: bool) -> Option<GtTemplate> {
        // A template the crate cannot apply (it would panic) is not asked.
        if let Some((_, always)) = &self.template_problems[0] {
            if *always || add_special_tokens {
                return None;
            }
        }
        const SEQ: [u32; 3] = [u32::MAX - 3, u32::MAX - 2, u32::MAX - 1];
        let run = |n: usize| {
            self.post_process(
                encoding_from_ids(SEQ[..n].to_vec(), 0),
                None,
                add_special_tokens,
            )
            .ok()
        };
        let (one, three) = (run(1)?, run(3)?);
        let at = one.get_ids().iter().position(|&id| id == SEQ[0])?;
        let (prefix, suffix) = (&one.get_ids()[..at], &one.get_ids()[at + 1..]);
        let expected: Vec<u32> = prefix.iter().chain(&SEQ).chain(suffix).copied().collect();
        if three.get_ids() != expected || prefix.len() + suffix.len() > MAX_TEMPLATE {
            return None;
        }
        let seq_type_id = one.get_type_ids()[at];
        let in_seq = |k: usize| (at..at + SEQ.len()).contains(&k);
        let consistent = (0..three.len()).all(|k| {
            three.get_attention_mask()[k] == 1
                && three.get_special_tokens_mask()[k] == u32::from(!in_seq(k))
                && (!in_seq(k) || three.get_type_ids()[k] == seq_type_id)
        });
        if !consistent || prefix.iter().chain(suffix).any(|id| SEQ.contains(id)) {
            return None;
        }
        let mut template = GtTemplate {
            n_prefix: prefix.len() as u32,
            n_suffix: suffix.len() as u32,
            seq_type_id,
            ..Default::default()
        };
        let specials = (0..three.len()).filter(|&k| !in_seq(k));
        for (slot, k) in specials.enumerate() {
            template.ids[slot] = three.get_ids()[k];
            template.type_ids[slot] = three.get_type_ids()[k];
        }
        Some(template)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BERTISH: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 0, "content": "[CLS]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true},
                       {"id": 5, "content": "[SEP]", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 1}},
                   {"SpecialToken": {"id": "[SEP]", "type_id": 2}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [0], "tokens": ["[CLS]"]},
                           "[SEP]": {"id": "[SEP]", "ids": [5], "tokens": ["[SEP]"]}}},
      "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[CLS]": 0, "a": 1, "b": 2, "c": 3, "[UNK]": 4, "[SEP]": 5},
                "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn template_is_read_from_the_post_processor() {
        let engine = Engine::from_json(BERTISH).unwrap();
        let t = engine.single_template(true).unwrap();
        assert_eq!((t.n_prefix, t.n_suffix, t.seq_type_id), (1, 1, 1));
        assert_eq!((&t.ids[..2], &t.type_ids[..2]), (&[0, 5][..], &[0, 2][..]));
        // Without special tokens the crate still gives the sequence $A's type id.
        let bare = engine.single_template(false).unwrap();
        assert_eq!((bare.n_prefix, bare.n_suffix, bare.seq_type_id), (0, 0, 1));
    }

    /// Rows with offsets packed from ids and offsets are the rows packed
    /// from the post-processor's encodings, truncated and padded alike.
    #[test]
    fn rows_with_offsets_from_the_template_are_the_encodings_rows() {
        use crate::engine::pack;
        use tokenizers::{PaddingParams, TruncationParams};
        let engine = Engine::from_json(BERTISH).unwrap();
        let texts = [("a b c", None), ("c", None), ("b x a", None)];
        for (add_special_tokens, truncation, padding) in [
            (true, None, None),
            (false, None, Some(PaddingParams::default())),
            (true, Some(3), Some(PaddingParams::default())),
        ] {
            let mut settings = Settings {
                add_special_tokens,
                truncation: truncation.map(|max_length| TruncationParams {
                    max_length,
                    ..Default::default()
                }),
                padding,
                ..Settings::default()
            };
            settings.outputs.offsets = true;
            settings.outputs.attention_mask = true;
            settings.outputs.type_ids = true;
            settings.outputs.special_tokens_mask = true;
            assert!(engine.offsets_template(&texts, &settings).is_some());
            let packed = engine.encode_batch(&texts, &settings).unwrap();
            let encodings: Vec<_> = texts
                .iter()
                .map(|&input| engine.encode_one(input, &settings).unwrap())
                .collect();
            let expected =
                pack::pack(&encodings, settings.padding.as_ref(), settings.outputs).unwrap();
            assert_eq!(packed.ids, expected.ids);
            assert_eq!(packed.offsets, expected.offsets);
            assert_eq!(packed.type_ids, expected.type_ids);
            assert_eq!(packed.special_tokens_mask, expected.special_tokens_mask);
            assert_eq!(packed.attention_mask, expected.attention_mask);
            assert_eq!(packed.row_starts, expected.row_starts);
        }
    }

    /// A post-processor that trims offsets (it reads the token strings) keeps
    /// the per-document encodings.
    #[test]
    fn a_post_processor_that_trims_offsets_is_not_packed_from_offsets() {
        let trimming = BERTISH.replace(
            &BERTISH[BERTISH.find("\"post_processor\"").unwrap()..BERTISH.find("\"decoder\"").unwrap()],
            r#""post_processor": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                                  "use_regex": false},
      "#,
        );
        let engine = Engine::from_json(&trimming).unwrap();
        let mut settings = Settings::default();
        settings.outputs.offsets = true;
        assert!(engine
            .offsets_template(&[("a b", None)], &settings)
            .is_none());
        // Without trimming, the same processor adds nothing and keeps offsets.
        let kept = Engine::from_json(
            &trimming.replace(r#""trim_offsets": true"#, r#""trim_offsets": false"#),
        )
        .unwrap();
        assert!(kept.offsets_template(&[("a b", None)], &settings).is_some());
    }
}
