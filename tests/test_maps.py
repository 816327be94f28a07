"""Per-token maps, overflowing windows, pre-split words and split_special_tokens,
computed by the core, against `tokenizers` (the oracle: same tokenizer.json,
same truncation and padding): every row's ids, type ids, tokens, offsets,
masks, word and sequence ids and the crate's lookups, windows in the crate's
order. Then what the crate panics on (refused with a typed error), an
overflow too big for memory (refused before it is built), and the maps
surviving pickles and DataLoader workers under fork, forkserver and spawn.
"""

from __future__ import annotations

import pickle
import resource
import subprocess
import sys
from typing import Any

import gpu_tok
import pytest
import tokenizers
import torch
from conftest import TOKENIZER_NAMES, chat_rows, corpus_sample, edge_cases, ours, tokenizer_json

TIMEOUT = 240


def texts_for(name: str) -> list[str]:
    docs = [t[:700] for t in corpus_sample()[:12]]
    return edge_cases()[::25] + docs + chat_rows(name)[:6] + ["", "Hello world", "a b"]


def oracle(name: str, truncation: dict[str, Any] | None = None, padding: dict[str, Any] | None = None,
           split_special: bool = False) -> tokenizers.Tokenizer:
    hf = tokenizers.Tokenizer.from_str(tokenizer_json(name))
    hf.no_truncation()
    hf.no_padding()
    if truncation:
        hf.enable_truncation(**truncation)
    if padding:
        hf.enable_padding(**padding)
    hf.encode_special_tokens = split_special
    return hf


def flat(encodings: list[Any]) -> list[Any]:
    return [row for e in encodings for row in (e, *e.overflowing)]


