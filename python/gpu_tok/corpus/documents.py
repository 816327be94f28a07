"""Documents to token ids: the one encode call that `gpu-tok tokenize`, the Ray
Data and the HF datasets helpers share, so all of them give the same tokens.

A batch of documents becomes flat ids plus CSR document offsets (numpy, no
Python object per token), optionally with the EOS token appended to every
document. No truncation and no padding: a corpus is tokenized whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._errors import InvalidInputError
from ..compat.tokenizer import Tokenizer


def eos_token_id(tok: Tokenizer) -> int:
    """The id appended by `append_eos`: the EOS token of the model's config."""
    eos: int | None = getattr(tok, "eos_token_id")  # noqa: B009 - set on the class at import, unknown to mypy
    if eos is None:
        raise InvalidInputError(
            "append_eos: this tokenizer names no eos_token (tokenizer_config.json / special_tokens_map.json), "
            "so there is nothing to append"
        )
    return eos


def encode_documents(tok: Tokenizer, texts: Any, *, add_special_tokens: bool = False,
                     eos_id: int | None = None, device: Any = "auto") -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of `texts` (a list of str or an Arrow string array): ids
    as flat uint32, offsets as int64 with one more entry than documents, so
    document i is `ids[offsets[i]:offsets[i + 1]]`. `eos_id` is appended to
    every document when given."""
    # int32 from the core (non-negative ids below 2^31) is the uint32 array as it is: no conversion pass.
    enc = tok.encode_batch(texts, add_special_tokens=add_special_tokens, padding=False, truncation=False,
                           return_attention_mask=False, return_token_type_ids=False, device=device, dtype="int32")
    # .cpu() is a no-op for host tensors and a copy to the host for CUDA ones.
    ids = np.asarray(enc.input_ids.cpu()).view(np.uint32)
    offsets = np.asarray(enc.row_offsets.cpu()).astype(np.int64, copy=False)
    if eos_id is not None:
        # One EOS at the end of each document; empty documents get one too.
        ids = np.insert(ids, offsets[1:], np.uint32(eos_id))
        offsets = offsets + np.arange(len(offsets), dtype=np.int64)
    return ids, offsets


def to_arrow_lists(ids: np.ndarray, offsets: np.ndarray) -> Any:
    """The documents (offsets starting at 0) as an Arrow `list<int32>` array:
    one copy of the ids, to int32, and no Python list per token."""
    import pyarrow as pa

    values = pa.array(ids.view(np.int32) if ids.dtype == np.uint32 else ids.astype(np.int32))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


def split_documents(ids: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    """One numpy array (a view) per document."""
    return [ids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
