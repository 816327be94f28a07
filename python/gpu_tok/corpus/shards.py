"""Token shard files written by `gpu-tok tokenize`, and reading them back.

One shard holds whole documents, in one of three formats:

- `npy`: `NAME.ids.npy` (flat uint32 ids) and `NAME.offsets.npy` (int64,
  documents + 1 entries: document i is `ids[offsets[i]:offsets[i + 1]]`).
- `megatron`: `NAME.bin` / `NAME.idx`, Megatron-LM's `MMapIndexedDataset`
  (`megatron/core/datasets/indexed_dataset.py`): `.bin` is the ids back to
  back (uint16 when the vocabulary has fewer than 65,500 tokens, else int32,
  as Megatron's `DType.optimal_dtype`); `.idx` is the header `MMIDIDX\\0\\0`,
  version (`<Q` 1), dtype code (`<B`: 8 uint16, 4 int32), sequence count
  (`<Q`), document count (`<Q`, sequences + 1), then the int32 length of each
  sequence, the int64 byte offset of each sequence in `.bin`, and the int64
  document indices `0, 1, ..., n` (one sequence per document). Pass `NAME`
  (the path without extension) to Megatron's `--data-path`; several shards
  are several prefixes.
- `parquet`: `NAME.parquet`, one row per document, column `input_ids` of type
  `list<int32>`, in row groups cut like shards: a row group ends with the
  document that brings it to `ROW_GROUP_TOKENS` tokens.

Every file's bytes depend only on the shard's documents, never on the batches
they arrived in, so a resumed run writes the same bytes as an uninterrupted one.
Writers stream: memory holds one batch plus 8 bytes per document (Parquet: plus
one row group), never the shard. Files are written under a `.tmp` name and
renamed once the whole shard is written: a shard file either is complete or
does not exist under its final name.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

FORMATS = ("npy", "megatron", "parquet")
TMP = ".tmp"
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPES = {8: np.uint16, 4: np.int32}  # Megatron's DType codes for the two dtypes used here
_NPY_HEADER_BYTES = 128  # room reserved for a 1-D .npy header, filled in when the length is known
# 4 MB of int32 ids: about what one 4 MB batch of text gives, as row groups were
# before they were cut by content; bounded memory, and row groups readers handle well.
ROW_GROUP_TOKENS = 1 << 20


def file_names(fmt: str, name: str) -> list[str]:
    """The files of shard `name` in format `fmt`."""
    return {"npy": [f"{name}.ids.npy", f"{name}.offsets.npy"], "megatron": [f"{name}.bin", f"{name}.idx"],
            "parquet": [f"{name}.parquet"]}[fmt]


class ShardWriter(Protocol):
    @property
    def tokens(self) -> int:
        """Tokens written so far."""

    @property
    def documents(self) -> int:
        """Documents written so far."""

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        """Appends documents: flat uint32 `ids` and their offsets (from 0)."""

    def finish(self) -> dict[str, dict[str, Any]]:
        """Completes the files, renames them to their final names, and returns
        {file name: {"bytes": size, "sha256": digest}}."""

    def abort(self) -> None:
        """Closes and removes the temporary files."""


def open_writer(fmt: str, directory: Path, name: str, vocab_size: int) -> ShardWriter:
    if fmt == "npy":
        return NpyWriter(directory, name)
    if fmt == "megatron":
        return MegatronWriter(directory, name, vocab_size)
    if fmt == "parquet":
        return ParquetWriter(directory, name)
    raise ValueError(f"unknown shard format {fmt!r}; expected one of {', '.join(FORMATS)}")


def file_sha256(path: Path) -> str:
    """sha256 of a file, hashed straight from the page cache (a memory map: no
    copy into Python buffers; hashlib releases the GIL)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return hashlib.sha256().hexdigest()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest()


