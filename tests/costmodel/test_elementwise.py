"""Eager element-wise code (`RuntimeFeatures.eager_elementwise`, `costmodel.elementwise.EAGER`) against hand-computed
bytes: the forward traffic of the norms, residual adds, SwiGLU, RoPE and the grouped-KV copy, and what they keep.

A tiny GQA model: h 64, 4 query heads and 2 key/value groups of 16 (q 64, kv 32), SwiGLU ffn 128, rotary
positions, 10 tokens, over an HBM of 1e12 B/s.
"""

from __future__ import annotations

import numpy as np
import pytest

from planner.costmodel import compute, host
from planner.costmodel.candidates import Candidates
from planner.costmodel.elementwise import EAGER, FUSED, expanded_kv_width, kernels_for, rotated_width
from planner.costmodel.memory import activation_bytes_per_layer
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.specs import ModelSpec, Recompute, RuntimeFeatures, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

H, Q, KV, FFN, S = 64, 64, 32, 128, 10
GQA = ModelSpec(
    num_layers=2,
    hidden_size=H,
    num_attention_heads=4,
    num_query_groups=2,
    head_dim=16,
    ffn_hidden_size=FFN,
    vocab_size=32,
    seq_length=S,
    gated_mlp=True,
)
MHA_LEARNED = GQA.model_copy(update={"num_query_groups": 4, "learned_position_embeddings": True})
HW = fabric_hardware(8, 8)
FUSED_RT, EAGER_RT = RuntimeFeatures(), RuntimeFeatures(eager_elementwise=True)


def _candidates(tp: int, recompute: Recompute = Recompute.NONE) -> Candidates:
    layout = Layout(tp=tp, pp=1, dp=1, micro_batch_size=1, recompute=recompute)
    return Candidates.from_layouts([layout], num_layers=GQA.num_layers, global_batch_size=1)


def test_the_table_follows_the_flag() -> None:
    assert kernels_for(FUSED_RT) is FUSED and kernels_for(EAGER_RT) is EAGER
    assert rotated_width(GQA) == Q + KV and rotated_width(MHA_LEARNED) == 0
    assert expanded_kv_width(GQA, EAGER) == 2 * (Q - KV) and expanded_kv_width(GQA, FUSED) == 0
    assert expanded_kv_width(MHA_LEARNED, EAGER) == 0  # as many kv heads as query heads: nothing to copy


@pytest.mark.parametrize("tp", [1, 2])
def test_forward_bytes_by_hand(tp: int) -> None:
    """Per token: fused 2 x (4 + 7) h + 6 ffn + 4 (q + kv); eager 2 x (36 + 6) h + 10 ffn + 36 (q + kv) and the
    grouped-KV copy, reading 2 kv and writing 2 q at 2 bytes. Without SP the residual path is whole on every rank;
    the rest splits by tp."""
    c = _candidates(tp)
    fused = 2 * 11 * H + (6 * FFN + 4 * (Q + KV)) / tp
    eager = 2 * 42 * H + (10 * FFN + 36 * (Q + KV) + 2 * (2 * KV + 2 * Q)) / tp
    for rt, per_token in ((FUSED_RT, fused), (EAGER_RT, eager)):
        seconds = compute._elementwise_forward_s(GQA, c, HW, rt)
        np.testing.assert_allclose(seconds, [per_token * S / 1e12], rtol=1e-12)


def test_learned_positions_and_mha_leave_only_norms_adds_and_activation() -> None:
    c = _candidates(1)
    delta = compute._elementwise_forward_s(MHA_LEARNED, c, HW, EAGER_RT) - compute._elementwise_forward_s(
        MHA_LEARNED, c, HW, FUSED_RT
    )
    np.testing.assert_allclose(delta, [(2 * (42 - 11) * H + (10 - 6) * FFN) * S / 1e12], rtol=1e-12)


@pytest.mark.parametrize("tp", [1, 2])
def test_eager_code_keeps_more_for_backward(tp: int) -> None:
    """Per token, beyond the fused code: each norm's fp32 input copy (4 h, two norms), RoPE's fp32 Q and K (4 (q +
    kv)), the expanded K and V (2 x 2 (q - kv)) and the SiLU output (2 ffn); only the norms' stay whole per rank
    without SP. Full recompute keeps the layer input either way."""
    num = training_numerics(TrainingSpec(global_batch_size=1), HW)
    c = _candidates(tp)
    delta = activation_bytes_per_layer(GQA, c, EAGER_RT, num) - activation_bytes_per_layer(GQA, c, FUSED_RT, num)
    per_token = 2 * 4 * H + (4 * (Q + KV) + 2 * 2 * (Q - KV) + 2 * FFN) / tp
    np.testing.assert_allclose(delta, [per_token * S], rtol=1e-12)
    full = _candidates(tp, Recompute.FULL)
    eager_full = activation_bytes_per_layer(GQA, full, EAGER_RT, num)
    np.testing.assert_array_equal(eager_full, activation_bytes_per_layer(GQA, full, FUSED_RT, num))


def test_eager_layers_are_slower_and_the_gap_is_the_memory_bound_part() -> None:
    """The GEMMs and the attention core are the same code either way: forward and backward differ by the extra
    forward bytes once and twice (`BACKWARD_BYTES_FACTOR`). A Llama-sized layer, so that the host floor binds on
    neither."""
    big = ModelSpec(
        num_layers=2,
        hidden_size=4096,
        num_attention_heads=32,
        num_query_groups=8,
        ffn_hidden_size=11008,
        vocab_size=128,
        seq_length=4096,
        gated_mlp=True,
    )
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], num_layers=2, global_batch_size=1)
    fused = compute.layer_times(big, c, HW, FUSED_RT)
    eager = compute.layer_times(big, c, HW, EAGER_RT)
    extra = compute._elementwise_forward_s(big, c, HW, EAGER_RT) - compute._elementwise_forward_s(big, c, HW, FUSED_RT)
    assert extra[0] > 0
    np.testing.assert_allclose(eager.forward_s - fused.forward_s, extra, rtol=1e-9)
    np.testing.assert_allclose(eager.backward_s - fused.backward_s, 2 * extra, rtol=1e-9)


def test_eager_code_launches_one_kernel_per_op() -> None:
    """Host launches per forward pass of the GQA layer at tp 1 (`host.layer_kernels`), by hand. Fused: 4 GEMMs
    (QKV, projection, fc1, fc2), 2 norms, 2 residual adds, the attention core, RoPE and SwiGLU, one launch each:
    11. Eager: the norms 8 each, RoPE 8 (4 for Q, 4 for K), SwiGLU 2, the copies of K and V 2: 4 + 16 + 2 + 1 + 8 +
    2 + 2 = 35. Backward runs one kernel per op besides the GEMMs' two each, so the difference is the same."""
    c = _candidates(1)
    fused, eager = (host.layer_kernels(GQA, c, rt) for rt in (FUSED_RT, EAGER_RT))
    assert fused.forward[0] == 11 and eager.forward[0] == 35
    assert eager.backward[0] - fused.backward[0] == 35 - 11
    learned = host.layer_kernels(MHA_LEARNED, c, EAGER_RT)  # no RoPE, no copy: 4 + 16 + 2 + 1 + 2
    assert learned.forward[0] == 25
