"""The call's option names are written once: `CallOptions` is the one list of
the options every encoding of `tok(...)` shares (`__call__` collects its
arguments into it by name). `__call__` keeps its explicit signature, for
help() and type checkers, so these tests hold the two to each other, and the
other places that name call options (the service's, `encode_batch`'s) to the
call's names."""

from __future__ import annotations

import inspect

import pytest
from gpu_tok import Tokenizer
from gpu_tok.compat._call import CallOptions, TransformersCall
from gpu_tok.serve.protocol import ENCODE_OPTIONS

# The call's own keywords, not shared by its encodings: the targets' length is
# max_target_length, and verbose is transformers' (gpu_tok raises or warns).
PER_CALL = ("max_length", "verbose", "max_target_length")


def _keywords(function: object) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY}


def test_the_call_options_are_the_calls_keywords_in_order() -> None:
    keywords = _keywords(TransformersCall.__call__)
    assert list(CallOptions._fields) == [name for name in keywords if name not in PER_CALL]
    assert set(PER_CALL) <= set(keywords)
    # The types are written twice too (the named tuple's and the signature's): the same.
    written = {name: getattr(kind, "__forward_arg__", kind) for name, kind in CallOptions.__annotations__.items()}
    assert written == {name: keywords[name].annotation for name in CallOptions._fields}


def test_the_call_collects_its_arguments_into_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every option reaches `_encode` with the value passed (a field the
    collection dropped or misplaced would show here)."""
    from gpu_tok.compat import _call

    seen: list[CallOptions] = []

    def spy(state: object, text: object, pair: object, max_length: object, options: CallOptions) -> object:
        seen.append(options)
        return {}

    monkeypatch.setattr(_call, "_encode", spy)
    holder = type("Holder", (), {"_state": None})()  # __call__ reads the state once and hands it on
    values = {name: f"<{name}>" for name in CallOptions._fields}
    values["return_tensors"], values["dtype"] = None, "int32"  # checked before _encode
    TransformersCall.__call__(holder, "text", **values)  # type: ignore[arg-type]
    assert seen and seen[0]._asdict() == values


def test_served_and_tokenizers_options_are_named_as_the_call_names_them() -> None:
    call = _keywords(TransformersCall.__call__)
    assert set(ENCODE_OPTIONS) <= set(call)
    # encode_batch is tokenizers' call: its one name of its own is return_offsets.
    assert set(_keywords(Tokenizer.encode_batch)) - set(call) == {"return_offsets"}
