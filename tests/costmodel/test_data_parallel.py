"""Data-parallel gradient traffic: the reduction's wire dtype, whichever layout holds the gradients."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.comm import all_gather_s
from planner.costmodel.data_parallel import dp_collectives_s, gradient_group
from planner.costmodel.params import ParamCounts
from planner.costmodel.topology import place
from planner.layout import Layout
from planner.specs import GradientLayout, ModelSpec, TrainingSpec
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
