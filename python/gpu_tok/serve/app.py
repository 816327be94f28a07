"""The HTTP side of `gpu-tok serve`: aiohttp handlers, listeners (TCP and Unix
socket), limits, and the start / graceful stop of the whole service (its
binary listeners, `binary.py`, included).

Handlers only read, check and answer; the work goes through the `Batcher` to
`MergedCalls` on worker threads. Every error is a JSON body
`{"error": "...", "status": N}`, malformed HTTP included: 400 malformed
request, 404/405 unknown route, 408 a head or body that did not arrive in
time, 413 body over `max_request_bytes` or output over `max_request_cells`,
503 queue full, draining or too many connections (with Retry-After), 504 past
`timeout_s`, 500 a bug or a device failure (the server keeps running).

The listeners are plain asyncio servers whose connections are aiohttp's own
handler, watched (`_HttpConnection`) by `connections.Connections`: their
number, idle / head / body timeouts, and the drain on stop.
"""

from __future__ import annotations

import asyncio
import errno
import math
import os
import re
import signal
import socket
import stat
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from http import HTTPStatus
from typing import Any

import orjson
from aiohttp import web

from .._info import info
from ..compat.tokenizer import Tokenizer
from . import _wire
from .batcher import Batcher, QueueFull
from .binary import BinaryListener
from .calls import EncodeJob, MergedCalls
from .connections import Connections, Watched
from .metrics import Metrics
from .protocol import NO_COST, BadRequest, Cost, DecodeParser, EncodeParser, failure

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_ENDPOINTS = ("/encode", "/decode", "/info", "/health", "/metrics")
_RETRY = {"Retry-After": "1"}
DEFAULT_MAX_CONNECTIONS = 1024
_LINGER_S = 10.0  # aiohttp reads away a body left unread (413...) this long, so the client sees the answer
_SPARE_DESCRIPTORS = 64  # kept free beside the connections: listeners, the event loop, files the process opens
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


