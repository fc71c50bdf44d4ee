"""Site calibration from stored observations (issue 13 part 3), on both storage backends: through the API
(`POST /v1/hardware-profiles/{id}/calibrate`, `GET .../calibration`) and `planner calibrate --profile` on the
same database. The observations are made from a profile with known constants (slower GEMMs, a per-GEMM
fixed time); the calibration must find them again and plans naming `base@site` must use them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.convert import observation_run
from api.main import create_app
from api.observation_schemas import ObservationRequest
from planner.calibration.fit import (
    BOUNDS,
    GEMM_OVERHEAD_US,
    GEMM_PEAK_EFFICIENCY,
    NETWORK_EFFICIENCY,
    predict,
    with_constants,
)
from planner.calibration.site import grid
from planner.cli import app
from planner.profiles import HardwareProfile, load_profiles
from planner.store import add_observation, open_store

TOKEN = "calibrating-token-0123456789"
AS_LAB = {"Authorization": f"Bearer {TOKEN}"}
TRUTH = {GEMM_PEAK_EFFICIENCY: 0.6, GEMM_OVERHEAD_US: 8.0, NETWORK_EFFICIENCY: 0.9}
"""The cluster's real constants: slower GEMMs and a larger fixed time per GEMM than the stock dgx-h100."""

SHAPE = {"num_layers": 16, "hidden_size": 1024, "num_attention_heads": 8, "vocab_size": 32000, "seq_length": 2048}
LAYOUTS = [  # one 8-GPU node each: the network never enters, so only eta and t0 can be identified
    ({"tp": 1, "pp": 1, "dp": 8, "micro_batch_size": 2}, 64),
    ({"tp": 2, "pp": 1, "dp": 4, "sequence_parallel": True}, 64),
    ({"tp": 8, "pp": 1, "dp": 1, "sequence_parallel": True}, 16),
    ({"tp": 4, "pp": 2, "dp": 1, "sequence_parallel": True}, 32),
    ({"tp": 1, "pp": 2, "dp": 4}, 32),
]


@cache
def _stock() -> HardwareProfile:
    return load_profiles()["dgx-h100"]


def _body(layout: dict[str, Any], batch: int, profile: str = "dgx-h100") -> dict[str, Any]:
    """An observation whose measured step time is what the truth profile predicts for it."""
    body: dict[str, Any] = {
        "model": {**SHAPE, "gated_mlp": True},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8},
        "training": {"global_batch_size": batch},
        "layout": layout,
        "measured": {"step_time_s": 1.0},
    }
    run = observation_run(ObservationRequest.model_validate(body), load_profiles())
    body["measured"]["step_time_s"] = predict(run, with_constants(_stock(), TRUTH))[1]
    body["cluster"]["profile"] = profile
    return body


def _tolerance(name: str) -> float:
    """Two final grid steps of the two-constant fit plus half the rounding unit of the reported value."""
    return 2 * grid(2).final_step(name) + 0.5 * 10.0 ** -BOUNDS[name].decimals


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(database_url=database_url, write_tokens=f"lab:{TOKEN}")) as c:
        yield c


def _post_all(client: TestClient, profile: str = "dgx-h100") -> list[str]:
    ids = []
    for layout, batch in LAYOUTS:
        r = client.post("/v1/observations", json=_body(layout, batch, profile), headers=AS_LAB)
        assert r.status_code == 201, r.text
        ids.append(r.json()["id"])
    return ids


def _constants(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in answer["report"]["constants"]}


