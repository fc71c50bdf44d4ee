"""Bytes per element by precision: Megatron mixed precision, ZeRO's state count (Rajbhandari 2020 Sec. 3.1)."""

from dataclasses import replace

import numpy as np
import pytest

from planner.errors import InvalidSpecError
from planner.numerics import Numerics, fp8_param_gather_default, fp8_param_gather_on, numerics, training_numerics
from planner.profiles import load_profiles
from planner.specs import AdamMoments, Fp8Recipe, GradientLayout, Precision, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

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
    assert training_numerics(training, fabric_hardware(8, 8)) == num


def test_gradient_layout_defaults_to_megatron() -> None:
    assert TrainingSpec(global_batch_size=8).gradient_layout is MC
    assert (
        TrainingSpec.model_validate({"global_batch_size": 8, "gradient_layout": "pytorch_fsdp"}).gradient_layout is FSDP
    )
    for precision in Precision:
        for fp32 in (None, True, False):
            assert numerics(precision, fp32) == numerics(precision, fp32, gradient_layout=MC)


@pytest.mark.parametrize(
    ("recipe", "param_gather", "non_tn", "quantized", "in_16_bit", "gather"),
    [
        (None, False, False, 2, True, 2),  # Hopper: TE caches the FP8 data and its transpose beside the bf16 weight
        (None, False, True, 1, True, 2),  # Blackwell: one FP8 copy
        (Fp8Recipe.DELAYED, True, False, 2, False, 1),  # the FP8 parameter (and transpose) only, gathered at 1 byte
        (Fp8Recipe.TENSORWISE, True, True, 1, False, 1),
        (Fp8Recipe.MXFP8, True, True, 2 + 2 / 32, False, 2),  # row- and column-wise, gathered in 16-bit
        (Fp8Recipe.MXFP8, False, True, 2 + 2 / 32, True, 2),
        # blockwise: row- and column-wise data with one fp32 scale per 128 x 128 tile each, on either GPU kind
        (Fp8Recipe.BLOCKWISE, True, False, 2 + 8 / 16384, False, 1),
        (Fp8Recipe.BLOCKWISE, False, True, 2 + 8 / 16384, True, 2),
        (Fp8Recipe.BLOCKWISE, None, False, 2 + 8 / 16384, True, 2),  # its recipes keep 16-bit weights
    ],
)
def test_fp8_weight_storage(
    recipe: Fp8Recipe | None, param_gather: bool, non_tn: bool, quantized: float, in_16_bit: bool, gather: float
) -> None:
    num = numerics(Precision.FP8, fp8_recipe=recipe, fp8_param_gather=param_gather, fp8_gemm_non_tn=non_tn)
    assert (num.quantized_weight_bytes, num.fp8_weight_gather_bytes) == (quantized, gather)
    assert num.fp8_weights_as_fp8_only(np.arange(4)).tolist() == [not in_16_bit] * 4
    training = TrainingSpec(
        global_batch_size=8, precision=Precision.FP8, fp8_recipe=recipe, fp8_param_gather=param_gather
    )
    assert training_numerics(training, replace(fabric_hardware(8, 8), fp8_gemm_non_tn=non_tn)) == num


def test_fp8_weights_are_stored_as_fp8_where_todays_recipes_do() -> None:
    # None (the default): on with the distributed optimizer or Megatron-FSDP, off at zero_stage 0; else as stated
    zero = np.arange(4)
    assert fp8_param_gather_on(None, zero).tolist() == [False, True, True, True]
    assert fp8_param_gather_on(True, zero).tolist() == [True] * 4
    assert fp8_param_gather_on(False, zero).tolist() == [False] * 4
    assert TrainingSpec(global_batch_size=8, precision=Precision.FP8).fp8_param_gather is None
    num = numerics(Precision.FP8)
    assert num.fp8_weights_as_fp8_only(zero).tolist() == [False, True, True, True] and num.fp8_weight_gather_bytes == 1
    assert not numerics(Precision.BF16).fp8_weights_as_fp8_only(zero).any()


def test_16_bit_training_has_no_fp8_weights() -> None:
    for precision in (Precision.BF16, Precision.FP16):
        num = numerics(precision, fp8_gemm_non_tn=True)
        assert (num.quantized_weight_bytes, num.fp8_param_gather, num.fp8_weight_gather_bytes) == (0, False, 2)


def test_fp8_settings_are_refused_outside_fp8() -> None:
    with pytest.raises(
        ValueError,
        match=r"fp8_param_gather\(true\) keeps FP8 or NVFP4 weights; precision\(bf16\) is neither fp8 nor nvfp4",
    ):
        TrainingSpec(global_batch_size=8, fp8_param_gather=True)
    with pytest.raises(ValueError, match=r"fp8_recipe\(mxfp8\) applies to precision fp8; got precision\(fp16\)"):
        TrainingSpec.model_validate({"global_batch_size": 8, "precision": "fp16", "fp8_recipe": "mxfp8"})
    with pytest.raises(ValueError, match="fp8_recipe"):
        TrainingSpec.model_validate({"global_batch_size": 8, "precision": "fp8", "fp8_recipe": "custom"})
    assert TrainingSpec(global_batch_size=8).fp8_recipe is None


