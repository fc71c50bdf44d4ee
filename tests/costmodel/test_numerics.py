"""Bytes per element by precision: Megatron mixed precision, ZeRO's state count (Rajbhandari 2020 Sec. 3.1)."""

import pytest

from planner.numerics import Numerics, numerics
from planner.specs import Precision

# (weights, gradients, optimizer states, model-state total per parameter)
STATES = [
    (Precision.BF16, 2, 4, 12, 18),  # bf16 weights, fp32 main grads, fp32 master + m + v: 2 + 4 + 12
    (Precision.FP8, 2, 4, 12, 18),  # fp8 casts per GEMM; everything held as for bf16
    (Precision.FP16, 2, 2, 16, 20),  # fp16 grads; the optimizer adds an fp32 grad copy: 4 + 4 + 4 + 4
]


@pytest.mark.parametrize(("precision", "weights", "grads", "optimizer", "total"), STATES, ids=["bf16", "fp8", "fp16"])
def test_model_state_bytes(precision: Precision, weights: int, grads: int, optimizer: int, total: int) -> None:
    num = numerics(precision)
    assert (num.weight_bytes, num.gradient_bytes, num.optimizer_state_bytes) == (weights, grads, optimizer)
    assert num.weight_bytes + num.gradient_bytes + num.optimizer_state_bytes == total


def test_zero_paper_count_is_the_fp16_states_without_the_fp32_gradient_copy() -> None:
    # Rajbhandari 2020 Sec. 3.1: 2 (fp16 weights) + 2 (fp16 grads) + 12 (fp32 master, m, v) = 16 bytes/param.
    num = numerics(Precision.FP16)
    assert num.weight_bytes + num.gradient_bytes + num.optimizer_state_bytes - num.gradient_copy_bytes == 16


@pytest.mark.parametrize("precision", list(Precision))
def test_activations_wire_logits_and_optimizer_step(precision: Precision) -> None:
    num = numerics(precision)
    assert (num.activation_bytes, num.wire_bytes, num.logit_bytes) == (2, 2, 4)
    # zero grad 4 + clip 4 + Adam reads (4 + 4 + 8) and writes (4 + 8) + master read 4 + weight write 2 = 42
    assert num.optimizer_step_hbm_bytes == 4 + 4 + 16 + 12 + 4 + 2 == 42


def test_one_frozen_object_per_precision() -> None:
    assert numerics(Precision.BF16) is numerics(Precision.BF16)
    assert isinstance(numerics(Precision.FP16), Numerics)
    with pytest.raises(AttributeError):
        numerics(Precision.BF16).weight_bytes = 4  # type: ignore[misc]
