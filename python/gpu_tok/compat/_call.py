"""transformers' call: `tok(texts, padding=True, truncation=True,
return_tensors="pt")` and the methods built on it (`encode`, `tokenize`,
`pad`), with transformers' semantics: the arguments alone decide
(tokenizer.json's truncation and padding do not apply)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _maps, _placement, _settings
from .._errors import InvalidInputError
from .._state import HoldsState, TokenizerState
from ..batch import BatchEncoding, as_tensor, check_dtype, check_kind, ordered_fields, tensors_of
from . import _pad


class CallOptions(NamedTuple):
    """The options of `__call__` that every encoding of the call shares (the
    one list of them: `__call__` collects its arguments into it by name; a
    tuple, as that is the cheapest to build on every call)."""

    add_special_tokens: bool
    padding: bool | str
    truncation: bool | str | None
    stride: int
    is_split_into_words: bool
    pad_to_multiple_of: int | None
    padding_side: str | None
    truncation_side: str | None
    pad_token_id: int | None
    return_tensors: str | None
    return_token_type_ids: bool | None
    return_attention_mask: bool | None
    return_overflowing_tokens: bool
    return_special_tokens_mask: bool
    return_offsets_mapping: bool
    return_length: bool
    split_special_tokens: bool | None
    device: Any
    dtype: str


_options_of = itemgetter(*CallOptions._fields)  # __call__'s arguments -> the options, in field order


def _as_list(texts: Any) -> list[Any]:
    return texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)


def _is_words(value: Any) -> bool:
    """A pre-split text: a list or tuple of str."""
    return isinstance(value, (list, tuple)) and all(isinstance(w, str) for w in value)


class TransformersCall(HoldsState):
    """Mixed into `Tokenizer` (which holds `_state`)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> Any: ...

    def encode(self, text: str | Sequence[str], text_pair: str | Sequence[str] | None = None,
               add_special_tokens: bool = True, padding: bool | str = False, truncation: bool | str | None = None,
               max_length: int | None = None, stride: int = 0, padding_side: str | None = None,
               return_tensors: str | None = None, **kwargs: Any) -> Any:
        """Token ids of `text` (and `text_pair`), as transformers' `encode`: the
        arguments alone decide (tokenizer.json's truncation and padding do not apply)."""
        state = self._state
        if (type(text) is str and text_pair is None and padding is False and max_length is None
                and (truncation is None or truncation is False) and type(stride) is int and stride == 0
                and padding_side is None and return_tensors is None and not kwargs
                and type(add_special_tokens) is bool and not state.model.split_special_tokens):
            # The plain case on the calling thread: the ids of the call below (no truncation, no padding).
            return state.core.encode_ids(text, add_special_tokens)
        if not isinstance(text, (str, list, tuple)):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return self(text, text_pair, add_special_tokens=add_special_tokens, padding=padding, truncation=truncation,
                    max_length=max_length, stride=stride, padding_side=padding_side, return_tensors=return_tensors,
                    **kwargs)["input_ids"]

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        text_pair: str | Sequence[str] | Sequence[Sequence[str]] | None = None,
        text_target: str | Sequence[str] | None = None,
        text_pair_target: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        truncation_side: str | None = None,
        pad_token_id: int | None = None,
        return_tensors: str | None = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool | None = None,
        max_target_length: int | None = None,
        device: Any = "auto",
        dtype: str = "int64",
    ) -> BatchEncoding:
        """transformers' call: `tok(texts, padding=True, truncation=True,
        return_tensors="pt")`, with its semantics (tokenizer.json's truncation
        and padding do not apply; `max_length` defaults to `model_max_length`).
        A single str gives un-batched lists. `text_target` adds `labels`.
        gpu_tok's additions: `truncation_side`, `pad_token_id`, `device`, and
        `dtype` ("int64" as transformers, or "int32": tensors in half the bytes)."""
        options = tuple.__new__(CallOptions, _options_of(locals()))  # before anything else is bound here
        if text is None and text_target is None:
            raise TypeError("pass text (a str or a list of str), or text_target")
        check_kind(return_tensors)
        check_dtype(dtype)
        state = self._state  # one read: the whole call sees one state
        encodings = None if text is None else _encode(state, text, text_pair, max_length, options)
        if text_target is None:
            assert encodings is not None
            return encodings
        target_length = max_target_length if max_target_length is not None else max_length
        targets = _encode(state, text_target, text_pair_target, target_length, options)
        if encodings is None:
            return targets
        dict.__setitem__(encodings, "labels", targets["input_ids"])
        return encodings

    def pad(self, encoded_inputs: Any, padding: bool | str = True, max_length: int | None = None,
            pad_to_multiple_of: int | None = None, padding_side: str | None = None,
            return_attention_mask: bool | None = None, return_tensors: str | None = None,
            verbose: bool = True) -> BatchEncoding:
        """transformers' `pad`: pads already-encoded rows (a dict of rows, or a list
        of dicts, e.g. in a DataLoader `collate_fn`) with this tokenizer's pad token."""
        return _pad.pad(self._state, encoded_inputs, padding=padding, max_length=max_length,
                        pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                        return_attention_mask=return_attention_mask, return_tensors=return_tensors)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False,
                 **kwargs: Any) -> list[str]:
        """The token strings of `text` (and `pair`)."""
        ids = self(text, pair, add_special_tokens=add_special_tokens, **kwargs)["input_ids"]
        return self.convert_ids_to_tokens(ids)


