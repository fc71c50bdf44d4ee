"""Soak test of the HTTP service: many clients, a mix of requests, for a fixed time; any error fails it.

Run: python bench/bench_soak.py [--seconds 60] [--workers 2] [--clients 16] [--max-requests N] [--seed S]

Starts uvicorn with --workers processes on 127.0.0.1 (a free port) and drives it from --clients threads, each
with its own keep-alive connection, until --seconds pass or --max-requests have been sent. The mix: plans for
a few presets and profiles (the same bodies repeat, so most are answered from the cache; some batch sizes are
new, so some are planned cold), estimates, the catalogue GETs, /livez, and invalid requests that must get their
4xx. An error is a 5xx, a connection failure or timeout, or any status other than the one expected. Prints
requests/s, p50/p99 latency and the errors; exits 1 if there was any, or if the server died. Loopback only;
stops the server when done.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True)
class Call:
    kind: str
    method: str
    path: str
    expect: int
    body: dict[str, Any] | None = None
    raw: bytes | None = None


def _plan(preset: str, profile: str, gpus: int, batch: int, top_k: int = 3) -> dict[str, Any]:
    return {
        "model": {"preset": preset},
        "cluster": {"profile": profile, "num_gpus": gpus},
        "training": {"global_batch_size": batch},
        "top_k": top_k,
    }


PLANS = [
    _plan("gpt3-175b", "dgx-a100-80gb", 1024, 1536),
    _plan("llama3-8b", "dgx-h100", 64, 512),
    _plan("llama3-70b", "dgx-h100", 1024, 1024),
    _plan("mixtral-8x7b", "dgx-h100", 256, 512),
    _plan("nemotron4-15b", "hgx-h200", 128, 256),
]
ESTIMATE = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
    "training": {"global_batch_size": 1536},
    "layout": {"tp": 8, "pp": 8, "dp": 16, "micro_batch_size": 1, "recompute": "full", "zero_stage": 1},
}
FIXED: list[tuple[int, Call]] = [
    (30, Call("plan (repeat)", "POST", "/v1/plan", 200)),  # body drawn from PLANS
    (6, Call("plan (new batch)", "POST", "/v1/plan", 200)),  # llama3-8b with a batch size not seen before
    (12, Call("estimate", "POST", "/v1/estimate", 200, ESTIMATE)),
    (8, Call("GET profiles", "GET", "/v1/hardware-profiles", 200)),
    (4, Call("GET profile", "GET", "/v1/hardware-profiles/dgx-h100", 200)),
    (8, Call("GET models", "GET", "/v1/models", 200)),
    (4, Call("GET model", "GET", "/v1/models/llama3-70b", 200)),
    (12, Call("livez", "GET", "/livez", 200)),
    (3, Call("unknown preset", "POST", "/v1/plan", 422, _plan("nope", "dgx-h100", 64, 64))),
    (3, Call("unknown field", "POST", "/v1/plan", 422, PLANS[1] | {"bogus": 1})),
    (3, Call("malformed json", "POST", "/v1/plan", 422, raw=b'{"model": {"preset":')),
    (2, Call("bad layout", "POST", "/v1/estimate", 422, ESTIMATE | {"layout": {"tp": 0, "pp": 1, "dp": 1}})),
    (3, Call("unknown profile", "GET", "/v1/hardware-profiles/nope", 404)),
    (2, Call("wrong method", "PUT", "/v1/plan", 405, raw=b"{}")),
]


@dataclass
class Results:
    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: list[float] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)
    sent: int = 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _draw(rng: random.Random, new_batches: list[int], lock: threading.Lock) -> Call:
    call = rng.choices([c for _, c in FIXED], weights=[w for w, _ in FIXED])[0]
    if call.kind == "plan (repeat)":
        return Call(call.kind, call.method, call.path, call.expect, rng.choice(PLANS))
    if call.kind == "plan (new batch)":
        with lock:
            batch = new_batches.pop() if new_batches else 64 * rng.randint(1, 64)
        return Call(call.kind, call.method, call.path, call.expect, _plan("llama3-8b", "dgx-h100", 64, batch))
    return call


def _client(url: str, seed: int, deadline: float, max_requests: int, new_batches: list[int], out: Results) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, timeout=30) as http:
        while time.monotonic() < deadline:
            with out.lock:
                if out.sent >= max_requests:
                    return
                out.sent += 1
            call = _draw(rng, new_batches, out.lock)
            content = call.raw if call.raw is not None else json.dumps(call.body).encode() if call.body else None
            headers = {"content-type": "application/json"} if content is not None else {}
            started = time.perf_counter()
            try:
                r = http.request(call.method, call.path, content=content, headers=headers)
                status, problem = r.status_code, r.text[:200]
            except httpx.HTTPError as exc:
                status, problem = 0, f"{type(exc).__name__}: {exc}"
            elapsed = time.perf_counter() - started
            with out.lock:
                out.latencies.append(elapsed)
                out.by_kind[call.kind] += 1
                if status != call.expect:
                    key = f"{call.kind}: got {status or 'no response'}, expected {call.expect}"
                    out.errors[key] += 1
                    if len(out.samples) < 5:
                        out.samples.append(f"{key}: {problem}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long to drive the server")
    parser.add_argument("--workers", type=int, default=2, help="uvicorn worker processes")
    parser.add_argument("--clients", type=int, default=16, help="concurrent client threads")
    parser.add_argument("--max-requests", type=int, default=1_000_000, help="stop after this many requests")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "uvicorn", "api.main:create_app", "--factory", "--host", "127.0.0.1"]
    server = subprocess.Popen([*cmd, "--port", str(port), "--workers", str(args.workers), "--log-level", "warning"])
    results = Results()
    try:
        ready_by = time.monotonic() + 60
        while time.monotonic() < ready_by:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            print("the service did not become ready in 60 s", file=sys.stderr)
            return 1
        new_batches = [64 * k for k in random.Random(args.seed).sample(range(1, 400), 399)]
        deadline = time.monotonic() + args.seconds
        started = time.perf_counter()
        threads = [
            threading.Thread(
                target=_client,
                args=(url, args.seed * 1000 + i, deadline, args.max_requests, new_batches, results),
                daemon=True,
            )
            for i in range(args.clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()) + 60)  # a request may take up to 30 s
        wall = time.perf_counter() - started
        hung = sum(t.is_alive() for t in threads)
        if hung:
            results.errors[f"{hung} client thread(s) still waiting at the end"] += hung
        alive = server.poll() is None
        if not alive:
            results.errors[f"the server exited with {server.returncode}"] += 1
        elif httpx.get(url + "/livez", timeout=5).status_code != 200:
            results.errors["/livez failed after the run"] += 1
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)

    with results.lock:
        latencies = list(results.latencies)
        errors = sum(results.errors.values())
        print(f"soak: {args.seconds:.0f} s, {args.workers} worker(s), {args.clients} clients")
        print(f"requests {len(latencies)}  req/s {len(latencies) / wall:.1f}  errors {errors}")
        if latencies:
            p50, p99 = statistics.median(latencies), _percentile(latencies, 0.99)
            print(f"latency ms: p50 {1e3 * p50:.1f}  p99 {1e3 * p99:.1f}  max {1e3 * max(latencies):.1f}")
        print("mix: " + ", ".join(f"{k} {v}" for k, v in sorted(results.by_kind.items())))
        for key, count in results.errors.most_common():
            print(f"ERROR x{count}: {key}")
        for sample in results.samples:
            print(f"  e.g. {sample}")
    return 1 if errors or not latencies else 0


if __name__ == "__main__":
    sys.exit(main())
