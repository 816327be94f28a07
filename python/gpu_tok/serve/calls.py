"""One engine call for many requests, and the answer of each request cut out of it.

Runs on the batcher's worker threads (the core releases the GIL while it
encodes). The call is the library's own `tok(texts, pairs, **options)`, so
answers are the library's by construction. Every function returns, per
request, either the response body (bytes) or the exception that request must
answer with, so a request that fails (`only_second` truncation that cannot
fit...) fails alone: a merged call that raises is retried one request at a time.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import orjson

from .._errors import GpuTokError
from ..compat.tokenizer import Tokenizer
from . import _wire
from .protocol import DecodeRequest, EncodeRequest

Outcome = bytes | Exception


class EncodeJob(NamedTuple):
    request: EncodeRequest
    packed: bool  # answer in the binary layout of `gpu_tok.serve._wire`, else JSON


class MergedCalls:
    """A tokenizer and the device its calls run on: one call for many requests, split back."""

    def __init__(self, tok: Tokenizer, device: str) -> None:
        self.tok = tok
        self.device = device

    # -- encode --------------------------------------------------------------------

    def encode(self, key: Any, jobs: list[EncodeJob]) -> list[Outcome]:
        options = dict(jobs[0].request.options)
        texts = [t for job in jobs for t in job.request.texts]
        pairs = [p for job in jobs for p in job.request.pairs or ()] if jobs[0].request.pairs is not None else None
        try:
            enc = self.tok(texts, pairs, device=self.device, **options)
        except (ValueError, TypeError, GpuTokError) as err:
            if len(jobs) == 1:
                return [err]
            return [self.encode(key, [job])[0] for job in jobs]
        try:
            return self._split(enc, jobs, options)
        except Exception as err:  # a bug here must fail these requests, not the server
            return [err] * len(jobs)

    def _split(self, enc: Any, jobs: list[EncodeJob], options: dict[str, Any]) -> list[Outcome]:
        names = list(enc.keys())
        lengths = enc.lengths.tolist()
        # Padding to the longest row depends on the batch: the merged call pads to the
        # longest of all, and each request's rows are cut back to its own longest.
        longest = options.get("padding") in (True, "longest")
        left = (options.get("padding_side") or getattr(self.tok, "padding_side", "right")) == "left"
        multiple = options.get("pad_to_multiple_of") or 1
        packed: list[bytes] | None = None
        if any(job.packed for job in jobs) and not longest:
            # Flat values (a padded batch is [B, L]: the same values, row after row), cut by row_offsets,
            # every request's body from one conversion of the batch.
            flat = {name: a.reshape(-1, 2) if name == "offset_mapping" else a.reshape(-1)
                    for name, a in enc.to_numpy().items()}
            packed = _wire.pack_many(enc.row_offsets, flat, [len(job.request.texts) for job in jobs])
        out: list[Outcome] = []
        start = 0
        for i, job in enumerate(jobs):
            stop = start + len(job.request.texts)
            if packed is not None and job.packed:
                out.append(packed[i])
            else:
                rows = {name: enc[name][start:stop] for name in names}
                if longest:
                    width = -(-max(lengths[start:stop], default=0) // multiple) * multiple
                    rows = {name: [_cut(row, width, left) for row in column] for name, column in rows.items()}
                out.append(_packed_rows(rows) if job.packed else orjson.dumps(rows))
            start = stop
        return out

    # -- decode --------------------------------------------------------------------

    def decode(self, key: tuple[bool, bool], jobs: list[DecodeRequest]) -> list[Outcome]:
        skip, clean_up = key
        rows = [row for job in jobs for row in job.ids]
        try:
            texts = self.tok.decode_batch(rows, skip_special_tokens=skip, clean_up_tokenization_spaces=clean_up)
        except (ValueError, TypeError, GpuTokError) as err:
            if len(jobs) == 1:
                return [err]
            return [self.decode(key, [job])[0] for job in jobs]
        out: list[Outcome] = []
        start = 0
        for job in jobs:
            out.append(orjson.dumps({"texts": texts[start:start + len(job.ids)]}))
            start += len(job.ids)
        return out


def _cut(row: list[Any], width: int, left: bool) -> list[Any]:
    """A row padded to the merged batch's width, cut to `width` on the padding's side."""
    if len(row) <= width:
        return row
    return row[len(row) - width:] if left else row[:width]


def _packed_rows(rows: dict[str, list[Any]]) -> bytes:
    lengths = [len(row) for row in rows["input_ids"]]
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return _wire.pack(offsets, {name: np.asarray([v for row in column for v in row], dtype=np.int32)
                                for name, column in rows.items()})
