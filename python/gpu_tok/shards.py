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
  `list<int32>`.

Writers stream: memory holds one batch plus 8 bytes per document, never the
shard. Files are written under a `.tmp` name and renamed once the whole shard
is written: a shard file either is complete or does not exist under its final
name.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from pathlib import Path
from typing import Any, Protocol

import numpy as np

FORMATS = ("npy", "megatron", "parquet")
TMP = ".tmp"
MEGATRON_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPES = {8: np.uint16, 4: np.int32}  # Megatron's DType codes for the two dtypes used here
_NPY_HEADER_BYTES = 128  # room reserved for a 1-D .npy header, filled in when the length is known


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


class _Offsets:
    """Document lengths gathered across writes (8 bytes per document)."""

    def __init__(self) -> None:
        self.lengths: list[np.ndarray] = []
        self.tokens = 0
        self.documents = 0

    def add(self, offsets: np.ndarray) -> None:
        self.lengths.append(np.diff(offsets))
        self.tokens += int(offsets[-1] - offsets[0])
        self.documents += len(offsets) - 1

    def all_lengths(self) -> np.ndarray:
        return np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int64)

    def all_offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.all_lengths())]).astype(np.int64)


def _npy_header(dtype: np.dtype, length: int) -> bytes:
    """A .npy version 1.0 header for a 1-D array, padded to exactly 128 bytes."""
    text = f"{{'descr': '{dtype.str}', 'fortran_order': False, 'shape': ({length},), }}"
    body = text.ljust(_NPY_HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body.encode("latin1")


class NpyWriter:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.names = file_names("npy", name)
        self.offsets = _Offsets()
        self.ids_file = open(directory / (self.names[0] + TMP), "wb")  # noqa: SIM115 - closed in finish/abort
        self.ids_file.write(b"\0" * _NPY_HEADER_BYTES)

    @property
    def tokens(self) -> int:
        return self.offsets.tokens

    @property
    def documents(self) -> int:
        return self.offsets.documents

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids_file.write(np.ascontiguousarray(ids, dtype=np.uint32).data)
        self.offsets.add(offsets)

    def finish(self) -> dict[str, dict[str, Any]]:
        self.ids_file.seek(0)
        self.ids_file.write(_npy_header(np.dtype(np.uint32), self.tokens))
        self.ids_file.close()
        with open(self.directory / (self.names[1] + TMP), "wb") as f:
            np.save(f, self.offsets.all_offsets(), allow_pickle=False)
        return _publish(self.directory, self.names)

    def abort(self) -> None:
        self.ids_file.close()
        _remove(self.directory, self.names)


def megatron_dtype(vocab_size: int) -> type[np.number]:
    """Megatron's `DType.optimal_dtype`: uint16 below 65,500 tokens, else int32."""
    return np.uint16 if vocab_size < 65500 else np.int32


class MegatronWriter:
    def __init__(self, directory: Path, name: str, vocab_size: int) -> None:
        self.directory = directory
        self.names = file_names("megatron", name)
        self.dtype = np.dtype(megatron_dtype(vocab_size))
        self.offsets = _Offsets()
        self.bin_file = open(directory / (self.names[0] + TMP), "wb")  # noqa: SIM115 - closed in finish/abort

    @property
    def tokens(self) -> int:
        return self.offsets.tokens

    @property
    def documents(self) -> int:
        return self.offsets.documents

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.bin_file.write(np.ascontiguousarray(ids, dtype=self.dtype).data)
        self.offsets.add(offsets)

    def finish(self) -> dict[str, dict[str, Any]]:
        self.bin_file.close()
        lengths = self.offsets.all_lengths()
        pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) * self.dtype.itemsize
        code = next(c for c, t in MEGATRON_DTYPES.items() if np.dtype(t) == self.dtype)
        with open(self.directory / (self.names[1] + TMP), "wb") as idx:
            idx.write(MEGATRON_HEADER)
            idx.write(struct.pack("<Q", 1))
            idx.write(struct.pack("<B", code))
            idx.write(struct.pack("<Q", len(lengths)))
            idx.write(struct.pack("<Q", len(lengths) + 1))
            idx.write(lengths.astype(np.int32).tobytes())
            idx.write(pointers[: len(lengths)].tobytes())
            idx.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
        return _publish(self.directory, self.names)

    def abort(self) -> None:
        self.bin_file.close()
        _remove(self.directory, self.names)


class ParquetWriter:
    def __init__(self, directory: Path, name: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.directory = directory
        self.names = file_names("parquet", name)
        self.schema = pa.schema([("input_ids", pa.list_(pa.int32()))])
        self.writer = pq.ParquetWriter(directory / (self.names[0] + TMP), self.schema)
        self.tokens = 0
        self.documents = 0

    def write(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        import pyarrow as pa

        from .documents import to_arrow_lists

        self.writer.write_table(pa.Table.from_arrays([to_arrow_lists(ids, offsets)], schema=self.schema))
        self.tokens += int(offsets[-1])
        self.documents += len(offsets) - 1

    def finish(self) -> dict[str, dict[str, Any]]:
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
