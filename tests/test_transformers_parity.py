"""gpu_tok against transformers 5 itself: the call, its arguments and the
methods transformers users rely on, over the shared tokenizers (without
../shared: the committed Qwen3, Llama-2 and BERT files).

The call grid is sampled (seeded) from padding x truncation x max_length x
pairs x special tokens x offsets x sides x tensors x ..., and each case
compares keys, key order, values, Python types, dtypes, shapes and the
exception class. The one difference kept on purpose is listed in the README:
for Llama-2, transformers 5's `LlamaTokenizer` rebuilds its pipeline from
class code instead of tokenizer.json, so ids follow tokenizer.json here and
the reference is `PreTrainedTokenizerFast` with LlamaTokenizer's class
defaults (left padding).
"""

from __future__ import annotations

import json
import os
import random
import warnings
from itertools import product
from typing import Any

import gpu_tok
import numpy as np
import pytest
from conftest import TOKENIZER_NAMES, corpus_sample, edge_cases, tokenizer_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # read when transformers is imported: never reach the network
transformers = pytest.importorskip("transformers")


def available(*names: str) -> list[Any]:
    """`names` as parameters; those only ../shared holds are skipped without it."""
    return [pytest.param(name, marks=pytest.mark.skipif(
        name not in TOKENIZER_NAMES, reason=f"{name} lives in ../shared only (byte-level BPE runs here on Qwen3)"))
        for name in names]


NAMES = available("qwen3", "bert-minilm", "llama2", "deepseek_v3", "gpt-oss")
# transformers 5 rebuilds these from class code instead of tokenizer.json (different ids: see the README).
REBUILT = {"llama2"}
CASES_PER_TOKENIZER = int(os.environ.get("GPU_TOK_PARITY_CASES", "160"))


def _quiet(call: Any) -> Any:
    """A transformers call without its warnings (pytest turns warnings into errors)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def load_theirs(name: str) -> Any:
    transformers.logging.set_verbosity_error()
    folder = str(tokenizer_dir(name))
    auto = _quiet(lambda: transformers.AutoTokenizer.from_pretrained(folder))
    if name not in REBUILT:
        return auto
    return _quiet(lambda: transformers.PreTrainedTokenizerFast.from_pretrained(
        folder, padding_side=auto.padding_side, truncation_side=auto.truncation_side,
        model_input_names=auto.model_input_names))


def load_ours(name: str) -> gpu_tok.Tokenizer:
    return gpu_tok.Tokenizer.from_pretrained(tokenizer_dir(name))


_cache: dict[str, tuple[gpu_tok.Tokenizer, Any]] = {}


def pair_of(name: str) -> tuple[gpu_tok.Tokenizer, Any]:
    """Shared (ours, theirs) for tests that do not change them."""
    if name not in _cache:
        _cache[name] = (load_ours(name), load_theirs(name))
    return _cache[name]


def texts_pool() -> list[str]:
    docs = [t[:400] for t in corpus_sample()[:24]]
    return [t for t in edge_cases() if len(t) < 400] + docs + ["Hello world", "a b", "", "<|im_end|> <s> [SEP] x"]


def typed(value: Any) -> Any:
    """`value` with every container's type kept, so [(0, 1)] and [[0, 1]] differ."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [typed(v) for v in value])
    return (type(value).__name__, value)


def assert_same(ours: Any, theirs: Any, where: str) -> None:
    assert list(ours.keys()) == list(theirs.keys()), where
    torch = pytest.importorskip("torch")
    for key in theirs:
        a, b = ours[key], theirs[key]
        at = f"{where} [{key}]"
        if isinstance(b, np.ndarray):
            assert isinstance(a, np.ndarray), at
            assert (a.dtype, a.shape) == (b.dtype, b.shape), at
            if b.dtype == object:
                assert all(same_row_dtype(x, y) and np.array_equal(x, y) for x, y in zip(a, b, strict=True)), at
            else:
                assert np.array_equal(a, b), at
        elif isinstance(b, torch.Tensor):
            assert isinstance(a, torch.Tensor), at
            assert (a.dtype, tuple(a.shape)) == (b.dtype, tuple(b.shape)) and torch.equal(a.cpu(), b), at
        else:
            assert typed(a) == typed(b), at


