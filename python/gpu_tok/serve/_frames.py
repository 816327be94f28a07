"""The frames of `gpu-tok serve`'s binary protocol (`--binary-port`, `--binary-uds`).

Shared by the server (`gpu_tok.serve.binary`) and `gpu_tok.client`, so the
layout is written down once (docs/SERVE.md has it as a table). All integers
little-endian. A connection carries frames back to back in each direction;
a client may send many requests before reading any answer (pipelining), and
answers come back in any order, each carrying its request's id.

Request frame (an `/encode` call):

    offset 0   uint32   L: the bytes that follow this field (the frame is 4 + L bytes)
    offset 4   uint32   request id, chosen by the client, echoed in the answer
    offset 8   uint32   B: number of texts
    offset 12  uint16   O: bytes of the options header (0: no options)
    offset 14  uint16   flags: bit 0 set: one pair per text follows the texts; other bits 0
    offset 16  O bytes  options: a UTF-8 JSON object of /encode's options (not texts, pairs)
    then       uint32   byte lengths of the B texts, then (with pairs) of the B pairs
    then       bytes    the texts in UTF-8 back to back, then the pairs; the frame ends there

Answer frame:

    offset 0   uint32   L: the bytes that follow this field
    offset 4   uint32   the request's id
    offset 8   uint32   status: 200, or 400 / 413 / 500 / 503 / 504 as over HTTP
    offset 12  bytes    200: the packed layout of `gpu_tok.serve._wire` (GTK1...);
                        else the JSON error `{"error": "...", "status": N}`, with
                        `"retry_after": 1` on 503
"""

from __future__ import annotations

import struct

REQUEST_HEAD = struct.Struct("<IIIHH")  # L, id, B, O, flags
ANSWER_HEAD = struct.Struct("<III")  # L, id, status
LENGTH_AND_ID = struct.Struct("<II")
FLAG_PAIRS = 1
MAX_ID = 2**32 - 1


_LENGTHS = [struct.Struct(f"<{n}I") for n in range(17)]


def lengths_struct(n: int) -> struct.Struct:
    """The struct of `n` uint32 (the byte lengths of a frame's texts; the small ones made once)."""
    return _LENGTHS[n] if n < len(_LENGTHS) else struct.Struct(f"<{n}I")


def request_frame(request_id: int, texts: list[str], pairs: list[str] | None, options: bytes) -> bytes:
    """One request frame; `options` is the JSON header (b"" for none)."""
    blobs = [t.encode("utf-8") for t in texts]
    if pairs is not None:
        blobs += [p.encode("utf-8") for p in pairs]
    sizes = [len(blob) for blob in blobs]
    size = REQUEST_HEAD.size - 4 + len(options) + 4 * len(blobs) + sum(sizes)
    head = REQUEST_HEAD.pack(size, request_id, len(texts), len(options), FLAG_PAIRS if pairs is not None else 0)
    return b"".join((head, options, lengths_struct(len(blobs)).pack(*sizes), *blobs))


def answer_frame(request_id: int, status: int, body: bytes) -> bytes:
    return ANSWER_HEAD.pack(8 + len(body), request_id, status) + body
