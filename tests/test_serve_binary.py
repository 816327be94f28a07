"""The binary framed protocol of `gpu-tok serve` (`--binary-port`, `--binary-uds`)
and its clients: answers identical to the library call for every option the
HTTP tests cover, options refused with HTTP's messages, pipelined answers out
of order on one connection, batches merged with HTTP's in the same batcher,
malformed frames answered with error frames on a connection that goes on,
broken framing closing only its connection (after answering what it took),
503 / 504, graceful drain, and a bounded load.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp")

from conftest import ours, tokenizer_config, tokenizer_json  # noqa: E402
from gpu_tok.client import AsyncBinaryClient, BinaryClient, Client, ServerError  # noqa: E402
from gpu_tok.serve import _frames, _wire  # noqa: E402
from test_serve import (  # noqa: E402
    BERT_OPTIONS,
    LONG,
    QWEN_OPTIONS,
    _histogram,
    _load,
    library,
    sentences,
    serve,
    stop_with_queued_requests,
)


@pytest.fixture(scope="module")
def qwen_bin(tmp_path_factory):
    uds = str(tmp_path_factory.mktemp("sock") / "qwen-bin.sock")
    with serve("qwen3", binary_port=0, binary_uds=uds) as server:
        yield server


@pytest.fixture(scope="module")
def bert_bin():
    with serve("bert-minilm", binary_port=0) as server:
        yield server


def http_of(server) -> str:
    return next(a for a in server.addresses if a.startswith("http"))


def binary_of(server, scheme: str = "gtok://") -> str:
    return next(a for a in server.addresses if a.startswith(scheme))


# -- raw frames ------------------------------------------------------------------------------

def raw_frame(request_id: int, body: bytes) -> bytes:
    """A frame of `body` (everything after the id), its length field computed."""
    return struct.pack("<II", 4 + len(body), request_id) + body


def head(count: int, options: bytes = b"", flags: int = 0) -> bytes:
    return struct.pack("<IHH", count, len(options), flags) + options


def connect(server) -> socket.socket:
    host, port = binary_of(server)[len("gtok://"):].rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def read_answer(sock: socket.socket) -> tuple[int, int, bytes]:
    """(request id, status, body) of the next answer frame."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionResetError(f"closed after {len(data)} of {n} bytes")
            data += chunk
        return data

    length, request_id, status = struct.unpack("<III", exactly(12))
    return request_id, status, exactly(length - 8)


def closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


# -- the same answers as the library -----------------------------------------------------------

@pytest.mark.parametrize("options", QWEN_OPTIONS, ids=lambda o: json.dumps(o))
def test_encode_matches_the_library_tcp_and_uds(qwen_bin, options: dict) -> None:
    tok = ours("qwen3")
    texts = sentences()[:24] + ["", " ", "é\u0301 \U0001f600 日本語", "a\nb\tc"]
    expected = library(tok, texts, **options)
    for address in (binary_of(qwen_bin), binary_of(qwen_bin, "gtok+unix://")):
        with BinaryClient(address) as client:
            assert client.encode(texts, **options) == expected
            assert _wire.to_rows(client.encode(texts, packed=True, **options)) == expected
            assert client.encode([], **options) == library(tok, [], **options)


@pytest.mark.parametrize("options", BERT_OPTIONS, ids=lambda o: json.dumps(o))
def test_pairs_and_type_ids_match_the_library(bert_bin, options: dict) -> None:
    tok = ours("bert-minilm")
    texts = [t for t in sentences() if len(t) <= 60][:20]
    pairs = sentences()[20:40][::-1]
    expected = library(tok, texts, pairs, **options)

    async def go() -> list[Any]:
        async with AsyncBinaryClient(binary_of(bert_bin)) as client:
            return await asyncio.gather(client.encode(texts, pairs, **options),
                                        client.encode(texts, pairs, packed=True, **options))

    rows, packed = asyncio.run(go())
    assert rows == expected and _wire.to_rows(packed) == expected
    with BinaryClient(binary_of(bert_bin)) as client, Client(http_of(bert_bin)) as http:
        try:
            alone = http.encode(texts, **options)
        except ServerError as err:  # only_second without pairs: refused alike
            with pytest.raises(ServerError) as caught:
                client.encode(texts, **options)
            assert (caught.value.status, caught.value.message) == (err.status, err.message)
        else:
            assert client.encode(texts, **options) == alone == library(tok, texts, **options)


