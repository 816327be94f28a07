"""transformers names that `Tokenizer` also answers to, beyond the call and
its core methods: `init_kwargs`, `added_tokens_decoder`, `add_bos_token` /
`add_eos_token`, `do_lower_case` (BERT-style configs), `save_vocabulary`,
`set_truncation_and_padding`, and `tokenizers`' `to_str`.

`backend_tokenizer` is left out on purpose: gpu_tok holds no `tokenizers`
object (`tokenizers.Tokenizer.from_str(tok.to_str())` makes one).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InvalidInputError
from .._settings import Padding, Truncation
from .._state import HoldsState


@dataclass(frozen=True)
class AddedToken:
    """An added token and its flags, as `tokenizers.AddedToken` shows them."""

    content: str
    single_word: bool = False
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = True
    special: bool = False

    def __str__(self) -> str:
        return self.content

    def __repr__(self) -> str:
        return (f"AddedToken({self.content!r}, rstrip={self.rstrip}, lstrip={self.lstrip}, "
                f"single_word={self.single_word}, normalized={self.normalized}, special={self.special})")


def _value(strategy: Any) -> Any:
    """An enum member's value (transformers' PaddingStrategy...), else the value itself."""
    return getattr(strategy, "value", strategy)


class TransformersNames(HoldsState):
    """Mixed into `Tokenizer` (which holds the state these read)."""

    __slots__ = ()

    @property
    def init_kwargs(self) -> dict[str, Any]:
        """The configuration the tokenizer was loaded with (tokenizer_config.json,
        special_tokens_map.json, the chat template and keyword arguments), a copy."""
        return json.loads(json.dumps(self._state.config, default=str))

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        """Every added token by id, with its flags."""
        return {i: AddedToken(content, single_word, lstrip, rstrip, normalized, special)
                for i, content, single_word, lstrip, rstrip, normalized, special
                in self._state.added_token_flags()}

    @property
    def do_lower_case(self) -> bool:
        """The config's `do_lower_case` (BERT-style tokenizers); other configs have none."""
        config = self._state.config
        if "do_lower_case" not in config:
            raise AttributeError("this tokenizer's config has no do_lower_case")
        return bool(config["do_lower_case"])

    @property
    def add_bos_token(self) -> bool:
        """As transformers 5: False until set; setting it (or `add_eos_token`)
        makes the post-processor `[bos] $A [eos]` / `... [bos] $B [eos]`."""
        return self._state.model.add_bos_token

    @add_bos_token.setter
    def add_bos_token(self, value: bool) -> None:
        self._set_template(bos=bool(value), eos=self._state.model.add_eos_token)

    @property
    def add_eos_token(self) -> bool:
        return self._state.model.add_eos_token

    @add_eos_token.setter
    def add_eos_token(self, value: bool) -> None:
        self._set_template(bos=self._state.model.add_bos_token, eos=bool(value))

    def _set_template(self, *, bos: bool, eos: bool) -> None:
        """transformers' `update_post_processor`: a TemplateProcessing with the
        BOS and EOS tokens asked for (a missing one is not added)."""
        state = self._state
        special = state.model.special
        bos_token, eos_token = special.get("bos_token"), special.get("eos_token")
        bos, eos = bos and bos_token is not None, eos and eos_token is not None
        tokens = [(t, state.core.token_to_id(t)) for t, on in ((bos_token, bos), (eos_token, eos))
                  if on and t is not None]
        missing = [t for t, i in tokens if i is None]
        if missing:
            raise InvalidInputError(f"{missing[0]!r} is not in the vocabulary: it cannot be added to every sequence")

        def piece(token: str, type_id: int) -> dict[str, Any]:
            return {"SpecialToken": {"id": token, "type_id": type_id}}

        def sequence(name: str, type_id: int) -> list[dict[str, Any]]:
            return ([piece(bos_token, type_id)] if bos_token is not None and bos else []) + \
                [{"Sequence": {"id": name, "type_id": type_id}}] + \
                ([piece(eos_token, type_id)] if eos_token is not None and eos else [])

        spec = json.loads(state.core.to_json())
        spec["post_processor"] = {
            "type": "TemplateProcessing", "single": sequence("A", 0), "pair": sequence("A", 0) + sequence("B", 1),
            "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]} for t, i in tokens},
        }
        self._state = state.with_json(json.dumps(spec, ensure_ascii=False), add_bos_token=bos, add_eos_token=eos)

    def save_vocabulary(self, save_directory: str | os.PathLike[str], filename_prefix: str | None = None
                        ) -> tuple[str, ...]:
        """Writes the model's own files (vocab.json and merges.txt, vocab.txt...,
        as `tokenizers`' `Model.save` writes them) and returns their paths."""
        directory = Path(save_directory)
        if not directory.is_dir():
            raise NotADirectoryError(f"save_vocabulary needs an existing directory, not {directory}")
        return tuple(self._state.save_model(str(directory), filename_prefix))

    def set_truncation_and_padding(self, padding_strategy: Any, truncation_strategy: Any, max_length: int | None,
                                   stride: int = 0, pad_to_multiple_of: int | None = None,
                                   padding_side: str | None = None) -> None:
        """Sets the `tokenizers`-style defaults (what `encode_batch` applies when
        its arguments are left unset), as transformers sets them on its backend
        tokenizer. `tok(...)` itself follows its arguments, as in transformers."""
        truncation = _value(truncation_strategy)
        padding = _value(padding_strategy)
        state = self._state
        model, defaults = state.model, state.defaults
        trunc = None
        if truncation not in (None, False, "do_not_truncate"):
            if max_length is None:
                raise InvalidInputError("set_truncation_and_padding: truncation needs max_length")
            strategy = "longest_first" if truncation is True else truncation
            trunc = Truncation(max_length, strategy, model.truncation_side, stride)
        pad = None
        if padding not in (None, False, "do_not_pad"):
            if defaults.pad_token_id is None:
                raise InvalidInputError("set_truncation_and_padding: padding needs a pad token")
            length = max_length if padding == "max_length" else None
            pad = Padding(length, padding_side or model.padding_side, pad_to_multiple_of or None,
                          defaults.pad_token_id, 0, defaults.pad_token or "")
        self._state = state.with_defaults(file_truncation=trunc, file_padding=pad)

    def to_str(self) -> str:
        """The tokenizer.json text (`tokenizers`' `Tokenizer.to_str`)."""
        return self._state.core.to_json()
