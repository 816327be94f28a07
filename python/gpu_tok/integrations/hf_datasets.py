"""Tokenizing a Hugging Face `datasets.Dataset` with gpu_tok.

    from gpu_tok.hf_datasets import TokenizeFunction, tokenize_dataset

    ds = tokenize_dataset(ds, tok, append_eos=True)             # adds input_ids: list<int32>
    ds = ds.with_format("arrow").map(TokenizeFunction(tok), batched=True, batch_size=1000)   # the same, by hand

`TokenizeFunction` is a function for `Dataset.map(batched=True)`. Given the
Arrow format (`with_format("arrow")`) it takes the batch as a pyarrow Table and
returns it with an Arrow `list<int32>` ids column: text goes to the engine
without a copy and ids come back without a Python list per token (datasets
writes the table as it is). Given the default (Python) format it returns one
numpy array per row. Ids are those of `gpu-tok tokenize`
(`gpu_tok.corpus.documents.encode_documents`).

(The module is `hf_datasets`, not `datasets`, so that it never shadows the
`datasets` package.)
"""

from __future__ import annotations

from typing import Any

from ..compat.tokenizer import Tokenizer
from ._columns import ColumnTokenizer


class TokenizeFunction(ColumnTokenizer):
    """Adds `output_column`, the ids of `text_column`, to a batch. Pickles with
    its tokenizer (tokenizer.json text), so `num_proc > 1` works."""

    def __init__(self, tok: Tokenizer, *, text_column: str = "text", output_column: str = "input_ids",
                 add_special_tokens: bool = False, append_eos: bool = False, device: str = "auto") -> None:
        super().__init__(tok, text_column=text_column, output_column=output_column,
                         add_special_tokens=add_special_tokens, append_eos=append_eos, device=device)

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa

        if isinstance(batch, pa.Table):
            return self._with_ids(batch)
        return {self.output_column: self._object_column(list(batch[self.text_column]))}


def tokenize_dataset(ds: Any, tok: Tokenizer, *, text_column: str = "text", output_column: str = "input_ids",
                     add_special_tokens: bool = False, append_eos: bool = False, device: str = "auto",
                     batch_size: int = 1000, **map_args: Any) -> Any:
    """`ds` with `output_column` added (Arrow in, Arrow out), in the dataset's
    own format afterwards. `map_args` go to `Dataset.map` (`num_proc`,
    `desc`, ...)."""
    fn = TokenizeFunction(tok, text_column=text_column, output_column=output_column,
                          add_special_tokens=add_special_tokens, append_eos=append_eos, device=device)
    original = ds.format
    mapped = ds.with_format("arrow").map(fn, batched=True, batch_size=batch_size, **map_args)
    return mapped.with_format(original["type"], **original["format_kwargs"])
