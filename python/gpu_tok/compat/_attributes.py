"""transformers' settings attributes (`padding_side`, `pad_token`,
`model_max_length`, `chat_template`...), each read from the tokenizer's one
state and set by swapping in a new state (one assignment: a call running in
another thread sees the old setting or the new one, never a mix)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import _config
from .._state import HoldsState


class SettingsAttributes(HoldsState):
    """Mixed into `Tokenizer` (which holds `_state`)."""

    __slots__ = ()

    if TYPE_CHECKING:
        def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any: ...
        def id_to_token(self, id: int) -> str | None: ...

    def _set_model(self, **changes: Any) -> None:
        """Replaces transformers-style settings (and the call defaults they feed)."""
        self._state = self._state.with_model(**changes)

    @property
    def is_fast(self) -> bool:
        return True

    @property
    def padding_side(self) -> str:
        """"right" or "left": tokenizer_config.json, else tokenizer.json's padding, else
        the tokenizer class's default (Llama, Gemma: "left"). Settable."""
        return self._state.model.padding_side

    @padding_side.setter
    def padding_side(self, value: str) -> None:
        if value not in ("right", "left"):
            raise ValueError(f"padding_side must be 'right' or 'left', not {value!r}")
        self._set_model(padding_side=value)

    @property
    def truncation_side(self) -> str:
        return self._state.model.truncation_side

    @truncation_side.setter
    def truncation_side(self, value: str) -> None:
        if value not in ("right", "left"):
            raise ValueError(f"truncation_side must be 'right' or 'left', not {value!r}")
        self._set_model(truncation_side=value)

    @property
    def model_max_length(self) -> int:
        """The config's model_max_length; int(1e30) (transformers' "no limit") when unset."""
        return self._state.model.model_max_length

    @model_max_length.setter
    def model_max_length(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"model_max_length must be a non-negative int, not {value!r}")
        self._set_model(model_max_length=value)

    @property
    def model_input_names(self) -> list[str]:
        """Fields the model takes; decides whether `token_type_ids` and
        `attention_mask` are returned by default. Settable."""
        return list(self._state.model.model_input_names)

    @model_input_names.setter
    def model_input_names(self, value: Sequence[str]) -> None:
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise TypeError("model_input_names must be a list of str")
        self._set_model(model_input_names=tuple(value))

    @property
    def clean_up_tokenization_spaces(self) -> bool:
        return self._state.model.clean_up_tokenization_spaces

    @clean_up_tokenization_spaces.setter
    def clean_up_tokenization_spaces(self, value: bool) -> None:
        self._set_model(clean_up_tokenization_spaces=bool(value))

    @property
    def split_special_tokens(self) -> bool:
        """When True, special tokens in the text are encoded as plain text. Settable."""
        return self._state.model.split_special_tokens

    @split_special_tokens.setter
    def split_special_tokens(self, value: bool) -> None:
        self._set_model(split_special_tokens=bool(value))

    @property
    def chat_template(self) -> str | dict[str, str] | None:
        """The Jinja chat template(s): tokenizer_config.json's `chat_template`, or
        chat_template.jinja. Settable."""
        return self._state.model.chat_template

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
        return list(self._state.model.extra_special)

    @extra_special_tokens.setter
    def extra_special_tokens(self, value: Sequence[str] | None) -> None:
        tokens = [] if value is None else [_config.token_content(v) or str(v) for v in value]
        self._set_model(extra_special=tuple(tokens))

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens that are set, as transformers 5 lists them."""
        return self._state.model.special_tokens_map()

    @property
    def all_special_tokens(self) -> list[str]:
        """Named special tokens, then `extra_special_tokens`, without repeats."""
        model = self._state.model
        named = [token for token in model.special.values() if token is not None]
        return list(dict.fromkeys([*named, *model.extra_special]))

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

    @property
    def max_len_single_sentence(self) -> int:
        return self.model_max_length - self._state.core.num_special_tokens_to_add(False)

    @property
    def max_len_sentences_pair(self) -> int:
        return self.model_max_length - self._state.core.num_special_tokens_to_add(True)


def _special_property(name: str) -> tuple[property, property]:
    attribute = f"{name}_token"

    def token(self: SettingsAttributes) -> str | None:
        return self._state.model.special.get(attribute)

    def set_token(self: SettingsAttributes, value: Any) -> None:
        content = None if value is None else _config.token_content(value) or getattr(value, "content", None)
        if value is not None and not isinstance(content, str):
            raise ValueError(f"{attribute} must be a str (or AddedToken), not {type(value).__name__}")
        self._set_model(special={**self._state.model.special, attribute: content})

    def token_id(self: SettingsAttributes) -> int | None:
        value = self._state.model.special.get(attribute)
        return None if value is None else self.convert_tokens_to_ids(value)

    def set_token_id(self: SettingsAttributes, value: int | None) -> None:
        set_token(self, None if value is None else self.id_to_token(value))

    token.__doc__ = f"The {name} token from the model's config files, or None. Settable."
    token_id.__doc__ = f"The id of the {name} token, or None. Settable."
    return property(token, set_token), property(token_id, set_token_id)


for _name in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
    _token, _token_id = _special_property(_name)
    setattr(SettingsAttributes, f"{_name}_token", _token)
    setattr(SettingsAttributes, f"{_name}_token_id", _token_id)
