"""`gpu-tok serve`: a tokenization service that merges concurrent requests into
engine calls (HTTP over TCP and a Unix socket, and a binary framed protocol). Needs the `serve` extra
(from the checkout: `pip install ".[serve]"`). See docs/SERVE.md.

    from gpu_tok.serve import BackgroundServer, ServeConfig
    with BackgroundServer(tok, ServeConfig(port=0)) as server:
        print(server.addresses)            # ["http://127.0.0.1:40123"]

Modules: `protocol` (request bodies -> engine terms), `batcher` (dynamic
batching, bounded queue), `calls` (one call for many requests, split back),
`metrics` (Prometheus text), `app` (aiohttp handlers and lifecycle), `binary`
(the binary protocol's listener), `connections` (limit, timeouts and drain of
every connection); `client` (the clients, standard library only), `_wire`
(the packed answer layout) and `_frames` (the binary protocol's frames).
The server's names are imported at first use, so the clients need no aiohttp.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import BackgroundServer, ServeConfig, Service, run, start

__all__ = ["BackgroundServer", "ServeConfig", "Service", "run", "start"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".app", __name__), name)
    raise AttributeError(f"module 'gpu_tok.serve' has no attribute {name!r}")