def test_calibration_recovers_the_clusters_constants_and_plans_use_them(client: TestClient) -> None:
    ids = _post_all(client)
    r = client.post("/v1/hardware-profiles/dgx-h100/calibrate", json={"site": "lab"}, headers=AS_LAB)
    assert r.status_code == 201, r.text
    answer = r.json()
    assert (answer["profile_id"], answer["version"], answer["owner"]) == ("dgx-h100@lab", 1, "lab")
    assert answer["observations"] == ids and answer["skipped"] == []
    fitted = _constants(answer)
    for name in (GEMM_PEAK_EFFICIENCY, GEMM_OVERHEAD_US):
        assert fitted[name]["fitted"] and fitted[name]["after"] == pytest.approx(TRUTH[name], abs=_tolerance(name))
    assert answer["report"]["unidentified"] == [NETWORK_EFFICIENCY]  # no run leaves the node
    report = answer["report"]
    assert report["before"]["mean_abs"] > 0.1 > 0.01 > report["after"]["mean_abs"]  # stock eta 0.65 is 8% fast
    assert [row["id"] for row in report["rows"]] == ids

    # The stored version is what GET answers, and plans naming dgx-h100@lab predict the measured times.
    assert client.get("/v1/hardware-profiles/dgx-h100@lab/calibration").json() == answer
    profile = client.get("/v1/hardware-profiles/dgx-h100@lab").json()
    assert profile["calibration"]["gemm_peak_efficiency"] == fitted[GEMM_PEAK_EFFICIENCY]["after"]
    body = _body(*LAYOUTS[2], profile="dgx-h100@lab")
    measured = body.pop("measured")["step_time_s"]
    estimate = client.post("/v1/estimate", json=body).json()["estimate"]
    assert estimate["step_time_s"] == pytest.approx(measured, rel=0.01)

    # Observations naming the site profile join the base's; a second calibration is version 2.
    _post_all(client, "dgx-h100@lab")
    again = client.post("/v1/hardware-profiles/dgx-h100@lab/calibrate", json={}, headers=AS_LAB)
    assert again.status_code == 201, again.text
    assert again.json()["version"] == 2 and len(again.json()["observations"]) == 2 * len(LAYOUTS)
    assert client.get("/v1/hardware-profiles/dgx-h100@lab/calibration", params={"version": 1}).json() == answer


def test_observations_with_overrides_are_skipped_with_the_reason(client: TestClient) -> None:
    ids = _post_all(client)
    odd = _body(*LAYOUTS[0])
    odd["cluster"]["overrides"] = {"efficiency": {"network": 0.5}}
    r = client.post("/v1/observations", json=odd, headers=AS_LAB)
    assert r.status_code == 201, r.text
    answer = client.post("/v1/hardware-profiles/dgx-h100/calibrate", json={"site": "lab"}, headers=AS_LAB).json()
    assert answer["observations"] == ids
    assert [s["id"] for s in answer["skipped"]] == [r.json()["id"]] and "overrides" in answer["skipped"][0]["reason"]


def _problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize(
    ("path", "body", "status", "loc"),
    [
        ("dgx-h100", {}, 422, ["site"]),  # a built-in id needs a site
        ("dgx-h100@lab", {"site": "other"}, 422, ["site"]),
        ("dgx-h100", {"site": "Lab!"}, 422, ["body", "site"]),
        ("dgx-h100", {"site": "lab", "extra": 1}, 422, ["body", "extra"]),
        ("dgx-h100", {"site": "lab"}, 422, ["observations"]),  # none stored yet
        ("no-such-profile", {"site": "lab"}, 404, None),
        ("x" * 200, {"site": "lab"}, 404, None),
    ],
)
def test_refusals_name_the_field(
    client: TestClient, path: str, body: dict[str, Any], status: int, loc: list[str] | None
) -> None:
    problem = _problem(client.post(f"/v1/hardware-profiles/{path}/calibrate", json=body, headers=AS_LAB), status)
    if loc is not None:
        assert problem["errors"][0]["loc"] == loc, problem


def test_one_observation_is_too_few(client: TestClient) -> None:
    assert client.post("/v1/observations", json=_body(*LAYOUTS[0]), headers=AS_LAB).status_code == 201
    r = client.post("/v1/hardware-profiles/dgx-h100/calibrate", json={"site": "lab"}, headers=AS_LAB)
    assert "at least 2" in _problem(r, 422)["detail"]


