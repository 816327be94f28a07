"""Open connections of both listeners (HTTP and binary): their number, their
timeouts, and their closing when the server drains.

- At most `max_connections` at once. One more arrives: the connection that
  has waited longest without a request being handled (idle, or part-way
  through a request head or frame) is closed to make room, as nginx drains
  keep-alive connections; when every connection has a request in progress,
  the newcomer is refused (HTTP: 503 with Retry-After; binary: closed).
  Idle sockets can thus never lock clients out, nor exhaust the process's
  file descriptors.
- Timeouts, checked by one sweep over the connections (not a timer each):
  `idle_timeout_s` with nothing to do (no request in progress, no byte of the
  next one) since it opened or since its last answer; `header_timeout_s` from
  the first byte of an HTTP request head to its end (slow-loris);
  `body_timeout_s` for an HTTP body (in the handler) or a binary frame, from
  its start to its end.
- Draining (`drain`): every connection stays open until it has no request
  in progress and has sent nothing for `DRAIN_QUIET_S`, so a request already
  on its way is read and answered (503 with Retry-After) instead of meeting a
  closed socket; at the drain timeout whatever is left is closed.

A connection is any object with the `Watched` attributes and methods.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

DRAIN_QUIET_S = 0.5  # a connection silent this long while draining is closed (a loopback or LAN round trip is far less)


class Watched:
    """What `Connections` reads and calls on a connection."""

    __slots__ = ()
    busy: int  # requests read and not yet answered
    waiting_since: float  # time.monotonic() when it last had nothing to do: opened, or answered its last request
    partial_since: float | None  # first byte of a request (head or frame) not yet whole
    last_read: float

    def check(self, now: float) -> None:
        """Closes this connection if one of its timeouts has passed."""
        raise NotImplementedError

    def shut(self) -> None:
        """Closes it now (answers already written leave first)."""
        raise NotImplementedError


class Connections:
    def __init__(self, max_connections: int, idle_timeout_s: float, header_timeout_s: float,
                 body_timeout_s: float) -> None:
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self.header_timeout_s = header_timeout_s
        self.body_timeout_s = body_timeout_s
        self.open: dict[Watched, None] = {}  # in the order they came
        self.evicted = 0
        self.refused = 0
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    def admit(self, connection: Watched) -> bool:
        """Registers a new connection, closing an idle one when at the limit;
        False: every open connection is busy, refuse this one."""
        if len(self.open) >= self.max_connections:
            idle = [c for c in self.open if not c.busy]
            if not idle:
                self.refused += 1
                return False
            victim = min(idle, key=lambda c: c.waiting_since)
            self.open.pop(victim, None)
            self.evicted += 1
            victim.shut()
        self.open[connection] = None
        return True

    def remove(self, connection: Watched) -> None:
        self.open.pop(connection, None)

    async def _sweep_forever(self) -> None:
        interval = min(1.0, max(0.05, min(self.idle_timeout_s, self.header_timeout_s, self.body_timeout_s) / 4))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for connection in list(self.open):
                connection.check(now)

    async def drain(self, timeout_s: float) -> None:
        """Closes each connection once it has no request in progress and has
        been quiet for `DRAIN_QUIET_S`; after `timeout_s`, closes the rest."""
        started = time.monotonic()
        deadline = started + timeout_s
        while self.open and time.monotonic() < deadline:
            now = time.monotonic()
            for connection in list(self.open):
                quiet_since = max(connection.last_read, connection.waiting_since, started)
                if not connection.busy and now - quiet_since >= DRAIN_QUIET_S:
                    self.open.pop(connection, None)
                    connection.shut()
            await asyncio.sleep(0.02)
        for connection in list(self.open):
            connection.shut()
        self.open.clear()
