"""Adding tokens (`Tokenizer.add_tokens` / `add_special_tokens`) by editing
tokenizer.json's `added_tokens` and loading it again: the crate then gives the
new tokens their ids with its own `add_tokens` rule (a token already in the
vocabulary keeps its id, a new one takes the next free id), so the result is
what `tokenizers` and transformers give.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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


def append(json_text: str, entries: list[dict[str, Any]], token_to_id: Callable[[str], int | None],
           vocab_size: int) -> tuple[str | None, int]:
    """tokenizer.json with `entries` added (None when nothing changes) and how many
    count as added, as the crate counts them (identical and empty tokens do not)."""
    spec = json.loads(json_text)
    listed = spec.setdefault("added_tokens", [])
    by_content = {t.get("content"): t for t in listed}
    next_id = vocab_size
    added = 0
    for new in entries:
        old = by_content.get(new["content"])
        if not new["content"] or (old is not None and all(old.get(k) == v for k, v in new.items())):
            continue
        added += 1
        if old is not None:
            old.update(new)  # the same token with new flags keeps its id
            continue
        known = token_to_id(new["content"])
        if known is None:
            known, next_id = next_id, next_id + 1
        listed.append({"id": known, **new})
        by_content[new["content"]] = listed[-1]
    return (json.dumps(spec, ensure_ascii=False) if added else None), added
