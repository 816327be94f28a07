"""`gpu-tok tokenize`: a corpus to token shards, in bounded memory, resumable.

Modules: `readers` (input files -> batches of documents), `documents` (a
batch of documents -> token rows, the library call), `shards` (the token
stream -> shard files and their writers), `job` (the run: manifest, resume,
lock, progress). Needs the `corpus` extra (numpy, pyarrow, orjson).
"""

from __future__ import annotations

from .job import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_SHARD_TOKENS,
    LOCK,
    MANIFEST,
    iter_shards,
    load_tokens,
    read_manifest,
    summary_lines,
    tokenize_corpus,
    tokenizer_sha256,
)

__all__ = ["DEFAULT_BATCH_BYTES", "DEFAULT_SHARD_TOKENS", "LOCK", "MANIFEST", "iter_shards", "load_tokens",
           "read_manifest", "summary_lines", "tokenize_corpus", "tokenizer_sha256"]
