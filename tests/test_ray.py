"""gpu_tok.ray: on a local Ray runtime (2 CPUs, 2 actors) the tokens are those
of the single-process library call and of `gpu-tok tokenize`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import corpus_sample, ours
from gpu_tok import corpus
from gpu_tok.documents import encode_documents
from gpu_tok.ray import TokenizeBatch, tokenize_dataset

ray = pytest.importorskip("ray")
pd = pytest.importorskip("pandas")

NAME = "qwen3"

# Ray Data's DataContext warns about its own deprecated fields (use_push_based_shuffle,
# use_polars...) whenever Ray copies the context: Ray's business, not ours. Every
# other warning still fails the tests.
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")]


def texts() -> list[str]:
    return corpus_sample()[:80]


def library_rows(batch: list[str], eos: int | None) -> list[list[int]]:
    rows = ours(NAME)(batch, add_special_tokens=False)["input_ids"]
    return [row + [eos] for row in rows] if eos is not None else rows


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_map_batches_on_local_ray_matches_the_library(local_ray, tmp_path: Path) -> None:
    """Read from a file by Ray's read tasks, beside two actors of half a CPU
    (a pool that leaves the read tasks a CPU, which the warning below asks for)."""
    docs = texts()
    eos = ours(NAME).eos_token_id
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(docs)), encoding="utf-8")
    ds = ray.data.read_json(str(source))
    out = tokenize_dataset(ds, ours(NAME), append_eos=True, concurrency=2, num_cpus=0.5, batch_size=16)
    rows = {row["id"]: list(row["input_ids"]) for row in out.take_all()}
    assert [rows[i] for i in range(len(docs))] == library_rows(docs, eos)

    # ... and the same tokens as `gpu-tok tokenize` writes.
    corpus.tokenize_corpus(ours(NAME), [source], tmp_path / "out", append_eos=True)
    ids, offsets = corpus.load_tokens(tmp_path / "out")
    assert [ids[offsets[i]:offsets[i + 1]].tolist() for i in range(len(docs))] == [rows[i] for i in range(len(docs))]


class RecordingDataset:
    """Stands for a Ray Dataset: keeps what map_batches was given."""

    def map_batches(self, fn: object, **kwargs: object) -> dict:
        return kwargs


def test_actors_are_a_compute_strategy_not_the_deprecated_concurrency() -> None:
    """Ray 2.51+ logs a deprecation for map_batches(concurrency=...) on every call."""
    fixed = tokenize_dataset(RecordingDataset(), ours(NAME), concurrency=2, num_cpus=0.5)
    assert "concurrency" not in fixed and fixed["num_cpus"] == 0.5
    assert isinstance(fixed["compute"], ray.data.ActorPoolStrategy)
    assert (fixed["compute"].min_size, fixed["compute"].max_size) == (2, 2)
    scaling = tokenize_dataset(RecordingDataset(), ours(NAME), concurrency=(1, 3))["compute"]
    assert (scaling.min_size, scaling.max_size) == (1, 3)
    mine = ray.data.ActorPoolStrategy(min_size=1, max_size=5)
    assert tokenize_dataset(RecordingDataset(), ours(NAME), compute=mine)["compute"] is mine


def test_actors_that_leave_no_cpu_to_reading_are_a_warning(local_ray) -> None:
    """On a 2-CPU runtime, read_json beside a pool whose first actors take more
    than one CPU hangs without a word (seen: 1 actor of 2 CPUs, 2 of 1, 2 of
    0.9), so gpu_tok says so; pools that leave a CPU (1 of 1, 2 of 0.5, 1 to 2
    of 1 autoscaling) ran, and get no warning."""
    for num_cpus, concurrency, fix in ((2, 1, "num_cpus=1 or less"), (1, 2, "num_cpus=0.5 or less"),
                                       (0.9, 2, "num_cpus=0.5 or less")):
        with pytest.warns(RuntimeWarning, match=rf"{concurrency} actor\(s\) of num_cpus={num_cpus:g} leave less "
                                                rf"than one of this Ray cluster's 2 CPUs .* {fix}"):
            tokenize_dataset(RecordingDataset(), ours(NAME), num_cpus=num_cpus, concurrency=concurrency)
    with pytest.warns(RuntimeWarning, match="3 actor"):
        tokenize_dataset(RecordingDataset(), ours(NAME), num_cpus=0.5, compute=ray.data.ActorPoolStrategy(size=3))
    # No warning (pytest fails on one):
    for num_cpus, concurrency in ((1, 1), (0.5, 2), (1, (1, 2))):
        tokenize_dataset(RecordingDataset(), ours(NAME), num_cpus=num_cpus, concurrency=concurrency)


def test_batch_formats_without_ray() -> None:
    docs = texts()[:12]
    fn = TokenizeBatch(ours(NAME), output_column="ids")
    want = library_rows(docs, None)
    table = fn(pa.table({"text": docs, "n": range(12)}))
    assert table.column_names == ["text", "n", "ids"] and table.column("ids").type == pa.list_(pa.int32())
    assert table.column("ids").to_pylist() == want
    frame = fn(pd.DataFrame({"text": docs}))
    assert [row.tolist() for row in frame["ids"]] == want
    numpy_batch = fn({"text": np.array(docs, dtype=object)})
    assert [row.tolist() for row in numpy_batch["ids"]] == want
    with pytest.raises(TypeError, match="pyarrow Table"):
        fn([1, 2])


def test_same_ids_as_encode_documents() -> None:
    docs = texts()[:20]
    ids, offsets = encode_documents(ours(NAME), docs)
    arrow = TokenizeBatch(ours(NAME))(pa.table({"text": pa.array(docs, pa.large_string())}))
    np.testing.assert_array_equal(arrow.column("input_ids").combine_chunks().flatten().to_numpy(), ids)