def same_row_dtype(ours: np.ndarray, theirs: np.ndarray) -> bool:
    """A row of a ragged numpy batch: the same dtype, except an empty row, which
    transformers leaves float64 (numpy's default for []) and gpu_tok makes
    int64 like the others (listed in the README)."""
    if theirs.size == 0 and theirs.dtype == np.float64:
        return ours.dtype == np.int64
    return ours.dtype == theirs.dtype


def _lost_ragged_rows(theirs: Any) -> bool:
    """transformers' torch tensor of a ragged batch whose first row is empty: torch.tensor
    reads the shape from that row and returns an empty float tensor, dropping the other
    rows. gpu_tok raises its ragged-batch ValueError instead (listed in the README)."""
    ids = theirs.get("input_ids") if hasattr(theirs, "get") else None
    return type(ids).__module__.startswith("torch") and ids.is_floating_point()


def raises_like(err: BaseException, call_ours: Any) -> None:
    """`call_ours` raises what transformers raised (`err`; ours may be a subclass)."""
    if type(err).__name__ == "PanicException":  # the crate panicked (a stride it asserts on): a typed error here
        with pytest.raises(gpu_tok.InvalidInputError, match="stride"):
            call_ours()
        return
    if not isinstance(err, Exception):
        raise err
    with pytest.raises(type(err)):
        call_ours()


def first_row_error(theirs: Any, texts: list[Any], pairs: list[Any] | None,
                    call: dict[str, Any]) -> BaseException | None:
    """What transformers raises for the first row of a batch that fails on its own, or None.
    A batch's own error is whichever failing row the crate's thread pool reaches first (the
    same call raised a stride panic or a truncation error from run to run); gpu_tok cuts rows
    in order and raises the first row's."""
    for i, text in enumerate(texts):
        try:
            _quiet(lambda t=text, i=i: theirs([t], None if pairs is None else [pairs[i]], **call))
        except BaseException as err:  # noqa: BLE001 - compared by the caller
            return err
    return None


def run_both(ours: Any, theirs: Any, call: Any, where: str) -> None:
    """`call` on both; the same exception class (ours may be a subclass), or the same result."""
    try:
        expected = _quiet(lambda: call(theirs))
    except BaseException as err:  # noqa: BLE001 - the class is what we compare
        raises_like(err, lambda: call(ours))
        return
    if _lost_ragged_rows(expected):
        with pytest.raises(ValueError, match="different lengths"):
            call(ours)
        return
    try:
        got = call(ours)
    except Exception as err:
        raise AssertionError(f"{where}: gpu_tok raised {err!r}, transformers returned") from err
    assert_same(got, expected, where)


GRID = {
    "padding": [False, True, "longest", "max_length"],
    "truncation": [None, False, True, "longest_first", "only_first", "only_second"],
    "max_length": [None, 1, 2, 3, 5, 8, 33, 130],
    "pairs": [False, True],
    "add_special_tokens": [True, False],
    "return_offsets_mapping": [False, True],
    "return_special_tokens_mask": [False, True],
    "padding_side": [None, "left", "right"],
    "return_tensors": [None, "np", "pt"],
    "single": [False, True],
    "pad_to_multiple_of": [None, 8],
    "return_length": [False, True],
    "return_token_type_ids": [None, True, False],
    "return_attention_mask": [None, False],
}


def sampled_cases(name: str) -> list[dict[str, Any]]:
    rng = random.Random(f"gpu_tok-13-{name}")
    keys = list(GRID)
    everything = list(product(*GRID.values()))
    return [dict(zip(keys, case, strict=True)) for case in rng.sample(everything, CASES_PER_TOKENIZER)]


@pytest.mark.parametrize("name", NAMES)
def test_call_grid(name: str) -> None:
    ours, theirs = pair_of(name)
    pool = texts_pool()
    rng = random.Random(f"texts-{name}")
    for i, case in enumerate(sampled_cases(name)):
        case = dict(case)
        pairs, single = case.pop("pairs"), case.pop("single")
        batch = rng.sample(pool, 1 if single else 5)
        text: Any = batch[0] if single else batch
        pair: Any = None
        if pairs:
            second = rng.sample(pool, len(batch))
            pair = second[0] if single else second
        run_both(ours, theirs, lambda tok, t=text, p=pair, c=case: tok(t, p, **c), f"{name} case {i}: {case}")


