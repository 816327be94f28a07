"""`BatchEncoding`: the result of `encode_batch` and of the transformers-style call.

A dict (transformers' keys, in its order: `input_ids`, `token_type_ids`,
`attention_mask`, `special_tokens_mask`, `offset_mapping`, `length`,
`overflow_to_sample_mapping`) whose values are gpu_tok `Tensor`s,
numpy/torch/CuPy arrays or lists, with attribute access (`enc.input_ids`).
Padded batches are `[B, L]`; ragged ones are flat values plus `row_offsets`
(CSR, B + 1 entries). Per-token maps (`word_ids()`, `tokens()`...) come
from the core, computed on first use unless the call made them (`_maps`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import _core
from ._maps import Encoding, Maps

_TENSOR_KINDS = ("np", "pt", "cupy")
# transformers' key order (the core lists attention_mask before token_type_ids).
KEY_ORDER = ("input_ids", "token_type_ids", "attention_mask", "special_tokens_mask", "offset_mapping", "length",
             "overflow_to_sample_mapping")


class TokenSpan(NamedTuple):
    start: int
    end: int


class CharSpan(NamedTuple):
    start: int
    end: int


def _import(module: str, kind: str) -> Any:
    try:
        return __import__(module)
    except ImportError as err:
        raise ImportError(f"return_tensors={kind!r} needs {module}, which is not installed") from err


def check_kind(kind: Any) -> None:
    if kind is not None and kind not in _TENSOR_KINDS:
        raise ValueError(f"return_tensors must be None, 'np', 'pt' or 'cupy', not {kind!r}")


def check_dtype(dtype: Any) -> None:
    if dtype not in ("int64", "int32"):
        raise ValueError(f"dtype must be 'int64' or 'int32', not {dtype!r}")


def convert(tensor: _core.Tensor | None, kind: str | None) -> Any:
    """`tensor` as `kind`: None keeps the gpu_tok Tensor; "np", "pt", "cupy" go
    through DLPack without a copy (numpy copies a GPU tensor to the host: it
    has no device memory)."""
    if tensor is None:
        raise KeyError("this batch has no such field")
    if kind is None:
        return tensor
    if kind == "np":
        return _import("numpy", kind).from_dlpack(tensor.cpu())
    if kind == "pt":
        return _import("torch", kind).from_dlpack(tensor)
    if kind == "cupy":
        return _import("cupy", kind).from_dlpack(tensor)
    check_kind(kind)
    raise AssertionError("unreachable")


def as_tensor(value: Any, kind: str, dtype: str = "int64") -> Any:
    """Python values (lists of rows, or one row) as a `kind` tensor of `dtype`,
    as transformers' `convert_to_tensors` makes them: rows of different lengths
    become a numpy object array of rows, and a ValueError for torch/CuPy."""
    np = _import("numpy", "np")
    if _is_tensor(value, kind):
        return value
    rows = isinstance(value, (list, tuple)) and value and isinstance(value[0], (list, tuple, np.ndarray))
    if rows and len({len(row) for row in value}) > 1:
        if kind != "np":
            raise ValueError(
                "Unable to create tensor: rows have different lengths; pass padding=True (and truncation=True for "
                "rows longer than max_length), or return_tensors=None / 'np'"
            )
        ragged = np.empty(len(value), dtype=object)
        # int64 leaves numpy's own choice (what transformers gets) for values that are not ids;
        # an empty row is int64 like the others (numpy alone, and so transformers, makes it float64).
        ragged[:] = [np.asarray(row, dtype=None if dtype == "int64" and len(row) else dtype) for row in value]
        return ragged
    empty = isinstance(value, (list, tuple)) and (not value or all(isinstance(r, (list, tuple)) and not r
                                                                   for r in value))
    array = np.asarray(value, dtype=dtype if empty or dtype != "int64" else None)
    if kind == "np":
        return array
    if kind == "pt":
        return _import("torch", kind).from_numpy(array)
    return _import("cupy", kind).asarray(array)


def ordered_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` in transformers' key order (`KEY_ORDER`, the one definition of it)."""
    return {name: fields[name] for name in KEY_ORDER if name in fields}


def tensors_of(core: _core.CoreBatch, kind: str, dtype: str) -> dict[str, Any]:
    """Every field as a `[B, L]` (`[B, L, 2]`) tensor of `kind`: zero-copy when
    the rows have one length, else as transformers makes them from lists."""
    width = core.width
    if width is None:
        starts = core.row_offsets().tolist()
        widths = {b - a for a, b in zip(starts, starts[1:], strict=False)}
        if len(widths) > 1:  # ragged: numpy object arrays, or a ValueError for torch/CuPy
            return {name: as_tensor(rows, kind, dtype) for name, rows in core.to_lists().items()}
        width = widths.pop() if widths else 0
    out = {}
    for name in core.keys():
        value = convert(core.tensor(name), kind)
        if core.width is None:  # equal rows stored flat: a view with the batch's shape
            value = value.reshape((core.rows, width, 2) if name == "offset_mapping" else (core.rows, width))
        out[name] = value
    return out


