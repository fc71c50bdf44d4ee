"""Bytes per element of each tensor kind under a training precision, resolved once per `Precision`.

The cost model reads a `Numerics` (from `numerics(precision)`) wherever it
turns a count of elements into bytes, instead of writing 2 or 4 inline.

Sources: Megatron-LM mixed precision and its distributed optimizer
(`docs/source/api-guide/dist_optimizer.md`): bf16 weights with fp32 gradient
accumulation ("main grads"), an fp32 master copy and fp32 Adam m and v, i.e.
2 + 4 + 12 = 18 bytes per parameter; fp16 (Micikevicius et al. 2018, as in
Narayanan et al. 2021) keeps fp16 gradients and the optimizer an fp32 copy of
them, 2 + 2 + 16 = 20. Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054)
Sec. 3.1 counts the same states (2 + 2 + 12 = 16 bytes/param with fp16
gradients and no separate fp32 gradient). FP8 training (Transformer Engine)
casts to fp8 per GEMM: gradients and optimizer states are held as for bf16,
and so are activations, except what a linear layer saves of its input for the
weight gradient: its fp8 copy (`saved_gemm_input_bytes`); the FP8 linear
layers' weights as below.

Recipe settings resolve here too (`training_numerics`), once per `TrainingSpec` and GPU:
- `grad_reduce_in_fp32` false keeps the gradient buffer in the 16-bit dtype and
  reduces it so (Megatron-Core DDP config `grad_reduce_in_fp32`, Megatron-LM
  `--grad-reduce-in-bf16`); the distributed optimizer then keeps an fp32 copy of
  its shard of them, as under fp16: Megatron-LM `dist_optimizer.md` counts
  "fp16 param, fp16 grads" as 4 + 16/d bytes against 6 + 12/d.
- The gradient has two roles, each resolved here: the dtype the data-parallel reduction puts on the
  wire (`gradient_wire_bytes`, from `grad_reduce_in_fp32`) and the buffer held in memory
  (`gradient_bytes`, from `gradient_layout` too). Megatron-Core holds the buffer it reduces, so the two
  agree. PyTorch FSDP (`GradientLayout.PYTORCH_FSDP`) reduce-scatters in `reduce_dtype` but holds the
  sharded gradient in the fp32 sharded parameter's dtype, with no copy: 4 bytes held whatever goes on the
  wire (FSDP2 `torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py` `foreach_reduce`, FSDP1
  `torch/distributed/fsdp/_runtime_utils.py` `_cast_grad_to_param_dtype`). Its weights likewise: under
  FULL_SHARD the fp32 sharded parameter is what the optimizer updates, with no 16-bit shard beside it
  (`zero3_weight_shard_bytes` 0), and the 16-bit weights exist unsharded only for the units being computed:
  with `limit_all_gathers` "only two consecutive FSDP instances (the current instance running computation and
  the next instance whose all-gather is prefetched)" (FSDP1 `FullyShardedDataParallel` docstring), plus the
  computing unit's unsharded 16-bit gradient until its reduce-scatter (`zero3_gathered_bytes`).
- FP8 weights (`TrainingSpec.fp8_recipe`, `fp8_param_gather`, and whether the GPU's FP8 GEMMs take non-TN
  layouts): Transformer Engine quantizes each FP8 linear layer's weight and, as Megatron-Core passes
  `is_first_microbatch`, caches the copy across micro-batches (`module/linear.py`, `_fp8_workspaces`), so
  without `fp8_param_gather` a weight is held in 16-bit plus its quantized copy; with it (today's recipes'
  default, `fp8_param_gather_on`) the parameter is the quantized tensor only (Megatron-Core's param buffer in
  uint8, `param_and_grad_buffer.py`). The copy: one byte per element (`Float8Tensor._data`), plus its
  transpose where FP8 GEMMs are TN-only (Hopper; `float8_tensor_storage.py`, `is_non_tn_fp8_gemm_supported`:
  compute capability 10.x and 13+ need none); under MXFP8 row- and column-wise data with one E8M0 scale per 32
  elements each (`mxfp8_tensor.py`, `MXFP8_BLOCK_SCALING_SIZE` 32): 2 + 2/32; under the blockwise recipe row- and
  column-wise data on every GPU (TE keeps both in its GEMM-ready format, the column-wise one transposed; TE docs
  `features/low_precision_training/fp8_blockwise_scaling`, "Swizzle of scaling factors") with one fp32 scale per
  128 x 128 tile each: 2 + 8/16384. The distributed optimizer's parameter all-gather then moves the per-tensor
  FP8 bytes (1; the blockwise recipe's row-wise data, "FP8 Blockwise Scaling all-gather is supported", the
  column-wise copy of a 2-D-scaled weight being its transpose); MXFP8 gathers 16-bit values into the gradient
  buffer and quantizes after (`reuse_grad_buf_for_mxfp8_param_ag`, `_post_param_sync`), 2 bytes. Blockwise
  recipes leave `fp8_param_gather` off (`fp8_param_gather_default`).
- NVFP4 weights (precision nvfp4; `fp8_param_gather` is then Megatron-LM's `--fp4-param-gather`): row- and
  column-wise NVFP4 data, 0.5625 bytes each, gathered row-wise only (`_nvfp4_weights`); the saved GEMM input is
  its column-wise NVFP4 copy.
- Dropout masks (1 byte per element, Korthikanti 2022 Table 2) exist only at a
  non-zero rate: PyTorch's `dropout` returns its input unchanged at p = 0
  (`aten/src/ATen/native/Dropout.cpp`, `_dropout_impl`), so autograd saves no mask.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel.candidates import BoolArray, IntArray
from planner.profiles import Hardware
from planner.specs import AdamMoments, Fp8Recipe, GradientLayout, Precision, TrainingSpec

__all__ = [
    "FP8_BYTES",
    "FP32_BYTES",
    "HALF_BYTES",
    "MASK_BYTES",
    "NVFP4_BYTES",
    "Numerics",
    "fp8_param_gather_default",
    "fp8_param_gather_on",
    "numerics",
    "training_numerics",
]

HALF_BYTES = 2
"""bf16 / fp16: two bytes."""
FP32_BYTES = 4
"""fp32: four bytes."""
MASK_BYTES = 1
"""A dropout mask element: one byte (Korthikanti 2022 Table 2)."""
FP8_BYTES = 1
"""An FP8 element (E4M3 / E5M2): one byte."""
MXFP8_BLOCK = 32
"""Elements per E8M0 (one-byte) scale under MXFP8 (TE `constants.MXFP8_BLOCK_SCALING_SIZE`)."""
NVFP4_BLOCK = 16
"""Elements per E4M3 (one-byte) scale under NVFP4 (TE `NVFP4BlockScaling`: "each group of 16 consecutive values is
scaled together"; weights one per 16 x 16 block, the same count)."""
NVFP4_BYTES = 0.5 + 1 / NVFP4_BLOCK
"""An NVFP4 element with its share of the block scale: a 4-bit E2M1 value and one byte per 16 (0.5625); the one
fp32 scale per tensor is left out."""
BLOCKWISE_WEIGHT_BLOCK = 128 * 128
"""Elements per fp32 scale of a weight under the blockwise recipe: one per 128 x 128 tile (TE `Float8BlockScaling`
default `w_block_scaling_dim=2`; TE docs `features/low_precision_training/fp8_blockwise_scaling`, "Block size")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Numerics:
    """Bytes per element of each tensor kind one precision trains with."""

    weight_bytes: int
    """16-bit weights, bf16/fp16: every parameter's, except FP8 linear weights stored as FP8 (`fp8_param_gather`,
    whose bytes are `quantized_weight_bytes`); ZeRO-3's gathered layer is counted at this width."""
    gradient_bytes: int
    """Gradient held in memory (ZeRO-2/3 shard it): Megatron's buffer in the reduction dtype (fp32 main grads
    under bf16/fp8, Megatron `accumulate_allreduce_grads_in_fp32`; fp16 under fp16); PyTorch FSDP's fp32
    sharded gradient."""
    gradient_wire_bytes: int
    """Gradient bytes on the wire of the data-parallel all-reduce / reduce-scatter: the reduction dtype
    (`TrainingSpec.grad_reduce_in_fp32`; FSDP `MixedPrecision.reduce_dtype`)."""
    master_weight_bytes: int
    """The optimizer's fp32 copy of the weights (4; the 16-bit remainder beside bf16 weights, 2, under the
    precision-aware optimizer, `_precision_aware_optimizer`)."""
    adam_moment_bytes: int
    """Adam's first and second moments, fp32 each: 4 + 4 (bf16 each, 2 + 2, with `TrainingSpec.adam_moments` bf16)."""
    gradient_copy_bytes: int
    """An fp32 copy of 16-bit gradients Megatron's optimizer keeps (fp16, or 16-bit reduction); 0 under FSDP."""
    main_gradient_bytes: int
    """The fp32 gradient the optimizer step reads, whichever buffer holds it."""
    activation_bytes: int
    """Activations between kernels: bf16/fp16 (fp8 GEMMs write bf16 outputs)."""
    saved_gemm_input_bytes: float
    """What a linear layer keeps of its input for the weight gradient, per element: the 16-bit input itself, or
    under FP8 its quantized copy, one byte (Transformer Engine `module/linear.py` `_Linear.forward`: the
    quantized input is saved with only its column-wise data, "row-wise data ... not needed in backward pass";
    MXFP8 adds one scale byte per 32 elements, left out); under NVFP4 the column-wise NVFP4 copy, `NVFP4_BYTES`."""
    wire_bytes: int
    """Activations on the wire (TP reductions, CP, EP and pipeline traffic): bf16/fp16; SP's all-gathers into
    linear layers move `gathered_gemm_input_bytes`."""
    logit_bytes: int
    """Logits in the cross-entropy, computed in fp32 (Megatron `cross_entropy_loss_fusion`)."""
    zero3_weight_shard_bytes: int = HALF_BYTES
    """Per parameter, the 16-bit weight shard ZeRO-3 keeps beside the optimizer's fp32 master: Megatron-FSDP keeps
    one (2); PyTorch FSDP's fp32 sharded parameter is the master itself (0; module docstring)."""
    zero3_gathered_bytes: int = HALF_BYTES
    """Per parameter of one layer (one FSDP unit), what ZeRO-3 holds unsharded while computing: its 16-bit
    weights (2; Rajbhandari 2020 Sec. 5.3), and under PyTorch FSDP also the next unit's, prefetched, and the
    unit's unsharded 16-bit gradient (2 + 2 + 2)."""
    quantized_weight_bytes: float = 0.0
    """Per element of an FP8 linear layer's weight, its quantized storage (module docstring): 1, 2 with the
    transpose on TN-only GPUs, 2 + 2/32 under MXFP8; 0 without FP8."""
    fp8_param_gather: bool | None = False
    """`TrainingSpec.fp8_param_gather` under FP8 and NVFP4 (None: on where the layout allows, `fp8_param_gather_on`);
    False under 16-bit training, whose weights are all 16-bit."""
    fp8_weight_gather_bytes: float = HALF_BYTES
    """Bytes per FP8 linear weight in the distributed optimizer's parameter all-gather (which only runs at
    zero_stage >= 1, where None means on): 1 with per-tensor `fp8_param_gather`, else 16-bit."""
    hidden_dropout_mask_bytes: int = 0
    """The mask of each of the layer's two hidden dropouts (after attention, after the MLP): 1, or 0 at rate 0."""
    attention_dropout_mask_bytes: int = 0
    """The mask of the dropout on the attention probabilities: 1, or 0 at rate 0."""

    @property
    def attention_score_bytes(self) -> int:
        """Bytes kept per attention-score element without flash attention (Korthikanti 2022 Table 2's 5as^2b):
        the softmax output (2) and, with attention dropout, its mask (1) and output (2)."""
        dropout = self.attention_dropout_mask_bytes + self.activation_bytes if self.attention_dropout_mask_bytes else 0
        return self.activation_bytes + dropout

    def fp8_weights_as_fp8_only(self, zero_stage: IntArray) -> BoolArray:
        """Where the FP8 linear weights are held as FP8 tensors only, with no 16-bit copy (`fp8_param_gather_on`)."""
        return fp8_param_gather_on(self.fp8_param_gather, zero_stage)

    @property
    def gathered_gemm_input_bytes(self) -> float:
        """Bytes per element of a tensor that sequence parallelism all-gathers into a linear layer (its input in
        forward and in the weight-gradient re-gather, its output gradient in backward): the GEMM's input format,
        16-bit, or under FP8 and NVFP4 the quantized copy, the same bytes the layer saves (`saved_gemm_input_bytes`).

        Transformer Engine quantizes before it gathers. v1.8 (NeMo 24.07's): `module/layernorm_linear.py`
        `_LayerNormLinear.forward` writes the norm's output as uint8 FP8 and gathers that (`gather_along_first_dim`,
        "ln_out_total"), and `module/base.py` `grad_output_preprocess` casts the output gradient to FP8 before its
        gather ("FP8 case with gather: unfused bgrad, cast, transpose for efficient gather"); at d0067d0
        `distributed.py` `gather_along_first_dim` with a quantizer gathers per-tensor FP8 (`_all_gather_fp8`),
        blockwise (`_start_all_gather_fp8_blockwise`), MXFP8 (`_all_gather_mxfp8`) and NVFP4 (`_all_gather_nvfp4`)
        data. The reduce-scatters carry the 16-bit outputs and input gradients (`wire_bytes`)."""
        return self.saved_gemm_input_bytes

    @property
    def gemm_input_copy_bytes(self) -> float:
        """Bytes per element a linear layer keeps beside a 16-bit tensor something else saves too (the attention
        output, which the attention core keeps for its own backward): none under 16-bit GEMMs, where both hold
        the one tensor, its quantized copy under FP8."""
        return 0 if self.saved_gemm_input_bytes == self.activation_bytes else self.saved_gemm_input_bytes

    @property
    def optimizer_state_bytes(self) -> int:
        """Optimizer bytes per parameter at its step: master + m + v (+ the fp32 gradient copy): 12 bf16, 16 fp16."""
        return self.resident_optimizer_bytes + self.gradient_copy_bytes

    @property
    def resident_optimizer_bytes(self) -> int:
        """Optimizer bytes per parameter between steps: master + m + v (12; 6 with bf16 moments and remainders).

        The fp32 copy of 16-bit gradients exists only from the step to the next iteration's start:
        Megatron-Core's optimizers make it in `_copy_model_grads_to_main_grads` (`main_param.grad =
        model_grad.float()`) and `zero_grad(set_to_none=True)`, called first in every train step, drops it
        (`optimizer/optimizer.py`, `distrib_optimizer.py`), so it never meets the activations.
        """
        return self.master_weight_bytes + self.adam_moment_bytes

    @property
    def optimizer_step_hbm_bytes(self) -> int:
        """HBM bytes per parameter of one Megatron optimizer step (memory-bound).

        Zero the fp32 main grad (write 4), clip by global norm (read 4), Adam
        (read grad, master, m, v: 16; write master, m, v: 12), copy the master
        to the weights (read 4, write 2): 42. The step works on fp32 main grads
        under every precision, so fp16 counts the same.
        """
        grad, master, moments = self.main_gradient_bytes, self.master_weight_bytes, self.adam_moment_bytes
        adam = (grad + master + moments) + (master + moments)
        return grad + grad + adam + master + self.weight_bytes


