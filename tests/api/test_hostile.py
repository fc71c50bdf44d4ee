"""Hostile input: whatever a client sends, the answer is a 4xx problem+json (naming the field where there is one),
never a 5xx, a hang, a traceback or a filesystem path. TestClient for bodies; a real uvicorn for the wire-level cases
(chunked bodies, slow clients, raw paths)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from api.localserver import local_service
from api.middleware import MAX_BODY_BYTES
from planner.search.constraints import MAX_VALUES_PER_KEY

PLAN: dict[str, Any] = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64},
    "training": {"global_batch_size": 64},
    "top_k": 3,
}
INLINE_CLUSTER: dict[str, Any] = {
    "num_gpus": 64,
    "gpu": {"name": "X", "memory_gib": 80, "hbm_bandwidth_gb_per_s": 2039, "peak_tflops": {"bf16": 312}},
    "node": {"gpus_per_node": 8, "nvlink_domain_gpus": 8, "nvlink_gb_per_s": 300},
    "network": {"nics_per_node": 8, "nic_gbit_per_s": 200},
}
SHAPE: dict[str, Any] = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "vocab_size": 32000,
    "seq_length": 4096,
    "moe": {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 14336},
}
LAYOUT: dict[str, Any] = {"tp": 8, "pp": 8, "dp": 1}
ESTIMATE: dict[str, Any] = {k: v for k, v in PLAN.items() if k != "top_k"} | {"layout": LAYOUT}
LEAKS = ("Traceback", "/work/", "site-packages", 'File "', "root:x:0:0")


def with_(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `base` with the dotted `path` set to `value` (missing objects are created)."""
    out: dict[str, Any] = json.loads(json.dumps(base))
    node = out
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


def assert_problem(r: httpx.Response, status: int | tuple[int, ...], field: str | None = None) -> dict[str, Any]:
    """A problem+json with the expected status, naming `field` (a key in some errors[].loc, or in the detail)."""
    statuses = (status,) if isinstance(status, int) else status
    assert r.status_code in statuses, f"{r.status_code}: {r.text[:500]}"
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers["content-type"]
    for leak in LEAKS:
        assert leak not in r.text, r.text[:500]
    body: dict[str, Any] = r.json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body), body
    assert body["status"] == r.status_code
    if field is not None:
        locs = [".".join(str(p) for p in e["loc"]) for e in body.get("errors", [])]
        named = any(field in loc.split(".") or loc.endswith(field) for loc in locs) or field in body["detail"]
        assert named, f"{field!r} not named in {locs} / {body['detail']!r}"
    return body


def post_raw(client: TestClient, path: str, raw: str | bytes, content_type: str = "application/json") -> httpx.Response:
    return client.post(path, content=raw, headers={"content-type": content_type})


# --- malformed JSON and wrong types ------------------------------------------------------------------------------

MALFORMED = ['{"model":', "not json", '{"model": {"preset": "gpt3-175b"},}', "[1, 2", '{"a": 1} trailing', "{'a': 1}"]


@pytest.mark.parametrize("raw", MALFORMED)
@pytest.mark.parametrize("path", ["/v1/plan", "/v1/estimate"])
def test_malformed_json(client: TestClient, path: str, raw: str) -> None:
    assert_problem(post_raw(client, path, raw), 422, "body")


@pytest.mark.parametrize(
    ("raw", "content_type", "status"),
    [
        (b"", "application/json", 422),  # no body at all: body is required
        (b"\xff\xfe\x00garbage", "application/json", (400, 422)),  # not UTF-8
        (json.dumps(PLAN).encode(), "text/plain", 422),  # JSON under the wrong media type is not parsed
        (b"null", "application/json", 422),
        (b"[]", "application/json", 422),
        (b'"a string"', "application/json", 422),
    ],
)
def test_bodies_that_are_not_requests(
    client: TestClient, raw: bytes, content_type: str, status: int | tuple[int, ...]
) -> None:
    assert_problem(post_raw(client, "/v1/plan", raw, content_type), status)


