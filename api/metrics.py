"""Prometheus metrics of the service (requests, latency, cache, search), summed across worker processes.

With several uvicorn workers each process counts on its own; prometheus-client's multiprocess mode makes
`/metrics` answer the totals of all of them: every process writes its values to memory-mapped files in the
directory named by `PROMETHEUS_MULTIPROC_DIR`, and `MultiProcessCollector` sums those files when scraped
(https://prometheus.github.io/client_python/multiprocess/). `planner serve` creates a fresh directory per
start and removes it on exit (`api.metrics_dir`); the variable must be set before prometheus_client is
imported in a worker, which is why the command sets it in the environment the workers inherit, and
before it imports this module.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from api.metrics_dir import MULTIPROC_ENV

__all__ = ["Metrics"]


def _multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


class Metrics:
    """One registry per app, so tests can build several apps in one process.

    In multiprocess mode the values live in the shared directory (so two apps in one process would share
    them); `render()` then reads the totals of every worker, living or dead, from there.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "planner_requests_total", "HTTP requests", ["route", "method", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "planner_request_seconds",
            "HTTP request latency",
            ["route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        self.cache_hits = Counter("planner_cache_hits_total", "Responses served from cache", registry=self.registry)
        self.search_seconds = Histogram(
            "planner_search_seconds",
            "Plan search time",
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        self.candidates = Counter(
            "planner_candidates_evaluated_total", "Candidate layouts evaluated", registry=self.registry
        )
        self.workers = Gauge(
            "planner_workers",
            "Worker processes serving (each sets 1 while it runs; a worker that stops is marked dead)",
            registry=self.registry,
            multiprocess_mode="livesum",
        )

    def started(self) -> None:
        """Called by each worker's lifespan once it serves."""
        self.workers.set(1)

    def stopped(self) -> None:
        """Called by each worker's lifespan on shutdown: its live gauges leave the totals (its counters stay)."""
        self.workers.set(0)
        if _multiprocess():
            mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]

    def render(self) -> bytes:
        """The Prometheus text exposition: every worker's totals in multiprocess mode, else this registry's."""
        if not _multiprocess():
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
