"""Clients of `gpu-tok serve`, over TCP or a Unix socket, reusing connections.

    from gpu_tok.client import Client, AsyncClient
    with Client("http://127.0.0.1:8000") as c:          # or Client("unix:///run/gpu-tok.sock")
        c.encode(["Hello world"], truncation=True)       # {"input_ids": [[...]], "attention_mask": [[...]]}
        c.encode(["Hello world"], packed=True)           # numpy arrays from the binary layout (gpu_tok.serve._wire)
        c.decode([[9707, 1879]])                          # ["Hello world"]
    async with AsyncClient("http://127.0.0.1:8000") as c:
        await c.encode(["Hello world"])

    # /encode over the binary framed protocol (gpu-tok serve --binary-port 9000 / --binary-uds PATH)
    with BinaryClient("gtok://127.0.0.1:9000") as c:    # or BinaryClient("gtok+unix:///run/gpu-tok-bin.sock")
        c.encode(["Hello world"], truncation=True)       # the same answers as Client.encode
    async with AsyncBinaryClient("gtok://127.0.0.1:9000") as c:
        await asyncio.gather(*(c.encode([t]) for t in texts))   # pipelined on one connection

Standard library only (http.client, asyncio streams, sockets), so it adds no
dependency; `packed=True` needs numpy. The clients are safe to share: the
sync ones across threads, the async ones across tasks. `Client`,
`AsyncClient` and `BinaryClient` keep a pool of idle keep-alive connections
and open another only when all are busy; `AsyncBinaryClient` sends every
call on one connection without waiting for the answers before (pipelining).
A failed request raises `ServerError` with the server's status and message.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import queue
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Self, TypeVar, cast
from urllib.parse import urlsplit

from .._errors import GpuTokError
from . import _frames, _wire

_JSON = "application/json"
_HTTP_STALE = (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine)
R = TypeVar("R")


def _retrying(attempt: Callable[[], R], stale: tuple[type[BaseException], ...]) -> R:
    """The clients' one retry policy: a connection the server closed meanwhile
    (kept alive, pooled or pipelined) fails with `stale`: retry once, on a new one."""
    try:
        return attempt()
    except stale:
        pass  # the second try's error, if any, is the one raised (not chained to the first)
    return attempt()


async def _retrying_async(attempt: Callable[[], Awaitable[R]], stale: tuple[type[BaseException], ...]) -> R:
    """`_retrying` for the asyncio clients."""
    try:
        return await attempt()
    except stale:
        pass
    return await attempt()


class ServerError(GpuTokError):
    """The server answered with an error status (400 bad request, 503 busy...)."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after  # seconds, from Retry-After on 503


def _target(url: str, scheme: str = "http", unix: str = "unix", port: int = 80) -> tuple[str, int | str]:
    """(host, port) of scheme://host:port, or ("unix", path) of unix:///path
    (HTTP by default; the binary protocol's are gtok:// and gtok+unix://)."""
    parts = urlsplit(url)
    if parts.scheme == unix:
        return "unix", parts.path
    if parts.scheme != scheme:
        raise ValueError(f"url must be {scheme}://host:port or {unix}:///path/to/socket, not {url!r}")
    return parts.hostname or "127.0.0.1", parts.port or port


