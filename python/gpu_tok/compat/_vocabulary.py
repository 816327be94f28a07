"""The vocabulary: lookups between tokens and ids, and transformers' in-place
`add_tokens` / `add_special_tokens` (a new state with a reloaded core and the
new special tokens, swapped in with one assignment)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _config
from .._state import HoldsState
from . import _added
from ._decoding import ids_of


class Vocabulary(HoldsState):
    """Mixed into `Tokenizer` (which holds `_state`)."""

    __slots__ = ()

    if TYPE_CHECKING:
        @property
        def all_special_ids(self) -> list[int | None]: ...

    def __len__(self) -> int:
        """Vocabulary size with the added tokens."""
        return self._state.core.get_vocab_size(True)

    @property
    def vocab_size(self) -> int:
        """Vocabulary size without the added tokens."""
        return self._state.core.get_vocab_size(False)

    def token_to_id(self, token: str) -> int | None:
        return self._state.core.token_to_id(token)

    def id_to_token(self, id: int) -> str | None:
        if isinstance(id, bool) or not isinstance(id, numbers.Integral):
            raise TypeError(f"id must be an int, not {type(id).__name__}")
        return self._state.core.id_to_token(int(id)) if 0 <= id < 2**32 else None

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        """The id of each token; the unk token's id (or None) for tokens not in the vocabulary."""
        state = self._state
        core = state.core
        unk = state.model.special.get("unk_token")
        unk_id = core.token_to_id(unk) if unk is not None else None

        def one(token: str) -> int | None:
            found = core.token_to_id(token)
            return unk_id if found is None else found

        if isinstance(tokens, str):
            return one(tokens)
        return [one(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> Any:
        """The token string of each id (None for ids outside the vocabulary)."""
        if isinstance(ids, numbers.Integral) and not isinstance(ids, bool):
            return self.id_to_token(int(ids))
        skip = set(self.all_special_ids) if skip_special_tokens else set()
        return [self.id_to_token(int(i)) for i in ids_of(ids, "ids") if int(i) not in skip]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        """The tokenizer's decoder over token strings (as transformers)."""
        core = self._state.core
        ids = [core.token_to_id(t) for t in tokens]
        if any(i is None for i in ids):
            raise ValueError("convert_tokens_to_string: some tokens are not in the vocabulary")
        return core.decode([i for i in ids if i is not None], False)

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]:
        return self._state.core.get_vocab(with_added_tokens)

    @property
    def vocab(self) -> dict[str, int]:
        return self.get_vocab()

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return self._state.core.get_vocab_size(with_added_tokens)

    def get_added_vocab(self) -> dict[str, int]:
        """The added tokens (special or not) and their ids, by id."""
        return {content: i for i, content, _ in sorted(self._state.core.added_tokens())}

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        return self.get_added_vocab()

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return self._state.core.num_special_tokens_to_add(bool(pair))

    def add_tokens(self, new_tokens: Any, special_tokens: bool = False) -> int:
        """Adds tokens to the vocabulary (as transformers: in place, new ids after
        the last one); returns how many were added. This Tokenizer then uses a
        reloaded core; copies made earlier (`with_padding`...) keep the old one."""
        if not new_tokens:
            return 0
        if not isinstance(new_tokens, (list, tuple)):
            new_tokens = [new_tokens]
        self._state, added = self._state.with_added([_added.entry(t, special_tokens) for t in new_tokens])
        return added

    def add_special_tokens(self, special_tokens_dict: Mapping[str, Any],
                           replace_extra_special_tokens: bool = True) -> int:
        """Sets named special tokens (`{"pad_token": "[PAD]"}`) and `extra_special_tokens`,
        adding the ones not in the vocabulary; returns how many were added."""
        if not special_tokens_dict:
            return 0
        state = self._state
        entries: list[dict[str, Any]] = []
        special = dict(state.model.special)
        extra = list(state.model.extra_special)
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
        # the tokens and the settings naming them change together: one new state
        self._state, added = state.with_added(entries, special=special, extra_special=tuple(extra))
        return added
