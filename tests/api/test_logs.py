"""Access logs are one JSON object per request, carrying the request id returned in the header."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from api.localserver import local_service
from api.logs import JsonFormatter


def test_access_log_is_json_with_the_request_id(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="planner.access"):
        response = client.get("/livez", headers={"x-request-id": "abc123"})
    assert response.headers["x-request-id"] == "abc123"
    record = next(r for r in caplog.records if r.name == "planner.access")
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "abc123" and line["status"] == 200 and line["route"] == "/livez"
    assert line["level"] == "info" and line["duration_ms"] >= 0


def test_planner_serve_logs_json_access_lines_with_the_request_id(tmp_path: Path) -> None:
    """`planner serve` installs the JSON log config: the access line of a request carries its X-Request-ID."""
    log = tmp_path / "serve.log"
    with log.open("w") as stderr, local_service(planner_serve=True, stderr=stderr) as url:
        assert httpx.get(url + "/livez", headers={"x-request-id": "trace-42"}).headers["x-request-id"] == "trace-42"
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    access = [x for x in lines if x.get("logger") == "planner.access" and x.get("request_id") == "trace-42"]
    assert access and access[0]["route"] == "/livez" and access[0]["status"] == 200
