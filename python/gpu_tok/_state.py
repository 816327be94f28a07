"""The frozen core under the transformers layer: one immutable `TokenizerState`
(the loaded core, the config it came with, the settings read from it and the
call defaults they feed). A settings change builds a new state and the
`Tokenizer` swaps it in with one assignment, so a call running in another
thread reads the old state or the new one, never a mix of the two.

This is also the door to the native module for everything above the core
room: loading, the encode call with its placement and out-of-memory fallback,
decoding, and the other core calls the layers above need.
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, replace
from typing import Any

from . import _config, _core, _maps, _placement, _settings
from ._errors import CpuFallbackWarning, CudaOutOfMemoryError

# The native calls the layers above use (tools, compat), reached through this module.
byte_level_alphabet = _core.byte_level_alphabet
compile_kernels = _core.compile_kernels
prebuilt_kernels = _core.prebuilt_kernels
check_memory = _core.check_memory
CoreBatch = _core.CoreBatch


@dataclass(frozen=True, slots=True)
class TokenizerState:
    """Everything one call reads, fixed once made: `with_*` make new states."""

    core: _core.CoreTokenizer
    config: dict[str, Any]  # as loaded (tokenizer_config.json...); never changed in place
    model: _config.ModelConfig
    defaults: _settings.Defaults
    model_kind: str  # the model component ("BPE", "WordPiece"...)

    @classmethod
    def load(cls, core: _core.CoreTokenizer, config: dict[str, Any] | None = None) -> TokenizerState:
        config = dict(config or {})
        _maps.register(core)
        model = _config.read(config, core.to_json, core.file_padding(), core.file_truncation())
        kind = next((component for stage, component, _, _ in core.plan() if stage == "model"), "")
        defaults = _settings.Defaults(file_truncation=core.file_truncation(), file_padding=core.file_padding(),
                                      **_model_defaults(core, model))
        return cls(core, config, model, defaults, kind)

    @classmethod
    def from_json(cls, json_text: str, config: dict[str, Any] | None = None, *,
                  keep_added_ids: bool = False) -> TokenizerState:
        """`keep_added_ids`: the core's own JSON loaded again (a pickle): added tokens
        keep the ids it gives, even past a gap in the vocabulary."""
        return cls.load(_core.CoreTokenizer.from_str(json_text, keep_added_ids=keep_added_ids), config)

    def with_model(self, **changes: Any) -> TokenizerState:
        """New transformers-style settings, and the call defaults they feed."""
        model = replace(self.model, **changes)
        return replace(self, model=model, defaults=replace(self.defaults, **_model_defaults(self.core, model)))

    def with_defaults(self, **changes: Any) -> TokenizerState:
        return replace(self, defaults=replace(self.defaults, **changes))

    def with_core(self, core: _core.CoreTokenizer, **model_changes: Any) -> TokenizerState:
        """A new core (added tokens, a new post-processor) with these settings
        (the pad token's id may be new)."""
        _maps.register(core)
        return replace(self, core=core).with_model(**model_changes)

    def with_json(self, json_text: str, **model_changes: Any) -> TokenizerState:
        """The core rebuilt from JSON made from its own: added tokens keep their ids."""
        return self.with_core(_core.CoreTokenizer.from_str(json_text, keep_added_ids=True), **model_changes)

    def with_added(self, entries: list[dict[str, Any]], **model_changes: Any) -> tuple[TokenizerState, int]:
        """These added tokens (see `compat._added`) and settings; how many were new."""
        core, added = self.core.with_added_tokens(json.dumps(entries))
        if not added:
            return (self.with_model(**model_changes) if model_changes else self), 0
        return self.with_core(core, **model_changes), added

    # -- calls ---------------------------------------------------------------------

    def encode(self, texts: Any, pairs: Any, *, add_special_tokens: bool, truncation: Any, padding: Any,
               attention_mask: bool, type_ids: bool | None, special_tokens_mask: bool,
               offsets: bool, device: Any, dtype: str = "int64", stacklevel: int = 3) -> tuple[_core.CoreBatch, float]:
        """The core's batch and the call's wall time in milliseconds, on the
        device `device` resolves to (device="auto" falls back to the CPU when
        the GPU runs out of memory: the one place that policy lives)."""
        started = time.perf_counter()
        size = _text_bytes(texts) if _placement.is_auto(device) else None
        placement = _placement.resolve(device, size, packable=pairs is None and not offsets)
        texts, pairs = _one_chunk(texts), _one_chunk(pairs)
        if not isinstance(add_special_tokens, bool):
            raise TypeError("add_special_tokens must be a bool")
        if type_ids is None:
            type_ids = "token_type_ids" in self.model.model_input_names
        core = self.core

        def run(device: str, chunk_bytes: int | None) -> _core.CoreBatch:
            return core.encode_batch(
                texts, pairs, add_special_tokens=add_special_tokens, truncation=truncation,
                padding=padding, attention_mask=attention_mask, type_ids=type_ids,
                special_tokens_mask=special_tokens_mask, offsets=offsets, device=device, dtype=dtype,
                chunk_bytes=chunk_bytes,
            )

        try:
            batch = run(placement.core, placement.chunk_bytes)
        except CudaOutOfMemoryError as err:
            if not placement.to_host:  # device="cuda" asked for GPU memory: say it has none
                raise
            # device="auto" only promised host results: the CPU gives the same ones
            warnings.warn(f"gpu_tok: the GPU ran out of memory ({err}); device='auto' computed this call "
                          "on the CPU", CpuFallbackWarning, stacklevel=stacklevel)
            batch = run("cpu", None)
        if placement.to_host:
            batch = batch.cpu()
        return batch, (time.perf_counter() - started) * 1e3

    def decode_rows(self, rows: list[Any], skip_special_tokens: bool, clean_up: bool) -> list[str]:
        return _core.decode_rows(self.core, rows, skip_special_tokens, clean_up)

    def added_token_flags(self) -> list[tuple[int, str, bool, bool, bool, bool, bool]]:
        return list(_core.added_token_flags(self.core))

    def save_model(self, directory: str, prefix: str | None) -> list[str]:
        return list(_core.save_model(self.core, directory, prefix))


class HoldsState:
    """The base of the transformers layer's mixins: the one slot they all read
    (whole, once per call) and replace (whole, in one assignment)."""

    __slots__ = ("_state",)
    _state: TokenizerState


def _model_defaults(core: _core.CoreTokenizer, model: _config.ModelConfig) -> dict[str, Any]:
    """The call defaults that follow the transformers-style settings."""
    pad = model.special.get("pad_token")
    return dict(
        padding_side=model.padding_side, truncation_side=model.truncation_side, pad_token=pad,
        pad_token_id=core.token_to_id(pad) if pad is not None else None,
        model_max_length=model.model_max_length if model.model_max_length <= _config.LARGE_INTEGER else None,
    )


def _text_bytes(texts: Any) -> int | None:
    """About how much text a batch holds (for device="auto"), or None if unknown."""
    if isinstance(texts, str):
        return len(texts)
    if isinstance(texts, (list, tuple)):
        return sum(len(t) for t in texts if isinstance(t, str))
    nbytes = getattr(texts, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else None


def _one_chunk(texts: Any) -> Any:
    """A pyarrow ChunkedArray as one Array (the core reads Arrow arrays without a copy)."""
    return texts.combine_chunks() if hasattr(texts, "combine_chunks") else texts
