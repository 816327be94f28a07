"""Every import path users had before the package moved into rooms keeps
working, and pickles made before the move (which name the old modules) load.

An old path is an alias: the moved module itself under its old name too
(`gpu_tok._alias`), so there is one set of globals and no copy."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import gpu_tok
import pytest

# old path -> (the module it is now, names users import from it)
OLD_PATHS = {
    "gpu_tok.tokenizer": ("gpu_tok.compat.tokenizer", ["Tokenizer", "_unpickle"]),
    "gpu_tok.client": ("gpu_tok.serve.client", ["Client", "AsyncClient", "BinaryClient", "AsyncBinaryClient",
                                                "ServerError"]),
    "gpu_tok.ray": ("gpu_tok.integrations.ray", ["TokenizeBatch", "tokenize_dataset"]),
    "gpu_tok.hf_datasets": ("gpu_tok.integrations.hf_datasets", ["TokenizeFunction", "tokenize_dataset"]),
    "gpu_tok.collate": ("gpu_tok.integrations.collate", ["Collator", "LengthBucketSampler", "tokenized_lengths"]),
    "gpu_tok.convert": ("gpu_tok.tools.convert", ["cl100k_tokenizer_json", "tiktoken_to_tokenizer_json"]),
    "gpu_tok.bench": ("gpu_tok.tools.bench", ["run", "read_corpus", "table"]),
    "gpu_tok.peers": ("gpu_tok.tools.peers", []),
    "gpu_tok.corpus_readers": ("gpu_tok.corpus.readers", ["describe_inputs", "read_batches", "read_ahead"]),
    "gpu_tok.documents": ("gpu_tok.corpus.documents", ["encode_documents", "eos_token_id"]),
    "gpu_tok.shards": ("gpu_tok.corpus.shards", ["open_writer", "read_shard"]),
}
# paths that did not move
KEPT = {
    "gpu_tok": ["Tokenizer", "BatchEncoding", "Tensor", "info", "GpuTokError", "__version__"],
    "gpu_tok.corpus": ["tokenize_corpus", "load_tokens", "read_manifest", "summary_lines", "DEFAULT_BATCH_BYTES"],
    "gpu_tok.serve": ["BackgroundServer", "ServeConfig", "Service", "run", "start"],
    "gpu_tok._core": ["CoreTokenizer", "Padding", "Truncation"],
    "gpu_tok.cli": ["main"],
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_path_is_the_moved_module(old: str) -> None:
    new, names = OLD_PATHS[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(importlib.import_module(new), name)
    exec(f"from {old} import {', '.join(names) or '__name__'}", {})


@pytest.mark.parametrize("path", sorted(KEPT))
def test_a_kept_path_still_has_its_names(path: str) -> None:
    module = importlib.import_module(path)
    for name in KEPT[path]:
        assert hasattr(module, name), f"{path}.{name}"


def test_package_attributes_reach_the_moved_modules() -> None:
    """`gpu_tok.ray.tokenize_dataset` without importing gpu_tok.ray first."""
    code = ("import gpu_tok; assert gpu_tok.ray.tokenize_dataset.__module__ == 'gpu_tok.integrations.ray'; "
            "assert gpu_tok.client.Client.__module__ == 'gpu_tok.serve.client'; "
            "assert callable(gpu_tok.convert.cl100k_tokenizer_json); assert callable(gpu_tok.collate.Collator); "
            "assert callable(gpu_tok.hf_datasets.tokenize_dataset); assert callable(gpu_tok.corpus.tokenize_corpus)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_client_needs_no_server_packages() -> None:
    """gpu_tok.serve imports its server (aiohttp) at first use, not for the client."""
    code = ("import sys, gpu_tok.client, gpu_tok.serve.client; "
            "assert 'aiohttp' not in sys.modules and 'gpu_tok.serve.app' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_command_line_entry_points() -> None:
    from importlib.metadata import entry_points

    [script] = [e for e in entry_points(group="console_scripts") if e.name == "gpu-tok"]
    assert script.value == "gpu_tok.cli:main" and callable(script.load())
    done = subprocess.run([sys.executable, "-m", "gpu_tok", "--help"], capture_output=True, text=True, check=True)
    assert "tokenize" in done.stdout


def _global(module: str, name: str) -> bytes:
    """A pickle of the object `module.name`, by that path (what pickles made
    before the move hold for their classes and functions)."""
    m, n = module.encode(), name.encode()
    return b"\x80\x04\x8c" + bytes([len(m)]) + m + b"\x8c" + bytes([len(n)]) + n + b"\x93."


def test_pickles_made_before_the_move_load() -> None:
    for old, (new, names) in OLD_PATHS.items():
        for name in names:
            assert pickle.loads(_global(old, name)) is getattr(importlib.import_module(new), name)
    # a Tokenizer pickled before the move: gpu_tok.tokenizer._unpickle(json, config, Defaults, ModelConfig, name)
    tok = gpu_tok.Tokenizer.default()
    tok.padding_side = "left"
    state = tok._state
    unpickle = pickle.loads(_global("gpu_tok.tokenizer", "_unpickle"))
    defaults = pickle.loads(pickle.dumps(state.defaults))
    model = pickle.loads(pickle.dumps(state.model))
    assert type(defaults).__module__ == "gpu_tok._settings" and type(model).__module__ == "gpu_tok._config"
    again = unpickle(state.core.to_json(), state.config, defaults, model, "old")
    assert again.padding_side == "left" and again.name_or_path == "old"
    assert again(["a b c", "a"], padding=True)["input_ids"] == tok(["a b c", "a"], padding=True)["input_ids"]
