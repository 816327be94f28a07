//! Single sequences without a per-document `Encoding`: the special tokens the
//! post-processor puts around one sequence, read once per call as a
//! [`GtTemplate`], so rows can be packed straight from their ids (on the CPU
//! by `pack::pack_sequences`, on a device by the pipeline's pack kernel).

use super::{encoding_from_ids, Engine, Input, Settings};
use crate::kernels::{GtTemplate, MAX_TEMPLATE};
use tokenizers::TruncationStrategy;

impl Engine {
    /// The template for a call whose rows can be packed from ids alone:
    /// single sequences, no offsets, a truncation that cuts the one sequence
    /// (not "only_second"), and a post-processor that is a fixed template.
    pub fn packable_template(
        &self,
        inputs: &[Input<'_>],
        settings: &Settings,
    ) -> Option<GtTemplate> {
        let packable = !settings.outputs.offsets
            && inputs.iter().all(|(_, pair)| pair.is_none())
            && settings
                .truncation
                .as_ref()
                .is_none_or(|t| t.strategy != TruncationStrategy::OnlySecond);
        packable.then(|| self.cached_single_template(settings.add_special_tokens))?
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
}