# The paths with per-token maps (overflowing windows, pre-split words, split_special_tokens),
# sampled as the call grid is, on shorter texts (pairs overflow as a cross product of windows).
RICH_GRID = {
    "return_overflowing_tokens": [False, True],
    "stride": [0, 1, 2, 4],
    "truncation": [True, "longest_first", "only_first", "only_second"],
    "max_length": [4, 6, 9, 16],
    "pairs": [False, True],
    "words": [False, True],
    "split_special_tokens": [False, True],
    "padding": [False, True],
    "padding_side": [None, "left"],
    "return_tensors": [None, "np", "pt"],
    "return_offsets_mapping": [False, True],
    "single": [False, True],
}
RICH_CASES_PER_TOKENIZER = int(os.environ.get("GPU_TOK_PARITY_RICH_CASES", "60"))


@pytest.mark.parametrize("name", NAMES)
def test_rich_call_grid(name: str) -> None:
    """Overflow with strides (the ones `tokenizers` panics on included: transformers
    raises there too, gpu_tok a typed ValueError), pre-split words and
    split_special_tokens, against transformers, with the maps of each row."""
    ours, theirs = pair_of(name)
    pool = [t[:80] for t in texts_pool()]
    rng = random.Random(f"gpu_tok-35-{name}")
    keys = list(RICH_GRID)
    cases = [dict(zip(keys, case, strict=True))
             for case in rng.sample(list(product(*RICH_GRID.values())), RICH_CASES_PER_TOKENIZER)]
    for i, case in enumerate(cases):
        pairs, single, words = case.pop("pairs"), case.pop("single"), case.pop("words")
        if case["padding"] and theirs.pad_token is None:
            case["padding"] = False
        batch = rng.sample(pool, 1 if single else 4)
        texts: Any = [t.split() or ["x"] for t in batch] if words else batch
        second = rng.sample(pool, len(batch))
        text_pair: Any = ([t.split() or ["y"] for t in second] if words else second) if pairs else None
        if single:
            texts, text_pair = texts[0], None if text_pair is None else text_pair[0]
        where = f"{name} rich case {i}: {case} pairs={pairs} words={words} single={single}"
        call = dict(case, is_split_into_words=words)
        failed = None if single else first_row_error(theirs, texts, text_pair, call)
        if failed is not None:
            raises_like(failed, lambda t=texts, p=text_pair, c=call: ours(t, p, **c))
            continue
        run_both(ours, theirs, lambda tok, t=texts, p=text_pair, c=call: tok(t, p, **c), where)
        try:
            expected = _quiet(lambda t=texts, p=text_pair, c=call: theirs(t, p, **c))
        except BaseException:  # noqa: BLE001 - compared above (a crate panic included)
            continue
        got = ours(texts, text_pair, **call)
        rows = len(expected.encodings)
        assert len(got.encodings) == rows, where
        for row in range(rows):
            assert got.word_ids(row) == expected.word_ids(row), where
            assert got.sequence_ids(row) == expected.sequence_ids(row), where
            assert got.tokens(row) == expected.tokens(row), where
            assert got.encodings[row].offsets == expected.encodings[row].offsets, where


@pytest.mark.parametrize("name", NAMES)
def test_overflow_stride_pretokenized_and_split_special(name: str) -> None:
    ours, theirs = pair_of(name)
    pool = texts_pool()[-12:]
    calls = [
        dict(truncation=True, max_length=9, stride=2, return_overflowing_tokens=True),
        dict(truncation=True, max_length=9, stride=3, return_overflowing_tokens=True, padding=True,
             return_tensors="np", return_length=True),
        dict(truncation="only_second", max_length=12, stride=1, return_overflowing_tokens=True, pairs=True),
        dict(split_special_tokens=True, return_offsets_mapping=True),
        dict(words=True, padding=True, return_tensors="pt"),
        dict(words=True, pairs=True, truncation=True, max_length=7),
        dict(text_target=True, padding=True, truncation=True, max_length=10),
    ]
    for call in calls:
        call = dict(call)
        pairs, words, target = call.pop("pairs", False), call.pop("words", False), call.pop("text_target", False)
        texts: Any = [t.split() or ["x"] for t in pool] if words else pool
        args: dict[str, Any] = dict(call, is_split_into_words=words)
        if pairs:
            args["text_pair"] = list(reversed(texts))
        if target:
            args["text_target"] = list(reversed(texts))
        run_both(ours, theirs, lambda tok, a=args, t=texts: tok(t, **a), f"{name} {call}")
        run_both(ours, theirs, lambda tok, a=args, t=texts: tok(t[0], **{k: (v[0] if isinstance(v, list) else v)
                                                                      for k, v in a.items()}), f"{name} one {call}")