@dataclass(frozen=True)
class ServeConfig:
    """The settings of `gpu-tok serve` (its options, same names and defaults),
    checked when made (`ValueError` naming the setting)."""

    host: str = "127.0.0.1"
    port: int | None = 8000  # 0: any free port; None: no TCP listener (only `uds`)
    uds: str | None = None
    binary_port: int | None = None  # the binary framed protocol on TCP (0: any free port); None: not served
    binary_uds: str | None = None  # the binary framed protocol on a Unix socket
    max_batch_tokens: int = 262_144  # bytes of request bodies merged into one engine call
    max_delay_ms: float = 0.2  # 2 made 64 closed-loop clients wait ~1 ms per batch: half the requests/s
    device: str = "auto"
    workers: int = 1  # engine calls in flight at once (each uses gpu_tok's whole thread pool)
    max_queue: int = 4096  # waiting requests before 503
    max_request_bytes: int = 4 * 1024 * 1024
    timeout_s: float = 30.0
    shutdown_timeout_s: float = 30.0  # the drain: answers in flight, then connections closed (--drain-timeout-s)
    max_request_cells: int = 4 * 1024 * 1024  # one request's output bound (protocol.Cost); >= any unpadded body
    max_batch_cells: int = 4 * 1024 * 1024  # one engine call's: a merged call costs no more than one big request
    max_connections: int | None = None  # None: 1024, or fewer when the file-descriptor limit is lower
    idle_timeout_s: float = 75.0  # above the 60 s of common load balancers, which then close first
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0  # 4 MiB at 0.6 Mbit/s
    info_paths: bool = False  # /info shows file-system paths (tokenizer, sockets)

    def __post_init__(self) -> None:
        for name in ("port", "binary_port"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 0 <= value <= 65535):
                raise ValueError(f"{name} must be a TCP port from 0 to 65535 (0: any free one), not {value!r}")
        counts = ["max_batch_tokens", "workers", "max_queue", "max_request_bytes", "max_request_cells",
                  "max_batch_cells"] + (["max_connections"] if self.max_connections is not None else [])
        for name in counts:
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        for name in ("timeout_s", "shutdown_timeout_s", "idle_timeout_s", "header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if not isinstance(self.max_delay_ms, (int, float)) or not 0 <= self.max_delay_ms < math.inf:
            raise ValueError(f"max_delay_ms must be a number of milliseconds >= 0, not {self.max_delay_ms!r}")
        if not _DEVICE.fullmatch(str(self.device)):
            raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {self.device!r}")
        if self.port is None and self.uds is None and self.binary_port is None and self.binary_uds is None:
            raise ValueError("nothing to listen on: give a port, uds, binary_port or binary_uds")


def connection_limit(wanted: int | None) -> int:
    """How many connections may be open at once: `wanted`, or by default 1024
    (fewer when the file-descriptor limit is lower). The soft RLIMIT_NOFILE is
    raised to fit when the hard one allows; an explicit `wanted` that cannot
    fit is a `ValueError`."""
    limit = wanted or DEFAULT_MAX_CONNECTIONS
    try:
        import resource
    except ImportError:  # no such limit to respect (Windows)
        return limit
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = limit + _SPARE_DESCRIPTORS
    if need > soft:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if need <= soft:
        return limit
    if wanted is None:
        return max(1, soft - _SPARE_DESCRIPTORS)
    raise ValueError(f"max_connections={wanted} needs {need} file descriptors and this process may open {soft} "
                     "(ulimit -n): lower max_connections or raise the limit")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = orjson.dumps({"error": message, "status": status})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _raw_error(status: int, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole JSON error response that closes its connection, for where no
    request is in progress (refused or timed-out connections)."""
    body = orjson.dumps({"error": message, "status": status})
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = (f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n")
    return head.encode("latin-1") + body


def _json(value: Any) -> web.Response:
    return web.Response(body=orjson.dumps(value), content_type="application/json")


def _elide(path: str | None, keep: int = 1) -> str | None:
    """`path` without its folders above the last `keep` parts ("…/qwen3/tokenizer.json")."""
    if path is None:
        return None
    parts = [p for p in path.replace(os.sep, "/").split("/") if p]
    return "…/" + "/".join(parts[-keep:])


class _HttpConnection(web.RequestHandler, Watched):
    """aiohttp's handler of one HTTP connection, watched by `Connections` (its
    limit, timeouts and the drain), answering malformed HTTP with JSON."""

    def __init__(self, service: Service, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self.service = service
        self.busy = 0
        self.waiting_since = self.last_read = time.monotonic()
        self.partial_since: float | None = None
        self.body_left = False  # the last request's body was not read: aiohttp reads it away, then closes
        self.refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self.service.connections.admit(self):
            self.refused = True
            limit = self.service.connections.max_connections
            transport.write(_raw_error(503, f"too many connections: all {limit} have a request in progress "  # type: ignore[attr-defined]
                                            "(--max-connections)", _RETRY))
            transport.close()
            return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.refused:
            return
        self.service.connections.remove(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        now = self.last_read = time.monotonic()
        if not self.busy and self.partial_since is None and not self.body_left:
            self.partial_since = now  # the first byte of a request head
        super().data_received(data)

    def request_started(self) -> None:
        self.busy += 1
        self.partial_since = None
        self.body_left = False

    def request_done(self, body_left: bool) -> None:
        self.busy -= 1
        self.waiting_since = time.monotonic()
        self.body_left = body_left

    def check(self, now: float) -> None:
        connections = self.service.connections
        if self.busy:
            return  # a body's time is the handler's to check
        if self.body_left:  # aiohttp reads an unread body away (a while), then closes or goes on
            if now - self.waiting_since > max(connections.header_timeout_s, _LINGER_S):
                self.force_close()
        elif self.partial_since is not None:
            if now - self.partial_since > connections.header_timeout_s and self.transport is not None:
                self.transport.write(_raw_error(408, "the request head did not arrive within "
                                                     f"{connections.header_timeout_s} s (--header-timeout-s)"))
                self.force_close()
        elif now - self.waiting_since > connections.idle_timeout_s:
            self.force_close()

    def shut(self) -> None:
        self.force_close()

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        """aiohttp's answer to what never reached a handler (malformed HTTP),
        as JSON; the connection closes after it."""
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already sent on this connection")
        text = message or (str(exc) if exc is not None else "") or HTTPStatus(status).phrase
        text = f"malformed HTTP request: {text}" if status < 500 else f"internal error: {text}"
        response = _error(status, text)
        response.force_close()
        return response


class Service:
    """A running server: its listeners, batcher and metrics. Made by `start`."""

    def __init__(self, tok: Tokenizer, config: ServeConfig, tokenizer_source: str | None = None) -> None:
        self.config = config
        self.tok = tok
        self.calls = MergedCalls(tok, config.device)
        self.parse_encode = EncodeParser(tok, config.max_request_cells)
        self.parse_decode = DecodeParser(tok)
        self.metrics = Metrics(lambda: self.batcher.queued, config.max_queue)
        self.batcher = Batcher(self._run_batch, max_batch_bytes=config.max_batch_tokens,
                               max_delay_s=config.max_delay_ms / 1e3, workers=config.workers,
                               max_queue=config.max_queue, max_batch_cells=config.max_batch_cells,
                               metrics=self.metrics)
        self.connections = Connections(connection_limit(config.max_connections), config.idle_timeout_s,
                                       config.header_timeout_s, config.body_timeout_s)
        self.draining = False
        self.addresses: list[str] = []
        self._info = self._make_info(tokenizer_source)
        self._runner: web.AppRunner | None = None
        self._servers: list[asyncio.AbstractServer] = []  # the HTTP listeners
        self.binary = BinaryListener(self.batcher, self.metrics, self.parse_encode, self.connections,
                                     max_frame=config.max_request_bytes, timeout_s=config.timeout_s)
        self._own_sockets: list[tuple[str, int, int]] = []  # socket files we made: path, device, inode
        self._reads: set[asyncio.Future[bytes]] = set()  # bodies still arriving (a drain stops waiting for them)

    def _run_batch(self, key: tuple[str, Any], payloads: list[Any]) -> list[Any]:
        kind, options = key
        if kind == "encode":
            return self.calls.encode(options, payloads)
        return self.calls.decode(options, payloads)

    def _make_info(self, source: str | None) -> dict[str, Any]:
        report = info(self.tok, probe_cuda=self.config.device != "cpu")
        config = asdict(self.config)
        if not self.config.info_paths:  # where files are is nobody's business but the operator's
            source = _elide(source, 2)
            config["uds"], config["binary_uds"] = _elide(self.config.uds), _elide(self.config.binary_uds)
        return {"version": report["version"], "tokenizer": source or "embedded default",
                "vocab_size": self.tok.get_vocab_size(), "model_max_length": self.tok.model_max_length,
                "model_input_names": getattr(self.tok, "model_input_names", None), "backend": report["backend"],
                "threads": report["threads"], "config": config, "plan": report.get("plan"),
                "max_connections": self.connections.max_connections}

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=self.config.max_request_bytes,
                              middlewares=[self._observe])
        app.router.add_post("/encode", self._encode)
        app.router.add_post("/decode", self._decode)
        app.router.add_get("/info", self._info_handler)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        self.batcher.start()
        self.connections.start()
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                     shutdown_timeout=self.config.shutdown_timeout_s)
        await self._runner.setup()
        try:
            await self._listen()
        except BaseException:  # a port in use...: nothing left running
            await self.stop()
            raise

    async def _listen(self) -> None:
        assert self._runner is not None
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None

        def connection() -> _HttpConnection:
            return _HttpConnection(self, server, loop=loop, access_log=None, lingering_time=_LINGER_S,
                                   keepalive_timeout=self.config.idle_timeout_s)

        if self.config.port is not None:
            listener = await loop.create_server(connection, self.config.host, self.config.port)
            self._servers.append(listener)
            host, port = listener.sockets[0].getsockname()[:2]  # the port chosen when config.port is 0
            self.addresses.append(f"http://{host}:{port}")
        if self.config.uds is not None:
            claim_socket_path(self.config.uds)
            self._servers.append(await loop.create_unix_server(connection, self.config.uds))
            self._own(self.config.uds)
            self.addresses.append(f"unix://{self.config.uds}")
        if self.config.binary_port is not None:
            self.addresses.append(await self.binary.listen_tcp(self.config.host, self.config.binary_port))
        if self.config.binary_uds is not None:
            claim_socket_path(self.config.binary_uds)
            self.addresses.append(await self.binary.listen_unix(self.config.binary_uds))
            self._own(self.config.binary_uds)

    def _own(self, path: str) -> None:
        info = os.lstat(path)
        self._own_sockets.append((path, info.st_dev, info.st_ino))

    async def stop(self) -> None:
        """Graceful: stops listening; answers every request already read
        (those arriving meanwhile get 503 with Retry-After, bodies still
        arriving too); closes each connection once it is quiet (see
        `Connections.drain`), all of them after `shutdown_timeout_s`; then
        stops the workers."""
        self.draining = True
        self.binary.stop_listening()
        for listener in self._servers:
            listener.close()
        for read in list(self._reads):
            read.cancel()
        await self.connections.drain(self.config.shutdown_timeout_s)
        if self._runner is not None:
            await self._runner.cleanup()  # every connection is closed by now
            self._runner = None
        await self.batcher.drain()
        await self.binary.close()
        await self.connections.stop()
        for listener in self._servers:
            await listener.wait_closed()
        self._servers.clear()
        for path, device, inode in self._own_sockets:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            if (info.st_dev, info.st_ino) == (device, inode):  # still ours: not replaced meanwhile
                os.unlink(path)
        self._own_sockets.clear()

    # -- handlers -----------------------------------------------------------------------

    @web.middleware
    async def _observe(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Counts and times every request, turns every failure into a JSON
        error, and writes the answer before the connection counts as idle."""
        started = time.perf_counter()
        connection = request.protocol if isinstance(request.protocol, _HttpConnection) else None
        if connection is not None:
            connection.request_started()
        response: web.StreamResponse | None = None
        try:
            self.metrics.in_flight += 1
            try:
                response = await handler(request)
            except web.HTTPException as err:  # unknown route, wrong method, body too large
                allow = {"Allow": err.headers["Allow"]} if "Allow" in err.headers else None
                response = _error(err.status, err.reason, allow)
            except Exception as err:  # a bug: this request fails, the server goes on
                response = _error(500, f"internal error: {type(err).__name__}: {err}")
            finally:
                self.metrics.in_flight -= 1
            endpoint = request.path if request.path in _ENDPOINTS else "other"  # bounded label values
            self.metrics.request_done(endpoint, response.status, time.perf_counter() - started)
            try:
                await response.prepare(request)  # aiohttp would write it just after; done here, the answer
                await response.write_eof()  # is on its way before the connection may be closed as idle
            except ConnectionError:
                pass  # the client left; aiohttp ends the connection
            return response
        finally:
            if connection is not None:
                body_left = not request.content.is_eof()
                connection.request_done(body_left)
                if body_left and (response is None or response.keep_alive is False):  # a body abandoned (408,
                    connection.force_close()  # 503, unreadable): close now rather than read the rest away

    async def _read(self, request: web.Request) -> bytes | web.Response:
        """The body, or the error to answer: 503 when draining, 413 over the
        limit, 400 unreadable (bad Content-Encoding...), 408 not whole within
        `body_timeout_s` (then the connection closes)."""
        if self.draining:
            return _error(503, "the server is shutting down", _RETRY)
        try:
            if request.content.is_eof():  # the whole body is here (the usual case): no timer needed
                return await request.read()
            return await self._read_slowly(request)
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"the body is larger than the limit of {self.config.max_request_bytes} bytes "
                               "(--max-request-bytes)")
        except web.RequestPayloadError as err:  # not in its Content-Encoding, bad chunks...
            response = _error(400, f"the body could not be read: {err.__cause__ or err}")
            response.force_close()
            return response

    async def _read_slowly(self, request: web.Request) -> bytes | web.Response:
        read = asyncio.ensure_future(request.read())
        self._reads.add(read)
        try:
            await asyncio.wait((read,), timeout=self.config.body_timeout_s)
        finally:
            self._reads.discard(read)
        if read.done() and not read.cancelled():
            return read.result()
        read.cancel()
        if self.draining:
            response = _error(503, "the server is shutting down (the body had not arrived)", _RETRY)
        else:
            response = _error(408, f"the body did not arrive within {self.config.body_timeout_s} s "
                                   "(--body-timeout-s)")
        response.force_close()
        return response

    async def _submit(self, key: tuple[str, Any], payload: Any, size: int, texts: int,
                      cost: Cost = NO_COST) -> bytes | web.Response:
        try:
            future = self.batcher.submit(key, payload, size, texts, cost)
        except QueueFull as err:
            return _error(503, str(err), _RETRY)
        try:
            async with asyncio.timeout(self.config.timeout_s):  # cancels the future: a queued request is dropped
                return await future
        except TimeoutError:
            return _error(504, f"no answer within {self.config.timeout_s} s")
        except Exception as err:  # the library refused this input, or the device failed
            return _error(*failure(err))

    async def _encode(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        try:
            parsed = self.parse_encode(body)
        except BadRequest as err:
            return _error(err.status, str(err))
        packed = _wire.CONTENT_TYPE in request.headers.get("Accept", "")
        key = ("encode", parsed.key)
        result = await self._submit(key, EncodeJob(parsed, packed), len(body), len(parsed.texts), parsed.cost)
        if isinstance(result, web.Response):
            return result
        return web.Response(body=result, content_type=_wire.CONTENT_TYPE if packed else "application/json")

    async def _decode(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        try:
            parsed = self.parse_decode(body)
        except BadRequest as err:
            return _error(err.status, str(err))
        key = ("decode", (parsed.skip_special_tokens, parsed.clean_up_tokenization_spaces))
        result = await self._submit(key, parsed, len(body), len(parsed.ids))
        if isinstance(result, web.Response):
            return result
        return web.Response(body=result, content_type="application/json")

    async def _info_handler(self, request: web.Request) -> web.Response:
        addresses = self.addresses
        if not self.config.info_paths:
            addresses = [a if not a.startswith(("unix://", "gtok+unix://")) else
                         a.split("://")[0] + "://" + (_elide(a.split("://", 1)[1]) or "") for a in addresses]
        return _json({**self._info, "addresses": addresses})

    async def _health(self, request: web.Request) -> web.Response:
        if self.draining:
            return _error(503, "draining", _RETRY)
        return _json({"status": "ok", "queued": self.batcher.queued})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.metrics.render(), content_type="text/plain", charset="utf-8",
                            headers={"X-Prometheus-Format": "0.0.4"})


def claim_socket_path(path: str) -> None:
    """Makes `path` free for a new Unix socket: a socket file left by a server
    that was killed is removed; a socket a live server answers on, or anything
    that is not a socket (a regular file...), is refused with an `OSError`
    saying so, and left as it is."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        kind = "a regular file" if stat.S_ISREG(info.st_mode) else "a directory" if stat.S_ISDIR(info.st_mode) \
            else "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a socket"
        raise OSError(errno.EEXIST, f"{path} exists and is {kind}: refusing to replace it with a socket "
                                    "(remove it, or choose another path)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:  # nobody listens: left by a server that was killed
        os.unlink(path)
        return
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"another server is listening on {path}")


async def start(tok: Tokenizer, config: ServeConfig, tokenizer_source: str | None = None) -> Service:
    """Starts listening; `await service.stop()` stops gracefully."""
    service = Service(tok, config, tokenizer_source)
    await service.start()
    return service


def run(tok: Tokenizer, config: ServeConfig, tokenizer_source: str | None = None,
        ready: Callable[[Service], None] | None = None) -> None:
    """Serves until SIGINT or SIGTERM, then drains and returns (`gpu-tok serve`)."""

    async def main() -> None:
        service = await start(tok, config, tokenizer_source)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if ready is not None:
            ready(service)
        await stop.wait()
        await service.stop()

    _event_loop_runner()(main())


def _event_loop_runner() -> Callable[[Any], None]:
    """uvloop's runner when installed (a faster event loop), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run
    return uvloop.run


class BackgroundServer:
    """A server on its own event loop in a thread of this process (tests,
    notebooks, embedding): `with BackgroundServer(tok, config) as server: server.addresses`."""

    def __init__(self, tok: Tokenizer, config: ServeConfig, tokenizer_source: str | None = None) -> None:
        self._tok, self._config, self._source = tok, config, tokenizer_source
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gpu-tok-serve", daemon=True)
        self.service: Service | None = None

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        try:
            starting = start(self._tok, self._config, self._source)
            self.service = asyncio.run_coroutine_threadsafe(starting, self._loop).result()
        except BaseException:  # a port in use...: no thread left behind
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def addresses(self) -> list[str]:
        assert self.service is not None
        return self.service.addresses

    def stop(self) -> None:
        """Graceful stop (see `Service.stop`); then the thread ends."""
        if self.service is not None:
            asyncio.run_coroutine_threadsafe(self.service.stop(), self._loop).result()
            self.service = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        if not self._loop.is_closed():
            self._loop.close()
