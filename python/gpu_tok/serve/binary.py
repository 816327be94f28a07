"""The binary framed protocol of `gpu-tok serve` (`--binary-port`, `--binary-uds`):
`/encode` without HTTP, for clients that send many short requests.

Frames are those of `gpu_tok.serve._frames` (docs/SERVE.md, "Binary protocol"). Each
request goes through the service's `Batcher` like an HTTP one (same groups,
so HTTP and binary requests with equal options share engine calls; same
queue limit, metrics and graceful drain) and is answered in the packed layout
of `gpu_tok.serve._wire`, or with an error frame mirroring HTTP's JSON error.

The per-request path is kept short, since the point of this listener is that
it costs less than HTTP: frames are cut from the received bytes with
`struct`, an options header seen before is looked up rather than parsed,
an answer is written from the batch's done-callback (no task per request),
answers for one connection that finish together leave in one write, and
timeouts are one sweep over a deque in arrival order rather than a timer per
request.

A malformed frame (bad header, options, lengths, UTF-8) gets a 400 frame and
the connection goes on; so does a request whose output is over its budget
(413). A frame that breaks the framing (a length too small to hold a request
id, or over `max_request_bytes`: 413 with its id) ends the connection: it
stops reading, writes the answers of the requests it already took, then
closes. So does a frame not whole within `body_timeout_s` of its first byte
(408, with its id when known). Other connections are not affected.

Connections are counted, timed out when idle and closed on a drain by
`connections.Connections`, with the HTTP ones; one over the limit while all
are busy is closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections import deque
from functools import partial
from typing import Any, cast

import orjson

from ._frames import ANSWER_HEAD, FLAG_PAIRS, LENGTH_AND_ID, lengths_struct
from .batcher import Batcher, QueueFull
from .calls import EncodeJob
from .connections import Connections, Watched
from .metrics import Metrics
from .protocol import BadRequest, EncodeParser, EncodeRequest, failure

ENDPOINT = "binary"  # the endpoint label of its requests in /metrics
_BODY_HEAD = struct.Struct("<IHH")  # B, O, flags: the request head after L and the id
_OPTIONS_CACHE = 4096


def error_frame(request_id: int, status: int, message: str) -> bytes:
    error: dict[str, Any] = {"error": message, "status": status}
    if status == 503:
        error["retry_after"] = 1
    body = orjson.dumps(error)
    return ANSWER_HEAD.pack(8 + len(body), request_id, status) + body


class BinaryListener:
    """The binary listeners of one service and their open connections: the
    service's batcher, metrics, request parser and connections are passed in
    (the service owns this listener; this module does not import it)."""

    def __init__(self, batcher: Batcher, metrics: Metrics, parse_options: EncodeParser, connections: Connections,
                 *, max_frame: int, timeout_s: float) -> None:
        self.batcher = batcher
        self.metrics = metrics
        self.parse_options = parse_options
        self.max_frame = max_frame
        self.timeout_s = timeout_s
        self.draining = False
        self.watch = connections  # the limit, timeouts and drain of every connection
        self.connections: set[_Connection] = set()
        self._servers: list[asyncio.AbstractServer] = []
        self._options: dict[tuple[bytes, bool], tuple[tuple[str, Any], ...]] = {}
        self._deadlines: deque[tuple[float, asyncio.Future[Any]]] = deque()  # arrival order = deadline order
        self._sweeper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unflushed: list[_Connection] = []  # connections with answers to write in this loop iteration

    # -- lifecycle ----------------------------------------------------------------------

    async def listen_tcp(self, host: str, port: int) -> str:
        server = await asyncio.get_running_loop().create_server(lambda: _Connection(self), host, port)
        self._listening(server)
        bound_host, bound_port = server.sockets[0].getsockname()[:2]
        return f"gtok://{bound_host}:{bound_port}"

    async def listen_unix(self, path: str) -> str:
        server = await asyncio.get_running_loop().create_unix_server(lambda: _Connection(self), path)
        self._listening(server)
        return f"gtok+unix://{path}"

    def _listening(self, server: asyncio.AbstractServer) -> None:
        self._servers.append(server)
        if self._sweeper is None:
            self._loop = asyncio.get_running_loop()
            self._sweeper = self._loop.create_task(self._expire_forever())

    def unflushed(self, connection: _Connection) -> None:
        """`connection` has answers to write: they leave at the end of this loop
        iteration, with those of every other connection, one write each."""
        if not self._unflushed:
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._flush)
        self._unflushed.append(connection)

    def _flush(self) -> None:
        connections, self._unflushed = self._unflushed, []
        for connection in connections:
            connection.flush()

    def stop_listening(self) -> None:
        """Graceful stop, first step: no new connections, and requests arriving
        on open ones get 503 (those already taken are still answered; the
        service's `Connections.drain` closes each connection once it is quiet)."""
        self.draining = True
        for server in self._servers:
            server.close()

    async def close(self) -> None:
        """Last step, once the connections are closed and the batcher drained."""
        for connection in list(self.connections):
            connection.abort()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    async def _expire_forever(self) -> None:
        """Cancels the requests past `timeout_s` (they are answered 504); a
        cancelled request still queued is dropped by the batcher, as over HTTP."""
        interval = min(0.05, self.timeout_s / 4)
        deadlines = self._deadlines
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            while deadlines and (deadlines[0][1].done() or deadlines[0][0] <= now):
                _, future = deadlines.popleft()
                future.cancel()  # no-op when answered

    # -- one request ----------------------------------------------------------------------

    def request(self, connection: _Connection, request_id: int, data: bytes, start: int, end: int) -> None:
        """The frame `data[start:end]` (from its B field on) of request `request_id`."""
        started = time.perf_counter()
        metrics = self.metrics
        metrics.in_flight += 1
        if self.draining:
            return self._refuse(connection, request_id, started, 503, "the server is shutting down")
        try:
            request = self.parse(data, start, end)
        except BadRequest as err:
            return self._refuse(connection, request_id, started, err.status, str(err))
        try:
            future = self.batcher.submit(("encode", request.key), EncodeJob(request, True), end - start,
                                         len(request.texts), request.cost)
        except QueueFull as err:
            return self._refuse(connection, request_id, started, 503, str(err))
        connection.busy += 1
        self._deadlines.append((time.monotonic() + self.timeout_s, future))
        future.add_done_callback(partial(self._answer, connection, request_id, started))

    def _answer(self, connection: _Connection, request_id: int, started: float, future: asyncio.Future[Any]) -> None:
        try:
            body = future.result()
        except asyncio.CancelledError:  # by the timeout sweep
            status = 504
            frame = error_frame(request_id, 504, f"no answer within {self.timeout_s} s")
        except Exception as err:
            status, message = failure(err)
            frame = error_frame(request_id, status, message)
        else:
            status = 200
            frame = ANSWER_HEAD.pack(8 + len(body), request_id, 200) + body
        connection.answered()
        connection.send(frame)
        self.metrics.in_flight -= 1
        self.metrics.request_done(ENDPOINT, status, time.perf_counter() - started)

    def _refuse(self, connection: _Connection, request_id: int, started: float, status: int, message: str) -> None:
        connection.send(error_frame(request_id, status, message))
        self.metrics.in_flight -= 1
        self.metrics.request_done(ENDPOINT, status, time.perf_counter() - started)

    def parse(self, data: bytes, start: int, end: int) -> EncodeRequest:
        """A request frame's B, O, flags, options, lengths and texts (`BadRequest`
        names what is wrong)."""
        if end - start < _BODY_HEAD.size:
            raise BadRequest(f"a request frame of {end - start + 8} bytes: the smallest is {_BODY_HEAD.size + 8}")
        count, options_size, flags = _BODY_HEAD.unpack_from(data, start)
        if flags & ~FLAG_PAIRS:
            raise BadRequest(f"unknown flags {flags:#x} in the frame header (only bit 0, pairs, is defined)")
        pairs = bool(flags & FLAG_PAIRS)
        at = start + _BODY_HEAD.size
        options_end = at + options_size
        if options_end > end:
            raise BadRequest(f"the options header ({options_size} bytes) runs past the end of the frame")
        options_key = (data[at:options_end], pairs)
        options = self._options.get(options_key)
        if options is None:
            if options_size:
                options = self.parse_options.options_json(options_key[0], pairs)
            else:
                options = self.parse_options.options({}, pairs)
            if len(self._options) >= _OPTIONS_CACHE:  # bounded, whatever option sets clients invent
                self._options.clear()
            self._options[options_key] = options
        n = 2 * count if pairs else count
        lengths_end = options_end + 4 * n
        if lengths_end > end:
            raise BadRequest(f"the frame is too short for the byte lengths of its {count} texts")
        lengths = lengths_struct(n).unpack_from(data, options_end)
        if lengths_end + sum(lengths) != end:
            raise BadRequest(f"the texts' byte lengths add up to {sum(lengths)}, the frame holds "
                             f"{end - lengths_end} bytes after them")
        strings = []
        at = lengths_end
        for i, length in enumerate(lengths):
            try:
                strings.append(data[at:at + length].decode("utf-8"))
            except UnicodeDecodeError as err:
                name = f"texts[{i}]" if i < count else f"pairs[{i - count}]"
                raise BadRequest(f"{name} is not valid UTF-8: {err.reason} at byte {err.start}") from None
            at += length
        if pairs:
            return self.parse_options.request(strings[:count], strings[count:], options, sum(lengths))
        return self.parse_options.request(strings, None, options, sum(lengths))


class _Connection(asyncio.Protocol, Watched):
    """One client connection: cuts frames out of the byte stream, and writes
    the answers that are ready (all of one loop iteration in one write)."""

    def __init__(self, listener: BinaryListener) -> None:
        self.listener = listener
        self.transport: asyncio.Transport | None = None
        self.busy = 0  # requests taken and not yet answered
        self.waiting_since = self.last_read = time.monotonic()
        self.partial_since: float | None = None  # the first byte of the frame in _chunks
        self._chunks: list[bytes] = []  # the start of a frame not yet whole
        self._have = 0
        self._need = LENGTH_AND_ID.size  # bytes in _chunks before parsing is worth trying again
        self._out: list[bytes] = []
        self._broken = False  # framing lost: read nothing more, close once answered
        self._closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses of asyncio's
        if not self.listener.watch.admit(self):  # every connection busy: no room for this one
            self._closed = True
            self.transport.close()
            return
        self.listener.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._out.clear()
        self.listener.connections.discard(self)
        self.listener.watch.remove(self)

    def answered(self) -> None:
        self.busy -= 1
        if not self.busy:
            self.waiting_since = time.monotonic()

    def check(self, now: float) -> None:
        watch = self.listener.watch
        if self.partial_since is not None and now - self.partial_since > watch.body_timeout_s:
            head = b"".join(self._chunks)[:LENGTH_AND_ID.size]
            request_id = LENGTH_AND_ID.unpack(head)[1] if len(head) == LENGTH_AND_ID.size else None
            self._break(request_id, 408, f"the frame did not arrive whole within {watch.body_timeout_s} s "
                                         "(--body-timeout-s)")
            self.flush()
        elif not self.busy and self.partial_since is None and now - self.waiting_since > watch.idle_timeout_s:
            self.close()

    def shut(self) -> None:
        self.close()

    def data_received(self, data: bytes) -> None:
        if self._broken or self._closed:
            return
        now = self.last_read = time.monotonic()
        if self._chunks:
            self._chunks.append(data)
            self._have += len(data)
            if self._have < self._need:
                return
            data = b"".join(self._chunks)
            self._chunks.clear()
        listener = self.listener
        limit = listener.max_frame
        at, size = 0, len(data)
        need = LENGTH_AND_ID.size
        while size - at >= LENGTH_AND_ID.size:
            length, request_id = LENGTH_AND_ID.unpack_from(data, at)
            if length < 4:
                return self._break(None, 400, f"frame length {length} cannot hold a request id")
            if length > limit:
                return self._break(request_id, 413, f"the frame ({length} bytes) is larger than the limit of "
                                                    f"{limit} bytes")
            end = at + 4 + length
            if end > size:
                need = 4 + length
                break
            try:
                listener.request(self, request_id, data, at + 8, end)
            except Exception as err:  # a bug: this request fails, the connection and the server go on
                self.send(error_frame(request_id, 500, f"internal error: {type(err).__name__}: {err}"))
            at = end
        if at < size:
            self._chunks.append(data[at:])
            self._have = size - at
            self._need = need
            if at or self.partial_since is None:  # a new frame starts in this data
                self.partial_since = now
        else:
            self.partial_since = None

    def _break(self, request_id: int | None, status: int, message: str) -> None:
        """Framing is lost: answer this frame if it has an id, read no more, and
        close once the requests already taken are answered."""
        self._broken = True
        self._chunks.clear()
        self.partial_since = None
        if self.transport is not None:
            self.transport.pause_reading()
        if request_id is not None:
            self.send(error_frame(request_id, status, message))
        self.listener.metrics.request_done(ENDPOINT, status, 0.0)
        if not self._out:
            self._close_if_done()

    def send(self, frame: bytes) -> None:
        if self._closed:
            return
        if not self._out:
            self.listener.unflushed(self)
        self._out.append(frame)

    def flush(self) -> None:
        if self._closed or self.transport is None:
            return
        out = self._out
        if out:
            self.transport.write(out[0] if len(out) == 1 else b"".join(out))
            out.clear()
        self._close_if_done()

    def _close_if_done(self) -> None:
        if self._broken and not self.busy and self.transport is not None:
            self.transport.close()  # after the buffered answers are written

    def close(self) -> None:
        self._broken = True
        self.flush()
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

