"""Memory per GPU: Korthikanti 2022 Table 2 activations, ZeRO / distributed-optimizer model states."""

import itertools
from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import activation_bytes_per_layer, all_stage_terms, memory_per_gpu, step_memory
from planner.costmodel.params import stage_kinds, stage_params
from planner.layout import Layout
from planner.numerics import Numerics, numerics, training_numerics
from planner.specs import Fp8Recipe, GradientLayout, ModelSpec, Precision, Recompute, RuntimeFeatures, TrainingSpec
from tests.costmodel.hardware import fabric_hardware

NO_FLASH = RuntimeFeatures(flash_attention=False)
FLASH = RuntimeFeatures(flash_attention=True)
# GPT shape: ffn = 4h, kv = h, no MoE.
H, A, S = 4096, 32, 2048
GPT = ModelSpec(num_layers=4, hidden_size=H, num_attention_heads=A, vocab_size=51200, seq_length=S)

# Korthikanti 2022 Table 2, bytes per layer: (recompute, sequence_parallel, f(s, b, h, a, t)).
TABLE2 = {
    "none": (Recompute.NONE, False, lambda s, b, h, a, t: s * b * h * (10 + 24 / t + 5 * a * s / (h * t))),
    "none-sp": (Recompute.NONE, True, lambda s, b, h, a, t: s * b * h * (34 / t + 5 * a * s / (h * t))),
    "selective": (Recompute.SELECTIVE, False, lambda s, b, h, a, t: s * b * h * (10 + 24 / t)),
    "selective-sp": (Recompute.SELECTIVE, True, lambda s, b, h, a, t: 34 * s * b * h / t),
    "full": (Recompute.FULL, False, lambda s, b, h, a, t: 2 * s * b * h),
}
GRID = list(itertools.product(TABLE2, [1, 2, 8], [1, 4]))
HW = fabric_hardware(8, 8)
"""Any GPU: memory reads only whether its FP8 GEMMs are TN-only (they are, as on Hopper)."""
DROPOUT = numerics(Precision.BF16, attention_dropout=True, hidden_dropout=True)
"""Korthikanti 2022 trained with dropout on both (Table 2 counts the masks)."""


def _training(
    precision: Precision, rt: RuntimeFeatures, dropout: float = 0.1, **kw: bool | GradientLayout | Fp8Recipe | None
) -> TrainingSpec:
    return TrainingSpec(
        global_batch_size=8, precision=precision, runtime=rt, attention_dropout=dropout, hidden_dropout=dropout, **kw
    )


def _layer_bytes(layout: Layout, model: ModelSpec, rt: RuntimeFeatures, num: Numerics = DROPOUT) -> float:
    c = Candidates.from_layouts([layout], model.num_layers, global_batch_size=64)
    return float(activation_bytes_per_layer(model, c, rt, num)[0])


@pytest.mark.parametrize(("case", "t", "b"), GRID, ids=[f"{k}-t{t}-b{b}" for k, t, b in GRID])
def test_korthikanti_table2(case: str, t: int, b: int) -> None:
    recompute, sp, formula = TABLE2[case]
    layout = Layout(tp=t, pp=1, dp=1, micro_batch_size=b, recompute=recompute, sequence_parallel=sp)
    assert _layer_bytes(layout, GPT, NO_FLASH) == pytest.approx(formula(S, b, H, A, t), rel=1e-12)


FLASH_GRID = list(itertools.product([False, True], [1, 2, 8], [1, 4]))


@pytest.mark.parametrize(("sp", "t", "b"), FLASH_GRID, ids=[f"sp{int(sp)}-t{t}-b{b}" for sp, t, b in FLASH_GRID])
def test_flash_attention_keeps_no_scores(sp: bool, t: int, b: int) -> None:
    # Flash attention without recompute stores what selective recompute stores (no 5as/(ht) term).
    _, _, formula = TABLE2["selective-sp" if sp else "selective"]
    layout = Layout(tp=t, pp=1, dp=1, micro_batch_size=b, sequence_parallel=sp)
    assert _layer_bytes(layout, GPT, FLASH) == pytest.approx(formula(S, b, H, A, t), rel=1e-12)


