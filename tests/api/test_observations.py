"""/v1/observations on both storage backends: writes need a token, reads are open, every refusal names its field."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.auth import WriteTokens
from api.convert import observation_request, observation_run
from api.main import create_app
from api.observation_schemas import ObservationRequest
from planner.errors import InvalidSpecError
from planner.profiles import load_profiles
from planner.store import get_observation, open_store, save_profile_version

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210xx"
TOKENS = f"alice:{ALICE}, bob:{BOB}"
AS_ALICE = {"Authorization": f"Bearer {ALICE}"}
AS_BOB = {"Authorization": f"Bearer {BOB}"}
RUN: dict[str, Any] = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
    "training": {"global_batch_size": 1536},
    "layout": {"tp": 8, "pp": 16, "dp": 8, "recompute": "full"},
}
A100_BF16_PEAK = 312.0  # hardware_profiles/dgx-a100-80gb.json, gpu.peak_tflops.bf16


def _body(**measured: float) -> dict[str, Any]:
    return {**RUN, "measured": {"step_time_s": 30.0, **measured}}


@pytest.fixture
def client(database_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(database_url=database_url, write_tokens=TOKENS)) as c:
        yield c


def _refused(response: Any, status: int, field: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    loc = problem["errors"][0]["loc"]
    assert loc[loc[0] == "body" :] == field.split("."), problem  # schema errors say body.<field>, as for /v1/estimate
    return str(problem["detail"])


def test_post_stores_the_run_with_the_estimate_of_that_moment(client: TestClient) -> None:
    tokens = 1536 * 2048 / 30.0
    r = client.post("/v1/observations", json=_body(peak_memory_gib=40.0, tokens_per_s=tokens), headers=AS_ALICE)
    assert r.status_code == 201, r.text
    out = r.json()
    assert r.headers["location"] == f"/v1/observations/{out['id']}"
    assert out["owner"] == "alice" and out["profile"] == "dgx-a100-80gb"
    assert out["request"] == RUN  # as given: no defaults filled in
    assert out["source"] == {"kind": "manual"}
    estimate = client.post("/v1/estimate", json=RUN).json()["estimate"]
    predicted = out["predicted"]
    assert predicted["step_time_s"] == estimate["step_time_s"] and predicted["mfu"] == estimate["mfu"]
    assert predicted["peak_memory_gib"] == estimate["memory"]["peak_gib"]
    assert out["error"]["step_time_s"] == pytest.approx(estimate["step_time_s"] / 30.0 - 1, rel=1e-12)
    assert out["error"]["peak_memory_gib"] == pytest.approx(estimate["memory"]["peak_gib"] / 40.0 - 1, rel=1e-12)
    assert out["error"]["tokens_per_s"] == pytest.approx(estimate["tokens_per_s"] / tokens - 1, rel=1e-12)
    assert client.get(r.headers["location"]).json() == out


def test_auth_matrix() -> None:
    url = "sqlite://"
    with TestClient(create_app(database_url=url, write_tokens="")) as closed:
        for headers in ({}, AS_ALICE):
            r = closed.post("/v1/observations", json=_body(), headers=headers)
            assert r.status_code == 403 and "PLANNER_WRITE_TOKENS" in r.json()["detail"]
            assert r.headers["content-type"] == "application/problem+json"
            assert closed.delete(f"/v1/observations/{uuid.uuid4()}", headers=headers).status_code == 403
        assert closed.get("/v1/observations").status_code == 200  # reads stay open
    with TestClient(create_app(database_url=url, write_tokens=TOKENS)) as open_:
        for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": f"Basic {ALICE}"}):
            r = open_.post("/v1/observations", json=_body(), headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            assert r.headers["content-type"] == "application/problem+json"
            assert open_.delete(f"/v1/observations/{uuid.uuid4()}", headers=headers).status_code == 401
        assert open_.post("/v1/observations", json=_body(), headers=AS_BOB).json()["owner"] == "bob"
        assert open_.post("/v1/observations", json=_body(), headers=AS_ALICE).json()["owner"] == "alice"


def test_write_tokens_parse() -> None:
    tokens = WriteTokens.parse(f" alice:{ALICE},{BOB} ,")
    assert [o for o, _ in tokens.pairs] == ["alice", "default"]
    assert tokens.owner_of(ALICE) == "alice" and tokens.owner_of(BOB) == "default"
    assert tokens.owner_of(ALICE[:-1]) is None and tokens.owner_of("é" * 20) is None
    assert not WriteTokens.parse("").enabled and WriteTokens.parse("x:" + "t" * 16).owner_of("t" * 16) == "x"
    for bad, rule in (("short", "at least 16"), ("bad owner:" + "t" * 16, "owner"), (f"{ALICE},a:{ALICE}", "twice")):
        with pytest.raises(InvalidSpecError, match=rule) as caught:
            WriteTokens.parse(bad)
        assert caught.value.field == "PLANNER_WRITE_TOKENS"


def test_only_the_owner_deletes(client: TestClient) -> None:
    oid = client.post("/v1/observations", json=_body(), headers=AS_ALICE).json()["id"]
    r = client.delete(f"/v1/observations/{oid}", headers=AS_BOB)
    assert r.status_code == 403 and "another owner" in r.json()["detail"]
    assert client.delete(f"/v1/observations/{uuid.uuid4()}", headers=AS_ALICE).status_code == 404
    assert client.delete("/v1/observations/not-an-id", headers=AS_ALICE).status_code == 404
    r = client.delete(f"/v1/observations/{oid}", headers=AS_ALICE)
    assert r.status_code == 204 and r.content == b""
    assert client.get(f"/v1/observations/{oid}").status_code == 404
    assert client.delete(f"/v1/observations/{oid}", headers=AS_ALICE).status_code == 404


def test_a_step_faster_than_the_peak_allows_is_refused(client: TestClient) -> None:
    e = client.post("/v1/estimate", json=RUN).json()["estimate"]
    flop_per_gpu = e["hardware_tflops_per_gpu"] * e["step_time_s"]  # TFLOP per GPU per step
    fastest = flop_per_gpu / A100_BF16_PEAK
    detail = _refused(
        client.post("/v1/observations", json=_body(step_time_s=fastest * 0.99), headers=AS_ALICE),
        422,
        "measured.step_time_s",
    )
    assert "312 TFLOP/s" in detail
    assert client.post("/v1/observations", json=_body(step_time_s=fastest * 1.01), headers=AS_ALICE).status_code == 201


def test_memory_above_the_gpu_is_refused(client: TestClient) -> None:
    detail = _refused(
        client.post("/v1/observations", json=_body(peak_memory_gib=80.5), headers=AS_ALICE),
        422,
        "measured.peak_memory_gib",
    )
    assert "80 GiB" in detail
    assert client.post("/v1/observations", json=_body(peak_memory_gib=80.0), headers=AS_ALICE).status_code == 201


def test_tokens_per_s_must_match_the_step(client: TestClient) -> None:
    exact = 1536 * 2048 / 30.0
    for factor, status in ((1.049, 201), (0.951, 201), (1.051, 422), (0.949, 422)):
        r = client.post("/v1/observations", json=_body(tokens_per_s=exact * factor), headers=AS_ALICE)
        assert r.status_code == status, (factor, r.text)
        if status == 422:
            assert "5%" in _refused(r, 422, "measured.tokens_per_s")


def test_a_layout_its_framework_refuses_is_refused(client: TestClient) -> None:
    broken = {**_body(), "layout": {"tp": 8, "pp": 16, "dp": 4, "recompute": "full"}}  # 512 GPUs of 1024
    _refused(client.post("/v1/observations", json=broken, headers=AS_ALICE), 422, "layout")
    uneven = {**_body(), "layout": {**RUN["layout"], "vp": 3}}  # 96 layers / (16 stages x 3) is 2: legal
    assert client.post("/v1/observations", json=uneven, headers=AS_ALICE).status_code == 201


def test_a_layout_predicted_over_memory_may_still_be_observed(client: TestClient) -> None:
    body = {**_body(peak_memory_gib=50.0), "layout": {"tp": 8, "pp": 8, "dp": 16, "recompute": "full"}}
    body["cluster"] = {**RUN["cluster"], "memory_headroom": 0.5}  # usable 40 GiB, predicted 54
    assert client.post("/v1/estimate", json={k: body[k] for k in RUN}).json()["fits"] is False
    r = client.post("/v1/observations", json=body, headers=AS_ALICE)
    assert r.status_code == 201 and r.json()["predicted"]["peak_memory_gib"] > 40


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"measured": {"step_time_s": 0}}, "measured.step_time_s"),
        ({"measured": {"step_time_s": -1.0}}, "measured.step_time_s"),
        ({"measured": {}}, "measured.step_time_s"),
        ({"measured": {"step_time_s": 1.0, "peak_memory_gib": 0}}, "measured.peak_memory_gib"),
        ({"measured": {"step_time_s": 30.0, "peak_memory_gib": 5e-324}}, "measured.peak_memory_gib"),
        ({"measured": {"step_time_s": 5e-324}}, "measured.step_time_s"),
        ({"measured": {"step_time_s": 30.0, "tokens_per_s": 5e-324}}, "measured.tokens_per_s"),
        ({"measured": {"step_time_s": 1.0, "flops": 1}}, "measured.flops"),
        ({"measured": {"step_time_s": "1"}}, "measured.step_time_s"),
        ({"source": {"kind": "guess"}}, "source.kind"),
        ({"source": {"note": "x" * 2001}}, "source.note"),
        ({"cluster": {"num_gpus": 8, "gpu": {}}}, "cluster.gpu.name"),
        ({"model": {"preset": "no-such-model"}}, "model.preset"),
        ({"cluster": {"profile": "no-such-profile", "num_gpus": 1024}}, "cluster.profile"),
    ],
)
def test_invalid_bodies_name_the_field(client: TestClient, patch: dict[str, Any], field: str) -> None:
    _refused(client.post("/v1/observations", json={**_body(), **patch}, headers=AS_ALICE), 422, field)


def test_an_inline_profile_cannot_be_observed(client: TestClient) -> None:
    profile = load_profiles()["dgx-a100-80gb"].model_dump(exclude={"id"})
    body = {**_body(), "cluster": {"num_gpus": 1024, **profile}}
    _refused(client.post("/v1/observations", json=body, headers=AS_ALICE), 422, "cluster.profile")


def test_list_filters_and_pages(client: TestClient) -> None:
    a100 = [client.post("/v1/observations", json=_body(), headers=AS_ALICE).json()["id"] for _ in range(3)]
    h100_run = {**RUN, "cluster": {"profile": "dgx-h100", "num_gpus": 1024}, "measured": {"step_time_s": 20.0}}
    h100 = client.post("/v1/observations", json=h100_run, headers=AS_BOB).json()["id"]
    everything = client.get("/v1/observations").json()
    assert (everything["total"], everything["limit"], everything["offset"]) == (4, 50, 0)
    assert [o["id"] for o in everything["items"]] == [*a100, h100]  # oldest first
    assert [o["id"] for o in client.get("/v1/observations?profile=dgx-h100").json()["items"]] == [h100]
    assert client.get("/v1/observations?owner=alice").json()["total"] == 3
    assert client.get("/v1/observations?owner=alice&profile=dgx-h100").json()["total"] == 0
    page = client.get("/v1/observations?limit=3&offset=2").json()
    assert [o["id"] for o in page["items"]] == [a100[2], h100] and page["total"] == 4
    for query, field in (
        ("limit=201", "query.limit"),
        ("limit=0", "query.limit"),
        ("offset=-1", "query.offset"),
        ("profile=Not%20An%20Id", "query.profile"),
        ("owner=a%00b", "query.owner"),
    ):
        _refused(client.get(f"/v1/observations?{query}"), 422, field)
    assert client.get("/v1/observations?limit=200").status_code == 200


def test_a_restart_loses_nothing(database_url: str) -> None:
    with TestClient(create_app(database_url=database_url, write_tokens=TOKENS)) as first:
        ids = {first.post("/v1/observations", json=_body(), headers=AS_ALICE).json()["id"] for _ in range(3)}
    with TestClient(create_app(database_url=database_url, write_tokens=TOKENS)) as second:
        assert {o["id"] for o in second.get("/v1/observations").json()["items"]} == ids


def test_answers_follow_the_newest_stored_profile(client: TestClient, database_url: str) -> None:
    base = load_profiles()["dgx-h100"]
    assert base.calibration is not None
    store = open_store(database_url)
    request = {**RUN, "cluster": {"profile": "dgx-h100@site", "num_gpus": 1024}}
    assert client.post("/v1/estimate", json=request).status_code == 422  # not stored yet
    steps = []
    for efficiency in (0.5, 0.25):
        calibration = base.calibration.model_copy(update={"gemm_peak_efficiency": efficiency})
        site = base.model_copy(update={"id": "dgx-h100@site", "calibration": calibration})
        save_profile_version(store, site, owner="t")
        first, again = (client.post("/v1/estimate", json=request).json() for _ in range(2))
        assert (first["cached"], again["cached"]) == (False, True)
        steps.append(first["estimate"]["step_time_s"])
        listed = {p["id"]: p for p in client.get("/v1/hardware-profiles").json()}
        assert listed["dgx-h100@site"]["calibration"]["gemm_peak_efficiency"] == efficiency
        assert (
            client.get("/v1/hardware-profiles/dgx-h100@site").json()["calibration"]
            == listed["dgx-h100@site"]["calibration"]
        )
    store.close()
    assert steps[1] > steps[0]  # half the GEMM efficiency: a slower step, never the cached one


def test_observation_run_is_the_calibrations_run_type() -> None:
    body = ObservationRequest.model_validate({**_body(), "source": {"kind": "log", "file": "train.log"}})
    run = observation_run(body, load_profiles(), run_id="obs-1")
    assert (run.id, run.group, run.gpu_kind) == ("obs-1", "observations", "A100")
    assert (run.num_gpus, run.step_time_s) == (1024, 30.0)
    assert (run.layout.tp, run.layout.pp, run.layout.dp, run.layout.recompute.value) == (8, 16, 8, "full")
    assert run.model.num_layers == 96 and run.training.global_batch_size == 1536 and run.source == "train.log"
    assert run.tflops_per_gpu is None


def test_a_stored_observation_becomes_a_run_again(client: TestClient, database_url: str) -> None:
    body = {**_body(tokens_per_s=1536 * 2048 / 30.0), "source": {"kind": "log", "file": "a.log"}}
    body["layout"] = {**RUN["layout"], "micro_batch_size": 2, "sequence_parallel": True}
    oid = client.post("/v1/observations", json=body, headers=AS_ALICE).json()["id"]
    store = open_store(database_url)
    stored = get_observation(store, oid)
    store.close()
    assert stored is not None
    again = observation_request(stored)
    assert again == ObservationRequest.model_validate_json(json.dumps(body))
    run = observation_run(again, load_profiles(), run_id=oid)
    assert (run.layout.micro_batch_size, run.layout.sequence_parallel, run.source) == (2, True, "a.log")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PLANNER_WRITE_TOKENS": "short"}, "PLANNER_WRITE_TOKENS: entry 1: a token is at least 16"),
        ({"DATABASE_URL": "mysql://h/d"}, "DATABASE_URL: backend 'mysql'"),
        ({"DATABASE_URL": "postgresql://u:pw-hidden-42@127.0.0.1:1/d"}, "cannot open the database: "),
        ({"PLANNER_DB_PATH": "/proc/no/planner.db"}, "cannot open the database file"),
    ],
)
def test_serve_refuses_an_unusable_configuration(env: dict[str, str], message: str) -> None:
    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, ["serve", "--port", "1"], env=env)
    assert result.exit_code == 2 and message in result.output and "pw-hidden-42" not in result.output
    assert "Traceback" not in result.output
