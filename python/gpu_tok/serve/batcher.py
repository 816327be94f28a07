"""Dynamic batching: requests that arrive close together, with the same options,
become one engine call.

A request waits in the group of its key (its options). The group whose oldest
request came first is sent to a worker thread when that request has waited
`max_delay` or the group holds `max_batch_bytes` of request bodies or
`max_batch_cells` of output (`protocol.Cost`), whichever comes first; it is
sent only when a worker is free, so under load requests pile up while the
engine is busy and the next call takes them all (the batch grows with the
load, the delay only matters when the server is idle). A call takes requests
in arrival order while both budgets hold (a request alone always runs): the
output of merged requests padded to their longest row is all their rows x the
widest, which the cell budget bounds.

The queue is bounded (`QueueFull` past `max_queue` waiting requests: the
server answers 503). Everything but the engine call runs on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .metrics import Metrics
from .protocol import NO_COST, Cost, merged_cells

# key, payloads -> one outcome per payload: a response body or the exception to answer with
RunBatch = Callable[[Any, list[Any]], list[Any]]


class QueueFull(Exception):
    """The queue holds `max_queue` requests (or the server is draining): answer 503."""


@dataclass(slots=True)
class _Queued:
    payload: Any
    size: int
    texts: int
    future: asyncio.Future[Any]
    arrived: float
    cost: Cost


@dataclass(slots=True)
class _Budget:
    """What a batch holds: request bytes and output cells (`merged_cells`)."""

    size: int = 0
    cells: int = 0
    rows: int = 0
    widest: int | None = None

    def add(self, job: _Queued, sign: int = 1) -> None:
        self.size += sign * job.size
        self.cells += sign * job.cost.cells
        self.rows += sign * job.cost.rows
        if sign > 0 and job.cost.widest is not None:  # a group's widest only grows while it waits
            self.widest = max(self.widest or 0, job.cost.widest)

    def cells_with(self, job: _Queued) -> int:
        """The batch's cells once `job` is added."""
        widest = self.widest if job.cost.widest is None else max(self.widest or 0, job.cost.widest)
        return merged_cells(self.rows + job.cost.rows, widest, self.cells + job.cost.cells)


@dataclass(slots=True)
class _Group:
    jobs: deque[_Queued] = field(default_factory=deque)
    budget: _Budget = field(default_factory=_Budget)


class Batcher:
    def __init__(self, run_batch: RunBatch, *, max_batch_bytes: int, max_delay_s: float, workers: int,
                 max_queue: int, max_batch_cells: int = 2**62, metrics: Metrics | None = None) -> None:
        self._run_batch = run_batch
        self._max_batch_bytes = max_batch_bytes
        self._max_batch_cells = max_batch_cells
        self._max_delay_s = max_delay_s
        self._max_queue = max_queue
        self._metrics = metrics
        self._groups: dict[Hashable, _Group] = {}
        self._queued = 0
        self._accepting = True
        self._wakeup = asyncio.Event()
        self._free_workers = asyncio.Semaphore(workers)
        self._executor = ThreadPoolExecutor(workers, thread_name_prefix="gpu-tok-engine")
        self._running: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def queued(self) -> int:
        """Requests waiting for an engine call."""
        return self._queued

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_task = self._loop.create_task(self._dispatch_forever())

    def submit(self, key: Hashable, payload: Any, size: int, texts: int, cost: Cost = NO_COST) -> asyncio.Future[Any]:
        """Queues one request (`size` bytes, `cost` its output bound); its future
        gets the outcome. Cancel the future to give up on it (a timeout): a
        request still queued is then dropped."""
        if not self._accepting:
            raise QueueFull("the server is shutting down")
        if self._queued >= self._max_queue:
            raise QueueFull(f"the queue is full ({self._max_queue} requests waiting)")
        future = (self._loop or asyncio.get_running_loop()).create_future()
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group()
            self._wakeup.set()  # a group to wait for (the dispatcher may be waiting for any)
        job = _Queued(payload, size, texts, future, time.monotonic(), cost)
        group.jobs.append(job)
        group.budget.add(job)
        self._queued += 1
        if self._full(group.budget):
            self._wakeup.set()  # due now; otherwise the dispatcher's timer for the oldest group stands
        return future

    def _full(self, budget: _Budget) -> bool:
        cells = merged_cells(budget.rows, budget.widest, budget.cells)
        return budget.size >= self._max_batch_bytes or cells >= self._max_batch_cells

    async def drain(self) -> None:
        """Refuses new requests, answers every queued one, then stops the workers."""
        self._accepting = False
        self._wakeup.set()
        if self._loop_task is not None:
            await self._loop_task
        while self._running:
            await asyncio.gather(*self._running)
        self._executor.shutdown(wait=True)

    # -- the dispatch loop -----------------------------------------------------------

    async def _dispatch_forever(self) -> None:
        while True:
            await self._free_workers.acquire()
            batch = await self._next_batch()
            if batch is None:  # drained
                self._free_workers.release()
                return
            task = asyncio.get_running_loop().create_task(self._run(*batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _next_batch(self) -> tuple[Hashable, list[_Queued]] | None:
        """Waits until a group is due, and takes up to `max_batch_bytes` of it."""
        while True:
            self._drop_cancelled()
            if not self._groups:
                if not self._accepting:
                    return None
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            key, group = min(self._groups.items(), key=lambda item: item[1].jobs[0].arrived)
            wait = group.jobs[0].arrived + self._max_delay_s - time.monotonic()
            if wait > 0 and not self._full(group.budget) and self._accepting:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), wait)
                except TimeoutError:
                    pass
                continue
            return key, self._take(key, group)

    def _take(self, key: Hashable, group: _Group) -> list[_Queued]:
        jobs: list[_Queued] = []
        batch = _Budget()
        while group.jobs and (not jobs or (batch.size + group.jobs[0].size <= self._max_batch_bytes
                                           and batch.cells_with(group.jobs[0]) <= self._max_batch_cells)):
            job = group.jobs.popleft()
            group.budget.add(job, -1)
            self._queued -= 1
            if not job.future.done():  # skip requests that timed out while queued
                jobs.append(job)
                batch.add(job)
        if not group.jobs:
            del self._groups[key]
        else:
            group.budget.widest = max((j.cost.widest for j in group.jobs if j.cost.widest is not None), default=None)
        return jobs

    def _drop_cancelled(self) -> None:
        for key, group in list(self._groups.items()):
            while group.jobs and group.jobs[0].future.done():
                group.budget.add(group.jobs.popleft(), -1)
                self._queued -= 1
            if not group.jobs:
                del self._groups[key]

    async def _run(self, key: Hashable, jobs: list[_Queued]) -> None:
        try:
            if not jobs:
                return
            started = time.perf_counter()
            loop = asyncio.get_running_loop()
            payloads = [job.payload for job in jobs]
            try:
                outcomes = await loop.run_in_executor(self._executor, self._run_batch, key, payloads)
            except Exception as err:  # a bug in the engine: these requests fail, the server lives
                outcomes = [err] * len(jobs)
            if self._metrics is not None:
                self._metrics.batch_done(len(jobs), sum(job.texts for job in jobs), time.perf_counter() - started)
            for job, outcome in zip(jobs, outcomes, strict=True):
                if job.future.done():
                    continue
                if isinstance(outcome, Exception):
                    job.future.set_exception(outcome)
                else:
                    job.future.set_result(outcome)
        finally:
            self._free_workers.release()
