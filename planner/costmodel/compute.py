"""Compute time per layer and micro-batch on one GPU: GEMMs plus memory-bound work, floored by the host.

A GEMM of shape (M x K) times (K x N) runs as output tiles of
`gemm_tile_m x gemm_tile_n`, `sm_count` tiles at a time (one wave): its time is
waves x (one tile's 2 K tm tn flop) / (eta x peak / sm_count) + t0. Rounding M
and N up to the tile is tile quantisation, rounding the tiles up to whole waves
is wave quantisation (NVIDIA, "Matrix Multiplication Background User's Guide",
Deep Learning Performance docs, DU-09799-001, Sec. 3.1 and 3.2); a large
GEMM reaches eta of peak, a small or ragged one less. t0 is the GEMM kernel's
fixed GPU time (prologue, pipeline fill and drain). eta and t0 are the GPU
kind's two fitted constants (DESIGN.md, Calibration). The host launches the
kernels while the GPU runs earlier ones: a layer pass takes the larger of the
GPU's time and the host's launch floor (`costmodel.host`), not their sum.
Element-wise kernels (norms, dropout, activation, softmax without flash
attention, optimizer) are memory-bound: bytes / achieved HBM bandwidth, at
the bytes per element of the code that runs them (fused kernels or eager
PyTorch ops, `costmodel.elementwise`).

Sources: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1 (GEMM flop) and
Fig. 7 (throughput grows with micro-batch size); bytes per element follow the
tensors of Korthikanti et al. 2022 (arXiv 2205.05198) Table 2, read and
written once by each fused kernel; FlashAttention-2 (Dao 2023, arXiv
2307.08691) Sec. 3: backward does 2.5x the forward matmul work, causal
masking skips half of the blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import FULL, SELECTIVE, Candidates, FloatArray, tokens_per_microbatch
from planner.costmodel.elementwise import ElementwiseKernels, expanded_kv_width, kernels_for, rotated_width
from planner.costmodel.gemms import (
    Gemm,
    GemmRole,
    attention_core_flop,
    layer_gemms,
    logits_gemm,
    mtp_projection_gemm,
    up_projection_gemms,
)
from planner.costmodel.host import expert_gemm_concurrency, layer_host_s
from planner.costmodel.mamba import mixer_time_s
from planner.costmodel.recompute import selective_modules, separate_norms_per_layer
from planner.numerics import HALF_BYTES, NVFP4_BYTES, Numerics
from planner.profiles import Hardware
from planner.specs import AttentionKernel, ModelSpec, RecomputeModule, RuntimeFeatures

__all__ = [
    "LayerTimes",
    "quantize_s",
    "gemm_time_s",
    "layer_times",
    "logits_time_s",
    "mtp_projection_time_s",
    "optimizer_step_time_s",
    "tensor_core_time_s",
]

SCORE_BYTES_PER_ELEMENT = 13
"""Forward bytes per attention-score element without flash attention: QK^T writes 2, fused
softmax reads and writes 4, dropout reads, writes and masks 5, AV reads 2. Korthikanti Table 2."""
LOGIT_FORWARD_BYTES_PER_ELEMENT = 38
"""HBM bytes per logit in the forward of Megatron's unfused vocab-parallel cross-entropy, one kernel per
op: cast to fp32 (read 2, write 4), max (read 4), subtract the max in place (read 4, write 4), exp in
place (4 + 4), sum (read 4), divide by the sum in place (4 + 4). Source: Megatron-LM
megatron/core/tensor_parallel/cross_entropy.py (`VocabParallelCrossEntropy.calculate_logits_max`,
`calculate_predicted_logits`, `calculate_cross_entropy_loss`; commit f2e5db40, July 2024; the 2021
`mpu/cross_entropy.py` runs the same ops on `output.float()`)."""
LOGIT_BACKWARD_BYTES_PER_ELEMENT = 14
"""HBM bytes per logit in that loss's backward: the saved softmax times the output gradient in place
(read 4, write 4), then the fp32 gradient cast back to the logits' 16-bit dtype (read 4, write 2).
Source: as `LOGIT_FORWARD_BYTES_PER_ELEMENT` (`calculate_gradients`)."""
BACKWARD_BYTES_FACTOR = 2
"""Backward of an element-wise op reads the saved input and the output gradient and writes one."""
FP8_CAST_BYTES_PER_ELEMENT = 4
"""HBM bytes per element of Transformer Engine's fused cast-transpose ahead of an fp8 GEMM: read the
bf16 tensor (2), write it in fp8 (1) and its fp8 transpose (1) for the backward GEMM that needs it;
the amax of the tensor is reduced in the same pass (TE `transformer_engine/common/transpose/cast_transpose.cu`;
TE user guide, "Using FP8 with Transformer Engine": per-tensor scales from an amax history)."""
NVFP4_CAST_BYTES_PER_ELEMENT = HALF_BYTES + HALF_BYTES + 2 * NVFP4_BYTES
"""HBM bytes per element of Transformer Engine's quantization ahead of an NVFP4 GEMM (5.125): an amax pass reads
the bf16 tensor (2; the per-tensor amax that sets the fp32 second-level scale, and with the random Hadamard
transform the transformed tensor's amax too, `nvte_hadamard_transform_amax` / `nvte_compute_amax`), then one
fused kernel reads it again (2) and writes the row-wise NVFP4 copy and the column-wise one, Hadamard-transformed
for the weight-gradient GEMM (`nvte_quantize_with_hadamard_transform`), each `NVFP4_BYTES` per element. Source:
TE `transformer_engine/pytorch/csrc/quantizer.cpp` `NVFP4Quantizer::quantize_impl` (commit d0067d0); the
recipe (`common/recipe/__init__.py` `NVFP4BlockScaling`) computes both copies "from the high precision input".
The stochastic rounding of gradients and the 16 x 16 transform ride in the same passes."""
PERMUTE_BYTES_PER_COPY = 6
"""Forward HBM bytes per element of each routed copy of a token (top_k of them, h wide) in an MoE layer's
token permutation: the dispatch-side permute reads the token's row and writes the copy in expert order (2 + 2),
the combine-side unpermute reads the copy back (2) and sums the weighted copies into one row. Source:
Megatron-Core `megatron/core/transformer/moe/moe_utils.py` `permute` (`tokens.index_select(0,
sorted_indices)`, or Transformer Engine's `fused_permute` with `--moe-permute-fusion`) and `unpermute`
(`fused_unpermute`, or a multiply by the routing probabilities and a `scatter_add_`)."""
PERMUTE_BYTES_PER_TOKEN = 2
"""Forward HBM bytes per element of a token's combined output row (the unpermute's write), h wide; see
`PERMUTE_BYTES_PER_COPY`."""
FLASH_BACKWARD_FACTOR = 2.5
"""FlashAttention-2 backward: 5 matmuls against 2 in forward (Dao 2023 Sec. 3.1)."""


def tensor_core_time_s(flop: FloatArray | float, hw: Hardware, fp8_eligible: bool = True) -> FloatArray:
    """Seconds for one tensor-core kernel of `flop` (tiles included): flop / (eta * peak) + t0; zero costs nothing.

    The fused attention core calls it directly: its tiles (query blocks x
    sequences x heads) fill many waves, so quantisation is left out there.
    `fp8_eligible` False: a GEMM Transformer Engine keeps in bf16 (attention core, output layer,
    router), at the bf16 peak under an FP8 run (`Hardware.gemm_peak_flop_per_s`).
    """
    w = np.asarray(flop, dtype=np.float64)
    peak = hw.gemm_peak_flop_per_s(fp8_eligible)
    return np.where(w > 0, w / (hw.gemm_peak_efficiency * peak) + hw.gemm_overhead_s, 0.0)


def gemm_time_s(
    m: FloatArray | float,
    n: FloatArray | float,
    k: FloatArray | float,
    hw: Hardware,
    batch: FloatArray | float = 1.0,
    fp8_eligible: bool = True,
) -> FloatArray:
    """Seconds for `batch` (m x k) @ (k x n) GEMMs in one kernel, tile- and wave-quantised (module docstring).

    Source: NVIDIA "Matrix Multiplication Background User's Guide" Sec. 3.1
    (tiles = ceil(m / tile_m) x ceil(n / tile_n)) and Sec. 3.2 (waves =
    ceil(tiles / SMs)). Fractional m or n (tokens per expert, widths over tp)
    round up like whole ones.
    """
    tiles = np.ceil(np.asarray(m, dtype=np.float64) / hw.gemm_tile_m) * np.ceil(np.asarray(n) / hw.gemm_tile_n)
    tiles = tiles * np.ceil(np.asarray(batch, dtype=np.float64))
    waves = np.ceil(tiles / hw.sm_count)
    flop = waves * hw.sm_count * 2.0 * hw.gemm_tile_m * hw.gemm_tile_n * np.asarray(k)
    return tensor_core_time_s(flop, hw, fp8_eligible)


@dataclass(frozen=True, slots=True)
class LayerTimes:
    """Seconds for one average layer and one micro-batch on one GPU (TP communication excluded).

    `experts_forward_s` is the routed experts' GEMMs of one MoE layer (zero for a dense model) and
    `moe_rest_forward_s` the rest of that layer's forward; `moe_rest_backward_s` that rest's backward with what
    selective recompute reruns there. They are the windows the MoE all-to-all overlap hides its dispatch and
    combine behind (`costmodel.expert_dispatch`): what Megatron-Core splits into the expert MLP and the
    pre-dispatch computation (attention, router and shared experts; `fine_grained_callables.py`).
    """

    forward_s: FloatArray
    backward_s: FloatArray
    recompute_s: FloatArray
    experts_forward_s: FloatArray | float = 0.0
    moe_rest_forward_s: FloatArray | float = 0.0
    moe_rest_backward_s: FloatArray | float = 0.0


def _gemm_role_seconds(
    model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures
) -> dict[GemmRole, tuple[FloatArray, float]]:
    """Per GEMM role, (forward seconds of the role's kernels in one layer holding it, share of the layers that
    hold it) on one GPU.

    Each GEMM runs on this GPU's tokens, its flop split by tp unless replicated
    (the router). A GPU runs one GEMM per shared expert, and its `num_experts / ep`
    routed experts, split over etp, on their share of the tokens (`_local_gemm`, balanced
    routing), per weight as `rt.expert_gemm` runs them (`expert_gemm_concurrency`): TE's GroupedLinear
    (Megatron-Core `--moe-grouped-gemm`, `TEGroupedMLP`, which every planned Megatron launch sets except fp16
    under core_v0.15.0, whose sequential experts cost the same) as one GEMM per expert after another, each
    with its own waves and fixed time (measured so; `expert_gemm_concurrency` cites the measurements); a grouped
    kernel (TorchTitan's `torch._grouped_mm`) as one kernel whose tiles are every local expert's, so waves fill
    across experts and the fixed time is paid once.
    """
    out: dict[GemmRole, tuple[FloatArray, float]] = {}
    for g in layer_gemms(model):
        rows, instances, k, n = _local_gemm(model, c, g)
        together = expert_gemm_concurrency(instances, rt) if g.is_expert else 1.0  # other copies: a kernel each
        part = gemm_time_s(rows, n, k, hw, together, fp8_eligible=g.fp8) * (instances / together)
        seconds, _ = out.get(g.role, (0.0, g.layer_share))
        out[g.role] = (np.asarray(seconds + part, dtype=np.float64), g.layer_share)
    return out


def _average_layer_gemm_s(roles: dict[GemmRole, tuple[FloatArray, float]]) -> FloatArray:
    """Forward seconds of the average layer's weight GEMMs: each role's seconds weighted by the share of layers
    holding it."""
    return np.asarray(sum(share * seconds for seconds, share in roles.values()), dtype=np.float64)


def _gemm_set_time_s(model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures) -> FloatArray:
    """Forward seconds of the average layer's weight GEMMs (`gemms.layer_gemms`) on one GPU."""
    return _average_layer_gemm_s(_gemm_role_seconds(model, c, hw, rt))


def _moe_layer_gemm_s(
    model: ModelSpec, roles: dict[GemmRole, tuple[FloatArray, float]]
) -> tuple[FloatArray | float, FloatArray]:
    """(routed experts' forward GEMM seconds, the other GEMMs' forward seconds) of one MoE layer: the router and
    shared experts at full weight, and in a transformer its attention block too; a hybrid's E layer holds the MoE
    block alone (`ModelSpec.hybrid_pattern`)."""
    experts = roles[GemmRole.ROUTED_EXPERT][0] if GemmRole.ROUTED_EXPERT in roles else 0.0
    held = _MOE_BLOCK_ROLES if model.hybrid_pattern is not None else _MOE_BLOCK_ROLES + _ATTENTION_ROLES
    rest = sum(seconds for role, (seconds, _) in roles.items() if role in held)
    return experts, np.asarray(rest, dtype=np.float64)


_MOE_BLOCK_ROLES = (GemmRole.SHARED_EXPERT, GemmRole.ROUTER)
"""The GEMMs of an MoE block besides its routed experts."""
_ATTENTION_ROLES = (GemmRole.ATTENTION, GemmRole.LATENT)
"""The attention block's GEMMs."""


def _local_gemm(
    model: ModelSpec, c: Candidates, g: Gemm
) -> tuple[FloatArray, FloatArray | float, FloatArray, FloatArray]:
    """(token rows of one instance, instances on one GPU, local k, local n) of a layer GEMM.

    A GEMM outside the routed experts runs on this GPU's tokens once per copy, its weight split over tp
    (`Gemm.local_shape`); MLA's replicated down-projections on the rank's tokens / tp under sequence parallelism
    (Megatron-Core `MLASelfAttention._qkv_down_projection` runs them before the latents are gathered).
    A routed expert's weight is split over etp; the etp x ep ranks that hold one copy
    of every expert serve the tokens of etp x ep / tp tensor-parallel groups, so each of the
    `num_experts / ep` experts on a GPU sees `tokens * top_k * ep * etp / (tp * num_experts)` rows
    (balanced routing; `tokens * top_k * ep / num_experts` when etp = tp). Source: Megatron-Core MoE
    parallel folding (Liu et al. 2025, arXiv 2504.14960, Sec. 3: the MoE layers' own etp x ep x edp grid
    over the attention's tp x cp x dp ranks).
    """
    tokens = tokens_per_microbatch(model, c)
    if g.role is GemmRole.LATENT:  # replicated weight, this rank's sequence shard under SP
        k, n = g.local_shape(c.tp.astype(np.float64))
        return tokens / np.where(c.sequence_parallel, c.tp, 1), float(g.copies_per_token), k, n
    if not g.is_expert:
        k, n = g.local_shape(c.tp.astype(np.float64))
        return tokens, float(g.copies_per_token), k, n
    assert model.moe is not None
    experts = model.moe.num_experts
    k, n = g.local_shape(c.etp.astype(np.float64))
    return tokens * g.copies_per_token * c.ep * c.etp / (c.tp * experts), experts / c.ep, k, n


def quantize_s(model: ModelSpec, c: Candidates, hw: Hardware) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the cast kernels ahead of the layer's quantized GEMMs, one GPU, one
    micro-batch: `FP8_CAST_BYTES_PER_ELEMENT` (fp8) or `NVFP4_CAST_BYTES_PER_ELEMENT` (nvfp4) per element of
    each GEMM's input (forward) and output gradient (backward), over HBM. Zero unless the run is quantized.

    Per GPU a column-parallel GEMM reads its whole input and writes n/tp outputs; a row-parallel
    one reads k/tp and writes n (Megatron, Narayanan 2021 Sec. 2.3). Not counted: the once-per-step
    cast of the weights (cached across micro-batches, Megatron-Core `is_first_microbatch`) and the
    delayed-scaling amax-history update (kilobytes per GEMM).
    """
    if not hw.quantized:
        zero = np.zeros(c.shape, dtype=np.float64)
        return zero, zero
    inputs: FloatArray | float = 0.0
    grads: FloatArray | float = 0.0
    for g in layer_gemms(model):
        if not g.fp8:
            continue
        rows, instances, k, n = _local_gemm(model, c, g)
        inputs = inputs + g.layer_share * instances * rows * k
        grads = grads + g.layer_share * instances * rows * n
    cast_bytes = NVFP4_CAST_BYTES_PER_ELEMENT if hw.nvfp4 else FP8_CAST_BYTES_PER_ELEMENT
    per_element_s = cast_bytes / hw.hbm_bandwidth_bytes_per_s
    return np.asarray(per_element_s * inputs, dtype=np.float64), np.asarray(per_element_s * grads, dtype=np.float64)


def _fused_attention_s(flop: FloatArray, hw: Hardware, kernel: AttentionKernel) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of a fused (flash) attention core of `flop` forward flop on one GPU.

    At `kernel`'s published throughput where the profile gives it (`Hardware.attention_flop_per_s`: cuDNN,
    FlashAttention-2, FlashAttention v1; the online-softmax kernel runs below the GEMM rate, its exponentials
    and rescaling between two matmuls; FlashAttention-3, Shah et al. 2024, arXiv 2407.08608, Sec. 3 and
    Figs. 5-6, which measures cuDNN and FlashAttention-2), else like a GEMM at the bf16 peak
    (`tensor_core_time_s`). Backward does `FLASH_BACKWARD_FACTOR` times the flop.
    """
    backward_flop = FLASH_BACKWARD_FACTOR * flop
    rates = hw.attention_flop_per_s(kernel)
    if rates is None:
        return tensor_core_time_s(flop, hw, False), tensor_core_time_s(backward_flop, hw, False)
    forward_rate, backward_rate = rates
    forward = np.asarray(flop / forward_rate, dtype=np.float64)
    return forward, np.asarray(backward_flop / backward_rate, dtype=np.float64)


def _attention_core_s(
    model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the average layer's attention core for one micro-batch on one GPU (in a
    hybrid, its attention layers' share).

    In bf16 under an FP8 run: Transformer Engine's fused attention runs in bf16 unless
    `NVTE_FP8_DPA` / `fp8_dot_product_attention` is set (TE `DotProductAttention`; Megatron-Core
    `TransformerConfig.fp8_dot_product_attention` defaults to False).

    Without flash attention the core is two batched GEMMs per (sequence, head)
    on this GPU (Korthikanti 2022 Sec. 4.1): QK^T, (s/cp x d_qk) @ (d_qk x s), and
    AV, (s/cp x s) @ (s x d_v), d_qk and d_v the head widths (`ModelSpec.query_key_head_dim`,
    `head_dim`); both tile-quantised
    (`gemm_time_s`): a head width that is not a multiple of the tile leaves
    part of each AV tile idle.
    """
    flop = attention_core_flop(model, c.micro_batch_size) / (c.tp * c.cp)
    if rt.flash_attention:  # causal blocks only (`gemms.attention_core_flop`)
        return _fused_attention_s(flop, hw, rt.attention_kernel)
    scores = model.num_attention_heads * model.seq_length * tokens_per_microbatch(model, c) / c.tp
    memory = SCORE_BYTES_PER_ELEMENT * scores / hw.hbm_bandwidth_bytes_per_s
    queries, heads = model.seq_length / c.cp, c.micro_batch_size * model.num_attention_heads / c.tp
    d_qk, d_v, s = model.query_key_head_dim, model.head_dim, model.seq_length
    qk = gemm_time_s(queries, s, d_qk, hw, heads, fp8_eligible=False)
    av = gemm_time_s(queries, d_v, s, hw, heads, fp8_eligible=False)
    share = model.attention_layer_share  # the fused path's flop carries it (`gemms.attention_core_fraction`)
    fwd = share * (qk + av + memory)
    return fwd, 2 * (fwd - share * memory) + BACKWARD_BYTES_FACTOR * share * memory


@dataclass(frozen=True, slots=True)
class _ElementwiseBytes:
    """Forward HBM bytes of the average layer's memory-bound kernels outside attention, one GPU and micro-batch,
    by part, each weighted by the share of layers holding it (`_elementwise_bytes`)."""

    residual: FloatArray
    dense_activation: FloatArray | float
    routed_activation: FloatArray | float
    shared_activation: FloatArray | float
    permute: FloatArray | float
    attention: FloatArray

    @property
    def total(self) -> FloatArray:
        mlp = self.dense_activation + self.routed_activation + self.shared_activation + self.permute
        return np.asarray(self.residual + mlp + self.attention, dtype=np.float64)


def _elementwise_bytes(model: ModelSpec, c: Candidates, rt: RuntimeFeatures) -> _ElementwiseBytes:
    """Forward bytes of the memory-bound kernels outside attention, at the byte table of the code `rt` describes
    (`costmodel.elementwise`): the residual path (each block's norm and residual add, on the rank's sequence shard
    under SP), the MLP activation (and, in an MoE layer, the routed and shared experts' activations and the token
    permutation, `PERMUTE_BYTES_PER_COPY`), the attention's own (`_attention_elementwise_bytes`)."""
    kernels = kernels_for(rt)
    h = model.hidden_size
    tokens = tokens_per_microbatch(model, c)
    residual_split = np.where(c.sequence_parallel, c.tp, 1)
    # A transformer layer has two blocks (attention, MLP); a hybrid's layer holds one (`blocks_per_layer`).
    residual = model.blocks_per_layer * (kernels.norm + kernels.residual_add) * tokens * h / residual_split
    activation = kernels.gated_activation if model.gated_mlp else kernels.plain_activation
    per_width = activation * tokens / c.tp  # activation bytes per unit of MLP width
    dense = model.dense_mlp_share * model.ffn_hidden_size * per_width
    routed: FloatArray | float = 0.0
    shared: FloatArray | float = 0.0
    permute: FloatArray | float = 0.0
    if model.moe is not None:
        share, ffn = model.moe_layer_share, model.moe.expert_ffn_hidden_size
        routed = share * model.moe.top_k * ffn * per_width
        shared = share * model.moe.num_shared_experts * ffn * per_width
        # The permuted copies are whole rows (h wide) on each of an expert's etp ranks (`_local_gemm`).
        copies = PERMUTE_BYTES_PER_COPY * model.moe.top_k + PERMUTE_BYTES_PER_TOKEN
        permute = share * copies * h * c.etp * tokens / c.tp
    attention = model.attention_layer_share * _attention_elementwise_bytes(model, c, kernels) * tokens
    return _ElementwiseBytes(residual, dense, routed, shared, permute, np.asarray(attention, dtype=np.float64))


def _elementwise_forward_s(model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures) -> FloatArray:
    """Forward seconds of the memory-bound kernels outside attention (`_elementwise_bytes`) over HBM."""
    return _elementwise_bytes(model, c, rt).total / hw.hbm_bandwidth_bytes_per_s


def _attention_elementwise_bytes(model: ModelSpec, c: Candidates, kernels: ElementwiseKernels) -> FloatArray:
    """Forward HBM bytes per token of the attention's memory-bound kernels (`kernels`' bytes per element): RoPE
    reads and writes the rotated widths (Q and K; under MLA their RoPE parts, heads x qk_pos_emb_head_dim and the
    one shared key part), the query and key norms read and write Q and K (`ModelSpec.qk_norm_width`; Megatron-Core
    `SelfAttention` `q_layernorm` / `k_layernorm`, one TE norm kernel each), and MLA's two latent RMSNorms read and
    write the latents (Megatron-Core `MLASelfAttention` `q_layernorm`, `kv_layernorm`), on the rank's sequence shard
    under SP like the down-projections. Eager code with grouped-query attention also copies the keys and values out
    to every query head (`ElementwiseKernels.expands_grouped_kv`)."""
    mla = model.mla
    if mla is None:
        rotated = kernels.rotary * rotated_width(model)
        expanded = expanded_kv_width(model, kernels)
        # The copy reads K and V (2 kv) and writes them q wide (2 q = expanded + 2 kv).
        copies = HALF_BYTES * (expanded + 4 * model.kv_hidden_size) if expanded else 0
        return np.asarray((rotated + kernels.norm * model.qk_norm_width + copies) / c.tp, dtype=np.float64)
    rope = kernels.rotary * mla.qk_pos_emb_head_dim * (model.num_attention_heads / c.tp + 1)
    latents = kernels.norm * ((mla.q_lora_rank or 0) + mla.kv_lora_rank) / np.where(c.sequence_parallel, c.tp, 1)
    return np.asarray(rope + latents, dtype=np.float64)


def layer_times(model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures) -> LayerTimes:
    """Forward, backward and recompute seconds of one average layer and micro-batch on one GPU.

    Each pass takes max(GPU time, host launch floor) (`costmodel.host`): the
    host enqueues kernels while the GPU runs, so the two overlap. The floor
    is compared with compute only (TP/CP/EP communication is added by the
    caller). Selective recomputation reruns the forward of the modules it covers (`_selective_rerun_s`).
    """
    roles = _gemm_role_seconds(model, c, hw, rt)
    gemm_fwd = _average_layer_gemm_s(roles)
    attention_fwd, core_bwd = _attention_core_s(model, c, hw, rt)
    core_fwd = attention_fwd
    if model.num_mamba_layers:  # the Mamba mixers' convolution, scan and norm, in their share of the layers
        mixer_fwd, mixer_bwd = mixer_time_s(model, c, hw)
        core_fwd = core_fwd + model.mamba_layer_share * mixer_fwd
        core_bwd = core_bwd + model.mamba_layer_share * mixer_bwd
    elementwise = _elementwise_bytes(model, c, rt)
    elementwise_fwd = elementwise.total / hw.hbm_bandwidth_bytes_per_s
    cast_fwd, cast_bwd = quantize_s(model, c, hw)
    host = layer_host_s(model, c, rt)
    forward = np.maximum(gemm_fwd + core_fwd + elementwise_fwd + cast_fwd, host.forward)
    backward = np.maximum(2 * gemm_fwd + core_bwd + BACKWARD_BYTES_FACTOR * elementwise_fwd + cast_bwd, host.backward)
    selective = _selective_rerun_s(model, c, hw, rt, roles, attention_fwd, elementwise)
    recompute = np.where(c.recompute == FULL, forward, np.where(c.recompute == SELECTIVE, selective, 0.0))
    if model.moe is None:
        return LayerTimes(forward, backward, recompute)
    experts, rest = _moe_layer_gemm_s(model, roles)
    if model.hybrid_pattern is not None:  # a hybrid's E layer: no attention or mixer beside its experts
        core_fwd = core_bwd = np.zeros_like(core_fwd)
    rest_forward = rest + core_fwd + elementwise_fwd + cast_fwd
    rest_backward = 2 * rest + core_bwd + BACKWARD_BYTES_FACTOR * elementwise_fwd + cast_bwd + recompute
    return LayerTimes(forward, backward, recompute, experts, rest_forward, rest_backward)


def _selective_rerun_s(
    model: ModelSpec,
    c: Candidates,
    hw: Hardware,
    rt: RuntimeFeatures,
    roles: dict[GemmRole, tuple[FloatArray, float]],
    attention_fwd: FloatArray,
    parts: _ElementwiseBytes,
) -> FloatArray:
    """Forward seconds selective recompute reruns in the average layer, one GPU and micro-batch: the forward of
    each module it covers (`recompute.selective_modules`; GPU-bound, the host's launches not floored).

    core_attn: the attention core. mla_up_proj: MLA's up-projections and RoPE (`_up_projection_s`). layernorm: each
    norm that is a module of its own (`recompute` docstring), at `rt`'s bytes per norm element. mlp: the dense MLP's
    GEMMs, activation and fused norm. moe: the MoE layer's router, expert and shared-expert GEMMs, activations and
    token permutation (its all-to-alls are the caller's, `shared.layer_quantities`). moe_act: the routed experts'
    activation. shared_experts: the shared experts' GEMMs and activation.
    """

    reruns = selective_modules(model, rt)

    def gemms(*held: GemmRole) -> FloatArray | float:
        return sum(share * seconds for role, (seconds, share) in roles.items() if role in held)

    tokens = tokens_per_microbatch(model, c)
    norm = kernels_for(rt).norm * model.hidden_size * tokens / np.where(c.sequence_parallel, c.tp, 1)
    seconds: FloatArray | float = np.zeros(c.shape, dtype=np.float64)
    memory: FloatArray | float = 0.0
    if RecomputeModule.CORE_ATTN in reruns:
        seconds = seconds + attention_fwd
    if RecomputeModule.MLA_UP_PROJ in reruns:
        seconds = seconds + _up_projection_s(model, c, hw, rt)
    if RecomputeModule.LAYERNORM in reruns:
        memory = memory + separate_norms_per_layer(model) * norm
    if RecomputeModule.MLP in reruns:
        seconds = seconds + gemms(GemmRole.DENSE_MLP)
        memory = memory + parts.dense_activation + model.dense_mlp_share * norm
    if RecomputeModule.MOE in reruns:
        seconds = seconds + gemms(GemmRole.ROUTER, GemmRole.ROUTED_EXPERT, GemmRole.SHARED_EXPERT)
        memory = memory + parts.routed_activation + parts.shared_activation + parts.permute
    else:
        if RecomputeModule.MOE_ACT in reruns:
            memory = memory + parts.routed_activation
        if RecomputeModule.SHARED_EXPERTS in reruns:
            seconds = seconds + gemms(GemmRole.SHARED_EXPERT)
            memory = memory + parts.shared_activation
    return np.asarray(seconds + memory / hw.hbm_bandwidth_bytes_per_s, dtype=np.float64)


def _up_projection_s(model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures) -> FloatArray | float:
    """Forward seconds of MLA's up-projection GEMMs and its RoPE, what mla_up_proj recompute reruns
    (`_attention_elementwise_bytes` counts the latent norms too, which this slightly over-prices); zero without
    MLA."""
    if model.mla is None:
        return 0.0
    gemms = sum(gemm_time_s(*_gemm_rows_n_k(model, c, g), hw, fp8_eligible=g.fp8) for g in up_projection_gemms(model))
    tokens = tokens_per_microbatch(model, c)
    return gemms + _attention_elementwise_bytes(model, c, kernels_for(rt)) * tokens / hw.hbm_bandwidth_bytes_per_s


def _gemm_rows_n_k(model: ModelSpec, c: Candidates, g: Gemm) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(rows, n, k) of one instance of a non-expert layer GEMM on one GPU, `gemm_time_s`'s order."""
    rows, _, k, n = _local_gemm(model, c, g)
    return rows, n, k


def logits_time_s(model: ModelSpec, c: Candidates, hw: Hardware) -> FloatArray:
    """Forward + backward seconds of the output layer (three GEMMs) and Megatron's fp32 vocab-parallel
    cross-entropy (memory-bound, `LOGIT_FORWARD_BYTES_PER_ELEMENT` + `LOGIT_BACKWARD_BYTES_PER_ELEMENT`
    per logit on this GPU's vocabulary shard) on the last stage."""
    tokens = tokens_per_microbatch(model, c)
    k, n = logits_gemm(model).local_shape(c.tp)
    gemm = gemm_time_s(tokens, n, k, hw, fp8_eligible=False)  # bf16 under FP8 (not a TE fp8 layer)
    logits = tokens * model.vocab_size / c.tp
    loss_bytes = (LOGIT_FORWARD_BYTES_PER_ELEMENT + LOGIT_BACKWARD_BYTES_PER_ELEMENT) * logits
    return 3 * gemm + loss_bytes / hw.hbm_bandwidth_bytes_per_s


def mtp_projection_time_s(model: ModelSpec, c: Candidates, hw: Hardware) -> FloatArray:
    """Forward + backward seconds of one MTP module's eh_proj (`gemms.mtp_projection_gemm`, three GEMMs like the
    output layer's) on the last stage."""
    k, n = mtp_projection_gemm(model).local_shape(c.tp)
    return np.asarray(3 * gemm_time_s(tokens_per_microbatch(model, c), n, k, hw, fp8_eligible=False), dtype=np.float64)


def optimizer_step_time_s(params_local: FloatArray, hw: Hardware, num: Numerics) -> FloatArray:
    """Seconds of one optimizer step over the parameters this GPU updates (memory-bound):
    `Numerics.optimizer_step_hbm_bytes` (42 for Megatron's Adam step) per parameter."""
    return num.optimizer_step_hbm_bytes * params_local / hw.hbm_bandwidth_bytes_per_s
