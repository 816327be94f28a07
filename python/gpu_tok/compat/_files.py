"""A model directory on disk: what `from_pretrained` reads (tokenizer.json,
tokenizer_config.json, special_tokens_map.json, chat templates) and what
`save_pretrained` writes, as transformers 5 reads and writes them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .._errors import InvalidTokenizerError, TokenizerNotFoundError, UnsupportedTokenizerError
from .._state import TokenizerState

T = TypeVar("T")


def read_text(path: Path, what: str) -> str:
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
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as err:
        raise InvalidTokenizerError(f"{path} is not valid JSON: {err}") from None
    except RecursionError as err:
        raise InvalidTokenizerError(f"{path} is nested too deeply to be a {what}") from err


def _chat_templates(directory: Path) -> str | dict[str, str] | None:
    """chat_template.jinja and chat_templates/*.jinja, as transformers 5 saves them."""
    single = directory / "chat_template.jinja"
    folder = directory / "chat_templates"
    named = {p.stem: read_text(p, p.name) for p in sorted(folder.glob("*.jinja"))} if folder.is_dir() else {}
    if single.is_file():
        if not named:
            return read_text(single, single.name)
        named["default"] = read_text(single, single.name)
    return named or None


def naming(path: Path, load: Callable[[], T]) -> T:
    """`load()`, with `path` in the message of a tokenizer.json the core refuses."""
    try:
        return load()
    except (InvalidTokenizerError, UnsupportedTokenizerError) as err:
        if str(path) in str(err):
            raise
        raise type(err)(f"{path}: {err}") from err


def read_pretrained(directory: Path, overrides: dict[str, Any]) -> tuple[Path, str, dict[str, Any]]:
    """The model directory (a file names its folder), its tokenizer.json text
    and its configuration, `overrides` last."""
    if directory.is_file():
        directory = directory.parent
    if not directory.is_dir():
        raise TokenizerNotFoundError(
            f"{str(directory)!r} is not a local directory; gpu_tok works offline and never "
            "downloads: pass the directory holding tokenizer.json"
        )
    json_text = read_text(directory / "tokenizer.json", "tokenizer.json")
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
    config.update(overrides)
    return directory, json_text, config


def save_pretrained(state: TokenizerState, directory: Path) -> tuple[str, ...]:
    """Writes tokenizer.json, tokenizer_config.json and chat_template.jinja (when
    there is one template), which both gpu_tok and transformers load back."""
    if directory.is_file():
        raise FileExistsError(f"{directory} is a file; save_pretrained needs a directory")
    directory.mkdir(parents=True, exist_ok=True)
    config = {k: v for k, v in state.config.items() if k not in ("added_tokens_decoder", "chat_template",
                                                                  "additional_special_tokens")}
    m = state.model
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
    json_path.write_text(state.core.to_json(), encoding="utf-8")
    return (str(config_path), *written, str(json_path))
