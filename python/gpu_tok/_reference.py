"""The `tokenizers` library, for what the core does not expose yet.

Per-token maps (`BatchEncoding.encodings`, `word_ids()`, `tokens()`,
`char_to_token()`...), overflowing rows (`return_overflowing_tokens`),
pre-split words (`is_split_into_words`) and `split_special_tokens` run
through `tokenizers.Tokenizer`, built from the same tokenizer.json text and
given the same truncation and padding: the same crate, so the same results.
It is imported on first use (`pip install "tokenizers==0.23.3"`, the
`reference` extra); the fast
path never touches it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ._core import Padding, Truncation, check_memory

# Bytes of a `tokenizers.Encoding` per token: ids, type ids, masks, word,
# offsets, and the token's string (a copy of the pad token's in padding).
_ENCODING_BYTES_PER_TOKEN = 160


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as err:
        raise ImportError(
            "this option needs the `tokenizers` library (per-token maps, overflowing tokens, pre-split words, "
            'split_special_tokens): pip install "tokenizers==0.23.3" (the reference extra)'
        ) from err
    return tokenizers


class Reference:
    """A `tokenizers.Tokenizer` over one tokenizer.json, loaded on first use.
    Its truncation and padding are set per call, so calls take a lock."""

    def __init__(self, json_text: str) -> None:
        self._json = json_text
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def encode(self, inputs: Sequence[Any], *, add_special_tokens: bool, truncation: Truncation | None,
               padding: Padding | None, pretokenized: bool, split_special_tokens: bool) -> list[Any]:
        """`tokenizers.Encoding`s of `inputs` (texts, (text, pair) tuples, or word lists)."""
        if padding is not None and padding.length is not None:  # the crate would abort on a failed allocation
            length = padding.length
            multiple = padding.pad_to_multiple_of
            if multiple and length % multiple:
                length = (length // multiple + 1) * multiple
            check_memory(len(inputs) * length * _ENCODING_BYTES_PER_TOKEN, "the padded encodings",
                         f"the padding length {length} (max_length with padding='max_length')")
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = _tokenizers().Tokenizer.from_str(self._json)
            tok = self._tokenizer
            if truncation is None:
                tok.no_truncation()
            else:
                tok.enable_truncation(truncation.max_length, stride=truncation.stride,
                                      strategy=truncation.strategy, direction=truncation.side)
            if padding is None:
                tok.no_padding()
            else:
                tok.enable_padding(direction=padding.side, pad_id=padding.pad_id, pad_type_id=padding.pad_type_id,
                                   pad_token=padding.pad_token, length=padding.length,
                                   pad_to_multiple_of=padding.pad_to_multiple_of)
            tok.encode_special_tokens = split_special_tokens
            return list(tok.encode_batch(list(inputs), add_special_tokens=add_special_tokens,
                                         is_pretokenized=pretokenized))


def fields(encodings: list[Any], wanted: dict[str, bool], overflow: bool) -> tuple[dict[str, list[Any]], list[Any]]:
    """transformers' `_convert_encoding` over a batch: per-row field lists in
    its key order, overflowing rows after their row, and the flat encodings."""
    out: dict[str, list[Any]] = {name: [] for name in ("input_ids", *[k for k, on in wanted.items() if on])}
    flat: list[Any] = []
    mapping: list[int] = []
    for i, encoding in enumerate(encodings):
        rows = [encoding, *encoding.overflowing] if overflow else [encoding]
        for e in rows:
            flat.append(e)
            mapping.append(i)
            values = {"input_ids": e.ids, "token_type_ids": e.type_ids, "attention_mask": e.attention_mask,
                      "special_tokens_mask": e.special_tokens_mask, "offset_mapping": e.offsets,
                      "length": len(e.ids)}
            for name in out:
                out[name].append(values[name])
    if overflow:
        out["overflow_to_sample_mapping"] = mapping
    return out, flat
