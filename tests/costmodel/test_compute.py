"""GEMM time from tile and wave quantisation, and the host's launch floor, against hand-computed numbers."""

import numpy as np

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.costmodel.gemms import GemmRole
from planner.costmodel.host import (
    EAGER_HOST_US_PER_KERNEL,
    FUSED_HOST_US_PER_KERNEL,
    GRAPH_HOST_US_PER_KERNEL,
    host_s_per_kernel,
    layer_host_s,
    layer_kernels,
)
from planner.layout import Layout
from planner.profiles import Hardware
from planner.specs import CudaGraphScope, ExpertGemm, ModelSpec, MoESpec, RuntimeFeatures
from planner.units import MICRO

# 4 SMs, 2 x 2 tiles, peak 1e12 flop/s at eta = 0.5 (one SM: 1.25e11 flop/s), 1 us per GEMM kernel.
HW = Hardware(
    peak_flop_per_s=1e12, hbm_bytes=1e9, hbm_bandwidth_bytes_per_s=1e12, gpus_per_node=8, nvlink_domain_gpus=8,
    nvlink_bytes_per_s=1e9, nic_bytes_per_s_per_gpu=1e9, nvlink_latency_s=0.0, network_latency_s=0.0,
    collective_base_latency_s=0.0, net_overhead_s=0.0,
    gemm_peak_efficiency=0.5, gemm_overhead_s=1e-6, sm_count=4, gemm_tile_m=2, gemm_tile_n=2,
)  # fmt: skip
TILE_S = 2 * 2 * 2 * 10 / 1.25e11
"""One 2 x 2 tile over k = 10: 80 flop on one SM."""


def test_whole_waves_take_flop_over_eta_peak() -> None:
    # 4 x 4 output = 4 tiles = one full wave; 8 x 4 = two full waves: exactly flop / (eta * peak) + t0.
    np.testing.assert_allclose(compute.gemm_time_s(4, 4, 10, HW), [2 * 4 * 4 * 10 / 0.5e12 + 1e-6], rtol=1e-12)
    np.testing.assert_allclose(compute.gemm_time_s(8, 4, 10, HW), [TILE_S * 2 + 1e-6], rtol=1e-12)


def test_tile_and_wave_quantisation_round_up() -> None:
    # 5 x 4: tiles ceil(5/2) x 2 = 6 -> 2 waves, as slow as 8 x 4 (tile quantisation and a partial wave).
    # 1 x 1: one tile, one (mostly idle) wave.
    assert compute.gemm_time_s(5, 4, 10, HW) == compute.gemm_time_s(8, 4, 10, HW)
    np.testing.assert_allclose(compute.gemm_time_s(1, 1, 10, HW), [TILE_S + 1e-6], rtol=1e-12)
    # A batch of 3 GEMMs of one tile each shares one wave (3 tiles on 4 SMs); 5 need two waves.
    assert compute.gemm_time_s(2, 2, 10, HW, 3) == compute.gemm_time_s(2, 2, 10, HW)
    np.testing.assert_allclose(compute.gemm_time_s(2, 2, 10, HW, 5), [2 * TILE_S + 1e-6], rtol=1e-12)
    # Zero-size GEMMs cost nothing; arrays broadcast.
    assert compute.gemm_time_s(np.array([0.0, 4.0]), 4, 10, HW)[0] == 0.0


GPT = ModelSpec(
    num_layers=2, hidden_size=64, num_attention_heads=2, vocab_size=128, seq_length=8, learned_position_embeddings=True
)


