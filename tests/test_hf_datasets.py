"""gpu_tok.hf_datasets: `Dataset.map(batched=True)` on a local dataset built from
the shared corpus gives the library call's tokens, as Arrow list<int32>."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from conftest import corpus_sample, ours
from gpu_tok.hf_datasets import TokenizeFunction, tokenize_dataset

datasets = pytest.importorskip("datasets")

NAME = "qwen3"


@pytest.fixture(scope="module")
def local_dataset(tmp_path_factory: pytest.TempPathFactory):
    datasets.disable_progress_bars()
    folder = tmp_path_factory.mktemp("hf")
    source = folder / "docs.jsonl"
    docs = corpus_sample()[:150]
    source.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                              for i, t in enumerate(docs)), encoding="utf-8")
    ds = datasets.Dataset.from_json(str(source), cache_dir=str(folder / "cache"))
    return ds, docs


def test_arrow_map_matches_the_library(local_dataset) -> None:
    ds, docs = local_dataset
    eos = ours(NAME).eos_token_id
    out = tokenize_dataset(ds, ours(NAME), append_eos=True, batch_size=64)
    assert out.format["type"] is None  # the dataset's own format again
    assert out.features["input_ids"].feature.dtype == "int32"
    want = [row + [eos] for row in ours(NAME)(docs, add_special_tokens=False)["input_ids"]]
    assert out["input_ids"] == want
    assert out["id"] == list(range(len(docs)))  # the other columns stay


def test_python_format_and_num_proc(local_dataset) -> None:
    ds, docs = local_dataset
    want = ours(NAME)(docs, add_special_tokens=True)["input_ids"]
    out = ds.map(TokenizeFunction(ours(NAME), add_special_tokens=True), batched=True, batch_size=50, num_proc=2)
    assert out["input_ids"] == want


def test_function_returns_arrow_without_python_lists() -> None:
    docs = corpus_sample()[:5]
    table = TokenizeFunction(ours(NAME))(pa.table({"text": docs}))
    column = table.column("input_ids")
    assert column.type == pa.list_(pa.int32())
    assert column.to_pylist() == ours(NAME)(docs, add_special_tokens=False)["input_ids"]