_MIXED = Numerics(
    weight_bytes=HALF_BYTES,
    gradient_bytes=FP32_BYTES,
    gradient_wire_bytes=FP32_BYTES,
    master_weight_bytes=FP32_BYTES,
    adam_moment_bytes=2 * FP32_BYTES,
    gradient_copy_bytes=0,
    main_gradient_bytes=FP32_BYTES,
    activation_bytes=HALF_BYTES,
    saved_gemm_input_bytes=HALF_BYTES,
    wire_bytes=HALF_BYTES,
    logit_bytes=FP32_BYTES,
)
"""bf16 (and fp8) mixed precision as Megatron-LM trains it: 2 + 4 + 12 = 18 bytes of state per parameter."""

_NUMERICS: dict[Precision, Numerics] = {  # fp16: fp16 gradients, which the optimizer copies to fp32
    Precision.BF16: _MIXED,
    Precision.FP8: replace(_MIXED, saved_gemm_input_bytes=FP8_BYTES),
    Precision.NVFP4: replace(_MIXED, saved_gemm_input_bytes=NVFP4_BYTES),
    Precision.FP16: replace(
        _MIXED, gradient_bytes=HALF_BYTES, gradient_wire_bytes=HALF_BYTES, gradient_copy_bytes=FP32_BYTES
    ),
}