def _publish(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Sizes and checksums of the complete temporary files, which then take their
    final names. (No fsync: a killed process cannot leave a half-written file
    under a final name; after an OS crash, a re-run checks the sizes.)"""
    files = {}
    for name in names:
        tmp = directory / (name + TMP)
        files[name] = {"bytes": tmp.stat().st_size, "sha256": file_sha256(tmp)}
    for name in names:  # only once every file of the shard is complete
        os.replace(directory / (name + TMP), directory / name)
    return files


def _remove(directory: Path, names: list[str]) -> None:
    for name in names:
        (directory / (name + TMP)).unlink(missing_ok=True)


def reaching(offsets: np.ndarray, start: int, tokens: int) -> int:
    """The end (exclusive) of the documents from `start` on that ends with the
    first one bringing them to `tokens` tokens, or of all of them: how shards
    and row groups are cut."""
    reached = np.searchsorted(offsets[start + 1:] - offsets[start], tokens, side="left")
    return min(start + int(reached) + 1, len(offsets) - 1)


class _StreamWriter:
    """Ids streamed to one file as they come, document lengths kept (8 bytes
    per document) for the index written at the end: what npy and Megatron
    shards share. Subclasses give the file names, the ids' dtype, and the
    header and index."""

    header_bytes = 0  # room left at the start of the ids file, filled in by `complete_ids`

    def __init__(self, directory: Path, names: list[str], dtype: np.dtype) -> None:
        self.directory, self.names, self.dtype = directory, names, dtype
        self.lengths: list[np.ndarray] = []
        self.tokens = 0
        self.documents = 0
        self.ids_file = open(directory / (names[0] + TMP), "wb")  # noqa: SIM115 - closed in finish/abort
        self.ids_file.write(b"\0" * self.header_bytes)

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids_file.write(np.ascontiguousarray(ids, dtype=self.dtype).data)
        self.lengths.append(np.diff(offsets))
        self.tokens += int(offsets[-1] - offsets[0])
        self.documents += len(offsets) - 1

    def finish(self) -> dict[str, dict[str, Any]]:
        self.complete_ids(self.ids_file)
        self.ids_file.close()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)
        with open(self.directory / (self.names[1] + TMP), "wb") as index:
            self.write_index(index, lengths)
        return _publish(self.directory, self.names)

    def abort(self) -> None:
        self.ids_file.close()
        _remove(self.directory, self.names)

    def complete_ids(self, ids_file: BinaryIO) -> None:
        """Fills in what the ids file could only have once every id is written."""

    def write_index(self, index: BinaryIO, lengths: np.ndarray) -> None:
        raise NotImplementedError


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A .npy version 1.0 header for a 1-D array, padded to exactly 128 bytes."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    body = text.ljust(_NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1")


class NpyWriter(_StreamWriter):
    header_bytes = _NPY_HEADER_BYTES

    def __init__(self, directory: Path, name: str) -> None:
        super().__init__(directory, file_names("npy", name), np.dtype(np.uint32))

    def complete_ids(self, ids_file: BinaryIO) -> None:
        ids_file.seek(0)
        ids_file.write(_npy_header(self.dtype, self.tokens))

    def write_index(self, index: BinaryIO, lengths: np.ndarray) -> None:
        np.save(index, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64), allow_pickle=False)


def megatron_dtype(vocab_size: int) -> type[np.number]:
    """Megatron's `DType.optimal_dtype`: uint16 below 65,500 tokens, else int32."""
    return np.uint16 if vocab_size < 65500 else np.int32


class MegatronWriter(_StreamWriter):
    def __init__(self, directory: Path, name: str, vocab_size: int) -> None:
        super().__init__(directory, file_names("megatron", name), np.dtype(megatron_dtype(vocab_size)))

    def write_index(self, index: BinaryIO, lengths: np.ndarray) -> None:
        pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) * self.dtype.itemsize
        code = next(c for c, t in MEGATRON_DTYPES.items() if np.dtype(t) == self.dtype)
        index.write(MEGATRON_HEADER)
        index.write(struct.pack("<Q", 1))
        index.write(struct.pack("<B", code))
        index.write(struct.pack("<Q", len(lengths)))
        index.write(struct.pack("<Q", len(lengths) + 1))
        index.write(lengths.astype(np.int32).tobytes())
        index.write(pointers[: len(lengths)].tobytes())
        index.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())


