"""Reading documents for `gpu-tok tokenize`: JSON lines, text lines and Parquet,
plain or compressed, in batches of bounded size.

Formats, told by the file name:
- `.jsonl` / `.json` / `.ndjson`: one JSON object per line, the text in a
  field (`text` by default); blank lines are skipped.
- `.txt` / `.text`: one document per line (split at `\\n`, a trailing `\\r`
  removed), empty lines skipped.
- `.parquet`: a string column, read as Arrow arrays that go to the engine
  without a copy.
JSON lines and text may end in `.gz` (gzip) or `.zst` / `.zstd` (Zstandard,
through pyarrow).

Every input error names the file and the line (Parquet: the row): a record
that is not JSON or too deeply nested, a missing field, compressed data that
ends early or is not what the name says, and (found again by `refusal` when the
engine refuses a batch) text that is not valid Unicode. Nothing is skipped but
blank lines. This module only reads; it does not tokenize or write.
"""

from __future__ import annotations

import gzip
import json
import mmap
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._errors import InvalidInputError

KINDS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".txt": "txt", ".text": "txt",
         ".parquet": "parquet"}
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_CHUNK = 1 << 16  # decompressed bytes asked for at a time (small: a break is found near its line)
_RELEASE = 16 << 20  # bytes of a memory-mapped file parsed between releases of its pages


@dataclass(frozen=True)
class InputFile:
    path: Path
    kind: str  # "jsonl", "txt" or "parquet"
    compression: str | None  # "gzip", "zstd" or None
    size: int  # bytes on disk


@dataclass
class TextBatch:
    """Consecutive documents of one input file."""

    texts: Any  # list[str] or a pyarrow string array
    input_index: int  # which input file
    first_document: int  # index of texts[0] among the documents of that file
    record_bytes: np.ndarray  # input bytes of each document: its line with the newline; Parquet: the string
    source_bytes: int  # bytes of the file read for this batch (for progress)
    file: InputFile
    numbers: np.ndarray  # each document's line in the file (Parquet: its row), from 1, for error messages

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def input_bytes(self) -> int:
        return int(self.record_bytes.sum())


def describe_inputs(paths: list[str | Path]) -> list[InputFile]:
    """The inputs with their formats; a clear error for a missing file or an
    unknown format, before any work starts."""
    if not paths:
        raise InvalidInputError("no input files given")
    inputs = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InvalidInputError(f"{path}: no such file")
        if not path.is_file():
            raise InvalidInputError(f"{path}: not a file")
        suffixes = [s.lower() for s in path.suffixes]
        compression = COMPRESSIONS.get(suffixes[-1]) if suffixes else None
        if compression:
            suffixes = suffixes[:-1]
        kind = KINDS.get(suffixes[-1]) if suffixes else None
        if kind is None or (kind == "parquet" and compression):
            raise InvalidInputError(f"{path}: unknown input format; expected .jsonl, .json, .ndjson, .txt "
                                    "(optionally .gz or .zst) or .parquet")
        inputs.append(InputFile(path, kind, compression, path.stat().st_size))
    return inputs


def read_batches(inputs: list[InputFile], text_field: str = "text", batch_bytes: int = 8 << 20,
                 start: tuple[int, int] = (0, 0)) -> Iterator[TextBatch]:
    """Batches of about `batch_bytes` of input, file after file, starting at
    document `start[1]` of input `start[0]` (to resume a job)."""
    first_input, skip = start
    for index in range(first_input, len(inputs)):
        file = inputs[index]
        skip_here = skip if index == first_input else 0
        if file.kind == "parquet":
            yield from _parquet_batches(file, index, text_field, batch_bytes, skip_here)
        else:
            yield from _line_batches(file, index, text_field, batch_bytes, skip_here)


# -- JSON lines and text ---------------------------------------------------------


