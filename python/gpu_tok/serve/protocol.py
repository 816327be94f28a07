"""Request bodies of `/encode` and `/decode`: checked, and turned into the
engine's terms, before anything is queued.

Every problem is a `BadRequest` (HTTP 400) naming the field, so a malformed
request never reaches a merged batch. The encode options are those of the
transformers-style call `tok(texts, pairs, **options)`, checked by that call
itself (on an empty batch, ~25 us), so the server accepts exactly what the
library accepts and gives each option the library's meaning and default.
Requests with equal options (`EncodeRequest.key`) can share one engine call.

Each encode request's output is bounded before it is queued, in cells (one
token position of one row, padding included; `Cost`): rows x the padded
length for `padding="max_length"`, rows x the longest row's bound for
padding to the longest, the rows' bounds summed otherwise. A row's bound is
its UTF-8 bytes plus the special tokens (a token covers at least one byte),
capped by truncation's `max_length`. Over the request's budget: `TooLarge` (413).
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable
from typing import Any, NamedTuple

import orjson

from .. import _settings
from .._errors import EncodingError, GpuTokError, OutputTooLargeError
from ..compat.tokenizer import Tokenizer

_MAX_ID = 2**32 - 1

# The call's options that keep one answer row per text (no overflowing rows, no words).
ENCODE_OPTIONS = (
    "add_special_tokens", "padding", "truncation", "max_length", "pad_to_multiple_of", "padding_side",
    "truncation_side", "pad_token_id", "return_attention_mask", "return_token_type_ids",
    "return_offsets_mapping", "return_special_tokens_mask",
)

_BOOL_OPTIONS = {name for name in ENCODE_OPTIONS if name.startswith("return_")} | {"add_special_tokens"}
_INT_OPTIONS = ("max_length", "pad_to_multiple_of", "pad_token_id")


class BadRequest(Exception):
    """A request the server refuses with `status` (400) and this message."""

    status = 400


class TooLarge(BadRequest):
    """A request whose output would exceed its budget: 413."""

    status = 413


def failure(err: BaseException) -> tuple[int, str]:
    """The status and message for a request that failed in the batcher or
    engine (HTTP and binary answer them alike)."""
    if isinstance(err, OutputTooLargeError):  # more than the server's memory can hold
        return 413, str(err)
    if isinstance(err, (ValueError, TypeError, EncodingError)):  # the library refused this input
        return 400, str(err)
    if isinstance(err, GpuTokError):  # the device failed (CudaError...): not the client's fault
        return 500, f"{type(err).__name__}: {err}"
    return 500, f"internal error: {type(err).__name__}: {err}"


class Cost(NamedTuple):
    """An encode request's output bound. `widest` is set when its rows are
    padded to the longest: a merged call then holds all its rows x the widest."""

    cells: int
    rows: int
    widest: int | None


NO_COST = Cost(0, 0, None)  # decode requests: their output is bounded by their bytes


def merged_cells(rows: int, widest: int | None, cells: int) -> int:
    """Cells of one engine call over requests of one group: padded to the
    longest row of all (`widest` set), or each request's own."""
    return cells if widest is None else rows * widest


class EncodeRequest(NamedTuple):  # made once per request: a NamedTuple is the cheapest immutable record
    texts: list[str]
    pairs: list[str] | None
    options: tuple[tuple[str, Any], ...]  # the options sent, sorted by name
    cost: Cost

    @property
    def key(self) -> Hashable:
        """Requests with equal keys are merged into one call."""
        return self.pairs is not None, self.options


class DecodeRequest(NamedTuple):
    ids: list[list[int]]
    skip_special_tokens: bool
    clean_up_tokenization_spaces: bool


class _Shape(NamedTuple):
    """What a checked option set does to the output's size."""

    fixed: int | None  # padding="max_length": every row this long at least (rounded up to `multiple`)
    longest: bool  # padding to the longest row
    multiple: int
    truncate_at: int | None
    special_tokens: int  # per row

    @staticmethod
    def of(tok: Tokenizer, pairs: bool, options: dict[str, Any]) -> _Shape:
        """As the call `tok(texts, pairs, **options)` resolves them."""
        state = tok._state  # one read: the settings of one moment
        specials = state.core.num_special_tokens_to_add(pairs) if options.get("add_special_tokens", True) else 0
        truncation, padding = _settings.call_settings(
            state.defaults, options.get("padding", False), options.get("truncation"), options.get("max_length"),
            pad_to_multiple_of=options.get("pad_to_multiple_of"), padding_side=options.get("padding_side"),
            truncation_side=options.get("truncation_side"), pad_token_id=options.get("pad_token_id"),
            special_tokens=specials)
        multiple = (padding.pad_to_multiple_of if padding is not None else None) or 1
        fixed = None if padding is None or padding.length is None else _round_up(padding.length, multiple)
        return _Shape(fixed, padding is not None and padding.length is None, multiple,
                      None if truncation is None else truncation.max_length, specials)

    def cost(self, texts: list[str], pairs: list[str] | None, text_bytes: int) -> Cost:
        """The output bound of one request; `text_bytes`: at least the UTF-8
        bytes of its texts and pairs (the body's or frame's size will do)."""
        rows = len(texts)
        bound = text_bytes + rows * self.special_tokens  # the rows' bounds, summed
        if self.truncate_at is not None:
            bound = min(bound, rows * self.truncate_at)
        if self.fixed is not None:
            if self.truncate_at is not None and self.truncate_at <= self.fixed:
                return Cost(rows * self.fixed, rows, None)
            return Cost(rows * self.fixed + bound, rows, None)  # rows longer than the length stay longer
        if not self.longest:
            return Cost(bound, rows, None)
        sizes = [len(t.encode("utf-8", "surrogatepass")) for t in texts]
        if pairs is not None:
            sizes = [a + len(b.encode("utf-8", "surrogatepass")) for a, b in zip(sizes, pairs, strict=True)]
        widest = max(sizes, default=0) + self.special_tokens
        if self.truncate_at is not None:
            widest = min(widest, self.truncate_at)
        widest = _round_up(widest, self.multiple)
        return Cost(rows * widest, rows, widest)

    def explain(self, cost: Cost) -> str:
        if self.fixed is not None:
            return f"{cost.rows} rows x padded length {self.fixed}"
        if cost.widest is not None:
            return f"{cost.rows} rows x {cost.widest}, the longest row's bound (padding to the longest row)"
        return "the texts' UTF-8 bytes plus the special tokens of each row"


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