@pytest.mark.parametrize("name", NAMES)
def test_attributes(name: str) -> None:
    ours, theirs = pair_of(name)
    for attribute in ("padding_side", "truncation_side", "model_max_length", "model_input_names", "pad_token",
                      "pad_token_id", "bos_token", "bos_token_id", "eos_token", "eos_token_id", "unk_token_id",
                      "special_tokens_map", "all_special_tokens", "all_special_ids", "vocab_size", "is_fast",
                      "clean_up_tokenization_spaces", "split_special_tokens", "extra_special_tokens",
                      "max_len_single_sentence", "max_len_sentences_pair", "pad_token_type_id"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), f"{name}.{attribute}"
    assert len(ours) == len(theirs)
    assert ours.get_added_vocab() == theirs.get_added_vocab()
    assert ours.get_vocab() == theirs.get_vocab()
    assert ours.chat_template == theirs.chat_template
    assert ours.num_special_tokens_to_add(True) == theirs.num_special_tokens_to_add(True)


@pytest.mark.parametrize("name", NAMES)
def test_encode_decode_and_vocabulary_methods(name: str) -> None:
    ours, theirs = pair_of(name)
    pool = texts_pool()
    for text in pool[::3]:
        for kwargs in ({}, dict(add_special_tokens=False), dict(truncation=True, max_length=6),
                       dict(padding="max_length", max_length=40), dict(return_tensors="np")):
            try:
                expected = _quiet(lambda t=text, k=kwargs: theirs.encode(t, **k))
            except ValueError:  # no pad token (Llama-2)
                with pytest.raises(ValueError):
                    ours.encode(text, **kwargs)
                continue
            got = ours.encode(text, **kwargs)
            assert typed(got.tolist() if hasattr(got, "tolist") else got) == \
                typed(expected.tolist() if hasattr(expected, "tolist") else expected), (name, text, kwargs)
        assert ours.tokenize(text) == theirs.tokenize(text), (name, text)
        ids = theirs(text)["input_ids"]
        assert ours.convert_ids_to_tokens(ids) == theirs.convert_ids_to_tokens(ids)
        assert ours.convert_ids_to_tokens(ids, skip_special_tokens=True) == \
            theirs.convert_ids_to_tokens(ids, skip_special_tokens=True)
        tokens = theirs.convert_ids_to_tokens(ids)
        assert ours.convert_tokens_to_ids(tokens) == theirs.convert_tokens_to_ids(tokens)
        assert ours.convert_tokens_to_string(tokens) == theirs.convert_tokens_to_string(tokens)
        for skip, clean in product((None, True, False), (None, True, False)):
            kwargs = {} if skip is None else {"skip_special_tokens": skip}
            if clean is not None:
                kwargs["clean_up_tokenization_spaces"] = clean
            assert ours.decode(ids, **kwargs) == _quiet(lambda k=kwargs, i=ids: theirs.decode(i, **k)), (name, kwargs)
    rows = [theirs(t)["input_ids"] for t in pool[:6]]
    assert ours.batch_decode(rows) == theirs.batch_decode(rows)
    assert ours.decode(rows, skip_special_tokens=True) == theirs.decode(rows, skip_special_tokens=True)
    one = next(row[0] for row in rows if row)
    assert ours.decode(one) == theirs.decode(one)
    assert ours.decode(np.array(rows[1])) == theirs.decode(np.array(rows[1]))
    assert ours.decode([np.int64(i) for i in rows[1]]) == theirs.decode(rows[1])
    assert ours.convert_tokens_to_ids("surely-not-a-token-\u2603") == theirs.convert_tokens_to_ids(
        "surely-not-a-token-\u2603")


