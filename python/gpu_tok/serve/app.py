"""The HTTP side of `gpu-tok serve`: aiohttp handlers, listeners (TCP and Unix
socket), limits, and the start / graceful stop of the whole service (its
binary listeners, `binary.py`, included).

Handlers only read, check and answer; the work goes through the `Batcher` to
the `Engine` on worker threads. Every error is a JSON body
`{"error": "...", "status": N}`: 400 malformed request, 404/405 unknown route,
413 body over `max_request_bytes`, 503 queue full or draining (with
Retry-After), 504 past `timeout_s`, 500 a bug (the server keeps running).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from aiohttp import web

from .. import _wire
from .._errors import EncodingError, GpuTokError
from ..tokenizer import Tokenizer
from .batcher import Batcher, QueueFull
from .binary import BinaryListener
from .engine import EncodeJob, Engine
from .metrics import Metrics
from .protocol import BadRequest, EncodeParser, parse_decode

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_ENDPOINTS = ("/encode", "/decode", "/info", "/health", "/metrics")


@dataclass(frozen=True)
class ServeConfig:
    """The settings of `gpu-tok serve` (its options, same names and defaults)."""

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
    shutdown_timeout_s: float = 30.0


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    body = orjson.dumps({"error": message, "status": status})
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


def _json(value: Any) -> web.Response:
    return web.Response(body=orjson.dumps(value), content_type="application/json")


class Service:
    """A running server: its listeners, batcher and metrics. Made by `start`."""

    def __init__(self, tok: Tokenizer, config: ServeConfig, tokenizer_source: str | None = None) -> None:
        self.config = config
        self.tok = tok
        self.engine = Engine(tok, config.device)
        self.parse_encode = EncodeParser(tok)
        self.metrics = Metrics(lambda: self.batcher.queued, config.max_queue)
        self.batcher = Batcher(self._run_batch, max_batch_bytes=config.max_batch_tokens,
                               max_delay_s=config.max_delay_ms / 1e3, workers=config.workers,
                               max_queue=config.max_queue, metrics=self.metrics)
        self.draining = False
        self.addresses: list[str] = []
        self._info = self._make_info(tokenizer_source)
        self._runner: web.AppRunner | None = None
        self.binary = BinaryListener(self)
        self._own_sockets: list[str] = []  # socket files that are ours to remove once we listen on them

    def _run_batch(self, key: tuple[str, Any], payloads: list[Any]) -> list[Any]:
        kind, options = key
        if kind == "encode":
            return self.engine.encode(options, payloads)
        return self.engine.decode(options, payloads)

    def _make_info(self, source: str | None) -> dict[str, Any]:
        import gpu_tok

        report = gpu_tok.info(self.tok, probe_cuda=self.config.device != "cpu")
        return {"version": report["version"], "tokenizer": source or "embedded default",
                "vocab_size": self.tok.get_vocab_size(), "model_max_length": self.tok.model_max_length,
                "model_input_names": getattr(self.tok, "model_input_names", None), "backend": report["backend"],
                "threads": report["threads"], "config": asdict(self.config), "plan": report.get("plan")}

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=self.config.max_request_bytes,
                              middlewares=[self._observe])
        app.router.add_post("/encode", self._encode)
        app.router.add_post("/decode", self._decode)
        app.router.add_get("/info", self._info_handler)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        app.on_shutdown.append(self._on_shutdown)
        self.batcher.start()
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
        if self.config.port is not None:
            await web.TCPSite(self._runner, self.config.host, self.config.port).start()
            host, port = self._runner.addresses[-1][:2]  # the port chosen when config.port is 0
            self.addresses.append(f"http://{host}:{port}")
        if self.config.uds is not None:
            _remove_stale_socket(self.config.uds)
            await web.UnixSite(self._runner, self.config.uds).start()
            self._own_sockets.append(self.config.uds)
            self.addresses.append(f"unix://{self.config.uds}")
        if self.config.binary_port is not None:
            self.addresses.append(await self.binary.listen_tcp(self.config.host, self.config.binary_port))
        if self.config.binary_uds is not None:
            _remove_stale_socket(self.config.binary_uds)
            self.addresses.append(await self.binary.listen_unix(self.config.binary_uds))
            self._own_sockets.append(self.config.binary_uds)

    async def stop(self) -> None:
        """Graceful: stops listening, answers everything queued or in flight
        (up to `shutdown_timeout_s`), then stops the workers."""
        self.binary.stop_listening()  # open binary connections get 503 from now on
        if self._runner is not None:
            await self._runner.cleanup()  # closes listeners, waits for handlers (which wait for the batcher)
            self._runner = None
        await self.batcher.drain()
        await self.binary.close(self.config.shutdown_timeout_s)  # answers written, then connections closed
        for path in self._own_sockets:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        self._own_sockets.clear()

    async def _on_shutdown(self, app: web.Application) -> None:
        self.draining = True  # requests still arriving on open connections get 503

    # -- handlers -----------------------------------------------------------------------

    @web.middleware
    async def _observe(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Counts and times every request, and turns every failure into a JSON error."""
        started = time.perf_counter()
        self.metrics.in_flight += 1
        try:
            response = await handler(request)
        except web.HTTPException as err:  # unknown route, wrong method, body too large
            response = _error(err.status, err.reason, {"Allow": err.headers["Allow"]} if "Allow" in err.headers
                              else None)
        except Exception as err:  # a bug: this request fails, the server goes on
            response = _error(500, f"internal error: {type(err).__name__}: {err}")
        finally:
            self.metrics.in_flight -= 1
        endpoint = request.path if request.path in _ENDPOINTS else "other"  # bounded label values
        self.metrics.request_done(endpoint, response.status, time.perf_counter() - started)
        return response

    async def _read(self, request: web.Request) -> bytes | web.Response:
        if self.draining:
            return _error(503, "the server is shutting down", {"Retry-After": "1"})
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"the body is larger than the limit of {self.config.max_request_bytes} bytes")

    async def _submit(self, key: tuple[str, Any], payload: Any, size: int, texts: int) -> bytes | web.Response:
        try:
            future = self.batcher.submit(key, payload, size, texts)
        except QueueFull as err:
            return _error(503, str(err), {"Retry-After": "1"})
        try:
            async with asyncio.timeout(self.config.timeout_s):  # cancels the future: a queued request is dropped
                return await future
        except TimeoutError:
            return _error(504, f"no answer within {self.config.timeout_s} s")
        except (ValueError, TypeError, EncodingError) as err:  # the library refused this input
            return _error(400, str(err))
        except GpuTokError as err:  # the device failed (CudaError...): not the client's fault
            return _error(500, f"{type(err).__name__}: {err}")

    async def _encode(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        try:
            parsed = self.parse_encode(body)
        except BadRequest as err:
            return _error(400, str(err))
        packed = _wire.CONTENT_TYPE in request.headers.get("Accept", "")
        key = ("encode", parsed.key)
        result = await self._submit(key, EncodeJob(parsed, packed), len(body), len(parsed.texts))
        if isinstance(result, web.Response):
            return result
        return web.Response(body=result, content_type=_wire.CONTENT_TYPE if packed else "application/json")

    async def _decode(self, request: web.Request) -> web.Response:
        body = await self._read(request)
        if isinstance(body, web.Response):
            return body
        try:
            parsed = parse_decode(body)
        except BadRequest as err:
            return _error(400, str(err))
        key = ("decode", (parsed.skip_special_tokens, parsed.clean_up_tokenization_spaces))
        result = await self._submit(key, parsed, len(body), len(parsed.ids))
        if isinstance(result, web.Response):
            return result
        return web.Response(body=result, content_type="application/json")

    async def _info_handler(self, request: web.Request) -> web.Response:
        return _json({**self._info, "addresses": self.addresses})

    async def _health(self, request: web.Request) -> web.Response:
        if self.draining:
            return _error(503, "draining", {"Retry-After": "1"})
        return _json({"status": "ok", "queued": self.batcher.queued})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.metrics.render(), content_type="text/plain", charset="utf-8",
                            headers={"X-Prometheus-Format": "0.0.4"})


def _remove_stale_socket(path: str) -> None:
    """Removes a socket file left by a server that was killed; refuses to take
    over one that a live server still answers on."""
    if not os.path.exists(path):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        return
    except OSError:
        return  # not a socket, no permission...: binding will say why
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

    def __init__(self, tok: Tokenizer, config: ServeConfig) -> None:
        self._tok, self._config = tok, config
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gpu-tok-serve", daemon=True)
        self.service: Service | None = None

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        try:
            self.service = asyncio.run_coroutine_threadsafe(start(self._tok, self._config), self._loop).result()
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
