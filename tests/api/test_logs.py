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
