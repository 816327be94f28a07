"""`gpu_tok.Tokenizer`: load any Hugging Face tokenizer.json and encode exactly
as the `tokenizers` library does, with transformers 5's call and methods on top.

The loaded tables never change: one instance is safe to share across threads.
Settings transformers lets users assign (`pad_token`, `padding_side`,
`chat_template`...) are attributes here too; each assignment swaps one
immutable value, so a call running in another thread sees the old setting or
the new one, never a mix. `add_tokens` / `add_special_tokens` swap in a
reloaded core the same way.

Naming rule: transformers' names (`__call__`, `encode`, `decode`,
`batch_decode`...) follow transformers' semantics and defaults; `tokenizers`'
names (`encode_batch`, `decode_batch`, `with_truncation`, `with_padding`)
follow `tokenizers`', tokenizer.json's truncation and padding included.
"""

from __future__ import annotations

import json
import numbers
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import _added, _chat, _compat, _config, _core, _maps, _pad, _placement, _settings
from ._errors import (
    CpuFallbackWarning,
    CudaOutOfMemoryError,
    InvalidInputError,
    InvalidTokenizerError,
    TokenizerNotFoundError,
    UnsupportedTokenizerError,
)
from .batch import KEY_ORDER, BatchEncoding, as_tensor, check_dtype, check_kind, convert

_OPTIONAL_KEYS = ("token_type_ids", "attention_mask", "special_tokens_mask", "offset_mapping", "length")


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenizerNotFoundError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise TokenizerNotFoundError(f"{what} expected at {path}, found a directory") from None
    except UnicodeDecodeError as err:
        raise InvalidTokenizerError(f"{path} is not UTF-8 text: {err}") from None
    except OSError as err:  # a symlink loop, no permission, an I/O error...
        raise TokenizerNotFoundError(f"{what} at {path} cannot be read: {err.strerror or err}") from err


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(_read_text(path, what))
    except json.JSONDecodeError as err:
        raise InvalidTokenizerError(f"{path} is not valid JSON: {err}") from None
    except RecursionError as err:
        raise InvalidTokenizerError(f"{path} is nested too deeply to be a {what}") from err


def _chat_templates(directory: Path) -> str | dict[str, str] | None:
    """chat_template.jinja and chat_templates/*.jinja, as transformers 5 saves them."""
    single = directory / "chat_template.jinja"
    folder = directory / "chat_templates"
    named = {p.stem: _read_text(p, p.name) for p in sorted(folder.glob("*.jinja"))} if folder.is_dir() else {}
    if single.is_file():
        if not named:
            return _read_text(single, single.name)
        named["default"] = _read_text(single, single.name)
    return named or None


def clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization`: drops the spaces before punctuation
    and inside English contractions that word-level decoders leave."""
    for before, after in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
                          (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"),
                          (" 're", "'re")):
        text = text.replace(before, after)
    return text


def _ids(values: Any, what: str) -> list[int] | tuple[int, ...]:
    """Token ids as a list or tuple for the core, which checks every item (in
    Rust: a Python loop here made decoding 1.7x slower than `tokenizers`)."""
    if isinstance(values, (list, tuple)):
        return values
    if hasattr(values, "tolist"):
        values = values.tolist()
        return values if isinstance(values, list) else [values]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be a sequence of ints, not {type(values).__name__}")
    return list(values)


def _plain_ints(row: Sequence[Any]) -> list[Any]:
    """numpy/torch integer scalars as ints (the core takes Python ints only)."""
    return [int(i) if isinstance(i, numbers.Integral) and not isinstance(i, bool) else i for i in row]


def _text_bytes(texts: Any) -> int | None:
    """About how much text a batch holds (for device="auto"), or None if unknown."""
    if isinstance(texts, str):
        return len(texts)
    if isinstance(texts, (list, tuple)):
        return sum(len(t) for t in texts if isinstance(t, str))
    nbytes = getattr(texts, "nbytes", None)
    return nbytes if isinstance(nbytes, int) else None


def _naming(path: Path, load: Callable[[], Tokenizer]) -> Tokenizer:
    """`load()`, with `path` in the message of a tokenizer.json the core refuses."""
    try:
        return load()
    except (InvalidTokenizerError, UnsupportedTokenizerError) as err:
        if str(path) in str(err):
            raise
        raise type(err)(f"{path}: {err}") from err


def _one_chunk(texts: Any) -> Any:
    """A pyarrow ChunkedArray as one Array (the core reads Arrow arrays without a copy)."""
    return texts.combine_chunks() if hasattr(texts, "combine_chunks") else texts


def _as_list(texts: Any) -> list[Any]:
    return texts.to_pylist() if hasattr(texts, "to_pylist") else list(texts)


def _is_words(value: Any) -> bool:
    """A pre-split text: a list or tuple of str."""
    return isinstance(value, (list, tuple)) and all(isinstance(w, str) for w in value)


class Tokenizer(_compat.TransformersNames):
    """A Hugging Face tokenizer, loaded from tokenizer.json (and its config files)."""

    __slots__ = ("_config", "_model", "_model_kind", "name_or_path")  # and _compat's

    def __init__(self, core: _core.CoreTokenizer, config: dict[str, Any] | None = None,
                 name_or_path: str = "") -> None:
        self._core = core
        self._config = dict(config or {})
        self.name_or_path = name_or_path
        self._model = _config.read(self._config, core.to_json, core.file_padding(), core.file_truncation())
        self._defaults = self._make_defaults()
        self._model_kind = self._model_component()
        _maps.register(core)

    # -- loading -----------------------------------------------------------------

    @classmethod
    def from_str(cls, json_text: str, config: dict[str, Any] | None = None) -> Tokenizer:
        """From the text of a tokenizer.json; `config` is an optional
        tokenizer_config.json as a dict (special tokens, model_max_length...)."""
        if not isinstance(json_text, str):
            raise TypeError(f"json_text must be str, not {type(json_text).__name__}")
        return cls(_core.CoreTokenizer.from_str(json_text), config)

    @classmethod
    def default(cls) -> Tokenizer:
        """The embedded default tokenizer (Qwen3, byte-level BPE; see data/NOTICE.md)."""
        from . import _data

        return cls.from_str(_data.default_tokenizer_json(), _data.default_tokenizer_config())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """From a tokenizer.json file (a directory: use `from_pretrained`)."""
        path = Path(path)
        if path.is_dir():
            raise TokenizerNotFoundError(f"{path} is a directory; use Tokenizer.from_pretrained({str(path)!r})")
        return _naming(path, lambda: cls.from_str(_read_text(path, "tokenizer.json")))

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike[str], **kwargs: Any) -> Tokenizer:
        """From a local model directory: tokenizer.json plus, when present,
        tokenizer_config.json, special_tokens_map.json and chat_template.jinja.
        Keyword arguments override the config (`padding_side="left"`...), as in
        transformers. Never downloads."""
        directory = Path(directory)
        if directory.is_file():
            directory = directory.parent
        if not directory.is_dir():
            raise TokenizerNotFoundError(
                f"{str(directory)!r} is not a local directory; gpu_tok works offline and never "
                "downloads: pass the directory holding tokenizer.json"
            )
        json_text = _read_text(directory / "tokenizer.json", "tokenizer.json")
        config: dict[str, Any] = {}
        for name in ("special_tokens_map.json", "tokenizer_config.json"):
            if (directory / name).is_file():
                loaded = _read_json(directory / name, name)
                if not isinstance(loaded, dict):
                    raise InvalidTokenizerError(f"{directory / name} must hold a JSON object")
                config.update({k: v for k, v in loaded.items() if v is not None or k not in config})
        templates = _chat_templates(directory)
        if templates is not None:
            config["chat_template"] = templates
        config.update(kwargs)

        def load() -> Tokenizer:
            return cls(_core.CoreTokenizer.from_str(json_text), config, str(directory))

        return _naming(directory / "tokenizer.json", load)

    def _make_defaults(self) -> _settings.Defaults:
        m = self._model
        pad = m.special.get("pad_token")
        return _settings.Defaults(
            file_truncation=self._core.file_truncation(),
            file_padding=self._core.file_padding(),
            model_max_length=m.model_max_length if m.model_max_length <= _config.LARGE_INTEGER else None,
            pad_token_id=self._core.token_to_id(pad) if pad is not None else None,
            pad_token=pad,
            padding_side=m.padding_side,
            truncation_side=m.truncation_side,
        )

    def _model_component(self) -> str:
        return next((component for stage, component, _, _ in self._core.plan() if stage == "model"), "")

    def _set_model(self, **changes: Any) -> None:
        """Replaces transformers-style settings (and the call defaults they feed)."""
        self._model = replace(self._model, **changes)
        pad = self._model.special.get("pad_token")
        self._defaults = replace(
            self._defaults, padding_side=self._model.padding_side, truncation_side=self._model.truncation_side,
            pad_token=pad, pad_token_id=self._core.token_to_id(pad) if pad is not None else None,
            model_max_length=self._model.model_max_length if self._model.model_max_length <= _config.LARGE_INTEGER
            else None,
        )

    # -- pickling and copies -------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (spawn/forkserver workers, DataLoader): the tokenizer.json text
        and the settings; the other process loads it again."""
        return (_unpickle, (self._core.to_json(), self._config, self._defaults, self._model, self.name_or_path))

    def __copy__(self) -> Tokenizer:
        return self._with_defaults()  # shares the immutable tables; settings set later stay apart

    def __deepcopy__(self, memo: dict[int, Any]) -> Tokenizer:
        return self._with_defaults()

    # -- settings as new tokenizers ------------------------------------------------

    def _with_defaults(self, **changes: Any) -> Tokenizer:
        other = object.__new__(Tokenizer)
        other._core, other._config, other._model = self._core, self._config, self._model
        other._model_kind, other.name_or_path = self._model_kind, self.name_or_path
        other._defaults = replace(self._defaults, **changes)
        return other

    def with_truncation(self, max_length: int | None, strategy: str = "longest_first",
                        side: str = "right") -> Tokenizer:
        """A Tokenizer sharing these tables whose `encode_batch` truncates so by
        default (None: no truncation), as `tokenizers`' `enable_truncation`."""
        if max_length is None:
            return self._with_defaults(file_truncation=None)
        trunc = _settings.truncation(self._defaults, strategy, max_length, side, from_file=False)
        return self._with_defaults(file_truncation=trunc)

    def with_padding(self, length: int | None = None, side: str = "right", pad_to_multiple_of: int | None = None,
                     pad_token_id: int | None = None, enabled: bool = True) -> Tokenizer:
        """A Tokenizer sharing these tables whose `encode_batch` pads so by default
        (`length=None`: to the longest row), as `tokenizers`' `enable_padding`."""
        if not enabled:
            return self._with_defaults(file_padding=None)
        pad = _settings.padding(self._defaults, "max_length" if length else True, length,
                                pad_to_multiple_of, side, pad_token_id, from_file=False)
        return self._with_defaults(file_padding=pad)

    # -- transformers' attributes --------------------------------------------------

    @property
    def is_fast(self) -> bool:
        return True

    @property
    def padding_side(self) -> str:
        """"right" or "left": tokenizer_config.json, else tokenizer.json's padding, else
        the tokenizer class's default (Llama, Gemma: "left"). Settable."""
        return self._model.padding_side

    @padding_side.setter
    def padding_side(self, value: str) -> None:
        if value not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', not {value!r}")
        self._set_model(padding_side=value)

    @property
    def truncation_side(self) -> str:
        return self._model.truncation_side

    @truncation_side.setter
    def truncation_side(self, value: str) -> None:
        if value not in ("right", "left"):
            raise ValueError(f"truncation_side must be 'right' or 'left', not {value!r}")
        self._set_model(truncation_side=value)

    @property
    def model_max_length(self) -> int:
        """The config's model_max_length; int(1e30) (transformers' "no limit") when unset."""
        return self._model.model_max_length

    @model_max_length.setter
    def model_max_length(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"model_max_length must be a non-negative int, not {value!r}")
        self._set_model(model_max_length=value)

    @property
    def model_input_names(self) -> list[str]:
        """Fields the model takes; decides whether `token_type_ids` and
        `attention_mask` are returned by default. Settable."""
        return list(self._model.model_input_names)

    @model_input_names.setter
    def model_input_names(self, value: Sequence[str]) -> None:
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise TypeError("model_input_names must be a list of str")
        self._set_model(model_input_names=tuple(value))

    @property
    def clean_up_tokenization_spaces(self) -> bool:
        return self._model.clean_up_tokenization_spaces

    @clean_up_tokenization_spaces.setter
    def clean_up_tokenization_spaces(self, value: bool) -> None:
        self._set_model(clean_up_tokenization_spaces=bool(value))

    @property
    def split_special_tokens(self) -> bool:
        """When True, special tokens in the text are encoded as plain text. Settable."""
        return self._model.split_special_tokens

    @split_special_tokens.setter
    def split_special_tokens(self, value: bool) -> None:
        self._set_model(split_special_tokens=bool(value))

    @property
    def chat_template(self) -> str | dict[str, str] | None:
        """The Jinja chat template(s): tokenizer_config.json's `chat_template`, or
        chat_template.jinja. Settable."""
        return self._model.chat_template

    @chat_template.setter
    def chat_template(self, value: str | dict[str, str] | None) -> None:
        if value is not None and not isinstance(value, (str, dict)):
            raise TypeError("chat_template must be a str, a dict of str or None")
        self._set_model(chat_template=value)

    @property
    def pad_token_type_id(self) -> int:
        return 0

    @property
    def extra_special_tokens(self) -> list[str]:
        return list(self._model.extra_special)

    @extra_special_tokens.setter
    def extra_special_tokens(self, value: Sequence[str] | None) -> None:
        tokens = [] if value is None else [_config.token_content(v) or str(v) for v in value]
        self._set_model(extra_special=tuple(tokens))

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens that are set, as transformers 5 lists them."""
        return {name: token for name, token in self._model.special.items() if token is not None}

    @property
    def all_special_tokens(self) -> list[str]:
        """Named special tokens, then `extra_special_tokens`, without repeats."""
        return list(dict.fromkeys([*self.special_tokens_map.values(), *self._model.extra_special]))

    @property
    def all_special_ids(self) -> list[int | None]:
        return self.convert_tokens_to_ids(self.all_special_tokens)

    def get_special_tokens_mask(self, token_ids_0: Sequence[int], token_ids_1: Sequence[int] | None = None,
                                already_has_special_tokens: bool = False) -> list[int]:
        """1 for the ids of `all_special_ids`, else 0 (`already_has_special_tokens=True` only)."""
        if not already_has_special_tokens or token_ids_1 is not None:
            raise ValueError("get_special_tokens_mask needs already_has_special_tokens=True and one sequence; "
                             "use return_special_tokens_mask=True when encoding")
        special = set(self.all_special_ids)
        return [1 if int(i) in special else 0 for i in token_ids_0]

    def __len__(self) -> int:
        """Vocabulary size with the added tokens."""
        return self._core.get_vocab_size(True)

    @property
    def vocab_size(self) -> int:
        """Vocabulary size without the added tokens."""
        return self._core.get_vocab_size(False)

    @property
    def max_len_single_sentence(self) -> int:
        return self.model_max_length - self.num_special_tokens_to_add(False)

    @property
    def max_len_sentences_pair(self) -> int:
        return self.model_max_length - self.num_special_tokens_to_add(True)

    # -- encoding ------------------------------------------------------------------

    def _run(self, texts: Any, pairs: Any, *, add_special_tokens: bool, truncation: Any, padding: Any,
             attention_mask: bool, type_ids: bool | None, special_tokens_mask: bool,
             offsets: bool, device: Any, dtype: str = "int64") -> tuple[_core.CoreBatch, float]:
        """The core's batch and the call's wall time in milliseconds."""
        started = time.perf_counter()
        size = _text_bytes(texts) if _placement.is_auto(device) else None
        placement = _placement.resolve(device, size, packable=pairs is None and not offsets)
        texts, pairs = _one_chunk(texts), _one_chunk(pairs)
        if not isinstance(add_special_tokens, bool):
            raise TypeError("add_special_tokens must be a bool")
        if type_ids is None:
            type_ids = self._uses_token_type_ids()

        def run(device: str, chunk_bytes: int | None) -> _core.CoreBatch:
            return self._core.encode_batch(
                texts, pairs, add_special_tokens=add_special_tokens, truncation=truncation,
                padding=padding, attention_mask=attention_mask, type_ids=type_ids,
                special_tokens_mask=special_tokens_mask, offsets=offsets, device=device, dtype=dtype,
                chunk_bytes=chunk_bytes,
            )

        try:
            core = run(placement.core, placement.chunk_bytes)
        except CudaOutOfMemoryError as err:
            if not placement.to_host:  # device="cuda" asked for GPU memory: say it has none
                raise
            # device="auto" only promised host results: the CPU gives the same ones
            warnings.warn(f"gpu_tok: the GPU ran out of memory ({err}); device='auto' computed this call "
                          "on the CPU", CpuFallbackWarning, stacklevel=3)
            core = run("cpu", None)
        if placement.to_host:
            core = core.cpu()
        return core, (time.perf_counter() - started) * 1e3

    def _uses_token_type_ids(self) -> bool:
        return "token_type_ids" in self._model.model_input_names

    def encode(self, text: str | Sequence[str], text_pair: str | Sequence[str] | None = None,
               add_special_tokens: bool = True, padding: bool | str = False, truncation: bool | str | None = None,
               max_length: int | None = None, stride: int = 0, padding_side: str | None = None,
               return_tensors: str | None = None, **kwargs: Any) -> Any:
        """Token ids of `text` (and `text_pair`), as transformers' `encode`: the
        arguments alone decide (tokenizer.json's truncation and padding do not apply)."""
        if not isinstance(text, (str, list, tuple)):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        return self(text, text_pair, add_special_tokens=add_special_tokens, padding=padding, truncation=truncation,
                    max_length=max_length, stride=stride, padding_side=padding_side, return_tensors=return_tensors,
                    **kwargs)["input_ids"]

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
        d = self._defaults
        trunc = _settings.truncation(d, truncation, max_length, truncation_side, from_file=True)
        pad = _settings.padding(d, padding, max_length, pad_to_multiple_of, padding_side, pad_token_id,
                                from_file=True)
        core, total_ms = self._run(texts, text_pairs, add_special_tokens=add_special_tokens, truncation=trunc,
                                   padding=pad, attention_mask=return_attention_mask,
                                   type_ids=return_token_type_ids, special_tokens_mask=return_special_tokens_mask,
                                   offsets=return_offsets, device=device, dtype=dtype)

        source = _maps.Source(self._core, _as_list(texts), None if text_pairs is None else _as_list(text_pairs),
                              dict(add_special_tokens=add_special_tokens, truncation=trunc, padding=pad))
        return BatchEncoding.from_core(core, total_ms, _maps.Maps(None, source))

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
        if text is None and text_target is None:
            raise TypeError("pass text (a str or a list of str), or text_target")
        check_kind(return_tensors)
        check_dtype(dtype)
        options = dict(add_special_tokens=add_special_tokens, padding=padding, truncation=truncation, stride=stride,
                       is_split_into_words=is_split_into_words, pad_to_multiple_of=pad_to_multiple_of,
                       padding_side=padding_side, truncation_side=truncation_side, pad_token_id=pad_token_id,
                       return_tensors=return_tensors, return_token_type_ids=return_token_type_ids,
                       return_attention_mask=return_attention_mask,
                       return_overflowing_tokens=return_overflowing_tokens,
                       return_special_tokens_mask=return_special_tokens_mask,
                       return_offsets_mapping=return_offsets_mapping, return_length=return_length,
                       split_special_tokens=self.split_special_tokens if split_special_tokens is None
                       else split_special_tokens, device=device, dtype=dtype)
        encodings = None if text is None else self._encode(text, text_pair, max_length=max_length, **options)
        if text_target is None:
            assert encodings is not None
            return encodings
        target_length = max_target_length if max_target_length is not None else max_length
        targets = self._encode(text_target, text_pair_target, max_length=target_length, **options)
        if encodings is None:
            return targets
        dict.__setitem__(encodings, "labels", targets["input_ids"])
        return encodings

    def _encode(self, text: Any, pair: Any, *, add_special_tokens: bool, padding: Any, truncation: Any,
                max_length: int | None, stride: int, is_split_into_words: bool, pad_to_multiple_of: int | None,
                padding_side: str | None, truncation_side: str | None, pad_token_id: int | None,
                return_tensors: str | None, return_token_type_ids: bool | None, return_attention_mask: bool | None,
                return_overflowing_tokens: bool, return_special_tokens_mask: bool, return_offsets_mapping: bool,
                return_length: bool, split_special_tokens: bool, device: Any, dtype: str) -> BatchEncoding:
        """One of `__call__`'s encodings (inputs, or targets)."""
        if not isinstance(add_special_tokens, bool):
            raise TypeError("add_special_tokens must be a bool")
        if is_split_into_words:
            single = _is_words(text)
        else:
            single = isinstance(text, str)
        if single:
            if pair is not None and not isinstance(pair, str) and not (is_split_into_words and _is_words(pair)):
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
        n_special = self._core.num_special_tokens_to_add(pairs is not None) if add_special_tokens else 0
        trunc, pad = _settings.call_settings(
            self._defaults, padding, truncation, max_length, pad_to_multiple_of=pad_to_multiple_of, stride=stride,
            padding_side=padding_side, truncation_side=truncation_side, pad_token_id=pad_token_id,
            special_tokens=n_special, single_special_tokens=self._core.num_special_tokens_to_add(False))
        names = self._model.model_input_names
        wanted = {
            "token_type_ids": "token_type_ids" in names if return_token_type_ids is None else return_token_type_ids,
            "attention_mask": "attention_mask" in names if return_attention_mask is None else return_attention_mask,
            "special_tokens_mask": return_special_tokens_mask,
            "offset_mapping": return_offsets_mapping,
            "length": return_length,
        }
        n_sequences = 1 if pairs is None else 2
        options = dict(add_special_tokens=add_special_tokens, truncation=trunc, padding=pad,
                       pretokenized=is_split_into_words, split_special_tokens=split_special_tokens)
        if is_split_into_words or return_overflowing_tokens or split_special_tokens:
            # The maps are computed anyway: the core's rich path, which keeps them.
            # It runs on the CPU: a call that asked for device memory is refused,
            # not answered in host memory.
            placement = _placement.resolve(device, None, packable=False)
            if placement.core != "cpu" and not placement.to_host:
                raise InvalidInputError(
                    "return_overflowing_tokens, is_split_into_words and split_special_tokens are computed on "
                    f"the CPU, so their results cannot be in device memory (device={device!r}): pass "
                    "device='cpu' or 'auto', then move the tensors")
            core, maps, total_ms = _maps.encode(self._core, texts, pairs, overflow=return_overflowing_tokens,
                                                attention_mask=wanted["attention_mask"],
                                                type_ids=wanted["token_type_ids"],
                                                special_tokens_mask=return_special_tokens_mask,
                                                offsets=return_offsets_mapping, dtype=dtype, **options)
        else:
            core, total_ms = self._run(texts, pairs, add_special_tokens=add_special_tokens, truncation=trunc,
                                       padding=pad, attention_mask=wanted["attention_mask"],
                                       type_ids=wanted["token_type_ids"],
                                       special_tokens_mask=return_special_tokens_mask,
                                       offsets=return_offsets_mapping, device=device, dtype=dtype)
            maps = _maps.Maps(None, _maps.Source(self._core, _as_list(texts),
                                                 None if pairs is None else _as_list(pairs), options))
        samples = maps.rows.samples() if return_overflowing_tokens else None
        if return_tensors is None:
            lists = core.to_lists()
            if return_length:
                lists["length"] = [len(row) for row in lists["input_ids"]]
            ordered = {k: lists[k] for k in KEY_ORDER if k in lists}
            if samples is not None:
                ordered["overflow_to_sample_mapping"] = samples
            elif single:
                ordered = {k: v[0] if v and isinstance(v[0], list) else v for k, v in ordered.items()}
            return BatchEncoding(ordered, core, total_ms, encodings=maps, n_sequences=n_sequences)
        tensors = self._tensors(core, return_tensors, dtype)
        if return_length:
            starts = core.row_offsets().tolist()
            tensors["length"] = as_tensor([b - a for a, b in zip(starts, starts[1:], strict=False)], return_tensors,
                                          dtype)
        if samples is not None:
            tensors["overflow_to_sample_mapping"] = as_tensor(samples, return_tensors, dtype)
        ordered = {k: tensors[k] for k in KEY_ORDER if k in tensors}
        return BatchEncoding(ordered, core, total_ms, encodings=maps, n_sequences=n_sequences)

    @staticmethod
    def _tensors(core: _core.CoreBatch, kind: str, dtype: str) -> dict[str, Any]:
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

    def pad(self, encoded_inputs: Any, padding: bool | str = True, max_length: int | None = None,
            pad_to_multiple_of: int | None = None, padding_side: str | None = None,
            return_attention_mask: bool | None = None, return_tensors: str | None = None,
            verbose: bool = True) -> BatchEncoding:
        """transformers' `pad`: pads already-encoded rows (a dict of rows, or a list
        of dicts, e.g. in a DataLoader `collate_fn`) with this tokenizer's pad token."""
        return _pad.pad(self, encoded_inputs, padding=padding, max_length=max_length,
                        pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
                        return_attention_mask=return_attention_mask, return_tensors=return_tensors)

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False,
                 **kwargs: Any) -> list[str]:
        """The token strings of `text` (and `pair`)."""
        ids = self(text, pair, add_special_tokens=add_special_tokens, **kwargs)["input_ids"]
        return self.convert_ids_to_tokens(ids)

    # -- chat templates ------------------------------------------------------------

    def get_chat_template(self, chat_template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        """The template `apply_chat_template` would use (a name picks one of several)."""
        return _chat.select(self._model.chat_template, chat_template, tools)

    def apply_chat_template(
        self,
        conversation: Sequence[Mapping[str, Any]] | Sequence[Sequence[Mapping[str, Any]]],
        tools: list[dict[str, Any]] | None = None,
        documents: list[dict[str, str]] | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool | str = False,
        tokenize: bool = True,
        padding: bool | str = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        return_dict: bool = True,
        return_assistant_tokens_mask: bool = False,
        tokenizer_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """transformers' `apply_chat_template`: renders the conversation(s) with the
        Jinja template (jinja2: the `chat` extra); with `tokenize`,
        encodes it without adding special tokens (the template writes them) and
        returns a BatchEncoding (`return_dict`) or the ids."""
        if return_assistant_tokens_mask:
            raise NotImplementedError("return_assistant_tokens_mask is not supported by gpu_tok yet")
        if kwargs.pop("sanitize_control_tokens", False):
            raise NotImplementedError("sanitize_control_tokens is not supported by gpu_tok yet")
        template = self.get_chat_template(chat_template, tools)
        rendered, batched = _chat.render(template, conversation, tools=tools, documents=documents,
                                         add_generation_prompt=add_generation_prompt,
                                         continue_final_message=continue_final_message,
                                         variables={**self.special_tokens_map, **kwargs})
        if not tokenize:
            return rendered if batched else rendered[0]
        out = self(rendered if batched else rendered[0], padding=padding, truncation=truncation,
                   max_length=max_length, add_special_tokens=False, return_tensors=return_tensors,
                   **(tokenizer_kwargs or {}))
        return out if return_dict else out["input_ids"]

    # -- decoding ------------------------------------------------------------------

    def _decode_rows(self, rows: list[Any], skip_special_tokens: bool,
                     clean_up_tokenization_spaces: bool | None) -> list[str]:
        if not isinstance(skip_special_tokens, bool):
            raise TypeError("skip_special_tokens must be a bool")
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None \
            else clean_up_tokenization_spaces
        # transformers 5 skips the clean-up for BPE models: it would remove real spaces before punctuation.
        clean = bool(clean) and self._model_kind != "BPE"
        try:
            return _core.decode_rows(self._core, rows, skip_special_tokens, clean)
        except TypeError:  # torch integer scalars and the like: make them ints and try again
            return _core.decode_rows(self._core, [_plain_ints(r) if isinstance(r, (list, tuple)) else r
                                                  for r in rows], skip_special_tokens, clean)

    def decode(self, token_ids: Any, skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> Any:
        """Text of `token_ids` (an int, a list, a numpy array or torch tensor; a
        list of rows gives a list of texts), as transformers' `decode`."""
        if isinstance(token_ids, Mapping):
            token_ids = token_ids["input_ids"]
        if isinstance(token_ids, numbers.Integral) and not isinstance(token_ids, bool):
            token_ids = [int(token_ids)]
        ids = _ids(token_ids, "token_ids")
        if ids and (isinstance(ids[0], (list, tuple)) or getattr(ids[0], "ndim", 0) > 0):  # rows: one text each
            return self.batch_decode(ids, skip_special_tokens, clean_up_tokenization_spaces)
        return self._decode_rows([ids], skip_special_tokens, clean_up_tokenization_spaces)[0]

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None, **kwargs: Any) -> list[str]:
        """`decode` for each row (in parallel), as transformers' `batch_decode`."""
        if hasattr(sequences, "tolist") and not isinstance(sequences, list):
            sequences = sequences.tolist()
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
            raise TypeError(f"sequences must be a list of id lists, not {type(sequences).__name__}")
        rows = [row if isinstance(row, list) else _ids(row, f"sequences[{i}]") for i, row in enumerate(sequences)]
        if rows and not isinstance(rows[0], (list, tuple)):
            rows = [rows]  # one sequence: transformers decodes it as a batch of one
        return self._decode_rows(rows, skip_special_tokens, clean_up_tokenization_spaces)

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True,
                     clean_up_tokenization_spaces: bool = False) -> list[str]:
        """`tokenizers`' `decode_batch` (its default: special tokens skipped)."""
        if hasattr(sequences, "tolist") and not isinstance(sequences, list):
            sequences = sequences.tolist()
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
            raise TypeError(f"sequences must be a list of id lists, not {type(sequences).__name__}")
        rows = [row if isinstance(row, list) else _ids(row, f"sequences[{i}]") for i, row in enumerate(sequences)]
        return _core.decode_rows(self._core, rows, skip_special_tokens, bool(clean_up_tokenization_spaces))

    def clean_up_tokenization(self, text: str) -> str:
        return clean_up_tokenization(text)

    # -- vocabulary ----------------------------------------------------------------

    def token_to_id(self, token: str) -> int | None:
        return self._core.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        if isinstance(id, bool) or not isinstance(id, numbers.Integral):
            raise TypeError(f"id must be an int, not {type(id).__name__}")
        return self._core.id_to_token(int(id)) if 0 <= id < 2**32 else None

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        """The id of each token; the unk token's id (or None) for tokens not in the vocabulary."""
        unk = self._model.special.get("unk_token")
        unk_id = self._core.token_to_id(unk) if unk is not None else None

        def one(token: str) -> int | None:
            found = self._core.token_to_id(token)
            return unk_id if found is None else found

        if isinstance(tokens, str):
            return one(tokens)
        return [one(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> Any:
        """The token string of each id (None for ids outside the vocabulary)."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self.id_to_token(int(ids))
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self.id_to_token(int(i)) for i in _ids(ids, "ids") if int(i) not in skip]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """The tokenizer's decoder over token strings (as transformers)."""
        ids = [self._core.token_to_id(t) for t in tokens]
        if any(i is None for i in ids):
            raise ValueError("convert_tokens_to_string: some tokens are not in the vocabulary")
        return self._core.decode([i for i in ids if i is not None], False)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return self._core.get_vocab(with_added_tokens)

    @property
    def vocab(self) -> dict[str, int]:
        return self.get_vocab()

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self._core.get_vocab_size(with_added_tokens)

    def get_added_vocab(self) -> dict[str, int]:
        """The added tokens (special or not) and their ids, by id."""
        return {content: i for i, content, _ in sorted(self._core.added_tokens())}

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        return self.get_added_vocab()

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self._core.num_special_tokens_to_add(bool(pair))

    def add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        """Adds tokens to the vocabulary (as transformers: in place, new ids after
        the last one); returns how many were added. This Tokenizer then uses a
        reloaded core; copies made earlier (`with_padding`...) keep the old one."""
        if not new_tokens:
            return 0
        if not isinstance(new_tokens, (list, tuple)):
            new_tokens = [new_tokens]
        return self._add([_added.entry(t, special_tokens) for t in new_tokens])

    def add_special_tokens(self, special_tokens_dict: Mapping[str, Any],
                           replace_extra_special_tokens: bool = True) -> int:
        """Sets named special tokens (`{"pad_token": "[PAD]"}`) and `extra_special_tokens`,
        adding the ones not in the vocabulary; returns how many were added."""
        if not special_tokens_dict:
            return 0
        entries: list[dict[str, Any]] = []
        special = dict(self._model.special)
        extra = list(self._model.extra_special)
        items = dict(special_tokens_dict)
        if "additional_special_tokens" in items and not items.get("extra_special_tokens"):
            items["extra_special_tokens"] = items.pop("additional_special_tokens")
        for key, value in items.items():
            if key == "extra_special_tokens":
                if not isinstance(value, (list, tuple)):
                    raise ValueError("extra_special_tokens must be a list of str or AddedToken")
                tokens = [_added.entry(t, True) for t in value]
                fresh = [t for t in tokens if replace_extra_special_tokens or t["content"] not in extra]
                extra = [t["content"] for t in fresh] if replace_extra_special_tokens and fresh \
                    else extra + [t["content"] for t in fresh]
                entries += fresh
            elif key in _config.SPECIAL_ATTRIBUTES or key in special:
                entry = _added.entry(value, True)
                special[key] = entry["content"]
                entries.append(entry)
            else:
                raise ValueError(f"{key!r} is not a special token name: use one of "
                                 f"{(*_config.SPECIAL_ATTRIBUTES, 'extra_special_tokens')}")
        added = self._add(entries)
        self._set_model(special=special, extra_special=tuple(extra))
        return added

    def _add(self, entries: list[dict[str, Any]]) -> int:
        """Adds `entries` (see `_added`) and swaps in the new core."""
        core, added = self._core.with_added_tokens(json.dumps(entries))
        if added:
            self._core = core
            _maps.register(self._core)
            self._set_model()  # the pad token's id may be new
        return added

    # -- saving --------------------------------------------------------------------

    def save_pretrained(self, save_directory: str | os.PathLike[str], **kwargs: Any) -> tuple[str, ...]:
        """Writes tokenizer.json, tokenizer_config.json and chat_template.jinja (when
        there is one template), which both gpu_tok and transformers load back."""
        directory = Path(save_directory)
        if directory.is_file():
            raise FileExistsError(f"{directory} is a file; save_pretrained needs a directory")
        directory.mkdir(parents=True, exist_ok=True)
        config = {k: v for k, v in self._config.items() if k not in ("added_tokens_decoder", "chat_template",
                                                                      "additional_special_tokens")}
        m = self._model
        config.update(m.special)
        config.update(model_max_length=m.model_max_length, padding_side=m.padding_side,
                      truncation_side=m.truncation_side, model_input_names=list(m.model_input_names),
                      clean_up_tokenization_spaces=m.clean_up_tokenization_spaces,
                      split_special_tokens=m.split_special_tokens, extra_special_tokens=list(m.extra_special))
        config.setdefault("tokenizer_class", "TokenizersBackend")
        written = []
        if isinstance(m.chat_template, str):
            (directory / "chat_template.jinja").write_text(m.chat_template, encoding="utf-8")
            written.append(str(directory / "chat_template.jinja"))
        elif isinstance(m.chat_template, dict):
            config["chat_template"] = [{"name": k, "template": v} for k, v in m.chat_template.items()]
        config_path = directory / "tokenizer_config.json"
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
                               encoding="utf-8")
        json_path = directory / "tokenizer.json"
        json_path.write_text(self._core.to_json(), encoding="utf-8")
        return (str(config_path), *written, str(json_path))

    # -- gpu_tok -------------------------------------------------------------------

    @property
    def plan(self) -> list[dict[str, str]]:
        """Per pipeline stage: the component, the engine that runs it, and why."""
        keys = ("stage", "component", "path", "reason")
        return [dict(zip(keys, row, strict=True)) for row in self._core.plan()]

    def __repr__(self) -> str:
        return (f"gpu_tok.Tokenizer(name_or_path={self.name_or_path!r}, vocab_size={self.vocab_size}, "
                f"model_max_length={self.model_max_length}, padding_side={self.padding_side!r}, "
                f"truncation_side={self.truncation_side!r}, special_tokens={self.special_tokens_map})")


def _unpickle(json_text: str, config: dict[str, Any], defaults: _settings.Defaults, model: _config.ModelConfig,
              name_or_path: str) -> Tokenizer:
    tok = Tokenizer(_core.CoreTokenizer.from_str(json_text), config, name_or_path)
    tok._model, tok._defaults = model, defaults
    return tok


def _special_property(name: str) -> tuple[property, property]:
    attribute = f"{name}_token"

    def token(self: Tokenizer) -> str | None:
        return self._model.special.get(attribute)

    def set_token(self: Tokenizer, value: Any) -> None:
        content = None if value is None else _config.token_content(value) or getattr(value, "content", None)
        if value is not None and not isinstance(content, str):
            raise ValueError(f"{attribute} must be a str (or AddedToken), not {type(value).__name__}")
        self._set_model(special={**self._model.special, attribute: content})

    def token_id(self: Tokenizer) -> int | None:
        value = self._model.special.get(attribute)
        return None if value is None else self.convert_tokens_to_ids(value)

    def set_token_id(self: Tokenizer, value: int | None) -> None:
        set_token(self, None if value is None else self.id_to_token(value))

    token.__doc__ = f"The {name} token from the model's config files, or None. Settable."
    token_id.__doc__ = f"The id of the {name} token, or None. Settable."
    return property(token, set_token), property(token_id, set_token_id)


for _name in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
    _token, _token_id = _special_property(_name)
    setattr(Tokenizer, f"{_name}_token", _token)
    setattr(Tokenizer, f"{_name}_token_id", _token_id)
