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
attention, optimizer) are memory-bound: bytes / achieved HBM bandwidth.

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
from planner.costmodel.gemms import GemmRole, attention_core_flop, layer_gemms, logits_gemm
from planner.costmodel.host import host_s_per_kernel, layer_kernels
from planner.numerics import Numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, RuntimeFeatures

__all__ = [
    "LayerTimes",
    "gemm_time_s",
    "layer_times",
    "logits_time_s",
    "optimizer_step_time_s",
    "tensor_core_time_s",
]

RESIDUAL_PATH_BYTES_PER_ELEMENT = 22
"""Forward bytes per (token x hidden) outside the TP-split region: two norms (read 2 + write 2
each) and two bias-dropout-add (read 2 + 2, write 2, mask 1 each). Korthikanti 2022 Table 2."""
SCORE_BYTES_PER_ELEMENT = 13
"""Forward bytes per attention-score element without flash attention: QK^T writes 2, fused
softmax reads and writes 4, dropout reads, writes and masks 5, AV reads 2. Korthikanti Table 2."""
LOGIT_BYTES_PER_ELEMENT = 12
"""Forward bytes per logit in the fp32 cross-entropy: cast write 4, softmax read 4 and write 4."""
BACKWARD_BYTES_FACTOR = 2
"""Backward of an element-wise op reads the saved input and the output gradient and writes one."""
FLASH_BACKWARD_FACTOR = 2.5
"""FlashAttention-2 backward: 5 matmuls against 2 in forward (Dao 2023 Sec. 3.1)."""
CAUSAL_FRACTION = 0.5
"""Share of score blocks a causal fused kernel computes (Dao 2023 Sec. 3.1.1)."""


def tensor_core_time_s(flop: FloatArray | float, hw: Hardware) -> FloatArray:
    """Seconds for one tensor-core kernel of `flop` (tiles included): flop / (eta * peak) + t0; zero costs nothing.

    The fused attention core calls it directly: its tiles (query blocks x
    sequences x heads) fill many waves, so quantisation is left out there.
    """
    w = np.asarray(flop, dtype=np.float64)
    return np.where(w > 0, w / (hw.gemm_peak_efficiency * hw.peak_flop_per_s) + hw.gemm_overhead_s, 0.0)


