"""Every mixture-of-experts pre-training layout of NVIDIA's performance recipes is accepted, fits, and is found when
pinned; the DeepSeek-V3 splits with uneven interleaved chunks launch with the recipe's own pipeline layout.

The layouts are `tests/data/nvidia_moe_recipes.json`, regenerated from the recipes' own source by
`tests/data/extract_moe_recipes.py` (NeMo 2's `recommended_model_configs` tables at v2.3.0, v2.4.0 and 8cfedd7,
Megatron-Bridge's DeepSeek-V3, Qwen3, GPT-OSS and Nemotron 3 workload configs of NeMo 25.11, 26.02, 26.02.01,
26.04.01 and 26.06) for Mixtral 8x7B / 8x22B, DeepSeek-V3, Qwen3 30B-A3B / 235B-A22B, Llama 4 Scout / Maverick,
GPT-OSS 120B and the Mamba-2 / MoE hybrid Nemotron 3 Nano on H100, B200 and GB200.
Each is judged as the recipe runs it: GPU count, batch, precision and FP8 recipe, tp / pp / cp / ep / etp / vp, the
recipe's pipeline split (`layers_per_stage`, embedding and loss counted for Qwen3 235B), recompute (selective with
the recipe's module list, `training.runtime.recompute_modules`), bf16 Adam moments where the DeepSeek-V3 recipes use
the precision-aware optimizer, CUDA graphs (a whole-iteration graph as `cuda_graph_scope` full_iteration), grouped
expert GEMMs where a recipe fuses the experts (`expert_gemm` grouped) and 16-bit gradient reduction, on the whole
HBM (`memory_headroom` 0). What the planner cannot express (partial CUDA-graph scopes, FP8 attention, layouts it
cannot express) each source lists in its `not_expressed`; FP8 sub-channel scaling goes as the blockwise recipe.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from planner.launch import launch_args
from planner.launch.pipeline_layout import layout_stages
from planner.layout import Layout
from planner.presets import get_preset
from planner.specs import Recompute, TrainingSpec
from tests.api.pinned_plan import post_pinned_plan

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia_moe_recipes.json"
RECIPES: list[dict[str, Any]] = json.loads(DATA.read_text())["recipes"]
PINNED = ("tp", "pp", "cp", "ep", "etp", "vp", "micro_batch_size", "recompute", "zero_stage")
RECOMPUTE_TAG = {"none": "", "selective": "-sel", "full": "-full"}


def _id(recipe: dict[str, Any]) -> str:
    req = recipe["request"]
    model, lay, tr = req["model"], req["layout"], req["training"]
    name = model.get("preset") or model["name"].replace(" ", "").lower()
    fp8 = tr.get("fp8_recipe") or tr["precision"]
    par = f"tp{lay['tp']}pp{lay['pp']}cp{lay['cp']}dp{lay['dp']}ep{lay['ep']}etp{lay['etp']}vp{lay['vp']}"
    runtime = tr.get("runtime", {})
    extras = RECOMPUTE_TAG[lay["recompute"]] + ("-cg" if runtime.get("cuda_graphs") else "")
    extras += f"-{runtime['moe_dispatcher']}" if "moe_dispatcher" in runtime else ""
    extras += "-a2a" if runtime.get("moe_a2a_overlap") else ""
    extras += "-fullgraph" if runtime.get("cuda_graph_scope") == "full_iteration" else ""
    extras += f"-{runtime['expert_gemm']}" if "expert_gemm" in runtime else ""
    extras += "-adam16" if tr.get("adam_moments") == "bf16" else ""
    extras += "-bf16weights" if tr.get("fp8_param_gather") is False else ""
    extras += f"-rm.{'.'.join(runtime['recompute_modules'])}" if "recompute_modules" in runtime else ""
    if lay.get("layers_per_stage"):  # the recipe's split: first and last stage
        extras += f"-lps{lay['layers_per_stage'][0]}.{lay['layers_per_stage'][-1]}"
    return (
        f"{name}-{req['cluster']['profile']}-{fp8}-{par}b{lay['micro_batch_size']}-B{tr['global_batch_size']}{extras}"
    )


IDS = [_id(r) for r in RECIPES]
RECIPE_LAYOUTS = {
    # H100, Bridge 25.11 / 26.04.01 DeepSeek-V3 (pp 8 x vp 4): per rank [7, 8, 8, 8, 8, 8, 8, 6].
    (8, 4, (7, 8, 8, 8, 8, 8, 8, 6)): "Et|(tt|)*30mL",
    # H100 Bridge 26.04.01 FP8_SC_V2 / B200 FP8_MX_V2 (pp 8 x vp 2), Bridge's (pp, vp) map: [8 x 7, 5].
    (8, 2, (8, 8, 8, 8, 8, 8, 8, 5)): "Et*4|(t*4|)*14tmL",
    # GB200, NeMo v2.4.0 / 8cfedd7 ("Et*4|(t*4|)*14tL") and Bridge ("...tmL"), pp 4 x vp 4: [16, 16, 16, 13].
    (4, 4, (16, 16, 16, 13)): "Et*4|(t*4|)*14tL",
}
"""The DeepSeek-V3 recipes' `pipeline_model_parallel_layout` strings whose interleaved chunks are uneven, as
`tests/data/extract_moe_recipes.py` reads them from the recipes' source (NeMo's and Bridge's (pp, vp) maps and
the configs' `pp_layout`), by (pp, vp, decoder layers per rank); "m" is the MTP layer."""