WRONG_TYPES = [
    ("model", [], "model"),
    ("model", "gpt3-175b", "model"),
    ("model.preset", 175, "preset"),
    ("cluster", "dgx-a100-80gb", "cluster"),
    ("cluster.num_gpus", "many", "num_gpus"),
    ("cluster.num_gpus", 1.5, "num_gpus"),
    ("cluster.num_gpus", [64], "num_gpus"),
    ("cluster.num_gpus", None, "num_gpus"),
    ("cluster.profile", ["dgx-a100-80gb"], "profile"),
    ("cluster.overrides", "fast", "overrides"),
    ("cluster.overrides", {"gpu": {"memory_gib": "lots"}}, "memory_gib"),
    ("training", 64, "training"),
    ("training.global_batch_size", {"value": 64}, "global_batch_size"),
    ("training.precision", "fp64", "precision"),
    ("training.runtime", [], "runtime"),
    ("training.runtime.flash_attention", "maybe", "flash_attention"),
    ("training.train_tokens", "1T", "train_tokens"),
    ("top_k", "ten", "top_k"),
    ("objective", "fastest", "objective"),
    ("constraints", "tp=8", "constraints"),
    ("constraints", ["tp", 8], "constraints"),
    ("constraints.tp", {"min": 1}, "tp"),
    ("constraints.tp", "eight", "tp"),
    ("constraints.recompute", "sometimes", "recompute"),
    ("constraints.zero_stage", 4, "zero_stage"),
    ("constraints.sequence_parallel", 1, "sequence_parallel"),
    ("constraints.tp", [], "tp"),
    # Values that lax parsing would coerce are refused: an integer field takes a JSON integer.
    ("cluster.num_gpus", "64", "num_gpus"),
    ("cluster.num_gpus", 64.0, "num_gpus"),
    ("cluster.num_gpus", True, "num_gpus"),
    ("cluster.overrides", {"node": {"gpus_per_node": "8"}}, "gpus_per_node"),
    ("training.global_batch_size", "64", "global_batch_size"),
    ("training.global_batch_size", True, "global_batch_size"),
    ("training.runtime.flash_attention", 1, "flash_attention"),
    ("training.runtime.flash_attention", "true", "flash_attention"),
    ("training.train_tokens", "1e12", "train_tokens"),
    ("top_k", "3", "top_k"),
    ("top_k", 3.0, "top_k"),
    ("model.seq_length", "2048", "seq_length"),
    ("constraints.tp", "8", "tp"),
    ("constraints.tp", True, "tp"),
]


@pytest.mark.parametrize(("path", "value", "field"), WRONG_TYPES, ids=[f"{p}={v!r}" for p, v, _ in WRONG_TYPES])
def test_wrong_types_in_plan(client: TestClient, path: str, value: Any, field: str) -> None:
    assert_problem(client.post("/v1/plan", json=with_(PLAN, path, value)), 422, field)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("layout", "tp8", "layout"),
        ("layout.tp", "8x", "tp"),
        ("layout.zero_stage", 5, "zero_stage"),
        ("layout.recompute", "partial", "recompute"),
        ("layout.layers_per_stage", "12,12", "layers_per_stage"),
        ("layout.layers_per_stage", [12, "twelve"], "layers_per_stage"),
        ("layout.sequence_parallel", [], "sequence_parallel"),
        ("layout.tp", "8", "tp"),
        ("layout.pp", 8.0, "pp"),
        ("layout.dp", True, "dp"),
        ("layout.sequence_parallel", "false", "sequence_parallel"),
        ("layout.zero_stage", True, "zero_stage"),
        ("model", SHAPE | {"num_layers": "32"}, "num_layers"),
        ("model", SHAPE | {"moe": {"num_experts": 8.0, "top_k": 2, "expert_ffn_hidden_size": 14336}}, "num_experts"),
    ],
)
def test_wrong_types_in_estimate(client: TestClient, path: str, value: Any, field: str) -> None:
    assert_problem(client.post("/v1/estimate", json=with_(ESTIMATE, path, value)), 422, field)


# --- negative, zero and huge numbers -----------------------------------------------------------------------------

