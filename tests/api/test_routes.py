"""Every route of docs/api.md answers as specified (TestClient; the lifespan runs)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.middleware import MAX_BODY_BYTES
from planner.calibration.accuracy import load_bands

PLAN = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 64},
    "training": {"global_batch_size": 64, "precision": "bf16"},
    "top_k": 3,
}
LAYOUT_KEYS = {
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vp",
    "micro_batch_size",
    "num_microbatches",
    "recompute",
    "sequence_parallel",
    "zero_stage",
    "layers_per_stage",
}
ESTIMATE_KEYS = {
    "step_time_s",
    "tokens_per_s",
    "model_tflops_per_gpu",
    "hardware_tflops_per_gpu",
    "mfu",
    "bubble_fraction",
    "time_breakdown_s",
    "memory",
}
TIME_KEYS = {
    "compute",
    "recompute",
    "bubble",
    "tp_comm",
    "pp_comm",
    "dp_comm",
    "cp_comm",
    "ep_comm",
    "offload",
    "optimizer",
}
MEMORY_KEYS = {"parameters", "gradients", "optimizer_states", "activations", "other"}


def _problem(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert {"type", "title", "status", "detail", "instance"} <= set(body)
    assert body["status"] == status
    assert "Traceback" not in response.text and "/work/" not in response.text
    return body


def _check_plan(p: dict[str, Any]) -> None:
    assert set(p["layout"]) >= LAYOUT_KEYS
    assert set(p["estimate"]) >= ESTIMATE_KEYS
    assert set(p["estimate"]["time_breakdown_s"]) == TIME_KEYS
    assert set(p["estimate"]["memory"]) >= {"peak_gib", "capacity_gib", "breakdown_gib"}
    assert set(p["estimate"]["memory"]["breakdown_gib"]) == MEMORY_KEYS
    x = p["layout"]
    assert x["tp"] * x["pp"] * x["dp"] * x["cp"] == p["num_gpus"]
    assert set(p["launch"]) >= {"megatron", "torchtitan", "nemo"}
    assert p["launch"]["megatron"]["framework_version"]


def test_plan_preset(client: TestClient) -> None:
    r = client.post("/v1/plan", json=PLAN)
    assert r.status_code == 200, r.text
    body = r.json()
    assert [p["rank"] for p in body["plans"]] == [1, 2, 3]
    steps = [p["estimate"]["step_time_s"] for p in body["plans"]]
    tied = [p["equivalent"] for p in body["plans"]]
    assert tied == sorted(tied, reverse=True)  # equivalent plans (simplest first) lead, the rest by step time
    rest = [s for s, e in zip(steps, tied, strict=True) if not e]
    assert rest == sorted(rest) and all(
        s <= min(steps) * (1 + body["equivalent_within"]) for s, e in zip(steps, tied, strict=True) if e
    )
    for p in body["plans"]:
        _check_plan(p)
    assert body["baseline"]["rule"].startswith("tp = gpus_per_node")
    assert body["baseline"]["speedup_of_best"] >= 1.0
    assert body["search"]["candidates"] >= body["search"]["feasible"] > 0
    assert body["cached"] is False
    assert r.headers["x-request-id"]


def test_identical_request_is_cached(client: TestClient) -> None:
    request = PLAN | {"top_k": 2}
    first, second = client.post("/v1/plan", json=request), client.post("/v1/plan", json=request)
    assert first.json()["cached"] is False and second.json()["cached"] is True
    assert first.json()["plans"] == second.json()["plans"]


def test_plan_explicit_shape_and_overrides(client: TestClient) -> None:
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000, "seq_length": 2048}
    request = {
        **PLAN,
        "model": shape,
        "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 16, "overrides": {"network": {"nics_per_node": 4}}},
    }
    r = client.post("/v1/plan", json=request)
    assert r.status_code == 200, r.text
    assert r.json()["plans"]


def test_inline_profile(client: TestClient) -> None:
    profile = client.get("/v1/hardware-profiles/dgx-h100").json()
    inline = {k: profile[k] for k in ("gpu", "node", "network")} | {"num_gpus": 16}
    r = client.post("/v1/plan", json={**PLAN, "cluster": inline})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("patch", "loc"),
    [
        (
            {"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 16, "overrides": {"network": {"nics_per_node": -1}}}},
            ["cluster", "overrides", "network", "nics_per_node"],
        ),
        ({"model": {"preset": "no-such-model"}}, ["model", "preset"]),
        ({"cluster": {"profile": "no-such-gpu", "num_gpus": 8}}, ["cluster", "profile"]),
        ({"constraints": {"tq": 2}}, ["constraints", "tq"]),
        ({"training": {"global_batch_size": 0}}, ["body", "training", "global_batch_size"]),
        ({"top_k": 1000}, ["body", "top_k"]),
    ],
)
def test_bad_plan_requests_name_the_field(client: TestClient, patch: dict[str, Any], loc: list[str]) -> None:
    body = _problem(client.post("/v1/plan", json=PLAN | patch), 422)
    assert any(e["loc"][: len(loc)] == loc for e in body["errors"]), body


def test_estimate_valid_and_rule_breaking(client: TestClient) -> None:
    base = {k: PLAN[k] for k in ("model", "cluster", "training")}
    good = {"tp": 8, "pp": 8, "dp": 1, "recompute": "selective", "sequence_parallel": True, "zero_stage": 1}
    r = client.post("/v1/estimate", json=base | {"layout": good})
    assert r.status_code == 200, r.text
    assert r.json()["fits"] is True and r.json()["violations"] == []
    assert set(r.json()["layout"]) >= LAYOUT_KEYS
    bad = good | {"dp": 3, "num_microbatches": 5}
    r = client.post("/v1/estimate", json=base | {"layout": bad})
    assert r.status_code == 200
    rules = {v["rule"] for v in r.json()["violations"]}
    assert r.json()["fits"] is False and {"world_size", "num_microbatches"} <= rules


@pytest.mark.parametrize(
    ("router", "message"),
    [
        ({"router_expert_bias": True}, "router_expert_bias needs router_score_function sigmoid"),
        ({"router_score_function": "sigmoid", "router_pre_softmax": True}, "router_pre_softmax applies to a softmax"),
        ({"router_num_groups": 8}, "router_num_groups and router_group_topk are set together or not at all"),
        ({"router_num_groups": 3, "router_group_topk": 1}, "router_num_groups(3) must divide num_experts(16)"),
        ({"router_num_groups": 4, "router_group_topk": 5}, "router_group_topk(5) must be <= router_num_groups(4)"),
        ({"router_num_groups": 8, "router_group_topk": 3}, "top_k(4) must be a multiple of router_group_topk(3)"),
        ({"router_num_groups": 8, "router_group_topk": 1}, "top_k(4) must be <= router_group_topk(1) x experts per"),
        ({"router_score_before_experts": True}, "router_score_before_experts needs top_k 1"),
        ({"router_score_function": "sqrtsoftplus"}, "Input should be 'softmax' or 'sigmoid'"),
        ({"router_topk_scaling_factor": 0}, "Input should be greater than 0"),
        ({"router_load_balancing": "none", "router_aux_loss_coeff": 0.01}, "router_aux_loss_coeff(0.01) weighs no"),
        ({"router_aux_loss_coeff": 1.5}, "Input should be less than or equal to 1"),
        ({"router_aux_loss_coeff": -0.01}, "Input should be greater than or equal to 0"),
        ({"router_load_balancing": "sinkhorn"}, "Input should be 'aux_loss', 'seq_aux_loss', 'global_aux_loss' or"),
    ],
)
def test_an_inconsistent_router_is_refused_naming_the_rule(
    client: TestClient, router: dict[str, Any], message: str
) -> None:
    """MoESpec's router fields are checked at the edge as Megatron-Core's TransformerConfig checks them."""
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000, "seq_length": 2048}
    moe = {"num_experts": 16, "top_k": 4, "expert_ffn_hidden_size": 512} | router
    base = {"cluster": {"profile": "dgx-h100", "num_gpus": 8}, "training": {"global_batch_size": 64}}
    body = _problem(client.post("/v1/plan", json=base | {"model": shape | {"moe": moe}}), 422)
    assert any(e["loc"][:3] == ["body", "model", "moe"] and message in e["msg"] for e in body["errors"]), body


def test_a_window_pattern_without_a_window_is_refused_in_the_validators_words(client: TestClient) -> None:
    """The 422 names the field and the rule, without pydantic's "Value error, " prefix (`validator_message`)."""
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000, "seq_length": 2048}
    base = {"cluster": {"profile": "dgx-h100", "num_gpus": 8}, "training": {"global_batch_size": 64}}
    body = _problem(client.post("/v1/plan", json=base | {"model": shape | {"sliding_window_pattern": 2}}), 422)
    rule = "sliding_window_pattern(2) needs sliding_window: it says which layers attend fully among windowed ones"
    assert body["errors"][0] == {"loc": ["body", "model"], "msg": rule}
    assert body["detail"] == f"body.model: {rule}"
    ok = client.post("/v1/plan", json=base | {"model": shape | {"sliding_window": 512, "sliding_window_pattern": 2}})
    assert ok.status_code == 200, ok.text
    assert ok.json()["model"]["shape"]["sliding_window"] == 512