REFUSED_OPTIONS = [
    {"padd": True}, {"padding": 3}, {"padding": "wide"},
    {"truncation": "middle", "max_length": 4}, {"max_length": -1, "truncation": True},
    {"max_length": "8", "truncation": True}, {"padding_side": "up", "padding": True},
    {"pad_token_id": -2, "padding": True}, {"add_special_tokens": "yes"}, {"return_offsets_mapping": 1},
    {"padding": [True]},
]


def test_options_are_refused_with_the_messages_of_http(qwen_bin) -> None:
    with BinaryClient(binary_of(qwen_bin)) as client, Client(http_of(qwen_bin)) as http:
        for options in REFUSED_OPTIONS:
            with pytest.raises(ServerError) as over_binary:
                client.encode(["a"], **options)
            with pytest.raises(ServerError) as over_http:
                http.request("POST", "/encode", json.dumps({"texts": ["a"], **options}).encode())
            assert (over_binary.value.status, over_binary.value.message) == (400, over_http.value.message), options
            assert client.encode(["still here"]) == library(ours("qwen3"), ["still here"])


# -- pipelining, merging, load ------------------------------------------------------------------

def test_pipelined_answers_come_back_out_of_order() -> None:
    """One write holding a good request (held 200 ms for merging) then a bad
    one (refused at once): the bad one's answer comes first, both by id."""
    tok = ours("qwen3")
    with serve("qwen3", binary_port=0, max_delay_ms=200) as server, connect(server) as sock:
        good = _frames.request_frame(7, ["Hello world"], None, b"")
        bad = raw_frame(8, head(1, b'{"padd": true}') + struct.pack("<I", 1) + b"x")
        sock.sendall(good + bad)
        first, second = read_answer(sock), read_answer(sock)
        assert first[:2] == (8, 400) and b"did you mean 'padding'" in first[2]
        assert second[:2] == (7, 200) and _wire.rows(second[2]) == library(tok, ["Hello world"])


def test_async_client_pipelines_on_one_connection(qwen_bin) -> None:
    tok = ours("qwen3")
    texts = sentences()[:120]
    listener = qwen_bin.service.binary

    async def go() -> tuple[list[Any], int]:
        async with AsyncBinaryClient(binary_of(qwen_bin)) as client:
            results = await asyncio.gather(*(client.encode([t], padding=i % 2 == 0) for i, t in enumerate(texts)))
            return results, len(listener.connections)

    results, connections = asyncio.run(go())
    assert connections == 1
    assert results == [library(tok, [t], padding=i % 2 == 0) for i, t in enumerate(texts)]


