"""`gpu-tok serve` under load, in one run: dynamic batching on vs off over HTTP and
over the binary framed protocol, a naive per-request `tokenizers` server, and
what each transport costs alone (a server answering a constant).

Rows, each server in its own process on loopback (TCP):

- binary, batching on / off: `gpu-tok serve --binary-port` with its defaults,
  and with `--max-batch-tokens 1 --max-delay-ms 0` (one engine call per
  request: the server's off switch), on its binary port;
- binary floor: a raw asyncio.Protocol server on uvloop that cuts the same
  frames and answers each with a constant frame (the transport's own cost);
- HTTP, batching on / off: the same two servers' HTTP port;
- naive tokenizers server: one `tokenizers` call per request on the event
  loop, on the same HTTP stack (aiohttp + uvloop + orjson);
- HTTP floor: the same stack answering a constant.

The 64 clients run in `--client-procs` processes of their own, each client
one connection with one request in flight, sending requests of one or two
corpus sentences. They are `RawClient`s: prebuilt requests (HTTP/1.1
keep-alive, or frames) written from the protocol's callbacks, answers kept as
bytes and decoded only after the clock stops, so the load generator takes as
little of the box as a Python client can (`--library-clients`: drive with
`gpu_tok.client.AsyncClient` / `AsyncBinaryClient` instead). Requests/s is
over the first client's start to the last one's end, p50/p99 over every
request's latency as its client saw it. Every answer's input_ids are checked
against the library call. The rows are measured in `--rounds` interleaved
rounds and each one's median round is reported, with the requests per engine
call of that round (from the server's /metrics).

    python benches/serve_bench.py [--tokenizer DIR] [--clients 64] [--requests 200] [--rounds 5]
                                  [--client-procs 1] [--library-clients] [--json benches/results/serve.json]

`--requests` is per client (the issue's full load test: --requests 2000).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))


# -- the peers: a naive `tokenizers` server, and the two transports' floors -----------------

def naive_server(tokenizer_dir: str, port: int, floor: bool = False) -> None:
    """The naive peer; `floor`: answers a constant without tokenizing (the HTTP stack's own cost)."""
    import orjson
    import tokenizers
    import uvloop
    from aiohttp import web

    tok = tokenizers.Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    async def encode(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        if floor:
            return web.Response(body=b'{"input_ids": []}', content_type="application/json")
        encodings = tok.encode_batch(body["texts"])
        out = {"input_ids": [e.ids for e in encodings], "attention_mask": [e.attention_mask for e in encodings]}
        return web.Response(body=orjson.dumps(out), content_type="application/json")

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/encode", encode)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        host, bound = runner.addresses[0][:2]
        print(f"gpu-tok serve: listening on http://{host}:{bound}", flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


def binary_floor_server(port: int) -> None:
    """Cuts request frames (gpu_tok._frames) out of the stream and answers each
    with a constant answer frame (one empty row): the binary transport's own cost."""
    import numpy as np
    import uvloop
    from gpu_tok.serve import _frames, _wire

    answer = _wire.pack(np.zeros(2, dtype=np.int64), {"input_ids": np.zeros(0, dtype=np.int32)})
    length_and_id = _frames.LENGTH_AND_ID

    class Floor(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses of asyncio's
            self.rest = b""

        def data_received(self, data: bytes) -> None:
            if self.rest:
                data = self.rest + data
            at, size, out = 0, len(data), []
            while size - at >= 8:
                length, request_id = length_and_id.unpack_from(data, at)
                if size - at - 4 < length:
                    break
                out.append(_frames.answer_frame(request_id, 200, answer))
                at += 4 + length
            self.rest = data[at:]
            if out:
                self.transport.write(b"".join(out))

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Floor, "127.0.0.1", port)
        host, bound = server.sockets[0].getsockname()[:2]
        print(f"gpu-tok serve: listening on gtok://{host}:{bound}", flush=True)
        await asyncio.Event().wait()

    uvloop.run(main())


# -- servers and load ----------------------------------------------------------------------

def start_server(args: list[str]) -> tuple[subprocess.Popen[str], list[str]]:
    """A server process and the addresses it prints."""
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, line.split("listening on", 1)[1].split()


def requests_of(corpus: Path, count: int) -> list[list[str]]:
    """`count` requests of one or two sentences (10-200 characters each)."""
    sentences: list[str] = []
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            sentences += [p for p in re.split(r"(?<=[.!?。])\s+", text) if 10 <= len(p) <= 200]
            if len(sentences) > 20_000:
                break
    return [sentences[i % len(sentences):i % len(sentences) + 1 + i % 2] for i in range(count)]


async def drive(url: str, work: list[list[list[str]]], go: Any = None) -> dict[str, Any]:
    """One client per item of `work`, each on its own connection with one
    request in flight; `go` (a callable) is awaited once all are connected."""
    from gpu_tok.client import AsyncBinaryClient, AsyncClient

    latencies: list[float] = []
    answers: list[list[Any]] = [[] for _ in work]
    binary = url.startswith("gtok")
    clients = [AsyncBinaryClient(url) if binary else AsyncClient(url) for _ in work]
    for client, w in zip(clients, work, strict=True):  # connected (and warm) before the clock starts
        if w:
            await client.encode(w[0])
    if go is not None:
        go()

    async def one(i: int) -> None:
        client = clients[i]
        record = answers[i].append
        clock = time.perf_counter
        for texts in work[i]:
            started = clock()
            answer = await client.encode(texts)
            latencies.append(clock() - started)
            record(answer["input_ids"])

    cpu = os.times()
    started = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(len(work))))
    ended = time.perf_counter()
    cpu_end = os.times()
    for client in clients:
        await client.close()
    return {"started": started, "ended": ended, "latencies": latencies, "answers": answers,
            "cpu_s": cpu_end.user + cpu_end.system - cpu.user - cpu.system}


class RawClient(asyncio.Protocol):
    """One load-generating connection, as cheap as a Python client gets: it sends
    prebuilt requests one at a time (the next once the answer to the last is
    whole) from its callbacks, and keeps each answer's bytes; answers are
    decoded and checked once the clock has stopped."""

    def __init__(self, requests: list[bytes], binary: bool) -> None:
        self.requests = requests
        self.binary = binary
        self.answers: list[bytes] = []
        self.latencies: list[float] = []
        self.buffer = b""
        self.sent_at = 0.0
        self.next = 0
        self.limit = len(requests)
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def run(self, limit: int | None = None) -> asyncio.Future[None]:
        """Sends the requests (the first `limit` of them) in turn; the future is done after the last answer."""
        self.answers, self.latencies, self.next = [], [], 0
        self.limit = len(self.requests) if limit is None else limit
        self.done = asyncio.get_running_loop().create_future()
        self._send()
        return self.done

    def _send(self) -> None:
        if self.next == self.limit:
            self.done.set_result(None)
            return
        self.sent_at = time.perf_counter()
        self.transport.write(self.requests[self.next])
        self.next += 1

    def data_received(self, data: bytes) -> None:
        data = self.buffer + data if self.buffer else data
        size = self._answer_size(data)
        if not size or len(data) < size:
            self.buffer = data
            return
        self.latencies.append(time.perf_counter() - self.sent_at)
        self.answers.append(data[:size])
        self.buffer = data[size:]
        self._send()

    def _answer_size(self, data: bytes) -> int:
        """The size of the answer `data` starts with, once its head is in (else 0)."""
        if self.binary:
            return 4 + int.from_bytes(data[:4], "little") if len(data) >= 4 else 0
        head_end = data.find(b"\r\n\r\n")
        if head_end < 0:
            return 0
        length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", data[:head_end])
        assert length is not None, data[:head_end]
        return head_end + 4 + int(length.group(1))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionResetError(f"the server closed the connection: {exc}"))