def test_head_dim_frees_hidden_from_heads(client: TestClient) -> None:
    """hidden_size need not divide by the heads when head_dim says their width (Megatron-LM --kv-channels)."""
    shape = {"num_layers": 8, "hidden_size": 1000, "num_attention_heads": 16, "vocab_size": 32000, "seq_length": 2048}
    base = {"cluster": {"profile": "dgx-a100-80gb", "num_gpus": 8}, "training": {"global_batch_size": 64}}
    body = _problem(client.post("/v1/plan", json=base | {"model": shape}), 422)
    assert "hidden_size(1000) % num_attention_heads(16) = 8, must be 0 unless head_dim is given" in str(body)
    layout = {"tp": 2, "pp": 1, "dp": 4}
    wide = client.post("/v1/estimate", json=base | {"model": shape | {"head_dim": 128}, "layout": layout})
    narrow = client.post("/v1/estimate", json=base | {"model": shape | {"head_dim": 32}, "layout": layout})
    assert wide.status_code == 200 and narrow.status_code == 200, (wide.text, narrow.text)
    # 16 heads of 128 (q 2048) against 16 of 32 (q 512): Q, K, V grow by h * 3 * 1536, O by 1536 * h, per layer.
    grown = wide.json()["model"]["total_params"] - narrow.json()["model"]["total_params"]
    assert grown == 8 * (1000 * 3 * 1536 + 1536 * 1000)
    assert wide.json()["model"]["shape"]["head_dim"] == 128
    assert wide.json()["estimate"]["step_time_s"] > narrow.json()["estimate"]["step_time_s"]