def test_kernels_per_layer_by_hand() -> None:
    # GPT (learned positions, GeLU): 4 GEMMs, 2 norms, 2 dropout-adds. Eager 2021: unfused core 5 and a
    # bias-GeLU 1 -> 14 forward; backward 2 x 4 GEMMs + 4 main_grad adds + 10 = 22. With tp = 2: +2 each.
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1), Layout(tp=2, pp=1, dp=1)], GPT.num_layers, 1)
    eager = layer_kernels(GPT, c, RuntimeFeatures(flash_attention=False, fused_kernels=False))
    np.testing.assert_array_equal(eager.forward, [14, 16])
    np.testing.assert_array_equal(eager.backward, [22, 24])
    # Transformer Engine + fused attention: core 1, GeLU in the GEMM epilogue -> 9 forward, 2 x 4 + 5 = 13 back.
    fused = layer_kernels(GPT, c, RuntimeFeatures())
    np.testing.assert_array_equal(fused.forward, [9, 11])
    np.testing.assert_array_equal(fused.backward, [13, 15])
    assert host_s_per_kernel(RuntimeFeatures(fused_kernels=False)) == EAGER_HOST_US_PER_KERNEL * MICRO
    assert host_s_per_kernel(RuntimeFeatures()) == FUSED_HOST_US_PER_KERNEL * MICRO
    assert host_s_per_kernel(RuntimeFeatures(cuda_graphs=True)) == GRAPH_HOST_US_PER_KERNEL * MICRO


def test_a_tiny_layer_runs_at_the_host_floor_and_graphs_lower_it() -> None:
    # The tiny GPT's GPU work is nanoseconds on this 1e12 flop/s GPU, well under 9 kernels x 10 us:
    # the pass takes the floor, not floor + GPU. CUDA graphs cut it to 9 x 1 us.
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], GPT.num_layers, 1)
    hw = Hardware(**{**{f: getattr(HW, f) for f in Hardware.__slots__}, "gemm_overhead_s": 0.0})
    fused = compute.layer_times(GPT, c, hw, RuntimeFeatures())
    np.testing.assert_allclose(fused.forward_s, [9 * FUSED_HOST_US_PER_KERNEL * MICRO], rtol=1e-12)
    np.testing.assert_allclose(fused.backward_s, [13 * FUSED_HOST_US_PER_KERNEL * MICRO], rtol=1e-12)
    graphs = compute.layer_times(GPT, c, hw, RuntimeFeatures(cuda_graphs=True))
    np.testing.assert_allclose(graphs.forward_s, [9 * GRAPH_HOST_US_PER_KERNEL * MICRO], rtol=1e-12)


def test_a_large_layer_never_sees_the_floor() -> None:
    # h = 4096, 4096 tokens: the GPU's milliseconds dwarf the host's 9 x 20 us; the floor changes nothing.
    big = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, vocab_size=128, seq_length=4096)
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], big.num_layers, 1)
    eager = compute.layer_times(big, c, HW, RuntimeFeatures(fused_kernels=False))
    graphs = compute.layer_times(big, c, HW, RuntimeFeatures(fused_kernels=False, cuda_graphs=True))
    assert eager.forward_s[0] == graphs.forward_s[0] > 1e-3
    assert eager.backward_s[0] == graphs.backward_s[0]


# Every layer MoE: 8 experts, top-1, expert ffn 2 (not gated), hidden 4, 8 tokens: on one GPU (ep = 1) each expert
# sees 8 x 1 / 8 = 1 row. fc1 (k 4, n 2): one 2 x 2 tile per expert; fc2 (k 2, n 4): two.
MOE8 = ModelSpec(
    num_layers=2, hidden_size=4, num_attention_heads=2, vocab_size=128, seq_length=8, ffn_hidden_size=2,
    moe=MoESpec(num_experts=8, top_k=1, expert_ffn_hidden_size=2),
)  # fmt: skip
T4, T2 = 2 * 2 * 2 * 4 / 1.25e11, 2 * 2 * 2 * 2 / 1.25e11
"""One 2 x 2 tile over k = 4 (fc1) and k = 2 (fc2) on one of the 4 SMs."""


