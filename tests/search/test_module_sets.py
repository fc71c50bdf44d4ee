"""The search tries the selective-recompute module sets NVIDIA's recipes run, each plan stating the set it runs."""

from __future__ import annotations

from dataclasses import replace
from itertools import takewhile
from typing import Any

import numpy as np
import pytest

from planner.constraints.space import build_space, respace
from planner.costmodel.candidates import Candidates
from planner.costmodel.recompute import RECIPE_MODULE_SETS, own_selective_modules, searched_module_sets
from planner.estimate import estimate
from planner.launch import launch_args
from planner.layout import training_for, with_modules
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.rules import rule_set
from planner.search.plan import PlanResult, plan
from planner.specs import Recompute, RecomputeModule, RuntimeFeatures, TrainingSpec

PROFILES = load_profiles()
M = RecomputeModule


def _mixtral_plan(**kwargs: Any) -> tuple[PlanResult, ClusterSpec, TrainingSpec]:
    model = get_preset("mixtral-8x7b").model
    cluster = ClusterSpec(profile=PROFILES["dgx-h100"], num_gpus=64)
    training = TrainingSpec(global_batch_size=128)
    return plan(model, cluster, training, top_k=1, **kwargs), cluster, training


@pytest.mark.parametrize(
    ("preset", "expected"),
    [
        ("llama3-8b", [(M.MLP,)]),
        # under flash attention without core_attn (it frees nothing there): Nemotron 3 Nano's set loses it
        ("mixtral-8x7b", [(M.LAYERNORM, M.MOE_ACT), (M.LAYERNORM, M.MOE_ACT, M.MOE)]),
        # DeepSeek-V3 has every part: the recipe sets without core_attn (core_attn alone drops out), less
        # mla_up_proj alone, which its own space runs (`own_selective_modules`)
        (
            "deepseek-v3",
            [
                (M.MLP,),
                (M.MLA_UP_PROJ, M.MLP),
                (M.MLA_UP_PROJ, M.MLP, M.MOE),
                (M.LAYERNORM, M.MOE_ACT),
                (M.LAYERNORM, M.MOE_ACT, M.MOE),
            ],
        ),
    ],
)
def test_the_sets_tried_are_the_recipes_the_model_can_run(preset: str, expected: list[tuple[M, ...]]) -> None:
    model = get_preset(preset).model
    assert list(searched_module_sets(model, TrainingSpec(global_batch_size=8))) == expected


def test_the_default_reruns_no_idle_core_attn_beside_other_modules() -> None:
    """Under flash attention MLA's default (core_attn + mla_up_proj) is run as mla_up_proj alone by the request's
    own space, whose plans name that set and launch it; a default of core_attn alone, a named set and a run
    without flash attention keep theirs."""
    deepseek = get_preset("deepseek-v3").model
    training = TrainingSpec(global_batch_size=4096)
    assert own_selective_modules(deepseek, training) == (M.MLA_UP_PROJ,)
    assert own_selective_modules(get_preset("mixtral-8x7b").model, training) is None
    named = TrainingSpec(global_batch_size=8, runtime=RuntimeFeatures(recompute_modules=(M.CORE_ATTN, M.MLA_UP_PROJ)))
    assert own_selective_modules(deepseek, named) is None
    eager = TrainingSpec(global_batch_size=8, runtime=RuntimeFeatures(flash_attention=False))
    assert own_selective_modules(deepseek, eager) is None
    cluster = ClusterSpec(profile=PROFILES["dgx-h100"], num_gpus=256)
    pinned = {"tp": [2], "pp": [8], "ep": [32], "recompute": ["selective"]}
    result = plan(deepseek, cluster, TrainingSpec(global_batch_size=1024), pinned, top_k=20)
    assert result.plans
    assert all(p.layout.recompute_modules != (M.CORE_ATTN, M.MLA_UP_PROJ) for p in result.plans)
    own = [p for p in result.plans if p.layout.recompute_modules == (M.MLA_UP_PROJ,)]
    assert own, [p.layout.recompute_modules for p in result.plans]
    args = launch_args(deepseek, TrainingSpec(global_batch_size=1024), own[0].layout, 256, 8).megatron.args
    named = list(takewhile(lambda a: not a.startswith("--"), args[args.index("--recompute-modules") + 1 :]))
    assert named == ["mla_up_proj"]


def test_without_flash_attention_core_attn_stays() -> None:
    """The unfused core keeps its scores: rerunning it frees memory, and the recipes' sets keep it."""
    model = get_preset("mixtral-8x7b").model
    eager = TrainingSpec(global_batch_size=8, runtime=RuntimeFeatures(flash_attention=False))
    assert searched_module_sets(model, eager) == (
        (M.LAYERNORM, M.MOE_ACT),
        (M.CORE_ATTN, M.LAYERNORM, M.MOE_ACT, M.MOE),
    )


