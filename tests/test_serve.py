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
from gpu_tok.client import AsyncClient, Client, ServerError  # noqa: E402
from gpu_tok.serve import BackgroundServer, ServeConfig, _wire  # noqa: E402

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
    for garbage, words in [(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n", "malformed HTTP request"),
                           (b"POST /encode HTTP/1.1\r\nContent-Length: x\r\n\r\n", "Content-Length"),
                           (b"GET /health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", "malformed HTTP request")]:
        with connect(qwen_server) as raw:
            raw.sendall(garbage)
            status, headers, body = read_response(raw)
            assert status == 400 and headers["content-type"].startswith("application/json"), (status, headers, body)
            error = json.loads(body)
            assert error["status"] == 400 and words in error["error"], error
    assert qwen.health()["status"] == "ok"


def test_content_encoding_mistakes_are_400_json_and_gzip_works(qwen_server, qwen) -> None:
    """A body that is not in the Content-Encoding it claims was a 500
    "internal error"; a real gzip body is decoded (the size limit applies to
    the decoded body)."""
    import gzip

    body = json.dumps({"texts": ["Hello world"]}).encode()
    for encoding, data in [("gzip", body), ("gzip", b"\x1f\x8b\x08garbage"), ("deflate", b"\x00garbage"), ("br", body)]:
        with connect(qwen_server) as raw:
            raw.sendall(b"POST /encode HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + f"Content-Encoding: {encoding}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
            status, headers, answer = read_response(raw)
            assert status == 400 and headers["content-type"].startswith("application/json"), (status, answer)
            assert "content-encoding" in json.loads(answer)["error"], answer
    with connect(qwen_server) as raw:
        packed = gzip.compress(body)
        raw.sendall(b"POST /encode HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
                    + f"Content-Length: {len(packed)}\r\n\r\n".encode() + packed)
        status, _, answer = read_response(raw)
        assert status == 200 and json.loads(answer) == library(ours("qwen3"), ["Hello world"])
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


def connect(server: BackgroundServer, timeout: float = 5) -> socket.socket:
    host, port = next(a for a in server.addresses if a.startswith("http://"))[len("http://"):].split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one HTTP/1.1 response with a Content-Length."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError(f"closed after {data!r}")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("closed mid-body")
        body += chunk
    return int(lines[0].split()[1]), headers, body


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (whatever it writes first is read away)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


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
            info = client.info()
            assert info["addresses"] == ["unix://…/gt.sock"] and info["tokenizer"] == "…/qwen3/tokenizer.json"
            assert str(tmp_path) not in json.dumps(info)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "stopped" in out and not uds.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("arguments", [
    ["--max-delay-ms", "-1"], ["--workers", "0"], ["--port", "70000"], ["--port", "-1"], ["--binary-port", "65536"],
    ["--timeout-s", "nan"], ["--timeout-s", "inf"], ["--max-delay-ms", "nan"], ["--idle-timeout-s", "0"],
    ["--header-timeout-s", "-3"], ["--body-timeout-s", "nan"], ["--drain-timeout-s", "0"],
    ["--max-request-cells", "0"], ["--max-connections", "0"],
])
def test_cli_serve_usage_errors(arguments: list[str], capsys) -> None:
    """Refused before anything starts (`--port 70000` listened on 4464, and
    `--timeout-s nan` started and then failed every request)."""
    from gpu_tok import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", *arguments])
    assert exited.value.code == 2
    assert arguments[0] in capsys.readouterr().err


@pytest.mark.parametrize(("setting", "words"), [
    ({"port": 70000}, "port must be a TCP port"), ({"binary_port": -1}, "binary_port must be a TCP port"),
    ({"timeout_s": float("nan")}, "timeout_s"), ({"header_timeout_s": 0}, "header_timeout_s"),
    ({"max_delay_ms": float("inf")}, "max_delay_ms"), ({"max_batch_cells": 0}, "max_batch_cells"),
    ({"device": "gpu"}, "device"), ({"port": None}, "nothing to listen on"),
    ({"max_connections": 10**9}, "file descriptors"),
])
def test_serve_config_is_checked_when_made(setting: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        with serve("qwen3", **setting):
            pass


def test_client_rejects_bad_urls_and_single_strings(qwen) -> None:
    with pytest.raises(ValueError):
        Client("ftp://host")
    with pytest.raises(TypeError):
        qwen.encode("not a list")


@pytest.mark.parametrize("option", ["uds", "binary_uds"])
def test_a_socket_path_that_is_not_a_socket_is_refused_and_kept(tmp_path: Path, option: str) -> None:
    """`--uds f` with `f` a regular file deleted it (a refused connection
    looked like a stale socket); now only a socket file is ever removed."""
    path = tmp_path / "data.txt"
    path.write_text("precious data\n")
    with pytest.raises(OSError, match="is a regular file: refusing to replace it"):
        serve("qwen3", port=None, **{option: str(path)}).__enter__()
    assert path.read_text() == "precious data\n"
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(OSError, match="is a directory"):
        serve("qwen3", port=None, **{option: str(folder)}).__enter__()
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(OSError, match="is a symbolic link"):
        serve("qwen3", port=None, **{option: str(link)}).__enter__()
    assert path.read_text() == "precious data\n" and folder.is_dir() and link.is_symlink()


def test_cli_serve_keeps_a_file_named_by_uds(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("data\n")
    done = subprocess.run([sys.executable, "-m", "gpu_tok", "serve", "--uds", str(path), "--device", "cpu"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "is a regular file" in done.stderr and "Traceback" not in done.stderr, done
    assert path.read_text() == "data\n"


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


# -- what one request may cost -------------------------------------------------------------------

def test_a_tiny_request_asking_for_a_huge_output_is_413_naming_the_limit(qwen) -> None:
    """80 bytes asking for 4 rows padded to 10M tokens made the server allocate
    360 MB (0.3 -> 3.0 GB resident); now refused before it is queued."""
    body = b'{"texts":["a","a","a","a"],"padding":"max_length","max_length":10000000}'
    with pytest.raises(ServerError) as caught:
        qwen.request("POST", "/encode", body)
    assert caught.value.status == 413, caught.value
    assert "up to 40000072 cells (4 rows x padded length 10000000)" in caught.value.message
    assert "limit of 4194304 cells per request (--max-request-cells)" in caught.value.message
    for options in [{"padding": "max_length", "max_length": 2**40}, {"padding": True, "pad_to_multiple_of": 2**30},
                    {"padding": "max_length", "max_length": 512, "pad_to_multiple_of": 2**23}]:
        with pytest.raises(ServerError) as caught:
            qwen.encode(["a"], **options)
        assert caught.value.status == 413 and "--max-request-cells" in caught.value.message, (options, caught.value)
    tok = ours("qwen3")
    fine = {"padding": "max_length", "max_length": 4096, "truncation": True}
    assert qwen.encode(["a", "b"], **fine) == library(tok, ["a", "b"], **fine)
    assert qwen.encode(["x" * 100_000]) == library(tok, ["x" * 100_000])  # unpadded: bounded by the body anyway


def test_a_request_the_library_cannot_hold_is_413() -> None:
    """Past the server's budget (raised here), the library's own memory check refuses it."""
    with serve("qwen3", max_request_cells=2**62, max_batch_cells=2**62) as server, \
            Client(server.addresses[0]) as client:
        with pytest.raises(ServerError) as caught:
            client.encode(["a"], padding="max_length", max_length=2**50)
        assert caught.value.status == 413 and "more memory than this process can get" in caught.value.message


def test_merged_requests_stay_within_the_batch_budget() -> None:
    """Requests are merged while the call's output stays within
    `max_batch_cells`: 8 requests of 16 cells under a budget of 64 make calls
    of at most 4; padding to the longest row, one long text is not merged with
    short ones (the merged call would pad every short row to its length)."""
    tok = ours("qwen3")
    with serve("qwen3", max_batch_cells=64, max_delay_ms=300) as server:
        async def go(requests: list[tuple[list[str], dict]]) -> list[Any]:
            async with AsyncClient(server.addresses[0]) as client:
                return await asyncio.gather(*(client.encode(texts, **options) for texts, options in requests))

        fixed = {"padding": "max_length", "max_length": 16, "truncation": True}
        requests = [([f"text {i}"], fixed) for i in range(8)]
        assert asyncio.run(go(requests)) == [library(tok, t, **o) for t, o in requests]
        with Client(server.addresses[0]) as client:
            calls = _histogram(client.metrics(), "gpu_tok_batch_requests")
        assert calls["count"] >= 2 and calls["4"] == calls["count"], calls  # every call merged at most 4
        longest = [(["word " * 20], {"padding": True})] + [([f"t{i}"], {"padding": True}) for i in range(6)]
        assert asyncio.run(go(longest)) == [library(tok, t, **o) for t, o in longest]
        with Client(server.addresses[0]) as client:
            after = _histogram(client.metrics(), "gpu_tok_batch_requests")
        assert after["count"] - calls["count"] >= 2, after  # the long one ran apart


# -- connections: limits, timeouts, drain ---------------------------------------------------------

def test_a_slow_request_head_is_408_and_closed() -> None:
    """Slow-loris: a head sent a byte at a time is cut off after
    `header_timeout_s`; other clients are served meanwhile."""
    with serve("qwen3", header_timeout_s=0.5) as server, connect(server) as slow:
        started = time.monotonic()
        for byte in b"POST /encode HTTP/1.1\r\nHost: x\r\n":
            try:
                slow.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            time.sleep(0.05)
            if time.monotonic() - started > 3:
                break
        slow.settimeout(3)
        status, _, body = read_response(slow)
        assert status == 408 and "--header-timeout-s" in json.loads(body)["error"]
        assert closed_within(slow, 2) and time.monotonic() - started < 2.5
        with Client(server.addresses[0]) as client:
            assert client.health()["status"] == "ok"


def test_idle_connections_are_closed() -> None:
    """A connection that never sends, and a keep-alive connection after its
    answer, are closed after `idle_timeout_s`; a busy one is not."""
    with serve("qwen3", idle_timeout_s=0.4) as server, connect(server) as silent, connect(server) as kept:
        kept.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(kept)[0] == 200
        started = time.monotonic()
        assert closed_within(silent, 3) and closed_within(kept, 3)
        assert time.monotonic() - started < 2
        with Client(server.addresses[0]) as client:
            assert client.encode(["after"]) == library(ours("qwen3"), ["after"])


def test_past_the_connection_limit_idle_ones_make_room_and_busy_ones_refuse_with_503() -> None:
    """With every fd held by idle sockets, clients were locked out. Now the
    longest-idle connection is closed to make room; when all are busy, the
    newcomer gets 503 + Retry-After at once, and is served again later."""
    tok = ours("qwen3")
    with serve("qwen3", max_connections=4, max_delay_ms=600) as server:
        idle = [connect(server) for _ in range(4)]
        with Client(server.addresses[0]) as client:
            assert client.encode(["served"]) == library(tok, ["served"])
        assert closed_within(idle[0], 2)  # the oldest idle one made room
        for sock in idle:
            sock.close()
        time.sleep(0.2)
        body = json.dumps({"texts": ["held"]}).encode()
        busy = [connect(server) for _ in range(4)]
        for sock in busy:  # four requests held ~0.6 s in the batcher: every connection busy
            sock.sendall(b"POST /encode HTTP/1.1\r\nHost: x\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode()
                         + body)
        time.sleep(0.2)
        with connect(server) as extra:
            status, headers, answer = read_response(extra)
            assert status == 503 and headers["retry-after"] == "1", answer
            assert "too many connections" in json.loads(answer)["error"]
        for sock in busy:
            assert read_response(sock)[0] == 200
            sock.close()
        with Client(server.addresses[0]) as client:
            assert client.encode(["again"]) == library(tok, ["again"])
        assert server.service.connections.evicted >= 1 and server.service.connections.refused == 1


def test_a_body_stuck_midway_is_408_and_does_not_hold_up_the_drain() -> None:
    """A body that stops arriving is 408 after `body_timeout_s`; on stop, one
    still arriving is answered 503 at once (it delayed a graceful stop by the
    whole shutdown timeout)."""
    with serve("qwen3", body_timeout_s=0.5) as server, connect(server) as stuck:
        stuck.sendall(b"POST /encode HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"texts\": [")
        status, _, body = read_response(stuck)
        assert status == 408 and "--body-timeout-s" in json.loads(body)["error"]
        assert closed_within(stuck, 2)
    server = serve("qwen3", shutdown_timeout_s=20).__enter__()
    with connect(server) as stuck:
        stuck.sendall(b"POST /encode HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"texts\": [")
        time.sleep(0.2)
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 3
        status, headers, body = read_response(stuck)
        assert status == 503 and headers["retry-after"] == "1", body


def test_decode_refuses_ids_the_tokenizer_does_not_have(qwen) -> None:
    """Out-of-range ids were decoded to "" (the library skips them, as
    `tokenizers` does) while `gpu-tok decode` refused them: the same rule now."""
    size = ours("qwen3").get_vocab_size()
    with pytest.raises(ServerError) as caught:
        qwen.decode([[9707, 1879], [9707, 99_999_999]])
    assert caught.value.status == 400
    assert f"ids[1][1]: id 99999999 is out of range: this tokenizer has no such token (it has {size} tokens)" \
        == caught.value.message
    done = subprocess.run([sys.executable, "-m", "gpu_tok", "decode", "9707", "99999999"], capture_output=True,
                          text=True, timeout=60)
    assert "id 99999999 is out of range: this tokenizer has no such token" in done.stderr
    assert qwen.decode([[size - 1]]) == ours("qwen3").decode_batch([[size - 1]])


def test_integer_options_past_64_bits_name_the_limit(qwen) -> None:
    for option in ("max_length", "pad_to_multiple_of"):
        with pytest.raises(ServerError) as caught:
            qwen.request("POST", "/encode", f'{{"texts": ["a"], "{option}": {2**64}, "padding": true}}'.encode())
        assert caught.value.status == 400 and "2**63 - 1" in caught.value.message, caught.value
    with pytest.raises(ServerError, match="not float"):
        qwen.request("POST", "/encode", b'{"texts": ["a"], "max_length": 8.5}')


def test_info_leaves_file_paths_out_unless_asked(tmp_path: Path) -> None:
    uds = str(tmp_path / "s.sock")
    tok = ours("qwen3")
    for info_paths in (False, True):
        config = ServeConfig(port=0, uds=uds, device="cpu", info_paths=info_paths)
        with BackgroundServer(tok, config, str(tmp_path / "qwen3" / "tokenizer.json")) as server:
            with Client(server.addresses[0]) as client:
                info = client.info()
        text = json.dumps(info, ensure_ascii=False)
        assert (str(tmp_path) in text) == info_paths, text
        if not info_paths:
            assert info["tokenizer"] == "…/qwen3/tokenizer.json" and info["config"]["uds"] == "…/s.sock"
            assert info["addresses"][1] == "unix://…/s.sock"


async def _http_until_refused(host: str, port: int, outcomes: dict[str, int]) -> None:
    """One keep-alive connection sending /encode requests back to back until
    one is refused with 503; a request met by a closed connection is lost."""
    reader, writer = await asyncio.open_connection(host, port)
    body = json.dumps({"texts": ["Hello world, again"]}).encode()
    request = f"POST /encode HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    try:
        while True:
            writer.write(request)
            try:
                status = int((await reader.readuntil(b"\r\n")).split()[1])
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                await reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                outcomes["lost"] += 1
                return
            outcomes[str(status)] += 1
            if status == 503:
                assert b"Retry-After: 1" in head
                return
    finally:
        writer.close()


async def _binary_until_refused(host: str, port: int, outcomes: dict[str, int], lanes: int = 8) -> None:
    """One binary connection with `lanes` requests always in flight (each lane
    sends again on its answer) until each lane is refused with 503."""
    from gpu_tok.serve import _frames

    reader, writer = await asyncio.open_connection(host, port)
    waiting: dict[int, asyncio.Future[int]] = {}

    async def read_answers() -> None:
        try:
            while True:
                length, request_id, status = _frames.ANSWER_HEAD.unpack(await reader.readexactly(12))
                await reader.readexactly(length - 8)
                waiting.pop(request_id).set_result(status)
        except (asyncio.IncompleteReadError, ConnectionError):
            for future in waiting.values():
                future.set_exception(ConnectionResetError())

    async def lane(first_id: int) -> None:
        request_id = first_id
        while True:
            future = asyncio.get_running_loop().create_future()
            waiting[request_id] = future
            writer.write(_frames.request_frame(request_id, ["Hello world, again"], None, b""))
            try:
                status = await future
            except ConnectionError:
                outcomes["lost"] += 1
                return
            outcomes[str(status)] += 1
            if status == 503:
                return
            request_id += lanes

    reading = asyncio.get_running_loop().create_task(read_answers())
    await asyncio.gather(*(lane(i) for i in range(lanes)))
    writer.close()
    await reading


def test_sigterm_under_load_answers_every_request_sent(tmp_path: Path) -> None:
    """A `gpu-tok serve` process under load from 16 HTTP keep-alive clients and
    4 binary connections (8 pipelined requests each) gets SIGTERM: every
    request sent is answered, 200 or 503 with Retry-After, and the process
    exits 0. Before, each HTTP client lost the request it had just sent and
    pipelined frames went unanswered (their connections were closed)."""
    folder = tmp_path / "qwen3"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tokenizer_json("qwen3"), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config("qwen3")), encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "gpu_tok", "serve", "--tokenizer", str(folder), "--port", "0",
                             "--binary-port", "0", "--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert "listening on" in line, (line, proc.stderr.read())
        http, binary = line.split("listening on ")[1].split()
        host, http_port = http[len("http://"):].split(":")
        binary_port = int(binary.rsplit(":", 1)[1])
        outcomes: dict[str, int] = {"200": 0, "503": 0, "lost": 0}

        async def go() -> None:
            clients = [_http_until_refused(host, int(http_port), outcomes) for _ in range(16)]
            clients += [_binary_until_refused(host, binary_port, outcomes) for _ in range(4)]
            running = asyncio.gather(*clients)
            await asyncio.sleep(1.0)
            answered_before = outcomes["200"]
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(running, 30)
            assert answered_before > 0, outcomes

        asyncio.run(go())
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "stopped" in out, err
        assert outcomes["lost"] == 0 and outcomes["503"] == 16 + 4 * 8, outcomes
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
