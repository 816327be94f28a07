"""`gpu-tok serve` under load: dynamic batching on vs off, and a naive per-request
`tokenizers` server on the same stack (aiohttp + uvloop + orjson), in one run.

Each server runs in its own process on loopback; this process drives it with
64 concurrent keep-alive clients (gpu_tok.client.AsyncClient), each sending
requests of one or two sentences from the corpus, and records requests/s and
the p50/p99 latency seen by the clients. Every answer's input_ids are checked
against the library call. The servers are measured in interleaved rounds and
each one's median round is reported; an "HTTP floor" server answering a
constant shows what the stack itself costs per request.

    python benches/serve_bench.py [--tokenizer DIR] [--clients 64] [--requests 200] [--rounds 3]
                                  [--json benches/results/serve.json]

`--requests` is per client (the issue's full load test: --requests 2000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GPU_TOK_SHARED", ROOT.parent / "shared"))


# -- the naive peer: one `tokenizers` call per request, on the event loop ------------------

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


# -- servers and load ----------------------------------------------------------------------

def start_server(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"listening on (\S+)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    return proc, match.group(1)


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


async def drive(url: str, work: list[list[list[str]]]) -> tuple[float, list[float], list[list[Any]]]:
    """One client per item of `work`, all at once: (seconds, latencies, answers' input_ids)."""
    from gpu_tok.client import AsyncClient

    latencies: list[float] = []
    answers: list[list[Any]] = [[] for _ in work]

    async def client(i: int) -> None:
        async with AsyncClient(url) as c:
            for texts in work[i]:
                started = time.perf_counter()
                answer = await c.encode(texts)
                latencies.append(time.perf_counter() - started)
                answers[i].append(answer["input_ids"])

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(len(work))))
    return time.perf_counter() - started, latencies, answers


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_run(url: str, work: list[list[list[str]]], expected: Any) -> dict[str, Any]:
    import uvloop

    cpu_before = os.times()
    seconds, latencies, answers = uvloop.run(drive(url, work))
    cpu_after = os.times()
    total = sum(len(w) for w in work)
    wrong = 0 if expected is None else sum(got != want for got_rows, want_rows in zip(answers, expected, strict=True)
                                           for got, want in zip(got_rows, want_rows, strict=True))
    return {
        "requests": total, "seconds": round(seconds, 3), "requests_per_s": round(total / seconds, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1e3, 2), "p99_ms": round(percentile(latencies, 0.99) * 1e3, 2),
        "wrong_answers": wrong,
        "client_cpu_s": round(cpu_after.user + cpu_after.system - cpu_before.user - cpu_before.system, 2),
    }


def mean_batch(url: str) -> float | None:
    """Requests per engine call over the server's life, from its /metrics (gpu_tok only)."""
    from gpu_tok.client import Client, ServerError

    try:
        with Client(url) as client:
            text = client.metrics()
    except ServerError:
        return None
    total = re.search(r"^gpu_tok_batch_requests_sum (\S+)$", text, re.M)
    count = re.search(r"^gpu_tok_batch_requests_count (\S+)$", text, re.M)
    return round(float(total.group(1)) / float(count.group(1)), 2) if total and count else None


def measure(servers: dict[str, list[str]], work: list[list[list[str]]], expected: Any,
            rounds: int) -> list[dict[str, Any]]:
    """Every server started once, then `rounds` interleaved runs of each (a busy
    machine slows them alike); each server's median run by requests/s is reported."""
    import uvloop

    started = {name: start_server(args) for name, args in servers.items()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
    try:
        for _, url in started.values():
            uvloop.run(drive(url, [w[:10] for w in work]))  # warm-up: connections, caches, first batches
        for _ in range(rounds):
            for name, (_, url) in started.items():
                runs[name].append(one_run(url, work, None if name.startswith("HTTP floor") else expected))
        batch_sizes = {name: mean_batch(url) for name, (_, url) in started.items()}
    finally:
        for proc, _ in started.values():
            proc.terminate()
            proc.wait(30)
    out = []
    for name, results in runs.items():
        median = sorted(results, key=lambda r: r["requests_per_s"])[len(results) // 2]
        out.append({"name": name, **median, "wrong_answers": sum(r["wrong_answers"] for r in results),
                    "all_rounds_requests_per_s": [r["requests_per_s"] for r in results],
                    "mean_requests_per_engine_call": batch_sizes[name]})
        print(f"{name:<30} {median['requests_per_s']:>6.0f} req/s  p50 {median['p50_ms']:>6.2f} ms  "
              f"p99 {median['p99_ms']:>6.2f} ms  wrong {out[-1]['wrong_answers']}  "
              f"requests/call {batch_sizes[name] or '-'}  "
              f"(rounds: {', '.join(f'{r:.0f}' for r in out[-1]['all_rounds_requests_per_s'])})", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", default=str(SHARED / "tokenizers" / "qwen3"))
    parser.add_argument("--corpus", default=str(SHARED / "corpus" / "mixed.jsonl"))
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200, help="per client (default: 200)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved runs per server (default: 3)")
    parser.add_argument("--json", dest="json_out", help="write the results here")
    parser.add_argument("--naive-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--floor-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.naive_server or args.floor_server:
        naive_server(args.tokenizer, args.port, floor=args.floor_server)
        return 0

    import gpu_tok

    tok = gpu_tok.Tokenizer.from_pretrained(args.tokenizer)
    flat = requests_of(Path(args.corpus), args.clients * args.requests)
    work = [flat[i::args.clients] for i in range(args.clients)]
    expected = [[tok(texts)["input_ids"] for texts in w] for w in work]
    load_at_start = os.getloadavg()[0]
    serve = ["-m", "gpu_tok", "serve", "--tokenizer", args.tokenizer, "--port", "0", "--device", "cpu"]
    print(f"{args.clients} clients x {args.requests} requests of 1-2 sentences, loopback, "
          f"{os.cpu_count()} cores, load average {load_at_start:.1f}", flush=True)
    servers = {
        "gpu_tok serve, batching on": serve,
        "gpu_tok serve, batching off": serve + ["--max-batch-tokens", "1", "--max-delay-ms", "0"],
        "naive tokenizers server": [__file__, "--naive-server", "--tokenizer", args.tokenizer],
        "HTTP floor (constant answer)": [__file__, "--floor-server", "--tokenizer", args.tokenizer],
    }
    *runs, floor = measure(servers, work, expected, args.rounds)
    on, off, naive = (r["requests_per_s"] for r in runs)
    report = {
        "tokenizer": args.tokenizer, "clients": args.clients, "requests_per_client": args.requests,
        "cores": os.cpu_count(), "load_average_at_start": round(load_at_start, 2),
        "load_average_at_end": round(os.getloadavg()[0], 2),
        "stack": "aiohttp + uvloop + orjson, server and clients in separate processes on loopback",
        "rounds": args.rounds, "runs": runs, "http_floor": floor,
        "gain_batching_on_vs_off": round(on / off, 2), "gain_vs_naive_tokenizers": round(on / naive, 2),
    }
    print(f"batching gain: {report['gain_batching_on_vs_off']}x over one call per request, "
          f"{report['gain_vs_naive_tokenizers']}x over the naive tokenizers server")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json_out}")
    return 1 if any(r["wrong_answers"] for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