SHAPES = {
    "gpt-2k": GPT,
    "gqa-gated-8k": ModelSpec(
        num_layers=8, hidden_size=4096, num_attention_heads=32, num_query_groups=8, ffn_hidden_size=14336,
        gated_mlp=True, vocab_size=128256, seq_length=8192,
    ),
    "small-512": ModelSpec(
        num_layers=8, hidden_size=1024, num_attention_heads=16, num_query_groups=4, ffn_hidden_size=2816,
        gated_mlp=True, vocab_size=32000, seq_length=512,
    ),
}  # fmt: skip
PROPERTY_GRID = list(itertools.product(SHAPES, [(1, False), (2, False), (8, True)], [1, 2], [False, True]))


@pytest.mark.parametrize(
    ("shape", "tp_sp", "pp", "flash"),
    PROPERTY_GRID,
    ids=[f"{s}-t{t}{'-sp' if sp else ''}-pp{p}-flash{int(f)}" for s, (t, sp), p, f in PROPERTY_GRID],
)
def test_recompute_never_increases_layer_activations(shape: str, tp_sp: tuple[int, bool], pp: int, flash: bool) -> None:
    model, (tp, sp) = SHAPES[shape], tp_sp
    rt = RuntimeFeatures(flash_attention=flash)
    layouts = [Layout(tp=tp, pp=pp, dp=1, recompute=r, sequence_parallel=sp) for r in Recompute]
    c = Candidates.from_layouts(layouts, model.num_layers, global_batch_size=8)
    none, selective, full = activation_bytes_per_layer(model, c, rt, DROPOUT)
    assert none >= selective > full
    # On the stage, selective never holds more than none (full adds a recompute working buffer; see below).
    stage_none, stage_selective, _ = memory_per_gpu(model, c, _training(Precision.BF16, rt), HW).activations
    assert stage_none >= stage_selective


def _tiny() -> ModelSpec:
    """h=8, a=g=4, ffn=32, V=10, s=4, 2 layers, non-gated, no bias, untied."""
    return ModelSpec(
        num_layers=2, hidden_size=8, num_attention_heads=4, ffn_hidden_size=32, vocab_size=10, seq_length=4
    )


# tiny, tp=pp=1, b=1 (4 tokens), flash: none per layer 4*(10*8 + 4*8 + 4*8 + 4*32) = 4*272 = 1088
# embedding (8 + h) * 4 = 64; logits 4 * 4 * (h + V) = 288; full keeps 2*4*8 = 64 per layer
# plus one layer's no-recompute activations (1088) as the recompute working buffer.
STAGE_ROWS = [(Recompute.NONE, 2 * 1088 + 64 + 288), (Recompute.FULL, 2 * 64 + 64 + 1088 + 288)]


@pytest.mark.parametrize(("recompute", "expected"), STAGE_ROWS, ids=["none", "full"])
def test_stage_activations_by_hand(recompute: Recompute, expected: float) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1, recompute=recompute)], num_layers=2, global_batch_size=1)
    assert float(memory_per_gpu(_tiny(), c, _training(Precision.BF16, FLASH), HW).activations[0]) == expected


def _at_step(model: ModelSpec, c: Candidates, training: TrainingSpec):  # type: ignore[no-untyped-def]
    """The single stage's bytes at the optimizer step (the states with the optimizer's gradient copy)."""
    num = training_numerics(training, HW)
    params = tuple(stage_params(model, c, stage) for stage in stage_kinds(c))
    (first, _, _) = all_stage_terms(
        model, c, training, num, params, activation_bytes_per_layer(model, c, training.runtime, num)
    )
    return step_memory(c, num, first)