def test_nvfp4_on_blackwell_and_refused_elsewhere(client: TestClient) -> None:
    """Megatron-Bridge's GB200 Llama 3 70B NVFP4 layout is estimated (faster than its MXFP8 twin, NVFP4 weights
    lighter); a GPU without FP4 tensor cores gets a 422 naming training.precision."""
    layout = {"tp": 2, "pp": 4, "dp": 8, "vp": 5, "sequence_parallel": True, "zero_stage": 1}
    base = {"model": {"preset": "llama3-70b"}, "cluster": {"profile": "gb200-nvl72", "num_gpus": 64}, "layout": layout}
    nvfp4 = client.post("/v1/estimate", json=base | {"training": {"global_batch_size": 256, "precision": "nvfp4"}})
    mxfp8 = client.post(
        "/v1/estimate",
        json=base | {"training": {"global_batch_size": 256, "precision": "fp8", "fp8_recipe": "mxfp8"}},
    )
    assert nvfp4.status_code == 200 and mxfp8.status_code == 200, (nvfp4.text, mxfp8.text)
    fast, slow = nvfp4.json()["estimate"], mxfp8.json()["estimate"]
    assert nvfp4.json()["fits"] is True and 1.2 < slow["step_time_s"] / fast["step_time_s"] < 1.6
    assert fast["memory"]["breakdown_gib"]["parameters"] < slow["memory"]["breakdown_gib"]["parameters"]
    hopper = base | {"cluster": {"profile": "dgx-h100", "num_gpus": 64}}
    body = _problem(
        client.post("/v1/estimate", json=hopper | {"training": {"global_batch_size": 256, "precision": "nvfp4"}}), 422
    )
    assert "training.precision" in body["detail"] and "has no nvfp4 tensor cores" in body["detail"], body


def test_estimate_malformed_layout_is_422(client: TestClient) -> None:
    base = {k: PLAN[k] for k in ("model", "cluster", "training")}
    body = _problem(client.post("/v1/estimate", json=base | {"layout": {"tp": -1, "pp": 1, "dp": 1}}), 422)
    assert body["errors"][0]["loc"] == ["body", "layout", "tp"]


