"""What the dataset integrations share: a batch's text column -> an ids column
(Arrow `list<int32>` in a pyarrow Table, or one numpy array per row), with
the ids of `gpu-tok tokenize` (`gpu_tok.corpus.documents.encode_documents`).
Each integration adds only its engine's parts (how the tokenizer reaches the
workers, which batch formats the engine passes, how the map is called)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..compat.tokenizer import Tokenizer
from ..corpus.documents import encode_documents, eos_token_id, split_documents, to_arrow_lists


class ColumnTokenizer:
    """Adds `output_column`, the ids of `text_column`, to a batch."""

    def __init__(self, tok: Tokenizer, *, text_column: str, output_column: str, add_special_tokens: bool,
                 append_eos: bool, device: str) -> None:
        self.tok = tok
        self.text_column, self.output_column = text_column, output_column
        self.add_special_tokens, self.device = add_special_tokens, device
        self.eos_id = eos_token_id(tok) if append_eos else None

    def _encode(self, texts: Any) -> tuple[np.ndarray, np.ndarray]:
        return encode_documents(self.tok, texts, add_special_tokens=self.add_special_tokens, eos_id=self.eos_id,
                                device=self.device)

    def _with_ids(self, table: Any) -> Any:
        """A pyarrow Table with the ids column (its text read without a copy)."""
        import pyarrow as pa

        column = table.column(self.text_column)
        if pa.types.is_string_view(column.type):
            column = column.cast(pa.string())
        ids = to_arrow_lists(*self._encode(column))
        if self.output_column in table.column_names:
            table = table.drop_columns([self.output_column])
        return table.append_column(self.output_column, ids)

    def _rows(self, texts: list[str]) -> list[np.ndarray]:
        """One numpy array of ids per text."""
        return split_documents(*self._encode(texts))

    def _object_column(self, texts: list[str]) -> np.ndarray:
        """`_rows` as one numpy object array (a column of arrays)."""
        rows = self._rows(texts)
        column = np.empty(len(rows), dtype=object)
        column[:] = rows
        return column