# tiny (tp=pp=1) holds 2*(4*8*8 + 2*8*32 + 2*8) + 10*8 + 10*8 + 8 = 2*784 + 168 = 1736 params.
TINY_PARAMS = 1736
ZERO_ROWS = [
    (Precision.BF16, 0, 1, 1, 2 + 4 + 12),  # 18 bytes/param
    (Precision.FP16, 0, 1, 1, 2 + 2 + 16),  # 20 bytes/param
    (Precision.BF16, 1, 4, 1, 6 + 12 / 4),  # distributed optimizer: 6 + 12/d
    (Precision.BF16, 1, 8, 1, 6 + 12 / 8),
    (Precision.BF16, 1, 2, 2, 6 + 12 / 4),  # sharded over dp * cp = 4
    (Precision.FP16, 1, 4, 1, 2 + 2 + 16 / 4),
    (Precision.BF16, 2, 4, 1, 2 + (4 + 12) / 4),
    (Precision.BF16, 3, 4, 1, (2 + 4 + 12) / 4),
]


@pytest.mark.parametrize(
    ("precision", "zero", "dp", "cp", "per_param"),
    ZERO_ROWS,
    ids=["bf16-z0", "fp16-z0", "bf16-z1-d4", "bf16-z1-d8", "bf16-z1-dp2cp2", "fp16-z1-d4", "bf16-z2-d4", "bf16-z3-d4"],
)
def test_model_state_bytes(precision: Precision, zero: int, dp: int, cp: int, per_param: float) -> None:
    layout = Layout(tp=1, pp=1, dp=dp, cp=cp, zero_stage=zero)
    c = Candidates.from_layouts([layout], num_layers=2, global_batch_size=8)
    mem = _at_step(_tiny(), c, _training(precision, FLASH))
    states = mem.parameters + mem.gradients + mem.optimizer_states
    np.testing.assert_allclose(states, [TINY_PARAMS * per_param], rtol=1e-12)


# Without dropout (today's Llama-style recipes): the two hidden masks (1 s b h each) go, and the
# scores keep only the softmax output (2 a s^2 b of Table 2's 5 a s^2 b).
NO_DROPOUT_TABLE2 = {
    "none": (Recompute.NONE, False, lambda s, b, h, a, t: s * b * h * (8 + 24 / t + 2 * a * s / (h * t))),
    "none-sp": (Recompute.NONE, True, lambda s, b, h, a, t: s * b * h * (32 / t + 2 * a * s / (h * t))),
    "selective": (Recompute.SELECTIVE, False, lambda s, b, h, a, t: s * b * h * (8 + 24 / t)),
    "full": (Recompute.FULL, False, lambda s, b, h, a, t: 2 * s * b * h),
}
NO_DROPOUT_GRID = list(itertools.product(NO_DROPOUT_TABLE2, [1, 8]))


@pytest.mark.parametrize(("case", "t"), NO_DROPOUT_GRID, ids=[f"{k}-t{t}" for k, t in NO_DROPOUT_GRID])
def test_no_dropout_keeps_no_masks(case: str, t: int) -> None:
    recompute, sp, formula = NO_DROPOUT_TABLE2[case]
    layout = Layout(tp=t, pp=1, dp=1, micro_batch_size=2, recompute=recompute, sequence_parallel=sp)
    got = _layer_bytes(layout, GPT, NO_FLASH, numerics(Precision.BF16))
    assert got == pytest.approx(formula(S, 2, H, A, t), rel=1e-12)


def test_attention_dropout_alone_adds_its_mask_and_output() -> None:
    layout = Layout(tp=1, pp=1, dp=1)
    attention_only = numerics(Precision.BF16, attention_dropout=True)
    extra = _layer_bytes(layout, GPT, NO_FLASH, attention_only) - _layer_bytes(
        layout, GPT, NO_FLASH, numerics(Precision.BF16)
    )
    assert extra == 3 * A * S * S  # mask 1 + dropout output 2 per score element, b = 1


