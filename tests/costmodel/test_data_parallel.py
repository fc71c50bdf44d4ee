"""Data-parallel traffic: the reduction's wire dtype, whichever layout holds the gradients; what ZeRO-3's
backward prefetch order leaves exposed."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.comm import OVERLAP_SLOWDOWN, all_gather_s
from planner.costmodel.data_parallel import (
    DataParallelTimes,
    DpCollectives,
    data_parallel_times,
    dp_collectives_s,
    exposed_dp_s,
    gradient_group,
    recompute_gather_passes,
)
from planner.costmodel.params import ParamCounts
from planner.costmodel.topology import place
from planner.layout import Layout
from planner.specs import BackwardPrefetch, GradientLayout, ModelSpec, Recompute, RuntimeFeatures, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

HW = fabric_hardware(8, 8)
MODEL = ModelSpec(num_layers=2, hidden_size=8, num_attention_heads=4, vocab_size=10, seq_length=4)
PARAMS = 1e9
"""Dense parameters per GPU, before sharding."""


@pytest.mark.parametrize("gradients", list(GradientLayout))
@pytest.mark.parametrize(("fp32", "wire"), [(False, 2), (True, 4), (None, 4)], ids=["bf16", "fp32", "default"])
def test_gradient_reduction_moves_the_wire_dtype(gradients: GradientLayout, fp32: bool | None, wire: int) -> None:
    # ZeRO-3 over 8 GPUs of one node, no latency: a reduce-scatter of P elements of `wire` bytes, as an all-gather
    # of as many bytes; the bf16 weight all-gather is 2 bytes per element under both layouts.
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=8, zero_stage=3)], num_layers=2, global_batch_size=8)
    placement = place(c, HW.nvlink_domain_gpus, HW.gpus_per_node)
    params = ParamCounts(np.array([PARAMS]), np.array([0.0]))
    training = TrainingSpec(global_batch_size=8, grad_reduce_in_fp32=fp32, gradient_layout=gradients)
    dp = dp_collectives_s(MODEL, c, params, placement, HW, training)
    expected = all_gather_s(np.array([wire * PARAMS]), gradient_group(c, placement), HW, rails=True)
    np.testing.assert_allclose(dp.reduce_scatter, expected, rtol=1e-12)
    np.testing.assert_allclose(dp.all_gather * wire / 2, expected, rtol=1e-12)


def _zero3_times(recompute: Recompute) -> tuple[Candidates, DataParallelTimes]:
    """ZeRO-3, two micro-batches, 1 s per unit-gather pass and 0.5 s per micro-batch reduce-scatter (no latency)."""
    layout = Layout(tp=1, pp=1, dp=8, micro_batch_size=1, zero_stage=3, recompute=recompute)
    c = Candidates.from_layouts([layout], num_layers=2, global_batch_size=16)
    one = np.array([1.0])
    collectives = DpCollectives(all_reduce=one, reduce_scatter=0.5 * one, all_gather=one, unit_gather=one)
    return c, data_parallel_times(c, collectives, recompute_gather_passes(MODEL, c, TrainingSpec(global_batch_size=16)))


@pytest.mark.parametrize(("recompute", "passes"), [(Recompute.NONE, 2), (Recompute.FULL, 3)])
def test_backward_post_waits_for_every_backward_gather(recompute: Recompute, passes: int) -> None:
    # Per micro-batch: `passes` gather passes (forward, backward, and the recomputed forward) of 1 s and a 0.5 s
    # reduce-scatter, beside 10 s of forward and 20 s of backward. pre: all hidden, each hidden second costing
    # OVERLAP_SLOWDOWN. post: the backward pass's 1 s is paid in full, the rest hides.
    c, times = _zero3_times(recompute)
    assert times.microbatch_gather_s[0] == passes
    assert times.backward_gather_s[0] == 1.0
    fwd, bwd = np.array([10.0]), np.array([20.0])
    pre = exposed_dp_s(times, c, fwd, bwd, RuntimeFeatures())
    post = exposed_dp_s(times, c, fwd, bwd, RuntimeFeatures(zero3_backward_prefetch=BackwardPrefetch.POST))
    hidden = passes + 0.5
    np.testing.assert_allclose(pre, 2 * OVERLAP_SLOWDOWN * hidden, rtol=1e-12)
    np.testing.assert_allclose(post, 2 * (1.0 + OVERLAP_SLOWDOWN * (hidden - 1.0)), rtol=1e-12)
    # none: the 0.5 s reduce-scatter is paid in full as well (each gather queues behind it).
    none = exposed_dp_s(times, c, fwd, bwd, RuntimeFeatures(zero3_backward_prefetch=BackwardPrefetch.NONE))
    np.testing.assert_allclose(none, 2 * (1.5 + OVERLAP_SLOWDOWN * (hidden - 1.5)), rtol=1e-12)
    # Without gather overlap every gather is paid whatever the prefetch order.
    off = RuntimeFeatures(overlap_param_gather=False)
    np.testing.assert_allclose(
        exposed_dp_s(times, c, fwd, bwd, off),
        exposed_dp_s(times, c, fwd, bwd, off.model_copy(update={"zero3_backward_prefetch": BackwardPrefetch.POST})),
        rtol=1e-12,
    )


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_backward_prefetch_matters_only_at_zero3(zero: int) -> None:
    # ZeRO-2's per-micro-batch reduce-scatter has no gather to queue behind: every order prices it alike.
    layout = Layout(tp=1, pp=1, dp=8, zero_stage=zero)
    c = Candidates.from_layouts([layout], num_layers=2, global_batch_size=16)
    one = np.array([1.0])
    times = data_parallel_times(c, DpCollectives(one, one, one, one), 0.0)
    assert times.backward_gather_s[0] == 0.0
    fwd, bwd = np.array([10.0]), np.array([20.0])
    pre = exposed_dp_s(times, c, fwd, bwd, RuntimeFeatures())[0]
    for order in (BackwardPrefetch.POST, BackwardPrefetch.NONE):
        assert exposed_dp_s(times, c, fwd, bwd, RuntimeFeatures(zero3_backward_prefetch=order))[0] == pre


@pytest.mark.parametrize(
    ("gradients", "recompute", "block", "passes"),
    [
        (GradientLayout.MEGATRON, Recompute.NONE, None, 0.0),
        (GradientLayout.MEGATRON, Recompute.SELECTIVE, None, 0.0),
        (GradientLayout.MEGATRON, Recompute.FULL, None, 1.0),
        (GradientLayout.MEGATRON, Recompute.FULL, 1, 0.5),  # block recompute: 1 of the 2 layers reruns
        (GradientLayout.PYTORCH_FSDP, Recompute.FULL, None, 0.0),
        (GradientLayout.PYTORCH_FSDP, Recompute.FULL, 1, 0.0),
    ],
)
def test_recomputed_forward_gathers_again_unless_pytorch_fsdp(
    gradients: GradientLayout, recompute: Recompute, block: int | None, passes: float
) -> None:
    # MODEL has 2 layers on one stage. PyTorch FSDP's recomputed forward reuses the pre-backward gather; the
    # others gather the layers they rerun once more.
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=8, zero_stage=3, recompute=recompute)], 2, 16)
    training = TrainingSpec(global_batch_size=16, gradient_layout=gradients, recompute_num_layers=block)
    assert float(np.asarray(recompute_gather_passes(MODEL, c, training)).sum()) == passes