NUMBERS = [
    ("cluster.num_gpus", -1, "num_gpus"),
    ("cluster.num_gpus", 0, "num_gpus"),
    ("cluster.num_gpus", 10**12, "num_gpus"),
    ("cluster.num_gpus", 10**400, "num_gpus"),
    ("training.global_batch_size", 10**12, "global_batch_size"),
    ("training.global_batch_size", -64, "global_batch_size"),
    ("training.train_tokens", -1.0, "train_tokens"),
    ("training.train_tokens", 10**400, "train_tokens"),
    ("top_k", 10**6, "top_k"),
    ("top_k", 0, "top_k"),
    ("model", SHAPE | {"hidden_size": 10**9}, "hidden_size"),
    ("model", SHAPE | {"num_layers": 10**30}, "num_layers"),
    ("model", SHAPE | {"num_attention_heads": -32}, "num_attention_heads"),
    ("model", SHAPE | {"seq_length": 10**12}, "seq_length"),
    ("model", SHAPE | {"vocab_size": 10**12}, "vocab_size"),
    ("model", SHAPE | {"moe": {"num_experts": 10**9, "top_k": 2, "expert_ffn_hidden_size": 1}}, "num_experts"),
    ("model.seq_length", 10**9, "seq_length"),
    ("cluster.overrides", {"gpu": {"memory_gib": 10**9}}, "memory_gib"),
    ("cluster.overrides", {"network": {"nics_per_node": -8}}, "nics_per_node"),
    ("constraints.tp", 10**12, "tp"),
    ("constraints.tp", -8, "tp"),
]


@pytest.mark.parametrize(("path", "value", "field"), NUMBERS, ids=[f"{p}:{f}" for p, _, f in NUMBERS])
def test_out_of_range_numbers(client: TestClient, path: str, value: Any, field: str) -> None:
    assert_problem(client.post("/v1/plan", json=with_(PLAN, path, value)), 422, field)


@pytest.mark.parametrize(
    "layout",
    [
        {"tp": 1_048_576, "pp": 1_048_576, "dp": 1_048_576, "cp": 1_048_576},  # 2**80 ranks
        {"tp": 579, "pp": 26, "dp": 15726, "cp": 241},  # found by the fuzzer: 57e9 ranks, 425 GiB of rank ids
        {"tp": 1, "pp": 1, "dp": 1, "vp": 10**6},
        {"tp": -1, "pp": 1, "dp": 1},
        {"tp": 1, "pp": 1, "dp": 1, "micro_batch_size": 10**9},
        {"tp": 1, "pp": 2, "dp": 1, "layers_per_stage": [1] * 5000},
        {"tp": 8, "pp": 8, "dp": 1, "layers_per_stage": [-1] * 8},  # once a 200 with a negative peak memory
        {"tp": 8, "pp": 8, "dp": 1, "layers_per_stage": [0] * 8},
        {"tp": 8, "pp": 8, "dp": 1, "layers_per_stage": [10**9] * 8},
        {"tp": 8, "pp": 8, "dp": 1, "num_microbatches": 10**30},
        {"tp": 8, "pp": 8, "dp": 1, "num_microbatches": 0},
    ],
)
def test_out_of_range_layouts(client: TestClient, layout: dict[str, Any]) -> None:
    assert_problem(client.post("/v1/estimate", json=with_(ESTIMATE, "layout", layout)), 422, "layout")