# (grad_reduce_in_fp32, precision, bytes per parameter at ZeRO-1 over d = 4): Megatron-LM dist_optimizer.md
GRAD_ROWS = [
    (None, Precision.BF16, 6 + 12 / 4),  # framework default under bf16: fp32 main grads
    (False, Precision.BF16, 4 + 16 / 4),  # bf16 grads: the optimizer shard keeps an fp32 copy (as fp16)
    (True, Precision.FP16, 6 + 12 / 4),
    (None, Precision.FP16, 4 + 16 / 4),
]


@pytest.mark.parametrize(
    ("fp32", "precision", "per_param"), GRAD_ROWS, ids=["bf16-default", "bf16-grads", "fp16-fp32", "fp16"]
)
def test_gradient_dtype_sets_state_bytes(fp32: bool | None, precision: Precision, per_param: float) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, zero_stage=1)], num_layers=2, global_batch_size=8)
    mem = _at_step(_tiny(), c, _training(precision, FLASH, grad_reduce_in_fp32=fp32))
    np.testing.assert_allclose(mem.parameters + mem.gradients + mem.optimizer_states, [TINY_PARAMS * per_param])


# The optimizer's fp32 copy of 16-bit gradients exists only at the step, when no activation is held: the peak is
# the larger moment. Tiny, fp16, ZeRO-0: copy 4 x 1736 = 6944 bytes; the training moment holds 2 x 1088 + 64 + 288
# = 2528 bytes of activations plus 5% of them, so the step is the peak; at 64 tokens per micro-batch it is not.
def test_gradient_copy_meets_no_activations() -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], num_layers=2, global_batch_size=1)
    training = _training(Precision.FP16, FLASH, dropout=0.0)
    peak, step = memory_per_gpu(_tiny(), c, training, HW), _at_step(_tiny(), c, training)
    np.testing.assert_allclose(peak.optimizer_states, [TINY_PARAMS * 16], rtol=1e-12)
    assert float(peak.activations[0]) == 0.0 and float(peak.peak[0]) == float(step.peak[0])
    assert float(step.peak[0]) == TINY_PARAMS * 20 + 2 * 1024**3
    wide = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1, micro_batch_size=16)], num_layers=2, global_batch_size=16)
    busy = memory_per_gpu(_tiny(), wide, training, HW)
    np.testing.assert_allclose(busy.optimizer_states, [TINY_PARAMS * 12], rtol=1e-12)
    assert float(busy.activations[0]) > TINY_PARAMS * 4


# FP8 (Transformer Engine): each linear layer keeps its input's fp8 copy (1 byte) for the weight gradient.
# GPT shape, no dropout, flash, per token: norms' inputs 2h + 2h, QKV and fc1 inputs 1h + 1h (split by t under
# SP), Q 2h, K and V 2h + 2h, the attention output 2h kept by the core plus 1h for the output projection,
# GeLU input 2 ffn, fc2 input 1 ffn: 6h (replicated) + 9h + 3 ffn (split) = 6h + 21h = 27h with ffn = 4h,
# against 8h + 24h = 32h in bf16.
FP8_ROWS = [(1, False, 27), (8, False, 6 + 21 / 8), (8, True, 27 / 8)]


@pytest.mark.parametrize(("t", "sp", "per_h"), FP8_ROWS, ids=["t1", "t8", "t8-sp"])
def test_fp8_keeps_gemm_inputs_in_one_byte(t: int, sp: bool, per_h: float) -> None:
    layout = Layout(tp=t, pp=1, dp=1, micro_batch_size=2, sequence_parallel=sp)
    fp8, bf16 = numerics(Precision.FP8), numerics(Precision.BF16)
    assert (fp8.saved_gemm_input_bytes, fp8.gemm_input_copy_bytes) == (1, 1)
    assert (bf16.saved_gemm_input_bytes, bf16.gemm_input_copy_bytes) == (2, 0)
    assert _layer_bytes(layout, GPT, FLASH, fp8) == pytest.approx(S * 2 * H * per_h, rel=1e-12)
    assert _layer_bytes(layout, GPT, FLASH, bf16) == pytest.approx(
        S * 2 * H * (32 if t == 1 else (8 + 24 / t if not sp else 32 / t)), rel=1e-12
    )


