"""HBM bytes per element of a layer's memory-bound kernels, as fused kernels or as eager PyTorch ops.

A layer's norms, residual adds, MLP activation and rotary embedding move few flop per byte: each kernel's time is
the bytes it reads and writes over the achieved HBM bandwidth (`costmodel.compute`). How many bytes depends on the
code that runs them. Megatron-Core with Transformer Engine runs each as one fused kernel that reads its 16-bit input
once and writes its output once (`FUSED`, after Korthikanti et al. 2022, arXiv 2205.05198, Table 2). Model code
written as plain PyTorch ops and run eagerly (no `torch.compile`) runs each op as its own kernel, several of them
on fp32 copies of the activations (`EAGER`, counted from IBM's fms LLaMA, the code behind the fms-fsdp rows).
`RuntimeFeatures.eager_elementwise` picks the table; `kernels_for` is the one place that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs import ModelSpec, RuntimeFeatures

__all__ = [
    "EAGER",
    "FUSED",
    "ElementwiseKernels",
    "expanded_kv_width",
    "kernels_for",
    "kv_copy_launches",
    "rotated_width",
]


@dataclass(frozen=True, slots=True)
class ElementwiseKernels:
    """Forward HBM bytes per element of each memory-bound part of a layer (16-bit activations)."""

    norm: float
    """One norm (LayerNorm or RMSNorm) over the hidden width."""
    residual_add: float
    """One block's residual add, with its dropout where the code fuses one in."""
    plain_activation: float
    """A non-gated MLP activation (GeLU), per element of MLP width."""
    gated_activation: float
    """A gated MLP activation (SwiGLU: the activation and the product), per element of MLP width."""
    rotary: float
    """Rotary position embedding, per rotated element of the queries and keys."""
    expands_grouped_kv: bool
    """Grouped-query attention's keys and values are copied out to every query head before the attention kernel
    (forward: read kv wide, written query wide; the attention kernel then keeps the copies for its backward)."""
    norm_saved_extra: float
    """Bytes per element a norm keeps for its backward beyond what a fused norm keeps (its 16-bit input)."""
    rotary_saved: float
    """Bytes per rotated element of Q and K the rotary embedding keeps for its backward."""
    gated_activation_saved_extra: float
    """Bytes per element of MLP width a gated activation keeps beyond a fused one (its two 16-bit inputs)."""
    norm_launches: int
    """Kernels one norm launches per forward pass (`costmodel.host` counts a layer's launches from these)."""
    gated_activation_launches: int
    """Kernels a gated activation launches per forward pass."""
    rotary_launches: int
    """Kernels rotary embedding launches per forward pass, queries and keys together."""


FUSED = ElementwiseKernels(
    norm=4,
    residual_add=7,
    plain_activation=4,
    gated_activation=6,
    rotary=4,
    expands_grouped_kv=False,
    norm_saved_extra=0,
    rotary_saved=0,
    gated_activation_saved_extra=0,
    norm_launches=1,
    gated_activation_launches=1,
    rotary_launches=1,
)
"""One fused kernel per part (Megatron-Core with Transformer Engine, Megatron-LM's fused kernels). A norm reads its
16-bit input and writes its output (2 + 2); a bias-dropout-add reads the branch and the residual (2 + 2) and writes
the sum (2) and its 1-byte mask; GeLU reads and writes the MLP width (2 + 2), SwiGLU reads both halves and writes
one (2 + 2 + 2); RoPE reads and writes what it rotates (2 + 2). Korthikanti et al. 2022 (arXiv 2205.05198) Table 2,
each tensor read and written once, one launch each (`costmodel.host` counts the plain activation, which Transformer
Engine fuses into its GEMM's epilogue, by `RuntimeFeatures.fused_kernels`). What they keep for backward is
`costmodel.memory`'s baseline (Korthikanti Table 2: a norm's input, an activation's input; a fused RoPE recomputes
its rotation)."""

