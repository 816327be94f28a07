"""The transformers layer: `Tokenizer`, transformers' call and methods over the
frozen core (`gpu_tok._state`), one module per responsibility (see
`compat.tokenizer`)."""

from __future__ import annotations

from .tokenizer import Tokenizer

__all__ = ["Tokenizer"]
