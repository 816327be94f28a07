"""The public API: loading, special tokens, the transformers-style call, tensors."""

from __future__ import annotations

import gc
import json

import gpu_tok
import numpy as np
import pytest
import tokenizers
from conftest import (
    HAVE_SHARED,
    SHARED_TOKENIZERS,
    TOKENIZER_NAMES,
    corpus_sample,
    edge_cases,
    ours,
    reference,
    tokenizer_config,
    tokenizer_json,
    unpadded_oracle,
)

NAME = "bert-minilm"  # in every environment; carries truncation+padding in tokenizer.json
BPE = "qwen3"


def test_from_file_and_from_pretrained(tmp_path) -> None:
    (tmp_path / "tokenizer.json").write_text(tokenizer_json(NAME), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(NAME)), encoding="utf-8")
    (tmp_path / "special_tokens_map.json").write_text(json.dumps({"bos_token": "[CLS]"}), encoding="utf-8")
    by_file = gpu_tok.Tokenizer.from_file(tmp_path / "tokenizer.json")
    by_dir = gpu_tok.Tokenizer.from_pretrained(str(tmp_path))
    assert by_file.encode("Hello world") == by_dir.encode("Hello world")
    assert by_dir.pad_token == "[PAD]" and by_dir.pad_token_id == 0
    assert by_dir.cls_token_id == 101 and by_dir.sep_token == "[SEP]"
    assert by_dir.bos_token == "[CLS]"  # from special_tokens_map.json
    assert by_dir.model_max_length == 512
    assert by_file.bos_token is None  # tokenizer.json alone names no bos


