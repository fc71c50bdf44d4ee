"""The host's floor under a layer pass: kernels launched times the host's cost per kernel.

The CPU enqueues a layer's kernels while the GPU runs earlier ones, so host
and GPU time overlap: a pass takes max(GPU work, kernels x host cost per
kernel), never their sum. Small layers (small hidden / tp, micro-batch 1) hit
the floor; large ones never see it.

A hybrid's layer holds one block (attention, Mamba mixer, MLP or MoE) behind one norm and residual and
ending in one TP collective; its Mamba mixers launch `mamba.MIXER_FORWARD_KERNELS` (backward
`MIXER_BACKWARD_KERNELS`) besides their two projections.

Kernels per forward pass of one layer are counted from its structure
(Megatron-LM `ParallelTransformerLayer`; Narayanan et al. 2021, arXiv
2104.04473, Sec. 2.3 and Fig. 5: two layer norms, the QKV, projection, fc1 and
fc2 GEMMs, the attention core, the activation, two dropout-add residuals, and
with tp > 1 two all-reduces). The 2021 eager runtime launches the unfused
attention core as five kernels (QK^T `baddbmm`, fused scale-mask-softmax,
dropout, AV `bmm`, the context's permute copy; Korthikanti et al. 2022, arXiv
2205.05198, Sec. 4.1 and Table 2) and a separate bias-GeLU; Transformer Engine
(`LayerNormLinear`, `LayerNormMLP`, `DotProductAttention`) fuses the attention
core into one kernel and the bias-GeLU into the GEMM epilogue. Eager model code
(`RuntimeFeatures.eager_elementwise`) launches one kernel per PyTorch op: its norms,
RoPE, gated activation and grouped-KV copy launch what `costmodel.elementwise.EAGER`
counts (a norm 8, RoPE 8), the table that also prices their bytes. Backward runs
two GEMMs per forward GEMM (input and weight gradients) and one kernel per
other op; the 2021 runtime adds one fp32 `main_grad` accumulation per weight
(gradient-accumulation fusion came later, Megatron-LM
`--gradient-accumulation-fusion`).

Host cost per kernel (stated assumptions, not fitted, not measured here):
eager PyTorch 20 us (Python module call, dispatcher, autograd recording and
`cudaLaunchKernel`, order 10-20 us per op: Horace He, "Making Deep Learning Go
Brrrr From First Principles", horace.io/brrr_intro.html, Sec. "Overhead";
PyTorch blog "Accelerating PyTorch with CUDA Graphs", 2021); Transformer
Engine's C++ modules 10 us; a CUDA-graph replay 1 us per kernel node (NVIDIA
blog "Getting Started with CUDA Graphs", 2019: a 2.9 us kernel takes 3.8 us
launched back to back from a stream, 3.4 us from a graph).

An MoE layer adds its expert section: the fused token permutation, the
dispatch and combine collectives and the fused unpermutation
(`MOE_DISPATCH_KERNELS`; Megatron-Core `MoEAlltoAllTokenDispatcher` /
`MoEFlexTokenDispatcher` with `--moe-permute-fusion`), and the routed experts'
GEMMs as `RuntimeFeatures.expert_gemm` launches them: Transformer Engine's
GroupedLinear issues one cuBLAS GEMM per local expert (`ExpertGemm`), a
grouped kernel one for all. CUDA graphs in an MoE model cover the dense
modules only: a dropless router makes the expert section's shapes change
every step, so NVIDIA's MoE recipes capture `attn`, `moe_router` and
`moe_preprocess` with Transformer Engine's graphs and run the rest eagerly
(Megatron-Bridge `docs/performance-guide.md`, "Lowering Host Overhead and
Jitters": "MoE models with token-dropless propagation have limited CUDA graph
support, restricted to the dense modules only"; `perf_recipes/qwen/*/qwen3_moe.py`
and `perf_recipes/deepseek/*`: `cuda_graph_scope = ["attn", "moe_router",
"moe_preprocess"]`), so the expert section's kernels cost the host what they
cost without graphs (`CudaGraphScope.MODULES`); a full-iteration graph
(`CudaGraphScope.FULL_ITERATION`) replays them too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray
from planner.costmodel.elementwise import kernels_for, kv_copy_launches
from planner.costmodel.gemms import layer_gemms
from planner.costmodel.mamba import MIXER_BACKWARD_KERNELS, MIXER_FORWARD_KERNELS
from planner.specs import CudaGraphScope, ExpertGemm, ModelSpec, RuntimeFeatures
from planner.units import MICRO

__all__ = [
    "LayerHost",
    "LayerKernels",
    "expert_gemm_concurrency",
    "host_s_per_kernel",
    "layer_host_s",
    "layer_kernels",
]

EAGER_HOST_US_PER_KERNEL = 20.0
"""Eager PyTorch, one Python-level op per kernel (module docstring)."""
FUSED_HOST_US_PER_KERNEL = 10.0
"""Transformer Engine's C++ fused modules (module docstring)."""
GRAPH_HOST_US_PER_KERNEL = 1.0
"""A kernel node of a replayed CUDA graph (module docstring)."""

