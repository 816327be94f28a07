"""The smaller transformers differences (issue 35, part 4): max_length=0,
pad_to_multiple_of=0 and an empty batch, BatchEncoding's `.data` and `.to(dtype)`, and the names transformers users
call on a tokenizer (`added_tokens_decoder`, `init_kwargs`, `add_bos_token`,
`save_vocabulary`, `set_truncation_and_padding`, `do_lower_case`). The
oracle is `tokenizers` (ids) and transformers' documented behaviour."""

from __future__ import annotations

from pathlib import Path

import gpu_tok
import pytest
import tokenizers
import torch
from conftest import tokenizer_json

NAME = "bert-minilm"


def test_zero_lengths_and_empty_batches() -> None:
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(NAME))
    hf = tokenizers.Tokenizer.from_str(tokenizer_json(NAME))
    hf.no_padding()
    # max_length=0 with truncation: transformers (the crate) keeps each row's special tokens only.
    hf.enable_truncation(max_length=0)
    assert tok(["hello world", "a"], truncation=True, max_length=0)["input_ids"] == \
        [e.ids for e in hf.encode_batch(["hello world", "a"])]
    # pad_to_multiple_of=0: no multiple, as in transformers.
    assert tok(["hello world", "a"], padding=True, pad_to_multiple_of=0)["input_ids"] == \
        tok(["hello world", "a"], padding=True)["input_ids"]
    # An empty batch: an empty BatchEncoding (transformers raises IndexError; documented).
    assert tok([])["input_ids"] == []


def test_batch_encoding_data_and_to_dtype() -> None:
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(NAME))
    batch = tok(["hello world", "a"], padding=True, return_tensors="pt")
    assert batch.data["input_ids"] is batch["input_ids"]
    ids = batch["input_ids"]
    assert batch.to(torch.float16) is batch and batch["input_ids"].dtype == torch.int64
    assert torch.equal(batch["input_ids"], ids)
    assert batch.to("cpu")["input_ids"].device.type == "cpu"


def test_transformers_names(tmp_path: Path) -> None:
    text = tokenizer_json(NAME)
    tok = gpu_tok.Tokenizer.from_str(text)
    hf = tokenizers.Tokenizer.from_str(text)
    decoder, theirs = tok.added_tokens_decoder, hf.get_added_tokens_decoder()
    assert {i: (t.content, t.special, t.lstrip, t.rstrip, t.normalized) for i, t in decoder.items()} == \
        {i: (t.content, t.special, t.lstrip, t.rstrip, t.normalized) for i, t in theirs.items()}
    assert isinstance(tok.init_kwargs, dict)
    paths = tok.save_vocabulary(tmp_path)
    assert [Path(p).name for p in paths] == ["vocab.txt"]
    assert Path(paths[0]).read_text(encoding="utf-8").split("\n")[:5] == \
        [hf.id_to_token(i) for i in range(5)]
    with pytest.raises(NotADirectoryError):
        tok.save_vocabulary(tmp_path / "missing")
    # add_eos_token rebuilds the post-processor with the EOS token after each sequence.
    tok.eos_token = "[SEP]"
    tok.bos_token = "[CLS]"
    tok.add_eos_token = True
    assert tok.add_eos_token and not tok.add_bos_token
    ids = tok("hello world")["input_ids"]
    assert ids[-1] == tok.convert_tokens_to_ids("[SEP]") and ids[0] != tok.convert_tokens_to_ids("[CLS]")
    tok.add_bos_token = True
    assert tok("hello world")["input_ids"][0] == tok.convert_tokens_to_ids("[CLS]")


def test_transformers_data_collators_take_our_tokenizer_and_batches() -> None:
    transformers = pytest.importorskip("transformers")
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(NAME))
    features = [dict(tok(text)) for text in ("hello world", "a", "one two three four")]
    padded = transformers.DataCollatorWithPadding(tok, return_tensors="pt")([dict(f) for f in features])
    assert padded["input_ids"].shape == (3, max(len(f["input_ids"]) for f in features))
    ours = tok.pad([dict(f) for f in features], return_tensors="pt")
    assert padded["input_ids"].tolist() == ours["input_ids"].tolist()
    collator = transformers.DataCollatorForLanguageModeling(tok, mlm=False, return_tensors="pt")
    masked = collator([dict(f) for f in features])
    assert masked["labels"].shape == masked["input_ids"].shape
    assert isinstance(tok(["a"]), dict) and not isinstance(tok(["a"]), transformers.BatchEncoding)