def assert_rows(got: list[Any], expected: list[Any], where: str) -> None:
    assert len(got) == len(expected), where
    for k, (a, b) in enumerate(zip(got, expected, strict=True)):
        at = f"{where} row {k}"
        for field in ("ids", "type_ids", "tokens", "offsets", "attention_mask", "special_tokens_mask", "word_ids",
                      "sequence_ids", "n_sequences"):
            assert getattr(a, field) == getattr(b, field), f"{at}: {field}"
        assert len(a) == len(b), at
        n = len(b)
        for token in {0, 1, n // 2, max(n - 1, 0), n}:
            assert a.token_to_sequence(token) == b.token_to_sequence(token), f"{at}: token_to_sequence({token})"
            assert a.token_to_chars(token) == b.token_to_chars(token), f"{at}: token_to_chars({token})"
            assert a.token_to_word(token) == b.token_to_word(token), f"{at}: token_to_word({token})"
        last = max((end for _, end in b.offsets), default=0)
        for seq in range(b.n_sequences):
            for char in {0, 1, last // 3, last // 2, max(last - 1, 0), last}:
                assert a.char_to_token(char, seq) == b.char_to_token(char, seq), f"{at}: char_to_token({char}, {seq})"
                assert a.char_to_word(char, seq) == b.char_to_word(char, seq), f"{at}: char_to_word({char}, {seq})"
            for word in {0, 1, 3, 7}:
                assert a.word_to_tokens(word, seq) == b.word_to_tokens(word, seq), f"{at}: word_to_tokens({word})"
                assert a.word_to_chars(word, seq) == b.word_to_chars(word, seq), f"{at}: word_to_chars({word})"


def pad_args(name: str, side: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tok(...) arguments, the oracle's enable_padding) for the same padding."""
    return dict(padding=True, padding_side=side, pad_token_id=0), dict(direction=side, pad_id=0, pad_token="")


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_maps_of_a_plain_call_are_the_crates(name: str) -> None:
    tok, texts = ours(name), texts_for(name)
    pairs = list(reversed(texts))
    for add_special_tokens in (True, False):
        got = tok(texts, add_special_tokens=add_special_tokens)
        assert_rows(got.encodings, oracle(name).encode_batch(texts, add_special_tokens=add_special_tokens),
                    f"{name} single {add_special_tokens}")
    ask, padding = pad_args(name, "left")
    got = tok(texts, pairs, truncation=True, max_length=40, **ask)
    expected = oracle(name, dict(max_length=40), padding).encode_batch(list(zip(texts, pairs, strict=True)))
    assert_rows(got.encodings, expected, f"{name} pairs")
    for i in (0, 5, len(texts) - 1):  # BatchEncoding's own methods read the same maps
        assert got.word_ids(i) == expected[i].word_ids and got.tokens(i) == expected[i].tokens
        assert got.sequence_ids(i) == expected[i].sequence_ids


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_overflowing_windows_are_the_crates(name: str) -> None:
    tok, texts = ours(name), texts_for(name)
    pairs = list(reversed(texts))
    for max_length, stride, strategy, side, padded in ((9, 2, "longest_first", "right", False),
                                                       (16, 4, "longest_first", "left", True),
                                                       (12, 1, "only_second", "right", False),
                                                       (12, 0, "only_first", "left", True)):
        for with_pairs in (False, True):
            if strategy != "longest_first" and not with_pairs:
                continue
            ask, padding = pad_args(name, side) if padded else ({}, None)
            truncation = dict(max_length=max_length, stride=stride, strategy=strategy, direction=side)
            hf = oracle(name, truncation, padding)
            where = f"{name} {truncation} pairs={with_pairs} padded={padded}"
            # Pairs overflow as the cross product of both sides' windows: short texts keep it small;
            # only_first / only_second cut one side, which must leave room for the other.
            cuts = {"longest_first": (60, 60), "only_first": (300, 6), "only_second": (6, 300)}[strategy]
            firsts, seconds = ([t[:cuts[0]] for t in texts], [t[:cuts[1]] for t in pairs]) if with_pairs \
                else (texts, None)
            inputs: list[Any] = list(zip(firsts, seconds, strict=True)) if seconds else firsts
            try:
                expected = hf.encode_batch(inputs)
            except BaseException as err:  # noqa: BLE001 - the crate refuses a pair (or panics): so do we
                panicked = type(err).__name__ == "PanicException"
                with pytest.raises(gpu_tok.InvalidInputError if panicked else gpu_tok.GpuTokError,
                                   match="stride" if panicked else str(err)):
                    tok(firsts, seconds, truncation=strategy, max_length=max_length,
                        stride=stride, truncation_side=side, return_overflowing_tokens=True, **ask)
                continue
            got = tok(firsts, seconds, truncation=strategy, max_length=max_length,
                      stride=stride, truncation_side=side, return_overflowing_tokens=True,
                      return_offsets_mapping=True, return_special_tokens_mask=True, **ask)
            rows = flat(expected)
            assert_rows(got.encodings, rows, where)
            assert got["input_ids"] == [e.ids for e in rows], where
            assert got["offset_mapping"] == [e.offsets for e in rows], where
            mapping = [i for i, e in enumerate(expected) for _ in (e, *e.overflowing)]
            assert got["overflow_to_sample_mapping"] == mapping, where
            assert len(rows) > len(texts), f"{where}: nothing overflowed, the case compares little"


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_pre_split_words_and_split_special_tokens_are_the_crates(name: str) -> None:
    tok, texts = ours(name), texts_for(name)
    words = [t.split() or ["x"] for t in texts]
    got = tok(words, list(reversed(words)), is_split_into_words=True, truncation=True, max_length=24,
              return_offsets_mapping=True)
    expected = oracle(name, dict(max_length=24)).encode_batch(list(zip(words, list(reversed(words)), strict=True)),
                                                              is_pretokenized=True)
    assert_rows(got.encodings, expected, f"{name} pre-split pairs")
    assert got["offset_mapping"] == [e.offsets for e in expected]
    one = tok(words[3], is_split_into_words=True)
    assert_rows(one.encodings, oracle(name).encode_batch([words[3]], is_pretokenized=True), f"{name} one word list")
    for split in (True, False):
        got = tok(texts, split_special_tokens=split, return_offsets_mapping=True)
        expected = oracle(name, split_special=split).encode_batch(texts)
        assert_rows(got.encodings, expected, f"{name} split_special_tokens={split}")


@pytest.mark.parametrize("name", ["bert-minilm", "qwen3"])
def test_what_the_crate_panics_on_is_a_typed_error(name: str) -> None:
    """A stride not below the length a sequence is cut to: `tokenizers` panics
    (a BaseException, PanicException) at every size of max_length and stride
    where that happens, or refuses the stride when truncation is set (a
    ValueError, as transformers raises it); gpu_tok raises InvalidInputError
    (a ValueError) at exactly those, and gives the crate's rows everywhere else."""
    tok = ours(name)
    texts = ["one two three four five six seven eight nine ten eleven twelve", "a b c", "x"]
    pairs = ["short one", "a much longer second text with many more words in it than the first", ""]
    panics = refused = 0
    hf = oracle(name)  # one parse of tokenizer.json: each case sets its truncation
    for max_length in range(2, 12):
        for stride in range(0, 9):
            for with_pairs in (False, True):
                inputs: list[Any] = list(zip(texts, pairs, strict=True)) if with_pairs else texts
                where = f"{name} max_length={max_length} stride={stride} pairs={with_pairs}"
                for overflow in (True, False):
                    call = dict(truncation=True, max_length=max_length, stride=stride,
                                return_overflowing_tokens=overflow)
                    try:
                        hf.enable_truncation(max_length=max_length, stride=stride)
                    except ValueError:  # the stride against max_length minus one sequence's special tokens
                        refused += 1
                        with pytest.raises(gpu_tok.InvalidInputError, match="stride"):
                            tok(texts, pairs if with_pairs else None, **call)
                        continue
                    try:
                        expected = hf.encode_batch(inputs)
                    except BaseException as err:  # noqa: BLE001 - a pyo3 PanicException is a BaseException
                        assert type(err).__name__ == "PanicException", where
                        panics += 1
                        with pytest.raises(gpu_tok.InvalidInputError, match="stride"):
                            tok(texts, pairs if with_pairs else None, **call)
                        continue
                    got = tok(texts, pairs if with_pairs else None, **call)
                    rows = flat(expected) if overflow else expected
                    assert got["input_ids"] == [e.ids for e in rows], where
    assert panics > 10 and refused > 10, f"{panics} panics, {refused} refused: the test compares little"


def test_an_overflow_too_big_for_memory_is_refused_before_it_is_built() -> None:
    """Pairs + overflow + max_length=16 + stride=4 on long documents: the crate
    builds every window of one side with every window of the other (and
    copies them again in each merge: one process grew to 23 GB). gpu_tok
    counts the windows first and refuses with a typed error naming the
    limit, without growing."""
    tok = ours("bert-minilm")
    doc = " ".join(corpus_sample()[:40])[:200_000]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(gpu_tok.InvalidInputError, match="return_overflowing_tokens with max_length=16") as err:
        tok([doc, doc], [doc, doc], truncation=True, max_length=16, stride=4, return_overflowing_tokens=True)
    assert isinstance(err.value, ValueError) and "memory" in str(err.value)
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 1_000_000, f"refusing grew the process by {grown_kb} kB"
    # The same documents without overflow cut the main window only.
    assert len(tok([doc], [doc], truncation=True, max_length=16, stride=4)["input_ids"][0]) == 16


def test_the_rich_path_refuses_device_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rich path runs on the CPU: device="cuda" is refused, never answered
    with host tensors (it returned them silently): without a GPU as every
    device="cuda" call is, with one (placement stubbed) with a typed error."""
    tok = ours("bert-minilm")
    rich = dict(truncation=True, max_length=8, stride=2, return_overflowing_tokens=True, return_tensors="pt")
    from gpu_tok import _placement

    if not _placement.cuda_usable():
        with pytest.raises(gpu_tok.CudaUnavailableError):
            tok(["a b c d e f g h i j k"], device="cuda", **rich)
    monkeypatch.setattr(_placement, "resolve", lambda *a, **k: _placement.Placement("cuda:0"))
    with pytest.raises(gpu_tok.InvalidInputError, match="device='cuda'"):
        tok(["a b c d e f g h i j k"], device="cuda", **rich)
    with pytest.raises(gpu_tok.InvalidInputError, match="cannot be in device memory"):
        tok([["a", "b"]], is_split_into_words=True, device="cuda:0")
    monkeypatch.undo()
    assert tok(["a b c d e f g h i j k"], device="cpu", padding="max_length", **rich)["input_ids"].shape[1] == 8


def _maps_of(batch: Any, rows: int) -> list[tuple[Any, ...]]:
    return [(batch.word_ids(i), batch.tokens(i), batch.sequence_ids(i), batch.char_to_token(i, 2),
             batch.encodings[i].offsets) for i in range(rows)]


def test_maps_survive_pickling() -> None:
    tok = ours("bert-minilm")
    texts = texts_for("bert-minilm")[:8]
    for batch in (tok(texts, padding=True, return_tensors="pt"),  # maps computed on first use
                  tok(texts, truncation=True, max_length=8, stride=2, return_overflowing_tokens=True)):  # kept
        rows = len(batch["input_ids"])
        expected = _maps_of(batch, rows)
        again = pickle.loads(pickle.dumps(batch))
        assert _maps_of(again, rows) == expected
        assert again.n_sequences == 1 and again.is_fast
    plain = tok(texts, padding=True)
    assert _maps_of(pickle.loads(pickle.dumps(plain)), len(texts)) == _maps_of(plain, len(texts))


def test_an_unpickled_batch_names_the_missing_tokenizer() -> None:
    """In a process without the tokenizer, a batch whose maps were not computed
    says how to get them; one whose maps were computed keeps them."""
    tok = ours("bert-minilm")
    lazy = pickle.dumps(tok(["hello world"]))
    eager = tok(["hello world"])
    eager.word_ids(0)
    script = ("import pickle, sys\n"
              "lazy, eager = pickle.loads(sys.stdin.buffer.read())\n"
              "print(eager.word_ids(0))\n"
              "try:\n    lazy.word_ids(0)\nexcept ValueError as err:\n    print('refused:', err)\n")
    run = subprocess.run([sys.executable, "-c", script], input=pickle.dumps((pickle.loads(lazy), eager)),
                         capture_output=True, timeout=TIMEOUT, check=True)
    out = run.stdout.decode()
    assert "[None, 0, 1, None]" in out and "refused:" in out and "load it here first" in out, out


class _CollateWithMaps:
    def __init__(self, tok: gpu_tok.Tokenizer) -> None:
        self.tok = tok

    def __call__(self, batch: list[str]) -> Any:
        return self.tok(batch, padding=True, truncation=True, max_length=24, return_tensors="pt")


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_maps_survive_dataloader_workers(method: str) -> None:
    name = "bert-minilm"
    tok, texts = ours(name), texts_for(name)[:24]
    loader = torch.utils.data.DataLoader(texts, batch_size=8, num_workers=2, collate_fn=_CollateWithMaps(tok),
                                         multiprocessing_context=method, timeout=TIMEOUT)
    hf = oracle(name, dict(max_length=24), dict(pad_id=0, pad_token="[PAD]"))
    for k, batch in enumerate(loader):
        expected = hf.encode_batch(texts[8 * k:8 * (k + 1)])
        assert batch.is_fast
        for i, e in enumerate(expected):
            assert batch.word_ids(i) == e.word_ids and batch.tokens(i) == e.tokens
            assert batch.encodings[i].offsets == e.offsets
