"""Prometheus metrics of the service (requests, latency, cache, search)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["Metrics"]


class Metrics:
    """One registry per app, so tests can build several apps in one process."""

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