def test_catalog_routes(client: TestClient) -> None:
    ids = {p["id"] for p in client.get("/v1/hardware-profiles").json()}
    assert {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72", "mi300x"} <= ids
    assert client.get("/v1/hardware-profiles/gb200-nvl72").json()["node"]["nvlink_domain_gpus"] == 72
    models = {m["id"] for m in client.get("/v1/models").json()}
    assert {"gpt3-175b", "llama3-405b", "megatron-1t", "mixtral-8x7b"} <= models
    assert client.get("/v1/models/llama3-70b").json()["model"]["num_query_groups"] == 8


@pytest.mark.parametrize(
    "path", ["/v1/models/nope", "/v1/hardware-profiles/nope", "/v1/hardware-profiles/..%2F..%2Fetc%2Fpasswd"]
)
def test_unknown_ids_are_404_problems(client: TestClient, path: str) -> None:
    body = _problem(client.get(path), 404)
    assert "passwd" not in body.get("detail", "") or "unknown" in body["detail"]


def test_operations_routes(client: TestClient) -> None:
    assert client.get("/livez").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 200
    client.post("/v1/plan", json=PLAN)
    text = client.get("/metrics").text
    assert "planner_requests_total" in text and "planner_candidates_evaluated_total" in text
    assert "planner_cache_hits_total" in text and "planner_search_seconds" in text
    spec = client.get("/openapi.json").json()
    assert spec["info"]["description"]
    assert {"/v1/plan", "/v1/estimate", "/v1/hardware-profiles", "/v1/models", "/livez"} <= set(spec["paths"])
    assert client.get("/").status_code == 200


def test_malformed_and_oversize_bodies(client: TestClient) -> None:
    r = client.post("/v1/plan", content=b"{not json", headers={"content-type": "application/json"})
    _problem(r, 422)
    big = b'{"x": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
    _problem(client.post("/v1/plan", content=big, headers={"content-type": "application/json"}), 413)
    _problem(client.post("/v1/plan", json=PLAN | {"unexpected": 1}), 422)


def test_plan_on_gpus_that_do_not_fill_nodes(client: TestClient) -> None:
    request = {
        **PLAN,
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 12},
        "training": {"global_batch_size": 48},
    }
    r = client.post("/v1/plan", json=request)
    assert r.status_code == 200, r.text
    # Full nodes in rank order, the last partly used (8 + 4), as the estimate places the ranks.
    command = r.json()["plans"][0]["launch"]["megatron"]["command"]
    assert '--nnodes 2 --node-rank "$NODE_RANK" --nproc-per-node "$(( $NODE_RANK < 1 ? 8 : 4 ))"' in command


def test_every_answer_says_which_model_it_planned(client: TestClient) -> None:
    """The resolved shape, its parameter counts and the source of each value come back with the plan."""
    r = client.post("/v1/plan", json={**PLAN, "model": {"preset": "gpt3-175b", "seq_length": 1024}})
    assert r.status_code == 200, r.text
    model = r.json()["model"]
    assert model["shape"]["seq_length"] == 1024 and model["shape"]["num_layers"] == 96
    assert model["sources"]["seq_length"] == "request (seq_length)"
    assert model["sources"]["num_layers"].startswith("preset gpt3-175b (Brown et al. 2020")
    assert 174e9 < model["total_params"] == model["active_params"] < 176e9


def test_an_explicit_shape_says_which_values_were_defaults(client: TestClient) -> None:
    shape = {"num_layers": 8, "hidden_size": 1024, "num_attention_heads": 16, "vocab_size": 32000, "seq_length": 2048}
    request = {
        "model": shape,
        "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 8},
        "training": {"global_batch_size": 64},
        "layout": {"tp": 1, "pp": 1, "dp": 8},
    }
    model = client.post("/v1/estimate", json=request).json()["model"]
    assert model["shape"]["ffn_hidden_size"] == 4096 and model["shape"]["num_query_groups"] == 16
    assert model["sources"]["ffn_hidden_size"] == "default (4 x hidden_size)"
    assert model["sources"]["num_query_groups"].startswith("default (= num_attention_heads")
    assert model["sources"]["hidden_size"] == "request"


def test_a_pasted_hf_config_trains_at_the_pretraining_length_not_the_context(client: TestClient) -> None:
    """Qwen2.5-7B's config says 131,072 positions (its inference context); it pre-trained at 4,096."""
    qwen = {
        "model_type": "qwen2",
        "num_hidden_layers": 28,
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "max_position_embeddings": 131072,
    }
    body = client.post("/v1/plan", json={**PLAN, "model": {"hf_config": qwen}}).json()
    assert body["model"]["shape"]["seq_length"] == 4096
    assert "131072" in body["model"]["sources"]["seq_length"]
    assert body["model"]["sources"]["num_query_groups"] == "hf_config.num_key_value_heads"
    longer = client.post("/v1/plan", json={**PLAN, "model": {"hf_config": qwen, "seq_length": 32768}}).json()
    assert longer["model"]["shape"]["seq_length"] == 32768


