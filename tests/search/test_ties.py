"""Ties: plans within the model's stated uncertainty of the fastest are marked equivalent, simplest first."""

from __future__ import annotations

import pytest

from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import EQUIVALENT_WITHIN, plan, simplicity
from planner.specs import Recompute, TrainingSpec

H100 = load_profiles()["dgx-h100"]


def test_the_uncertainty_is_the_stated_validate_figure() -> None:
    assert EQUIVALENT_WITHIN == 0.03  # Narayanan 2021 Table 2 PTD-P, mean abs step-time error (README Accuracy)


def test_simplicity_orders_fewer_dimensions_then_smaller_tp_pp_then_no_interleaving_then_less_recompute() -> None:
    plain = Layout(tp=8, pp=1, dp=8)
    piped = Layout(tp=8, pp=2, dp=4)
    small_tp = Layout(tp=4, pp=2, dp=8)
    interleaved = Layout(tp=4, pp=2, dp=8, vp=2)
    recomputed = Layout(tp=4, pp=2, dp=8, recompute=Recompute.SELECTIVE)
    with_cp = Layout(tp=2, pp=2, dp=8, cp=2)
    ordered = sorted([with_cp, recomputed, interleaved, piped, small_tp, plain], key=simplicity)
    assert ordered == [plain, small_tp, recomputed, interleaved, piped, with_cp]


@pytest.mark.parametrize(("preset", "gpus", "batch"), [("llama3-70b", 512, 1536), ("llama3-8b", 64, 512)])
def test_equivalent_plans_come_first_simplest_first_and_the_rest_by_step_time(
    preset: str, gpus: int, batch: int
) -> None:
    result = plan(
        get_preset(preset).model, ClusterSpec(profile=H100, num_gpus=gpus), TrainingSpec(global_batch_size=batch)
    )
    times = [p.estimate.step_time_s for p in result.plans]
    fastest = min(times)
    marks = [p.equivalent for p in result.plans]
    assert marks == sorted(marks, reverse=True)  # every equivalent plan before every other
    for p, t in zip(result.plans, times, strict=True):
        assert p.equivalent == (t <= fastest * (1 + EQUIVALENT_WITHIN))
    same = [p for p in result.plans if p.equivalent]
    assert [simplicity(p.layout) for p in same] == sorted(simplicity(p.layout) for p in same)
    rest = [t for p, t in zip(result.plans, times, strict=True) if not p.equivalent]
    assert rest == sorted(rest)
    assert [p.rank for p in result.plans] == list(range(1, len(result.plans) + 1))
    base = result.modern_baseline
    assert base.plan is not None and base.speedup_of_best == pytest.approx(base.plan.estimate.step_time_s / fastest)
