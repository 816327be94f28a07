"""A list of str as input. A per-version build reads each str's own code
points (CPython keeps 1, 2 or 4 bytes per code point) and encodes them to
UTF-8 on the pool without the GIL; the abi3 build asks CPython for the UTF-8.
Either way: the ids and offsets tokenizers gives, the same as from an Arrow
array of the same text, lone surrogates refused by name, and the call's own
copy of the list holding while other threads change the list."""

from __future__ import annotations

import ctypes
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import gpu_tok
import pyarrow as pa
import pytest
from conftest import corpus_sample, ours, reference

NAME = "qwen3"

# One string per storage width CPython picks, and edges of the UTF-8 lengths.
KINDS = {
    "empty": "",
    "ascii": "Plain ASCII, longer than sixteen characters: runs are narrowed at once.",
    "latin1": "Café crème brûlée, ß, ÿ and ¡olé! (every code point below U+0100)",
    "bmp": "€uro, Ελληνικά, русский, 日本語のテキスト, עברית and ASCII in between",
    "astral": "emoji 😀🎉, music 𝄞, CJK extension B 𠀀 and plain words",
    "edges": "\x00\x7f\x80\u07ff\u0800\uffff\U00010000\U0010ffff",
}


def fresh(text: str) -> str:
    """A new str object with the same text (no UTF-8 cached on it)."""
    return (text + "\n")[:-1]


def with_cached_utf8(text: str) -> str:
    """A new str object whose UTF-8 CPython has made and cached on it."""
    text = fresh(text)
    as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    as_utf8.argtypes = [ctypes.py_object, ctypes.POINTER(ctypes.c_ssize_t)]
    as_utf8.restype = ctypes.c_void_p
    size = ctypes.c_ssize_t()
    assert ctypes.string_at(as_utf8(text, ctypes.byref(size)), size.value) == text.encode("utf-8")
    return text


class Text(str):
    """A str subclass: CPython keeps its code points apart from the object."""


def batch_of_every_kind() -> list[str]:
    kinds = list(KINDS.values())
    mixed = "".join(kinds)  # every width in one string: stored 4 bytes per code point
    return [fresh(t) for t in kinds] + [mixed, Text(KINDS["bmp"]), Text(KINDS["ascii"])] + corpus_sample()[:20]


def ids_and_offsets(texts) -> dict:
    lists = ours(NAME).encode_batch(texts, return_offsets=True).to_lists()
    return {"ids": lists["input_ids"], "offsets": lists["offset_mapping"]}


def oracle(texts: list[str]) -> dict:
    encodings = reference(NAME).encode_batch([str(t) for t in texts])
    return {"ids": [e.ids for e in encodings], "offsets": [[tuple(o) for o in e.offsets] for e in encodings]}


def test_every_storage_width_gives_tokenizers_and_arrows_ids_and_offsets() -> None:
    texts = batch_of_every_kind()
    expected = oracle(texts)
    assert ids_and_offsets(texts) == expected
    assert ids_and_offsets(pa.array([str(t) for t in texts])) == expected
    assert ours(NAME)(texts)["input_ids"] == expected["ids"]
    # Pairs: the second texts take the same route.
    pairs = texts[::-1]
    got = ours(NAME).encode_batch(texts, pairs).to_lists()["input_ids"]
    assert got == [e.ids for e in reference(NAME).encode_batch(list(zip(texts, pairs, strict=True)))]


def test_a_cached_utf8_changes_nothing() -> None:
    texts = [t for t in batch_of_every_kind() if type(t) is str]
    assert ids_and_offsets([with_cached_utf8(t) for t in texts]) == ids_and_offsets([fresh(t) for t in texts])


