"""`gpu-tok serve` and `gpu_tok.client`: answers identical to the library call,
merged batches under concurrency, every bad request class answered with its
4xx (and the server still answering after), backpressure, timeouts, graceful
drain, and a bounded load test (GPU_TOK_LONG=1: the full 64 x 2,000).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

import gpu_tok  # noqa: E402
from conftest import corpus_sample, edge_cases, ours, tokenizer_config, tokenizer_json  # noqa: E402
from gpu_tok import _wire  # noqa: E402
from gpu_tok.client import AsyncClient, Client, ServerError  # noqa: E402
from gpu_tok.serve import BackgroundServer, ServeConfig  # noqa: E402

LONG = os.environ.get("GPU_TOK_LONG") == "1"


@cache
def sentences() -> list[str]:
    """Snippets of one or two sentences from the corpus (prose, code, many scripts)."""
    out = []
    for doc in corpus_sample():
        parts = [p for p in re.split(r"(?<=[.!?。])\s+", doc) if 10 <= len(p) <= 200]
        out += [" ".join(parts[i:i + 1 + i % 2]) for i in range(0, len(parts), 2)]
    return out[:4000]


def library(tok: gpu_tok.Tokenizer, texts: list[str], pairs: list[str] | None = None, **options: Any) -> dict:
    """`tok(texts, pairs, **options)` as JSON would carry it (tuples become lists)."""
    return json.loads(json.dumps(dict(tok(texts, pairs, **options))))


def serve(name: str, **config: Any) -> BackgroundServer:
    return BackgroundServer(ours(name), ServeConfig(**{"port": 0, "device": "cpu", **config}))


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory):
    uds = str(tmp_path_factory.mktemp("sock") / "qwen.sock")
    with serve("qwen3", uds=uds) as server:
        yield server


@pytest.fixture(scope="module")
def bert_server():
    with serve("bert-minilm") as server:
        yield server


@pytest.fixture(scope="module")
def qwen(qwen_server):
    with Client(qwen_server.addresses[0]) as client:
        yield client


QWEN_OPTIONS = [
    {},
    {"add_special_tokens": False},
    {"truncation": True, "max_length": 8},
    {"truncation": True, "max_length": 8, "truncation_side": "left"},
    {"padding": True},
    {"padding": True, "pad_to_multiple_of": 8, "padding_side": "left"},
    {"padding": "max_length", "max_length": 24, "truncation": True},
    {"padding": "longest", "pad_token_id": 7},
    {"return_offsets_mapping": True, "return_special_tokens_mask": True},
    {"return_offsets_mapping": True, "padding": True, "return_special_tokens_mask": True},
    {"return_attention_mask": False, "return_token_type_ids": True},
]
BERT_OPTIONS = [
    {},
    {"add_special_tokens": False},
    {"truncation": "only_second", "max_length": 80},
    {"truncation": "longest_first", "max_length": 12, "padding": True},
    {"padding": True, "padding_side": "left", "return_offsets_mapping": True, "return_special_tokens_mask": True},
    {"padding": "max_length", "max_length": 32, "truncation": True, "pad_to_multiple_of": 8},
    {"return_token_type_ids": False, "return_attention_mask": False},
]


@pytest.mark.parametrize("options", QWEN_OPTIONS, ids=lambda o: json.dumps(o))
def test_encode_matches_the_library_tcp_and_uds(qwen_server, options: dict) -> None:
    tok = ours("qwen3")
    texts = sentences()[:24] + edge_cases()[:12]
    expected = library(tok, texts, **options)
    for address in qwen_server.addresses:
        with Client(address) as client:
            assert client.encode(texts, **options) == expected
            assert _wire.to_rows(client.encode(texts, packed=True, **options)) == expected


@pytest.mark.parametrize("options", BERT_OPTIONS, ids=lambda o: json.dumps(o))
def test_pairs_and_type_ids_match_the_library(bert_server, options: dict) -> None:
    tok = ours("bert-minilm")
    texts = [t for t in sentences() if len(t) <= 60][:20]  # room left for the pair under only_second
    pairs = sentences()[20:40][::-1]
    with Client(bert_server.addresses[0]) as client:
        try:
            alone = library(tok, texts, **options)
        except gpu_tok.GpuTokError:  # only_second without pairs: the library refuses, so does the server
            with pytest.raises(ServerError, match="400"):
                client.encode(texts, **options)
        else:
            assert client.encode(texts, **options) == alone
        expected = library(tok, texts, pairs, **options)
        assert client.encode(texts, pairs, **options) == expected
        assert _wire.to_rows(client.encode(texts, pairs, packed=True, **options)) == expected


def test_decode_matches_the_library(qwen) -> None:
    tok = ours("qwen3")
    rows = [tok.encode(t) + [tok.token_to_id("<|im_end|>")] for t in sentences()[:16]]
    assert qwen.decode(rows) == tok.decode_batch(rows)
    assert qwen.decode(rows, skip_special_tokens=False) == tok.decode_batch(rows, skip_special_tokens=False)
    assert qwen.decode(rows, clean_up_tokenization_spaces=True) == tok.decode_batch(
        rows, clean_up_tokenization_spaces=True)
    assert qwen.decode([]) == []


def test_info_health_metrics(qwen) -> None:
    info = qwen.info()
    assert info["vocab_size"] == ours("qwen3").get_vocab_size()
    assert info["config"]["max_delay_ms"] == 0.2 and len(info["addresses"]) == 2
    assert qwen.health()["status"] == "ok"
    text = qwen.metrics()
    for name in ("gpu_tok_requests_total", "gpu_tok_batch_requests_bucket", "gpu_tok_queue_depth",
                 "gpu_tok_request_duration_seconds_bucket"):
        assert name in text


def _histogram(metrics: str, name: str) -> dict[str, float]:
    """{le: cumulative count} of an unlabelled histogram, plus "count"."""
    out = {m[0]: float(m[1]) for m in re.findall(rf'^{name}_bucket{{le="([^"]+)"}} (\S+)$', metrics, re.M)}
    out["count"] = float(re.search(rf"^{name}_count (\S+)$", metrics, re.M).group(1))
    return out


async def _load(address: str, clients: int, per_client: int, variants: list[dict],
                client_class: Any = AsyncClient) -> tuple[int, list[str]]:
    """`clients` concurrent connections (`client_class`: HTTP, or the binary
    protocol's), each sending `per_client` requests of 1-2 sentences, one at
    a time, with one of `variants`; returns (answered, mismatches)."""
    tok = ours("qwen3")
    texts = sentences()
    expected: dict[tuple[int, int], dict] = {}
    mismatches: list[str] = []
    answered = 0

    async def one_client(c: int) -> None:
        nonlocal answered
        async with client_class(address) as client:
            for r in range(per_client):
                i = (c * per_client + r) % len(texts)
                batch = texts[i:i + 1 + r % 2]
                v = (c + r) % len(variants)
                options = dict(variants[v])
                packed = options.pop("packed", False)
                got = await client.encode(batch, packed=packed, **options)
                if packed:
                    got = _wire.to_rows(got)
                if (i, v) not in expected:
                    expected[i, v] = library(tok, batch, **options)
                if got != expected[i, v]:
                    mismatches.append(f"client {c} request {r}")
                answered += 1

    await asyncio.gather(*(one_client(c) for c in range(clients)))
    return answered, mismatches


def test_concurrent_requests_are_merged_and_all_correct(qwen_server) -> None:
    """64 concurrent clients x 30 requests (GPU_TOK_LONG=1: x 2,000), four option
    sets interleaved (padding to the longest row among them, JSON and packed):
    every answer identical to the library call, and /metrics shows engine calls
    that merged several requests."""
    address = qwen_server.addresses[0]
    with Client(address) as client:
        before = _histogram(client.metrics(), "gpu_tok_batch_requests")
    per_client = 2000 if LONG else 30
    variants = [{}, {"padding": True, "padding_side": "left", "pad_to_multiple_of": 4},
                {"truncation": True, "max_length": 6, "return_offsets_mapping": True},
                {"padding": True, "return_special_tokens_mask": True, "packed": True}]
    answered, mismatches = asyncio.run(_load(address, 64, per_client, variants))
    assert answered == 64 * per_client and not mismatches, mismatches[:5]
    with Client(address) as client:
        after = _histogram(client.metrics(), "gpu_tok_batch_requests")
    calls = after["count"] - before["count"]
    single = after["1"] - before["1"]
    assert calls < answered and single < calls, (calls, single, answered)  # batches of more than one request


def test_uds_async_client(qwen_server) -> None:
    async def go() -> list[dict]:
        async with AsyncClient(qwen_server.addresses[1]) as client:
            return await asyncio.gather(*(client.encode([t]) for t in sentences()[:20]))

    tok = ours("qwen3")
    assert asyncio.run(go()) == [library(tok, [t]) for t in sentences()[:20]]


BAD_ENCODE = [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"texts": ["a"], "padd": true}', "did you mean 'padding'"),
    (b'{"pairs": ["a"]}', "texts is required"),
    (b'{"texts": "a"}', "list of strings"),
    (b'{"texts": ["a", 3]}', "texts[1]"),
    (b'{"texts": ["a"], "pairs": ["a", "b"]}', "must match"),
    (b'{"texts": ["a"], "padding": 3}', "padding"),
    (b'{"texts": ["a"], "padding": "wide"}', "padding"),
    (b'{"texts": ["a"], "truncation": "middle", "max_length": 4}', "truncation"),
    (b'{"texts": ["a"], "max_length": -1, "truncation": true}', "max_length"),
    (b'{"texts": ["a"], "max_length": "8", "truncation": true}', "max_length"),
    (b'{"texts": ["a"], "padding_side": "up", "padding": true}', "padding_side"),
    (b'{"texts": ["a"], "pad_token_id": -2, "padding": true}', "pad_token_id"),
    (b'{"texts": ["a"], "add_special_tokens": "yes"}', "add_special_tokens"),
    (b'{"texts": ["a"], "return_offsets_mapping": 1}', "return_offsets_mapping"),
    (b'{"texts": ["\\ud800"]}', "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
]
BAD_DECODE = [
    (b'{"ids": [1, 2]}', "ids[0]"),
    (b'{"ids": [[1, "2"]]}', "ids[0][1]"),
    (b'{"ids": [[1, -5]]}', "ids[0][1]"),
    (b'{"ids": [[4294967296]]}', "ids[0][0]"),
    (b'{"ids": [[true]]}', "ids[0][0]"),
    (b'{}', "ids is required"),
    (b'{"ids": [[1]], "skip_special_tokens": null}', "skip_special_tokens"),
]


@pytest.mark.parametrize(("path", "body", "message"), [("/encode", b, m) for b, m in BAD_ENCODE]
                         + [("/decode", b, m) for b, m in BAD_DECODE])
def test_bad_request_is_400_with_a_json_error(qwen, path: str, body: bytes, message: str) -> None:
    with pytest.raises(ServerError) as caught:
        qwen.request("POST", path, body)
    assert caught.value.status == 400 and message in caught.value.message, caught.value
    assert qwen.encode(["still here"]) == library(ours("qwen3"), ["still here"])


def test_unknown_routes_methods_and_raw_garbage(qwen_server, qwen) -> None:
    for method, path, status in [("GET", "/nope", 404), ("GET", "/encode", 405), ("DELETE", "/health", 405)]:
        with pytest.raises(ServerError) as caught:
            qwen.request(method, path)
        assert caught.value.status == status
    host, port = qwen_server.addresses[0][len("http://"):].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        raw.sendall(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n")
        assert re.match(rb"HTTP/1\.[01] 400 ", raw.recv(100))
    assert qwen.health()["status"] == "ok"


def test_a_request_that_fails_in_the_engine_fails_alone() -> None:
    """only_second truncation fails in the core when the first text alone is too
    long: inside a merged batch that request gets 400, the others their answers."""
    tok = ours("bert-minilm")
    options = {"truncation": "only_second", "max_length": 12}
    short = [f"short {i}" for i in range(6)]
    with serve("bert-minilm", max_delay_ms=100) as server:
        async def go() -> list[Any]:
            async with AsyncClient(server.addresses[0]) as client:
                good = [client.encode([t], ["a pair of words"], **options) for t in short]
                bad = client.encode(["a first text far too long to leave room for the pair"], ["x"], **options)
                return await asyncio.gather(*good, bad, return_exceptions=True)

        results = asyncio.run(go())
        with Client(server.addresses[0]) as client:
            merged = _histogram(client.metrics(), "gpu_tok_batch_requests")
    *good, bad = results
    assert isinstance(bad, ServerError) and bad.status == 400 and "too short" in bad.message, bad
    assert good == [library(tok, [t], ["a pair of words"], **options) for t in short]
    assert merged["1"] < merged["count"]  # they were merged (then retried one by one)


def test_body_over_the_limit_is_413() -> None:
    with serve("qwen3", max_request_bytes=1024) as server, Client(server.addresses[0]) as client:
        with pytest.raises(ServerError) as caught:
            client.encode(["x" * 4000])
        assert caught.value.status == 413
        assert client.encode(["small"]) == library(ours("qwen3"), ["small"])


def test_full_queue_is_503_with_retry_after() -> None:
    """A queue of 2 and a long batching delay: of 12 concurrent requests, the
    ones past the queue get 503 + Retry-After; the queued ones are answered."""
    with serve("qwen3", max_queue=2, max_delay_ms=300) as server:
        async def go() -> list[Any]:
            async with AsyncClient(server.addresses[0]) as client:
                return await asyncio.gather(*(client.encode([f"text {i}"]) for i in range(12)),
                                            return_exceptions=True)

        results = asyncio.run(go())
        busy = [r for r in results if isinstance(r, ServerError)]
        assert busy and all(r.status == 503 and r.retry_after == 1 for r in busy), results
        assert len(busy) < len(results)
        for i, r in enumerate(results):
            if not isinstance(r, ServerError):
                assert r == library(ours("qwen3"), [f"text {i}"])
        with Client(server.addresses[0]) as client:
            assert client.health()["status"] == "ok"


def test_request_past_its_timeout_is_504() -> None:
    with serve("qwen3", max_delay_ms=500, timeout_s=0.05) as server, Client(server.addresses[0]) as client:
        with pytest.raises(ServerError) as caught:
            client.encode(["slow"])
        assert caught.value.status == 504
        assert client.health()["status"] == "ok"


def stop_with_queued_requests(server: Any, client: Any, n: int = 16) -> dict[int, Any]:
    """Stops `server` while `n` requests from threads sharing `client` wait in
    its queue (checked); returns each one's answer or exception."""
    results: dict[int, Any] = {}

    def send(i: int) -> None:
        try:
            results[i] = client.encode([sentences()[i]])
        except Exception as err:  # recorded, then asserted on
            results[i] = err

    threads = [threading.Thread(target=send, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while server.service.batcher.queued < n and time.monotonic() < deadline:
        time.sleep(0.005)
    assert server.service.batcher.queued == n
    server.stop()
    for t in threads:
        t.join(10)
    return results


def test_graceful_stop_answers_every_queued_request() -> None:
    """Stopping while 16 requests (from threads sharing one sync Client) wait
    in the queue: every one is answered correctly before the server stops."""
    server = serve("qwen3", max_delay_ms=400).__enter__()
    client = Client(server.addresses[0])
    results = stop_with_queued_requests(server, client)
    assert results == {i: library(ours("qwen3"), [sentences()[i]]) for i in range(16)}
    client.close()


def test_cli_serve_on_a_unix_socket_stops_on_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "qwen3"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tokenizer_json("qwen3"), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config("qwen3")), encoding="utf-8")
    uds = tmp_path / "gt.sock"
    proc = subprocess.Popen([sys.executable, "-m", "gpu_tok", "serve", "--tokenizer", str(folder), "--uds", str(uds),
                             "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("gpu-tok serve: listening on unix://"), (line, proc.stderr.read())
        with Client(f"unix://{uds}") as client:
            assert client.encode(["Hello world"]) == library(ours("qwen3"), ["Hello world"])
            assert client.info()["addresses"] == [f"unix://{uds}"]
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "stopped" in out and not uds.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_cli_serve_usage_errors() -> None:
    from gpu_tok import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--max-delay-ms", "-1"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "--workers", "0"])
    assert exited.value.code == 2


def test_client_rejects_bad_urls_and_single_strings(qwen) -> None:
    with pytest.raises(ValueError):
        Client("ftp://host")
    with pytest.raises(TypeError):
        qwen.encode("not a list")


def test_unix_socket_stale_file_is_replaced_a_live_one_is_not(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays, as after a server killed with SIGKILL
    with serve("qwen3", port=None, uds=path) as server, Client(server.addresses[0]) as client:
        assert client.health()["status"] == "ok"
        with pytest.raises(OSError, match="another server"):
            serve("qwen3", port=None, uds=path).__enter__()
        assert client.health()["status"] == "ok"
    assert not os.path.exists(path)


def test_clients_reconnect_after_a_server_restart() -> None:
    """Pooled keep-alive connections to a server that restarted on the same port
    are dropped and the request is sent again on a new one."""
    with serve("qwen3") as server:
        address = server.addresses[0]
    port = int(address.rsplit(":", 1)[1])
    client, async_client = Client(address), AsyncClient(address)
    with serve("qwen3", port=port):
        assert client.encode(["one"]) == library(ours("qwen3"), ["one"])
        loop = asyncio.new_event_loop()
        assert loop.run_until_complete(async_client.encode(["one"])) == library(ours("qwen3"), ["one"])
    with serve("qwen3", port=port):
        assert client.encode(["two"]) == library(ours("qwen3"), ["two"])
        assert loop.run_until_complete(async_client.encode(["two"])) == library(ours("qwen3"), ["two"])
        loop.run_until_complete(async_client.close())
    loop.close()
    client.close()
