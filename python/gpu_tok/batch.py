"""`BatchEncoding`: the result of `encode_batch` and of the transformers-style call.

A dict (same keys as transformers' BatchEncoding: `input_ids`,
`attention_mask`, `token_type_ids`, `offset_mapping`, `special_tokens_mask`)
whose values are gpu_tok `Tensor`s, numpy/torch/CuPy arrays or lists, with
attribute access (`enc.input_ids`). Padded batches are `[B, L]`; ragged ones
are flat values plus `row_offsets` (CSR, B + 1 entries).
"""

from __future__ import annotations

from typing import Any

from . import _core

_TENSOR_KINDS = ("np", "pt", "cupy")


def _import(module: str, kind: str) -> Any:
    try:
        return __import__(module)
    except ImportError as err:
        raise ImportError(f"return_tensors={kind!r} needs {module}, which is not installed") from err


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
    raise ValueError(f"return_tensors must be None, 'np', 'pt' or 'cupy', not {kind!r}")


class BatchEncoding(dict):
    """Encoded batch: a dict of fields with attribute access.

    `lengths` (tokens per row before padding) and `row_offsets` (CSR starts,
    B + 1 entries) are always available as gpu_tok Tensors.
    """

    def __init__(self, data: dict[str, Any], core: _core.CoreBatch | None = None,
                 total_ms: float | None = None, layout: tuple[Any, Any, int | None] | None = None) -> None:
        super().__init__(data)
        self._core = core
        self._total_ms = total_ms
        # (lengths, row_offsets, width) kept by an unpickled batch, which has no core.
        self._layout = layout

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (DataLoader workers): the fields, `lengths`, `row_offsets` and
        the width (so ragged rows can still be told apart); conversions that need
        the core's buffers (`to_numpy()`, `to_lists()`...) are not kept."""
        layout = self._layout
        if self._core is not None:
            layout = (self._core.lengths(), self._core.row_offsets(), self._core.width)
        return (BatchEncoding, (dict(self), None, self._total_ms, layout))

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"BatchEncoding has no field {name!r}") from None

    @classmethod
    def from_core(cls, core: _core.CoreBatch, total_ms: float | None = None) -> BatchEncoding:
        """Every field of `core` as a gpu_tok Tensor (no copy)."""
        return cls({name: core.tensor(name) for name in core.keys()}, core, total_ms)

    @property
    def timings(self) -> dict[str, float]:
        """Milliseconds the call took: "total_ms" (wall time of the call), and for
        a CUDA call "kernels_ms" (device time from the first kernel to the end of
        packing, CUDA events) and "upload_ms" (laying out and copying inputs)."""
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
        return dict(self._require_core().to_lists())

    def _convert_all(self, kind: str) -> dict[str, Any]:
        core = self._require_core()
        return {name: convert(core.tensor(name), kind) for name in core.keys()}

    def to_numpy(self) -> dict[str, Any]:
        """Every field as a numpy array (no copy)."""
        return self._convert_all("np")

    def to_torch(self) -> dict[str, Any]:
        """Every field as a torch tensor (no copy)."""
        return self._convert_all("pt")

    def to_cupy(self) -> dict[str, Any]:
        """Every field as a CuPy array."""
        return self._convert_all("cupy")

    def to(self, device: Any) -> BatchEncoding:
        """Moves torch values to `device` (like transformers' BatchEncoding.to)."""
        moved = {k: v.to(device) if hasattr(v, "to") else v for k, v in self.items()}
        return BatchEncoding(moved, self._core, self._total_ms, self._layout)

    def __repr__(self) -> str:
        return f"BatchEncoding({dict.__repr__(self)})"