def test_fp8_full_recompute_keeps_the_bf16_layer_input() -> None:
    layout = Layout(tp=1, pp=1, dp=1, recompute=Recompute.FULL)
    assert _layer_bytes(layout, GPT, FLASH, numerics(Precision.FP8)) == 2 * S * H


# (zero stage, layout, held gradient bytes and optimizer bytes per parameter, tiny over dp = 4, bf16 reduction)
FSDP_ROWS = [
    # Megatron-FSDP / distributed optimizer with --grad-reduce-in-bf16: bf16 buffer 2 + fp32 copy 4 in the optimizer
    (3, GradientLayout.MEGATRON, 2 / 4, (12 + 4) / 4),
    # PyTorch FSDP FULL_SHARD, reduce_dtype bf16: the fp32 sharded gradient 4, no copy
    (3, GradientLayout.PYTORCH_FSDP, 4 / 4, 12 / 4),
    (2, GradientLayout.MEGATRON, 2 / 4, (12 + 4) / 4),
    (2, GradientLayout.PYTORCH_FSDP, 4 / 4, 12 / 4),
    (0, GradientLayout.PYTORCH_FSDP, 4, 12),  # NO_SHARD: replicated fp32 gradients
]


@pytest.mark.parametrize(
    ("zero", "gradients", "grad_per_param", "optimizer_per_param"),
    FSDP_ROWS,
    ids=["z3-megatron", "z3-fsdp", "z2-megatron", "z2-fsdp", "z0-fsdp"],
)
def test_gradient_layout_sets_held_gradient_bytes(
    zero: int, gradients: GradientLayout, grad_per_param: float, optimizer_per_param: float
) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, zero_stage=zero)], num_layers=2, global_batch_size=8)
    training = _training(Precision.BF16, FLASH, grad_reduce_in_fp32=False, gradient_layout=gradients)
    mem = _at_step(_tiny(), c, training)  # at the step, where Megatron's optimizer holds its fp32 copy
    np.testing.assert_allclose(mem.gradients, [TINY_PARAMS * grad_per_param], rtol=1e-12)
    np.testing.assert_allclose(mem.optimizer_states, [TINY_PARAMS * optimizer_per_param], rtol=1e-12)
    # ZeRO-3 weights: Megatron-FSDP keeps a bf16 shard beside the fp32 master; PyTorch FSDP's fp32 shard is both
    fsdp_zero3 = zero == 3 and gradients is GradientLayout.PYTORCH_FSDP
    weights = 0 if fsdp_zero3 else 2 / 4 if zero == 3 else 2
    np.testing.assert_allclose(mem.parameters, [TINY_PARAMS * weights], rtol=1e-12)


def test_layouts_agree_under_fp32_reduction_except_zero_3_weights() -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, zero_stage=z) for z in range(4)], 2, global_batch_size=8)
    megatron, fsdp = (
        memory_per_gpu(_tiny(), c, _training(Precision.BF16, FLASH, gradient_layout=g), HW) for g in GradientLayout
    )
    np.testing.assert_array_equal(megatron.peak[:3], fsdp.peak[:3])
    # ZeRO-3, tiny (1736 parameters, 868 per layer): FSDP holds no bf16 shard (-2 x 1736 / 4) and gathers two units
    # plus one unit's unsharded bf16 gradient (+4 x 868 over Megatron's one unit of weights)
    np.testing.assert_allclose(megatron.parameters[3] - fsdp.parameters[3], 2 * TINY_PARAMS / 4, rtol=1e-12)
    np.testing.assert_allclose(fsdp.other[3] - megatron.other[3], 4 * TINY_PARAMS / 2, rtol=1e-12)


