"""`gpu-tok serve`: a tokenization service that merges concurrent requests into
engine calls (HTTP over TCP and a Unix socket, and a binary framed protocol). Needs the `serve` extra
(from the checkout: `pip install ".[serve]"`). See docs/SERVE.md.

    from gpu_tok.serve import BackgroundServer, ServeConfig
    with BackgroundServer(tok, ServeConfig(port=0)) as server:
        print(server.addresses)            # ["http://127.0.0.1:40123"]

Modules: `protocol` (request bodies -> engine terms), `batcher` (dynamic
batching, bounded queue), `engine` (one call for many requests, split back),
`metrics` (Prometheus text), `app` (aiohttp handlers and lifecycle), `binary`
(the binary protocol's listener), `connections` (limit, timeouts and drain of
every connection).
"""

from __future__ import annotations

from .app import BackgroundServer, ServeConfig, Service, run, start

__all__ = ["BackgroundServer", "ServeConfig", "Service", "run", "start"]