def test_loading_errors(tmp_path) -> None:
    with pytest.raises(gpu_tok.TokenizerNotFoundError) as missing:
        gpu_tok.Tokenizer.from_file(tmp_path / "nope.json")
    assert isinstance(missing.value, FileNotFoundError)
    with pytest.raises(FileNotFoundError, match="offline"):
        gpu_tok.Tokenizer.from_pretrained("Qwen/Qwen3-8B")
    with pytest.raises(gpu_tok.TokenizerNotFoundError, match="from_pretrained"):
        gpu_tok.Tokenizer.from_file(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"version": "1.0", "model": ', encoding="utf-8")
    with pytest.raises(gpu_tok.InvalidTokenizerError, match="invalid JSON"):
        gpu_tok.Tokenizer.from_pretrained(tmp_path)
    with pytest.raises(ValueError):
        gpu_tok.Tokenizer.from_str(tokenizer_json(NAME)[:5000])  # truncated file
    unknown = json.loads(tokenizer_json(NAME))
    unknown["pre_tokenizer"] = {"type": "NoSuchPreTokenizer"}
    with pytest.raises(gpu_tok.UnsupportedTokenizerError):
        gpu_tok.Tokenizer.from_str(json.dumps(unknown))
    (tmp_path / "tokenizer.json").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(gpu_tok.InvalidTokenizerError):
        gpu_tok.Tokenizer.from_file(tmp_path / "tokenizer.json")
    with pytest.raises(TypeError):
        gpu_tok.Tokenizer.from_str(b"{}")


def test_encode_batch_uses_file_settings_and_call_and_encode_do_not() -> None:
    tok = ours(NAME)
    assert tok.encode_batch(["Hello world"]).input_ids.shape == (1, 128)  # tokenizer.json pads to 128
    assert tok.encode("Hello world") == [101, 7592, 2088, 102]  # as transformers' encode
    call = tok("Hello world")
    assert call["input_ids"] == [101, 7592, 2088, 102]
    assert call["attention_mask"] == [1, 1, 1, 1]
    assert call["token_type_ids"] == [0, 0, 0, 0]
    assert tok.encode_batch(["Hello world"], padding=False, truncation=False).input_ids.shape == (4,)


def test_call_shapes_and_keys() -> None:
    tok = ours(BPE)
    texts = ["Hello world", "a much longer sentence with more tokens in it", ""]
    lists = tok(texts)
    assert set(lists) == {"input_ids", "attention_mask"}  # Qwen: no token_type_ids
    assert [len(r) for r in lists["input_ids"]] == [len(tok.encode(t)) for t in texts]
    arrays = tok(texts, padding=True, return_tensors="np", return_offsets_mapping=True)
    width = max(len(r) for r in lists["input_ids"])
    assert arrays["input_ids"].shape == (3, width) and arrays["input_ids"].dtype == np.int64
    assert arrays["offset_mapping"].shape == (3, width, 2)
    assert arrays.attention_mask.sum(axis=1).tolist() == [len(r) for r in lists["input_ids"]]
    left = tok(texts, padding="max_length", max_length=16, padding_side="left", return_tensors="np")
    assert left["input_ids"].shape == (3, 16)
    assert left["input_ids"][2].tolist() == [tok.pad_token_id] * 16
    multiple = tok(texts, padding=True, pad_to_multiple_of=8, return_tensors="np")
    assert multiple["input_ids"].shape[1] % 8 == 0
    single = tok("Hello world", return_tensors="np")
    assert single["input_ids"].shape == (1, 2)
    ragged = tok(texts, return_tensors="np")  # as transformers: a numpy object array of rows
    assert ragged["input_ids"].dtype == object and [r.tolist() for r in ragged["input_ids"]] == lists["input_ids"]
    with pytest.raises(ValueError, match="padding=True"):
        tok(texts, return_tensors="pt")


@pytest.mark.parametrize("side", ["right", "left"])
def test_lists_are_plain_objects_equal_to_the_tensors(side: str) -> None:
    """`to_lists` shares equal ints and (start, end) tuples between rows and
    builds runs of one value (masks, type ids, padding) by list repetition:
    every row must still be a list of its own, holding plain ints and tuples,
    equal to the tensors' values, whichever way it was made."""
    bert = ours(NAME)
    texts = ["hello there", "", "a much longer sentence, with more tokens in it " * 3, "hello there", "x"]
    pairs = ["general kenobi", "b", "", "general kenobi", "y z"]
    kwargs = dict(padding="max_length", max_length=48, padding_side=side, return_offsets_mapping=True,
                  return_special_tokens_mask=True)
    lists = bert(texts, pairs, **kwargs)
    arrays = bert(texts, pairs, return_tensors="np", **kwargs)
    ragged = bert(texts, return_offsets_mapping=True, return_token_type_ids=True)
    assert set(lists) == {"input_ids", "token_type_ids", "attention_mask", "special_tokens_mask", "offset_mapping"}
    for name, rows in [*lists.items(), *ragged.items()]:
        assert type(rows) is list and all(type(row) is list and gc.is_tracked(row) for row in rows), name
        items = [item for row in rows for item in row]
        assert all(type(item) is (tuple if name == "offset_mapping" else int) for item in items), name
        assert len({id(row) for row in rows}) == len(rows), name  # no row is another's object
    for name, rows in lists.items():
        assert rows == [[tuple(p) for p in r] if name == "offset_mapping" else r for r in arrays[name].tolist()]
    assert len(set(lists["token_type_ids"][0])) == 2  # 0s, 1s, padding 0s: three runs, or two when left-padded
    assert ragged["token_type_ids"] == [[0] * len(row) for row in ragged["input_ids"]]  # one run
    assert ragged["attention_mask"] == [[1] * len(row) for row in ragged["input_ids"]]
    assert ragged["input_ids"][1] == [101, 102] and ragged["offset_mapping"][1] == [(0, 0), (0, 0)]
    oracle = reference(NAME)
    oracle.no_padding()
    oracle.no_truncation()
    expected = [[tuple(o) for o in e.offsets] for e in oracle.encode_batch(texts)]
    assert ragged["offset_mapping"] == expected
    ragged["attention_mask"][0].append(7)  # rows are the user's: changing one changes no other
    assert ragged["attention_mask"][3] == [1] * len(ragged["input_ids"][3])


def test_an_empty_row_of_a_ragged_numpy_batch_has_the_ids_dtype() -> None:
    """Every row of a ragged "np" batch is int64 (or the dtype asked for), the
    empty one too (numpy makes an empty list float64, and so transformers does)."""
    tok = ours(BPE)
    for texts in (["a b", ""], ["", "a b"]):
        for dtype, expected in (("int64", np.int64), ("int32", np.int32)):
            out = tok(texts, return_tensors="np", return_offsets_mapping=True, dtype=dtype)
            for key, rows in out.items():
                assert rows.dtype == object and [row.dtype for row in rows] == [expected] * 2, (texts, key)
            assert [row.tolist() for row in out["input_ids"]] == tok(texts)["input_ids"]
            assert out["offset_mapping"][texts.index("")].shape == (0,)


ADDITIONS = [  # (tokens, special) in turn, as a user adds them
    (["<new_tok>", "hello"], False),          # a new token, and one the vocabulary has
    (["<new_tok>", ""], False),               # identical and empty: nothing added
    ([tokenizers.AddedToken("<new_tok>", lstrip=True)], False),   # the same token with other flags
    (["<|sp|>", "[X]"], True),
    ([tokenizers.AddedToken("<norm>", normalized=True), tokenizers.AddedToken(" sw", single_word=True)], False),
]


@pytest.mark.parametrize("name", TOKENIZER_NAMES)
def test_add_tokens_as_tokenizers_adds_them(name: str) -> None:
    """Each add_tokens gives the counts, ids and encodings of `tokenizers`' own
    add_tokens, and the plan a load of the resulting tokenizer.json decides
    (the core shares its tables instead of loading it again)."""
    tok = gpu_tok.Tokenizer.from_str(tokenizer_json(name), tokenizer_config(name))
    hf = unpadded_oracle(tokenizer_json(name))
    texts = [t[:300] for t in edge_cases()[::25] + corpus_sample()[:8]]
    for tokens, special in ADDITIONS:
        assert tok.add_tokens(tokens, special_tokens=special) == \
            (hf.add_special_tokens if special else hf.add_tokens)(tokens), tokens
        assert len(tok) == hf.get_vocab_size() and tok.get_vocab() == hf.get_vocab()
        contents = [t if isinstance(t, str) else t.content for t, _ in ADDITIONS for t in t]
        rows = texts + [f"x{c}y {c} {c}{c}" for c in contents if c] + [" ".join(contents)]
        expected = hf.encode_batch(rows)
        got = tok.encode_batch(rows, padding=False, truncation=False, return_offsets=True).to_lists()
        assert got["input_ids"] == [e.ids for e in expected], tokens
        assert got["offset_mapping"] == [[tuple(o) for o in e.offsets] for e in expected], tokens
        reloaded = gpu_tok.Tokenizer.from_str(tok._core.to_json(), tokenizer_config(name))
        assert tok.plan == reloaded.plan, tokens
        assert tok.encode_batch(rows, padding=False).to_lists() == reloaded.encode_batch(rows, padding=False).to_lists()


def test_truncation_and_max_length() -> None:
    tok = ours(BPE)
    long = "word " * 500
    assert len(tok(long, truncation=True, max_length=10)["input_ids"]) == 10
    assert len(tok(long, max_length=7)["input_ids"]) == 7  # as transformers: max_length alone truncates
    assert tok(long, truncation=True)["input_ids"] == tok.encode(long)  # under model_max_length 131072
    bert = ours(NAME)
    # a max_length below the special tokens turns truncation off (the crate's rule, so transformers' too)
    assert bert("hello there", truncation=True, max_length=1)["input_ids"] == [101, 7592, 2045, 102]
    assert bert("hello there", truncation=True, max_length=2)["input_ids"] == [101, 102]
    assert len(bert("word " * 600, truncation=True)["input_ids"]) == 512  # model_max_length, not tokenizer.json's 128
    assert len(bert(["a", "b c"], padding="max_length")["input_ids"][0]) == 512
    assert bert(["a", "b c d"], padding=True, max_length=2)["input_ids"][0] == [101, 1037, 102, 0, 0]  # no truncation
    no_limit = ours("llama2")
    assert no_limit("word " * 300, truncation=True)["input_ids"] == no_limit.encode("word " * 300)  # no limit set
    with pytest.raises(ValueError, match="truncation"):
        tok("x", truncation="sideways")


def test_pairs_and_token_type_ids() -> None:
    bert = ours(NAME)
    out = bert("hello there", "general kenobi")
    assert out["input_ids"][0] == 101 and out["input_ids"].count(102) == 2
    first_len = out["input_ids"].index(102) + 1
    assert out["token_type_ids"] == [0] * first_len + [1] * (len(out["input_ids"]) - first_len)
    assert "token_type_ids" not in ours(BPE)("a", "b")
    assert "token_type_ids" in ours(BPE)("a", "b", return_token_type_ids=True)
    with pytest.raises(ValueError, match="match"):
        bert(["a", "b"], ["c"])


def test_pad_id_resolution() -> None:
    tok = ours(BPE)
    assert tok(["a", "b c d"], padding=True)["input_ids"][0][-1] == tok.pad_token_id
    assert tok(["a", "b c d"], padding=True, pad_token_id=7)["input_ids"][0][-1] == 7
    no_pad = gpu_tok.Tokenizer.from_str(tokenizer_json(BPE))  # no config: no pad token known
    with pytest.raises(gpu_tok.InvalidInputError, match="pad_token_id"):
        no_pad(["a", "b c"], padding=True)


def test_tensors_are_zero_copy_and_dlpack() -> None:
    enc = ours(BPE).encode_batch(["Hello world", "hi"], padding=True)
    ids = enc.input_ids
    assert isinstance(ids, gpu_tok.Tensor)
    assert ids.shape == (2, 2) and ids.dtype == "int64" and ids.__dlpack_device__() == (1, 0)
    via_buffer = np.asarray(ids)
    via_dlpack = np.from_dlpack(ids)
    assert via_buffer.tolist() == via_dlpack.tolist() == ids.tolist()
    via_buffer[0, 0] = 42  # same memory: the DLPack view sees the write
    assert via_dlpack[0, 0] == 42
    legacy = ids.__dlpack__()
    assert "dltensor" in repr(legacy)
    versioned = ids.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    del legacy, versioned  # unconsumed capsules free their tensors
    with pytest.raises(BufferError):
        ids.__dlpack__(dl_device=(2, 0))
    copy = np.from_dlpack(ids, copy=True)
    copy[0, 0] = 0
    assert via_dlpack[0, 0] == 42
    assert enc.lengths.tolist() == [2, 1]
    assert enc.row_offsets.tolist() == [0, 2, 4]
    assert not enc.is_ragged


def test_ragged_batch_is_csr() -> None:
    tok = ours(BPE)
    texts = ["Hello world", "hi", "one two three four"]
    enc = tok.encode_batch(texts)
    assert enc.is_ragged
    flat, starts = np.asarray(enc.input_ids), np.asarray(enc.row_offsets)
    rows = [flat[starts[i]:starts[i + 1]].tolist() for i in range(len(texts))]
    assert rows == [tok.encode(t) for t in texts]
    assert enc.to_lists()["input_ids"] == rows


def test_torch_when_installed() -> None:
    torch = pytest.importorskip("torch")
    out = ours(BPE)(["Hello world", "hi"], padding=True, return_tensors="pt")
    assert out["input_ids"].dtype == torch.int64 and tuple(out["input_ids"].shape) == (2, 2)


@pytest.mark.parametrize("kwargs", [{}, dict(padding=True, truncation=True, max_length=48, padding_side="left"),
                                    dict(padding="max_length", max_length=300, return_special_tokens_mask=True)])
def test_auto_equals_cpu_when_it_offloads(monkeypatch: pytest.MonkeyPatch, kwargs: dict) -> None:
    """"auto" on a batch it sends to the GPU (here: to the CUDA pipeline emulated on
    the host, when there is no GPU) gives the CPU's values, in host memory."""
    from gpu_tok import _placement

    monkeypatch.setattr(_placement, "AUTO_MIN_BYTES", 0)
    if not gpu_tok.info()["cuda"]["available"]:
        monkeypatch.setattr(_placement, "_auto_gpu_ready", lambda: True)
        monkeypatch.setattr(_placement, "AUTO_DEVICE", "emulator:20000")
    tok = ours(BPE)
    texts = corpus_sample()[:200] + edge_cases()
    auto = tok(texts, device="auto", **kwargs)
    cpu = tok(texts, device="cpu", **kwargs)
    assert "kernels_ms" in auto.timings and "kernels_ms" not in cpu.timings, "auto did not offload"
    assert dict(auto) == dict(cpu)


def test_devices() -> None:
    tok = ours(BPE)
    with pytest.raises(ValueError, match="device"):
        tok("x", device="tpu")
    if not gpu_tok.info()["cuda"]["available"]:
        with pytest.raises(gpu_tok.CudaUnavailableError):
            tok("x", device="cuda")
        with pytest.raises(gpu_tok.CudaUnavailableError):
            tok("x", device="cuda:1")


def test_device_accepts_torch_device() -> None:
    torch = pytest.importorskip("torch")
    assert ours(BPE)("x", device=torch.device("cpu"))["input_ids"] == ours(BPE)("x")["input_ids"]


def test_decode_options() -> None:
    tok = ours(NAME)
    ids = tok("hello , world !")["input_ids"]
    assert tok.decode(ids) == "[CLS] hello, world! [SEP]"  # transformers' default: special tokens kept
    assert tok.decode(ids, skip_special_tokens=True) == "hello, world!"
    assert tok.decode(ids[1]) == "hello" and tok.decode([ids, ids[:2]]) == [tok.decode(ids), "[CLS] hello"]
    assert tok.decode(ids, True, clean_up_tokenization_spaces=True) == "hello, world!"
    assert tok.decode(np.array(ids)) == tok.decode(ids)
    assert tok.batch_decode([ids, ids[:2]]) == [tok.decode(ids), tok.decode(ids[:2])]
    # decode_batch is tokenizers' (special tokens skipped by default)
    assert tok.decode_batch([ids, ids[:2]]) == [tok.decode(ids, True), tok.decode(ids[:2], True)]


def test_with_truncation_and_padding_share_tables() -> None:
    tok = ours(BPE)
    short = tok.with_truncation(3)
    text = "one two three four five"
    assert short.encode_batch([text]).to_lists()["input_ids"][0] == tok.encode(text)[:3]
    padded = tok.with_padding(length=10)
    assert padded.encode_batch(["hi"]).input_ids.shape == (1, 10)
    assert padded._core is tok._core
    assert tok.encode_batch(["hi"]).to_lists()["input_ids"] == [tok.encode("hi")]  # the original is unchanged
    assert len(padded.encode("hi")) == 1  # transformers' encode: tokenizers-style defaults do not apply


def test_info_and_plan() -> None:
    report = gpu_tok.info(ours(BPE))
    assert report["version"] == gpu_tok.__version__
    assert report["threads"] >= 1
    assert isinstance(report["cuda"]["available"], bool)
    assert report["cuda"]["available"] or report["cuda"]["reason"]
    stages = {row["stage"]: row for row in report["plan"]}
    assert stages["model"]["component"] == "BPE"
    assert stages["normalize"]["component"] == "NFC"
    assert all(row["reason"] for row in report["plan"])
    assert [stages[s]["path"] for s in ("normalize", "pre_tokenize", "model")] == ["fast"] * 3
    assert stages["decode"]["path"] == "exact"
    wordpiece = {row["stage"]: row for row in ours(NAME).plan}
    assert wordpiece["model"]["path"] == "fast" and "WordPiece" in wordpiece["model"]["reason"]
    assert wordpiece["post_process"]["path"] == "exact"


def test_special_token_lists() -> None:
    tok = ours(BPE)
    assert "<|endoftext|>" in tok.all_special_tokens
    assert tok.token_to_id("<|endoftext|>") in tok.all_special_ids
    assert "<think>" not in tok.all_special_tokens  # added but not special


@pytest.mark.skipif(not HAVE_SHARED, reason="needs ../shared for tokenizer_config.json beside tokenizer.json")
def test_from_pretrained_on_shared_dirs() -> None:
    tok = gpu_tok.Tokenizer.from_pretrained(SHARED_TOKENIZERS / "deepseek_v3")
    assert tok.bos_token == "<｜begin▁of▁sentence｜>"
    assert tok.pad_token_id == tok.token_to_id("<｜end▁of▁sentence｜>")


def test_settings_are_per_instance_and_survive_pickle_and_copy() -> None:
    import copy
    import pickle

    tok = copy.copy(ours(BPE))
    tok.padding_side = "left"
    tok.pad_token = "<|im_end|>"
    assert ours(BPE).padding_side == "right" and ours(BPE).pad_token == "<|endoftext|>"  # the shared one is unchanged
    again = pickle.loads(pickle.dumps(tok))
    assert (again.padding_side, again.pad_token_id) == ("left", tok.token_to_id("<|im_end|>"))
    assert again(["a", "b c d"], padding=True)["input_ids"][0][0] == tok.pad_token_id
    with pytest.raises(ValueError):
        tok.truncation_side = "up"


def test_batch_encoding_conversions() -> None:
    torch = pytest.importorskip("torch")
    tok = ours(NAME)
    enc = tok(["hello world", "hi"], padding=True)
    assert enc.n_sequences == 1 and enc.is_fast
    assert enc.convert_to_tensors("np") is enc and enc["input_ids"].dtype == np.int64
    moved = tok(["hello world", "hi"], padding=True, return_tensors="pt").to("cpu")
    assert isinstance(moved["input_ids"], torch.Tensor) and moved["input_ids"].shape == (2, 4)
    assert enc[0].ids == enc["input_ids"][0].tolist()  # an int gives that row's tokenizers.Encoding
    assert list(enc[:1]) == ["input_ids", "token_type_ids", "attention_mask"]
    assert tok("hello", return_length=True)["length"] == [3]  # as transformers: un-batched, still a list
    padded = tok.pad([{"input_ids": [101, 102]}, {"input_ids": [101, 7592, 102]}], return_tensors="np")
    assert padded["input_ids"].tolist() == [[101, 102, 0], [101, 7592, 102]]
    assert padded["attention_mask"].tolist() == [[1, 1, 0], [1, 1, 1]]
    with pytest.raises(ValueError, match="per-token maps"):
        padded.word_ids()
