"""Tokenizing a Ray Data dataset: gpu_tok on Ray's engine, for corpora that
outgrow one machine.

    import ray.data
    from gpu_tok.ray import TokenizeBatch, tokenize_dataset

    ds = ray.data.read_json("s3://bucket/corpus/")              # or read_parquet, ...
    ds = tokenize_dataset(ds, "path/to/model", append_eos=True, concurrency=8)  # 8 actors
    ds.write_parquet("s3://bucket/tokens/")                     # column input_ids: list<int32>

`TokenizeBatch` is the callable class for `Dataset.map_batches`: each actor
loads the tokenizer once and encodes whole batches (Arrow string columns go
to the engine without a copy). It takes Arrow tables (the fastest), pandas
DataFrames or dicts of numpy arrays, and returns the same kind with an ids
column added. The ids are those of `gpu_tok.corpus.documents.encode_documents`, the
call `gpu-tok tokenize` makes. Ray is not a dependency of gpu_tok:
`pip install "ray[data]"` (the `ray` extra).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

from ..compat.tokenizer import Tokenizer
from ._columns import ColumnTokenizer


def _load(tokenizer: str | os.PathLike[str] | Tokenizer) -> Tokenizer:
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    return Tokenizer.from_pretrained(tokenizer) if os.path.isdir(tokenizer) else Tokenizer.from_file(tokenizer)


class TokenizeBatch(ColumnTokenizer):
    """`map_batches` callable: adds `output_column` (the ids of each row's
    `text_column`) to a batch.

    `tokenizer` is a model directory, a tokenizer.json path, or a Tokenizer
    (pickled to the actors as its tokenizer.json). `threads` caps gpu_tok's
    thread pool in each actor (match it to the actor's `num_cpus`).
    """

    def __init__(self, tokenizer: str | os.PathLike[str] | Tokenizer, *, text_column: str = "text",
                 output_column: str = "input_ids", add_special_tokens: bool = False, append_eos: bool = False,
                 device: str = "cpu", threads: int | None = None) -> None:
        if threads is not None:
            # Read when the pool first starts, which is at the first encode in this process.
            os.environ["GPU_TOK_NUM_THREADS"] = str(threads)
        super().__init__(_load(tokenizer), text_column=text_column, output_column=output_column,
                         add_special_tokens=add_special_tokens, append_eos=append_eos, device=device)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            return self._with_ids(batch)
        if isinstance(batch, dict):  # Ray's "numpy" format: column name -> numpy array
            return {**batch, self.output_column: self._object_column([str(t) for t in batch[self.text_column]])}
        if hasattr(batch, "assign"):  # a pandas DataFrame
            return batch.assign(**{self.output_column: self._rows(batch[self.text_column].tolist())})
        raise TypeError(f"TokenizeBatch takes a pyarrow Table, a pandas DataFrame or a dict of numpy arrays, "
                        f"not {type(batch).__name__}")


def tokenize_dataset(ds: Any, tokenizer: str | os.PathLike[str] | Tokenizer, *, text_column: str = "text",
                     output_column: str = "input_ids", add_special_tokens: bool = False, append_eos: bool = False,
                     device: str = "cpu", concurrency: int | tuple[int, int] = 1, num_cpus: float = 1,
                     batch_size: int | None = 1024, **map_batches_args: Any) -> Any:
    """`ds.map_batches(TokenizeBatch, ...)` with Arrow batches: a pool of
    `concurrency` actors (n, or (min, max) to autoscale) of `num_cpus` CPUs
    each (gpu_tok uses that many threads in each), and one GPU per actor when
    `device` is "cuda". Warns when the pool's first actors would leave no
    CPU of the cluster (the running one, else the local runtime Ray would
    start) to the tasks that read the dataset: Ray Data then waits forever."""
    try:
        import ray.data
    except ImportError as err:
        raise ImportError('gpu_tok.ray needs Ray Data: pip install "ray[data]" (the ray extra)') from err
    if device.startswith("cuda"):
        map_batches_args.setdefault("num_gpus", 1)
    if "compute" not in map_batches_args:
        map_batches_args["compute"] = (ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
                                       if isinstance(concurrency, tuple) else
                                       ray.data.ActorPoolStrategy(size=concurrency))
    _warn_if_reading_cannot_run(num_cpus, getattr(map_batches_args["compute"], "min_size", None) or 1)
    return ds.map_batches(
        TokenizeBatch, batch_format="pyarrow", batch_size=batch_size, num_cpus=num_cpus,
        fn_constructor_kwargs={"tokenizer": tokenizer, "text_column": text_column, "output_column": output_column,
                               "add_special_tokens": add_special_tokens, "append_eos": append_eos,
                               "device": device, "threads": max(1, int(num_cpus))},
        **map_batches_args)


def _warn_if_reading_cannot_run(num_cpus: float, actors: int) -> None:
    """Ray Data reads a dataset in tasks of one CPU each, which wait behind the
    actors (backpressure): a pool whose first `actors` take every CPU but a
    fraction of one starves them, and the job hangs without a word (on a
    2-CPU runtime with read_json: 1 actor of 1 CPU runs, 2 of 0.5 run;
    1 of 2, 2 of 1 and 2 of 0.9 hang)."""
    import ray

    cpus = ray.cluster_resources().get("CPU", 0) if ray.is_initialized() else os.cpu_count() or 1
    if actors * num_cpus > cpus - 1:
        fix = (f"pass num_cpus={(cpus - 1) / actors:g} or less, fewer actors, or add CPUs" if cpus >= 2
               else "add CPUs")
        warnings.warn(f"tokenize_dataset: {actors} actor(s) of num_cpus={num_cpus:g} leave less than one of this "
                      f"Ray cluster's {cpus:g} CPUs to the tasks that read the dataset, which then wait behind "
                      f"them forever: {fix}", RuntimeWarning, stacklevel=3)
