"""`gpu_tok.Tokenizer`: load any Hugging Face tokenizer.json and encode exactly
as the `tokenizers` library does, with transformers 5's call and methods on top.

A Tokenizer holds one frozen `TokenizerState` (`gpu_tok._state`: the loaded
core and every setting), so one instance is safe to share across threads.
Settings transformers lets users assign (`pad_token`, `padding_side`,
`chat_template`, `add_tokens`...) build a new state that is swapped in with one
assignment: a call running in another thread sees the old state or the new
one, never a mix.

The class is assembled from one module per responsibility: this one holds the
state, loading, pickling, copies and `tokenizers`' own methods (`encode_batch`,
`with_truncation`...); `_attributes` transformers' settings, `_call` the
transformers-style call, `_chat` chat templates, `_decoding`, `_vocabulary`,
`_files` (model directories on disk) and `_names` transformers' other names.

Naming rule: transformers' names (`__call__`, `encode`, `decode`,
`batch_decode`...) follow transformers' semantics and defaults; `tokenizers`'
names (`encode_batch`, `decode_batch`, `with_truncation`, `with_padding`)
follow `tokenizers`', tokenizer.json's truncation and padding included.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import _data, _maps, _settings
from .._config import ModelConfig
from .._errors import TokenizerNotFoundError
from .._state import TokenizerState
from ..batch import BatchEncoding, check_dtype
from . import _files
from ._attributes import SettingsAttributes
from ._call import TransformersCall, _as_list
from ._chat import ChatTemplates
from ._decoding import Decoding, clean_up_tokenization
from ._names import TransformersNames
from ._vocabulary import Vocabulary

__all__ = ["Tokenizer", "clean_up_tokenization"]


class Tokenizer(TransformersCall, SettingsAttributes, ChatTemplates, Decoding, Vocabulary, TransformersNames):
    """A Hugging Face tokenizer, loaded from tokenizer.json (and its config files)."""

    __slots__ = ("name_or_path",)  # and `_state`, from HoldsState

    def __init__(self, state: TokenizerState, name_or_path: str = "") -> None:
        self._state = state
        self.name_or_path = name_or_path

    # -- the state, read whole ---------------------------------------------------------

    @property
    def _core(self) -> Any:
        return self._state.core

    @property
    def _config(self) -> dict[str, Any]:
        return self._state.config

    @property
    def _model(self) -> ModelConfig:
        return self._state.model

    @property
    def _defaults(self) -> _settings.Defaults:
        return self._state.defaults

    @property
    def _model_kind(self) -> str:
        return self._state.model_kind

    # -- loading -----------------------------------------------------------------

    @classmethod
    def from_str(cls, json_text: str, config: dict[str, Any] | None = None) -> Tokenizer:
        """From the text of a tokenizer.json; `config` is an optional
        tokenizer_config.json as a dict (special tokens, model_max_length...)."""
        if not isinstance(json_text, str):
            raise TypeError(f"json_text must be str, not {type(json_text).__name__}")
        return cls(TokenizerState.from_json(json_text, config))

    @classmethod
    def default(cls) -> Tokenizer:
        """The embedded default tokenizer (Qwen3, byte-level BPE; see data/NOTICE.md)."""
        return cls.from_str(_data.default_tokenizer_json(), _data.default_tokenizer_config())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """From a tokenizer.json file (a directory: use `from_pretrained`)."""
        path = Path(path)
        if path.is_dir():
            raise TokenizerNotFoundError(f"{path} is a directory; use Tokenizer.from_pretrained({str(path)!r})")
        return _files.naming(path, lambda: cls.from_str(_files.read_text(path, "tokenizer.json")))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike[str], **kwargs: Any) -> Tokenizer:
        """From a local model directory: tokenizer.json plus, when present,
        tokenizer_config.json, special_tokens_map.json and chat_template.jinja.
        Keyword arguments override the config (`padding_side="left"`...), as in
        transformers. Never downloads."""
        folder, json_text, config = _files.read_pretrained(Path(directory), kwargs)
        return _files.naming(folder / "tokenizer.json",
                             lambda: cls(TokenizerState.from_json(json_text, config), str(folder)))

    # -- pickling and copies -------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (spawn/forkserver workers, DataLoader): the tokenizer.json text
        and the settings; the other process loads it again. `_unpickle` keeps
        the arguments of pickles made before the state was one object."""
        s = self._state
        return (_unpickle, (s.core.to_json(), s.config, s.defaults, s.model, self.name_or_path))

    def __copy__(self) -> Tokenizer:
        return Tokenizer(self._state, self.name_or_path)  # shares the frozen state; later changes stay apart

    def __deepcopy__(self, memo: dict[int, Any]) -> Tokenizer:
        return self.__copy__()

    # -- tokenizers' settings, as new tokenizers -------------------------------------

    def _with_defaults(self, **changes: Any) -> Tokenizer:
        return Tokenizer(self._state.with_defaults(**changes), self.name_or_path)

    def with_truncation(self, max_length: int | None, strategy: str = "longest_first",
                        side: str = "right") -> Tokenizer:
        """A Tokenizer sharing these tables whose `encode_batch` truncates so by
        default (None: no truncation), as `tokenizers`' `enable_truncation`."""
        if max_length is None:
            return self._with_defaults(file_truncation=None)
        trunc = _settings.truncation(self._state.defaults, strategy, max_length, side, from_file=False)
        return self._with_defaults(file_truncation=trunc)

    def with_padding(self, length: int | None = None, side: str = "right", pad_to_multiple_of: int | None = None,
                     pad_token_id: int | None = None, enabled: bool = True) -> Tokenizer:
        """A Tokenizer sharing these tables whose `encode_batch` pads so by default
        (`length=None`: to the longest row), as `tokenizers`' `enable_padding`."""
        if not enabled:
            return self._with_defaults(file_padding=None)
        pad = _settings.padding(self._state.defaults, "max_length" if length else True, length,
                                pad_to_multiple_of, side, pad_token_id, from_file=False)
        return self._with_defaults(file_padding=pad)

    # -- tokenizers' encode_batch -------------------------------------------------------

    def encode_batch(
        self,
        texts: Sequence[str],
        text_pairs: Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str | None = None,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        truncation_side: str | None = None,
        pad_token_id: int | None = None,
        return_attention_mask: bool = True,
        return_token_type_ids: bool | None = None,
        return_special_tokens_mask: bool = False,
        return_offsets: bool = False,
        device: Any = "auto",
        dtype: str = "int64",
    ) -> BatchEncoding:
        """Encodes a batch (a list of str, or a pyarrow string array, read without
        a copy) into tensors (gpu_tok `Tensor`s: DLPack and buffer protocol).
        `padding`/`truncation` left as None follow tokenizer.json, as
        `tokenizers`' `encode_batch` does; `False` turns them off, `True`,
        "longest", "max_length" and the truncation strategies turn them on.
        `dtype="int32"` gives every field in half the bytes (int64 by default)."""
        check_dtype(dtype)
        state = self._state
        d = state.defaults
        trunc = _settings.truncation(d, truncation, max_length, truncation_side, from_file=True)
        pad = _settings.padding(d, padding, max_length, pad_to_multiple_of, padding_side, pad_token_id,
                                from_file=True)
        core, total_ms = state.encode(texts, text_pairs, add_special_tokens=add_special_tokens, truncation=trunc,
                                      padding=pad, attention_mask=return_attention_mask,
                                      type_ids=return_token_type_ids, special_tokens_mask=return_special_tokens_mask,
                                      offsets=return_offsets, device=device, dtype=dtype)

        source = _maps.Source(state.core, _as_list(texts), None if text_pairs is None else _as_list(text_pairs),
                              dict(add_special_tokens=add_special_tokens, truncation=trunc, padding=pad))
        return BatchEncoding.from_core(core, total_ms, _maps.Maps(None, source))

    # -- gpu_tok -------------------------------------------------------------------

    @property
    def plan(self) -> list[dict[str, str]]:
        """Per pipeline stage: the component, the engine that runs it, and why."""
        keys = ("stage", "component", "path", "reason")
        return [dict(zip(keys, row, strict=True)) for row in self._state.core.plan()]

    def save_pretrained(self, save_directory: str | os.PathLike[str], **kwargs: Any) -> tuple[str, ...]:
        """Writes tokenizer.json, tokenizer_config.json and chat_template.jinja (when
        there is one template), which both gpu_tok and transformers load back."""
        return _files.save_pretrained(self._state, Path(save_directory))

    def __repr__(self) -> str:
        model = self._state.model
        return (f"gpu_tok.Tokenizer(name_or_path={self.name_or_path!r}, vocab_size={self.vocab_size}, "
                f"model_max_length={model.model_max_length}, padding_side={model.padding_side!r}, "
                f"truncation_side={model.truncation_side!r}, special_tokens={self.special_tokens_map})")


def _unpickle(json_text: str, config: dict[str, Any], defaults: _settings.Defaults, model: ModelConfig,
              name_or_path: str) -> Tokenizer:
    loaded = TokenizerState.from_json(json_text, config, keep_added_ids=True)
    return Tokenizer(TokenizerState(loaded.core, loaded.config, model, defaults, loaded.model_kind), name_or_path)
