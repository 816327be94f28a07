"""Turning user arguments into the core's explicit truncation and padding.

Two conventions meet here:
- `tokenizers` (`encode_batch` with its defaults): the truncation and padding
  stored in tokenizer.json apply unless overridden (`truncation`/`padding`
  with `from_file=True`);
- transformers (`tok(...)`, `tok.encode`): the arguments alone decide, read
  exactly as transformers 5 reads them (`call_settings`).
The results are the core's frozen `Truncation` and `Padding` classes, which
check their values when made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._core import Padding, Truncation
from ._errors import InvalidInputError

_STRATEGIES = ("longest_first", "only_first", "only_second")


@dataclass(frozen=True)
class Defaults:
    """What a tokenizer's files say, used when an argument is left unset."""

    file_truncation: Truncation | None
    file_padding: Padding | None
    model_max_length: int | None  # None: no limit (transformers' int(1e30))
    pad_token_id: int | None
    pad_token: str | None
    padding_side: str
    truncation_side: str


# Lengths are Rust usize and ids u32 in the core: larger values are refused here.
_MAX_LENGTH = 2**63 - 1
_MAX_ID = 2**32 - 1


def _positive(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int or None, not {value!r}")
    if value > _MAX_LENGTH:
        raise InvalidInputError(f"{name}={value} is too large (at most 2**63 - 1)")
    return value


def _non_negative(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int or None, not {value!r}")
    if value > _MAX_LENGTH:
        raise InvalidInputError(f"{name}={value} is too large (at most 2**63 - 1)")
    return value


def _side(name: str, value: Any) -> str | None:
    if value is None or value in ("right", "left"):
        return value
    raise ValueError(f"{name} must be 'right' or 'left', not {value!r}")


def truncation(
    d: Defaults,
    truncation: Any,
    max_length: int | None,
    side: str | None,
    *,
    from_file: bool,
) -> Truncation | None:
    max_length = _positive("max_length", max_length)
    side = _side("truncation_side", side)
    if truncation is None:
        stored = d.file_truncation
        if from_file and stored is not None:
            return Truncation(max_length or stored.max_length, stored.strategy, side or stored.side, stored.stride)
        if max_length is None:
            return None
        truncation = True  # as transformers: a max_length alone turns truncation on
    if truncation is False or truncation == "do_not_truncate":
        return None
    if truncation is True:
        strategy = "longest_first"
    elif truncation in _STRATEGIES:
        strategy = truncation
    else:
        raise ValueError(f"truncation must be a bool, None or one of {_STRATEGIES}, not {truncation!r}")
    if max_length is None:
        if d.file_truncation is not None:
            max_length = d.file_truncation.max_length
        elif d.model_max_length is not None:
            max_length = d.model_max_length
        else:
            raise InvalidInputError(
                "truncation needs max_length: this tokenizer's config sets no model_max_length"
            )
    file_side = d.file_truncation.side if d.file_truncation else None
    return Truncation(max_length, strategy, side or d.truncation_side or file_side or "right")


def padding(
    d: Defaults,
    padding: Any,
    max_length: int | None,
    pad_to_multiple_of: int | None,
    side: str | None,
    pad_token_id: int | None,
    *,
    from_file: bool,
) -> Padding | None:
    multiple = _positive("pad_to_multiple_of", pad_to_multiple_of)
    side = _side("padding_side", side)
    bad_id = isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) or pad_token_id < 0
    if pad_token_id is not None and bad_id:
        raise ValueError(f"pad_token_id must be a non-negative int, not {pad_token_id!r}")
    if pad_token_id is not None and pad_token_id > _MAX_ID:
        raise InvalidInputError(f"pad_token_id={pad_token_id} is not a token id (ids are below 2**32)")
    file = d.file_padding
    if padding is None:
        if not (from_file and file is not None):
            return None
        return Padding(file.length, side or file.side, multiple or file.pad_to_multiple_of,
                       file.pad_id if pad_token_id is None else pad_token_id, file.pad_type_id, file.pad_token)
    if padding is False or padding == "do_not_pad":
        return None
    if padding is True or padding == "longest":
        length = None
    elif padding == "max_length":
        length = _positive("max_length", max_length) or d.model_max_length
        if length is None:
            raise InvalidInputError("padding='max_length' needs max_length (no model_max_length is configured)")
    else:
        raise ValueError(f"padding must be a bool, None, 'longest' or 'max_length', not {padding!r}")
    if pad_token_id is not None:
        pad_id, token = pad_token_id, ""
    elif file is not None:
        pad_id, token = file.pad_id, file.pad_token
    elif d.pad_token_id is not None:
        pad_id, token = d.pad_token_id, d.pad_token or ""
    else:
        raise InvalidInputError(
            "padding needs a pad token, and this tokenizer defines none: pass pad_token_id=..."
        )
    file_side = file.side if file else None
    type_id = file.pad_type_id if file else 0
    return Padding(length, side or d.padding_side or file_side or "right", multiple, pad_id, type_id, token)


_PADDINGS = ("longest", "max_length", "do_not_pad")
_TRUNCATIONS = ("longest_first", "only_first", "only_second", "do_not_truncate")


def _call_padding(padding: Any) -> str:
    if padding is False or padding is None:
        return "do_not_pad"
    if padding is True:
        return "longest"
    if padding in _PADDINGS:
        return str(padding)
    raise ValueError(f"{padding!r} is not a valid padding: use a bool or one of {_PADDINGS}")


def _call_truncation(truncation: Any) -> str:
    if truncation is False or truncation is None:
        return "do_not_truncate"
    if truncation is True:
        return "longest_first"
    if truncation in _TRUNCATIONS:
        return str(truncation)
    raise ValueError(f"{truncation!r} is not a valid truncation: use a bool or one of {_TRUNCATIONS}")


def call_settings(
    d: Defaults,
    padding: Any,
    truncation: Any,
    max_length: int | None,
    *,
    pad_to_multiple_of: int | None = None,
    stride: int = 0,
    padding_side: str | None = None,
    truncation_side: str | None = None,
    pad_token_id: int | None = None,
    special_tokens: int = 0,
    single_special_tokens: int = 0,
) -> tuple[Truncation | None, Padding | None]:
    """transformers' `_get_padding_truncation_strategies` and
    `set_truncation_and_padding`: `special_tokens` is how many the call adds
    (a `max_length` below it turns truncation off, as the crate does);
    `single_special_tokens`, how many the post-processor adds to one
    sequence (the crate's `with_truncation` checks the stride against
    max_length minus those)."""
    # As transformers: max_length=0 truncates every row to its special tokens, pad_to_multiple_of=0 is no multiple.
    max_length = _non_negative("max_length", max_length)
    multiple = _non_negative("pad_to_multiple_of", pad_to_multiple_of) or None
    padding_side, truncation_side = _side("padding_side", padding_side), _side("truncation_side", truncation_side)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
        raise ValueError(f"stride must be a non-negative int, not {stride!r}")
    if max_length is not None and padding is False and truncation is None:
        truncation = "longest_first"  # transformers: a max_length alone truncates
    pad, trunc = _call_padding(padding), _call_truncation(truncation)
    if max_length is None:
        if pad == "max_length" and d.model_max_length is None:
            pad = "do_not_pad"  # no usable model_max_length: transformers does not pad
        if trunc != "do_not_truncate" and d.model_max_length is None:
            trunc = "do_not_truncate"
        if d.model_max_length is not None and (pad == "max_length" or trunc != "do_not_truncate"):
            max_length = d.model_max_length
    pad_id = d.pad_token_id if pad_token_id is None else pad_token_id
    if pad != "do_not_pad" and pad_id is None:
        raise InvalidInputError(
            "Asking to pad but the tokenizer does not have a padding token: set one (tok.pad_token = tok.eos_token) "
            "or pass pad_token_id=..."
        )
    if pad != "do_not_pad" and (isinstance(pad_id, bool) or not isinstance(pad_id, int) or pad_id < 0):
        raise ValueError(f"pad_token_id must be a non-negative int, not {pad_id!r}")
    if pad != "do_not_pad" and pad_id is not None and pad_id > _MAX_ID:
        raise InvalidInputError(f"pad_token_id={pad_id} is not a token id (ids are below 2**32)")
    if trunc != "do_not_truncate" and pad != "do_not_pad" and multiple and max_length and max_length % multiple:
        raise ValueError(f"Truncation and padding are both activated but truncation length ({max_length}) "
                         f"is not a multiple of pad_to_multiple_of ({multiple}).")
    if trunc != "do_not_truncate" and max_length is not None and stride > max_length - single_special_tokens >= 0:
        raise InvalidInputError(
            f"stride={stride} is larger than max_length={max_length} minus the {single_special_tokens} special "
            "tokens the tokenizer adds to a sequence: lower the stride (transformers raises here too)")
    truncation_out = None
    if trunc != "do_not_truncate" and max_length is not None and max_length >= special_tokens:
        truncation_out = Truncation(max_length, trunc, truncation_side or d.truncation_side, stride)
    if pad == "do_not_pad":
        return truncation_out, None
    assert pad_id is not None
    length = max_length if pad == "max_length" else None
    token = d.pad_token if pad_token_id is None else ""
    return truncation_out, Padding(length, padding_side or d.padding_side, multiple, pad_id, 0, token or "")
