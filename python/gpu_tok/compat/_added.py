"""Adding tokens (`Tokenizer.add_tokens` / `add_special_tokens`): the
arguments as `added_tokens` entries, which the core hands to the crate's own
`add_tokens` (a token already in the vocabulary keeps its id, a new one takes
the next free id, identical and empty tokens do not count), so the result is
what `tokenizers` and transformers give. The core keeps its tables and builds
only the added tokens' split.
"""

from __future__ import annotations

from typing import Any

_FLAGS = ("single_word", "lstrip", "rstrip", "normalized", "special")


def entry(token: Any, special: bool) -> dict[str, Any]:
    """A str or an AddedToken-like object as an `added_tokens` entry, with the
    flags `tokenizers` gives a plain str (normalized unless special)."""
    if isinstance(token, str):
        content, flags = token, {}
    elif isinstance(getattr(token, "content", None), str):
        content = token.content
        flags = {k: bool(getattr(token, k)) for k in _FLAGS if hasattr(token, k)}
    else:
        raise TypeError(f"tokens must be str or AddedToken, not {type(token).__name__}")
    out = {"content": content, "single_word": False, "lstrip": False, "rstrip": False,
           "normalized": not special, "special": special}
    out.update(flags)
    if special:
        out["special"] = True
    return out
