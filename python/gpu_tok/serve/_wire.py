"""The packed binary body of `POST /encode` with `Accept: application/octet-stream`.

Shared by the server (`gpu_tok.serve`, which packs) and `gpu_tok.client`
(which unpacks), so the layout is written down once. All little-endian:

    offset 0   4 bytes   magic b"GTK1"
    offset 4   uint32    rows (B)
    offset 8   uint32    tokens (N), the sum of the row lengths
    offset 12  uint32    fields: a bit set of FIELD_FLAGS (input_ids is always there)
    offset 16  int64     row_offsets[B + 1]: row i is tokens [row_offsets[i], row_offsets[i + 1])
    then       int32     input_ids[N]
    then, for each field whose bit is set, in FIELD_FLAGS order:
               int32     attention_mask[N] | token_type_ids[N] | special_tokens_mask[N]
               int32     offset_mapping[N][2] (start, end) character offsets

Padded results are rows of equal length, so the same layout holds them.
Every array starts on a 4-byte boundary (row_offsets on an 8-byte one).
"""

from __future__ import annotations

import struct
import sys
from array import array
from typing import Any

MAGIC = b"GTK1"
CONTENT_TYPE = "application/octet-stream"
_HEADER = struct.Struct("<4sIII")

# The optional fields, their bit in the header and their order in the body.
FIELD_FLAGS = {"attention_mask": 1, "token_type_ids": 2, "special_tokens_mask": 4, "offset_mapping": 8}


def pack(row_offsets: Any, fields: dict[str, Any]) -> bytes:
    """One response body from numpy arrays: `row_offsets` (B + 1 ints) and
    `fields` (`input_ids` plus any of FIELD_FLAGS, flat, N or N x 2 values)."""
    import numpy as np

    flags = sum(flag for name, flag in FIELD_FLAGS.items() if name in fields)
    ids = fields["input_ids"]
    parts = [_HEADER.pack(MAGIC, len(row_offsets) - 1, len(ids), flags),
             np.ascontiguousarray(row_offsets, dtype="<i8").tobytes(),
             np.ascontiguousarray(ids, dtype="<i4").tobytes()]
    parts += [np.ascontiguousarray(fields[name], dtype="<i4").tobytes() for name in FIELD_FLAGS if name in fields]
    return b"".join(parts)


def pack_many(row_offsets: Any, fields: dict[str, Any], counts: list[int]) -> list[bytes]:
    """`pack` for consecutive slices of one batch: body i holds the next
    `counts[i]` rows, its row offsets rebased to 0. Every array is converted
    once for all the bodies (a merged engine call answers many requests)."""
    import numpy as np

    if not counts:
        return []
    offsets = np.asarray(row_offsets, dtype=np.int64)
    rows = np.asarray(counts, dtype=np.int64)
    sizes = rows + 1  # a body has rows + 1 offsets
    firsts = np.cumsum(rows) - rows  # the first row of each body
    starts = np.cumsum(sizes) - sizes  # where each body's offsets start in `rebased`
    # row_offsets[first_i .. first_i + counts[i]] - row_offsets[first_i], for every body, back to back
    index = np.arange(int(sizes.sum())) - np.repeat(starts - firsts, sizes)
    rebased = (offsets[index] - np.repeat(offsets[firsts], sizes)).astype("<i8").tobytes()
    flags = sum(flag for name, flag in FIELD_FLAGS.items() if name in fields)
    names = ["input_ids"] + [name for name in FIELD_FLAGS if name in fields]
    blobs = [(np.ascontiguousarray(fields[name], dtype="<i4").tobytes(), 8 if name == "offset_mapping" else 4)
             for name in names]
    bounds = offsets.tolist()
    head = _HEADER.pack
    out = []
    row = at = 0
    for count in counts:
        a, b = bounds[row], bounds[row + count]
        parts = [head(MAGIC, count, b - a, flags), rebased[8 * at:8 * (at + count + 1)]]
        parts += [blob[width * a:width * b] for blob, width in blobs]
        out.append(b"".join(parts))
        row += count
        at += count + 1
    return out


def unpack(body: bytes) -> dict[str, Any]:
    """A packed body as numpy arrays: `row_offsets` (int64, B + 1), `input_ids`
    and the other fields (int32, flat; `offset_mapping` is N x 2)."""
    import numpy as np

    if len(body) < _HEADER.size:
        raise ValueError("packed body too short for its header")
    magic, rows, tokens, flags = _HEADER.unpack_from(body)
    if magic != MAGIC:
        raise ValueError(f"packed body starts with {magic!r}, not {MAGIC!r}")
    names = ["input_ids"] + [name for name, flag in FIELD_FLAGS.items() if flags & flag]
    expected = _HEADER.size + 8 * (rows + 1) + sum(4 * tokens * (2 if n == "offset_mapping" else 1) for n in names)
    if len(body) != expected:
        raise ValueError(f"packed body has {len(body)} bytes, its header announces {expected}")
    out: dict[str, Any] = {"row_offsets": np.frombuffer(body, "<i8", rows + 1, _HEADER.size)}
    at = _HEADER.size + 8 * (rows + 1)
    for name in names:
        width = 2 if name == "offset_mapping" else 1
        values = np.frombuffer(body, "<i4", tokens * width, at)
        out[name] = values.reshape(tokens, 2) if width == 2 else values
        at += 4 * tokens * width
    return out


def to_rows(unpacked: dict[str, Any]) -> dict[str, list[Any]]:
    """Unpacked arrays as per-row lists, the shape of the JSON answer."""
    offsets = unpacked["row_offsets"].tolist()
    return {name: [values[a:b].tolist() for a, b in zip(offsets, offsets[1:], strict=False)]
            for name, values in unpacked.items() if name != "row_offsets"}


def rows(body: bytes) -> dict[str, list[Any]]:
    """A packed body as per-row lists (the JSON answer's shape, `to_rows(unpack(body))`)
    with the standard library only (the binary protocol's clients)."""
    if len(body) < _HEADER.size:
        raise ValueError("packed body too short for its header")
    magic, count, tokens, flags = _HEADER.unpack_from(body)
    if magic != MAGIC:
        raise ValueError(f"packed body starts with {magic!r}, not {MAGIC!r}")
    at = _HEADER.size + 8 * (count + 1)
    widths = [1] + [2 if name == "offset_mapping" else 1 for name, flag in FIELD_FLAGS.items() if flags & flag]
    if len(body) != at + 4 * tokens * sum(widths):
        raise ValueError(f"packed body has {len(body)} bytes, its header announces {at + 4 * tokens * sum(widths)}")
    offsets = array("q", body[_HEADER.size:at])
    values = array("i", body[at:])
    if sys.byteorder == "big":
        offsets.byteswap()
        values.byteswap()
    bounds = offsets.tolist()
    flat = values.tolist()
    names = ["input_ids"] + [name for name, flag in FIELD_FLAGS.items() if flags & flag]
    out: dict[str, list[Any]] = {}
    base = 0
    for name, width in zip(names, widths, strict=True):
        if width == 1:
            out[name] = [flat[base + a:base + b] for a, b in zip(bounds, bounds[1:], strict=False)]
        else:
            pairs = [flat[i:i + 2] for i in range(base, base + 2 * tokens, 2)]
            out[name] = [pairs[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
        base += tokens * width
    return out
