"""The server's counters and histograms, written as Prometheus text (format 0.0.4).

Updated only from the event loop's thread, so they need no lock. Small on
purpose: a dependency on prometheus_client would buy nothing here.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        sep = "," if labels else ""
        out, cumulative = [], 0
        for bound, n in zip((*self.buckets, "+Inf"), self.counts, strict=True):
            cumulative += n
            out.append(f'{name}_bucket{{{labels}{sep}le="{bound}"}} {cumulative}')
        braces = f"{{{labels}}}" if labels else ""
        return out + [f"{name}_sum{braces} {self.total:.6f}", f"{name}_count{braces} {self.count}"]


class Metrics:
    def __init__(self, queue_depth: Callable[[], int], queue_capacity: int) -> None:
        self._queue_depth = queue_depth
        self._queue_capacity = queue_capacity
        self.requests: dict[tuple[str, int], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = defaultdict(lambda: Histogram(LATENCY_BUCKETS))
        self.batch_requests = Histogram(BATCH_BUCKETS)
        self.batch_texts = Histogram(BATCH_BUCKETS)
        self.engine_seconds = Histogram(LATENCY_BUCKETS)
        self.in_flight = 0

    def request_done(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests[endpoint, status] += 1
        self.latency[endpoint].observe(seconds)

    def batch_done(self, requests: int, texts: int, seconds: float) -> None:
        self.batch_requests.observe(requests)
        self.batch_texts.observe(texts)
        self.engine_seconds.observe(seconds)

    def render(self) -> str:
        lines = [
            "# HELP gpu_tok_requests_total Requests answered, by endpoint and HTTP status.",
            "# TYPE gpu_tok_requests_total counter",
        ]
        for (endpoint, status), n in sorted(self.requests.items()):
            lines.append(f'gpu_tok_requests_total{{endpoint="{endpoint}",status="{status}"}} {n}')
        lines += ["# HELP gpu_tok_request_duration_seconds Time from a request's body read to its answer.",
                  "# TYPE gpu_tok_request_duration_seconds histogram"]
        for endpoint, histogram in sorted(self.latency.items()):
            lines += histogram.lines("gpu_tok_request_duration_seconds", f'endpoint="{endpoint}"')
        lines += ["# HELP gpu_tok_batch_requests Requests merged into one engine call.",
                  "# TYPE gpu_tok_batch_requests histogram", *self.batch_requests.lines("gpu_tok_batch_requests"),
                  "# HELP gpu_tok_batch_texts Texts (rows) in one engine call.",
                  "# TYPE gpu_tok_batch_texts histogram", *self.batch_texts.lines("gpu_tok_batch_texts"),
                  "# HELP gpu_tok_engine_seconds Wall time of one engine call, splitting included.",
                  "# TYPE gpu_tok_engine_seconds histogram", *self.engine_seconds.lines("gpu_tok_engine_seconds"),
                  "# HELP gpu_tok_queue_depth Requests waiting for an engine call.",
                  "# TYPE gpu_tok_queue_depth gauge", f"gpu_tok_queue_depth {self._queue_depth()}",
                  "# HELP gpu_tok_queue_capacity Requests the queue holds before answering 503.",
                  "# TYPE gpu_tok_queue_capacity gauge", f"gpu_tok_queue_capacity {self._queue_capacity}",
                  "# HELP gpu_tok_requests_in_flight Requests being handled now.",
                  "# TYPE gpu_tok_requests_in_flight gauge", f"gpu_tok_requests_in_flight {self.in_flight}"]
        return "\n".join(lines) + "\n"
