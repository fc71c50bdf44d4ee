"""`planner serve` as deployed, over real sockets: metrics summed across workers, and the read timeout."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from api.localserver import local_service

READ_TIMEOUT_S = 1.0
PLAN = {
    "model": {"preset": "llama3-8b"},
    "cluster": {"profile": "dgx-h100", "num_gpus": 64},
    "training": {"global_batch_size": 512},
    "top_k": 1,
}


def _sample(text: str, name: str, labels: str = "", default: float | None = None) -> float:
    """The sum of the samples of `name` whose labels include `labels` in Prometheus text, e.g.
    _sample(t, "planner_requests_total", 'route="/livez"'); `default` if there is none, else a failure."""
    total, found = 0.0, False
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match and all(part in (match.group(1) or "") for part in labels.split(",") if part):
            total, found = total + float(match.group(2)), True
    if not found and default is not None:
        return default
    assert found, f"no sample {name}{{{labels}}} in /metrics"
    return total


def _await_workers(url: str, workers: int, timeout_s: float = 60.0) -> None:
    """Wait until `workers` processes serve: /readyz answers once the first does, and on a loaded machine the
    second may still be importing when the test's load begins (its requests would then all go to the first)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with httpx.Client(base_url=url, timeout=30) as c:
            live = _sample(c.get("/metrics").text, "planner_workers", default=0)
        if live == workers:
            return
        assert time.monotonic() < deadline, f"{live:.0f} of {workers} workers serving after {timeout_s:.0f} s"
        time.sleep(0.2)


def test_metrics_are_the_totals_of_both_workers() -> None:
    """Two workers, many connections: every scrape (whichever worker answers it) reports the same totals."""
    with local_service(workers=2, planner_serve=True) as url:
        _await_workers(url, 2)  # its /metrics scrapes count in no route total asserted below

        def livez(_: int) -> int:
            with httpx.Client(base_url=url, timeout=30) as c:  # a new connection each: the workers share them
                return c.get("/livez").status_code

        def plan(batch: int) -> int:
            with httpx.Client(base_url=url, timeout=60) as c:
                return c.post("/v1/plan", json=PLAN | {"training": {"global_batch_size": batch}}).status_code

        with ThreadPoolExecutor(max_workers=8) as pool:
            assert set(pool.map(livez, range(40))) == {200}
            assert set(pool.map(plan, [64 * k for k in range(1, 9)])) == {200}
        scrapes = []
        for _ in range(6):
            with httpx.Client(base_url=url, timeout=30) as c:
                scrapes.append(c.get("/metrics").text)
    for text in scrapes:
        assert _sample(text, "planner_workers") == 2  # one live gauge per worker, summed (livesum)
        assert _sample(text, "planner_requests_total", 'route="/livez",status="200"') == 40
        assert _sample(text, "planner_requests_total", 'route="/v1/plan",status="200"') == 8
        assert _sample(text, "planner_request_seconds_count", 'route="/v1/plan"') == 8
        assert _sample(text, "planner_search_seconds_count") == 8


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with local_service(planner_serve=True, read_timeout_s=READ_TIMEOUT_S) as url:
        yield int(url.rsplit(":", 1)[1])


def test_metrics_of_one_worker_under_planner_serve(port: int) -> None:
    """One worker runs in the command's own process: the multiprocess directory must be in place there too."""
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=url, timeout=30) as c:
        before = _sample(c.get("/metrics").text, "planner_requests_total", 'route="/livez"', default=0)
        for _ in range(3):
            assert c.get("/livez").status_code == 200
        text = c.get("/metrics").text
    assert _sample(text, "planner_workers") == 1
    assert _sample(text, "planner_requests_total", 'route="/livez"') == before + 3


def _stall(port: int, sent: bytes, wait_s: float = 10.0) -> tuple[bytes, float]:
    """Send `sent`, then nothing; the reply and the seconds until the server closed the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        started = time.monotonic()
        if sent:
            s.sendall(sent)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks), time.monotonic() - started


BODY = json.dumps(PLAN).encode()
HEAD = b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/pl", HEAD[:-2], HEAD + BODY[:20]],
    ids=["nothing", "partial-request-line", "partial-headers", "partial-body"],
)
def test_a_stalled_request_is_answered_408_and_closed(port: int, sent: bytes) -> None:
    reply, closed_after_s = _stall(port, sent)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply[:300]
    assert b"content-type: application/problem+json" in head.lower()
    assert json.loads(body)["detail"] == f"the request was not received in full within {READ_TIMEOUT_S:g} s"
    assert READ_TIMEOUT_S * 0.9 <= closed_after_s < 10.0


def test_a_request_sent_slowly_within_the_timeout_is_answered(port: int) -> None:
    """The deadline covers the whole request, not each pause: pieces 0.3 s apart still arrive in time."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        for piece in (HEAD[:10], HEAD[10:], BODY):
            s.sendall(piece)
            time.sleep(0.3)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(65536)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]


def test_the_deadline_restarts_for_each_request_on_a_kept_alive_connection(port: int) -> None:
    """Two requests on one connection, the second sent after the first request's deadline would have passed."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        for _ in range(2):
            s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while not reply.endswith(b'{"status":"ok"}'):
                reply += s.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
            time.sleep(READ_TIMEOUT_S * 1.5)


def test_a_body_stalled_past_the_deadline_does_not_stop_the_service(port: int) -> None:
    _stall(port, HEAD + BODY[:20])
    assert httpx.post(f"http://127.0.0.1:{port}/v1/plan", json=PLAN, timeout=60).status_code == 200