def test_a_named_set_is_the_only_one_searched() -> None:
    model = get_preset("mixtral-8x7b").model
    pinned = TrainingSpec(global_batch_size=8, runtime=RuntimeFeatures(recompute_modules=(M.MOE_ACT,)))
    assert searched_module_sets(model, pinned) == ()


def test_every_recipe_set_is_in_recompute_module_order() -> None:
    order = list(RecomputeModule)
    for s in RECIPE_MODULE_SETS:
        assert list(s) == sorted(s, key=order.index) and len(set(s)) == len(s)


def test_a_module_set_plan_estimates_and_launches_as_its_set() -> None:
    """Mixtral 8x7B on 64 H100 at tp 2, pp 2, cp 1: keeping every activation does not fit, full recompute is slow,
    and Nemotron 3 Nano's recipe set (less core_attn under flash attention: layernorm, moe_act, moe) wins. The
    plan's layout carries the set, re-estimates to the same step as a request naming that set, and launches with
    it."""
    result, cluster, training = _mixtral_plan(constraints={"tp": [2], "pp": [2], "cp": [1]})
    best = result.plans[0]
    modules = (M.LAYERNORM, M.MOE_ACT, M.MOE)
    assert best.layout.recompute is Recompute.SELECTIVE and best.layout.recompute_modules == modules
    assert best.estimate.step_time_s == pytest.approx(15.6743, rel=1e-3)  # H100 eta 0.6587 (15.5758 at 0.665)
    model = get_preset("mixtral-8x7b").model
    again = estimate(model, cluster, training, best.layout)
    assert again.fits and again.step_time_s == pytest.approx(best.estimate.step_time_s, rel=1e-12)
    named = training_for(training, best.layout)
    assert named.runtime.recompute_modules == modules
    plain = estimate(model, cluster, named, replace(best.layout, recompute_modules=None))
    assert plain.step_time_s == pytest.approx(best.estimate.step_time_s, rel=1e-12)
    # the request's default set (core_attn) keeps the experts' activations: the same layout does not fit
    default = estimate(model, cluster, training, replace(best.layout, recompute_modules=None))
    assert not default.fits and default.memory.peak_gib > best.estimate.memory.peak_gib
    launch = launch_args(model, training, best.layout, best.num_gpus, 8)
    args = launch.megatron.args
    flag = args.index("--recompute-modules")
    assert args[flag + 1 : flag + 4] == ["layernorm", "moe_act", "moe"]
    assert launch.megatron.config["--recompute-modules"] == ["layernorm", "moe_act", "moe"]
    assert launch.nemo.config["model.config.recompute_modules"] == ["layernorm", "moe_act", "moe"]


def test_constraints_without_selective_try_no_set() -> None:
    result, _, _ = _mixtral_plan(constraints={"tp": [2], "pp": [2], "cp": [1], "recompute": ["none", "full"]})
    assert result.plans and all(p.layout.recompute_modules is None for p in result.plans)


def test_torchtitan_plans_name_no_module_set() -> None:
    """TorchTitan picks its selective checkpoints by op, not by Megatron's modules: the sets are refused there."""
    result, _, _ = _mixtral_plan(rules=rule_set("torchtitan"), constraints={"tp": [2], "pp": [2], "cp": [1]})
    assert result.plans and all(p.layout.recompute_modules is None for p in result.plans)


@pytest.mark.parametrize(
    ("preset", "profile", "gpus", "batch", "framework"),
    [
        ("gpt3-175b", "dgx-a100-80gb", 1024, 1536, "core"),
        ("mixtral-8x7b", "dgx-h100", 64, 128, "megatron"),
        ("deepseek-v3", "dgx-h100", 256, 1024, "megatron"),
        ("qwen3-30b-a3b", "dgx-h100", 16, 256, "torchtitan"),
    ],
)
def test_a_module_set_space_over_the_requests_rows_is_the_space_built_for_it(
    preset: str, profile: str, gpus: int, batch: int, framework: str
) -> None:
    """`respace` (the request's rows, the set's modes and pair rules) builds what `build_space` would."""
    model = get_preset(preset).model
    training = TrainingSpec(global_batch_size=batch)
    rules = rule_set(framework)
    own = build_space(model, training, gpus, {}, rules)
    for modules in searched_module_sets(model, training):
        run = with_modules(training, modules)
        allowed = {"recompute": ["selective"]}
        fresh, reused = build_space(model, run, gpus, allowed, rules), respace(own, model, run, allowed, rules)
        assert len(reused) == len(fresh)
        assert np.array_equal(reused.key_pairs, fresh.key_pairs) and np.array_equal(reused.pairs, fresh.pairs)
        a, b = reused.candidates, fresh.candidates
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in Candidates.__slots__)
        x, y = reused.layer_candidates, fresh.layer_candidates
        assert all(np.array_equal(getattr(x, f), getattr(y, f)) for f in Candidates.__slots__)
