"""Load benchmark of the HTTP service: requests/s and p50/p99 latency, cold and cached.

Run: python bench/bench_load.py [--requests N] [--workers W] [--seconds S]

Starts uvicorn on 127.0.0.1 (a free port), drives POST /v1/plan for GPT-3 175B
on 1024 A100s with 1 and 8 concurrent clients, first with requests that all
differ (cold: each is planned), then with one repeated request (cached).
Bounded by --requests per phase and --seconds per phase; loopback only; stops
the server when done.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from api.localserver import local_service


def _request(i: int) -> dict[str, Any]:
    return {
        "model": {"preset": "gpt3-175b"},
        "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
        "training": {"global_batch_size": 1536 + 64 * i},
        "top_k": 5,
    }


def _phase(url: str, clients: int, requests: list[dict[str, Any]], seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    local = threading.local()
    opened: list[httpx.Client] = []

    def one(body: dict[str, Any]) -> None:
        nonlocal errors
        if time.monotonic() > deadline:
            return
        if not hasattr(local, "http"):
            local.http = httpx.Client(timeout=60)  # one keep-alive connection per client thread
            opened.append(local.http)
        start = time.perf_counter()
        r = local.http.post(url + "/v1/plan", json=body)
        latencies.append(time.perf_counter() - start)
        errors += r.status_code != 200

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, requests))
    wall = time.perf_counter() - started
    for http in opened:
        http.close()
    latencies.sort()
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / wall,
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with local_service(workers=args.workers) as url:
        httpx.post(url + "/v1/plan", json=_request(-1), timeout=60)  # warm each import path once
        print(f"{'phase':28s} {'requests':>8s} {'errors':>6s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s}")
        offset = 0
        for clients in (1, 8):
            cold = [_request(offset + i) for i in range(args.requests)]
            offset += args.requests
            for name, batch in (("cold", cold), ("cached", [_request(-1)] * args.requests * 5)):
                r = _phase(url, clients, batch, args.seconds)
                print(
                    f"{name + f', {clients} client(s)':28s} {r['requests']:>8.0f} {r['errors']:>6.0f}"
                    f" {r['rps']:>8.1f} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}"
                )


if __name__ == "__main__":
    main()
