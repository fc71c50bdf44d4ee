"""The search is bounded by work, not by the clock: the same request gives the same answer under any load."""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import count

import pytest

from planner.constraints.costs import stage_costs_many
from planner.constraints.partition import PartitionProblem, SplitWork, solve_partitions
from planner.constraints.space import build_space
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import PlanResult, plan
from planner.search.rank import Objective
from planner.specs import Recompute, TrainingSpec

PROFILES = load_profiles()
GPT3 = get_preset("gpt3-175b").model
LLAMA8 = get_preset("llama3-8b").model


def _timeless(result: PlanResult) -> PlanResult:
    return replace(result, search=replace(result.search, elapsed_ms=0.0))


@pytest.mark.parametrize(
    ("model", "profile", "gpus", "constraints", "objective"),
    [
        (GPT3, "dgx-a100-80gb", 1024, None, Objective.STEP_TIME),
        (LLAMA8, "dgx-h100", 128, None, Objective.GPU_EFFICIENCY),
        (GPT3, "dgx-a100-80gb", 64, {"tp": 1, "pp": 1, "zero_stage": [0, 1]}, Objective.STEP_TIME),  # diagnosis
    ],
)
def test_the_answer_does_not_depend_on_the_clock(
    monkeypatch: pytest.MonkeyPatch,
    model: object,
    profile: str,
    gpus: int,
    constraints: dict[str, object] | None,
    objective: Objective,
) -> None:
    cluster = ClusterSpec(profile=PROFILES[profile], num_gpus=gpus)
    training = TrainingSpec(global_batch_size=gpus)
    args = (model, cluster, training, constraints)
    normal = plan(*args, top_k=10, objective=objective)  # type: ignore[arg-type]
    hours = count()
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + 3600.0 * next(hours))  # hours pass on every call
    slow = plan(*args, top_k=10, objective=objective)  # type: ignore[arg-type]
    assert next(hours) > 1  # the clock was read, and jumped
    assert normal.search.complete and slow.search.complete and slow.search.truncated_by == []
    assert _timeless(slow) == _timeless(normal)


def test_a_budget_smaller_than_the_space_truncates_deterministically() -> None:
    cluster = ClusterSpec(profile=PROFILES["dgx-a100-80gb"], num_gpus=1024)
    training = TrainingSpec(global_batch_size=1536)
    full = plan(GPT3, cluster, training)
    budget = full.search.candidates // 3
    first, second = (plan(GPT3, cluster, training, max_evaluated=budget) for _ in range(2))
    assert _timeless(first) == _timeless(second)
    s = first.search
    assert not s.complete and s.truncated_by == ["candidates"]
    # the request's own space (its default selective recompute, the attention core alone under flash attention,
    # left out as dominated by none) comes first; the recipe module sets' spaces after it only while the budget lasts
    own = len(build_space(GPT3, training, cluster.num_gpus, {"recompute": ["none", "full"]}))
    assert own < full.search.candidates and s.candidates == own and 0 < s.evaluated <= budget
    assert first.plans and [p.rank for p in first.plans] == list(range(1, len(first.plans) + 1))


def test_the_budget_skips_gpu_counts_in_order_and_says_so() -> None:
    cluster = ClusterSpec(profile=PROFILES["dgx-h100"], num_gpus=128)
    training = TrainingSpec(global_batch_size=256)
    full = plan(LLAMA8, cluster, training, objective=Objective.GPU_EFFICIENCY)
    quarter = full.search.candidates // 4
    cut = plan(LLAMA8, cluster, training, objective=Objective.GPU_EFFICIENCY, max_evaluated=quarter)
    assert full.search.complete and not cut.search.complete and cut.search.truncated_by == ["candidates"]
    assert cut.search.candidates < full.search.candidates  # later GPU counts were never built
    assert max(p.num_gpus for p in cut.plans) < 128
    again = plan(LLAMA8, cluster, training, objective=Objective.GPU_EFFICIENCY, max_evaluated=quarter)
    assert _timeless(again) == _timeless(cut)


def test_a_budget_spent_by_the_search_leaves_the_diagnosis_truncated() -> None:
    cluster = ClusterSpec(profile=PROFILES["dgx-a100-80gb"], num_gpus=64)
    training = TrainingSpec(global_batch_size=64)
    constraints = {"tp": 1, "pp": 1, "zero_stage": [0, 1]}
    full = plan(GPT3, cluster, training, constraints)
    assert full.search.complete and full.diagnosis is not None and "tp" in full.diagnosis.relax
    cut = plan(GPT3, cluster, training, constraints, max_evaluated=full.search.candidates)
    assert not cut.search.complete and cut.search.truncated_by == ["diagnosis"]
    assert cut.search.evaluated == cut.search.candidates and cut.plans == []
    assert cut.diagnosis is not None and cut.diagnosis.relax == []
    assert _timeless(cut) == _timeless(plan(GPT3, cluster, training, constraints, max_evaluated=full.search.candidates))


def _problems() -> list[PartitionProblem]:
    model = get_preset("llama3-405b").model  # 126 layers: no even split over 4, 8 or 16 stages
    hw = PROFILES["dgx-h100"].hardware(TrainingSpec(global_batch_size=1024).precision)
    training = TrainingSpec(global_batch_size=1024)
    layouts = [
        Layout(tp=8, pp=pp, dp=2048 // (8 * pp), vp=vp, micro_batch_size=1, recompute=Recompute.FULL, zero_stage=1)
        for pp, vp in [(16, 1), (8, 1), (4, 1), (16, 2), (32, 1)]
    ]
    costs = stage_costs_many(model, training, layouts, hw)
    return [PartitionProblem(model.num_layers, x.pp, x.vp, c) for x, c in zip(layouts, costs, strict=True)]


def test_cp_sat_splits_are_identical_across_repeated_solves() -> None:
    problems = _problems()
    runs = [solve_partitions(problems, SplitWork(1.0)) for _ in range(5)]
    assert all(run == runs[0] for run in runs)
    assert any(split is not None for split in runs[0])
    for p, split in zip(problems, runs[0], strict=True):
        assert split is None or (len(split) == p.pp and sum(split) == p.num_layers)


def test_spent_cp_sat_work_keeps_the_default_split_and_says_so() -> None:
    work = SplitWork(0.0)
    assert solve_partitions(_problems(), work) == [None] * 5
    assert work.truncated
    plenty = SplitWork(1.0)
    solve_partitions(_problems(), plenty)
    assert not plenty.truncated and 0 < plenty.left < 1.0
