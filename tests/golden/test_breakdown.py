"""The per-row breakdown (`calibration.breakdown`) is the validated prediction, split: its parts add up to it."""

from __future__ import annotations

import pytest

from planner.calibration.breakdown import row_breakdown
from planner.calibration.fit import predict
from planner.calibration.published import PublishedRun, published_runs
from planner.calibration.report import VALIDATION_PROFILES, validation_profile_id
from planner.profiles import load_profiles

PROFILES = load_profiles()
RUNS = [r for r in published_runs() if r.gpu_kind in VALIDATION_PROFILES]


@pytest.mark.parametrize("run", RUNS, ids=[f"{r.id}-{r.variant}" for r in RUNS])
def test_parts_add_up_to_the_validated_prediction(run: PublishedRun) -> None:
    profile_id = validation_profile_id(run)
    b = row_breakdown(run, PROFILES, profile_id)
    _, step = predict(run, PROFILES[profile_id])
    assert b.predicted_step_s == pytest.approx(step, rel=1e-12)
    assert sum(b.step_parts_s.values()) == pytest.approx(step, rel=1e-9)
    assert b.error == pytest.approx(b.published_step_s / step - 1, rel=1e-12)
    x = b.layer
    assert min(x.gemms_s, x.attention_core_s, x.elementwise_s, x.host_floor_s, x.logits_s) > 0
    # the layer's compute parts, one micro-batch forward each, cannot exceed the step's compute
    layers = run.model.num_layers / run.layout.pp
    forward = x.gemms_s + x.attention_core_s + x.elementwise_s + x.quantize_s
    assert layers * b.num_microbatches * forward < b.step_parts_s["compute"]


def test_readme_h100_32b_exposes_data_parallel_traffic() -> None:
    """The issue-10 finding the breakdown shows: the 32B row's DP traffic is the part the others lack."""
    run = next(r for r in RUNS if r.id == "megatron_readme_h100_32B")
    b = row_breakdown(run, PROFILES, VALIDATION_PROFILES["H100"])
    assert b.step_parts_s["dp_comm"] > 0.25 * b.step_parts_s["compute"]
