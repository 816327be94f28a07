"""Per-token maps of a batch: `BatchEncoding.encodings`, `word_ids()`,
`tokens()`, `char_to_token()`... as transformers gives them, computed by the
core (`_core.encode_rich`: the crate's own word ids and offsets, the fast
model where the plan has one).

A call that needs them anyway (overflowing windows, pre-split words,
`split_special_tokens`) keeps them from the start. Any other call computes
them on first use from its inputs and settings (`Source`), so a plain call
pays nothing for them. Pickled, a batch carries its maps, or else its
inputs and settings with the fingerprint of its tokenizer: the receiving
process (a DataLoader's main process) computes them with a live tokenizer of
the same fingerprint (`register`: every `Tokenizer` is).
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from typing import Any

from . import _core

_live: weakref.WeakSet[_core.CoreTokenizer] = weakref.WeakSet()
_fingerprints: weakref.WeakKeyDictionary[_core.CoreTokenizer, str] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def register(core: _core.CoreTokenizer) -> None:
    """Makes `core` findable by unpickled batches that need its maps."""
    _live.add(core)


def fingerprint(core: _core.CoreTokenizer) -> str:
    """A digest of the tokenizer.json `core` encodes with (computed once per core)."""
    with _lock:
        known = _fingerprints.get(core)
    if known is None:
        known = hashlib.blake2b(core.to_json().encode("utf-8"), digest_size=16).hexdigest()
        with _lock:
            _fingerprints[core] = known
    return known


def _find(wanted: str) -> _core.CoreTokenizer | None:
    for core in list(_live):
        if fingerprint(core) == wanted:
            return core
    return None


def encode(core: _core.CoreTokenizer, texts: Any, pairs: Any, **options: Any) -> tuple[_core.CoreBatch, Maps, float]:
    """The core's rich path: the batch, its maps kept, and the call's wall time in ms."""
    started = time.perf_counter()
    as_list = (lambda v: v.to_pylist()) if hasattr(texts, "to_pylist") else (lambda v: v)
    batch, rows = _core.encode_rich(core, as_list(texts), None if pairs is None else as_list(pairs), **options)
    return batch, Maps(rows), (time.perf_counter() - started) * 1e3


class Source:
    """What recomputes a batch's maps: the tokenizer's core (or, once
    unpickled, its fingerprint), the inputs and the settings of the call."""

    def __init__(self, core: _core.CoreTokenizer | None, texts: list[Any], pairs: list[Any] | None,
                 options: dict[str, Any], fingerprint: str | None = None) -> None:
        self._core = core
        self._fingerprint = fingerprint
        self._texts, self._pairs, self._options = texts, pairs, options

    def compute(self) -> _core.CoreMaps:
        core = self._core
        if core is None:
            assert self._fingerprint is not None
            core = _find(self._fingerprint)
            if core is None:
                raise ValueError(
                    "the per-token maps of this unpickled batch are computed by the tokenizer that made it, and "
                    "none of this process's tokenizers is that one: load it here first (gpu_tok.Tokenizer."
                    "from_pretrained(...)), or use the maps (batch.encodings) before pickling the batch")
        return _core.encode_rich(core, self._texts, self._pairs, **self._options)[1]

    def __reduce__(self) -> tuple[Any, ...]:
        known = self._fingerprint if self._core is None else fingerprint(self._core)
        return (Source, (None, self._texts, self._pairs, self._options, known))


class Maps:
    """A batch's maps: the core's rows, computed from `source` on first use."""

    def __init__(self, rows: _core.CoreMaps | None, source: Source | None = None) -> None:
        self._rows = rows
        self._source = source
        self._lock = threading.Lock()
        self._encodings: list[Encoding] | None = None

    @property
    def rows(self) -> _core.CoreMaps:
        if self._rows is None:
            with self._lock:
                if self._rows is None:
                    assert self._source is not None
                    self._rows = self._source.compute()
        return self._rows

    def encodings(self) -> list[Encoding]:
        if self._encodings is None:
            rows = self.rows
            samples = rows.samples()
            # A main row's overflowing rows are the rows after it from the same sample.
            starts = [i for i in range(len(samples)) if i == 0 or samples[i] != samples[i - 1]]
            ends = starts[1:] + [len(samples)]
            out: list[Encoding] = [None] * len(samples)  # type: ignore[list-item]
            for start, end in zip(starts, ends, strict=True):
                out[start] = Encoding(rows, start, range(start + 1, end))
                for k in range(start + 1, end):
                    out[k] = Encoding(rows, k, range(0))
            self._encodings = out
        return self._encodings

    def __reduce__(self) -> tuple[Any, ...]:
        if self._rows is not None or self._source is None:
            return (Maps, (self._rows,))
        return (Maps, (None, self._source))


class Encoding:
    """One row of a batch, as a `tokenizers.Encoding` (read-only): ids, tokens,
    offsets, masks, word and sequence ids, and the crate's lookups."""

    __slots__ = ("_rows", "_row", "_overflow")

    def __init__(self, rows: _core.CoreMaps, row: int, overflow: range) -> None:
        self._rows, self._row, self._overflow = rows, row, overflow

    @property
    def ids(self) -> list[int]:
        return self._rows.ids(self._row)

    @property
    def type_ids(self) -> list[int]:
        return self._rows.type_ids(self._row)

    @property
    def tokens(self) -> list[str]:
        return self._rows.tokens(self._row)

    @property
    def offsets(self) -> list[tuple[int, int]]:
        return self._rows.offsets(self._row)

    @property
    def attention_mask(self) -> list[int]:
        return self._rows.attention_mask(self._row)

    @property
    def special_tokens_mask(self) -> list[int]:
        return self._rows.special_tokens_mask(self._row)

    @property
    def word_ids(self) -> list[int | None]:
        return self._rows.word_ids(self._row)

    @property
    def words(self) -> list[int | None]:
        return self.word_ids

    @property
    def sequence_ids(self) -> list[int | None]:
        return self._rows.sequence_ids(self._row)

    @property
    def n_sequences(self) -> int:
        return self._rows.n_sequences(self._row)

    @property
    def overflowing(self) -> list[Encoding]:
        """The windows after this one (a main row's; none for a window)."""
        return [Encoding(self._rows, k, range(0)) for k in self._overflow]

    def __len__(self) -> int:
        return self._rows.length(self._row)

    def token_to_sequence(self, token_index: int) -> int | None:
        return self._rows.token_to_sequence(self._row, token_index)

    def token_to_chars(self, token_index: int) -> tuple[int, int] | None:
        return self._rows.token_to_chars(self._row, token_index)

    def token_to_word(self, token_index: int) -> int | None:
        return self._rows.token_to_word(self._row, token_index)

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        return self._rows.word_to_tokens(self._row, word_index, sequence_index)

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        return self._rows.word_to_chars(self._row, word_index, sequence_index)

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> int | None:
        return self._rows.char_to_token(self._row, char_pos, sequence_index)

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> int | None:
        return self._rows.char_to_word(self._row, char_pos, sequence_index)

    def __repr__(self) -> str:
        return (f"Encoding(num_tokens={len(self)}, attributes=[ids, type_ids, tokens, offsets, attention_mask, "
                "special_tokens_mask, overflowing])")
