"""gpu_tok.collate: length-bucketed batches, collation that gives the library
call's ids, and DataLoader workers under fork, forkserver and spawn."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest
from conftest import HAVE_SHARED, corpus_sample, ours
from gpu_tok.collate import Collator, LengthBucketSampler, tokenized_lengths

torch = pytest.importorskip("torch")

NAME = "qwen3"
# Workers under spawn/forkserver unpickle the tokenizer: a small one keeps the test short.
SMALL = "bert-minilm" if HAVE_SHARED else NAME


def texts() -> list[str]:
    return [t[:600] for t in corpus_sample()[:96]]


def test_sampler_covers_every_index_once_in_sorted_windows() -> None:
    lengths = np.random.default_rng(1).integers(1, 1000, 1000)
    sampler = LengthBucketSampler(lengths, batch_size=16, window=160, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 1000 // 160 * 10 + 3
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert batches == list(sampler)  # the same epoch, the same order
    sampler.set_epoch(1)
    assert batches != list(sampler)
    # Bucketed batches waste much less padding than random ones.
    def padding(bs: list[list[int]]) -> int:
        return sum(int(lengths[b].max()) * len(b) - int(lengths[b].sum()) for b in bs)
    random_batches = [list(range(i, min(i + 16, 1000))) for i in range(0, 1000, 16)]
    assert padding(batches) * 5 < padding(random_batches)
    dropped = LengthBucketSampler(lengths, batch_size=16, window=160, drop_last=True)
    assert all(len(b) == 16 for b in dropped) and len(list(dropped)) == len(dropped)
    ordered = list(LengthBucketSampler(lengths, batch_size=16, window=1000, shuffle=False))
    assert [i for b in ordered for i in b] == np.argsort(lengths, kind="stable").tolist()


def test_collated_text_is_the_library_call() -> None:
    batch = texts()[:10]
    out = Collator(ours(NAME), max_length=96, pad_to_multiple_of=8, pin_memory=False)(batch)
    assert out["input_ids"].dtype == torch.int64 and out["input_ids"].shape[1] % 8 == 0
    want = ours(NAME)(batch, truncation=True, max_length=96)["input_ids"]
    got = [row[mask.bool()].tolist() for row, mask in zip(out["input_ids"], out["attention_mask"], strict=True)]
    assert got == want
    assert Collator(ours(NAME), pin_memory=False)([{"text": t} for t in batch])["input_ids"].shape[0] == 10


def test_pre_tokenized_ids_are_padded() -> None:
    rows = [[5, 6, 7], [8], np.array([1, 2, 3, 4, 5])]
    out = Collator(pad_token_id=0, pad_to_multiple_of=4, padding_side="left", pin_memory=False)(
        [{"input_ids": r} for r in rows])
    assert out["input_ids"].tolist() == [[0] * 5 + [5, 6, 7], [0] * 7 + [8], [0] * 3 + [1, 2, 3, 4, 5]]
    assert out["attention_mask"].sum(1).tolist() == [3, 1, 5]
    right = Collator(pad_token_id=9, pad_to_multiple_of=None, max_length=2, pin_memory=False)(rows)
    assert right["input_ids"].tolist() == [[5, 6], [8, 9], [1, 2]]
    with pytest.raises(ValueError, match="multiple of pad_to_multiple_of"):
        Collator(pad_token_id=0, max_length=10, pad_to_multiple_of=8)
    with pytest.raises(ValueError, match="pad token"):
        Collator(pin_memory=False)(rows)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_dataloader_workers(method: str) -> None:
    data = texts()
    sampler = LengthBucketSampler(tokenized_lengths(ours(SMALL), data), batch_size=12, window=48, seed=7)
    collate = Collator(ours(SMALL), max_length=128, pin_memory=False)
    want = [collate([data[i] for i in b]) for b in sampler]
    context = multiprocessing.get_context(method)
    if method == "forkserver":  # workers fork from a server that has imported these once
        context.set_forkserver_preload(["torch", "gpu_tok.collate"])
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler, collate_fn=collate, num_workers=2,
                                         multiprocessing_context=context, timeout=120)
    got = list(loader)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["attention_mask"], b["attention_mask"])


def test_pins_only_in_the_main_process_when_asked() -> None:
    collate = Collator(ours(NAME), pin_memory=True)
    if not torch.cuda.is_available():
        pytest.skip("pinning needs CUDA")
    assert collate(texts()[:4])["input_ids"].is_pinned()
