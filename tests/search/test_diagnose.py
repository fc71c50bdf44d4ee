"""Diagnoses that say what to change: legal values, the GPU count and GPU memory that would fit, a relax list."""

from __future__ import annotations

import pytest

from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import plan
from planner.specs import ModelSpec, TrainingSpec

PROFILES = load_profiles()
GPT3 = get_preset("gpt3-175b").model


def test_a_pinned_value_that_does_not_divide_names_the_values_that_do() -> None:
    cluster = ClusterSpec(profile=PROFILES["dgx-a100-80gb"], num_gpus=1024)
    result = plan(GPT3, cluster, TrainingSpec(global_batch_size=1536), {"tp": 3})
    d = result.diagnosis
    assert result.plans == [] and d is not None
    # tp must divide 96 heads and stay within what the rules allow on 1,024 GPUs: powers of two up to 32.
    assert d.legal_values == {"tp": [1, 2, 4, 8, 16, 32]}
    assert "tp 3 is not legal here, legal tp: 1, 2, 4, 8, 16, 32" in d.message
    assert "tp" in d.relax


def test_nothing_fits_says_how_many_gpus_and_how_much_memory_would() -> None:
    # Before: llama3-405b on 64 A100-40GB said "use more GPUs" with relax [].
    cluster = ClusterSpec(profile=PROFILES["dgx-a100-40gb"], num_gpus=64)
    training = TrainingSpec(global_batch_size=512)
    result = plan(get_preset("llama3-405b").model, cluster, training)
    d = result.diagnosis
    assert result.plans == [] and d is not None and d.least_memory_gib is not None
    assert d.relax == ["num_gpus"]
    assert d.more_gpus is not None and d.more_gpus % 8 == 0 and d.more_gpus in (128, 256, 512)
    assert plan(get_preset("llama3-405b").model, cluster.model_copy(update={"num_gpus": d.more_gpus}), training).plans
    half = d.more_gpus // 2
    if half > 64:  # the factor below it was tried and did not fit
        assert not plan(get_preset("llama3-405b").model, cluster.model_copy(update={"num_gpus": half}), training).plans
    # The same layout fits a GPU whose usable memory (95%) holds its peak.
    assert d.min_gpu_memory_gib == pytest.approx(d.least_memory_gib / 0.95)
    assert f"use {d.more_gpus} GPUs ({d.more_gpus // 8} nodes)" in d.message
    assert f"at least {d.min_gpu_memory_gib:.0f} GiB" in d.message


def test_a_headroom_that_alone_stands_in_the_way_is_named() -> None:
    # ~1.3B parameters: about 25 GiB on one GPU with Adam (16 bytes per parameter) and full recompute.
    model = ModelSpec(num_layers=24, hidden_size=2048, num_attention_heads=16, vocab_size=32000, seq_length=2048)
    training = TrainingSpec(global_batch_size=8)
    whole = ClusterSpec(profile=PROFILES["dgx-a100-40gb"], num_gpus=1, memory_headroom=0.0)
    peak = plan(model, whole, training, {"recompute": "full", "micro_batch_size": 1})
    need = min(p.estimate.memory.peak_gib for p in peak.plans)
    assert 20 < need < 40
    tight = whole.model_copy(update={"memory_headroom": min(0.5, 1 - need / 40 + 0.01)})
    result = plan(model, tight, training, {"recompute": "full", "micro_batch_size": 1})
    assert result.plans == [] and result.diagnosis is not None
    assert "memory_headroom" in result.diagnosis.relax
