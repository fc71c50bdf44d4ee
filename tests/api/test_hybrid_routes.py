"""Hybrid models over HTTP: a layout that splits a Mamba head is reported with the rule that refuses it, a framework
without Mamba layers plans nothing and says why, and a Nemotron-H config.json resolves to its hybrid shape."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

SHAPE: dict[str, Any] = {
    "num_layers": 6,
    "hidden_size": 384,
    "num_attention_heads": 12,
    "num_query_groups": 6,
    "ffn_hidden_size": 768,
    "vocab_size": 32000,
    "seq_length": 2048,
    "hybrid_pattern": "M*M-M-",
    "mamba": {"state_dim": 16, "head_dim": 48, "num_groups": 4, "num_heads": 8},
}
TRAINING = {"global_batch_size": 48}


def test_an_estimate_names_the_rule_a_tp_splitting_the_mamba_heads_breaks(client: TestClient) -> None:
    body = {
        "model": SHAPE,
        "cluster": {"profile": "dgx-h100", "num_gpus": 3},
        "training": TRAINING,
        "layout": {"tp": 3, "pp": 1, "dp": 1},
    }
    r = client.post("/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["fits"] is False
    assert r.json()["violations"] == [
        {"rule": "mamba_split", "message": "mamba.num_heads(8) % tp(3) = 2, must be 0"},
        {"rule": "mamba_split", "message": "mamba.num_groups(4) % tp(3) = 1, must be 0"},
    ]
    ok = client.post(
        "/v1/estimate",
        json=body | {"cluster": {"profile": "dgx-h100", "num_gpus": 2}, "layout": {"tp": 2, "pp": 1, "dp": 1}},
    )
    assert ok.status_code == 200 and ok.json()["violations"] == [], ok.text


def test_a_torchtitan_plan_of_a_hybrid_model_has_none_and_says_why(client: TestClient) -> None:
    request = {"model": SHAPE, "cluster": {"profile": "dgx-h100", "num_gpus": 8}, "training": TRAINING}
    r = client.post("/v1/plan", json=request | {"framework": "torchtitan"})
    assert r.status_code == 200, r.text
    assert r.json()["plans"] == [] and r.json()["search"]["rejected"]["torchtitan_no_hybrid"] > 0
    estimate = client.post(
        "/v1/estimate", json=request | {"framework": "torchtitan", "layout": {"tp": 2, "pp": 1, "dp": 4}}
    )
    assert [v["rule"] for v in estimate.json()["violations"]] == ["torchtitan_no_hybrid"]


def test_megatron_16_plans_of_a_hybrid_model_neither_interleave_nor_fully_recompute(client: TestClient) -> None:
    request = {
        "model": SHAPE | {"num_layers": 12, "hybrid_pattern": "M*M-M-" * 2},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8},
        "training": TRAINING,
        "framework": "megatron",
        "framework_version": "core_v0.16.1",
        "constraints": {"pp": [2, 4]},
        "top_k": 5,
    }
    r = client.post("/v1/plan", json=request)
    assert r.status_code == 200, r.text
    plans = r.json()["plans"]
    assert plans and all(p["layout"]["vp"] == 1 and p["layout"]["recompute"] != "full" for p in plans)
    assert all(p["layout"]["cp"] == 1 for p in plans)
    for p in plans:
        command = p["launch"]["megatron"]["command"]
        assert "pretrain_mamba.py" in command and "--hybrid-override-pattern" in command
    assert r.json()["search"]["rejected"]["hybrid_no_interleaving"] > 0


def test_a_nemotron_h_config_resolves_to_its_hybrid_shape(client: TestClient) -> None:
    config = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 8,
        "hybrid_override_pattern": "M-M*M-M-",
        "num_attention_heads": 8,
        "head_dim": 128,
        "num_key_value_heads": 2,
        "mamba_num_heads": 32,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "conv_kernel": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
    }
    body = {
        "model": {"hf_config": config},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8},
        "training": TRAINING,
        "layout": {"tp": 2, "pp": 1, "dp": 4},
    }
    r = client.post("/v1/estimate", json=body)
    assert r.status_code == 200, r.text
    shape = r.json()["model"]["shape"]
    assert shape["hybrid_pattern"] == "M-M*M-M-" and shape["num_layers"] == 8 and shape["gated_mlp"] is False
    assert shape["mamba"] == {"state_dim": 128, "head_dim": 64, "num_groups": 8, "num_heads": 32, "conv_kernel": 4}