# FP8 weight storage, tiny model at tp = pp = 1: its 2 layers hold 2 * (4*8*8 + 2*8*32) = 1536 FP8 linear weights
# of its 1736 parameters (norms, embedding, output layer stay 16-bit).
TINY_FP8_WEIGHTS = 1536
FP8_WEIGHT_ROWS = [
    # (recipe, fp8_param_gather, FP8 GEMMs take non-TN layouts, weight bytes)
    (None, False, False, 2 * TINY_PARAMS + 2 * TINY_FP8_WEIGHTS),  # Hopper: bf16 + TE's cached data and transpose
    (None, False, True, 2 * TINY_PARAMS + 1 * TINY_FP8_WEIGHTS),  # Blackwell: bf16 + the cached data
    (Fp8Recipe.TENSORWISE, True, False, 2 * (TINY_PARAMS - TINY_FP8_WEIGHTS) + 2 * TINY_FP8_WEIGHTS),  # = bf16
    (Fp8Recipe.TENSORWISE, True, True, 2 * (TINY_PARAMS - TINY_FP8_WEIGHTS) + 1 * TINY_FP8_WEIGHTS),
    (Fp8Recipe.MXFP8, True, True, 2 * (TINY_PARAMS - TINY_FP8_WEIGHTS) + (2 + 2 / 32) * TINY_FP8_WEIGHTS),
    (Fp8Recipe.MXFP8, False, True, 2 * TINY_PARAMS + (2 + 2 / 32) * TINY_FP8_WEIGHTS),
    (None, None, True, 2 * TINY_PARAMS + 1 * TINY_FP8_WEIGHTS),  # today's recipes store FP8 only with ZeRO >= 1
    # blockwise: row- and column-wise data, one fp32 scale per 128 x 128 tile each, on either GPU kind
    (Fp8Recipe.BLOCKWISE, True, False, 2 * (TINY_PARAMS - TINY_FP8_WEIGHTS) + (2 + 8 / 16384) * TINY_FP8_WEIGHTS),
    (Fp8Recipe.BLOCKWISE, None, True, 2 * TINY_PARAMS + (2 + 8 / 16384) * TINY_FP8_WEIGHTS),  # its recipes: 16-bit
]


@pytest.mark.parametrize(
    ("recipe", "param_gather", "non_tn", "expected"),
    FP8_WEIGHT_ROWS,
    ids=[
        "hopper",
        "blackwell",
        "hopper-gather",
        "blackwell-gather",
        "mxfp8-gather",
        "mxfp8",
        "default-zero-0",
        "blockwise-gather",
        "blockwise-default",
    ],
)
def test_fp8_weight_bytes_by_hand(
    recipe: Fp8Recipe | None, param_gather: bool | None, non_tn: bool, expected: float
) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=1)], num_layers=2, global_batch_size=8)
    training = _training(Precision.FP8, FLASH, fp8_recipe=recipe, fp8_param_gather=param_gather)
    hw = replace(HW, fp8_gemm_non_tn=non_tn)
    assert float(memory_per_gpu(_tiny(), c, training, hw).parameters[0]) == pytest.approx(expected, rel=1e-12)
    # bf16 training on the same GPU holds 2 bytes per parameter whatever the GPU
    bf16 = memory_per_gpu(_tiny(), c, _training(Precision.BF16, FLASH), hw).parameters[0]
    assert float(bf16) == 2 * TINY_PARAMS


def test_fp8_weights_shard_with_zero_3() -> None:
    # ZeRO-3 over dp 4: every weight kind a quarter (Blackwell, FP8 storage: 2 x 200 + 1 x 1536, over 4)
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, zero_stage=3)], num_layers=2, global_batch_size=8)
    for gather in (True, None):  # the default stores them as FP8 at ZeRO >= 1
        training = _training(Precision.FP8, FLASH, fp8_recipe=Fp8Recipe.TENSORWISE, fp8_param_gather=gather)
        mem = memory_per_gpu(_tiny(), c, training, replace(HW, fp8_gemm_non_tn=True))
        assert float(mem.parameters[0]) == pytest.approx((2 * 200 + 1536) / 4, rel=1e-12)
