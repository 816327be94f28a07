"""Decoding: transformers' `decode` / `batch_decode` (its clean-up rules) and
`tokenizers`' `decode_batch`, over the tokenizer's one state."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._state import HoldsState


def clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization`: drops the spaces before punctuation
    and inside English contractions that word-level decoders leave."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                          (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                          (" 're", "'re")):
        text = text.replace(before, after)
    return text


def ids_of(values: Any, what: str) -> list[int] | tuple[int, ...]:
    """Token ids as a list or tuple for the core, which checks every item (in
    Rust: a Python loop here made decoding 1.7x slower than `tokenizers`)."""
    if isinstance(values, (list, tuple)):
        return values
    if hasattr(values, "tolist"):
        values = values.tolist()
        return values if isinstance(values, list) else [values]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of ints, not {type(values).__name__}")
    return list(values)


def _plain_ints(row: Sequence[Any]) -> list[Any]:
    """numpy/torch integer scalars as ints (the core takes Python ints only)."""
    return [int(i) if isinstance(i, numbers.Integral) and not isinstance(i, bool) else i for i in row]


def _rows(sequences: Any) -> list[Any]:
    if hasattr(sequences, "tolist") and not isinstance(sequences, list):
        sequences = sequences.tolist()
    if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
        raise TypeError(f"sequences must be a list of id lists, not {type(sequences).__name__}")
    return [row if isinstance(row, list) else ids_of(row, f"sequences[{i}]") for i, row in enumerate(sequences)]


class Decoding(HoldsState):
    """Mixed into `Tokenizer` (which holds `_state`)."""

    __slots__ = ()

    def _decode_rows(self, rows: list[Any], skip_special_tokens: bool,
                     clean_up_tokenization_spaces: bool | None) -> list[str]:
        if not isinstance(skip_special_tokens, bool):
            raise TypeError("skip_special_tokens must be a bool")
        state = self._state
        clean = state.model.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None \
            else clean_up_tokenization_spaces
        # transformers 5 skips the clean-up for BPE models: it would remove real spaces before punctuation.
        clean = bool(clean) and state.model_kind != "BPE"
        try:
            return state.decode_rows(rows, skip_special_tokens, clean)
        except TypeError:  # torch integer scalars and the like: make them ints and try again
            return state.decode_rows([_plain_ints(r) if isinstance(r, (list, tuple)) else r for r in rows],
                                     skip_special_tokens, clean)

    def decode(self, token_ids: Any, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> Any:
        """Text of `token_ids` (an int, a list, a numpy array or torch tensor; a
        list of rows gives a list of texts), as transformers' `decode`."""
        if isinstance(token_ids, Mapping):
            token_ids = token_ids["input_ids"]
        if isinstance(token_ids, numbers.Integral) and not isinstance(token_ids, bool):
            token_ids = [int(token_ids)]
        ids = ids_of(token_ids, "token_ids")
        if ids and (isinstance(ids[0], (list, tuple)) or getattr(ids[0], "ndim", 0) > 0):  # rows: one text each
            return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        return self._decode_rows([ids], skip_special_tokens, clean_up_tokenization_spaces)[0]

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> list[str]:
        """`decode` for each row (in parallel), as transformers' `batch_decode`."""
        rows = _rows(sequences)
        if rows and not isinstance(rows[0], (list, tuple)):
            rows = [rows]  # one sequence: transformers decodes it as a batch of one
        return self._decode_rows(rows, skip_special_tokens, clean_up_tokenization_spaces)

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True,
                     clean_up_tokenization_spaces: bool = False) -> list[str]:
        """`tokenizers`' `decode_batch` (its default: special tokens skipped)."""
        return self._state.decode_rows(_rows(sequences), skip_special_tokens, bool(clean_up_tokenization_spaces))

    def clean_up_tokenization(self, text: str) -> str:
        return clean_up_tokenization(text)