@pytest.mark.parametrize("kind", ["ascii", "latin1", "bmp", "astral"])
def test_huge_strings_of_every_width_match_arrow(kind: str) -> None:
    # Over 256 Ki code points: the string is counted and encoded in pieces on the pool.
    text = (KINDS[kind] + " " + KINDS["ascii"] + "\n") * 6_000
    texts = [fresh(text), fresh(KINDS["latin1"]), fresh(text[: len(text) // 3])]
    expected = ours(NAME)(pa.array(texts))["input_ids"]
    assert ours(NAME)(texts)["input_ids"] == expected
    assert expected[1] == reference(NAME).encode(KINDS["latin1"]).ids


@pytest.mark.parametrize(
    ("texts", "bad"),
    [
        (["fine", "\ud800"], 1),
        (["€ then a lone low surrogate \udfff"], 0),
        (["ok", "😀 astral with a surrogate \udbff", "\ud800 a later one"], 1),
        # Two surrogates that would make a pair in UTF-16 are still two lone surrogates.
        (["café", "\ud83d\ude00"], 1),
        # CPython names a run of surrogates whole ("in position 2-4").
        (["ok", "😀 \udc00\udc01\udc02 end \ud800"], 1),
    ],
)
def test_lone_surrogates_are_refused_naming_the_first(texts: list[str], bad: int) -> None:
    # The very message of CPython's own route (the abi3 build's, and one str's).
    with pytest.raises(UnicodeEncodeError) as cpython:
        texts[bad].encode("utf-8")
    why = f"cannot be encoded as UTF-8 ({cpython.value}); lone surrogates are not text"
    with pytest.raises(gpu_tok.InvalidInputError) as err:
        ours(NAME)(texts)
    assert str(err.value) == f"texts[{bad}] {why}"
    with pytest.raises(gpu_tok.InvalidInputError) as err:
        ours(NAME)(["x"] * len(texts), texts)
    assert str(err.value) == f"text_pair[{bad}] {why}"
    with pytest.raises(gpu_tok.InvalidInputError) as err:
        ours(NAME).encode(texts[bad])
    assert str(err.value) == f"texts[0] {why}"


def test_the_calls_own_list_holds_while_another_thread_changes_it() -> None:
    # Two versions of each row; a thread swaps them (dropping the only other
    # reference to the old str) and grows and shrinks the list while calls run.
    base = corpus_sample()[:40] + list(KINDS.values())
    versions = [[fresh(t) for t in base], [fresh(t[::-1]) for t in base]]
    expected = [[reference(NAME).encode(t).ids for t in v] for v in versions]
    shared = [fresh(t) for t in versions[0]]
    stop = threading.Event()

    def churn() -> None:
        k = 0
        while not stop.is_set():
            k += 1
            for i in range(len(base)):
                shared[i] = fresh(versions[k % 2][i])
            shared.append(fresh("appended"))
            del shared[len(base):]

    changer = threading.Thread(target=churn)
    changer.start()
    try:
        for _ in range(30):
            got = ours(NAME)(shared)["input_ids"]
            for i, row in enumerate(got[: len(base)]):
                assert row in (expected[0][i], expected[1][i]), f"row {i}"
    finally:
        stop.set()
        changer.join()


def test_threads_share_one_tokenizer_on_every_width() -> None:
    texts = batch_of_every_kind()
    expected = ours(NAME)(texts)["input_ids"]
    bad = texts[:3] + ["\udc80"]

    def work(k: int):
        if k % 4 == 3:
            with pytest.raises(gpu_tok.InvalidInputError, match=r"texts\[3\]"):
                ours(NAME)([fresh(t) for t in bad])
            return expected
        return ours(NAME)([fresh(t) for t in texts])["input_ids"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(32)))
    assert all(r == expected for r in results)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_one_str_encodes_as_tokenizers_and_is_left_as_it_was(kind: str) -> None:
    # `tok.encode(text)` encodes its one string on the calling thread. A
    # per-version build reads the code points and leaves no UTF-8 copy cached
    # on the caller's string (CPython's encoder would keep one for as long as
    # the string lives); the abi3 build asks CPython for it.
    text = fresh(KINDS[kind] + " " + corpus_sample()[0])
    expected = reference(NAME).encode(fresh(text)).ids
    size = sys.getsizeof(text)
    assert ours(NAME).encode(text) == expected
    assert ours(NAME).encode(Text(text)) == expected
    if ".abi3." not in gpu_tok._core.__file__:
        assert sys.getsizeof(text) == size
