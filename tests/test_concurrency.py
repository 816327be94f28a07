"""One shared Tokenizer, many threads and forked children: same results, no
"Already borrowed", no deadlock."""

from __future__ import annotations

import multiprocessing
import os
import random
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import corpus_sample, edge_cases, ours

NAME = "qwen3"
SETTINGS = [
    dict(),
    dict(padding=True),
    dict(padding="max_length", truncation=True, max_length=32, padding_side="left"),
    dict(truncation=True, max_length=8, return_offsets_mapping=True),
    dict(add_special_tokens=False, padding=True, pad_to_multiple_of=4),
]


def _work(seed: int) -> list:
    rng = random.Random(seed)
    texts = rng.sample(edge_cases(), min(40, len(edge_cases()))) + [t[:4000] for t in rng.sample(corpus_sample(), 5)]
    settings = SETTINGS[seed % len(SETTINGS)]
    return [seed, settings, texts, dict(ours(NAME)(texts, **settings))]


def test_many_threads_share_one_instance() -> None:
    expected = {seed: _work(seed)[3] for seed in range(len(SETTINGS) * 2)}
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(_work, [s % len(expected) for s in range(96)]))
    for seed, _, _, got in results:
        assert got == expected[seed]


def _child_encode(texts: list[str]) -> list[list[int]]:
    return [ours(NAME).encode(t) for t in texts] + ours(NAME)(texts)["input_ids"]


def test_fork_after_parallel_use() -> None:
    texts = [t[:2000] for t in corpus_sample()[:30]]
    expected = _child_encode(texts)  # the parent uses the thread pool first
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        result = pool.map_async(_child_encode, [texts] * 6)
        outputs = result.get(timeout=120)
    assert all(out == expected for out in outputs)


def test_fork_child_in_fresh_interpreter_does_not_deadlock() -> None:
    """os.fork while other Python threads are mid-encode; the child encodes too."""
    script = textwrap.dedent(
        """
        import os, threading, gpu_tok
        tok = gpu_tok.Tokenizer.default()
        texts = ["hello world " * 200] * 64
        expected = tok(texts)["input_ids"]
        stop = False
        def busy():
            while not stop:
                tok(texts)
        threads = [threading.Thread(target=busy) for _ in range(4)]
        for t in threads: t.start()
        for _ in range(5):
            pid = os.fork()
            if pid == 0:
                ok = tok(texts)["input_ids"] == expected
                os._exit(0 if ok else 3)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, status
        stop = True
        for t in threads: t.join()
        print("ok")
        """
    )
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize(
    ("env", "expected"),
    [({"GPU_TOK_NUM_THREADS": "3"}, "3"), ({"RAYON_NUM_THREADS": "2"}, "2"),
     ({"TOKENIZERS_PARALLELISM": "false", "GPU_TOK_NUM_THREADS": "4"}, "1")],
)
def test_thread_count_from_environment(env: dict, expected: str) -> None:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("GPU_TOK_NUM_THREADS", "RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")}
    code = "import gpu_tok; print(gpu_tok.info(probe_cuda=False)['threads'])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**clean, **env})
    assert out.stdout.strip() == expected, out.stderr


def test_a_settings_change_is_seen_whole_by_concurrent_encodes() -> None:
    """`add_special_tokens({"pad_token": NEW})` changes the vocabulary and the pad
    token together: an encode running meanwhile gets the old tokenizer's result
    or the new one's, never the new vocabulary padded with the old pad id."""
    import copy
    import threading

    import gpu_tok

    base = gpu_tok.Tokenizer.default()
    new_pad = "<|gt_new_pad|>"
    texts = [f"a {new_pad}", "a"]

    def encode(tok: gpu_tok.Tokenizer) -> tuple:
        out = tok(texts, padding=True)
        return tuple(tuple(row) for row in out["input_ids"]), tuple(tuple(row) for row in out["attention_mask"])

    def changed(tok: gpu_tok.Tokenizer) -> gpu_tok.Tokenizer:
        tok.add_special_tokens({"pad_token": new_pad})
        return tok

    before, after = encode(copy.copy(base)), encode(changed(copy.copy(base)))
    assert before != after
    seen: set[tuple] = set()
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        for _ in range(10):
            tok = copy.copy(base)
            stop = threading.Event()

            def reader(tok: gpu_tok.Tokenizer = tok, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    seen.add(encode(tok))

            threads = [threading.Thread(target=reader) for _ in range(2)]
            for t in threads:
                t.start()
            changed(tok)
            stop.set()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(switch)
    assert seen <= {before, after}, f"a mix of the old and new settings: {seen - {before, after}}"