def _body(texts: Any, pairs: Any, options: dict[str, Any]) -> bytes:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (wrap a single text in a list)")
    payload = {"texts": list(texts), **options}
    if pairs is not None:
        payload["pairs"] = list(pairs)
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def _result(status: int, headers: dict[str, str], body: bytes) -> Any:
    content_type = headers.get("content-type", "")
    if status != 200:
        message = body.decode("utf-8", "replace")
        if content_type.startswith(_JSON):
            message = json.loads(body).get("error", message)
        retry = headers.get("retry-after")
        raise ServerError(status, message, float(retry) if retry else None)
    if content_type.startswith(_wire.CONTENT_TYPE):
        return _wire.unpack(body)
    if content_type.startswith(_JSON):
        return json.loads(body)
    return body.decode("utf-8")


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class _Pooled:
    """What the blocking clients share: a pool of idle connections (anything
    with `close()`), closed by `close()` or on leaving a `with` block."""

    _idle: queue.LifoQueue[Any]

    def _connection(self) -> Any:
        raise NotImplementedError

    def _exchange(self, send: Callable[[Any], R], stale: tuple[type[BaseException], ...]) -> tuple[Any, R]:
        """`send(connection)` on an idle connection or a new one (retried as
        `_retrying` says); the connection and the answer. The caller puts the
        connection back in `_idle` or closes it."""

        def attempt() -> tuple[Any, R]:
            connection = self._connection()
            try:
                return connection, send(connection)
            except stale:
                connection.close()
                self.close()  # the other idle connections are as stale (a restarted server)
                raise
            except BaseException:
                connection.close()
                raise

        return _retrying(attempt, stale)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Client(_Pooled):
    """Blocking client (thread-safe, keep-alive connections pooled)."""

    def __init__(self, url: str = "http://127.0.0.1:8000", *, timeout: float = 60.0) -> None:
        self._host, self._port = _target(url)
        self._timeout = timeout
        self._idle: queue.LifoQueue[http.client.HTTPConnection] = queue.LifoQueue()

    def _connection(self) -> http.client.HTTPConnection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        if self._host == "unix":
            return _UnixHTTPConnection(str(self._port), self._timeout)
        return http.client.HTTPConnection(self._host, int(self._port), timeout=self._timeout)  # sets TCP_NODELAY

    def request(self, method: str, path: str, body: bytes | None = None, accept: str = _JSON) -> Any:
        """One request; the answer decoded (JSON, packed arrays or text)."""
        headers = {"Content-Type": _JSON, "Accept": accept}

        def send(conn: http.client.HTTPConnection) -> tuple[http.client.HTTPResponse, bytes]:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response, response.read()

        conn, (response, data) = self._exchange(send, _HTTP_STALE)
        if response.will_close:
            conn.close()
        else:
            self._idle.put(conn)
        return _result(response.status, {k.lower(): v for k, v in response.getheaders()}, data)

    def encode(self, texts: list[str], pairs: list[str] | None = None, *, packed: bool = False,
               **options: Any) -> dict[str, Any]:
        """`POST /encode`: per-row lists as `tok(texts, pairs, **options)` gives
        them; `packed=True`: numpy arrays (row_offsets + flat fields)."""
        return self.request("POST", "/encode", _body(texts, pairs, options),
                            _wire.CONTENT_TYPE if packed else _JSON)

    def decode(self, ids: list[list[int]], skip_special_tokens: bool = True,
               clean_up_tokenization_spaces: bool = False) -> list[str]:
        body = json.dumps({"ids": ids, "skip_special_tokens": skip_special_tokens,
                           "clean_up_tokenization_spaces": clean_up_tokenization_spaces}).encode()
        return self.request("POST", "/decode", body)["texts"]

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/info")

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def metrics(self) -> str:
        return self.request("GET", "/metrics", accept="text/plain")



