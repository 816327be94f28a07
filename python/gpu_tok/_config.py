"""What tokenizer_config.json, and the tokenizer class it names, say about a
tokenizer, read the way transformers 5 reads them.

transformers takes some defaults from the tokenizer *class* rather than from
the files (BERT returns `token_type_ids`, Llama pads on the left). gpu_tok has
no classes, so the few class defaults that change results are listed here.
Precedence, as in transformers: tokenizer_config.json, then tokenizer.json's
padding/truncation (sides and pad token), then the class default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._core import Padding, Truncation
from ._errors import InvalidTokenizerError

# transformers' "no limit" (`VERY_LARGE_INTEGER`) and the bound above which a
# model_max_length means no limit (`LARGE_INTEGER`).
VERY_LARGE_INTEGER = int(1e30)
LARGE_INTEGER = int(1e20)

# The named special tokens transformers knows, in its order.
SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")

# Classes whose `model_input_names` include token_type_ids (read from transformers 5.24's classes).
_TOKEN_TYPE_CLASSES = frozenset({
    "BertTokenizer", "CanineTokenizer", "DPRQuestionEncoderTokenizer", "DPRContextEncoderTokenizer",
    "DPRReaderTokenizer", "DebertaTokenizer", "DebertaV2Tokenizer", "FNetTokenizer", "LayoutLMv2Tokenizer",
    "LxmertTokenizer", "MarkupLMTokenizer", "MobileBertTokenizer", "TapasTokenizer",
})
# Classes that pad on the left by default.
_LEFT_PADDING_CLASSES = frozenset({
    "CodeLlamaTokenizer", "CohereTokenizer", "GemmaTokenizer", "LlamaTokenizer", "Siglip2Tokenizer", "XLNetTokenizer",
})


def token_content(value: Any) -> str | None:
    """A special token as the config writes it: a str or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


@dataclass(frozen=True)
class ModelConfig:
    """The tokenizer-level settings transformers keeps beside tokenizer.json."""

    model_input_names: tuple[str, ...]
    padding_side: str
    truncation_side: str
    model_max_length: int
    clean_up_tokenization_spaces: bool
    split_special_tokens: bool
    special: dict[str, str | None]  # "bos_token" -> "<s>": the named tokens, model-specific names included
    extra_special: tuple[str, ...]  # `extra_special_tokens` (formerly `additional_special_tokens`)
    chat_template: str | dict[str, str] | None
    # transformers 5's `add_bos_token` / `add_eos_token`: False until set (then the post-processor is rebuilt).
    add_bos_token: bool = False
    add_eos_token: bool = False

    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens that are set, as transformers 5 lists them."""
        return {name: token for name, token in self.special.items() if token is not None}


def _class_name(config: dict[str, Any], json_text: Callable[[], str]) -> str:
    name = config.get("tokenizer_class")
    name = name.removesuffix("Fast") if isinstance(name, str) else ""
    # transformers 5 loads a byte-level tokenizer.json declared as LlamaTokenizer with its generic
    # backend (DeepSeek-V3 and many Llama-3 derivatives), so no Llama class defaults apply.
    if name == "LlamaTokenizer" and '"ByteLevel"' in json_text():
        return "TokenizersBackend"
    return name


def _side(config: dict[str, Any], key: str, from_file: str | None, default: str) -> str:
    value = config.get(key)
    if value is None:
        value = from_file or default
    if value not in ("right", "left"):
        raise InvalidTokenizerError(f"{key} must be 'right' or 'left', not {value!r}")
    return value


def _extra_special(config: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """`extra_special_tokens` as a list, and the model-specific named tokens (a dict there,
    or config keys ending in `_token` that transformers does not name itself)."""
    extra = config.get("extra_special_tokens")
    if extra is None:
        extra = config.get("additional_special_tokens")
    named: dict[str, str] = {}
    if isinstance(extra, dict):
        named = {k: v for k, v in ((k, token_content(v)) for k, v in extra.items()) if v is not None}
        extra = []
    tokens = [t for t in (token_content(v) for v in extra or []) if t is not None]
    for key, value in config.items():
        if key.endswith("_token") and key not in SPECIAL_ATTRIBUTES and isinstance(value, (str, dict)):
            content = token_content(value)
            if content is not None:
                named.setdefault(key, content)
    return tokens, named


def read(config: dict[str, Any], json_text: Callable[[], str], file_padding: Padding | None,
         file_truncation: Truncation | None) -> ModelConfig:
    """`json_text` gives tokenizer.json's text (asked for only when the class needs it)."""
    cls = _class_name(config, json_text)
    names = config.get("model_input_names")
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        names = ["input_ids", "token_type_ids", "attention_mask"] if cls in _TOKEN_TYPE_CLASSES \
            else ["input_ids", "attention_mask"]
    limit = config.get("model_max_length")
    if isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    if not isinstance(limit, int) or isinstance(limit, bool):
        limit = VERY_LARGE_INTEGER
    special: dict[str, str | None] = {name: token_content(config.get(name)) for name in SPECIAL_ATTRIBUTES}
    if "pad_token" not in config and file_padding is not None and file_padding.pad_token:
        special["pad_token"] = file_padding.pad_token  # as transformers: tokenizer.json's padding names it
    extra, named = _extra_special(config)
    special.update(named)
    template = config.get("chat_template")
    if isinstance(template, list):  # several templates: [{"name": ..., "template": ...}]
        template = {t["name"]: t["template"] for t in template if isinstance(t, dict) and "name" in t}
    return ModelConfig(
        model_input_names=tuple(names),
        padding_side=_side(config, "padding_side", file_padding.side if file_padding else None,
                           "left" if cls in _LEFT_PADDING_CLASSES else "right"),
        truncation_side=_side(config, "truncation_side", file_truncation.side if file_truncation else None, "right"),
        model_max_length=limit,
        clean_up_tokenization_spaces=bool(config.get("clean_up_tokenization_spaces", False)),
        split_special_tokens=bool(config.get("split_special_tokens", False)),
        special=special,
        extra_special=tuple(extra),
        chat_template=template if isinstance(template, (str, dict)) else None,
    )