def _is_tensor(value: Any, kind: str) -> bool:
    module = type(value).__module__.split(".")[0]
    return {"np": "numpy", "pt": "torch", "cupy": "cupy"}[kind] == module


class BatchEncoding(dict):
    """Encoded batch: a dict of fields with attribute access.

    `lengths` (tokens per row before padding) and `row_offsets` (CSR starts,
    B + 1 entries) are available as gpu_tok Tensors when the batch came from
    the core.
    """

    def __init__(self, data: dict[str, Any] | None = None, core: _core.CoreBatch | None = None,
                 total_ms: float | None = None, layout: tuple[Any, Any, int | None] | None = None, *,
                 encodings: Maps | list[Any] | None = None,
                 n_sequences: int | None = None, tensor_type: str | None = None, dtype: str = "int64") -> None:
        super().__init__(data or {})
        self._core = core
        self._total_ms = total_ms
        # (lengths, row_offsets, width) kept by an unpickled batch, which has no core.
        self._layout = layout
        # The rows' per-token maps (`_maps.Maps`, computed on first use), a list of encodings, or None.
        self._encodings = encodings
        self._n_sequences = n_sequences
        if tensor_type is not None:
            self.convert_to_tensors(tensor_type, dtype=dtype)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (DataLoader workers): the fields, `lengths`, `row_offsets`, the
        width (so ragged rows can still be told apart), `n_sequences` and the
        per-token maps (`word_ids()`...: computed ones, else what computes
        them, see `_maps`); what needs the core's buffers (`to_numpy()`,
        `to_lists()`...) is not kept."""
        layout = self._layout
        if self._core is not None:
            layout = (self._core.lengths(), self._core.row_offsets(), self._core.width)
        return (_rebuild, (dict(self), self._total_ms, layout, self._n_sequences, self._encodings))

    def __getitem__(self, item: Any) -> Any:
        """A field by name; with an int, that row's `tokenizers.Encoding`; with a
        slice, every field sliced (as transformers)."""
        if isinstance(item, str):
            return dict.__getitem__(self, item)
        if isinstance(item, int) and not isinstance(item, bool):
            return self._require_encodings("indexing by row")[item]
        if isinstance(item, slice):
            return {key: value[item] for key, value in self.items()}
        raise KeyError("a BatchEncoding is indexed by a field name (str), a row (int) or a slice")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return dict.__getitem__(self, name)
        except KeyError:
            raise AttributeError(f"BatchEncoding has no field {name!r}") from None

    @classmethod
    def from_core(cls, core: _core.CoreBatch, total_ms: float | None = None,
                  encodings: Maps | None = None) -> BatchEncoding:
        """Every field of `core` as a gpu_tok Tensor (no copy), in transformers' key order."""
        return cls(ordered_fields({name: core.tensor(name) for name in core.keys()}), core, total_ms,
                   encodings=encodings)

    # -- transformers' BatchEncoding ------------------------------------------------

    @property
    def n_sequences(self) -> int | None:
        """1 for single texts, 2 for pairs, None when unknown."""
        return self._n_sequences

    @property
    def is_fast(self) -> bool:
        """True when the per-token maps (`word_ids()`, `tokens()`...) are available."""
        return self._encodings is not None

    @property
    def data(self) -> dict[str, Any]:
        """The fields (transformers' `BatchEncoding.data`): this dict itself."""
        return self

    @property
    def encodings(self) -> list[Encoding] | None:
        """The rows as `tokenizers.Encoding`-like objects (ids, tokens, offsets,
        word and sequence ids, and their lookups; computed on first use), or
        None for a batch made by `Tokenizer.pad`."""
        if isinstance(self._encodings, Maps):
            return self._encodings.encodings()
        return self._encodings

    def _require_encodings(self, what: str) -> list[Any]:
        encodings = self.encodings
        if encodings is None:
            raise ValueError(f"{what} needs the per-token maps, which a batch made by Tokenizer.pad does not "
                             "have")
        return encodings

    def _row(self, batch_or_index: int, index: int | None) -> tuple[Any, int]:
        """(encoding, index) for the two calling forms `f(index)` and `f(batch, index)`."""
        batch, index = (0, batch_or_index) if index is None else (batch_or_index, index)
        return self._require_encodings("this method")[batch], index

    def tokens(self, batch_index: int = 0) -> list[str]:
        return self._require_encodings("tokens()")[batch_index].tokens

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        return self._require_encodings("sequence_ids()")[batch_index].sequence_ids

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        return self._require_encodings("word_ids()")[batch_index].word_ids

    def token_to_sequence(self, batch_or_token_index: int, token_index: int | None = None) -> int:
        encoding, index = self._row(batch_or_token_index, token_index)
        return encoding.token_to_sequence(index)

    def token_to_word(self, batch_or_token_index: int, token_index: int | None = None) -> int:
        encoding, index = self._row(batch_or_token_index, token_index)
        return encoding.token_to_word(index)

    def word_to_tokens(self, batch_or_word_index: int, word_index: int | None = None,
                       sequence_index: int = 0) -> TokenSpan | None:
        encoding, index = self._row(batch_or_word_index, word_index)
        span = encoding.word_to_tokens(index, sequence_index)
        return TokenSpan(*span) if span is not None else None

    def token_to_chars(self, batch_or_token_index: int, token_index: int | None = None) -> CharSpan | None:
        encoding, index = self._row(batch_or_token_index, token_index)
        span = encoding.token_to_chars(index)
        return CharSpan(*span) if span is not None else None

    def char_to_token(self, batch_or_char_index: int, char_index: int | None = None,
                      sequence_index: int = 0) -> int | None:
        encoding, index = self._row(batch_or_char_index, char_index)
        return encoding.char_to_token(index, sequence_index)

    def word_to_chars(self, batch_or_word_index: int, word_index: int | None = None,
                      sequence_index: int = 0) -> CharSpan:
        encoding, index = self._row(batch_or_word_index, word_index)
        return CharSpan(*encoding.word_to_chars(index, sequence_index))

    def char_to_word(self, batch_or_char_index: int, char_index: int | None = None,
                     sequence_index: int = 0) -> int | None:
        encoding, index = self._row(batch_or_char_index, char_index)
        return encoding.char_to_word(index, sequence_index)

    def convert_to_tensors(self, tensor_type: str | None = None, prepend_batch_axis: bool = False,
                           dtype: str = "int64") -> BatchEncoding:
        """Every value as a `tensor_type` tensor ("np", "pt", "cupy"), in place, as
        transformers. `dtype` (gpu_tok's addition, "int64" or "int32") is the
        type of values made from Python lists; core tensors keep theirs."""
        if tensor_type is None:
            return self
        check_kind(tensor_type)
        for key, value in list(self.items()):
            if isinstance(value, _core.Tensor):
                value = convert(value, tensor_type)
            elif prepend_batch_axis:
                value = [value]
            dict.__setitem__(self, key, as_tensor(value, tensor_type, dtype))
        return self

    def to(self, device: Any, *, non_blocking: bool = False) -> BatchEncoding:
        """Moves torch values to `device` in place and returns this batch (as
        transformers). Anything but a device (a str, an int or a
        `torch.device`), such as a dtype, leaves the batch unchanged, as
        transformers does, so the ids are never cast to floats."""
        if not (isinstance(device, (str, int)) or type(device).__name__ == "device"):
            return self
        moved = {k: v.to(device=device, non_blocking=non_blocking) if callable(getattr(v, "to", None)) else v
                 for k, v in self.items()}
        self.update(moved)
        return self

    # -- gpu_tok's tensors -----------------------------------------------------------

    @property
    def timings(self) -> dict[str, float]:
        """Milliseconds the call took: "total_ms" (wall time of the call), and for
        a CUDA call "kernels_ms" (device time from the first kernel to the end of
        packing, CUDA events), "upload_ms" (laying out and copying inputs) and
        "prepare_ms" (host work on the rows first: normalizing, cutting words
        and pieces, encoding rows the device cannot take), "rows_on_host" (how many rows the
        host encoded whole: text the device cannot take); on the core's host emulator also
        "emulated_device_ms" (the calling thread waiting for the emulated device's streams, which run the
        kernels and copies, or filling its memory)."""
        out: dict[str, float] = {} if self._total_ms is None else {"total_ms": self._total_ms}
        device = self._core.timings() if self._core is not None else None
        out.update(device or {})
        return out

    def _require_core(self) -> _core.CoreBatch:
        if self._core is None:
            raise ValueError("this BatchEncoding holds plain values; it has no tensors to convert")
        return self._core

    @property
    def is_ragged(self) -> bool:
        """True when rows have different lengths (values are flat, see `row_offsets`)."""
        if self._core is None and self._layout is not None:
            return self._layout[2] is None
        return self._require_core().width is None

    @property
    def lengths(self) -> _core.Tensor:
        if self._core is None and self._layout is not None:
            return self._layout[0]
        return self._require_core().lengths()

    @property
    def row_offsets(self) -> _core.Tensor:
        if self._core is None and self._layout is not None:
            return self._layout[1]
        return self._require_core().row_offsets()

    def to_lists(self) -> dict[str, list[Any]]:
        """Every field as per-row Python lists."""
        return ordered_fields(self._require_core().to_lists())

    def _convert_all(self, kind: str) -> dict[str, Any]:
        core = self._require_core()
        return ordered_fields({name: convert(core.tensor(name), kind) for name in core.keys()})

    def to_numpy(self) -> dict[str, Any]:
        """Every field as a numpy array (no copy)."""
        return self._convert_all("np")

    def to_torch(self) -> dict[str, Any]:
        """Every field as a torch tensor (no copy)."""
        return self._convert_all("pt")

    def to_cupy(self) -> dict[str, Any]:
        """Every field as a CuPy array."""
        return self._convert_all("cupy")

    def __repr__(self) -> str:
        return f"BatchEncoding({dict.__repr__(self)})"


def _rebuild(data: dict[str, Any], total_ms: float | None, layout: Any, n_sequences: int | None,
             encodings: Maps | list[Any] | None = None) -> BatchEncoding:
    return BatchEncoding(data, None, total_ms, layout, encodings=encodings, n_sequences=n_sequences)
