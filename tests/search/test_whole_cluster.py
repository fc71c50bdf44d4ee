"""Whole clusters: a GPU count that factors badly also searches the whole-node counts below it that factor well."""

from __future__ import annotations

import statistics

import pytest

from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import factors_well, gpu_counts, plan
from planner.search.rank import Objective
from planner.specs import TrainingSpec

H100 = load_profiles()["dgx-h100"]
LLAMA70 = get_preset("llama3-70b").model


@pytest.mark.parametrize(
    ("n", "batch", "expected"),
    [
        (504, 1024, False),  # 8 x 63: pp 63 leaves ~1 layer per stage; 63 has no factor dividing 1024
        (496, 1024, False),  # 8 x 31 x 2: pp 31 does not divide 80 and leaves < 4 layers per stage
        (500, 1024, False),  # 4 x 125: 125 divides neither the batch nor gives a sane pp
        (480, 1024, True),  # 8 x 15 x 4: 80 / 15 = 5.3 layers per stage
        (448, 1024, True),  # 8 x 7 x 8
        (512, 1024, True),  # 8 x 1 x 64
        (504, 1536, False),  # 1536 = 2^9 x 3 adds dp 3, but pp 21 still leaves < 4 layers per stage
        (480, 1536, True),  # 8 x 5 x 12: pp 5 divides 80
    ],
)
def test_factors_well_by_hand(n: int, batch: int, expected: bool) -> None:
    assert factors_well(n, 8, 80, batch) is expected


def test_a_bad_count_adds_the_three_largest_whole_node_counts_that_factor_well() -> None:
    training = TrainingSpec(global_batch_size=1024)
    assert gpu_counts(504, 8, Objective.STEP_TIME, LLAMA70, training) == [504, 480, 448, 416]
    assert gpu_counts(500, 8, Objective.STEP_TIME, LLAMA70, training) == [500, 480, 448, 416]
    assert gpu_counts(512, 8, Objective.STEP_TIME, LLAMA70, training) == [512]


@pytest.mark.parametrize("gpus", [504, 500])
def test_llama3_70b_on_a_badly_factoring_h100_count_gets_a_sane_plan_and_says_what_is_idle(gpus: int) -> None:
    result = plan(LLAMA70, ClusterSpec(profile=H100, num_gpus=gpus), TrainingSpec(global_batch_size=1024), top_k=3)
    best = result.plans[0]
    # Before: 504 gave pp 63 (one layer per stage) at 6% MFU; 500 gave no plan at all.
    assert best.num_gpus in (480, 448, 416)
    assert best.estimate.mfu > 0.4
    stages = best.layout.layers_per_stage or (80,)
    assert statistics.median(stages) >= 2
    assert result.idle_gpus == gpus - best.num_gpus > 0
    assert result.idle_reason is not None and f"{gpus} GPUs factor badly" in result.idle_reason
    assert f"leaving {result.idle_gpus} idle" in result.idle_reason


def test_a_count_that_factors_well_searches_only_itself_and_leaves_nothing_idle() -> None:
    result = plan(LLAMA70, ClusterSpec(profile=H100, num_gpus=512), TrainingSpec(global_batch_size=1024), top_k=3)
    assert {p.num_gpus for p in result.plans} == {512}
    assert result.idle_gpus == 0 and result.idle_reason is None


def test_the_requested_count_wins_when_it_is_faster_even_if_it_factors_badly() -> None:
    # 504 with batch 1536 factors badly by the rule, yet its pp-21 layout is faster than 480's best.
    result = plan(LLAMA70, ClusterSpec(profile=H100, num_gpus=504), TrainingSpec(global_batch_size=1536), top_k=1)
    assert result.plans[0].num_gpus == 504
    assert result.idle_gpus == 0


def test_gpu_efficiency_with_a_step_time_bound_keeps_only_plans_within_it() -> None:
    model = get_preset("llama3-8b").model
    cluster = ClusterSpec(profile=H100, num_gpus=128)
    training = TrainingSpec(global_batch_size=256)
    free = plan(model, cluster, training, top_k=3, objective=Objective.GPU_EFFICIENCY)
    slowest_allowed = free.plans[0].estimate.step_time_s / 2
    bounded = plan(
        model, cluster, training, top_k=3, objective=Objective.GPU_EFFICIENCY, max_step_time_s=slowest_allowed
    )
    assert bounded.plans
    assert all(p.estimate.step_time_s <= slowest_allowed for p in bounded.plans)
    assert bounded.plans[0].num_gpus > free.plans[0].num_gpus
    per_gpu = [p.estimate.tokens_per_s / p.num_gpus for p in bounded.plans if not p.equivalent]
    assert per_gpu == sorted(per_gpu, reverse=True)  # equivalent plans lead, simplest first; the rest by objective


def test_an_unreachable_step_time_bound_is_diagnosed_with_the_fastest_time() -> None:
    cluster = ClusterSpec(profile=H100, num_gpus=512)
    result = plan(LLAMA70, cluster, TrainingSpec(global_batch_size=1024), top_k=1, max_step_time_s=0.5)
    fastest = plan(LLAMA70, cluster, TrainingSpec(global_batch_size=1024), top_k=1).plans[0].estimate.step_time_s
    assert result.plans == []
    assert result.diagnosis is not None and result.diagnosis.relax == ["max_step_time_s"]
    assert "max_step_time_s = 0.5 s" in result.diagnosis.message
    # The diagnosis reads the fastest default split; CP-SAT may only shorten it.
    shown = float(result.diagnosis.message.split("the fastest takes ")[1].split(" s")[0])
    assert shown == pytest.approx(fastest, rel=0.05) and shown >= fastest * (1 - 5e-3)