EAGER = ElementwiseKernels(
    norm=36,
    residual_add=6,
    plain_activation=4,
    gated_activation=10,
    rotary=36,
    expands_grouped_kv=True,
    norm_saved_extra=4,
    rotary_saved=4,
    gated_activation_saved_extra=2,
    norm_launches=8,
    gated_activation_launches=2,
    rotary_launches=8,
)
"""One kernel per PyTorch op, as IBM's fms LLaMA runs without `torch.compile` (foundation-model-stack at f33fdd26,
2024-02-26, the last commit before fms-fsdp's cf6e42c, which asks for `ibm-fms >= 0.0.3` and published the README's
eager table; these files' forward code is unchanged through f29e546d, 2024-03-14). Bytes per element, 16-bit
activations, fp32 = 4:

- norm 36: `LayerNormParameterized.forward` with `use_high_precision_pow` (fms/modules/layernorm.py, as
  fms/models/llama.py builds both block norms): `x.float()` (read 2, write 4), `.pow(2)` (4 + 4), `.mean(-1)`
  (read 4), `xf * rsqrt(...)` (4 + 4), `.type_as(x)` (4 + 2), `self.weight * x` (2 + 2). Hugging Face's
  `LlamaRMSNorm` runs the same ops.
- residual_add 6: `x = x + residual` (read 2 + 2, write 2); no dropout (p_dropout 0 skips it).
- gated_activation 10: `self.a(self.wg(x)) * self.w1(x)` (fms/modules/feedforward.py `GatedLinearUnit`): SiLU
  (2 + 2), the product (2 + 2 + 2). plain_activation 4: one activation kernel (2 + 2).
- rotary 36: `RotaryEmbedding.adjusted_qk` (fms/modules/positions.py): `q.float()` (2 + 4), the product with the
  2 x 2 rotation `freqs.mul(q_.unsqueeze(-2))` (read 4, write 8: each pair becomes a 2 x 2 block), `.sum(5)` (8 + 4),
  `.type_as(q)` (4 + 2).
- expands_grouped_kv: with fewer key/value heads than query heads, `keys.unsqueeze(2).expand(...).flatten(1, 2)`
  (and the same for values; fms/modules/attention.py `MultiHeadAttention.forward`) copies both out to the query
  heads' width before `F.scaled_dot_product_attention`, which keeps the copies. (The output's
  `.transpose(2, 1).contiguous()` copies nothing: SDPA's flash kernel writes its output sequence-major already.)

Launches, one per op: a norm 8 (`float`, `pow`, `mean`, `+ eps`, `rsqrt`, the product, `type_as`, the weight's
product; two of them over the row statistics only, so they add launches but no bytes above); SwiGLU 2; RoPE 8, four
each for Q and K (`float`, the product, `sum`, `type_as`); the grouped-KV copy 2, one each for K and V; the plain
activation and the residual add 1 each.

Kept for backward (autograd's saved tensors), beyond `FUSED`: norm 4, the fp32 copy of the input that `pow` and
the product keep (the 16-bit normalized tensor `self.weight * x` keeps replaces the input a fused norm keeps);
rotary 4, the fp32 copy of Q and K the product with the rotation keeps; gated activation 2, the SiLU output the
product keeps (beside its input and the up projection's output, which the fused kernel keeps too)."""


def kernels_for(rt: RuntimeFeatures) -> ElementwiseKernels:
    """The byte table of the code `rt` describes (`RuntimeFeatures.eager_elementwise`)."""
    return EAGER if rt.eager_elementwise else FUSED


def rotated_width(model: ModelSpec) -> int:
    """Elements per token rotary embedding rotates outside MLA: Q and K (`attention_hidden_size` +
    `kv_hidden_size`); none with learned positions. MLA rotates only its RoPE parts (`costmodel.compute`)."""
    if model.learned_position_embeddings or model.mla is not None:
        return 0
    return model.attention_hidden_size + model.kv_hidden_size


def expanded_kv_width(model: ModelSpec, kernels: ElementwiseKernels) -> int:
    """Elements per token the copy of grouped keys and values to every query head adds to K and V
    (`ElementwiseKernels.expands_grouped_kv`): 2 (q - kv), zero without the copy or with as many kv heads as
    query heads (and under MLA, whose keys and values are up-projected per head)."""
    q, kv = model.attention_hidden_size, model.kv_hidden_size
    if not kernels.expands_grouped_kv or model.mla is not None or kv >= q:
        return 0
    return 2 * (q - kv)


def kv_copy_launches(model: ModelSpec, kernels: ElementwiseKernels) -> int:
    """Kernels the grouped-KV copy launches per forward pass: one each for K and V where it copies anything
    (`expanded_kv_width`)."""
    return 2 if expanded_kv_width(model, kernels) > 0 else 0