def _mapped_lines(file: InputFile) -> Iterator[tuple[Any, int]]:
    """Lines of an uncompressed file as slices of a memory map (no copy: orjson
    parses them in place), each with the file position after it."""
    if file.size == 0:
        return
    with open(file.path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # unmapped when the last slice is gone
    view = memoryview(mapped)
    position, size, released = 0, len(mapped), 0
    while position < size:
        end = mapped.find(b"\n", position)
        end = size if end < 0 else end
        yield view[position:end], end + 1
        position = end + 1
        if position - released >= _RELEASE and hasattr(mmap, "MADV_DONTNEED"):
            # Pages already parsed leave this process's resident set (they stay in the
            # page cache), so memory stays bounded however large the file.
            upto = position - position % mmap.PAGESIZE
            mapped.madvise(mmap.MADV_DONTNEED, released, upto - released)
            released = upto


def _stream_lines(file: InputFile) -> Iterator[tuple[Any, int]]:
    """Lines of a compressed file, each with the compressed bytes read so far.
    Data that ends early or does not decompress stops at the line it breaks
    (every whole line before it has been given)."""
    with open(file.path, "rb") as raw:
        count, pending = 0, b""
        try:
            if file.compression == "gzip":
                stream: Any = gzip.GzipFile(fileobj=raw, mode="rb")
            else:
                import pyarrow as pa

                stream = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")
            # read1: what one decompression step gives, so that every whole line before a break is given
            while chunk := stream.read1(_CHUNK):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                position = raw.tell()
                count += len(lines)
                for line in lines:
                    yield line, position
        except (EOFError, OSError, ValueError, zlib.error) as err:  # pyarrow's errors are OSError or ValueError
            raise InvalidInputError(
                f"{file.path}:{count + 1}: cannot read the {file.compression} data ({err}): the file is cut short, "
                f"damaged, or not {file.compression}") from None
        if pending:
            yield pending, raw.tell()


# orjson before 3.9.15 has no depth limit: a record nested ~100k deep overflows
# the C stack and kills the process (CVE-2024-27454).
_ORJSON_SAFE_FROM = (3, 9, 15)


def _json_loads(line: Any) -> Any:
    """json's loads of a line's UTF-8 (json takes str or bytes, not the
    memoryview slices of a mapped file; strict UTF-8, as orjson)."""
    return json.loads(str(line, "utf-8"))


def _fast_loads_function() -> Callable[[Any], Any]:
    """orjson's loads when installed (the corpus extra) and safe: it parses the
    shared corpus's lines in about 60% of json's time."""
    try:
        import orjson
    except ImportError:
        return _json_loads
    try:
        version = tuple(int(part) for part in orjson.__version__.split(".")[:3])
    except (AttributeError, ValueError):
        return _json_loads
    loads: Callable[[Any], Any] = orjson.loads
    return loads if version >= _ORJSON_SAFE_FROM else _json_loads


_fast_loads = _fast_loads_function()


def _is_blank(line: Any, is_json: bool) -> bool:
    """A line that holds no document (without parsing it)."""
    if is_json:
        return not bytes(line).strip()
    return len(line) == 0 or (len(line) == 1 and line[0] == 13)


def _json_text(line: Any, file: InputFile, number: int, field: str) -> str | None:
    """The text of a JSON line, None for a blank line."""
    where = f"{file.path}:{number}"
    try:
        record = _fast_loads(line)
    except (ValueError, RecursionError):
        # json is the reference: it takes what orjson refuses (NaN...) or explains why not.
        if _is_blank(line, True):
            return None
        try:
            record = _json_loads(line)
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"{where}: not UTF-8: {err}") from None
        except ValueError as err:
            raise InvalidInputError(f"{where}: not valid JSON: {err}") from None
        except RecursionError:
            raise InvalidInputError(f"{where}: JSON nested too deeply to read") from None
    if not isinstance(record, dict):
        raise InvalidInputError(f"{where}: expected a JSON object, found {type(record).__name__}")
    if field not in record:
        found = ", ".join(map(repr, list(record)[:10])) or "none"
        raise InvalidInputError(f"{where}: no field {field!r} (fields: {found}); choose one with --text-field")
    text = record[field]
    if not isinstance(text, str):
        kind = "null" if text is None else type(text).__name__
        raise InvalidInputError(f"{where}: field {field!r} is {kind}, not a string")
    return text


def _plain_text(line: Any, file: InputFile, number: int) -> str | None:
    """The text of a line (a trailing \\r removed), None for an empty line."""
    if len(line) and line[-1] == 13:  # \r
        line = line[:-1]
    if not len(line):
        return None
    try:
        return str(line, "utf-8")
    except UnicodeDecodeError as err:
        raise InvalidInputError(f"{file.path}:{number}: not UTF-8: {err}") from None


def _line_batches(file: InputFile, index: int, field: str, batch_bytes: int, skip: int) -> Iterator[TextBatch]:
    """Batches of JSON or text lines. A document's record size is its line with
    the newline (cheaper than the UTF-8 size of the text, which is not kept)."""
    is_json = file.kind == "jsonl"
    texts: list[str] = []
    sizes: list[int] = []
    numbers: list[int] = []
    size = 0
    document = 0  # documents seen in this file, skipped ones included
    reported = 0  # file bytes already reported in earlier batches
    lines = _stream_lines(file) if file.compression else _mapped_lines(file)
    for number, (line, position) in enumerate(lines, start=1):
        if document < skip:  # resuming: count documents without parsing them
            if not _is_blank(line, is_json):
                document += 1
            continue
        text = _json_text(line, file, number, field) if is_json else _plain_text(line, file, number)
        if text is None:
            continue
        document += 1
        texts.append(text)
        sizes.append(len(line) + 1)
        numbers.append(number)
        size += sizes[-1]
        if size >= batch_bytes:
            yield TextBatch(texts, index, document - len(texts), np.array(sizes, np.int64), position - reported,
                            file, np.array(numbers, np.int64))
            texts, sizes, numbers, size, reported = [], [], [], 0, position
    if texts:
        yield TextBatch(texts, index, document - len(texts), np.array(sizes, np.int64), file.size - reported,
                        file, np.array(numbers, np.int64))


