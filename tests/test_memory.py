"""The library never aborts on allocation: an output too big for the memory
this process may take (here a `RLIMIT_AS` set in a child process) is refused
with `OutputTooLargeError` (a `MemoryError` and an `InvalidInputError`) before
it is built, on every path a user's number sizes: the packed batch, its
Python lists, `pad()`, and the `tokenizers` path (`is_split_into_words`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gpu_tok
import pytest
from conftest import ours

# Runs in a child: RLIMIT_AS is set to what the process already maps plus
# 2 GiB, then each call prints its outcome on one line.
CHILD = textwrap.dedent("""
    import resource, gpu_tok

    tok = gpu_tok.Tokenizer.default()
    tok(["warm up"], padding="max_length", max_length=8)
    mapped = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
    limit = mapped + (2 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    calls = {
        "packed": lambda: tok(["a"], padding="max_length", max_length=500_000_000),
        "lists": lambda: tok(["a", "b"], padding="max_length", max_length=20_000_000),
        "pad": lambda: tok.pad({"input_ids": [[1, 2]]}, padding="max_length", max_length=2**31),
        "words": lambda: tok([["a", "b"]], is_split_into_words=True, padding="max_length",
                             max_length=100_000_000),
        "fits": lambda: tok(["a"], padding="max_length", max_length=1_000_000, return_tensors="np"),
    }
    for name, call in calls.items():
        try:
            out = call()
        except gpu_tok.OutputTooLargeError as err:
            print(name, "refused", err, flush=True)
        else:
            print(name, "ok", out["input_ids"].shape, flush=True)
""")


def test_outputs_over_the_address_space_limit_are_refused_not_aborted() -> None:
    pytest.importorskip("tokenizers")  # the is_split_into_words path
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, (child.returncode, child.stdout, child.stderr[-2000:])
    lines = dict(line.split(" ", 1) for line in child.stdout.splitlines())
    assert set(lines) == {"packed", "lists", "pad", "words", "fits"}, child.stdout
    assert lines["packed"].startswith("refused the output would need 7.5 GiB"), lines["packed"]
    assert "RLIMIT_AS" in lines["packed"] and "padding length 500000000" in lines["packed"]
    # 0.6 GiB of packed ids and mask fit; their Python lists (~3 GiB) do not.
    assert lines["lists"].startswith("refused the output as Python lists"), lines["lists"]
    assert 'return_tensors="np"' in lines["lists"]
    assert lines["pad"].startswith("refused the padded rows") and "2147483648" in lines["pad"], lines["pad"]
    assert lines["words"].startswith("refused the padded encodings"), lines["words"]
    assert lines["fits"] == "ok (1, 1000000)", lines["fits"]


def test_the_error_is_a_memory_error_and_an_input_error() -> None:
    assert issubclass(gpu_tok.OutputTooLargeError, MemoryError)
    assert issubclass(gpu_tok.OutputTooLargeError, gpu_tok.InvalidInputError)
    with pytest.raises(gpu_tok.OutputTooLargeError, match="padding length 1099511627776"):
        ours("qwen3")(["a"], padding="max_length", max_length=2**40)
    with pytest.raises(gpu_tok.OutputTooLargeError, match="padding length 4611686018427387904"):
        ours("qwen3").pad({"input_ids": [[1]]}, padding="max_length", max_length=2**62)
