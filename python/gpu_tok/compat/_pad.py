"""transformers' `pad`: padding rows that are already encoded (a DataLoader
`collate_fn` over `tok(text)` results), in Python, with the tokenizer's pad
token, padding side and model input names. Ported from transformers 5's
`PreTrainedTokenizerBase.pad` / `_pad` so results match it value for value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _settings
from .._state import TokenizerState, check_memory
from ..batch import BatchEncoding, check_kind


def _plain(value: Any) -> Any:
    """numpy arrays, torch tensors and gpu_tok Tensors (also inside lists) as Python lists."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value.tolist() if hasattr(value, "tolist") else value


def _tensor_kind(value: Any) -> str | None:
    module = type(value).__module__.split(".")[0]
    return {"numpy": "np", "torch": "pt"}.get(module)


def pad(state: TokenizerState, encoded_inputs: Any, *, padding: Any, max_length: int | None,
        pad_to_multiple_of: int | None, padding_side: str | None, return_attention_mask: bool | None,
        return_tensors: str | None) -> BatchEncoding:
    check_kind(return_tensors)
    if isinstance(encoded_inputs, (list, tuple)) and encoded_inputs and isinstance(encoded_inputs[0], Mapping):
        encoded_inputs = {key: [example[key] for example in encoded_inputs] for key in encoded_inputs[0]}
    if not isinstance(encoded_inputs, Mapping):
        raise TypeError("pad takes a dict of fields or a list of dicts")
    names = state.model.model_input_names
    main = names[0]
    if main not in encoded_inputs:
        raise ValueError(f"pad needs {main!r} among the fields, got {list(encoded_inputs)}")
    inputs = dict(encoded_inputs)
    required = inputs[main]
    if required is None or len(required) == 0:
        if return_attention_mask:
            inputs["attention_mask"] = []
        return BatchEncoding(inputs)
    first = required[0]
    if isinstance(first, (list, tuple)):
        first = next((row[0] for row in required if len(row)), first)
    if not isinstance(first, (int, list, tuple)):
        kind = _tensor_kind(first) or _tensor_kind(required)
        if kind is None:
            raise ValueError(f"pad: values of type {type(first).__name__} are not lists, numpy arrays or tensors")
        return_tensors = return_tensors or kind
        inputs = {key: _plain(value) for key, value in inputs.items()}
    _, settings = _settings.call_settings(state.defaults, padding, None, max_length)  # pad never truncates
    strategy_length = None if settings is None else settings.length
    required = inputs[main]
    mask = ("attention_mask" in names) if return_attention_mask is None else return_attention_mask
    options: dict[str, Any] = dict(pad_id=state.defaults.pad_token_id, side=padding_side or state.model.padding_side,
                                   mask=mask, multiple=pad_to_multiple_of)
    fields = len(inputs) + int(mask)
    if required and not isinstance(required[0], (list, tuple)):
        target = None if settings is None else (strategy_length or len(required))
        _check_size(1, target, pad_to_multiple_of, fields)
        return BatchEncoding(_pad_row(main, inputs, target, **options), tensor_type=return_tensors)
    if settings is not None and strategy_length is None:
        strategy_length = max(len(row) for row in required)
    _check_size(len(required), None if settings is None else strategy_length, pad_to_multiple_of, fields)
    rows = [{k: v[i] for k, v in inputs.items()} for i in range(len(required))]
    target = None if settings is None else strategy_length
    padded = [_pad_row(main, row, target, **options) for row in rows]
    batch = {key: [row[key] for row in padded] for key in padded[0]}
    return BatchEncoding(batch, tensor_type=return_tensors)


# Bytes per padded value while rows are built: the list's pointer, and the
# copy made when the padding is joined to the values (fill values are shared ints).
_BYTES_PER_VALUE = 16


def _check_size(rows: int, length: int | None, multiple: int | None, fields: int) -> None:
    """`OutputTooLargeError` before anything is built when `rows` rows of
    `fields` fields padded to `length` would not fit in this process's memory."""
    if length is None:
        return
    if multiple and length % multiple:
        length = (length // multiple + 1) * multiple
    check_memory(rows * length * fields * _BYTES_PER_VALUE, "the padded rows",
                       f"the padding length {length} (max_length with padding='max_length')")


def _pad_row(main: str, row: dict[str, Any], length: int | None, *, pad_id: int | None, side: str, mask: bool,
             multiple: int | None) -> dict[str, Any]:
    """transformers' `_pad` for one row (`length` None: no padding)."""
    row = dict(row)
    ids = list(row[main])
    if length is not None and multiple is not None and length % multiple:
        length = (length // multiple + 1) * multiple
    if mask and "attention_mask" not in row:
        row["attention_mask"] = [1] * len(ids)
    if length is None or len(ids) == length:
        return row
    missing = length - len(ids)
    if pad_id is None:
        raise ValueError("Asking to pad but the tokenizer does not have a padding token")
    fills = {"attention_mask": 0, "token_type_ids": 0, "special_tokens_mask": 1, main: pad_id}
    for key, fill in fills.items():
        if key in row and (key != "attention_mask" or mask):
            values = list(row[key])
            row[key] = values + [fill] * missing if side == "right" else [fill] * missing + values
    return row
