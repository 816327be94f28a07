"""The embedded default: Qwen3's tokenizer and a ~1 MB multilingual sample
corpus, shipped compressed in the package (see data/NOTICE.md) so the CLI and
the README's first command work offline on a fresh machine."""

from __future__ import annotations

import json
import lzma
from functools import cache
from importlib import resources
from typing import Any

DEFAULT_TOKENIZER = "qwen3"


def _data(name: str) -> bytes:
    return resources.files("gpu_tok").joinpath("data", *name.split("/")).read_bytes()


@cache
def default_tokenizer_json() -> str:
    """Qwen3's tokenizer.json text."""
    return lzma.decompress(_data(f"{DEFAULT_TOKENIZER}/tokenizer.json.xz")).decode("utf-8")


@cache
def default_tokenizer_config() -> dict[str, Any]:
    return json.loads(_data(f"{DEFAULT_TOKENIZER}/tokenizer_config.json"))


def sample_corpus() -> list[dict[str, Any]]:
    """The sample documents: dicts with `id`, `lang`, `source` and `text`."""
    text = lzma.decompress(_data("sample.jsonl.xz")).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line]
