"""torch DataLoader helpers: length-bucketed batches and a collate function
that tokenizes (or pads pre-tokenized ids) into tensors.

    from gpu_tok.collate import Collator, LengthBucketSampler

    sampler = LengthBucketSampler(lengths, batch_size=32, window=3200, seed=0)
    loader = torch.utils.data.DataLoader(texts, batch_sampler=sampler, num_workers=4,
                                         collate_fn=Collator(tok, max_length=2048, pad_to_multiple_of=8),
                                         pin_memory=torch.cuda.is_available())

Bucketing: the sampler shuffles the indices, sorts each window of `window`
indices by length, cuts it into batches and shuffles the batches, so a batch
holds documents of similar length and padding stays small while the order
stays random from epoch to epoch (`set_epoch`).

Pinned memory: in the main process (`num_workers=0`) the collator pins its
tensors itself when CUDA is present. DataLoader workers cannot pin (a forked
child must not touch CUDA), so there it leaves the tensors unpinned and the
DataLoader's `pin_memory=True` pins them in the main process, as PyTorch
intends. Both work under the fork, forkserver and spawn start methods: the
tokenizer survives fork and pickles for the others.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..compat.tokenizer import Tokenizer


class LengthBucketSampler:
    """A `batch_sampler` for DataLoader: batches of indices of similar length."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, batch_size: int, *, window: int | None = None,
                 shuffle: bool = True, drop_last: bool = False, seed: int = 0) -> None:
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.lengths = np.asarray(lengths)
        self.batch_size = batch_size
        self.window = window or 100 * batch_size  # sorting window, in indices
        self.shuffle, self.drop_last, self.seed, self.epoch = shuffle, drop_last, seed, 0

    def set_epoch(self, epoch: int) -> None:
        """A new order for each epoch (call it as for DistributedSampler)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng((self.seed, self.epoch))
        order = rng.permutation(len(self.lengths)) if self.shuffle else np.arange(len(self.lengths))
        batches = []
        for start in range(0, len(order), self.window):
            window = order[start:start + self.window]
            window = window[np.argsort(self.lengths[window], kind="stable")]
            batches += [window[i:i + self.batch_size].tolist() for i in range(0, len(window), self.batch_size)]
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        if self.shuffle:
            random.Random(int(rng.integers(2**63))).shuffle(batches)
        return iter(batches)

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.window)
        per_window = [self.window] * full + ([rest] if rest else [])
        if self.drop_last:
            return sum(n // self.batch_size for n in per_window)
        return sum(-(-n // self.batch_size) for n in per_window)


def _in_worker() -> bool:
    import torch.utils.data

    return torch.utils.data.get_worker_info() is not None


class Collator:
    """`collate_fn`: a list of examples to a dict of torch tensors
    (`input_ids`, `attention_mask`), padded to the batch's longest row, rounded
    up to `pad_to_multiple_of`, cut to `max_length`.

    An example is a str, a dict with `text_key` (tokenized here), or a dict with
    `ids_key` / a sequence of ids (padded as they are). `pin_memory=None` pins
    when CUDA is present and this is the main process (see the module docstring).
    """

    def __init__(self, tok: Tokenizer | None = None, *, max_length: int | None = None,
                 pad_to_multiple_of: int | None = 8, pad_token_id: int | None = None, padding_side: str = "right",
                 add_special_tokens: bool = True, text_key: str = "text", ids_key: str = "input_ids",
                 pin_memory: bool | None = None) -> None:
        if padding_side not in ("right", "left"):
            raise ValueError("padding_side must be 'right' or 'left'")
        if max_length and pad_to_multiple_of and max_length % pad_to_multiple_of:
            raise ValueError(f"max_length ({max_length}) must be a multiple of pad_to_multiple_of "
                             f"({pad_to_multiple_of}), as transformers requires")
        self.tok = tok
        self.max_length, self.pad_to_multiple_of = max_length, pad_to_multiple_of
        self.padding_side, self.add_special_tokens = padding_side, add_special_tokens
        self.text_key, self.ids_key = text_key, ids_key
        default_pad = getattr(tok, "pad_token_id", None) if tok is not None else None
        self.pad_token_id = pad_token_id if pad_token_id is not None else default_pad
        if pin_memory is None:
            import torch

            # Decided here, in the process that builds the loader: asking in a forked worker could touch CUDA.
            pin_memory = torch.cuda.is_available()
        self.pin_memory = pin_memory

    def __call__(self, examples: Sequence[Any]) -> dict[str, Any]:
        if not examples:
            raise ValueError("an empty batch")
        first = examples[0]
        if isinstance(first, str) or (isinstance(first, dict) and self.text_key in first):
            batch = self._tokenize([e if isinstance(e, str) else e[self.text_key] for e in examples])
        else:
            batch = self._pad([e[self.ids_key] if isinstance(e, dict) else e for e in examples])
        if self.pin_memory and not _in_worker():
            batch = {k: v.pin_memory() for k, v in batch.items()}
        return batch

    def _tokenize(self, texts: list[str]) -> dict[str, Any]:
        if self.tok is None:
            raise ValueError("examples are text, so the Collator needs a tokenizer")
        enc = self.tok(texts, padding=True, truncation=self.max_length is not None, max_length=self.max_length,
                       pad_to_multiple_of=self.pad_to_multiple_of, padding_side=self.padding_side,
                       pad_token_id=self.pad_token_id, add_special_tokens=self.add_special_tokens,
                       return_tensors="pt", return_token_type_ids=False, device="cpu")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    def _pad(self, rows: list[Any]) -> dict[str, Any]:
        import torch

        if self.pad_token_id is None:
            raise ValueError("padding ids needs a pad token: pass pad_token_id (the tokenizer names none)")
        arrays = [np.asarray(r, dtype=np.int64)[: self.max_length] for r in rows]
        width = max(len(a) for a in arrays)
        if self.pad_to_multiple_of:
            width = -(-width // self.pad_to_multiple_of) * self.pad_to_multiple_of
        ids = np.full((len(arrays), width), self.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(arrays), width), dtype=np.int64)
        for i, a in enumerate(arrays):
            span = slice(width - len(a), width) if self.padding_side == "left" else slice(0, len(a))
            ids[i, span], mask[i, span] = a, 1
        return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}


def tokenized_lengths(tok: Tokenizer, texts: Sequence[str], add_special_tokens: bool = True) -> np.ndarray:
    """Tokens per text (one batched call), for LengthBucketSampler."""
    enc = tok.encode_batch(list(texts), add_special_tokens=add_special_tokens, padding=False, truncation=False,
                           return_attention_mask=False, return_token_type_ids=False, device="cpu")
    return np.asarray(enc.lengths).astype(np.int64)