def test_te_grouped_linear_runs_the_experts_one_after_another() -> None:
    # One grouped kernel: fc1's 8 tiles fill 2 waves, fc2's 16 tiles 4 waves, one t0 each.
    # TE's GroupedLinear: one GEMM per expert, priced one after another: each expert's fc1 tile is a wave of its
    # own (8 waves) and its two fc2 tiles another (8 waves), with a t0 per GEMM (16 instead of 2).
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1, ep=1)], MOE8.num_layers, 1)
    grouped = compute._gemm_role_seconds(MOE8, c, HW, RuntimeFeatures(expert_gemm=ExpertGemm.GROUPED))
    te = compute._gemm_role_seconds(MOE8, c, HW, RuntimeFeatures())
    expert = GemmRole.ROUTED_EXPERT
    np.testing.assert_allclose(grouped[expert][0], [2 * T4 + 4 * T2 + 2e-6], rtol=1e-12)
    np.testing.assert_allclose(te[expert][0], [8 * T4 + 8 * T2 + 16e-6], rtol=1e-12)
    # With 2 experts per GPU (ep = 4) each sees 4 rows: fc1 2 tiles, fc2 4 tiles per expert. The grouped kernel runs
    # fc1's 4 tiles in one wave and fc2's 8 in two; TE runs each expert's GEMM as one wave of its own.
    c4 = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, ep=4)], MOE8.num_layers, 4)
    a = compute._gemm_role_seconds(MOE8, c4, HW, RuntimeFeatures(expert_gemm=ExpertGemm.GROUPED))[expert][0]
    np.testing.assert_allclose(a, [T4 + 2 * T2 + 2e-6], rtol=1e-12)
    b = compute._gemm_role_seconds(MOE8, c4, HW, RuntimeFeatures())[expert][0]
    np.testing.assert_allclose(b, [2 * T4 + 2 * T2 + 4e-6], rtol=1e-12)


def test_the_expert_section_launches_a_gemm_per_expert_and_stays_eager_under_graphs() -> None:
    # Dense part of an MoE layer under TE (RoPE, no gated MLP): QKV, proj and router GEMMs 3, 2 norms, core 1,
    # rope 1, 2 residuals = 9 forward, 2 x 3 + 6 = 12 backward. Expert section at ep = 1: 8 experts x 2 weights =
    # 16 GEMM launches + 4 dispatch kernels forward; 2 x 16 + 4 = 36 backward. ep = 4: 2 experts -> 4 + 4 and 8 + 4.
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1, ep=1), Layout(tp=1, pp=1, dp=4, ep=4)], MOE8.num_layers, 4)
    k = layer_kernels(MOE8, c, RuntimeFeatures())
    np.testing.assert_array_equal(k.forward, [9, 9])
    np.testing.assert_array_equal(k.backward, [12, 12])
    np.testing.assert_array_equal(k.expert_forward, [20, 8])
    np.testing.assert_array_equal(k.expert_backward, [36, 12])
    grouped = layer_kernels(MOE8, c, RuntimeFeatures(expert_gemm=ExpertGemm.GROUPED))
    np.testing.assert_array_equal(grouped.expert_forward, [6, 6])  # one kernel per weight
    # Graphs (modules scope) replay the dense part at 1 us; the expert section keeps its 10 us launches.
    # A full-iteration graph replays both.
    us = MICRO
    eager = layer_host_s(MOE8, c, RuntimeFeatures())
    np.testing.assert_allclose(eager.forward, [290 * us, 170 * us], rtol=1e-12)
    graphs = layer_host_s(MOE8, c, RuntimeFeatures(cuda_graphs=True))
    np.testing.assert_allclose(graphs.forward, [(9 + 200) * us, (9 + 80) * us], rtol=1e-12)
    np.testing.assert_allclose(graphs.backward, [(12 + 360) * us, (12 + 120) * us], rtol=1e-12)
    full = layer_host_s(MOE8, c, RuntimeFeatures(cuda_graphs=True, cuda_graph_scope=CudaGraphScope.FULL_ITERATION))
    np.testing.assert_allclose(full.forward, [29 * us, 17 * us], rtol=1e-12)
    # A dense model has no expert section: graphs replay all of it whatever the scope.
    dense = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], GPT.num_layers, 1)
    assert layer_host_s(GPT, dense, RuntimeFeatures(cuda_graphs=True)).forward[0] == 9 * us
