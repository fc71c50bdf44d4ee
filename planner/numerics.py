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
casts to fp8 per GEMM: weights, gradients and optimizer states are held as
for bf16, and so are activations, except what a linear layer saves of its
input for the weight gradient: its fp8 copy (`saved_gemm_input_bytes`).

Recipe settings resolve here too (`training_numerics`), once per `TrainingSpec`:
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
  `torch/distributed/fsdp/_runtime_utils.py` `_cast_grad_to_param_dtype`). The unsharded 16-bit gradient
  of one FSDP unit is transient and not counted.
- Dropout masks (1 byte per element, Korthikanti 2022 Table 2) exist only at a
  non-zero rate: PyTorch's `dropout` returns its input unchanged at p = 0
  (`aten/src/ATen/native/Dropout.cpp`, `_dropout_impl`), so autograd saves no mask.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from planner.specs import GradientLayout, Precision, TrainingSpec

__all__ = ["FP32_BYTES", "HALF_BYTES", "MASK_BYTES", "Numerics", "numerics", "training_numerics"]

HALF_BYTES = 2
"""bf16 / fp16: two bytes."""
FP32_BYTES = 4
"""fp32: four bytes."""
MASK_BYTES = 1
"""A dropout mask element: one byte (Korthikanti 2022 Table 2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Numerics:
    """Bytes per element of each tensor kind one precision trains with."""

    weight_bytes: int
    """Model weights as the GEMMs read them and ZeRO-3 gathers them: bf16/fp16 (fp8 keeps bf16 weights)."""
    gradient_bytes: int
    """Gradient held in memory (ZeRO-2/3 shard it): Megatron's buffer in the reduction dtype (fp32 main grads
    under bf16/fp8, Megatron `accumulate_allreduce_grads_in_fp32`; fp16 under fp16); PyTorch FSDP's fp32
    sharded gradient."""
    gradient_wire_bytes: int
    """Gradient bytes on the wire of the data-parallel all-reduce / reduce-scatter: the reduction dtype
    (`TrainingSpec.grad_reduce_in_fp32`; FSDP `MixedPrecision.reduce_dtype`)."""
    master_weight_bytes: int
    """The optimizer's fp32 copy of the weights."""
    adam_moment_bytes: int
    """Adam's first and second moments, fp32 each: 4 + 4."""
    gradient_copy_bytes: int
    """An fp32 copy of 16-bit gradients Megatron's optimizer keeps (fp16, or 16-bit reduction); 0 under FSDP."""
    main_gradient_bytes: int
    """The fp32 gradient the optimizer step reads, whichever buffer holds it."""
    activation_bytes: int
    """Activations between kernels: bf16/fp16 (fp8 GEMMs write bf16 outputs)."""
    saved_gemm_input_bytes: int
    """What a linear layer keeps of its input for the weight gradient, per element: the 16-bit input itself, or
    under FP8 its quantized copy, one byte (Transformer Engine `module/linear.py` `_Linear.forward`: the
    quantized input is saved with only its column-wise data, "row-wise data ... not needed in backward pass";
    MXFP8 adds one scale byte per 32 elements, left out)."""
    wire_bytes: int
    """Activations on the wire (TP, SP, CP, EP and pipeline traffic): bf16/fp16."""
    logit_bytes: int
    """Logits in the cross-entropy, computed in fp32 (Megatron `cross_entropy_loss_fusion`)."""
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

    @property
    def gemm_input_copy_bytes(self) -> int:
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
        """Optimizer bytes per parameter between steps: master + m + v (12).

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
    Precision.FP8: replace(_MIXED, saved_gemm_input_bytes=1),
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
) -> Numerics:
    """The bytes per element of `precision` under the given recipe; one frozen object per combination.

    `grad_reduce_in_fp32` None: the precision's framework default (fp32 main grads under
    bf16/fp8, Megatron-LM `arguments.py`; fp16 grads under fp16). False: 16-bit reduction.
    `gradient_layout`: what the held gradient costs (`_gradient_bytes`).
    """
    num = _gradient_bytes(_NUMERICS[precision], grad_reduce_in_fp32, gradient_layout)
    return replace(
        num,
        attention_dropout_mask_bytes=MASK_BYTES if attention_dropout else 0,
        hidden_dropout_mask_bytes=MASK_BYTES if hidden_dropout else 0,
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
        return replace(num, gradient_wire_bytes=wire, gradient_bytes=FP32_BYTES, gradient_copy_bytes=0)
    copy = 0 if wire == FP32_BYTES else FP32_BYTES
    return replace(num, gradient_wire_bytes=wire, gradient_bytes=wire, gradient_copy_bytes=copy)


def training_numerics(training: TrainingSpec) -> Numerics:
    """The `Numerics` of a training spec: its precision, gradient dtypes and layout, and dropout rates (masks
    only above 0)."""
    return numerics(
        training.precision,
        training.grad_reduce_in_fp32,
        training.attention_dropout > 0,
        training.hidden_dropout > 0,
        training.gradient_layout,
    )
