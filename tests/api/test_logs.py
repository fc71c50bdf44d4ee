"""Access logs are one JSON object per request, carrying the request id returned in the header."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from api.logs import JsonFormatter


def test_access_log_is_json_with_the_request_id(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="planner.access"):
        response = client.get("/livez", headers={"x-request-id": "abc123"})
    assert response.headers["x-request-id"] == "abc123"
    record = next(r for r in caplog.records if r.name == "planner.access")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "abc123" and line["status"] == 200 and line["route"] == "/livez"
    assert line["level"] == "info" and line["duration_ms"] >= 0


def test_planner_serve_logs_json_access_lines_with_the_request_id() -> None:
    """`planner serve` installs the JSON log config: the access line of a request carries its X-Request-ID."""
    import socket
    import subprocess
    import sys
    import time

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    command = [sys.executable, "-m", "planner.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert httpx.get(url + "/livez", headers={"x-request-id": "trace-42"}).headers["x-request-id"] == "trace-42"
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=20)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    access = [x for x in lines if x.get("logger") == "planner.access" and x.get("request_id") == "trace-42"]
    assert access and access[0]["route"] == "/livez" and access[0]["status"] == 200
    assert all(line.startswith("{") for line in stderr.splitlines() if line.strip()), stderr[:500]
