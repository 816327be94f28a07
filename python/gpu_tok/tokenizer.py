"""`gpu_tok.Tokenizer`: load any Hugging Face tokenizer.json and encode exactly
as the `tokenizers` library does, with a transformers-style call on top.

A Tokenizer is immutable: every setting is an argument (or a new Tokenizer
from `with_truncation` / `with_padding`, which shares the loaded tables), so
one instance is safe to share across threads.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import _core, _placement, _settings
from ._errors import InvalidInputError, InvalidTokenizerError, TokenizerNotFoundError, UnsupportedTokenizerError
from .batch import BatchEncoding, convert

# transformers writes int(1e30) when a model sets no limit.
_NO_LIMIT = 10**18
_SPECIAL_NAMES = ("bos", "eos", "unk", "sep", "pad", "cls", "mask")


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


def _token_content(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a str or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


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


class Tokenizer:
    """A Hugging Face tokenizer, loaded from tokenizer.json."""

    __slots__ = ("_core", "_config", "_defaults", "_special")

    def __init__(self, core: _core.CoreTokenizer, config: dict[str, Any] | None = None) -> None:
        self._core = core
        self._config = dict(config or {})
        self._special = self._special_tokens()
        self._defaults = self._make_defaults()

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
    def from_pretrained(cls, directory: str | os.PathLike[str]) -> Tokenizer:
        """From a local model directory: tokenizer.json plus, when present,
        tokenizer_config.json and special_tokens_map.json. Never downloads."""
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
        return _naming(directory / "tokenizer.json", lambda: cls.from_str(json_text, config))

    def _special_tokens(self) -> dict[str, str | None]:
        special = {name: _token_content(self._config.get(f"{name}_token")) for name in _SPECIAL_NAMES}
        file_padding = self._core.file_padding()
        if special["pad"] is None and file_padding is not None and file_padding.pad_token:
            special["pad"] = file_padding.pad_token
        return special

    def _make_defaults(self) -> _settings.Defaults:
        limit = self._config.get("model_max_length")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit < _NO_LIMIT:
            limit = None
        pad = self._special["pad"]
        return _settings.Defaults(
            file_truncation=self._core.file_truncation(),
            file_padding=self._core.file_padding(),
            model_max_length=limit,
            pad_token_id=self._core.token_to_id(pad) if pad is not None else None,
            pad_token=pad,
            padding_side=self._config.get("padding_side"),
            truncation_side=self._config.get("truncation_side"),
        )

    # -- pickling and copies -------------------------------------------------------

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling (spawn/forkserver workers, DataLoader): the tokenizer.json text,
        the config and the defaults; the other process loads it again."""
        return (_unpickle, (self._core.to_json(), self._config, self._defaults))

    def __copy__(self) -> Tokenizer:
        return self  # immutable: a copy would be the same object in every way

    def __deepcopy__(self, memo: dict[int, Any]) -> Tokenizer:
        return self

    # -- settings as new tokenizers ------------------------------------------------

    def _with_defaults(self, **changes: Any) -> Tokenizer:
        other = object.__new__(Tokenizer)
        other._core, other._config, other._special = self._core, self._config, self._special
        other._defaults = replace(self._defaults, **changes)
        return other

    def with_truncation(self, max_length: int | None, strategy: str = "longest_first",
                        side: str = "right") -> Tokenizer:
        """A Tokenizer sharing these tables whose default truncation is this
        (None: no truncation), as `tokenizers`' `enable_truncation`."""
        if max_length is None:
            return self._with_defaults(file_truncation=None)
        trunc = _settings.truncation(self._defaults, strategy, max_length, side, from_file=False)
        return self._with_defaults(file_truncation=trunc)

    def with_padding(self, length: int | None = None, side: str = "right", pad_to_multiple_of: int | None = None,
                     pad_token_id: int | None = None, enabled: bool = True) -> Tokenizer:
        """A Tokenizer sharing these tables whose default padding is this
        (`length=None`: pad to the longest row), as `tokenizers`' `enable_padding`."""
        if not enabled:
            return self._with_defaults(file_padding=None)
        pad = _settings.padding(self._defaults, "max_length" if length else True, length,
                                pad_to_multiple_of, side, pad_token_id, from_file=False)
        return self._with_defaults(file_padding=pad)

    # -- encoding ------------------------------------------------------------------

    def _run(self, texts: Any, pairs: Any, *, add_special_tokens: bool, truncation: Any, padding: Any,
             attention_mask: bool, type_ids: bool | None, special_tokens_mask: bool,
             offsets: bool, device: Any) -> tuple[_core.CoreBatch, float]:
        """The core's batch and the call's wall time in milliseconds."""
        started = time.perf_counter()
        size = _text_bytes(texts) if _placement.is_auto(device) else None
        placement = _placement.resolve(device, size, packable=pairs is None and not offsets)
        texts, pairs = _one_chunk(texts), _one_chunk(pairs)
        if not isinstance(add_special_tokens, bool):
            raise TypeError("add_special_tokens must be a bool")
        if type_ids is None:
            type_ids = self._uses_token_type_ids()
        core = self._core.encode_batch(
            texts, pairs, add_special_tokens=add_special_tokens, truncation=truncation,
            padding=padding, attention_mask=attention_mask, type_ids=type_ids,
            special_tokens_mask=special_tokens_mask, offsets=offsets, device=placement.core,
        )
        if placement.to_host:
            core = core.cpu()
        return core, (time.perf_counter() - started) * 1e3

    def _uses_token_type_ids(self) -> bool:
        names = self._config.get("model_input_names")
        if isinstance(names, list):
            return "token_type_ids" in names
        return self._core.uses_token_type_ids()

    def encode(self, text: str, pair: str | None = None, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text` (and `pair`), exactly as `tokenizers`'
        `Tokenizer.encode(...).ids`, tokenizer.json's truncation and padding included."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"pair must be str or None, not {type(pair).__name__}")
        d = self._defaults
        core, _ = self._run([text], None if pair is None else [pair], add_special_tokens=add_special_tokens,
                            truncation=d.file_truncation, padding=d.file_padding, attention_mask=False,
                            type_ids=False, special_tokens_mask=False, offsets=False, device="cpu")
        return core.to_lists()["input_ids"][0]

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
    ) -> BatchEncoding:
        """Encodes a batch (a list of str, or a pyarrow string array, read without
        a copy) into tensors (gpu_tok `Tensor`s: DLPack and buffer protocol).
        `padding`/`truncation` left as None follow tokenizer.json, as
        `tokenizers`' `encode_batch` does; `False` turns them off, `True`,
        "longest", "max_length" and the truncation strategies turn them on."""
        d = self._defaults
        trunc = _settings.truncation(d, truncation, max_length, truncation_side, from_file=True)
        pad = _settings.padding(d, padding, max_length, pad_to_multiple_of, padding_side, pad_token_id,
                                from_file=True)
        core, total_ms = self._run(texts, text_pairs, add_special_tokens=add_special_tokens, truncation=trunc,
                                   padding=pad, attention_mask=return_attention_mask,
                                   type_ids=return_token_type_ids, special_tokens_mask=return_special_tokens_mask,
                                   offsets=return_offsets, device=device)
        return BatchEncoding.from_core(core, total_ms)

    def __call__(
        self,
        text: str | Sequence[str],
        text_pair: str | Sequence[str] | None = None,
        *,
        add_special_tokens: bool = True,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        pad_token_id: int | None = None,
        return_tensors: str | None = None,
        return_attention_mask: bool = True,
        return_token_type_ids: bool | None = None,
        return_offsets_mapping: bool = False,
        return_special_tokens_mask: bool = False,
        device: Any = "auto",
    ) -> BatchEncoding:
        """transformers-style call: `tok(texts, padding=True, truncation=True,
        return_tensors="pt")`. Arguments alone decide (tokenizer.json's truncation
        and padding do not apply). A single str gives un-batched lists."""
        single = isinstance(text, str)
        if single and text_pair is not None and not isinstance(text_pair, str):
            raise TypeError("text is a single str, so text_pair must be a str too")
        texts = [text] if single else text
        pairs = [text_pair] if single and text_pair is not None else text_pair
        if return_tensors not in (None, "np", "pt", "cupy"):
            raise ValueError(f"return_tensors must be None, 'np', 'pt' or 'cupy', not {return_tensors!r}")
        d = self._defaults
        trunc = _settings.truncation(d, truncation, max_length, None, from_file=False)
        pad = _settings.padding(d, padding, max_length, pad_to_multiple_of, padding_side, pad_token_id,
                                from_file=False)
        core, total_ms = self._run(texts, pairs, add_special_tokens=add_special_tokens, truncation=trunc,
                                   padding=pad, attention_mask=return_attention_mask,
                                   type_ids=return_token_type_ids, special_tokens_mask=return_special_tokens_mask,
                                   offsets=return_offsets_mapping, device=device)
        if return_tensors is None:
            lists = core.to_lists()
            return BatchEncoding({k: v[0] for k, v in lists.items()} if single else lists, core, total_ms)
        tensors = {k: self._as_tensor(core, k, return_tensors) for k in core.keys()}
        return BatchEncoding(tensors, core, total_ms)

    @staticmethod
    def _as_tensor(core: _core.CoreBatch, name: str, kind: str) -> Any:
        """Field `name` as a `[B, L]` (or `[B, L, 2]`) tensor of `kind`."""
        value = convert(core.tensor(name), kind)
        if core.width is not None:
            return value
        lengths = core.lengths().tolist()
        if len(set(lengths)) > 1:
            raise InvalidInputError(
                "rows have different lengths, so they cannot form one tensor: pass padding=True "
                "(and truncation=True for rows longer than max_length), or return_tensors=None"
            )
        width = lengths[0] if lengths else 0
        shape = (core.rows, width, 2) if name == "offset_mapping" else (core.rows, width)
        return value.reshape(shape)

    # -- decoding ------------------------------------------------------------------

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True,
               clean_up_tokenization_spaces: bool = False) -> str:
        """Text of `ids`, as `tokenizers`' decode; `clean_up_tokenization_spaces`
        applies transformers' clean-up afterwards."""
        text = self._core.decode(_ids(ids, "ids"), skip_special_tokens)
        return clean_up_tokenization(text) if clean_up_tokenization_spaces else text

    def decode_batch(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool = True,
                     clean_up_tokenization_spaces: bool = False) -> list[str]:
        """`decode` for each row (in parallel)."""
        if hasattr(sequences, "tolist") and not isinstance(sequences, list):
            sequences = sequences.tolist()
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Iterable):
            raise TypeError(f"sequences must be a list of id lists, not {type(sequences).__name__}")
        rows = [row if isinstance(row, list) else _ids(row, f"sequences[{i}]") for i, row in enumerate(sequences)]
        texts = self._core.decode_batch(rows, skip_special_tokens)
        return [clean_up_tokenization(t) for t in texts] if clean_up_tokenization_spaces else texts

    # -- vocabulary ----------------------------------------------------------------

    def token_to_id(self, token: str) -> int | None:
        return self._core.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"id must be an int, not {type(id).__name__}")
        return self._core.id_to_token(id) if 0 <= id < 2**32 else None

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return self._core.get_vocab(with_added_tokens)

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self._core.get_vocab_size(with_added_tokens)

    def num_special_tokens_to_add(self, is_pair: bool = False) -> int:
        return self._core.num_special_tokens_to_add(is_pair)

    @property
    def model_max_length(self) -> int | None:
        return self._defaults.model_max_length

    @property
    def all_special_tokens(self) -> list[str]:
        return [content for _, content, special in self._core.added_tokens() if special]

    @property
    def all_special_ids(self) -> list[int]:
        return [i for i, _, special in self._core.added_tokens() if special]

    @property
    def plan(self) -> list[dict[str, str]]:
        """Per pipeline stage: the component, the engine that runs it, and why."""
        keys = ("stage", "component", "path", "reason")
        return [dict(zip(keys, row, strict=True)) for row in self._core.plan()]

    def __repr__(self) -> str:
        return f"gpu_tok.Tokenizer(vocab_size={self.get_vocab_size()})"


def _unpickle(json_text: str, config: dict[str, Any], defaults: _settings.Defaults) -> Tokenizer:
    tok = Tokenizer.from_str(json_text, config)
    tok._defaults = defaults
    return tok


def _special_property(name: str) -> tuple[property, property]:
    def token(self: Tokenizer) -> str | None:
        return self._special[name]

    def token_id(self: Tokenizer) -> int | None:
        value = self._special[name]
        return None if value is None else self._core.token_to_id(value)

    token.__doc__ = f"The {name} token from the model's config files, or None."
    token_id.__doc__ = f"The id of the {name} token, or None."
    return property(token), property(token_id)


for _name in _SPECIAL_NAMES:
    _token, _token_id = _special_property(_name)
    setattr(Tokenizer, f"{_name}_token", _token)
    setattr(Tokenizer, f"{_name}_token_id", _token_id)
