"""`planner observe` through typer's CliRunner: --json, the table, --post against a fake service (MockTransport:
the POST /v1/observations route is built elsewhere, so the client's call shape is what is tested), exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import planner.cli
from planner.cli import EXIT_INVALID_INPUT, EXIT_SERVICE, app
from planner.client import PlannerClient
from planner.observe import observe_log

DATA = Path(__file__).parent / "data"
runner = CliRunner()
LOG = str(DATA / "megatron_llama8b.log")


def test_json_is_a_list_of_bodies() -> None:
    result = runner.invoke(app, ["observe", LOG, "--profile", "dgx-h100", "--json"])
    assert result.exit_code == 0, result.output
    bodies = json.loads(result.output)
    expected = observe_log((DATA / "megatron_llama8b.log").read_text(), profile="dgx-h100", file="megatron_llama8b.log")
    assert bodies == [expected.body()]


def test_table_then_body() -> None:
    result = runner.invoke(app, ["observe", str(DATA / "torchtitan_llama8b.log"), "--profile", "dgx-h100"])
    assert result.exit_code == 0, result.output
    assert "Recovered from torchtitan_llama8b.log (torchtitan 0.2.2)" in result.output
    assert "1.343 s" in result.output and "6 intervals (1 warm-up skipped)" in result.output
    assert json.loads(result.output[result.output.index("[\n") :])[0]["framework"] == "torchtitan"


def _fake_service(monkeypatch: pytest.MonkeyPatch, status: int, seen: list[httpx.Request]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if status >= 400:
            return httpx.Response(status, json={"title": "boom", "detail": "store down"})
        return httpx.Response(201, json={"id": "obs-1", **json.loads(request.content)})

    def client(url: str) -> PlannerClient:
        return PlannerClient(url, transport=httpx.MockTransport(handler))

    monkeypatch.setattr(planner.cli, "PlannerClient", client)


def test_post_sends_each_body_with_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    _fake_service(monkeypatch, 201, seen)
    args = ["observe", LOG, "--profile", "dgx-h100", "--post", "http://planner:8000/", "--token", "s3cret", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("created observation obs-1")
    (request,) = seen
    assert request.method == "POST" and str(request.url) == "http://planner:8000/v1/observations"
    assert request.headers["authorization"] == "Bearer s3cret"
    body: dict[str, Any] = json.loads(request.content)
    assert body["measured"]["step_time_s"] == pytest.approx(9.8808) and body["source"]["framework"] == "megatron"


def test_post_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    no_token = runner.invoke(app, ["observe", LOG, "--profile", "dgx-h100", "--post", "http://planner"], env={})
    assert no_token.exit_code == EXIT_INVALID_INPUT and "--post needs a bearer token" in no_token.output
    _fake_service(monkeypatch, 500, seen)
    failed = runner.invoke(app, ["observe", LOG, "--profile", "dgx-h100", "--post", "http://planner", "--token", "t"])
    assert failed.exit_code == EXIT_SERVICE and "store down" in failed.output
    _fake_service(monkeypatch, 401, seen)
    refused = runner.invoke(app, ["observe", LOG, "--profile", "dgx-h100", "--post", "http://planner", "--token", "t"])
    assert refused.exit_code == EXIT_INVALID_INPUT and "401" in refused.output


def test_refused_log_is_one_line_exit_2() -> None:
    result = runner.invoke(app, ["observe", str(DATA / "megatron_two_runs.log"), "--profile", "dgx-h100"])
    assert result.exit_code == EXIT_INVALID_INPUT
    assert result.output.startswith("error: log: 2 argument dumps") and result.output.count("\n") == 1
    bridge = runner.invoke(app, ["observe", str(DATA / "bridge_llama8b.log"), "--profile", "dgx-h100"])
    assert bridge.exit_code == EXIT_INVALID_INPUT and "give --num-gpus" in bridge.output
    ok = runner.invoke(app, ["observe", str(DATA / "bridge_llama8b.log"), "--profile", "dgx-h100", "--num-gpus", "8"])
    assert ok.exit_code == 0, ok.output


def test_torchtitan_v03_named_framework() -> None:
    log = DATA / "torchtitan_v03_llama8b_pp2.log"
    result = runner.invoke(app, ["observe", str(log), "--profile", "dgx-h100", "--framework", "torchtitan", "--json"])
    assert result.exit_code == 0, result.output
    (body,) = json.loads(result.output)
    assert body["framework"] == "torchtitan" and body["framework_version"] == "0.3.0"
    assert body["measured"]["step_time_s"] == pytest.approx(16384 / 5003, rel=1e-12)
    assert body["source"]["note"].startswith("median of 9 logged intervals (iterations 11-100")
    table = runner.invoke(app, ["observe", str(log), "--profile", "dgx-h100"])
    assert "Recovered from torchtitan_v03_llama8b_pp2.log (torchtitan 0.3.0)" in table.output