@functools.cache
def numerics(
    precision: Precision,
    grad_reduce_in_fp32: bool | None = None,
    attention_dropout: bool = False,
    hidden_dropout: bool = False,
    gradient_layout: GradientLayout = GradientLayout.MEGATRON,
    fp8_recipe: Fp8Recipe | None = None,
    fp8_param_gather: bool | None = None,
    fp8_gemm_non_tn: bool = False,
    adam_moments: AdamMoments = AdamMoments.FP32,
) -> Numerics:
    """The bytes per element of `precision` under the given recipe; one frozen object per combination.

    `grad_reduce_in_fp32` None: the precision's framework default (fp32 main grads under
    bf16/fp8, Megatron-LM `arguments.py`; fp16 grads under fp16). False: 16-bit reduction.
    `gradient_layout`: what the held gradient costs (`_gradient_bytes`). `fp8_recipe`, `fp8_param_gather`
    and `fp8_gemm_non_tn` set the FP8 weights' storage (`_fp8_weights`); they do nothing outside fp8.
    `adam_moments`: the optimizer states' storage (`_precision_aware_optimizer`).
    """
    num = _gradient_bytes(_NUMERICS[precision], grad_reduce_in_fp32, gradient_layout)
    if precision is Precision.FP8:
        num = _fp8_weights(num, fp8_recipe, fp8_param_gather, fp8_gemm_non_tn)
    if precision is Precision.NVFP4:
        num = _nvfp4_weights(num, fp8_param_gather)
    if adam_moments is AdamMoments.BF16:
        num = _precision_aware_optimizer(num, precision, fp8_recipe)
    return replace(
        num,
        attention_dropout_mask_bytes=MASK_BYTES if attention_dropout else 0,
        hidden_dropout_mask_bytes=MASK_BYTES if hidden_dropout else 0,
    )


