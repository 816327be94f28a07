"""Arrow string arrays as input: zero copy through the C data interface, the
same results as lists of str, and clear errors for what is not text."""

from __future__ import annotations

import pyarrow as pa
import pytest
from conftest import corpus_sample, edge_cases, ours

NAME = "qwen3"


def texts() -> list[str]:
    return edge_cases()[:200] + corpus_sample()[:20]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_arrow_arrays_match_lists(kind) -> None:
    batch = texts()
    expected = ours(NAME)(batch)["input_ids"]
    assert ours(NAME)(pa.array(batch, type=kind))["input_ids"] == expected
    sliced = pa.array(batch, type=kind).slice(5, 50)  # a non-zero array offset
    assert ours(NAME)(sliced)["input_ids"] == expected[5:55]
    assert ours(NAME).encode_batch(pa.array(batch, type=kind)).to_lists()["input_ids"] == expected


def test_chunked_arrays_and_pairs() -> None:
    batch = texts()
    chunked = pa.chunked_array([batch[:100], batch[100:]])
    assert ours(NAME)(chunked)["input_ids"] == ours(NAME)(batch)["input_ids"]
    pairs = pa.array(batch[1:] + batch[:1])
    assert ours(NAME)(pa.array(batch), pairs)["input_ids"] == ours(NAME)(batch, batch[1:] + batch[:1])["input_ids"]


def test_arrow_errors() -> None:
    with pytest.raises(TypeError, match=r"texts\[1\] is null"):
        ours(NAME)(pa.array(["a", None, "c"]))
    with pytest.raises(TypeError, match="string array"):
        ours(NAME)(pa.array([1, 2, 3]))


def from_raw(rows: list[bytes]) -> pa.Array:
    """A string array holding `rows` as they are (pyarrow does not validate)."""
    offsets = [0]
    for row in rows:
        offsets.append(offsets[-1] + len(row))
    offsets_buffer = pa.array(offsets, pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.string(), len(rows), [None, offsets_buffer, pa.py_buffer(b"".join(rows))])


def test_a_column_of_megabytes_is_validated_in_pieces_that_keep_its_characters() -> None:
    # 3- and 4-byte characters (11-byte units) across the places a piece is cut (about 1 MB apart).
    rows = ["€€𝄞 " * 40_000 + f"row {i}" for i in range(10)]
    column = pa.array(rows)
    assert sum(len(r.encode()) for r in rows) > 4 << 20
    assert ours(NAME)(column)["input_ids"] == ours(NAME)(rows)["input_ids"]
    assert ours(NAME)(from_raw([r.encode() for r in rows]))["input_ids"] == ours(NAME)(rows)["input_ids"]


@pytest.mark.parametrize("at", [0, (1 << 20) - 1, 1 << 20, 3 << 20])
def test_invalid_utf8_anywhere_in_a_column_is_a_value_error(at: int) -> None:
    data = bytearray("€".encode() * (2 << 20))  # 6 MB of 3-byte characters
    data[at] = 0xFF
    column = from_raw([bytes(data[: 3 << 20]), bytes(data[3 << 20 :])])
    with pytest.raises(ValueError, match="invalid UTF-8"):
        ours(NAME)(column)


def test_a_row_that_splits_a_character_is_a_value_error() -> None:
    euro = "€".encode()
    with pytest.raises(ValueError, match="character boundaries"):
        ours(NAME)(from_raw([euro[:1], euro[1:]]))


@pytest.mark.parametrize("offsets", [[0, 5, 3, 6], [0, -5, 3, 6]])
def test_offsets_out_of_order_are_a_value_error(offsets: list[int]) -> None:
    buffers = [None, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(b"abcdef")]
    with pytest.raises(ValueError, match="malformed Arrow string array"):
        ours(NAME)(pa.Array.from_buffers(pa.string(), 3, buffers))
