"""Sliding-window attention: the band a windowed layer computes, by hand and against a brute-force count, and
what it changes in flop and time (the fused core only; the unfused core masks the whole matrix)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner.costmodel.flops import layer_forward_flop, model_flop_per_sequence
from planner.costmodel.gemms import (
    CAUSAL_FRACTION,
    attention_core_flop,
    attention_core_fraction,
    attention_score_flop,
    windowed_fraction,
)
from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.specs import ModelSpec, RuntimeFeatures, TrainingSpec

GPT_OSS = get_preset("gpt-oss-120b").model
FULL = GPT_OSS.model_copy(update={"sliding_window": None, "sliding_window_pattern": None})
EVERY_LAYER = GPT_OSS.model_copy(update={"sliding_window_pattern": None})


def test_the_band_by_hand() -> None:
    # GPT-OSS at 4,096 tokens: 128/4096 - 128^2 / (2 * 4096^2) = 1/32 - 1/2048.
    assert windowed_fraction(128, 4096) == 1 / 32 - 1 / 2048 == 0.03076171875
    # A window as long as the sequence is causal attention, and longer ones too.
    assert windowed_fraction(4096, 4096) == windowed_fraction(10**6, 4096) == CAUSAL_FRACTION
    # Half the layers windowed (layers 1, 3, ...), half full.
    assert GPT_OSS.num_window_layers == 18
    assert attention_core_fraction(GPT_OSS) == (0.5 + 0.03076171875) / 2
    assert attention_core_fraction(EVERY_LAYER) == 0.03076171875
    assert attention_core_fraction(FULL) == CAUSAL_FRACTION


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(seq=st.integers(1, 3000), window=st.integers(1, 4000))
def test_the_band_is_the_brute_force_count_in_the_continuum_limit(seq: int, window: int) -> None:
    """Query i attends min(i + 1, w) keys. The exact count exceeds the continuum one by the diagonal's s/2 (the
    same half-diagonal `CAUSAL_FRACTION` leaves out of the causal count) and never by more than s."""
    exact = sum(min(i + 1, window) for i in range(seq))
    continuum = windowed_fraction(window, seq) * seq**2
    assert 0 <= exact - continuum <= seq


@pytest.mark.parametrize(("layers", "pattern", "windowed"), [(36, 2, 18), (37, 2, 19), (62, 6, 52), (5, None, 5)])
def test_windowed_layers_follow_megatron_cores_rule(layers: int, pattern: int | None, windowed: int) -> None:
    """Megatron-Core `is_layer_window_attention`: layer n (from 1) is full iff n % window_attn_skip_freq == 0."""
    model = GPT_OSS.model_copy(update={"num_layers": layers, "sliding_window_pattern": pattern})
    assert model.num_window_layers == windowed == sum(pattern is None or n % pattern != 0 for n in range(1, layers + 1))


def test_the_window_changes_only_the_attention_core_flop() -> None:
    core = attention_score_flop(GPT_OSS, 1)
    assert attention_core_flop(FULL, 1) - attention_core_flop(GPT_OSS, 1) == pytest.approx(
        (CAUSAL_FRACTION - attention_core_fraction(GPT_OSS)) * core
    )
    assert layer_forward_flop(FULL, 1) - layer_forward_flop(GPT_OSS, 1) == pytest.approx(
        attention_core_flop(FULL, 1) - attention_core_flop(GPT_OSS, 1)
    )
    assert model_flop_per_sequence(GPT_OSS) < model_flop_per_sequence(FULL)


def _estimate(model: ModelSpec, flash: bool) -> tuple[float, float]:
    """(step seconds, forward seconds of one micro-batch) for GPT-OSS's H100 recipe layout at 32K tokens."""
    profile = load_profiles()["dgx-h100"]
    training = TrainingSpec(global_batch_size=64, runtime=RuntimeFeatures(flash_attention=flash))
    layout = Layout(tp=1, pp=4, dp=16, ep=8, zero_stage=1)
    long = model.model_copy(update={"seq_length": 32768})
    result = estimate(long, ClusterSpec(profile=profile, num_gpus=64), training, layout)
    return result.step_time_s, result.microbatch_forward_s


def test_a_fused_kernel_skips_the_blocks_outside_the_window() -> None:
    windowed, full = _estimate(GPT_OSS, flash=True), _estimate(FULL, flash=True)
    assert windowed[1] < full[1] and windowed[0] < full[0]


def test_the_unfused_core_masks_the_whole_matrix() -> None:
    """Megatron-Core's local DotProductAttention computes every score and masks the ones outside the window."""
    assert _estimate(GPT_OSS, flash=False) == _estimate(FULL, flash=False)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"sliding_window": None}, "sliding_window_pattern(2) needs sliding_window"),
        ({"sliding_window_pattern": 1}, "sliding_window_pattern"),
        ({"sliding_window": 0}, "sliding_window"),
    ],
)
def test_bad_windows_are_refused_naming_the_field(update: dict[str, int | None], message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        ModelSpec.model_validate(GPT_OSS.model_dump() | update)