def fp8_param_gather_default(fp8_param_gather: bool | None, fp8_recipe: Fp8Recipe | None) -> bool | None:
    """`fp8_param_gather` with today's recipes' choice where it depends on the FP8 recipe: None stays None (on
    wherever the layout allows, `fp8_param_gather_on`) except under the blockwise recipe, whose recipes keep 16-bit
    weights (False): Megatron-Bridge `training/mixed_precision.py` `bf16_with_fp8_subchannel_scaling_mixed`
    (`fp8_param_gather = False`) and its H100 DeepSeek-V3 FP8-SC perf recipe
    (`perf_recipes/deepseek/h100/deepseek_v3.py`, `fp8_param_gather = False`)."""
    if fp8_param_gather is None and fp8_recipe is Fp8Recipe.BLOCKWISE:
        return False
    return fp8_param_gather


def fp8_param_gather_on(fp8_param_gather: bool | None, zero_stage: IntArray | int) -> BoolArray:
    """Whether FP8 weights are stored as FP8 (Megatron-LM `--fp8-param-gather`), per ZeRO stage: as stated, or
    with None (today's recipes: NeMo's `bf16_with_fp8_mixed` / `bf16_with_fp8_current_scaling_mixed` and
    Megatron-Bridge's FP8 presets set `fp8_param_gather = True`) wherever Megatron-LM accepts it, the distributed
    optimizer or Megatron-FSDP (zero_stage >= 1; `validate_args` refuses it without)."""
    zero = np.asarray(zero_stage)
    if fp8_param_gather is None:
        on: BoolArray = zero >= 1
        return on
    return np.full(zero.shape, fp8_param_gather, dtype=np.bool_)