def _uneven(recipe: dict[str, Any]) -> bool:
    lay = recipe["request"]["layout"]
    return lay["vp"] > 1 and any(n % lay["vp"] for n in lay.get("layers_per_stage") or ())


def test_the_recipe_file_covers_every_model_gpu_and_both_frameworks() -> None:
    """The extraction kept what it should: nine MoE models (one a Mamba hybrid), three GPUs, NeMo 2 and Bridge rows,
    one per layout."""
    models = {r["request"]["model"].get("preset") or r["request"]["model"]["name"] for r in RECIPES}
    assert models == {
        "mixtral-8x7b",
        "mixtral-8x22b",
        "deepseek-v3",
        "qwen3-30b-a3b",
        "qwen3-235b-a22b",
        "llama4-scout",
        "llama4-maverick",
        "gpt-oss-120b",
        "nemotron-3-nano-30b-a3b",
    }
    assert {r["request"]["cluster"]["profile"] for r in RECIPES} == {"dgx-h100", "hgx-b200", "gb200-nvl72"}
    sources = [s["source"] for r in RECIPES for s in r["sources"]]
    assert any(s.startswith("NVIDIA/NeMo@") for s in sources)
    assert any(s.startswith("NVIDIA-NeMo/Megatron-Bridge@") for s in sources)
    assert len(set(IDS)) == len(IDS) == len(RECIPES) >= 90
    uneven = {(r["request"]["layout"]["pp"], r["request"]["layout"]["vp"]) for r in RECIPES if _uneven(r)}
    assert uneven == {(8, 4), (8, 2), (4, 4)}


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_moe_recipe_is_accepted_and_fits(client: TestClient, recipe: dict[str, Any]) -> None:
    r = client.post("/v1/estimate", json=recipe["request"] | {"framework": "nemo"})
    assert r.status_code == 200, r.text
    body, lay = r.json(), recipe["request"]["layout"]
    assert body["violations"] == [], (recipe["sources"], body["violations"])
    assert body["fits"] is True
    assert body["layout"]["ep"] == lay["ep"] and body["layout"]["etp"] == lay["etp"]
    assert 0.0 < body["estimate"]["mfu"] < 1.0


@pytest.mark.parametrize("recipe", RECIPES, ids=IDS)
def test_moe_recipe_is_found_when_pinned(client: TestClient, recipe: dict[str, Any]) -> None:
    req = recipe["request"]
    pins, body = post_pinned_plan(client, req, PINNED)
    assert body["plans"], body.get("diagnosis")
    found = body["plans"][0]["layout"]
    assert {k: found[k] for k in pins} == pins
    assert found["dp"] == req["layout"]["dp"]


UNEVEN = [(i, r) for i, r in zip(IDS, RECIPES, strict=True) if _uneven(r)]


@pytest.mark.parametrize("recipe", [r for _, r in UNEVEN], ids=[i for i, _ in UNEVEN])
def test_uneven_chunks_launch_as_the_recipe_lays_them_out(recipe: dict[str, Any]) -> None:
    """A DeepSeek-V3 split with uneven interleaved chunks launches with the recipe's own pipeline layout: the
    planner's --pipeline-model-parallel-layout is the recipe's string, stage by stage, with the MTP layer ("m")
    beside the loss, as Megatron-Bridge's strings have it (NeMo 2's leave it out of the string)."""
    lay = recipe["request"]["layout"]
    stages = tuple(lay["layers_per_stage"])
    fields = {k: v for k, v in lay.items() if k not in ("layers_per_stage", "recompute")}
    layout = Layout(**fields, recompute=Recompute(lay["recompute"]), layers_per_stage=stages)
    training = TrainingSpec.model_validate(recipe["request"]["training"])
    launch = launch_args(get_preset("deepseek-v3").model, training, layout, recipe["request"]["cluster"]["num_gpus"], 8)
    args = launch.megatron.args
    written = args[args.index("--pipeline-model-parallel-layout") + 1]
    published = RECIPE_LAYOUTS[(lay["pp"], lay["vp"], stages)]
    assert [stage.replace("m", "") for stage in layout_stages(written)] == [
        stage.replace("m", "") for stage in layout_stages(published)
    ]
    assert written.endswith("mL") and written.count("m") == 1
    assert "--num-virtual-stages-per-pipeline-rank" not in args
    assert launch.nemo.config["trainer.strategy.pipeline_model_parallel_layout"] == written
