"""Bytes per element by precision: Megatron mixed precision, ZeRO's state count (Rajbhandari 2020 Sec. 3.1)."""

import pytest

from planner.numerics import Numerics, numerics, training_numerics
from planner.specs import GradientLayout, Precision, TrainingSpec

MC, FSDP = GradientLayout.MEGATRON, GradientLayout.PYTORCH_FSDP

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


# (precision, grad_reduce_in_fp32, layout, held gradient, gradient on the wire, optimizer's fp32 copy)
GRADIENT_ROWS = [
    (Precision.BF16, None, MC, 4, 4, 0),  # Megatron's bf16 default: fp32 main grads, reduced as held
    (Precision.BF16, True, MC, 4, 4, 0),
    (Precision.BF16, False, MC, 2, 2, 4),  # --grad-reduce-in-bf16: bf16 buffer + fp32 copy (dist_optimizer.md)
    (Precision.FP16, None, MC, 2, 2, 4),
    (Precision.BF16, None, FSDP, 4, 4, 0),  # FSDP reduce_dtype fp32: as Megatron's fp32 main grads
    (Precision.BF16, False, FSDP, 4, 2, 0),  # reduce-scatter in bf16, fp32 sharded grad held, no copy
    (Precision.FP8, False, FSDP, 4, 2, 0),
    (Precision.FP16, None, FSDP, 4, 2, 0),
    (Precision.FP16, True, FSDP, 4, 4, 0),
]


@pytest.mark.parametrize(
    ("precision", "fp32", "layout", "held", "wire", "copy"),
    GRADIENT_ROWS,
    ids=[
        "bf16",
        "bf16-fp32",
        "bf16-grads",
        "fp16",
        "fsdp",
        "fsdp-bf16",
        "fsdp-fp8-bf16",
        "fsdp-fp16",
        "fsdp-fp16-fp32",
    ],
)
def test_gradient_held_and_on_the_wire(
    precision: Precision, fp32: bool | None, layout: GradientLayout, held: int, wire: int, copy: int
) -> None:
    num = numerics(precision, fp32, gradient_layout=layout)
    assert (num.gradient_bytes, num.gradient_wire_bytes, num.gradient_copy_bytes) == (held, wire, copy)
    assert num.main_gradient_bytes == 4 and num.optimizer_state_bytes == 12 + copy
    training = TrainingSpec(global_batch_size=8, precision=precision, grad_reduce_in_fp32=fp32, gradient_layout=layout)
    assert training_numerics(training) == num


def test_gradient_layout_defaults_to_megatron() -> None:
    assert TrainingSpec(global_batch_size=8).gradient_layout is MC
    assert (
        TrainingSpec.model_validate({"global_batch_size": 8, "gradient_layout": "pytorch_fsdp"}).gradient_layout is FSDP
    )
    for precision in Precision:
        for fp32 in (None, True, False):
            assert numerics(precision, fp32) == numerics(precision, fp32, gradient_layout=MC)