@pytest.mark.parametrize("name", NAMES)
def test_batch_encoding_maps(name: str) -> None:
    ours, theirs = pair_of(name)
    texts = texts_pool()[-6:]
    padding = theirs.pad_token is not None
    for kwargs in ({}, dict(text_pair=list(reversed(texts)), padding=padding),
                   dict(padding=padding, return_tensors="np")):
        a, b = ours(texts, **kwargs), _quiet(lambda k=kwargs: theirs(texts, **k))
        assert a.n_sequences == b.n_sequences
        for i in range(len(texts)):
            assert a.tokens(i) == b.tokens(i)
            assert a.word_ids(i) == b.word_ids(i)
            assert a.sequence_ids(i) == b.sequence_ids(i)
            for char in (0, 3, len(texts[i]) // 2):
                if char < len(texts[i]):
                    assert a.char_to_token(i, char) == b.char_to_token(i, char)
                    assert a.char_to_word(i, char) == b.char_to_word(i, char)
            for token in range(min(4, len(b.tokens(i)))):
                assert a.token_to_chars(i, token) == b.token_to_chars(i, token)
                assert a.token_to_word(i, token) == b.token_to_word(i, token)


@pytest.mark.parametrize("name", available("qwen3", "deepseek_v3"))
def test_apply_chat_template(name: str) -> None:
    ours, theirs = pair_of(name)
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello <b>there</b>"},
            {"role": "assistant", "content": "Hi! How can I help?"}, {"role": "user", "content": "2+2?"}]
    prefill = [*chat, {"role": "assistant", "content": "It is"}]
    for kwargs in (dict(tokenize=False), dict(tokenize=False, add_generation_prompt=True),
                   dict(add_generation_prompt=True), dict(return_dict=False),
                   dict(return_tensors="np", add_generation_prompt=True),
                   dict(tokenize=False, continue_final_message=True, conversation=prefill),
                   dict(conversation=[chat, chat[:2]], padding=True, return_tensors="pt"),
                   dict(conversation=[chat, chat[:2]], tokenize=False),
                   dict(truncation=True, max_length=12)):
        kwargs = dict(kwargs)
        conversation = kwargs.pop("conversation", chat)
        expected = _quiet(lambda c=conversation, k=kwargs: theirs.apply_chat_template(c, **k))
        got = ours.apply_chat_template(conversation, **kwargs)
        if isinstance(expected, (str, list)):
            assert typed(got) == typed(expected), (name, kwargs)
        else:
            assert_same(got, expected, f"{name} {kwargs}")
    assert ours.get_chat_template() == theirs.get_chat_template()


@pytest.mark.parametrize("name", NAMES)
def test_pad(name: str) -> None:
    ours, theirs = pair_of(name)
    if theirs.pad_token is None:
        ours, theirs = load_ours(name), load_theirs(name)
        ours.pad_token, theirs.pad_token = ours.eos_token, theirs.eos_token
    features = [_quiet(lambda t=t: theirs(t, return_special_tokens_mask=True)) for t in texts_pool()[-5:]]
    features = [{k: v for k, v in f.items()} for f in features]
    for kwargs in ({}, dict(return_tensors="np"), dict(padding="max_length", max_length=40),
                   dict(pad_to_multiple_of=8, padding_side="left", return_tensors="pt"),
                   dict(padding=False), dict(return_attention_mask=False)):
        run_both(ours, theirs, lambda tok, k=kwargs: tok.pad([dict(f) for f in features], **k), f"{name} {kwargs}")
    as_arrays = {"input_ids": [np.array(f["input_ids"]) for f in features]}
    run_both(ours, theirs, lambda tok: tok.pad(dict(as_arrays)), f"{name} arrays")


def test_settable_attributes_match() -> None:
    ours, theirs = load_ours("llama2"), load_theirs("llama2")
    texts = ["Hello world", "a much longer line of text here"]
    run_both(ours, theirs, lambda tok: tok(texts, padding=True), "no pad token")
    ours.pad_token, theirs.pad_token = ours.eos_token, theirs.eos_token
    run_both(ours, theirs, lambda tok: tok(texts, padding=True), "pad = eos")
    ours.padding_side = theirs.padding_side = "right"
    ours.truncation_side = theirs.truncation_side = "left"
    run_both(ours, theirs, lambda tok: tok(texts, padding=True, truncation=True, max_length=5), "sides")
    ours.pad_token_id = theirs.pad_token_id = 0
    assert ours.pad_token == theirs.pad_token
    with pytest.raises(ValueError):
        ours.padding_side = "middle"


