"""Memory headroom: one usable-memory rule for every fit test, echoed in the answer."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import DEFAULT_MEMORY_HEADROOM, ClusterSpec, load_profiles
from planner.search.plan import plan
from planner.specs import TrainingSpec

H100 = load_profiles()["dgx-h100"]
LLAMA70 = get_preset("llama3-70b").model
TRAINING = TrainingSpec(global_batch_size=1024)
LAYOUT = Layout(tp=8, pp=4, dp=2, micro_batch_size=1, sequence_parallel=True, zero_stage=1)  # 50.7 GiB


def test_estimate_fits_against_capacity_less_headroom() -> None:
    whole = estimate(LLAMA70, ClusterSpec(profile=H100, num_gpus=64, memory_headroom=0.0), TRAINING, LAYOUT)
    peak = whole.memory.peak_gib
    assert whole.memory.usable_gib == whole.memory.capacity_gib == 80.0
    just_over = 1 - peak / 80.0 + 0.01  # usable 0.8 GiB below the peak
    cut = estimate(LLAMA70, ClusterSpec(profile=H100, num_gpus=64, memory_headroom=just_over), TRAINING, LAYOUT)
    assert whole.fits and peak < 80.0
    assert cut.memory.usable_gib == pytest.approx(80.0 * (1 - just_over))
    assert not cut.fits and [v.rule for v in cut.violations] == ["fits_memory"]
    assert cut.step_time_s == whole.step_time_s  # headroom decides fitting, never speed


def test_the_default_headroom_is_five_percent_and_every_plan_and_baseline_keeps_it() -> None:
    assert DEFAULT_MEMORY_HEADROOM == 0.05
    cluster = ClusterSpec(profile=H100, num_gpus=64)
    result = plan(LLAMA70, cluster, TRAINING, top_k=20)
    shown = [*result.plans, result.baseline.plan, result.modern_baseline.plan]
    assert all(p is not None and p.estimate.memory.peak_gib <= 76.0 for p in shown)
    loose = plan(LLAMA70, cluster.model_copy(update={"memory_headroom": 0.0}), TRAINING, top_k=20)
    assert loose.search.feasible >= result.search.feasible
    fastest = [min(p.estimate.step_time_s for p in r.plans) for r in (loose, result)]
    assert fastest[0] <= fastest[1]  # more usable memory is never slower (plans[0] is the simplest equivalent)


def test_the_diagnosis_capacity_is_the_usable_memory() -> None:
    cluster = ClusterSpec(profile=H100, num_gpus=8, memory_headroom=0.25)
    result = plan(get_preset("llama3-405b").model, cluster, TRAINING)
    assert result.plans == [] and result.diagnosis is not None
    assert result.diagnosis.capacity_gib == pytest.approx(60.0)


def test_the_api_echoes_the_headroom_and_refuses_one_out_of_range() -> None:
    body = {
        "model": {"preset": "llama3-8b"},
        "cluster": {"profile": "dgx-h100", "num_gpus": 8, "memory_headroom": 0.1},
        "training": {"global_batch_size": 64},
        "top_k": 1,
    }
    with TestClient(create_app()) as client:
        answer = client.post("/v1/plan", json=body).json()
        body["cluster"]["memory_headroom"] = 0.9  # type: ignore[index]
        bad = client.post("/v1/plan", json=body)
    assert answer["memory_headroom"] == 0.1
    assert answer["plans"][0]["estimate"]["memory"]["usable_gib"] == pytest.approx(72.0)
    assert bad.status_code == 422 and "memory_headroom" in bad.text