def _fp8_weights(num: Numerics, recipe: Fp8Recipe | None, param_gather: bool | None, non_tn: bool) -> Numerics:
    """`num` with the FP8 linear weights' storage and parameter-gather bytes (module docstring); `recipe` None
    is a framework's per-tensor default."""
    if recipe is Fp8Recipe.MXFP8:
        quantized = 2 * (FP8_BYTES + 1 / MXFP8_BLOCK)  # row- and column-wise data, one scale byte per 32 each
    elif recipe is Fp8Recipe.BLOCKWISE:  # row- and column-wise data, one fp32 scale per 128 x 128 tile each
        quantized = 2 * (FP8_BYTES + FP32_BYTES / BLOCKWISE_WEIGHT_BLOCK)
    else:
        quantized = FP8_BYTES if non_tn else 2 * FP8_BYTES  # the data, and its transpose on TN-only GPUs
    param_gather = fp8_param_gather_default(param_gather, recipe)
    per_tensor_gather = param_gather is not False and recipe is not Fp8Recipe.MXFP8
    return replace(
        num,
        quantized_weight_bytes=quantized,
        fp8_param_gather=param_gather,
        fp8_weight_gather_bytes=FP8_BYTES if per_tensor_gather else num.weight_bytes,
    )


def _nvfp4_weights(num: Numerics, param_gather: bool | None) -> Numerics:
    """`num` with the NVFP4 linear weights' storage and parameter-gather bytes: row- and column-wise NVFP4 data,
    each `NVFP4_BYTES` per element (TE `NVFP4BlockScaling`: "when Transformer Engine needs both the tensor and its
    transpose ... both versions are computed from the high precision input"; NVFP4 GEMMs are TN-only), 2 x 0.5625.
    With `--fp4-param-gather` the all-gather moves the row-wise data alone: a weight's 16 x 16 block scaling makes
    the column-wise copy its transpose, which TE derives after the gather (`nvfp4_tensor.py`
    `fsdp_post_all_gather`, "Derive columnwise data locally via transpose instead of all-gathering it")."""
    return replace(
        num,
        quantized_weight_bytes=2 * NVFP4_BYTES,
        fp8_param_gather=param_gather,
        fp8_weight_gather_bytes=NVFP4_BYTES if param_gather is not False else num.weight_bytes,
    )