NORMS_PER_LAYER = 2
RESIDUALS_PER_LAYER = 2
"""Dropout-add after attention and after the MLP (one fused kernel each)."""
UNFUSED_ATTENTION_CORE_KERNELS = 5
FUSED_ATTENTION_CORE_KERNELS = 1
TP_COLLECTIVES_PER_LAYER = 2
"""Forward all-reduces (or reduce-scatter / all-gather pairs) of Megatron's f and g operators (Narayanan Sec. 2.3)."""
BLOCKS_PER_TRANSFORMER_LAYER = 2
"""Attention and MLP, each behind a norm and a residual and ending in a TP collective; a hybrid's layer holds one
block (`ModelSpec.blocks_per_layer`)."""
MOE_DISPATCH_KERNELS = 4
"""Forward kernels of an MoE layer's token movement: the fused permute, the dispatch collective, the combine
collective and the fused unpermute (module docstring); the backward runs one per each."""


@dataclass(frozen=True, slots=True)
class LayerKernels:
    """Kernels the host launches for one average layer and micro-batch, per candidate.

    `forward` / `backward` are the kernels a CUDA graph can capture; `expert_forward` / `expert_backward` those of
    the MoE expert section, which runs eagerly under CUDA graphs (module docstring); zero in a dense model.
    """

    forward: FloatArray
    backward: FloatArray
    expert_forward: FloatArray
    expert_backward: FloatArray


@dataclass(frozen=True, slots=True)
class LayerHost:
    """Host seconds to launch one average layer's forward and backward kernels for one micro-batch."""

    forward: FloatArray
    backward: FloatArray


def host_s_per_kernel(rt: RuntimeFeatures) -> float:
    """Seconds the host spends per kernel launched: CUDA graphs, else fused (TE), else eager (module docstring)."""
    if rt.cuda_graphs:
        return GRAPH_HOST_US_PER_KERNEL * MICRO
    return _launched_s_per_kernel(rt)


def _launched_s_per_kernel(rt: RuntimeFeatures) -> float:
    """Seconds per kernel launched from a stream, not replayed from a graph: fused (TE) or eager."""
    return (FUSED_HOST_US_PER_KERNEL if rt.fused_kernels else EAGER_HOST_US_PER_KERNEL) * MICRO


def expert_gemm_concurrency(local_experts: FloatArray | float, rt: RuntimeFeatures) -> FloatArray:
    """Local experts' GEMMs (of one weight) whose tiles share the SMs at once: all of them in one grouped kernel;
    one under Transformer Engine's per-expert GEMMs, which take as long as if they ran one after another, each
    with its own waves and fixed time.

    TE's GroupedLinear issues one cuBLAS GEMM per expert round-robin on 4 compute streams
    (`transformer_engine/common/gemm/cublaslt_gemm.cu` `multi_stream_cublas_gemm`), but measured the streams buy
    little: TE PR 3134 (2026, B200 NVFP4, `benchmarks/linear/benchmark_grouped_linear.py`, GEMMs alone) times 8
    experts x 128 tokens at N = K = 2048 at 0.267 ms on the multi-stream path, about 33 us per expert, where one
    grouped launch takes 0.069 ms. Megatron-Bridge's Qwen3.5-35B-A3B case study on 16 H100 BF16
    (`skills/nemo-mbridge-perf-moe-optimization-workflow/card.yaml`: hidden 2048, 256 experts of width 512 and a
    shared one, top 8, EP 16, 64 micro-batches of 4,096 tokens, 40 MoE layers) profiles 7.99 s of expert GEMMs
    per step with an experimental grouped kernel, and its native-TE expert path makes the step 10.8 s longer
    (33.2 s against 22.3 s); sharing the SMs 4 ways would price those GEMMs at 4.4 s, one at a time 9.8 s.
    (That grouped kernel ran near the one-at-a-time figure too, so `ExpertGemm.GROUPED`, one kernel filling its
    waves across experts, may be optimistic for experts this small; no published row checks it.) Against the
    published Qwen3 rows (`planner validate`), one at a time takes the H100 BF16 cards from +20% / +22% to
    +4% / +2%.
    """
    experts = np.asarray(local_experts, dtype=np.float64)
    return experts if rt.expert_gemm is ExpertGemm.GROUPED else np.ones_like(experts)


