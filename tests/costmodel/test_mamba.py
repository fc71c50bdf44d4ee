"""Hybrid models (Megatron-LM `--hybrid-override-pattern`): Mamba-2 layers by hand, Megatron-LM's flop count, and a
hybrid of alternating attention and MLP layers priced exactly as the transformer of half the layers."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner.costmodel.candidates import Candidates
from planner.costmodel.flops import model_flop_per_sequence
from planner.costmodel.gemms import layer_gemms, mamba_gemms
from planner.costmodel.mamba import (
    SSD_CHUNK_SIZE,
    in_width,
    mixer_activation_bytes_per_token,
    mixer_params,
    mixer_time_s,
    ssd_scan_flop,
)
from planner.costmodel.params import active_params, total_params
from planner.estimate import estimate
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.profiles import ClusterSpec, load_profiles
from planner.specs import ModelSpec, TrainingSpec

from .hardware import fabric_hardware

NEMOTRON_H_8B_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
"""Nemotron-H 8B's 52 layers (Hugging Face nvidia/Nemotron-H-8B-Base-8K config.json, hybrid_override_pattern)."""
NEMOTRON_H_8B = ModelSpec(
    name="Nemotron-H 8B shape",
    num_layers=52,
    hidden_size=4096,
    num_attention_heads=32,
    num_query_groups=8,
    head_dim=128,
    ffn_hidden_size=21504,
    vocab_size=131072,
    seq_length=8192,
    hybrid_pattern=NEMOTRON_H_8B_PATTERN,
    mamba={"state_dim": 128, "head_dim": 64, "num_groups": 8, "num_heads": 128},
)


def test_layer_counts_and_shares() -> None:
    m = NEMOTRON_H_8B
    assert (m.num_mamba_layers, m.num_attention_layers, m.num_dense_layers, m.num_moe_layers) == (24, 4, 24, 0)
    assert m.mamba_layer_share + m.attention_layer_share + m.dense_mlp_share == m.blocks_per_layer == 1.0
    assert (m.mamba_num_heads, m.mamba_inner_size) == (128, 8192)
    # A transformer layer holds two blocks, attention and its MLP.
    plain = m.model_copy(update={"hybrid_pattern": None, "mamba": None})
    assert (plain.blocks_per_layer, plain.attention_layer_share, plain.dense_mlp_share) == (2.0, 1.0, 1.0)


def test_mamba_projections_by_hand() -> None:
    # in_proj: h -> z, x (8192 each) + B, C (8 groups x 128 each) + dt (128 heads) = 18,560.
    assert in_width(NEMOTRON_H_8B) == 2 * 8192 + 2 * 8 * 128 + 128 == 18560
    in_proj, out_proj = mamba_gemms(NEMOTRON_H_8B)
    assert (in_proj.k, in_proj.n, out_proj.k, out_proj.n) == (4096, 18560, 8192, 4096)
    assert in_proj.layer_share == out_proj.layer_share == 24 / 52
    assert out_proj.row_parallel and not in_proj.row_parallel
    assert [g.name for g in layer_gemms(NEMOTRON_H_8B)] == ["qkv", "proj", "in_proj", "out_proj", "fc1", "fc2"]


def test_model_flop_is_megatron_lms_hybrid_count() -> None:
    """Megatron-LM `num_floating_point_operations` -> `hybrid_flops` (megatron/training/training.py), written out
    for Nemotron-H 8B at one sequence: 3 x (attention, MLP, Mamba layers and the logits)."""
    s, h, v = 8192, 4096, 131072
    attention = 4 * s * h * (h + h * 8 / 32) + 2 * s**2 * h  # attn_layer_flops, kv_channels x heads = h
    mlp = 4 * (21504 / h) * s * h**2  # mlp_layer_flops, squared ReLU (not SwiGLU)
    d_in, state, groups, heads = 2 * h, 128, 8, 128
    mamba = 2 * s * h * (2 * d_in + 2 * groups * state + heads) + 7 * s * d_in * state + 2 * s * d_in * h
    megatron = 3 * (4 * attention + 24 * mlp + 24 * mamba + 2 * s * h * v)
    assert model_flop_per_sequence(NEMOTRON_H_8B) == pytest.approx(megatron, rel=1e-12)
    assert ssd_scan_flop(NEMOTRON_H_8B, 1.0) == 7 * s * d_in * state