def test_blockwise_recipes_leave_fp8_weight_storage_off_unless_asked() -> None:
    # Megatron-Bridge's sub-channel presets set fp8_param_gather False; a stated value stands
    assert fp8_param_gather_default(None, Fp8Recipe.BLOCKWISE) is False
    assert fp8_param_gather_default(True, Fp8Recipe.BLOCKWISE) is True
    for recipe in (None, Fp8Recipe.DELAYED, Fp8Recipe.TENSORWISE, Fp8Recipe.MXFP8):
        assert fp8_param_gather_default(None, recipe) is None
        assert fp8_param_gather_default(False, recipe) is False
    assert not numerics(Precision.FP8, fp8_recipe=Fp8Recipe.BLOCKWISE).fp8_weights_as_fp8_only(np.arange(4)).any()


def test_blockwise_needs_fp8_block_scaled_gemms() -> None:
    profiles = load_profiles()
    for profile_id in ("dgx-h100", "hgx-h200", "hgx-b200", "gb200-nvl72"):
        assert profiles[profile_id].gpu.fp8_block_scaling
        assert "gpu.fp8_block_scaling" in profiles[profile_id].sources
        profiles[profile_id].hardware(Precision.FP8, Fp8Recipe.BLOCKWISE)
    assert not profiles["mi300x"].gpu.fp8_block_scaling  # ROCm Transformer Engine refuses the recipe
    with pytest.raises(InvalidSpecError, match="training.fp8_recipe: blockwise needs FP8 block-scaled GEMMs .* MI300X"):
        profiles["mi300x"].hardware(Precision.FP8, Fp8Recipe.BLOCKWISE)


def test_mxfp8_needs_mxfp8_tensor_cores() -> None:
    profiles = load_profiles()
    assert profiles["gb200-nvl72"].hardware(Precision.FP8, Fp8Recipe.MXFP8).fp8_gemm_non_tn
    assert profiles["hgx-b200"].gpu.mxfp8 and not profiles["dgx-h100"].gpu.mxfp8
    assert not profiles["dgx-h100"].hardware(Precision.FP8).fp8_gemm_non_tn
    with pytest.raises(InvalidSpecError, match="training.fp8_recipe: mxfp8 needs MXFP8 tensor cores; H100"):
        profiles["dgx-h100"].hardware(Precision.FP8, Fp8Recipe.MXFP8)


@pytest.mark.parametrize(
    ("precision", "recipe", "master", "step_bytes"),
    [
        # master: TE FusedAdam's 16-bit remainder beside bf16 weights (2), else Megatron-Core's fp32 copy (4)
        (Precision.BF16, None, 2, 4 + 4 + (4 + 2 + 4) + (2 + 4) + 2 + 2),
        (Precision.FP8, None, 2, 4 + 4 + (4 + 2 + 4) + (2 + 4) + 2 + 2),  # delayed scaling, the default
        (Precision.FP8, Fp8Recipe.TENSORWISE, 4, 4 + 4 + (4 + 4 + 4) + (4 + 4) + 4 + 2),
        (Precision.FP16, None, 4, 4 + 4 + (4 + 4 + 4) + (4 + 4) + 4 + 2),
    ],
)
def test_bf16_adam_moments(precision: Precision, recipe: Fp8Recipe | None, master: int, step_bytes: int) -> None:
    """The precision-aware optimizer's bf16 moments (2 + 2) and master weight: zero grad (4), clip (4), Adam
    reads grad, master, m, v and writes master, m, v, then the master is copied to the 16-bit weight."""
    fp32 = numerics(precision, fp8_recipe=recipe)
    bf16 = numerics(precision, fp8_recipe=recipe, adam_moments=AdamMoments.BF16)
    assert (fp32.master_weight_bytes, fp32.adam_moment_bytes) == (4, 8)
    assert (bf16.master_weight_bytes, bf16.adam_moment_bytes) == (master, 4)
    assert bf16.resident_optimizer_bytes == master + 4
    assert bf16.optimizer_step_hbm_bytes == step_bytes
    assert bf16.gradient_bytes == fp32.gradient_bytes and bf16.weight_bytes == fp32.weight_bytes
    hw = load_profiles()["dgx-h100"].hardware(precision, recipe)
    training = TrainingSpec(global_batch_size=8, precision=precision, fp8_recipe=recipe, adam_moments="bf16")
    assert training_numerics(training, hw).resident_optimizer_bytes == master + 4
