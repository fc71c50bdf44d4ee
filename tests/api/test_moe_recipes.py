"""NVIDIA's mixture-of-experts recipe layouts, each expert whole on its rank (etp 1), are accepted, fit and are
found when pinned.

Megatron-Core's MoE parallel folding (Liu et al. 2025, arXiv 2504.14960) gives the experts their own
etp x ep x expert-dp grid over each stage's tp x cp x dp ranks; NVIDIA's MoE recipes set
`expert_tensor_parallel_size` 1 with tp > 1, and ep may then take tp ranks (ep > dp x cp). Layouts as NeMo 2's
H100 table lists them (NVIDIA/NeMo@v2.4.0 `scripts/performance/recommended_model_configs/model_configs_h100.csv`,
columns tp_size, pp_size, cp_size, ep_size, vp_size, mbs, gbs, etp_size); recompute as the table's
recompute_modules allow (none listed: none; DeepSeek-V3's `mla_up_proj/mlp`, module recompute the planner does
not express: selective). Qwen3's rows need a head width other than hidden / heads (head_dim 128; the presets
`qwen3-30b-a3b`, `qwen3-235b-a22b`); the 235B row counts the embedding and the loss as pipeline layers (94 + 2
over pp 8 x vp 4, as the NeMo recipe's `account_for_embedding_in_pipeline_split` / `..._loss_...` set). Judged on
the whole HBM (memory_headroom 0), as the recipes ran.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

MIXTRAL_8X22B = {"preset": "mixtral-8x22b"}  # NeMo's recipe trains it at seq 65536, the preset's

# (id, model, seq, gpus, gbs, precision, layout)
RECIPES: list[tuple[str, dict[str, Any], int, int, int, str, dict[str, Any]]] = [
    (
        "mixtral-8x22b-bf16",
        MIXTRAL_8X22B,
        65536,
        256,
        256,
        "bf16",
        {"tp": 4, "pp": 4, "cp": 8, "dp": 2, "ep": 8, "etp": 1, "vp": 14, "recompute": "none"},
    ),
    (
        "mixtral-8x22b-fp8",
        MIXTRAL_8X22B,
        65536,
        256,
        256,
        "fp8",
        {"tp": 4, "pp": 4, "cp": 8, "dp": 2, "ep": 8, "etp": 1, "vp": 14, "recompute": "none"},
    ),
    (
        "deepseek-v3-bf16",
        {"preset": "deepseek-v3"},
        4096,
        1024,
        8192,
        "bf16",
        {"tp": 2, "pp": 16, "cp": 1, "dp": 32, "ep": 64, "etp": 1, "vp": 1, "recompute": "selective"},
    ),
    (
        "qwen3-30b-a3b-bf16",
        {"preset": "qwen3-30b-a3b"},
        4096,
        16,
        512,
        "bf16",
        {"tp": 1, "pp": 2, "cp": 1, "dp": 8, "ep": 8, "etp": 1, "vp": 24, "recompute": "none"},
    ),
    (
        "qwen3-235b-a22b-bf16",
        {"preset": "qwen3-235b-a22b"},
        4096,
        256,
        2048,
        "bf16",
        {
            "tp": 2,
            "pp": 8,
            "cp": 1,
            "dp": 16,
            "ep": 32,
            "etp": 1,
            "vp": 4,
            "recompute": "none",
            "account_for_embedding_in_pipeline_split": True,
            "account_for_loss_in_pipeline_split": True,
        },  # fmt: skip
    ),
]


def _request(recipe: tuple[str, dict[str, Any], int, int, int, str, dict[str, Any]]) -> dict[str, Any]:
    _, model, seq, gpus, gbs, precision, layout = recipe
    return {
        "model": model | {"seq_length": seq},
        "cluster": {"profile": "dgx-h100", "num_gpus": gpus, "memory_headroom": 0.0},
        "training": {"global_batch_size": gbs, "precision": precision},
        "layout": layout | {"micro_batch_size": 1, "sequence_parallel": layout["tp"] > 1, "zero_stage": 1},
        "framework": "nemo",
    }


@pytest.mark.parametrize("recipe", RECIPES, ids=[r[0] for r in RECIPES])
def test_folded_moe_recipe_is_accepted_and_fits(client: TestClient, recipe: Any) -> None:
    r = client.post("/v1/estimate", json=_request(recipe))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["violations"] == [] and body["fits"] is True
    assert body["layout"]["etp"] == 1
    assert 0.0 < body["estimate"]["mfu"] < 1.0


@pytest.mark.parametrize("recipe", RECIPES, ids=[r[0] for r in RECIPES])
def test_folded_moe_recipe_is_found_when_pinned(client: TestClient, recipe: Any) -> None:
    req = _request(recipe)
    layout = req.pop("layout")
    pins = {k: layout[k] for k in ("tp", "pp", "cp", "ep", "etp", "vp", "recompute", "micro_batch_size", "zero_stage")}
    r = client.post("/v1/plan", json=req | {"constraints": pins, "top_k": 1})
    assert r.status_code == 200, r.text
    plans = r.json()["plans"]
    assert plans, r.json().get("diagnosis")
    found = plans[0]["layout"]
    assert {k: found[k] for k in pins} == pins and found["dp"] == layout["dp"]


def test_deepseek_v3_recipe_was_refused_before_folding(client: TestClient) -> None:
    """ep 64 over dp 32 needs the tp ranks: with the experts split over tp (etp 2) expert_split refuses it."""
    req = _request(RECIPES[2])
    req["layout"].pop("etp")
    body = client.post("/v1/estimate", json=req).json()
    assert [v["rule"] for v in body["violations"]] == ["expert_split"]
    assert "% (etp(2) * ep(64)) = 64, must be 0" in body["violations"][0]["message"]
