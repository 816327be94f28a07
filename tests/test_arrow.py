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