def _binary_200(metrics: str) -> float:
    found = re.search(r'^gpu_tok_requests_total{endpoint="binary",status="200"} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_load_all_answered_correctly_and_merged(qwen_bin) -> None:
    """64 concurrent binary clients x 150 requests (GPU_TOK_LONG=1: x 2,000), four
    option sets interleaved: every answer identical to the library call, all
    counted in /metrics, and engine calls that merged several requests (four
    option sets make four groups; ~3 requests per call in one process)."""
    per_client = 2000 if LONG else 150
    variants = [{}, {"padding": True, "padding_side": "left", "pad_to_multiple_of": 4},
                {"truncation": True, "max_length": 6, "return_offsets_mapping": True},
                {"padding": True, "return_special_tokens_mask": True, "packed": True}]
    with Client(http_of(qwen_bin)) as http:
        before = http.metrics()
        answered, mismatches = asyncio.run(_load(binary_of(qwen_bin), 64, per_client, variants, AsyncBinaryClient))
        after = http.metrics()
    assert answered == 64 * per_client and not mismatches, mismatches[:5]
    assert _binary_200(after) - _binary_200(before) == answered
    calls = _histogram(after, "gpu_tok_batch_requests")["count"] - _histogram(before, "gpu_tok_batch_requests")["count"]
    assert calls < answered / 2, (calls, answered)  # merged: more than 2 requests per engine call on average


def test_http_and_binary_requests_share_engine_calls() -> None:
    """The same batcher: within one merging window, 8 binary and 8 HTTP
    requests with the same options make one engine call."""
    tok = ours("qwen3")
    with serve("qwen3", binary_port=0, max_delay_ms=300) as server:
        async def go() -> list[Any]:
            from gpu_tok.client import AsyncClient

            async with AsyncBinaryClient(binary_of(server)) as b, AsyncClient(http_of(server)) as h:
                return await asyncio.gather(*(b.encode([f"binary {i}"]) for i in range(8)),
                                            *(h.encode([f"http {i}"]) for i in range(8)))

        results = asyncio.run(go())
        with Client(http_of(server)) as http:
            merged = _histogram(http.metrics(), "gpu_tok_batch_requests")
    assert results == [library(tok, [f"binary {i}"]) for i in range(8)] + [library(tok, [f"http {i}"])
                                                                            for i in range(8)]
    assert merged["count"] == 1 and merged["8"] == 0 and merged["16"] == 1, merged


# -- bad input ---------------------------------------------------------------------------------

GOOD_LENGTH = struct.pack("<I", 5)
MALFORMED = [  # (frame body after the id, expected words in the 400 message)
    (b"", "the smallest is 16"),
    (b"\x01\x00\x00\x00\x00\x00", "the smallest is 16"),
    (head(1, flags=2) + GOOD_LENGTH + b"hello", "unknown flags 0x2"),
    (struct.pack("<IHH", 1, 50, 0) + b"{}", "runs past the end"),
    (head(1, b"{not json") + GOOD_LENGTH + b"hello", "not valid JSON"),
    (head(1, b"[1, 2]") + GOOD_LENGTH + b"hello", "JSON object"),
    (head(1, b'{"padd": true}') + GOOD_LENGTH + b"hello", "did you mean 'padding'"),
    (head(1, b'{"texts": ["a"]}') + GOOD_LENGTH + b"hello", "unknown field 'texts'"),
    (head(1, b"\xff\xfe") + GOOD_LENGTH + b"hello", "not valid JSON"),
    (head(1000) + GOOD_LENGTH + b"hello", "too short for the byte lengths of its 1000 texts"),
    (head(2**32 - 1), "too short for the byte lengths"),
    (head(1) + GOOD_LENGTH + b"hell", "add up to 5, the frame holds 4"),
    (head(1) + GOOD_LENGTH + b"hello!", "add up to 5, the frame holds 6"),
    (head(1) + struct.pack("<I", 2**32 - 1) + b"hello", "add up to 4294967295"),
    (head(1) + GOOD_LENGTH + b"he\xfflo", "texts[0] is not valid UTF-8"),
    (head(1) + struct.pack("<I", 3) + b"\xed\xa0\x80", "texts[0] is not valid UTF-8"),  # a surrogate
    (head(1, flags=1) + GOOD_LENGTH + struct.pack("<I", 2) + b"hello\xc3(", "pairs[0] is not valid UTF-8"),
    (_frames.request_frame(0, ["a first text far too long to leave room for the pair"], ["x"],
                           b'{"truncation": "only_second", "max_length": 6}')[8:], "too short"),  # by the library
]


def test_malformed_frames_get_400_and_the_connection_goes_on(qwen_bin) -> None:
    tok = ours("qwen3")
    with connect(qwen_bin) as sock:
        for i, (body, words) in enumerate(MALFORMED):
            sock.sendall(raw_frame(100 + i, body) + _frames.request_frame(200 + i, ["still here"], None, b""))
            answers = {request_id: (status, data) for request_id, status, data in (read_answer(sock),
                                                                                   read_answer(sock))}
            status, data = answers[100 + i]
            error = json.loads(data)
            assert status == error["status"] == 400 and words in error["error"], (body, error)
            assert answers[200 + i][0] == 200 and _wire.rows(answers[200 + i][1]) == library(tok, ["still here"])


def test_broken_framing_closes_only_that_connection_after_answering_it() -> None:
    """A length over the limit: that frame gets 413 and its connection closes,
    once the request sent before it on the same connection is answered; a
    length that cannot hold an id: closed. Another connection goes on."""
    tok = ours("qwen3")
    with serve("qwen3", binary_port=0, max_request_bytes=1024, max_delay_ms=50) as server, \
            connect(server) as bystander:
        with connect(server) as sock:
            sock.sendall(_frames.request_frame(1, ["before"], None, b"") + struct.pack("<II", 5000, 2) + b"x" * 100)
            answers = {read_answer(sock)[:2] for _ in range(2)}
            assert answers == {(1, 200), (2, 413)}
            assert closed(sock)
        with connect(server) as sock:
            sock.sendall(struct.pack("<II", 3, 9))
            assert closed(sock)
        with connect(server) as sock:
            sock.sendall(_frames.request_frame(3, ["x" * 2000], None, b""))  # 413 whatever the frame's content
            assert read_answer(sock)[:2] == (3, 413) and closed(sock)
        bystander.sendall(_frames.request_frame(4, ["after"], None, b""))
        request_id, status, body = read_answer(bystander)
        assert (request_id, status) == (4, 200) and _wire.rows(body) == library(tok, ["after"])
        with BinaryClient(binary_of(server)) as client:
            with pytest.raises(ServerError) as caught:
                client.encode(["y" * 2000])
            assert caught.value.status == 413 and "limit of 1024" in caught.value.message
            assert client.encode(["small"]) == library(tok, ["small"])  # a new connection


def test_frames_split_anyhow_across_writes_arrive_whole(qwen_bin) -> None:
    """Frames cut at every kind of boundary (inside the length, the header, a
    text; several frames in one write; a 300 KB frame in 64 KiB pieces) are
    answered exactly."""
    tok = ours("qwen3")
    texts = [["Hello world"], ["é\u0301 日本語 " * 3, "second"], ["word " * 60_000]]
    expected = [library(tok, t, add_special_tokens=False) for t in texts]
    frames = b"".join(_frames.request_frame(i, t, None, b'{"add_special_tokens": false}') for i, t in enumerate(texts))
    with connect(qwen_bin) as sock:
        for cut in (1, 7, 40):  # the first 200 bytes in pieces of `cut`, the rest in 64 KiB writes
            head, rest = frames[:200], frames[200:]
            for at in range(0, len(head), cut):
                sock.sendall(head[at:at + cut])
                time.sleep(0.0005)
            for at in range(0, len(rest), 65536):
                sock.sendall(rest[at:at + 65536])
            answers = {request_id: (status, body) for request_id, status, body in (read_answer(sock) for _ in texts)}
            assert [(answers[i][0], _wire.rows(answers[i][1])) for i in range(3)] == [(200, e) for e in expected]


def test_garbage_never_stops_the_server(qwen_bin) -> None:
    rng = random.Random(15)
    for _ in range(30):
        with connect(qwen_bin) as sock:
            blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            if rng.random() < 0.5:  # a plausible length, then garbage
                blob = struct.pack("<I", len(blob)) + blob
            sock.sendall(blob)
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(2)
            with pytest.raises((ConnectionResetError, TimeoutError)):
                while True:
                    read_answer(sock)
    with BinaryClient(binary_of(qwen_bin)) as client:
        assert client.encode(["alive"]) == library(ours("qwen3"), ["alive"])


# -- limits, drain, lifecycle -------------------------------------------------------------------

def test_full_queue_is_503_with_retry_after_and_timeout_is_504() -> None:
    tok = ours("qwen3")
    with serve("qwen3", binary_port=0, max_queue=2, max_delay_ms=300) as server:
        async def go() -> list[Any]:
            async with AsyncBinaryClient(binary_of(server)) as client:
                return await asyncio.gather(*(client.encode([f"text {i}"]) for i in range(12)),
                                            return_exceptions=True)

        results = asyncio.run(go())
    busy = [r for r in results if isinstance(r, ServerError)]
    assert busy and all(r.status == 503 and r.retry_after == 1 for r in busy), results
    answered = {i: r for i, r in enumerate(results) if not isinstance(r, ServerError)}
    assert len(answered) == 2 and all(r == library(tok, [f"text {i}"]) for i, r in answered.items())
    with serve("qwen3", binary_port=0, max_delay_ms=500, timeout_s=0.05) as server:
        with BinaryClient(binary_of(server)) as client:
            started = time.monotonic()
            with pytest.raises(ServerError) as caught:
                client.encode(["slow"])
            assert caught.value.status == 504 and time.monotonic() - started < 0.4
        with Client(http_of(server)) as http:
            assert 'gpu_tok_requests_total{endpoint="binary",status="504"} 1' in http.metrics()


def test_graceful_stop_answers_every_queued_request() -> None:
    """Stopping while 16 requests from threads sharing one BinaryClient wait in
    the queue: each is answered correctly, then the connections close."""
    server = serve("qwen3", binary_port=0, max_delay_ms=400).__enter__()
    client = BinaryClient(binary_of(server))
    address = binary_of(server)
    results = stop_with_queued_requests(server, client)
    assert results == {i: library(ours("qwen3"), [sentences()[i]]) for i in range(16)}
    client.close()
    with pytest.raises(ConnectionRefusedError), BinaryClient(address) as late:
        late.encode(["too late"])


def test_clients_reconnect_after_a_server_restart() -> None:
    with serve("qwen3", binary_port=0) as server:
        address = binary_of(server)
    port = int(address.rsplit(":", 1)[1])
    client, async_client = BinaryClient(address), AsyncBinaryClient(address)
    loop = asyncio.new_event_loop()
    try:
        for text in ("one", "two"):
            with serve("qwen3", port=None, binary_port=port):
                assert client.encode([text]) == library(ours("qwen3"), [text])
                assert loop.run_until_complete(async_client.encode([text])) == library(ours("qwen3"), [text])
        loop.run_until_complete(async_client.close())
    finally:
        loop.close()
        client.close()


def test_client_rejects_bad_urls_and_inputs(qwen_bin) -> None:
    for bad in ("http://127.0.0.1:1", "unix:///tmp/x", "gtok+tcp://h:1"):
        with pytest.raises(ValueError):
            BinaryClient(bad)
        with pytest.raises(ValueError):
            AsyncBinaryClient(bad)
    with BinaryClient(binary_of(qwen_bin)) as client:
        with pytest.raises(TypeError):
            client.encode("not a list")
        with pytest.raises(ValueError, match="must match"):
            client.encode(["a", "b"], ["one pair"])


def test_cli_binary_uds_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "qwen3"
    folder.mkdir()
    (folder / "tokenizer.json").write_text(tokenizer_json("qwen3"), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config("qwen3")), encoding="utf-8")
    uds, binary_uds = tmp_path / "http.sock", tmp_path / "bin.sock"
    proc = subprocess.Popen([sys.executable, "-m", "gpu_tok", "serve", "--tokenizer", str(folder), "--uds", str(uds),
                             "--binary-uds", str(binary_uds), "--device", "cpu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.split("listening on ")[1].split() == [f"unix://{uds}", f"gtok+unix://{binary_uds}"], (
            line, proc.stderr.read())
        with BinaryClient(f"gtok+unix://{binary_uds}") as client:
            assert client.encode(["Hello world"]) == library(ours("qwen3"), ["Hello world"])
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
        assert "stopped" in out and not uds.exists() and not binary_uds.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_stale_binary_socket_is_replaced(tmp_path: Path) -> None:
    path = str(tmp_path / "b.sock")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()
    with serve("qwen3", port=None, binary_uds=path) as server, BinaryClient(server.addresses[0]) as client:
        assert client.encode(["x"]) == library(ours("qwen3"), ["x"])
    assert not os.path.exists(path)


# -- budgets and connections -------------------------------------------------------------------

def test_a_frame_asking_for_a_huge_output_is_413_and_the_connection_goes_on(qwen_bin) -> None:
    """250 frames of 69 bytes took the server to 16.9 GB; each is now 413."""
    options = b'{"padding":"max_length","max_length":10000000}'
    with connect(qwen_bin) as sock:
        for i in range(20):
            sock.sendall(_frames.request_frame(i, ["a", "a", "a", "a"], None, options))
        for _ in range(20):
            request_id, status, body = read_answer(sock)
            error = json.loads(body)
            assert status == error["status"] == 413 and "--max-request-cells" in error["error"], error
        sock.sendall(_frames.request_frame(99, ["still here"], None, b""))
        assert read_answer(sock)[:2] == (99, 200)
    assert qwen_bin.service.metrics.in_flight == 0


def test_binary_frames_and_connections_time_out() -> None:
    """A frame that stops arriving is answered 408 (with its id) and its
    connection closed after `body_timeout_s`; a connection with nothing to
    do is closed after `idle_timeout_s`; both leave the others alone."""
    with serve("qwen3", binary_port=0, body_timeout_s=0.5, idle_timeout_s=1.0) as server:
        with connect(server) as stuck, connect(server) as idle, connect(server) as working:
            frame = _frames.request_frame(5, ["Hello world"], None, b"")
            stuck.sendall(frame[:20])
            request_id, status, body = read_answer(stuck)
            assert (request_id, status) == (5, 408) and "--body-timeout-s" in json.loads(body)["error"]
            assert closed(stuck)
            for i in range(3):  # kept busy: not idle
                working.sendall(_frames.request_frame(i, ["Hello world"], None, b""))
                assert read_answer(working)[:2] == (i, 200)
                time.sleep(0.4)
            idle.settimeout(3)
            assert closed(idle)
            working.sendall(_frames.request_frame(9, ["Hello world"], None, b""))
            assert read_answer(working)[:2] == (9, 200)


def test_binary_connections_count_toward_the_limit() -> None:
    """Past `max_connections` an idle connection makes room; when all are busy
    the newcomer is closed at once (it has no request id to answer)."""
    with serve("qwen3", binary_port=0, max_connections=2, max_delay_ms=600) as server:
        first, second = connect(server), connect(server)
        with BinaryClient(binary_of(server)) as client:
            assert client.encode(["x"]) == library(ours("qwen3"), ["x"])  # `first` was closed for it
        assert closed(first)
        first.close()
        second.close()
        time.sleep(0.2)
        busy = [connect(server) for _ in range(2)]
        for i, sock in enumerate(busy):
            sock.sendall(_frames.request_frame(i, ["held"], None, b""))
        time.sleep(0.2)
        with connect(server) as extra:
            extra.settimeout(2)
            assert closed(extra)
        for i, sock in enumerate(busy):
            assert read_answer(sock)[:2] == (i, 200)
            sock.close()


def test_an_options_header_seen_before_still_gets_its_budget_after_the_checks_are_forgotten(qwen_bin) -> None:
    """The listener remembers headers it parsed, the parser the option sets it
    checked (each bounded, cleared when full): a header the listener knows
    whose check was forgotten is checked again, not a 500."""
    options = b'{"padding":"max_length","max_length":24,"truncation":true}'
    with BinaryClient(binary_of(qwen_bin)) as client:
        expected = library(ours("qwen3"), ["a"], padding="max_length", max_length=24, truncation=True)
        assert client.encode(["a"], padding="max_length", max_length=24, truncation=True) == expected
        qwen_bin.service.parse_encode._accepted.clear()
    with connect(qwen_bin) as sock:
        sock.sendall(_frames.request_frame(1, ["a"], None, options))
        request_id, status, body = read_answer(sock)
        assert (request_id, status) == (1, 200) and _wire.rows(body) == expected, body