@pytest.mark.parametrize("name", ["qwen3", "bert-minilm", "llama2"])
def test_add_tokens_and_special_tokens(name: str) -> None:
    ours, theirs = load_ours(name), load_theirs(name)
    text = "hello <new_tok> world <NEW_SPECIAL> my_word [NEWPAD] again"
    steps = [
        lambda tok: tok.add_tokens(["<new_tok>", "my_word", "hello"]),
        lambda tok: tok.add_tokens("<new_tok>"),
        lambda tok: tok.add_tokens(["<NEW_SPECIAL>"], special_tokens=True),
        lambda tok: tok.add_special_tokens({"pad_token": "[NEWPAD]", "extra_special_tokens": ["<extra_1>"]}),
    ]
    for step in steps:
        assert step(ours) == _quiet(lambda s=step: s(theirs))
        assert len(ours) == len(theirs) and ours.get_added_vocab() == theirs.get_added_vocab()
        ids = theirs(text)["input_ids"]
        assert ours(text)["input_ids"] == ids
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
        assert ours.all_special_tokens == theirs.all_special_tokens
        assert ours.pad_token_id == theirs.pad_token_id


@pytest.mark.parametrize("name", ["qwen3", "bert-minilm", "llama2"])
def test_save_pretrained_round_trips(name: str, tmp_path) -> None:
    ours = load_ours(name)
    ours.add_tokens(["<saved_tok>"])
    ours.padding_side = "left"
    ours.pad_token = ours.eos_token or ours.pad_token
    files = ours.save_pretrained(tmp_path)
    assert {os.path.basename(f) for f in files} >= {"tokenizer.json", "tokenizer_config.json"}
    again = gpu_tok.Tokenizer.from_pretrained(tmp_path)
    theirs = _quiet(lambda: transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path)))
    texts = ["Hello <saved_tok> world", "a b"]
    expected = ours(texts, padding=True)
    assert dict(again(texts, padding=True)) == dict(expected)
    assert again.chat_template == ours.chat_template and again.padding_side == "left"
    assert_same(expected, _quiet(lambda: theirs(texts, padding=True)), f"{name} saved")
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["padding_side"] == "left"


def _gapped_tokenizer_json(byte_level: bool) -> str:
    """A vocabulary whose special tokens sit in the model past a gap in the ids
    (as cl100k's and o200k's do): 0..n-1, then 257 and 270."""
    if byte_level:
        alphabet = gpu_tok._core.byte_level_alphabet()
        vocab = {alphabet[b]: b for b in range(256)}
        pre = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        decoder: Any = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        vocab = {w: i for i, w in enumerate(["hello", "world", "again", "[UNK]"])}
        pre, decoder = {"type": "Whitespace"}, None
    specials = {"<|first|>": 257, "<|last|>": 270}
    vocab.update(specials)
    model = ({"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": vocab, "merges": []} if byte_level else
             {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"})
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for t, i in specials.items()],
        "normalizer": None, "pre_tokenizer": pre, "post_processor": None, "decoder": decoder, "model": model})


@pytest.mark.parametrize("byte_level", [True, False], ids=["byte-level", "word-level"])
def test_add_tokens_after_an_id_gap_takes_the_largest_id_plus_one(byte_level: bool, tmp_path) -> None:
    """transformers numbers a new token after the largest id (271), never
    inside the gap (a fresh load of the file would): the same ids here, and
    they survive pickling (a DataLoader worker's copy) and add_bos_token's rebuild."""
    import pickle

    (tmp_path / "tokenizer.json").write_text(_gapped_tokenizer_json(byte_level))
    ours = gpu_tok.Tokenizer.from_pretrained(tmp_path)
    theirs = _quiet(lambda: transformers.AutoTokenizer.from_pretrained(str(tmp_path)))
    text = "hello <|first|> <new_one> world <|last|> <new_two> again"
    for step in (lambda tok: tok.add_tokens(["<new_one>"]),
                 lambda tok: tok.add_tokens(["<new_two>"], special_tokens=True)):
        assert step(ours) == _quiet(lambda s=step: s(theirs))
        assert ours.get_added_vocab() == theirs.get_added_vocab()
        assert ours(text)["input_ids"] == theirs(text)["input_ids"]
    assert ours.convert_tokens_to_ids(["<new_one>", "<new_two>"]) == [271, 272]
    expected = ours(text)["input_ids"]
    again = pickle.loads(pickle.dumps(ours))
    assert again.get_added_vocab() == ours.get_added_vocab()
    assert again(text)["input_ids"] == expected
    again.add_bos_token = False
    assert again(text)["input_ids"] == expected