def test_parameters_by_hand() -> None:
    h, inner, groups, state, heads, kernel = 4096, 8192, 8, 128, 128, 4
    channels = inner + 2 * groups * state
    mixer = channels * (kernel + 1) + 3 * heads + inner  # conv weight and bias, dt_bias / A_log / D, norm
    assert mixer_params(NEMOTRON_H_8B) == mixer
    mamba = h * 18560 + inner * h + mixer
    attention = h * (4096 + 2 * 1024) + 4096 * h
    mlp = 2 * h * 21504
    embedding_and_output = 2 * 131072 * h
    norms = 52 * h + h  # one per layer and the final one
    expected = 24 * mamba + 4 * attention + 24 * mlp + embedding_and_output + norms
    assert total_params(NEMOTRON_H_8B) == active_params(NEMOTRON_H_8B) == expected
    assert 8.0e9 < expected < 8.2e9  # "Nemotron-H 8B"


def test_mixer_time_by_hand() -> None:
    """One Mamba layer's mixer on the round-number GPU (1 TB/s, 1 PFLOP/s at eta 0.5), 8,192 tokens at tp 2: its
    bytes per token, over the bandwidth, beat its scan flop at half the peak."""
    hw = fabric_hardware(8, 8)
    c = Candidates.from_layouts([Layout(tp=2, pp=1, dp=1, micro_batch_size=1)], NEMOTRON_H_8B.num_layers, 1)
    inner, groups, state, q = 8192, 8, 128, SSD_CHUNK_SIZE
    conv = 4 * (inner + 2 * groups * state)
    scan = 2 * (4 * inner + 4 * groups * state)
    states = 16 * inner * state / q
    scores = 8 * groups * q
    layout = 4 * 18560 + 8 * inner
    forward_bytes = (conv + scan + states + scores + layout) * 8192 / 2
    backward_bytes = (2 * (conv + scan + states + scores + layout) + conv + scan + states + scores) * 8192 / 2
    forward, backward = mixer_time_s(NEMOTRON_H_8B, c, hw)
    assert float(forward[0]) == pytest.approx(forward_bytes / 1e12, rel=1e-12)
    assert float(backward[0]) == pytest.approx(backward_bytes / 1e12, rel=1e-12)
    assert forward_bytes / 1e12 > 7 * 8192 * inner * state / 2 / 0.5e15  # memory-bound here


def test_mixer_activations_by_hand() -> None:
    profile = load_profiles()["dgx-h100"]
    bf16_run, fp8_run = (TrainingSpec(global_batch_size=8, precision=p) for p in ("bf16", "fp8"))
    bf16 = training_numerics(bf16_run, profile.hardware(bf16_run.precision))
    fp8 = training_numerics(fp8_run, profile.hardware(fp8_run.precision))
    assert mixer_activation_bytes_per_token(NEMOTRON_H_8B, bf16) == 2 * (18560 + 2 * 8192) + 2 * 8192
    assert mixer_activation_bytes_per_token(NEMOTRON_H_8B, fp8) == 2 * (18560 + 2 * 8192) + 1 * 8192