def gemm_time_s(
    m: FloatArray | float,
    n: FloatArray | float,
    k: FloatArray | float,
    hw: Hardware,
    batch: FloatArray | float = 1.0,
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
    return tensor_core_time_s(waves * hw.sm_count * 2.0 * hw.gemm_tile_m * hw.gemm_tile_n * np.asarray(k), hw)


@dataclass(frozen=True, slots=True)
class LayerTimes:
    """Seconds for one average layer and one micro-batch on one GPU (TP communication excluded)."""

    forward_s: FloatArray
    backward_s: FloatArray
    recompute_s: FloatArray


def _gemm_set_time_s(model: ModelSpec, c: Candidates, hw: Hardware) -> FloatArray:
    """Forward seconds of the layer's weight GEMMs (`gemms.layer_gemms`) on one GPU.

    Each GEMM runs on this GPU's tokens, its flop split by tp unless replicated
    (the router). A GPU runs one GEMM per shared expert, and `num_experts / ep`
    routed experts on `tokens * top_k * ep / num_experts` tokens each (balanced
    routing). Each part of the layer is weighted by the share of layers holding it.
    """
    tp = c.tp.astype(np.float64)
    tokens = tokens_per_microbatch(model, c)
    seconds: dict[GemmRole, FloatArray | float] = {}
    weight: dict[GemmRole, FloatArray | float] = {}
    instances: FloatArray | float
    for g in layer_gemms(model):
        rows, instances = tokens, float(g.copies_per_token)
        if g.is_expert:
            assert model.moe is not None
            experts = model.moe.num_experts
            rows, instances = tokens * g.copies_per_token * c.ep / experts, experts / c.ep
        k, n = g.local_shape(tp)
        seconds[g.role] = seconds.get(g.role, 0.0) + gemm_time_s(rows, n, k, hw)
        weight[g.role] = g.layer_share * instances
    return np.asarray(sum(weight[role] * part for role, part in seconds.items()), dtype=np.float64)


def _attention_core_s(
    model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures
) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of the attention core for one micro-batch on one GPU.

    Without flash attention the core is two batched GEMMs per (sequence, head)
    on this GPU (Korthikanti 2022 Sec. 4.1): QK^T, (s/cp x d) @ (d x s), and
    AV, (s/cp x s) @ (s x d), d the head width; both tile-quantised
    (`gemm_time_s`): a head width that is not a multiple of the tile leaves
    part of each AV tile idle.
    """
    flop = attention_core_flop(model, c.micro_batch_size) / (c.tp * c.cp)
    if rt.flash_attention:
        fwd = tensor_core_time_s(CAUSAL_FRACTION * flop, hw)
        return fwd, tensor_core_time_s(CAUSAL_FRACTION * FLASH_BACKWARD_FACTOR * flop, hw)
    scores = model.num_attention_heads * model.seq_length * tokens_per_microbatch(model, c) / c.tp
    memory = SCORE_BYTES_PER_ELEMENT * scores / hw.hbm_bandwidth_bytes_per_s
    queries, heads = model.seq_length / c.cp, c.micro_batch_size * model.num_attention_heads / c.tp
    d, s = model.head_dim, model.seq_length
    fwd = gemm_time_s(queries, s, d, hw, heads) + gemm_time_s(queries, d, s, hw, heads) + memory
    return fwd, 2 * (fwd - memory) + BACKWARD_BYTES_FACTOR * memory


def _elementwise_forward_s(model: ModelSpec, c: Candidates, hw: Hardware) -> FloatArray:
    """Forward seconds of the memory-bound kernels outside attention."""
    h, kv = model.hidden_size, model.kv_hidden_size
    tokens = tokens_per_microbatch(model, c)
    residual_split = np.where(c.sequence_parallel, c.tp, 1)
    residual = RESIDUAL_PATH_BYTES_PER_ELEMENT * tokens * h / residual_split
    act_bytes = 6 if model.gated_mlp else 4
    ffn = model.ffn_hidden_size
    if model.moe is not None:
        share = model.num_moe_layers / model.num_layers
        routed = model.moe.top_k + model.moe.num_shared_experts
        ffn_moe = routed * model.moe.expert_ffn_hidden_size + 4 * model.moe.top_k * h
        ffn = int((1 - share) * ffn + share * ffn_moe)
    activation = act_bytes * tokens * ffn / c.tp
    rope = 0 if model.learned_position_embeddings else 4 * tokens * (h + kv) / c.tp
    return (residual + activation + rope) / hw.hbm_bandwidth_bytes_per_s


def layer_times(model: ModelSpec, c: Candidates, hw: Hardware, rt: RuntimeFeatures) -> LayerTimes:
    """Forward, backward and recompute seconds of one average layer and micro-batch on one GPU.

    Each pass takes max(GPU time, host launch floor) (`costmodel.host`): the
    host enqueues kernels while the GPU runs, so the two overlap. The floor
    is compared with compute only (TP/CP/EP communication is added by the
    caller). Selective recomputation reruns only the attention core (GPU-bound).
    """
    gemm_fwd = _gemm_set_time_s(model, c, hw)
    core_fwd, core_bwd = _attention_core_s(model, c, hw, rt)
    elementwise_fwd = _elementwise_forward_s(model, c, hw)
    kernels, per_kernel_s = layer_kernels(model, c, rt), host_s_per_kernel(rt)
    forward = np.maximum(gemm_fwd + core_fwd + elementwise_fwd, kernels.forward * per_kernel_s)
    backward = np.maximum(
        2 * gemm_fwd + core_bwd + BACKWARD_BYTES_FACTOR * elementwise_fwd, kernels.backward * per_kernel_s
    )
    recompute = np.where(c.recompute == FULL, forward, np.where(c.recompute == SELECTIVE, core_fwd, 0.0))
    return LayerTimes(forward, backward, recompute)


def logits_time_s(model: ModelSpec, c: Candidates, hw: Hardware) -> FloatArray:
    """Forward + backward seconds of the output layer and fp32 cross-entropy (last stage)."""
    tokens = tokens_per_microbatch(model, c)
    k, n = logits_gemm(model).local_shape(c.tp)
    gemm = gemm_time_s(tokens, n, k, hw)
    loss = LOGIT_BYTES_PER_ELEMENT * tokens * model.vocab_size / c.tp / hw.hbm_bandwidth_bytes_per_s
    return 3 * gemm + (1 + BACKWARD_BYTES_FACTOR) * loss


def optimizer_step_time_s(params_local: FloatArray, hw: Hardware, num: Numerics) -> FloatArray:
    """Seconds of one optimizer step over the parameters this GPU updates (memory-bound):
    `Numerics.optimizer_step_hbm_bytes` (42 for Megatron's Adam step) per parameter."""
    return num.optimizer_step_hbm_bytes * params_local / hw.hbm_bandwidth_bytes_per_s