def request_bytes(url: str, texts: list[str], request_id: int) -> bytes:
    """One /encode request as sent on the wire, for `url`'s transport."""
    from gpu_tok.serve import _frames

    if url.startswith("gtok"):
        return _frames.request_frame(request_id, texts, None, b"")
    body = json.dumps({"texts": texts}, ensure_ascii=False).encode()
    return (f"POST /encode HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def input_ids(url: str, answer: bytes) -> Any:
    """The input_ids of one raw answer (an error's status and message instead)."""
    from gpu_tok.serve import _wire

    if url.startswith("gtok"):
        status = int.from_bytes(answer[8:12], "little")
        return _wire.rows(answer[12:])["input_ids"] if status == 200 else (status, answer[12:])
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return head.split(b"\r\n", 1)[0], body
    return json.loads(body)["input_ids"]


async def drive_raw(url: str, work: list[list[list[str]]], go: Any = None) -> dict[str, Any]:
    """`drive` with `RawClient`s: one connection per item of `work`."""
    loop = asyncio.get_running_loop()
    binary = url.startswith("gtok")
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    clients: list[RawClient] = []
    for w in work:
        requests = [request_bytes(url, texts, i) for i, texts in enumerate(w)]
        _, client = await loop.create_connection(lambda r=requests: RawClient(r, binary), host, int(port))
        clients.append(client)
    await asyncio.gather(*(c.run(1) for c in clients if c.requests))  # connected and warm before the clock starts
    if go is not None:
        go()
    cpu = os.times()
    started = time.perf_counter()
    await asyncio.gather(*(c.run() for c in clients))
    ended = time.perf_counter()
    cpu_end = os.times()
    for client in clients:
        client.transport.close()
    return {"started": started, "ended": ended, "latencies": [x for c in clients for x in c.latencies],
            "answers": [[input_ids(url, a) for a in c.answers] for c in clients],
            "cpu_s": cpu_end.user + cpu_end.system - cpu.user - cpu.system}


def client_process(conn: Connection, library_clients: bool) -> None:
    """A load process: gets (url, work), connects, says ready, waits for go, runs, sends the results."""
    import uvloop

    while (job := conn.recv()) is not None:
        url, work = job

        def ready() -> None:
            conn.send("ready")
            assert conn.recv() == "go"

        conn.send(uvloop.run((drive if library_clients else drive_raw)(url, work, ready)))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Load:
    """`procs` client processes (spawned once) that run each measurement together."""

    def __init__(self, procs: int, library_clients: bool = False) -> None:
        context = mp.get_context("spawn")
        self.conns: list[Connection] = []
        self.procs = []
        for _ in range(procs):
            here, there = context.Pipe()
            proc = context.Process(target=client_process, args=(there, library_clients), daemon=True)
            proc.start()
            self.conns.append(here)
            self.procs.append(proc)

    def run(self, url: str, work: list[list[list[str]]]) -> tuple[float, list[float], list[list[Any]], float]:
        """(seconds, latencies, answers per client, client CPU seconds)."""
        shares = [list(range(p, len(work), len(self.conns))) for p in range(len(self.conns))]
        for conn, share in zip(self.conns, shares, strict=True):
            conn.send((url, [work[i] for i in share]))
        for conn in self.conns:
            assert conn.recv() == "ready"
        for conn in self.conns:
            conn.send("go")
        results = [conn.recv() for conn in self.conns]
        answers: list[list[Any]] = [[] for _ in work]
        for share, result in zip(shares, results, strict=True):
            for i, got in zip(share, result["answers"], strict=True):
                answers[i] = got
        seconds = max(r["ended"] for r in results) - min(r["started"] for r in results)
        return (seconds, [x for r in results for x in r["latencies"]], answers, sum(r["cpu_s"] for r in results))

    def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(OSError):  # a process that failed is gone already
                conn.send(None)
        for proc in self.procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


def batch_counts(url: str | None) -> tuple[float, float] | None:
    """(requests, engine calls) so far, from a gpu_tok server's /metrics."""
    from gpu_tok.client import Client

    if url is None:
        return None
    with Client(url) as client:
        text = client.metrics()
    total = re.search(r"^gpu_tok_batch_requests_sum (\S+)$", text, re.M)
    count = re.search(r"^gpu_tok_batch_requests_count (\S+)$", text, re.M)
    return (float(total.group(1)), float(count.group(1))) if total and count else None


def one_run(load: Load, url: str, metrics_url: str | None, work: list[list[list[str]]],
            expected: Any) -> dict[str, Any]:
    before = batch_counts(metrics_url)
    seconds, latencies, answers, cpu_s = load.run(url, work)
    after = batch_counts(metrics_url)
    # each client's untimed first request is in the counts too: negligible against `work`
    per_call = (round((after[0] - before[0]) / max(1.0, after[1] - before[1]), 2)
                if before is not None and after is not None else None)
    total = sum(len(w) for w in work)
    wrong = 0 if expected is None else sum(got != want for got_rows, want_rows in zip(answers, expected, strict=True)
                                           for got, want in zip(got_rows, want_rows, strict=True))
    return {
        "requests": total, "seconds": round(seconds, 3), "requests_per_s": round(total / seconds, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1e3, 2), "p99_ms": round(percentile(latencies, 0.99) * 1e3, 2),
        "wrong_answers": wrong, "client_cpu_s": round(cpu_s, 2), "requests_per_engine_call": per_call,
        "load_average": round(os.getloadavg()[0], 2),
    }


def measure(servers: dict[str, list[str]], rows: dict[str, tuple[str, str, bool]], work: list[list[list[str]]],
            expected: Any, rounds: int, procs: int, library_clients: bool) -> list[dict[str, Any]]:
    """Every server started once, then `rounds` interleaved runs of each row (a
    busy machine slows them alike); each row's median run by requests/s is
    reported. `rows`: name -> (server, "http" or "gtok", checked)."""
    started: dict[str, tuple[subprocess.Popen[str], list[str]]] = {}
    try:
        for name, args in servers.items():
            started[name] = start_server(args)
        return _measure(started, rows, work, expected, rounds, procs, library_clients)
    finally:
        for proc, _ in started.values():
            proc.terminate()
            proc.wait(30)


def _measure(started: dict[str, tuple[subprocess.Popen[str], list[str]]], rows: dict[str, tuple[str, str, bool]],
             work: list[list[list[str]]], expected: Any, rounds: int, procs: int,
             library_clients: bool) -> list[dict[str, Any]]:
    load = Load(procs, library_clients)

    def address(server: str, scheme: str) -> str:
        return next(a for a in started[server][1] if a.startswith(scheme))

    def metrics_url(server: str) -> str | None:
        return address(server, "http") if server.startswith("gpu_tok") else None

    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in rows}
    try:
        for server, scheme, _ in rows.values():  # warm-up: first batches, caches
            load.run(address(server, scheme), [w[:10] for w in work])
        for _ in range(rounds):
            for name, (server, scheme, checked) in rows.items():
                runs[name].append(one_run(load, address(server, scheme), metrics_url(server), work,
                                          expected if checked else None))
    finally:
        load.close()
    out = []
    for name, results in runs.items():
        median = sorted(results, key=lambda r: r["requests_per_s"])[len(results) // 2]
        out.append({"name": name, **median, "wrong_answers": sum(r["wrong_answers"] for r in results),
                    "all_rounds_requests_per_s": [r["requests_per_s"] for r in results]})
        print(f"{name:<34} {median['requests_per_s']:>7.0f} req/s  p50 {median['p50_ms']:>6.2f} ms  "
              f"p99 {median['p99_ms']:>6.2f} ms  wrong {out[-1]['wrong_answers']}  "
              f"requests/call {median['requests_per_engine_call'] or '-'}  "
              f"(rounds: {', '.join(f'{r:.0f}' for r in out[-1]['all_rounds_requests_per_s'])})", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=str(SHARED / "tokenizers" / "qwen3"))
    parser.add_argument("--corpus", default=str(SHARED / "corpus" / "mixed.jsonl"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200, help="per client (default: 200)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved runs per row (default: 5)")
    parser.add_argument("--client-procs", type=int, default=1, help="processes the clients run in (default: 1)")
    parser.add_argument("--library-clients", action="store_true",
                        help="drive the servers with gpu_tok.client's AsyncClient / AsyncBinaryClient instead of "
                             "the bench's raw clients (what the library's clients cost)")
    parser.add_argument("--json", dest="json_out", help="write the results here")
    parser.add_argument("--naive-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--binary-floor-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.naive_server or args.floor_server:
        naive_server(args.tokenizer, args.port, floor=args.floor_server)
        return 0
    if args.binary_floor_server:
        binary_floor_server(args.port)
        return 0

    import gpu_tok

    tok = gpu_tok.Tokenizer.from_pretrained(args.tokenizer)
    flat = requests_of(Path(args.corpus), args.clients * args.requests)
    work = [flat[i::args.clients] for i in range(args.clients)]
    expected = [[tok(texts)["input_ids"] for texts in w] for w in work]
    load_at_start = os.getloadavg()[0]
    serve = ["-m", "gpu_tok", "serve", "--tokenizer", args.tokenizer, "--port", "0", "--binary-port", "0",
             "--device", "cpu"]
    print(f"{args.clients} clients x {args.requests} requests of 1-2 sentences, loopback, clients in "
          f"{args.client_procs} processes, {os.cpu_count()} cores, load average {load_at_start:.1f}", flush=True)
    servers = {
        "gpu_tok on": serve,
        "gpu_tok off": serve + ["--max-batch-tokens", "1", "--max-delay-ms", "0"],
        "binary floor": [__file__, "--binary-floor-server"],
        "naive": [__file__, "--naive-server", "--tokenizer", args.tokenizer],
        "HTTP floor": [__file__, "--floor-server", "--tokenizer", args.tokenizer],
    }
    rows = {  # name -> (server, transport, answers checked)
        "binary, batching on": ("gpu_tok on", "gtok", True),
        "binary, batching off": ("gpu_tok off", "gtok", True),
        "binary floor (constant answer)": ("binary floor", "gtok", False),
        "HTTP, batching on": ("gpu_tok on", "http", True),
        "HTTP, batching off": ("gpu_tok off", "http", True),
        "naive tokenizers server (HTTP)": ("naive", "http", True),
        "HTTP floor (constant answer)": ("HTTP floor", "http", False),
    }
    runs = measure(servers, rows, work, expected, args.rounds, args.client_procs, args.library_clients)
    rps = {r["name"]: r["requests_per_s"] for r in runs}
    report = {
        "tokenizer": args.tokenizer, "clients": args.clients, "requests_per_client": args.requests,
        "client_processes": args.client_procs, "cores": os.cpu_count(),
        "clients_used": "gpu_tok.client (AsyncClient, AsyncBinaryClient)" if args.library_clients else
                        "raw asyncio.Protocol clients sending prebuilt requests (RawClient)",
        "load_average_at_start": round(load_at_start, 2), "load_average_at_end": round(os.getloadavg()[0], 2),
        "stack": "uvloop; HTTP: aiohttp + orjson; binary: asyncio.Protocol (gpu_tok.serve.binary); server and "
                 "clients in separate processes on loopback",
        "rounds": args.rounds, "runs": runs,
        "gain_binary_on_vs_off": round(rps["binary, batching on"] / rps["binary, batching off"], 2),
        "gain_http_on_vs_off": round(rps["HTTP, batching on"] / rps["HTTP, batching off"], 2),
        "gain_binary_on_vs_naive_tokenizers": round(rps["binary, batching on"]
                                                    / rps["naive tokenizers server (HTTP)"], 2),
        "gain_http_on_vs_naive_tokenizers": round(rps["HTTP, batching on"] / rps["naive tokenizers server (HTTP)"], 2),
    }
    print(f"batching gain over one engine call per request: binary {report['gain_binary_on_vs_off']}x, "
          f"HTTP {report['gain_http_on_vs_off']}x; over the naive tokenizers server: binary "
          f"{report['gain_binary_on_vs_naive_tokenizers']}x, HTTP {report['gain_http_on_vs_naive_tokenizers']}x; "
          f"load average {report['load_average_at_start']} -> {report['load_average_at_end']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    return 1 if any(r["wrong_answers"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