def test_a_plan_is_for_a_framework_megatron_by_default(client: TestClient) -> None:
    """Megatron-FSDP (ZeRO 2/3) needs pp = 1 in the pinned Megatron-LM: no such plan is offered for it."""
    request = {
        "model": {"preset": "llama3-70b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 64},
        "training": {"global_batch_size": 256},
        "top_k": 10,
    }
    megatron = client.post("/v1/plan", json=request).json()
    assert megatron["search"]["framework"] == "megatron"
    assert megatron["search"]["framework_version"] == "core_v0.19.2"  # the newest targeted release
    assert megatron["search"]["rejected"]["megatron_fsdp_needs_pp_1"] > 0
    every = [megatron["baseline"]["plan"], *megatron["plans"]]
    assert all(p["layout"]["zero_stage"] < 2 or p["layout"]["pp"] == 1 for p in every)
    core = client.post("/v1/plan", json={**request, "framework": "core", "top_k": 100}).json()
    assert core["search"]["framework"] == "core" and "megatron_fsdp_needs_pp_1" not in core["search"]["rejected"]
    sharded = {**request, "framework": "core", "constraints": {"zero_stage": [2, 3], "pp": [2, 4, 8]}}
    core_sharded = client.post("/v1/plan", json=sharded).json()["plans"]
    assert core_sharded and all(p["layout"]["zero_stage"] >= 2 and p["layout"]["pp"] > 1 for p in core_sharded)
    fastest = [min(p["estimate"]["step_time_s"] for p in body["plans"]) for body in (core, megatron)]
    assert fastest[0] <= fastest[1]  # a superset of layouts is never slower (plans[0] is the simplest equivalent)


def test_an_estimate_names_the_framework_rule_a_layout_breaks(client: TestClient) -> None:
    request = {
        "model": {"preset": "llama3-70b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 64},
        "training": {"global_batch_size": 256},
        "layout": {"tp": 16, "pp": 2, "dp": 2, "zero_stage": 3, "sequence_parallel": True},
    }
    older = {**request, "framework_version": "core_v0.15.0"}
    rules = {v["rule"] for v in client.post("/v1/estimate", json=older).json()["violations"]}
    assert {"megatron_fsdp_needs_pp_1", "query_groups_split"} <= rules
    newest = {v["rule"] for v in client.post("/v1/estimate", json=request).json()["violations"]}
    assert "megatron_fsdp_needs_pp_1" in newest and "query_groups_split" not in newest  # core_v0.16+: a divisor is ok
    core = client.post("/v1/estimate", json={**request, "framework": "core"}).json()["violations"]
    assert not {v["rule"] for v in core} & {"megatron_fsdp_needs_pp_1", "query_groups_split"}
    bad = client.post("/v1/estimate", json={**request, "framework": "deepspeed"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"][-1] == "framework"


def test_a_plan_names_its_framework_release_and_an_unknown_one_is_a_422(client: TestClient) -> None:
    request = {**PLAN, "top_k": 2, "framework_version": "core_v0.15.0"}
    body = client.post("/v1/plan", json=request).json()
    assert body["search"]["framework_version"] == "core_v0.15.0"
    stamps = {p["launch"]["megatron"]["framework_version"][:25] for p in body["plans"]}
    assert stamps == {"Megatron-LM core_v0.15.0 "}
    for bad in ({**request, "framework_version": "core_v0.14.0"}, {**request, "framework": "torchtitan"}):
        answer = client.post("/v1/plan", json=bad)
        assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json"
        error = answer.json()["errors"][0]
        assert error["loc"][-1] == "framework_version" and "accepted:" in error["msg"], error
    one = {"model": PLAN["model"], "cluster": PLAN["cluster"], "training": PLAN["training"]}
    layout = {"tp": 8, "pp": 8, "dp": 1}
    estimate = client.post(
        "/v1/estimate", json={**one, "layout": layout, "framework": "nemo", "framework_version": "0.2.2"}
    )
    assert estimate.status_code == 422 and "accepted: 2.7.3, 2.5.0rc0+8cfedd7" in estimate.json()["errors"][0]["msg"]


def test_launch_data_and_tokenizer_reach_the_launches(client: TestClient) -> None:
    launch = {"data_path": "/lustre/corpus_text_document", "tokenizer": {"model": "meta-llama/Llama-3.1-8B"}}
    body = client.post("/v1/plan", json={**PLAN, "top_k": 1, "launch": launch}).json()
    megatron = body["plans"][0]["launch"]["megatron"]
    assert "--data-path /lustre/corpus_text_document" in megatron["command"]
    assert "--mock-data" not in megatron["command"]
    assert "--tokenizer-model meta-llama/Llama-3.1-8B" in megatron["command"]
    assert body["plans"][0]["launch"]["torchtitan"]["config"]["dataloader"]["dataset_path"] == launch["data_path"]
    for bad, field in (
        ({"data_path": "a\nb"}, "data_path"),
        ({"data_path": "x" * 4097}, "data_path"),
        ({"tokenizer": {"type": "Hugging Face"}}, "type"),
        ({"tokenizer": {"vocab": "x"}}, "vocab"),
    ):
        answer = client.post("/v1/plan", json={**PLAN, "launch": bad})
        assert answer.status_code == 422 and answer.json()["errors"][0]["loc"][-1] == field, answer.json()


def test_an_incomplete_answer_is_not_served_from_the_cache(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    import api.convert
    from planner.search.plan import plan

    body = {**PLAN, "top_k": 7}  # a request no other test sends: nothing of it is cached yet
    monkeypatch.setattr(api.convert, "plan", functools.partial(plan, max_evaluated=100))
    first, second = (client.post("/v1/plan", json=body).json() for _ in range(2))
    assert first["search"]["complete"] is False and first["search"]["truncated_by"] == ["candidates"]
    assert first["cached"] is False and second["cached"] is False  # searched again, not served from the cache
    for answer in (first, second):
        answer["search"]["elapsed_ms"] = 0.0
    assert first == second  # the truncation itself is deterministic
    monkeypatch.undo()
    complete, again = (client.post("/v1/plan", json=body).json() for _ in range(2))
    assert complete["search"]["complete"] is True and complete["search"]["truncated_by"] == []
    assert complete["cached"] is False and again["cached"] is True


def test_activation_offload_over_the_api(client: TestClient) -> None:
    """Offloading is priced (time_breakdown_s.offload, the rule named on a pipelined layout), and a profile that
    states no host link refuses it with a 422 naming the field, never a 5xx."""
    base = {
        "model": {"preset": "llama3-70b"},
        "cluster": {"profile": "gb200-nvl72", "num_gpus": 64},
        "training": {"global_batch_size": 256, "activation_offload_layers": 20},
    }
    r = client.post("/v1/estimate", json=base | {"layout": {"tp": 1, "pp": 1, "dp": 64, "zero_stage": 3}})
    assert r.status_code == 200, r.text
    assert r.json()["estimate"]["time_breakdown_s"]["offload"] == 0.0 and r.json()["fits"] is True
    r = client.post("/v1/estimate", json=base | {"layout": {"tp": 1, "pp": 2, "dp": 32, "zero_stage": 1}})
    assert "activation_offload" in {v["rule"] for v in r.json()["violations"]}
    profile = client.get("/v1/hardware-profiles/gb200-nvl72").json()
    node = {k: v for k, v in profile["node"].items() if k != "host_link_gb_per_s"}
    inline = {"gpu": profile["gpu"], "node": node, "network": profile["network"], "num_gpus": 64}
    body = _problem(client.post("/v1/plan", json=base | {"cluster": inline}), 422)
    assert "training.activation_offload_layers" in json.dumps(body)


def test_block_recompute_over_the_api(client: TestClient) -> None:
    """recompute_num_layers prices full recompute on the first k layers of a stage (less recompute time than every
    layer), of each model chunk under interleaving, comes back in the launch arguments, and 0 is a 422 naming it."""
    base = {
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8},
        "training": {"global_batch_size": 128, "recompute_num_layers": 5},
    }
    full = {"tp": 1, "pp": 1, "dp": 8, "recompute": "full", "zero_stage": 3}
    block = client.post("/v1/estimate", json=base | {"layout": full})
    assert block.status_code == 200, block.text
    uniform = client.post("/v1/estimate", json=base | {"training": {"global_batch_size": 128}, "layout": full})
    parts = [r.json()["estimate"]["time_breakdown_s"]["recompute"] for r in (block, uniform)]
    assert parts[0] == pytest.approx(5 / 32 * parts[1])
    planned = client.post("/v1/plan", json=base | {"constraints": {"recompute": ["full"], "pp": [1]}})
    assert planned.status_code == 200, planned.text
    command = planned.json()["plans"][0]["launch"]["megatron"]["command"]
    assert "--recompute-granularity full --recompute-method block --recompute-num-layers 5" in command
    # Interleaved: the first 5 layers of each of the 2 model chunks of a 16-layer stage, 10 of 16.
    interleaved = {"tp": 1, "pp": 2, "dp": 4, "vp": 2, "recompute": "full", "zero_stage": 1}
    chunks = client.post("/v1/estimate", json=base | {"layout": interleaved})
    every = client.post("/v1/estimate", json=base | {"training": {"global_batch_size": 128}, "layout": interleaved})
    assert chunks.status_code == every.status_code == 200 and chunks.json()["violations"] == []
    parts = [r.json()["estimate"]["time_breakdown_s"]["recompute"] for r in (chunks, every)]
    assert parts[0] == pytest.approx(10 / 16 * parts[1])
    body = _problem(
        client.post(
            "/v1/estimate",
            json=base | {"training": {"global_batch_size": 128, "recompute_num_layers": 0}, "layout": full},
        ),
        422,
    )
    assert "training.recompute_num_layers" in json.dumps(body)


def test_zero3_backward_prefetch_over_the_api(client: TestClient) -> None:
    """The backward prefetch order reaches the estimate through HTTP (post and none wait longer than pre on a
    ZeRO-3 layout, exactly as long below it) and an unknown order is a 422 naming the field."""
    base = {
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 16},
        "training": {"global_batch_size": 64},
    }

    def step(order: str, zero: int) -> float:
        body = base | {
            "training": {"global_batch_size": 64, "runtime": {"zero3_backward_prefetch": order}},
            "layout": {"tp": 1, "pp": 1, "dp": 16, "zero_stage": zero},
        }
        r = client.post("/v1/estimate", json=body)
        assert r.status_code == 200, r.text
        return float(r.json()["estimate"]["step_time_s"])

    assert step("pre", 3) < step("post", 3) < step("none", 3)
    assert step("pre", 1) == step("post", 1) == step("none", 1)
    bad = base | {"training": {"global_batch_size": 64, "runtime": {"zero3_backward_prefetch": "sideways"}}}
    body = _problem(client.post("/v1/plan", json=bad), 422)
    assert body["errors"][0]["loc"][-1] == "zero3_backward_prefetch"


def test_recompute_modules_over_the_api(client: TestClient) -> None:
    """Over HTTP: recomputing the experts' activation keeps less than keeping everything and costs time over the
    default; a repeated or unknown name, or a module the model lacks, is a 422 or a violation naming the field."""
    base: dict[str, Any] = {
        "model": {"preset": "qwen3-30b-a3b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 16},
        "layout": {"tp": 1, "pp": 1, "dp": 16, "ep": 16, "recompute": "selective", "zero_stage": 1},
    }

    def estimate(runtime: dict[str, Any]) -> dict[str, Any]:
        r = client.post("/v1/estimate", json=base | {"training": {"global_batch_size": 256, "runtime": runtime}})
        assert r.status_code == 200, r.text
        body: dict[str, Any] = r.json()
        return body

    default, act = estimate({}), estimate({"recompute_modules": ["core_attn", "moe_act"]})
    assert act["violations"] == [] and act["estimate"]["step_time_s"] > default["estimate"]["step_time_s"]
    assert (
        act["estimate"]["memory"]["breakdown_gib"]["activations"]
        < default["estimate"]["memory"]["breakdown_gib"]["activations"]
    )
    lacking = estimate({"recompute_modules": ["mla_up_proj"]})
    assert [v["rule"] for v in lacking["violations"]] == ["recompute_modules"]
    for bad, words in ((["moe", "moe"], "moe more than once"), (["attention"], "core_attn")):
        r = client.post(
            "/v1/estimate", json=base | {"training": {"global_batch_size": 256, "runtime": {"recompute_modules": bad}}}
        )
        assert r.status_code == 422 and words in r.text
        assert r.json()["errors"][0]["loc"][:3] == ["body", "training", "runtime"] and "recompute_modules" in r.text


def test_a_layout_names_its_own_module_set_over_the_api(client: TestClient) -> None:
    """Over HTTP: a plan may run one of the recipes' module sets and says so in its layout; that layout, sent back to
    /v1/estimate, prices as the plan did and as the training naming the set does; a layout's set needs recompute
    selective and names each module once (422 naming layout.recompute_modules)."""
    model = {"preset": "mixtral-8x7b"}
    cluster = {"profile": "dgx-h100", "num_gpus": 64}
    training = {"global_batch_size": 128}
    r = client.post(
        "/v1/plan",
        json={
            "model": model,
            "cluster": cluster,
            "training": training,
            "constraints": {"tp": [2], "pp": [2], "cp": [1]},
            "top_k": 1,
        },
    )
    assert r.status_code == 200, r.text
    plan = r.json()["plans"][0]
    layout = plan["layout"]
    assert layout["recompute"] == "selective"
    assert layout["recompute_modules"] == ["layernorm", "moe_act", "moe"]
    megatron = plan["launch"]["megatron"]["args"]
    assert megatron[megatron.index("--recompute-modules") + 1 :][:3] == ["layernorm", "moe_act", "moe"]
    sent = {k: v for k, v in layout.items() if k != "num_microbatches"}
    back = client.post("/v1/estimate", json={"model": model, "cluster": cluster, "training": training, "layout": sent})
    assert back.status_code == 200, back.text
    assert back.json()["fits"] and back.json()["layout"]["recompute_modules"] == layout["recompute_modules"]
    assert back.json()["estimate"]["step_time_s"] == pytest.approx(plan["estimate"]["step_time_s"], rel=1e-12)
    named = {**training, "runtime": {"recompute_modules": layout["recompute_modules"]}}
    plain = {k: v for k, v in sent.items() if k != "recompute_modules"}
    by_runtime = client.post(
        "/v1/estimate", json={"model": model, "cluster": cluster, "training": named, "layout": plain}
    )
    assert by_runtime.json()["estimate"]["step_time_s"] == pytest.approx(plan["estimate"]["step_time_s"], rel=1e-12)
    # the default set is stated where the layout names none
    default = client.post(
        "/v1/estimate", json={"model": model, "cluster": cluster, "training": training, "layout": plain}
    )
    assert default.json()["layout"]["recompute_modules"] == ["core_attn"] and not default.json()["fits"]
    lacking = {**sent, "recompute_modules": ["mla_up_proj"]}
    r = client.post("/v1/estimate", json={"model": model, "cluster": cluster, "training": training, "layout": lacking})
    found = r.json()["violations"]
    assert r.status_code == 200 and [v["rule"] for v in found][:1] == ["recompute_modules"]  # and it no longer fits
    assert found[0]["message"].startswith("layout.recompute_modules names mla_up_proj")
    for bad, words in (
        ({**sent, "recompute": "full"}, "recompute selective only"),
        ({**sent, "recompute_modules": ["moe", "moe"]}, "moe more than once"),
    ):
        r = client.post("/v1/estimate", json={"model": model, "cluster": cluster, "training": training, "layout": bad})
        assert r.status_code == 422 and words in r.text, r.text
        assert r.json()["errors"][0]["loc"][:2] == ["body", "layout"]


def test_answers_say_how_far_the_model_was_from_published_runs_like_them(client: TestClient) -> None:
    """Over HTTP: an estimate and a plan carry the accuracy band of their GPU kind and workload (the stored file,
    `planner validate --write-bands`); eager MoE on H100 is the kind the model misses (predicted too fast), graphs
    change the band, and a GPU kind without published runs (H200) has none."""
    bands = {(b.gpu_kind, b.workload.value): b for b in load_bands()}
    body = {
        "model": {"preset": "qwen3-30b-a3b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 16},
        "training": {"global_batch_size": 1024, "precision": "fp8"},
        "layout": {"tp": 1, "pp": 1, "dp": 16, "ep": 16, "micro_batch_size": 1, "zero_stage": 1},
    }
    r = client.post("/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    got = r.json()["accuracy"]
    eager = bands[("H100", "moe_eager")]
    assert (got["gpu_kind"], got["workload"], got["rows"]) == ("H100", "moe_eager", eager.rows)
    assert got["mean_error"] == eager.mean_error > 0.1 and got["min_error"] > 0
    assert got["text"] == eager.text and got["sources"] == list(eager.sources)
    graphed = {**body, "training": {**body["training"], "runtime": {"cuda_graphs": True}}}
    assert client.post("/v1/estimate", json=graphed).json()["accuracy"]["workload"] == "moe"
    h200 = {**body, "cluster": {"profile": "hgx-h200", "num_gpus": 16}}
    assert client.post("/v1/estimate", json=h200).json()["accuracy"] is None
    plan = client.post("/v1/plan", json={k: v for k, v in body.items() if k != "layout"} | {"top_k": 1})
    assert plan.status_code == 200, plan.text
    assert plan.json()["accuracy"] == got
