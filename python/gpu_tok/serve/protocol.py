"""Request bodies of `/encode` and `/decode`: checked, and turned into the
engine's terms, before anything is queued.

Every problem is a `BadRequest` (HTTP 400) naming the field, so a malformed
request never reaches a merged batch. The encode options are those of the
transformers-style call `tok(texts, pairs, **options)`, checked by that call
itself (on an empty batch, ~25 us), so the server accepts exactly what the
library accepts and gives each option the library's meaning and default.
Requests with equal options (`EncodeRequest.key`) can share one engine call.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable
from typing import Any, NamedTuple

import orjson

from .._errors import GpuTokError
from ..tokenizer import Tokenizer

_MAX_ID = 2**32 - 1

# The call's options that keep one answer row per text (no overflowing rows, no words).
ENCODE_OPTIONS = (
    "add_special_tokens", "padding", "truncation", "max_length", "pad_to_multiple_of", "padding_side",
    "truncation_side", "pad_token_id", "return_attention_mask", "return_token_type_ids",
    "return_offsets_mapping", "return_special_tokens_mask",
)

_BOOL_OPTIONS = {name for name in ENCODE_OPTIONS if name.startswith("return_")} | {"add_special_tokens"}


class BadRequest(Exception):
    """A request the server refuses with 400 and this message."""


class EncodeRequest(NamedTuple):  # made once per request: a NamedTuple is the cheapest immutable record
    texts: list[str]
    pairs: list[str] | None
    options: tuple[tuple[str, Any], ...]  # the options sent, sorted by name

    @property
    def key(self) -> Hashable:
        """Requests with equal keys are merged into one call."""
        return self.pairs is not None, self.options


class DecodeRequest(NamedTuple):
    ids: list[list[int]]
    skip_special_tokens: bool
    clean_up_tokenization_spaces: bool


_OPTION_FIELDS: dict[str, Any] = dict.fromkeys(ENCODE_OPTIONS)
_ENCODE_FIELDS: dict[str, Any] = {"texts": None, "pairs": None, **_OPTION_FIELDS}
_DECODE_DEFAULTS: dict[str, Any] = {"ids": None, "skip_special_tokens": True, "clean_up_tokenization_spaces": False}


def _object(body: bytes, known: dict[str, Any]) -> dict[str, Any]:
    """The JSON object of `body`, whose fields must all be in `known`."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise BadRequest(f"the body is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise BadRequest(f"the body must be a JSON object, not {type(value).__name__}")
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1)
            raise BadRequest(f"unknown field {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return value


def _bool(fields: dict[str, Any], name: str) -> bool:
    value = fields[name]
    if isinstance(value, bool):
        return value
    raise BadRequest(f"{name} must be true or false, not {value!r}")


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list):
        raise BadRequest(f"{name} must be a list of strings")
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise BadRequest(f"{name}[{i}] must be a string, not {type(text).__name__}")
    return value


class EncodeParser:
    """`/encode` bodies for one tokenizer. The library checks each option set on an
    empty batch; accepted sets are remembered (clients send the same few again)."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok = tok
        self._accepted: set[tuple[bool, tuple[tuple[str, Any], ...]]] = set()

    def __call__(self, body: bytes) -> EncodeRequest:
        sent = _object(body, _ENCODE_FIELDS)
        if sent.get("texts") is None:
            raise BadRequest("texts is required: a list of strings")
        texts = _strings(sent["texts"], "texts")
        pairs = None if sent.get("pairs") is None else _strings(sent["pairs"], "pairs")
        if pairs is not None and len(pairs) != len(texts):
            raise BadRequest(f"pairs has {len(pairs)} items, texts has {len(texts)}: they must match")
        options = self.options({name: value for name, value in sent.items() if name in ENCODE_OPTIONS},
                               pairs is not None)
        return EncodeRequest(texts, pairs, options)

    def options(self, sent: dict[str, Any], pairs: bool) -> tuple[tuple[str, Any], ...]:
        """The options of one request (fields of `ENCODE_OPTIONS` only), checked
        by the library: the sorted tuple of `EncodeRequest.options`."""
        for name, value in sent.items():
            if name in _BOOL_OPTIONS and not isinstance(value, bool) and value is not None:
                raise BadRequest(f"{name} must be true, false or null, not {value!r}")
            if value is not None and not isinstance(value, (bool, int, str)):
                raise BadRequest(f"{name} must be a bool, an int, a string or null, not {type(value).__name__}")
        options = tuple(sorted(sent.items()))
        self._check(pairs, options)
        return options

    def options_json(self, body: bytes, pairs: bool) -> tuple[tuple[str, Any], ...]:
        """`options` from a JSON object holding only options (the binary
        protocol's options header): the same checks and messages as `/encode`."""
        return self.options(_object(body, _OPTION_FIELDS), pairs)

    def _check(self, pairs: bool, options: tuple[tuple[str, Any], ...]) -> None:
        if (pairs, options) in self._accepted:
            return
        try:
            self.tok([], [] if pairs else None, **dict(options))
        except (ValueError, TypeError, GpuTokError) as err:
            raise BadRequest(str(err)) from None
        if len(self._accepted) >= 4096:  # bounded, whatever option sets clients invent
            self._accepted.clear()
        self._accepted.add((pairs, options))


def parse_decode(body: bytes) -> DecodeRequest:
    f = {**_DECODE_DEFAULTS, **_object(body, _DECODE_DEFAULTS)}
    rows = f["ids"]
    if not isinstance(rows, list):
        raise BadRequest("ids is required: a list of lists of token ids")
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise BadRequest(f"ids[{i}] must be a list of token ids, not {type(row).__name__}")
        for j, value in enumerate(row):
            if type(value) is not int or not 0 <= value <= _MAX_ID:
                raise BadRequest(f"ids[{i}][{j}] must be a token id (an int in [0, 2**32)), not {value!r}")
    return DecodeRequest(rows, _bool(f, "skip_special_tokens"), _bool(f, "clean_up_tokenization_spaces"))