def test_a_layout_that_breaks_rules_is_estimated_not_refused(client: TestClient) -> None:
    body = with_(ESTIMATE, "layout", {"tp": 1024, "pp": 1024, "dp": 1, "num_microbatches": 7})
    r = client.post("/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["fits"] is False and r.json()["violations"]


# --- text that cannot be encoded ---------------------------------------------------------------------------------

SURROGATES = [
    ("/v1/plan", '"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64, "overrides": {"name": "\\ud800"}}', "name"),
    ("/v1/plan", '"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64, "overrides": {"\\udc00": 1}}', "overrides"),
    ("/v1/plan", '"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64, "name": "x\\ud800y"}', "name"),
    ("/v1/estimate", '"cluster": {"profile": "dgx-a100-80gb\\udfff", "num_gpus": 64}', "profile"),
]


@pytest.mark.parametrize(("path", "cluster", "field"), SURROGATES)
def test_a_lone_surrogate_is_a_422_naming_the_field(client: TestClient, path: str, cluster: str, field: str) -> None:
    """JSON can escape a lone UTF-16 surrogate; no UTF-8 writer (cache key, log, response) accepts it."""
    body = dict(PLAN) if path == "/v1/plan" else dict(ESTIMATE)
    body.pop("cluster")
    raw = json.dumps(body)[:-1] + ", " + cluster + "}"
    assert_problem(post_raw(client, path, raw), 422, field)


def test_a_lone_surrogate_deep_in_an_hf_config_is_a_422(client: TestClient) -> None:
    raw = json.dumps(with_(PLAN, "model", {"hf_config": {"architectures": ["X"]}})).replace('"X"', '"\\ud800"')
    body = assert_problem(post_raw(client, "/v1/plan", raw), 422, "architectures")
    assert body["errors"][0]["loc"] == ["body", "model", "hf_config", "architectures", 0]


def test_paired_surrogates_are_ordinary_text(client: TestClient) -> None:
    raw = json.dumps(with_(PLAN, "cluster.overrides", {"name": "\U0001f680 fast"}))
    assert client.post("/v1/plan", content=raw, headers={"content-type": "application/json"}).status_code == 200


# --- NaN and Infinity --------------------------------------------------------------------------------------------

RAW_NON_FINITE = [
    ('"train_tokens": NaN', "train_tokens"),
    ('"train_tokens": Infinity', "train_tokens"),
    ('"train_tokens": -Infinity', "train_tokens"),
    ('"train_tokens": 1e400', "train_tokens"),  # parses as inf
    ('"global_batch_size": NaN', "global_batch_size"),
    ('"global_batch_size": Infinity', "global_batch_size"),
]


@pytest.mark.parametrize(("literal", "field"), RAW_NON_FINITE)
def test_nan_and_infinity_literals(client: TestClient, literal: str, field: str) -> None:
    training = '{"global_batch_size": 64, ' + literal + "}" if "global" not in literal else "{" + literal + "}"
    raw = '{"model": {"preset": "gpt3-175b"}, "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64}, '
    raw += f'"training": {training}}}'
    assert_problem(post_raw(client, "/v1/plan", raw), 422, field)


@pytest.mark.parametrize(
    ("cluster", "field"),
    [
        ('{"profile": "dgx-a100-80gb", "num_gpus": NaN}', "num_gpus"),
        ('{"profile": "dgx-a100-80gb", "num_gpus": 64, "overrides": {"gpu": {"memory_gib": NaN}}}', "memory_gib"),
        ('{"profile": "dgx-a100-80gb", "num_gpus": 64, "overrides": {"node": {"nvlink_gb_per_s": Infinity}}}', "node"),
        ('{"profile": "dgx-h100", "num_gpus": 64, "overrides": {"efficiency": {"network": NaN}}}', "network"),
    ],
)
def test_nan_in_the_cluster(client: TestClient, cluster: str, field: str) -> None:
    raw = f'{{"model": {{"preset": "gpt3-175b"}}, "cluster": {cluster}, "training": {{"global_batch_size": 64}}}}'
    assert_problem(post_raw(client, "/v1/plan", raw), 422, field)


def test_nan_in_hf_config(client: TestClient) -> None:
    raw = '{"model": {"hf_config": {"model_type": "llama", "num_hidden_layers": NaN}}, '
    raw += '"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64}, "training": {"global_batch_size": 64}}'
    assert_problem(post_raw(client, "/v1/plan", raw), 422, "num_hidden_layers")


# numpy warns on the overflow (in production a log line, here an error): the answer is what is checked.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("key", ["gpu.hbm_bandwidth_gb_per_s", "node.nvlink_gb_per_s", "network.nic_gbit_per_s"])
@pytest.mark.parametrize("path", ["/v1/plan", "/v1/estimate"])
def test_rates_so_small_that_times_overflow_are_refused(client: TestClient, path: str, key: str) -> None:
    """Within the schema (> 0) but a denormal: every time would be inf, which JSON writes as null. 422 instead."""
    cluster = with_(INLINE_CLUSTER, key, 5e-324)
    if key != "gpu.hbm_bandwidth_gb_per_s":  # make sure the layout crosses the slow link
        cluster = with_(cluster, "gpu.hbm_bandwidth_gb_per_s", 5e-324)
    body = with_(PLAN if path == "/v1/plan" else ESTIMATE, "cluster", cluster)
    r = client.post(path, json=body)
    assert "null" not in r.text.replace('"instance":null', "") or r.status_code != 200, r.text[:300]
    assert_problem(r, 422, "cluster")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_days_to_train_overflow_is_refused(client: TestClient) -> None:
    cluster = with_(INLINE_CLUSTER, "gpu.peak_tflops.bf16", 1e-300)
    body = with_(with_(ESTIMATE, "cluster", cluster), "training.train_tokens", 1e16)
    r = client.post("/v1/estimate", json=body)
    assert_problem(r, 422)


# --- unknown fields at every level -------------------------------------------------------------------------------

UNKNOWN = [
    ("bogus", PLAN),
    ("model.bogus", PLAN),
    ("cluster.bogus", PLAN),
    ("training.bogus", PLAN),
    ("training.runtime.bogus", PLAN),
    ("cluster.overrides.bogus", PLAN),
    ("cluster.overrides.gpu.bogus", PLAN),
    ("cluster.overrides.gpu.peak_tflops.bogus", PLAN),
    ("cluster.overrides.node.bogus", PLAN),
    ("cluster.overrides.network.bogus", PLAN),
    ("cluster.overrides.latency.bogus", PLAN),
    ("cluster.overrides.efficiency.bogus", PLAN),
    ("cluster.gpu.bogus", with_(PLAN, "cluster", INLINE_CLUSTER)),
    ("cluster.gpu.peak_tflops.bogus", with_(PLAN, "cluster", INLINE_CLUSTER)),
    ("cluster.node.bogus", with_(PLAN, "cluster", INLINE_CLUSTER)),
    ("cluster.network.bogus", with_(PLAN, "cluster", INLINE_CLUSTER)),
    ("cluster.latency.bogus", with_(PLAN, "cluster", INLINE_CLUSTER)),
    ("model.bogus", with_(PLAN, "model", SHAPE)),
    ("model.moe.bogus", with_(PLAN, "model", SHAPE)),
    ("model.bogus", with_(PLAN, "model", {"hf_config": {"model_type": "llama"}})),
    ("constraints.bogus", PLAN),
    ("layout.bogus", ESTIMATE),
    ("bogus", ESTIMATE),
]


@pytest.mark.parametrize(("path", "base"), UNKNOWN, ids=[f"{p}-{i}" for i, (p, _) in enumerate(UNKNOWN)])
def test_unknown_fields_are_rejected(client: TestClient, path: str, base: dict[str, Any]) -> None:
    route = "/v1/estimate" if "layout" in base else "/v1/plan"
    assert_problem(client.post(route, json=with_(base, path, 1)), 422, "bogus")


def test_unknown_keys_in_hf_config_are_ignored_as_documented(client: TestClient) -> None:
    """Real config.json files carry dozens of keys the planner does not read (planner/hf_config.py)."""
    config = {
        "model_type": "llama",
        "num_hidden_layers": 4,
        "hidden_size": 512,
        "num_attention_heads": 8,
        "intermediate_size": 1024,
        "vocab_size": 1000,
        "max_position_embeddings": 512,
        "rope_scaling": {"type": "llama3", "factor": 8.0},
        "bogus": [1, 2, 3],
    }
    r = client.post("/v1/plan", json=with_(PLAN, "model", {"hf_config": config}) | {"top_k": 1})
    assert r.status_code == 200, r.text


# --- unknown and path-like ids -----------------------------------------------------------------------------------

ODD_IDS = [
    "nope",
    "../../etc/passwd",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2fetc%2fpasswd",
    "/etc/passwd",
    "gpt3-175b\x00",
    "gpt3-175b/../llama3-8b",
    "GPT3-175B",
    "x" * 10_000,
    "",
    " ",
    "dgx-a100-80gb.json",
    "__init__",
]


@pytest.mark.parametrize("value", ODD_IDS, ids=range(len(ODD_IDS)))
def test_odd_preset_and_profile_ids_in_bodies(client: TestClient, value: str) -> None:
    assert_problem(client.post("/v1/plan", json=with_(PLAN, "model.preset", value)), 422, "preset")
    assert_problem(client.post("/v1/plan", json=with_(PLAN, "cluster.profile", value)), 422, "profile")


@pytest.mark.parametrize(
    "path",
    [
        "/v1/models/nope",
        "/v1/models/..%2F..%2Fetc%2Fpasswd",
        "/v1/models/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/v1/models/%00",
        "/v1/models/" + "x" * 5000,
        "/v1/hardware-profiles/nope",
        "/v1/hardware-profiles/..%2F..%2Fhardware_profiles%2Fdgx-h100",
        "/v1/hardware-profiles/dgx-h100.json",
        "/v1/hardware-profiles/%2e%2e",
        "/v1/hardware-profiles/" + "y" * 5000,
        "/v1/nope",
        "/v1/../../etc/passwd",
    ],
)
def test_odd_ids_in_paths(client: TestClient, path: str) -> None:
    assert_problem(client.get(path), 404)


@pytest.mark.parametrize(("method", "path", "allowed"), [("PUT", "/v1/plan", "POST"), ("DELETE", "/livez", "GET")])
def test_wrong_method_is_405_with_allow(client: TestClient, method: str, path: str, allowed: str) -> None:
    r = client.request(method, path)
    assert_problem(r, 405)
    assert allowed in r.headers["allow"]  # RFC 9110: a 405 names the methods that are allowed


def test_openapi_documents_problem_json_errors(client: TestClient) -> None:
    for path, operations in client.get("/openapi.json").json()["paths"].items():
        for method, operation in operations.items():
            content = operation["responses"]["4XX"]["content"]
            assert list(content) == ["application/problem+json"], (method, path)


# --- deep nesting ------------------------------------------------------------------------------------------------


def _nested_objects(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [40, 500, 10_000])
def test_deeply_nested_hf_config(client: TestClient, depth: int) -> None:
    raw = '{"model": {"hf_config": ' + _nested_objects(depth) + '}, "cluster": {"profile": "dgx-a100-80gb", '
    raw += '"num_gpus": 64}, "training": {"global_batch_size": 64}}'
    started = time.perf_counter()
    r = post_raw(client, "/v1/plan", raw)
    assert time.perf_counter() - started < 5
    # Past the JSON parser's own depth limit the body is unparseable (400); below it, too deep (422).
    assert_problem(r, (400, 422), None if r.status_code == 400 else "hf_config")


@pytest.mark.parametrize("depth", [40, 500, 10_000])
def test_deeply_nested_overrides(client: TestClient, depth: int) -> None:
    raw = json.dumps(PLAN).replace('"num_gpus": 64}', '"num_gpus": 64, "overrides": ' + _nested_objects(depth) + "}")
    r = post_raw(client, "/v1/plan", raw)
    assert_problem(r, (400, 422), None if r.status_code == 400 else "overrides")


def test_shallow_free_form_objects_still_work(client: TestClient) -> None:
    body = with_(PLAN, "cluster.overrides", {"network": {"nics_per_node": 4}})
    assert client.post("/v1/plan", json=body).status_code == 200


@pytest.mark.parametrize("depth", [1000, 100_000])
@pytest.mark.parametrize("path", ["/v1/plan", "/v1/estimate"])
def test_deeply_nested_top_level_array(client: TestClient, path: str, depth: int) -> None:
    started = time.perf_counter()
    r = post_raw(client, path, "[" * depth + "]" * depth)
    assert time.perf_counter() - started < 5
    assert_problem(r, (400, 422))


# --- sizes -------------------------------------------------------------------------------------------------------


def test_ten_megabyte_body_is_413(client: TestClient) -> None:
    raw = json.dumps(with_(PLAN, "model.name", "x" * 10_000_000))
    assert_problem(post_raw(client, "/v1/plan", raw), 413)


def test_a_lying_content_length_cannot_smuggle_a_big_body(client: TestClient) -> None:
    raw = b"[" * (MAX_BODY_BYTES + 10)
    r = client.post("/v1/plan", content=raw, headers={"content-type": "application/json", "content-length": "10"})
    assert r.status_code in (400, 413, 422), r.text[:300]


@pytest.mark.parametrize("key", ["tp", "recompute", "micro_batch_size"])
def test_huge_constraint_lists(client: TestClient, key: str) -> None:
    values: list[Any] = ["full"] * 100_000 if key == "recompute" else list(range(1, 100_001))
    r = client.post("/v1/plan", json=with_(PLAN, f"constraints.{key}", values))
    assert_problem(r, 422, key)


def test_the_longest_constraint_list_allowed_is_fast(client: TestClient) -> None:
    values = [2**i for i in range(21)] + list(range(3, 3 + MAX_VALUES_PER_KEY - 21))
    started = time.perf_counter()
    r = client.post("/v1/plan", json=with_(PLAN, "constraints.tp", values[:MAX_VALUES_PER_KEY]))
    assert r.status_code == 200, r.text[:300]
    assert time.perf_counter() - started < 2


def test_many_unknown_constraint_keys(client: TestClient) -> None:
    r = client.post("/v1/plan", json=with_(PLAN, "constraints", {f"k{i}": 1 for i in range(50_000)}))
    assert_problem(r, 422, "constraints")


# --- hf_config with wrong types ----------------------------------------------------------------------------------

LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
}
HF_WRONG = [
    ("num_hidden_layers", "32"),
    ("num_hidden_layers", 32.5),
    ("num_hidden_layers", True),
    ("num_hidden_layers", -1),
    ("num_hidden_layers", 10**12),
    ("num_hidden_layers", None),
    ("num_hidden_layers", {"n": 32}),
    ("num_hidden_layers", [32]),
    ("hidden_size", 10**9),
    ("num_attention_heads", 0),
    ("num_key_value_heads", 7),
    ("vocab_size", "big"),
    ("tie_word_embeddings", "yes"),
    ("model_type", 123),
    ("model_type", ["llama"]),
    ("model_type", "bert"),
    ("max_position_embeddings", "8192"),
    ("max_position_embeddings", -1),
]