def _encode(state: TokenizerState, text: Any, pair: Any, max_length: int | None, o: CallOptions) -> BatchEncoding:
    """One of `__call__`'s encodings (inputs, or targets)."""
    if not isinstance(o.add_special_tokens, bool):
        raise TypeError("add_special_tokens must be a bool")
    split_special_tokens = state.model.split_special_tokens if o.split_special_tokens is None \
        else o.split_special_tokens
    if o.is_split_into_words:
        single = _is_words(text)
    else:
        single = isinstance(text, str)
    if single:
        if pair is not None and not isinstance(pair, str) and not (o.is_split_into_words and _is_words(pair)):
            raise TypeError("text is a single text, so text_pair must be one too")
        texts, pairs = [text], ([pair] if pair else None)  # transformers: an empty pair is no pair
    else:
        if isinstance(text, (str, bytes)) or not (isinstance(text, (list, tuple)) or hasattr(text, "to_pylist")):
            raise TypeError(f"text must be a str or a list of str, not {type(text).__name__}")
        if isinstance(pair, str):
            raise TypeError("text is a batch, so text_pair must be a list of the same length")
        texts, pairs = text, pair
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"batch length of text ({len(texts)}) does not match text_pair ({len(pairs)})")
    core = state.core
    n_special = core.num_special_tokens_to_add(pairs is not None) if o.add_special_tokens else 0
    trunc, pad = _settings.call_settings(
        state.defaults, o.padding, o.truncation, max_length, pad_to_multiple_of=o.pad_to_multiple_of,
        stride=o.stride, padding_side=o.padding_side, truncation_side=o.truncation_side,
        pad_token_id=o.pad_token_id, special_tokens=n_special,
        single_special_tokens=core.num_special_tokens_to_add(False))
    names = state.model.model_input_names
    type_ids = "token_type_ids" in names if o.return_token_type_ids is None else o.return_token_type_ids
    attention_mask = "attention_mask" in names if o.return_attention_mask is None else o.return_attention_mask
    n_sequences = 1 if pairs is None else 2
    # What the core computes, written once for both of its paths below.
    fields: dict[str, Any] = dict(attention_mask=attention_mask, type_ids=type_ids,
                                  special_tokens_mask=o.return_special_tokens_mask,
                                  offsets=o.return_offsets_mapping, dtype=o.dtype)
    options = dict(add_special_tokens=o.add_special_tokens, truncation=trunc, padding=pad,
                   pretokenized=o.is_split_into_words, split_special_tokens=split_special_tokens)
    if o.is_split_into_words or o.return_overflowing_tokens or split_special_tokens:
        # The maps are computed anyway: the core's rich path, which keeps them.
        # It runs on the CPU: a call that asked for device memory is refused,
        # not answered in host memory.
        placement = _placement.resolve(o.device, None, packable=False)
        if placement.core != "cpu" and not placement.to_host:
            raise InvalidInputError(
                "return_overflowing_tokens, is_split_into_words and split_special_tokens are computed on "
                f"the CPU, so their results cannot be in device memory (device={o.device!r}): pass "
                "device='cpu' or 'auto', then move the tensors")
        batch, maps, total_ms = _maps.encode(core, texts, pairs, overflow=o.return_overflowing_tokens, **fields,
                                             **options)
    else:
        batch, total_ms = state.encode(texts, pairs, add_special_tokens=o.add_special_tokens, truncation=trunc,
                                       padding=pad, device=o.device, stacklevel=4, **fields)
        maps = _maps.Maps(None, _maps.Source(core, _as_list(texts), None if pairs is None else _as_list(pairs),
                                             options))
    samples = maps.rows.samples() if o.return_overflowing_tokens else None
    kind = o.return_tensors
    if kind is None:
        lists = batch.to_lists()
        if o.return_length:
            lists["length"] = [len(row) for row in lists["input_ids"]]
        ordered = ordered_fields(lists)
        if samples is not None:
            ordered["overflow_to_sample_mapping"] = samples
        elif single:
            ordered = {k: v[0] if v and isinstance(v[0], list) else v for k, v in ordered.items()}
        return BatchEncoding(ordered, batch, total_ms, encodings=maps, n_sequences=n_sequences)
    tensors = tensors_of(batch, kind, o.dtype)
    if o.return_length:
        starts = batch.row_offsets().tolist()
        tensors["length"] = as_tensor([b - a for a, b in zip(starts, starts[1:], strict=False)], kind, o.dtype)
    if samples is not None:
        tensors["overflow_to_sample_mapping"] = as_tensor(samples, kind, o.dtype)
    return BatchEncoding(ordered_fields(tensors), batch, total_ms, encodings=maps, n_sequences=n_sequences)