def test_calibrating_needs_a_write_token(client: TestClient, database_url: str) -> None:
    _post_all(client)
    path = "/v1/hardware-profiles/dgx-h100/calibrate"
    _problem(client.post(path, json={"site": "lab"}), 401)
    _problem(client.post(path, json={"site": "lab"}, headers={"Authorization": "Bearer not-a-token-0123456"}), 401)
    with TestClient(create_app(database_url=database_url, write_tokens="")) as closed:
        _problem(closed.post(path, json={"site": "lab"}, headers=AS_LAB), 403)
    _problem(client.get("/v1/hardware-profiles/dgx-h100@lab/calibration"), 404)  # nothing was stored


def test_a_builtin_profile_has_no_stored_calibration(client: TestClient) -> None:
    _problem(client.get("/v1/hardware-profiles/dgx-h100/calibration"), 404)
    _problem(client.get("/v1/hardware-profiles/dgx-h100@lab/calibration", params={"version": 3}), 404)


def test_the_command_line_calibrates_on_the_same_database(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _post_all(client)
    monkeypatch.setenv("DATABASE_URL", database_url)
    result = CliRunner().invoke(app, ["calibrate", "--profile", "dgx-h100", "--site", "lab", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert (answer["profile_id"], answer["version"], answer["owner"]) == ("dgx-h100@lab", 1, "cli")
    assert answer["observations"] == ids
    assert client.get("/v1/hardware-profiles/dgx-h100@lab/calibration").json() == answer
    table = CliRunner().invoke(app, ["calibrate", "--profile", "dgx-h100@lab"])
    assert table.exit_code == 0, table.output
    assert "leave-one-out" in table.output and "stored dgx-h100@lab version 2" in table.output
    # The service serves the version the command line stored from its next request on.
    assert (
        client.get("/v1/hardware-profiles/dgx-h100@lab")
        .json()["calibration"]["fitted_by"]
        .startswith("planner calibrate --profile dgx-h100@lab")
    )


def test_the_command_line_refuses_without_a_site(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url)
    result = CliRunner().invoke(app, ["calibrate", "--profile", "dgx-h100"])
    assert result.exit_code == 2 and result.output.startswith("error: site"), result.output


def test_only_the_newest_observations_are_fitted(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("api.calibrate.MAX_CALIBRATION_RUNS", 3)
    ids = _post_all(client)
    answer = client.post("/v1/hardware-profiles/dgx-h100/calibrate", json={"site": "lab"}, headers=AS_LAB).json()
    assert answer["observations"] == ids[-3:]
    assert "2 older observation(s) left out: a calibration fits the newest 3" in answer["report"]["notes"]


def test_stored_observations_this_planner_cannot_read_are_skipped(client: TestClient, database_url: str) -> None:
    """Rows written by another planner version: a preset since removed, a key the schema no longer has."""
    ids = _post_all(client)
    predicted = client.get(f"/v1/observations/{ids[0]}").json()["predicted"]
    store = open_store(database_url)
    try:
        gone, odd = (
            add_observation(
                store,
                owner="lab",
                profile_id="dgx-h100",
                request={**{k: v for k, v in _body(*LAYOUTS[0]).items() if k != "measured"}, **patch},
                measured={"step_time_s": 0.1},
                predicted=predicted,
                source=None,
                planner_version="0.0.1",
            ).id
            for patch in ({"model": {"preset": "a-removed-preset"}}, {"retired_field": 1})
        )
    finally:
        store.close()
    answer = client.post("/v1/hardware-profiles/dgx-h100/calibrate", json={"site": "lab"}, headers=AS_LAB).json()
    assert answer["observations"] == ids
    reasons = {s["id"]: s["reason"] for s in answer["skipped"]}
    assert reasons[gone].startswith("it no longer resolves") and "a-removed-preset" in reasons[gone]
    assert reasons[odd].startswith("its request no longer validates")
    assert client.get("/v1/observations", params={"profile": "dgx-h100"}).json()["total"] == len(ids) + 2