_OPTION_FIELDS: dict[str, Any] = dict.fromkeys(ENCODE_OPTIONS)
_ENCODE_FIELDS: dict[str, Any] = {"texts": None, "pairs": None, **_OPTION_FIELDS}
_DECODE_DEFAULTS: dict[str, Any] = {"ids": None, "skip_special_tokens": True, "clean_up_tokenization_spaces": False}


def _object(body: bytes | memoryview, known: dict[str, Any]) -> dict[str, Any]:
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
    empty batch; accepted sets are remembered with what they do to the output's
    size (clients send the same few again). `max_cells`: one request's budget."""

    def __init__(self, tok: Tokenizer, max_cells: int) -> None:
        self.tok = tok
        self.max_cells = max_cells
        self._accepted: dict[tuple[bool, tuple[tuple[str, Any], ...]], _Shape] = {}

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
        return self.request(texts, pairs, options, len(body))

    def request(self, texts: list[str], pairs: list[str] | None, options: tuple[tuple[str, Any], ...],
                text_bytes: int) -> EncodeRequest:
        """A request of checked `options` (from `options`), refused when its
        output is over budget; `text_bytes` as in `_Shape.cost`."""
        shape = self._check(pairs is not None, options)
        cost = shape.cost(texts, pairs, text_bytes)
        if cost.cells > self.max_cells:
            raise TooLarge(f"the output would hold up to {cost.cells} cells ({shape.explain(cost)}), over the "
                           f"limit of {self.max_cells} cells per request (--max-request-cells)")
        return EncodeRequest(texts, pairs, options, cost)

    def options(self, sent: dict[str, Any], pairs: bool) -> tuple[tuple[str, Any], ...]:
        """The options of one request (fields of `ENCODE_OPTIONS` only), checked
        by the library: the sorted tuple of `EncodeRequest.options`."""
        for name, value in sent.items():
            if name in _BOOL_OPTIONS and not isinstance(value, bool) and value is not None:
                raise BadRequest(f"{name} must be true, false or null, not {value!r}")
            if name in _INT_OPTIONS and isinstance(value, float) and value.is_integer() and abs(value) >= 2**63:
                # JSON integers past 64 bits arrive as floats: let the library say what its limit is.
                sent[name] = value = int(value)
            if value is not None and not isinstance(value, (bool, int, str)):
                raise BadRequest(f"{name} must be a bool, an int, a string or null, not {type(value).__name__}")
        options = tuple(sorted(sent.items()))
        self._check(pairs, options)
        return options

    def options_json(self, body: bytes | memoryview, pairs: bool) -> tuple[tuple[str, Any], ...]:
        """`options` from a JSON object holding only options (the binary
        protocol's options header): the same checks and messages as `/encode`."""
        return self.options(_object(body, _OPTION_FIELDS), pairs)

    def _check(self, pairs: bool, options: tuple[tuple[str, Any], ...]) -> _Shape:
        """What `options` do to the output's size, once the library accepted them."""
        shape = self._accepted.get((pairs, options))
        if shape is not None:
            return shape
        try:
            self.tok([], [] if pairs else None, **dict(options))
            shape = _Shape.of(self.tok, pairs, dict(options))
        except (ValueError, TypeError, GpuTokError) as err:
            raise BadRequest(str(err)) from None
        if len(self._accepted) >= 4096:  # bounded, whatever option sets clients invent
            self._accepted.clear()
        self._accepted[pairs, options] = shape
        return shape


class DecodeParser:
    """`/decode` bodies for one tokenizer: ids must name tokens it has (the
    rule of `gpu-tok decode`; the library itself skips unknown ids, as
    `tokenizers` does)."""

    def __init__(self, tok: Tokenizer) -> None:
        self.size = tok.get_vocab_size()
        ids = tok.get_vocab().values()
        known = bytearray(max(ids, default=-1) + 1)
        for i in ids:
            known[i] = 1
        self._known = bytes(known)

    def __call__(self, body: bytes) -> DecodeRequest:
        f = {**_DECODE_DEFAULTS, **_object(body, _DECODE_DEFAULTS)}
        rows = f["ids"]
        if not isinstance(rows, list):
            raise BadRequest("ids is required: a list of lists of token ids")
        known, n = self._known, len(self._known)
        for i, row in enumerate(rows):
            if not isinstance(row, list):
                raise BadRequest(f"ids[{i}] must be a list of token ids, not {type(row).__name__}")
            for j, value in enumerate(row):
                if type(value) is not int or not 0 <= value <= _MAX_ID:
                    raise BadRequest(f"ids[{i}][{j}] must be a token id (an int in [0, 2**32)), not {value!r}")
                if value >= n or not known[value]:
                    raise BadRequest(f"ids[{i}][{j}]: id {value} is out of range: this tokenizer has no such "
                                     f"token (it has {self.size} tokens)")
        return DecodeRequest(rows, _bool(f, "skip_special_tokens"), _bool(f, "clean_up_tokenization_spaces"))