# -- Parquet ---------------------------------------------------------------------


def _parquet_batches(file: InputFile, index: int, field: str, batch_bytes: int, skip: int) -> Iterator[TextBatch]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(file.path)
    except (pa.ArrowException, OSError) as err:
        raise InvalidInputError(f"{file.path}: not a readable Parquet file: {err}") from None
    schema = parquet.schema_arrow
    if field not in schema.names:
        found = ", ".join(map(repr, schema.names[:10]))
        raise InvalidInputError(f"{file.path}: no column {field!r} (columns: {found}); choose one with --text-field")
    kind = schema.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
        raise InvalidInputError(f"{file.path}: column {field!r} holds {kind}, not strings")
    rows = parquet.metadata.num_rows
    column = schema.get_field_index(field)
    stored = sum(parquet.metadata.row_group(g).column(column).total_uncompressed_size
                 for g in range(parquet.metadata.num_row_groups))
    rows_per_batch = max(1, batch_bytes * rows // max(stored, 1))
    row = 0
    # use_threads=False: this runs in read_ahead's thread already, and Arrow's own
    # thread pool would take cores from the encoder.
    for record_batch in parquet.iter_batches(batch_size=rows_per_batch, columns=[field], use_threads=False):
        texts = record_batch.column(0)
        first = row
        row += len(texts)
        if row <= skip:
            continue
        if first < skip:
            texts = texts.slice(skip - first)
            first = skip
        if pa.types.is_string_view(texts.type):
            texts = texts.cast(pa.string())
        if texts.null_count:
            bad = first + pc.index(pc.is_null(texts), True).as_py()
            raise InvalidInputError(f"{file.path}: row {bad + 1}: column {field!r} is null, not a string")
        sizes = pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
        yield TextBatch(texts, index, first, sizes, file.size * len(texts) // max(rows, 1), file,
                        np.arange(first + 1, first + len(texts) + 1, dtype=np.int64))


# -- a batch the engine refused --------------------------------------------------


def _first_invalid_text(texts: Any) -> tuple[int, str] | None:
    """(index, why) of the first text that has no UTF-8 form: a lone surrogate
    in a str (from a JSON escape), invalid bytes in an Arrow string array
    (Parquet does not check them). A slow scan, for the error path only."""
    if isinstance(texts, list):
        for i, text in enumerate(texts):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                return i, str(err)
        return None
    import pyarrow as pa

    for i, value in enumerate(texts.cast(pa.binary()).to_pylist()):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as err:
            return i, str(err)
    return None


def refusal(batch: TextBatch, field: str, err: Exception) -> InvalidInputError:
    """The error to raise when the engine refused `batch` (`err`): it names the
    document at fault, by file and line (Parquet: row), where it can be found,
    else the batch's lines."""
    file = batch.file
    invalid = _first_invalid_text(batch.texts)
    if invalid is not None:
        i, why = invalid
        number = int(batch.numbers[i])
        if file.kind == "parquet":
            return InvalidInputError(f"{file.path}: row {number}: column {field!r} is not valid UTF-8 ({why})")
        what = f"field {field!r}" if file.kind == "jsonl" else "the line"
        return InvalidInputError(f"{file.path}:{number}: {what} is not valid Unicode ({why}); lone surrogates "
                                 "are not text")
    unit = "rows" if file.kind == "parquet" else "lines"
    return InvalidInputError(f"{file.path}: {unit} {batch.numbers[0]}-{batch.numbers[-1]}: {err}")


# -- reading ahead ---------------------------------------------------------------


def read_ahead(batches: Iterator[TextBatch], depth: int = 2) -> Iterator[TextBatch]:
    """`batches`, produced by a thread up to `depth` batches ahead, so reading
    and parsing overlap with encoding (which releases the GIL). Memory stays
    bounded by `depth` batches."""
    slots: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer has gone

    def produce() -> None:
        try:
            for batch in batches:
                if not put(batch):
                    return
            put(done)
        except BaseException as err:  # handed to the consumer, which raises it
            put(err)

    thread = threading.Thread(target=produce, name="gpu_tok-reader", daemon=True)
    thread.start()
    try:
        while (item := slots.get()) is not done:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