class ParquetWriter:
    """Documents gathered into row groups of about ROW_GROUP_TOKENS tokens, cut
    at fixed places (see the module docstring): Parquet's layout follows the
    tables written, which must therefore not be the batches."""

    def __init__(self, directory: Path, name: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.directory = directory
        self.names = file_names("parquet", name)
        self.schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
        self.writer = pq.ParquetWriter(directory / (self.names[0] + TMP), self.schema)
        self.tokens = 0
        self.documents = 0
        self.group_ids: list[np.ndarray] = []  # the row group being gathered
        self.group_lengths: list[np.ndarray] = []
        self.group_tokens = 0

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.tokens += int(offsets[-1] - offsets[0])
        self.documents += len(offsets) - 1
        start = 0
        while start < len(offsets) - 1:
            end = reaching(offsets, start, ROW_GROUP_TOKENS - self.group_tokens)
            self.group_ids.append(ids[offsets[start] - offsets[0]:offsets[end] - offsets[0]])
            self.group_lengths.append(np.diff(offsets[start:end + 1]))
            self.group_tokens += int(offsets[end] - offsets[start])
            start = end
            if self.group_tokens >= ROW_GROUP_TOKENS:
                self._write_group()

    def _write_group(self) -> None:
        import pyarrow as pa

        from .documents import to_arrow_lists

        ids = np.concatenate(self.group_ids)  # one contiguous array: the pages follow the content only
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(self.group_lengths))]).astype(np.int64)
        table = pa.Table.from_arrays([to_arrow_lists(ids, offsets)], schema=self.schema)
        self.writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.group_ids, self.group_lengths, self.group_tokens = [], [], 0

    def finish(self) -> dict[str, dict[str, Any]]:
        if self.group_lengths:
            self._write_group()
        self.writer.close()
        return _publish(self.directory, self.names)

    def abort(self) -> None:
        self.writer.close()
        _remove(self.directory, self.names)


# -- reading shards back -----------------------------------------------------------


def read_megatron(prefix: Path) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of a Megatron `.bin`/`.idx` pair, read as Megatron reads them."""
    with open(f"{prefix}.idx", "rb") as f:
        if f.read(9) != MEGATRON_HEADER:
            raise ValueError(f"{prefix}.idx: not a Megatron MMapIndexedDataset index")
        (version,) = struct.unpack("<Q", f.read(8))
        (code,) = struct.unpack("<B", f.read(1))
        sequences, documents = struct.unpack("<QQ", f.read(16))
        lengths = np.frombuffer(f.read(4 * sequences), np.int32)
        pointers = np.frombuffer(f.read(8 * sequences), np.int64)
        document_indices = np.frombuffer(f.read(8 * documents), np.int64)
    dtype = np.dtype(MEGATRON_DTYPES[code])
    if version != 1 or not np.array_equal(document_indices, np.arange(sequences + 1)):
        raise ValueError(f"{prefix}.idx: expected version 1 and one sequence per document")
    ids = np.fromfile(f"{prefix}.bin", dtype=dtype)
    offsets = np.concatenate([pointers // dtype.itemsize, [len(ids)]]).astype(np.int64)
    if not np.array_equal(np.diff(offsets), lengths):
        raise ValueError(f"{prefix}.idx: sequence pointers and lengths disagree")
    return ids, offsets


def read_shard(fmt: str, directory: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, offsets) of one shard; ids as stored (uint32, or Megatron's dtype, or int32)."""
    if fmt == "npy":
        ids_name, offsets_name = file_names("npy", name)
        return np.load(directory / ids_name, mmap_mode="r"), np.load(directory / offsets_name)
    if fmt == "megatron":
        return read_megatron(directory / name)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        column = pq.read_table(directory / file_names("parquet", name)[0]).column("input_ids").combine_chunks()
        offsets = column.offsets.to_numpy().astype(np.int64)
        return column.flatten().to_numpy(), offsets - offsets[0]
    raise ValueError(f"unknown shard format {fmt!r}")