class _Stream:
    """One keep-alive HTTP/1.1 connection on asyncio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def exchange(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        self.writer.write(request)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split(None, 2)[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._chunked()
        else:
            body = await self.reader.read()
            headers["connection"] = "close"
        return status, headers, body

    async def _chunked(self) -> bytes:
        parts = []
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            parts.append(await self.reader.readexactly(size))
            await self.reader.readline()
        await self.reader.readline()  # the empty trailer
        return b"".join(parts)

    def close(self) -> None:
        self.writer.close()


class AsyncClient:
    """asyncio client (share it across tasks; keep-alive connections pooled)."""

    def __init__(self, url: str = "http://127.0.0.1:8000", *, timeout: float = 60.0) -> None:
        self._host, self._port = _target(url)
        self._timeout = timeout
        self._idle: list[_Stream] = []

    async def _open(self) -> _Stream:
        if self._host == "unix":
            reader, writer = await asyncio.open_unix_connection(str(self._port))
        else:
            reader, writer = await asyncio.open_connection(self._host, int(self._port))  # sets TCP_NODELAY
        return _Stream(reader, writer)

    async def request(self, method: str, path: str, body: bytes = b"", accept: str = _JSON) -> Any:
        head = (f"{method} {path} HTTP/1.1\r\nHost: gpu-tok\r\nContent-Type: {_JSON}\r\nAccept: {accept}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
        stale = (ConnectionError, asyncio.IncompleteReadError)

        async def attempt() -> Any:
            stream = self._idle.pop() if self._idle else await self._open()
            try:
                status, headers, data = await asyncio.wait_for(stream.exchange(head + body), self._timeout)
            except stale:
                stream.close()
                for idle in self._idle:  # as stale (a restarted server)
                    idle.close()
                self._idle.clear()
                raise
            except BaseException:
                stream.close()
                raise
            if headers.get("connection", "").lower() == "close":
                stream.close()
            else:
                self._idle.append(stream)
            return _result(status, headers, data)

        return await _retrying_async(attempt, stale)

    async def encode(self, texts: list[str], pairs: list[str] | None = None, *, packed: bool = False,
                     **options: Any) -> dict[str, Any]:
        return await self.request("POST", "/encode", _body(texts, pairs, options),
                                  _wire.CONTENT_TYPE if packed else _JSON)

    async def decode(self, ids: list[list[int]], skip_special_tokens: bool = True,
                     clean_up_tokenization_spaces: bool = False) -> list[str]:
        body = json.dumps({"ids": ids, "skip_special_tokens": skip_special_tokens,
                           "clean_up_tokenization_spaces": clean_up_tokenization_spaces}).encode()
        return (await self.request("POST", "/decode", body))["texts"]

    async def info(self) -> dict[str, Any]:
        return await self.request("GET", "/info")

    async def health(self) -> dict[str, Any]:
        return await self.request("GET", "/health")

    async def metrics(self) -> str:
        return await self.request("GET", "/metrics", accept="text/plain")

    async def close(self) -> None:
        streams, self._idle = self._idle, []
        for stream in streams:
            stream.close()
        for stream in streams:
            try:
                await stream.writer.wait_closed()
            except ConnectionError:
                pass

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# -- the binary framed protocol (gpu_tok.serve._frames) ----------------------------------------------

def _binary_target(url: str) -> tuple[str, int | str]:
    return _target(url, "gtok", "gtok+unix", 9000)


def _options_header(texts: Any, pairs: Any, options: dict[str, Any]) -> bytes:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of strings (wrap a single text in a list)")
    if pairs is not None and len(pairs) != len(texts):  # the frame has one length per text and per pair
        raise ValueError(f"pairs has {len(pairs)} items, texts has {len(texts)}: they must match")
    return json.dumps(options, ensure_ascii=False, separators=(",", ":")).encode("utf-8") if options else b""


def _answer(status: int, body: bytes, packed: bool) -> dict[str, Any]:
    if status != 200:
        try:
            error = json.loads(body)
        except ValueError:
            error = {"error": body.decode("utf-8", "replace")}
        retry = error.get("retry_after")
        raise ServerError(status, error.get("error", ""), float(retry) if retry is not None else None)
    return _wire.unpack(body) if packed else _wire.rows(body)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    at = 0
    while at < size:
        got = sock.recv_into(view[at:])
        if not got:
            raise ConnectionResetError("the server closed the connection")
        at += got
    return bytes(buffer)


class BinaryClient(_Pooled):
    """Blocking client of the binary protocol (thread-safe, connections pooled):
    `encode` only, answering exactly as `Client.encode`."""

    def __init__(self, url: str = "gtok://127.0.0.1:9000", *, timeout: float = 60.0) -> None:
        self._host, self._port = _binary_target(url)
        self._timeout = timeout
        self._idle: queue.LifoQueue[socket.socket] = queue.LifoQueue()

    def _connection(self) -> socket.socket:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        if self._host == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self._timeout)
            try:
                sock.connect(str(self._port))
            except BaseException:
                sock.close()
                raise
            return sock
        sock = socket.create_connection((self._host, int(self._port)), timeout=self._timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def encode(self, texts: list[str], pairs: list[str] | None = None, *, packed: bool = False,
               **options: Any) -> dict[str, Any]:
        """`tok(texts, pairs, **options)` as per-row lists; `packed=True`: numpy
        arrays (row_offsets + flat fields), as `Client.encode` gives them."""
        frame = _frames.request_frame(0, texts, pairs, _options_header(texts, pairs, options))

        def send(sock: socket.socket) -> tuple[int, int, int, bytes]:
            sock.sendall(frame)
            length, request_id, status = _frames.ANSWER_HEAD.unpack(_recv_exactly(sock, _frames.ANSWER_HEAD.size))
            return length, request_id, status, _recv_exactly(sock, length - 8)

        sock, (length, request_id, status, body) = self._exchange(send, (ConnectionError,))
        if request_id != 0 or length < 8:
            sock.close()
            raise ConnectionError(f"malformed answer frame (id {request_id}, length {length})")
        if status == 413:  # the server closes the connection after a frame over its limit
            sock.close()
        else:
            self._idle.put(sock)
        return _answer(status, body, packed)



class _Pipeline(asyncio.Protocol):
    """One connection of `AsyncBinaryClient`: requests written as they come,
    answers handed to the waiting calls by request id. Timeouts: one sweep
    over the calls in the order they were sent (not a timer per call)."""

    def __init__(self, timeout: float) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: dict[int, asyncio.Future[tuple[int, bytes]]] = {}
        self.lost = False
        self._buffer = b""
        self._timeout = timeout
        self._deadlines: deque[tuple[float, asyncio.Future[tuple[int, bytes]]]] = deque()
        self._sweep_at: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses of asyncio's

    def send(self, request_id: int, frame: bytes) -> asyncio.Future[tuple[int, bytes]]:
        """Writes a request; the future gets (status, body) of its answer."""
        future = self._loop.create_future()
        self.waiting[request_id] = future
        self._deadlines.append((self._loop.time() + self._timeout, future))
        if self._sweep_at is None:
            self._sweep_at = self._loop.call_later(min(self._timeout, 0.1), self._sweep)
        assert self.transport is not None
        self.transport.write(frame)
        return future

    def _sweep(self) -> None:
        now = self._loop.time()
        deadlines = self._deadlines
        while deadlines and (deadlines[0][1].done() or deadlines[0][0] <= now):
            future = deadlines.popleft()[1]
            if not future.done():
                future.set_exception(TimeoutError(f"no answer within {self._timeout} s"))
        self._sweep_at = self._loop.call_later(min(self._timeout, 0.1), self._sweep) if deadlines else None

    def data_received(self, data: bytes) -> None:
        if self._buffer:
            data = self._buffer + data
        at, size = 0, len(data)
        head = _frames.ANSWER_HEAD
        while size - at >= 12:
            length, request_id, status = head.unpack_from(data, at)
            if length < 8:
                assert self.transport is not None
                self.transport.abort()  # calls connection_lost: the waiting calls fail
                return
            end = at + 4 + length
            if end > size:
                break
            future = self.waiting.pop(request_id, None)
            if future is not None and not future.done():
                future.set_result((status, data[at + 12:end]))
            at = end
        self._buffer = data[at:] if at < size else b""

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._sweep_at is not None:
            self._sweep_at.cancel()
            self._sweep_at = None
        waiting, self.waiting = self.waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(ConnectionResetError("the server closed the connection"))


class AsyncBinaryClient:
    """asyncio client of the binary protocol (share it across tasks): `encode`
    only, answering exactly as `AsyncClient.encode`. Concurrent calls are
    pipelined on one connection (answers may come back in any order)."""

    def __init__(self, url: str = "gtok://127.0.0.1:9000", *, timeout: float = 60.0) -> None:
        self._host, self._port = _binary_target(url)
        self._timeout = timeout
        self._pipeline: _Pipeline | None = None
        self._lock = asyncio.Lock()
        self._next_id = 0

    async def _connection(self) -> _Pipeline:
        pipeline = self._pipeline
        if pipeline is not None and not pipeline.lost:
            return pipeline
        async with self._lock:  # one call connects, the others wait for it
            if self._pipeline is None or self._pipeline.lost:
                loop = asyncio.get_running_loop()
                timeout = self._timeout
                if self._host == "unix":
                    _, self._pipeline = await loop.create_unix_connection(lambda: _Pipeline(timeout), str(self._port))
                else:  # sets TCP_NODELAY
                    _, self._pipeline = await loop.create_connection(lambda: _Pipeline(timeout), self._host,
                                                                     int(self._port))
            return self._pipeline

    async def encode(self, texts: list[str], pairs: list[str] | None = None, *, packed: bool = False,
                     **options: Any) -> dict[str, Any]:
        """`tok(texts, pairs, **options)` as per-row lists; `packed=True`: numpy
        arrays (row_offsets + flat fields), as `AsyncClient.encode` gives them.
        No answer within `timeout`: `TimeoutError`."""
        header = _options_header(texts, pairs, options)

        async def attempt() -> dict[str, Any]:
            pipeline = await self._connection()
            request_id = self._next_id
            self._next_id = (request_id + 1) & _frames.MAX_ID
            try:
                status, body = await pipeline.send(request_id, _frames.request_frame(request_id, texts, pairs, header))
            finally:
                pipeline.waiting.pop(request_id, None)
            return _answer(status, body, packed)

        return await _retrying_async(attempt, (ConnectionError,))

    async def close(self) -> None:
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None and pipeline.transport is not None:
            pipeline.transport.close()

    async def __aenter__(self) -> AsyncBinaryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