@pytest.mark.parametrize(("key", "value"), HF_WRONG, ids=[f"{k}={v!r}"[:40] for k, v in HF_WRONG])
def test_hf_config_with_wrong_types(client: TestClient, key: str, value: Any) -> None:
    r = client.post("/v1/plan", json=with_(PLAN, "model", {"hf_config": LLAMA | {key: value}}))
    assert_problem(r, 422, "hf_config")


@pytest.mark.parametrize(
    "config",
    [
        "a string",
        [LLAMA],
        42,
        None,
        {},
        {"architectures": "LlamaForCausalLM"},
        {"architectures": [{"name": "LlamaForCausalLM"}]},
        {"model_type": "qwen2_moe"} | {k: v for k, v in LLAMA.items() if k != "model_type"},
        {**LLAMA, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8}
        | {"mlp_only_layers": "all"},
        {**LLAMA, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8}
        | {"mlp_only_layers": [0, 1, 99]},
        {**LLAMA, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 9, "moe_intermediate_size": 8},
        {**LLAMA, "model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2}
        | {"moe_intermediate_size": 8, "n_shared_experts": -1, "first_k_dense_replace": 3},
        {**LLAMA, "model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2}
        | {"moe_intermediate_size": 8, "n_shared_experts": 1, "first_k_dense_replace": 3, "moe_layer_freq": 0},
        {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257, "n_positions": "1k"},
    ],
    ids=range(14),
)
def test_hf_configs_that_are_not_configs(client: TestClient, config: Any) -> None:
    r = client.post("/v1/plan", json=with_(PLAN, "model", {"hf_config": config}))
    assert_problem(r, 422, "hf_config")


# --- the wire: a real server -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, int]]:
    with local_service() as url:
        yield url, int(url.rsplit(":", 1)[1])


def _raw_request(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_chunked_body_over_the_limit_is_413(server: tuple[str, int]) -> None:
    url, _ = server

    def body() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // 10_000 + 20):
            yield b"[" * 10_000

    r = httpx.post(url + "/v1/plan", content=body(), headers={"content-type": "application/json"}, timeout=10)
    assert "content-length" not in r.request.headers and r.request.headers["transfer-encoding"] == "chunked"
    assert_problem(r, 413)
    assert httpx.get(url + "/livez", timeout=5).status_code == 200


def test_ten_megabytes_over_the_wire_is_413(server: tuple[str, int]) -> None:
    url, _ = server
    r = httpx.post(
        url + "/v1/plan", content=b"x" * 10_000_000, headers={"content-type": "application/json"}, timeout=10
    )
    assert_problem(r, 413)


def test_slow_client_does_not_block_others(server: tuple[str, int]) -> None:
    """Half a request, then silence: other connections are served meanwhile."""
    url, port = server
    body = json.dumps(PLAN).encode()
    head = f"POST /v1/plan HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    stalled = []
    try:
        for partial in (head.encode()[:30], (head + "\r\n\r\n").encode() + body[: len(body) // 2]):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(partial)
            stalled.append(s)
        time.sleep(0.5)
        for _ in range(3):
            started = time.perf_counter()
            r = httpx.get(url + "/livez", timeout=5)
            assert r.status_code == 200
            assert time.perf_counter() - started < 3
        r = httpx.post(url + "/v1/plan", json=PLAN, timeout=10)
        assert r.status_code == 200
    finally:
        for s in stalled:
            s.close()
    assert httpx.get(url + "/livez", timeout=5).status_code == 200


@pytest.mark.parametrize(
    "target",
    [
        b"/v1/models/../../etc/passwd",
        b"/v1/hardware-profiles/../../../../etc/passwd",
        b"/v1/hardware-profiles/..%2f..%2f..%2fetc%2fpasswd",
        b"/../../../etc/passwd",
        b"/v1/models/%252e%252e%252fetc%252fpasswd",
    ],
)
def test_raw_path_traversal(server: tuple[str, int], target: bytes) -> None:
    _, port = server
    reply = _raw_request(port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404"), head
    assert b"application/problem+json" in head.lower()
    for leak in LEAKS:
        assert leak.encode() not in body


@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n", 400),
        (b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: -5\r\n", 400),
        (b"POST /v1/plan HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n", 400),
        (b"GARBAGE\r\n", 400),
        (b"GET /livez HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 100_000 + b"\r\n", 431),
    ],
    ids=["content-length-abc", "content-length-negative", "two-content-lengths", "garbage", "100k-header"],
)
def test_malformed_http_is_a_problem(server: tuple[str, int], head: bytes, status: int) -> None:
    """What h11 refuses gets problem+json from the protocol layer (`api.protocol`), then the connection closes."""
    url, port = server
    reply = _raw_request(port, head + b"Connection: close\r\n\r\n{}")
    head_out, _, body = reply.partition(b"\r\n\r\n")
    assert head_out.startswith(b"HTTP/1.1 %d " % status), reply[:300]
    assert b"content-type: application/problem+json" in head_out.lower() and b"connection: close" in head_out.lower()
    problem = json.loads(body)
    assert problem["status"] == status and problem["detail"].startswith("invalid HTTP request: "), problem
    assert b"Traceback" not in reply
    assert httpx.get(url + "/livez", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/v1/plan", '{"top_k": %s}', ["body", "top_k"]),
        ("/v1/plan", '{"cluster": {"profile": "dgx-h100", "num_gpus": -%s}}', ["body", "cluster", "num_gpus"]),
        (
            "/v1/plan",
            '{"model": {"hf_config": {"a": [1, {"n_layer": %s}]}}}',
            ["body", "model", "hf_config", "a", 1, "n_layer"],
        ),
        ("/v1/estimate", '{"layout": {"layers_per_stage": [1, %s]}}', ["body", "layout", "layers_per_stage", 1]),
    ],
    ids=["top_k", "negative-num_gpus", "deep-in-hf_config", "estimate-list"],
)
def test_an_integer_too_long_for_python_is_a_422_naming_its_field(
    client: TestClient, path: str, body: str, loc: list[str | int]
) -> None:
    """5,000 digits pass JSON's grammar but not Python's int() limit (4300): the field is named, not a bare 400."""
    r = post_raw(client, path, body % ("7" * 5000))
    problem = assert_problem(r, 422)
    assert problem["errors"] == [{"loc": loc, "msg": "an integer of 5000 digits; at most 4300 digits are read"}]


def test_an_integer_just_under_the_limit_is_parsed(client: TestClient) -> None:
    """4300 digits convert: the field's own rule answers (top_k has a maximum), not the digit limit."""
    r = client.post("/v1/plan", json=with_(PLAN, "top_k", int("7" * 4300)))
    problem = assert_problem(r, 422, "top_k")
    assert "digits" not in problem["detail"]


# --- the model forms are told apart by their keys ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "loc"),
    [
        ({k: v for k, v in SHAPE.items() if k != "vocab_size"}, ["body", "model", "vocab_size"]),
        (SHAPE | {"num_layers": "32"}, ["body", "model", "num_layers"]),
        ({"preset": 175}, ["body", "model", "preset"]),
        ({"preset": "gpt3-175b", "extra": 1}, ["body", "model", "extra"]),
        ({"hf_config": []}, ["body", "model", "hf_config"]),
        ("gpt3-175b", ["body", "model"]),
    ],
)
def test_a_broken_model_is_reported_once_against_its_own_field(
    client: TestClient, model: Any, loc: list[str | int]
) -> None:
    """A shape missing vocab_size says so, first and only: not 'preset: Field required' plus extra-input noise."""
    body = assert_problem(client.post("/v1/plan", json=with_(PLAN, "model", model)), 422)
    assert [e["loc"] for e in body["errors"]] == [loc]