def _expert_gemm_launches(local_experts: FloatArray | float, rt: RuntimeFeatures) -> FloatArray:
    """Kernels launched for one weight of the local experts: one grouped kernel, or one GEMM per expert."""
    experts = np.asarray(local_experts, dtype=np.float64)
    return np.ones_like(experts) if rt.expert_gemm is ExpertGemm.GROUPED else experts


def layer_kernels(model: ModelSpec, c: Candidates, rt: RuntimeFeatures) -> LayerKernels:
    """Kernels per forward and backward pass of the average layer (module docstring)."""
    gemms = sum(g.layer_share for g in layer_gemms(model) if not g.is_expert)
    ew = kernels_for(rt)
    core = FUSED_ATTENTION_CORE_KERNELS if rt.flash_attention else UNFUSED_ATTENTION_CORE_KERNELS
    epilogue_gelu = rt.fused_kernels and not rt.eager_elementwise  # TE fuses a plain GeLU into its GEMM
    activation = ew.gated_activation_launches if model.gated_mlp else (0 if epilogue_gelu else 1)
    rope = 0 if model.learned_position_embeddings else ew.rotary_launches
    qk_norms = len(model.attention_norm_widths) * ew.norm_launches  # the attention's own norms
    attention = core + rope + qk_norms + kv_copy_launches(model, ew)
    blocks = model.blocks_per_layer / BLOCKS_PER_TRANSFORMER_LAYER  # 1 for a transformer, 1/2 for a hybrid
    residual = blocks * (NORMS_PER_LAYER * ew.norm_launches + RESIDUALS_PER_LAYER)
    mlp = model.dense_mlp_share + model.moe_layer_share
    mamba = model.mamba_layer_share
    forward_other = (
        residual + model.attention_layer_share * attention + mlp * activation + mamba * MIXER_FORWARD_KERNELS
    )
    backward_other = forward_other + mamba * (MIXER_BACKWARD_KERNELS - MIXER_FORWARD_KERNELS)
    comm = np.where(c.tp > 1, blocks * TP_COLLECTIVES_PER_LAYER, 0).astype(np.float64)
    accumulate = 0.0 if rt.fused_kernels else 1.0  # 2021: one main_grad accumulation per weight GEMM
    expert_forward = np.zeros(c.shape, dtype=np.float64)
    expert_backward = np.zeros(c.shape, dtype=np.float64)
    if model.moe is not None:
        share = model.moe_layer_share
        launches = sum(
            g.layer_share * _expert_gemm_launches(model.moe.num_experts / c.ep, rt)
            for g in layer_gemms(model)
            if g.is_expert
        )
        expert_forward = expert_forward + launches + share * MOE_DISPATCH_KERNELS
        expert_backward = expert_backward + (2 + accumulate) * launches + share * MOE_DISPATCH_KERNELS
    return LayerKernels(
        forward=gemms + forward_other + comm,
        backward=(2 + accumulate) * gemms + backward_other + comm,
        expert_forward=expert_forward,
        expert_backward=expert_backward,
    )


def layer_host_s(model: ModelSpec, c: Candidates, rt: RuntimeFeatures) -> LayerHost:
    """Host seconds per forward and backward pass of the average layer: the capturable kernels at
    `host_s_per_kernel`, the MoE expert section's at the launched rate unless a full-iteration graph replays it
    (module docstring)."""
    k = layer_kernels(model, c, rt)
    graphed = host_s_per_kernel(rt)
    launched = graphed if rt.cuda_graph_scope is CudaGraphScope.FULL_ITERATION else _launched_s_per_kernel(rt)
    return LayerHost(
        forward=np.asarray(k.forward * graphed + k.expert_forward * launched, dtype=np.float64),
        backward=np.asarray(k.backward * graphed + k.expert_backward * launched, dtype=np.float64),
    )