def _precision_aware_optimizer(num: Numerics, precision: Precision, fp8_recipe: Fp8Recipe | None) -> Numerics:
    """`num` under Megatron-Core's precision-aware optimizer with bf16 moments: 2 bytes each; the master weight
    is Transformer Engine's FusedAdam's 16-bit remainder of the fp32 value beside the bf16 weight (2 bytes)
    where TE keeps the master (bf16 weights: bf16 training, FP8 with delayed scaling, the recipe default, and NVFP4,
    whose optimizer config has no fp8_recipe),
    else Megatron-Core's fp32 copy (fp16 weights; FP8 with per-tensor current or MXFP8 scaling).

    Source: Megatron-Core core_v0.16.1 `optimizer/optimizer_config.py`
    (`use_precision_aware_optimizer_no_fp8_or_ds_fp8`; `store_param_remainders`, default True: "store the
    16-bit FP32 parameter remainders in the optimizer state, excluding the 16 bits shared with the BF16
    parameters") and `optimizer/__init__.py` (`master_weights` handed to TE's FusedAdam in that case)."""
    bf16_weights = precision in (Precision.BF16, Precision.NVFP4) or (
        precision is Precision.FP8 and fp8_recipe in (None, Fp8Recipe.DELAYED)
    )
    return replace(
        num,
        adam_moment_bytes=2 * HALF_BYTES,
        master_weight_bytes=HALF_BYTES if bf16_weights else FP32_BYTES,
    )


def _gradient_bytes(num: Numerics, grad_reduce_in_fp32: bool | None, layout: GradientLayout) -> Numerics:
    """`num` with the gradient's wire dtype, held buffer and optimizer copy of one recipe.

    Wire: 4 bytes with fp32 reduction, 2 with 16-bit, the precision's default for None. Held,
    Megatron (`GradientLayout.MEGATRON`): the buffer it reduces, plus a 4-byte fp32 copy in the
    optimizer when that is 16-bit (Megatron-LM `dist_optimizer.md`: 4 + 16/d against 6 + 12/d).
    Held, PyTorch FSDP: the fp32 sharded gradient (4), no copy, whatever the wire carries
    (FSDP2 `_fsdp_collectives.py` `foreach_reduce`; FSDP1 `_runtime_utils.py` `_cast_grad_to_param_dtype`).
    """
    wire = num.gradient_wire_bytes
    if grad_reduce_in_fp32 is not None:
        wire = FP32_BYTES if grad_reduce_in_fp32 else HALF_BYTES
    if layout is GradientLayout.PYTORCH_FSDP:
        return replace(
            num,
            gradient_wire_bytes=wire,
            gradient_bytes=FP32_BYTES,
            gradient_copy_bytes=0,
            zero3_weight_shard_bytes=0,
            zero3_gathered_bytes=3 * num.weight_bytes,
        )
    copy = 0 if wire == FP32_BYTES else FP32_BYTES
    return replace(num, gradient_wire_bytes=wire, gradient_bytes=wire, gradient_copy_bytes=copy)


def training_numerics(training: TrainingSpec, hw: Hardware) -> Numerics:
    """The `Numerics` of a training spec on one GPU: its precision, gradient dtypes and layout, dropout rates
    (masks only above 0) and FP8 weight storage (which reads whether `hw`'s FP8 GEMMs take non-TN layouts)."""
    return numerics(
        training.precision,
        training.grad_reduce_in_fp32,
        training.attention_dropout > 0,
        training.hidden_dropout > 0,
        training.gradient_layout,
        training.fp8_recipe,
        training.fp8_param_gather,
        hw.fp8_gemm_non_tn,
        training.adam_moments,
    )