def _pair_of(model: ModelSpec, block: str) -> ModelSpec:
    """The hybrid whose layers alternate attention and `block` (- or E), twice as many as `model`'s."""
    return model.model_copy(
        update={"num_layers": 2 * model.num_layers, "hybrid_pattern": f"*{block}" * model.num_layers}
    )


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(
    layers=st.integers(2, 12),
    heads=st.sampled_from([8, 16, 32]),
    tp=st.sampled_from([1, 2, 4, 8]),
    mbs=st.sampled_from([1, 2]),
    recompute=st.sampled_from(["none", "selective", "full"]),
    precision=st.sampled_from(["bf16", "fp8"]),
)
def test_alternating_attention_and_mlp_is_the_transformer_of_half_the_layers(
    layers: int, heads: int, tp: int, mbs: int, recompute: str, precision: str
) -> None:
    """A transformer layer is an attention block and an MLP block, each behind a norm and a residual; a hybrid of
    alternating * and - layers is the same network, so its flop, parameters, memory and step time must match."""
    transformer = ModelSpec(
        num_layers=layers,
        hidden_size=heads * 128,
        num_attention_heads=heads,
        num_query_groups=8,
        gated_mlp=True,
        ffn_hidden_size=heads * 384,
        vocab_size=32000,
        seq_length=4096,
    )
    hybrid = _pair_of(transformer, "-")
    assert total_params(hybrid) == total_params(transformer)
    assert model_flop_per_sequence(hybrid) == pytest.approx(model_flop_per_sequence(transformer), rel=1e-12)
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=8)
    training = TrainingSpec(global_batch_size=64, precision=precision)
    layout = Layout(tp=tp, pp=1, dp=8 // tp, micro_batch_size=mbs, recompute=recompute, sequence_parallel=tp > 1)
    a, b = estimate(transformer, cluster, training, layout), estimate(hybrid, cluster, training, layout)
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-9)
    assert b.time_breakdown_s == pytest.approx(a.time_breakdown_s, rel=1e-9, abs=1e-12)
    if recompute != "full":  # full recompute keeps each layer's input: a hybrid has twice the layers to checkpoint
        assert b.memory.peak_gib == pytest.approx(a.memory.peak_gib, rel=1e-9)


def test_alternating_attention_and_moe_is_the_moe_transformer_of_half_the_layers() -> None:
    """The same for an MoE model (without the all-to-all overlap, whose windows a hybrid's E layer does not share
    with attention)."""
    transformer = ModelSpec(
        num_layers=8,
        hidden_size=2048,
        num_attention_heads=16,
        num_query_groups=4,
        gated_mlp=True,
        vocab_size=32000,
        seq_length=4096,
        moe={"num_experts": 16, "top_k": 2, "expert_ffn_hidden_size": 1024, "num_shared_experts": 1},
    )
    hybrid = _pair_of(transformer, "E")
    assert total_params(hybrid) == total_params(transformer)
    assert active_params(hybrid) == active_params(transformer)
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=8)
    training = TrainingSpec(global_batch_size=64, precision="bf16")
    layout = Layout(tp=2, pp=1, dp=4, ep=4, micro_batch_size=1, sequence_parallel=True)
    a, b = estimate(transformer, cluster, training, layout), estimate(hybrid, cluster, training, layout)
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-9)
    assert b.memory.peak_gib == pytest.approx(a.memory.peak_gib, rel=1e-9)


def test_nemotron_h_8b_on_one_h100_node() -> None:
    """End to end: Nemotron-H 8B's hybrid prices its Mamba layers, and its step is neither free nor above peak."""
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=8)
    training = TrainingSpec(global_batch_size=64, precision="bf16")
    e = estimate(NEMOTRON_H_8B, cluster, training, Layout(tp=2, pp=1, dp=4, micro_batch_size=1, sequence_parallel=True))
    assert 0.2 < e.mfu < 0.75
    assert e.hardware_tflops_per_gpu <= 989.4
    assert math.isfinite(e.step_time_s) and e.time_breakdown_s["tp_comm"] > 0


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"hybrid_pattern": "M*-"}, "hybrid_pattern has 3 layers, must equal num_layers(52)"),
        ({"mamba": None}, "hybrid_pattern has Mamba layers (M) but mamba is null"),
        ({"hybrid_pattern": None}, "mamba needs hybrid_pattern"),
        ({"hybrid_pattern": "*-" * 26}, "mamba is set but hybrid_pattern has no Mamba layer (M)"),
        ({"hybrid_pattern": "M*E-" * 13}, "hybrid_pattern has MoE layers (E) but moe is null"),
        ({"sliding_window": 128}, "sliding_window is not supported with hybrid_pattern"),
        ({"hybrid_pattern": "M*x-" * 13}, "String should match pattern"),
        ({"mamba": {"num_heads": 100, "num_groups": 8}}, "mamba num_heads(100) % num_groups(8) = 4, must be 0"),
    ],
)
def test_hybrid_rules_name_the_field(update: dict[str, object], message: str) -> None:
    data = NEMOTRON_H_8B.model_dump() | update
    with pytest.raises(ValidationError, match=re.escape(message)):
        ModelSpec.model_validate(data)
