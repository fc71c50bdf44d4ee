"""The layer's GEMM list against hand-computed numbers: Narayanan 2021 Eq. 3 term by term, parameters, GEMM times."""

import numpy as np

from planner.costmodel import compute
from planner.costmodel.candidates import FULL, Candidates
from planner.costmodel.flops import (
    layer_forward_flop,
    logits_flop,
    model_flop_per_sequence,
    narayanan_eq3_flop,
    recompute_flop_per_sequence,
)
from planner.costmodel.gemms import GemmRole, attention_core_flop, attention_score_flop, layer_gemms, logits_gemm
from planner.costmodel.params import attention_params, dense_mlp_params
from planner.layout import Layout
from planner.profiles import Hardware
from planner.specs import ModelSpec, MoESpec, RuntimeFeatures

# A tiny GPT: h=4, a=2, s=6, V=8, ffn=4h=16, one layer.
H, S, V = 4, 6, 8
GPT = ModelSpec(num_layers=1, hidden_size=H, num_attention_heads=2, vocab_size=V, seq_length=S)


def test_gpt_layer_gemms_by_hand() -> None:
    # (name, k, n, forward flop for one sequence = 2 s k n)
    expected = [("qkv", 4, 12, 576), ("proj", 4, 4, 192), ("fc1", 4, 16, 768), ("fc2", 16, 4, 768)]
    got = [(g.name, g.k, g.n, g.flop(S)) for g in layer_gemms(GPT)]
    assert got == expected
    assert all(g.tp_split and not g.is_expert and g.layer_share == 1.0 for g in layer_gemms(GPT))


def test_eq3_term_by_term() -> None:
    # Narayanan 2021 Eq. 3, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), at B=2, l=1: 96*2*6*16 = 18432 times
    # 1 (the GEMMs: 4 passes x 24 B s h^2), s/(6h) = 1/4 (4 passes x the 4 B s^2 h core),
    # V/(16 l h) = 1/8 (3 passes x the 2 B s h V logits; the output layer is not recomputed).
    b = 2
    gemms = sum(g.flop(b * S) for g in layer_gemms(GPT))
    assert gemms == 24 * b * S * H**2 == 4608
    assert 4 * gemms == 18432 * 1
    assert 4 * attention_score_flop(GPT, b) == 4 * 4 * b * S**2 * H == 18432 / 4
    assert attention_core_flop(GPT, b) == attention_score_flop(GPT, b) / 2  # causal: half the matrix
    assert 3 * logits_gemm(GPT).flop(b * S) == 3 * 2 * b * S * H * V == 18432 / 8
    total = b * (model_flop_per_sequence(GPT, True) + recompute_flop_per_sequence(GPT, FULL, True))
    assert total == narayanan_eq3_flop(b, S, 1, H, V) == 18432 * (1 + 1 / 4 + 1 / 8)
    assert layer_forward_flop(GPT, b) == gemms + 2 * b * S**2 * H  # causal core
    assert layer_forward_flop(GPT, b, full_attention=True) == gemms + 4 * b * S**2 * H
    assert logits_flop(GPT, b) == 2 * b * S * H * V


def test_parameters_are_the_gemm_weights() -> None:
    # GPT: attention 4h^2 = 64, MLP 8h^2 = 128; with biases + (3h + h) and + (4h + h).
    assert attention_params(GPT) == 64 and dense_mlp_params(GPT, 16) == 128
    biased = GPT.model_copy(update={"linear_bias": True})
    assert attention_params(biased) == 64 + 16 and dense_mlp_params(biased, 16) == 128 + 20
    # GQA (8 heads, 2 groups, h=16: kv=4) and a gated MLP of width 8: qkv 16 x (16 + 8), up 16 x 16, down 8 x 16.
    gqa = ModelSpec(
        num_layers=1, hidden_size=16, num_attention_heads=8, num_query_groups=2, ffn_hidden_size=8,
        gated_mlp=True, vocab_size=V, seq_length=S,
    )  # fmt: skip
    assert [(g.name, g.k, g.n) for g in layer_gemms(gqa)] == [
        ("qkv", 16, 24),
        ("proj", 16, 16),
        ("fc1", 16, 16),
        ("fc2", 8, 16),
    ]
    assert attention_params(gqa) == 16 * 24 + 16 * 16 and dense_mlp_params(gqa, 8) == 3 * 16 * 8


MOE = ModelSpec(
    num_layers=4, hidden_size=H, num_attention_heads=2, vocab_size=V, seq_length=S,
    moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden_size=8, num_shared_experts=1, moe_layer_freq=2),
)  # fmt: skip


def test_moe_gemms_and_flop_by_hand() -> None:
    roles = [(g.role, g.copies_per_token, g.layer_share, g.tp_split, g.is_expert) for g in layer_gemms(MOE)]
    assert roles == [
        (GemmRole.ATTENTION, 1, 1.0, True, False),
        (GemmRole.ATTENTION, 1, 1.0, True, False),
        (GemmRole.DENSE_MLP, 1, 0.5, True, False),
        (GemmRole.DENSE_MLP, 1, 0.5, True, False),
        (GemmRole.ROUTED_EXPERT, 2, 0.5, True, True),
        (GemmRole.ROUTED_EXPERT, 2, 0.5, True, True),
        (GemmRole.SHARED_EXPERT, 1, 0.5, True, False),
        (GemmRole.SHARED_EXPERT, 1, 0.5, True, False),
        (GemmRole.ROUTER, 1, 0.5, False, False),
    ]
    # one sequence (T = 6): attention 768; half the layers dense (1536 / 2); the other half:
    # (top_k 2 + 1 shared) experts of 2 * 6 * 4 * 8 * 2 = 768 each, and the router 2 * 6 * 4 * 4 = 192.
    assert layer_forward_flop(MOE, 1) == 768 + 1536 / 2 + (3 * 768 + 192) / 2 + 2 * S**2 * H  # causal core


def test_gemm_times_split_the_same_list_over_tp_and_ep() -> None:
    # No per-GEMM overhead and 1 x 1 tiles on one SM (no quantisation): the layer's GEMM seconds are its
    # per-GPU flop over eta * peak.
    # tp = 2, ep = 2, micro-batch 1: every GEMM's flop halves, except the router's; experts spread over ep.
    hw = Hardware(
        peak_flop_per_s=1e12, hbm_bytes=1e9, hbm_bandwidth_bytes_per_s=1e12, gpus_per_node=8, nvlink_domain_gpus=8,
        nvlink_bytes_per_s=1e9, nic_bytes_per_s_per_gpu=1e9, nvlink_latency_s=0.0, network_latency_s=0.0,
        collective_base_latency_s=0.0, net_overhead_s=0.0,
        gemm_peak_efficiency=0.5, gemm_overhead_s=0.0, sm_count=1, gemm_tile_m=1, gemm_tile_n=1,
    )  # fmt: skip
    c = Candidates.from_layouts([Layout(tp=2, pp=1, dp=2, ep=2)], MOE.num_layers, 4)
    per_gpu = (768 + 1536 / 2 + 3 * 768 / 2) / 2 + 192 / 2
    got = compute._gemm_set_time_s(MOE, c, hw, RuntimeFeatures())  # the list read as times
    np.testing.assert_allclose(got, [per_gpu / 0.5e12], rtol=1e-12)
