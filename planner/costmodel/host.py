"""The host's floor under a layer pass: kernels launched times the host's cost per kernel.

The CPU enqueues a layer's kernels while the GPU runs earlier ones, so host
and GPU time overlap: a pass takes max(GPU work, kernels x host cost per
kernel), never their sum. Small layers (small hidden / tp, micro-batch 1) hit
the floor; large ones never see it.

Kernels per forward pass of one layer are counted from its structure
(Megatron-LM `ParallelTransformerLayer`; Narayanan et al. 2021, arXiv
2104.04473, Sec. 2.3 and Fig. 5: two layer norms, the QKV, projection, fc1 and
fc2 GEMMs, the attention core, the activation, two dropout-add residuals, and
with tp > 1 two all-reduces). The 2021 eager runtime launches the unfused
attention core as five kernels (QK^T `baddbmm`, fused scale-mask-softmax,
dropout, AV `bmm`, the context's permute copy; Korthikanti et al. 2022, arXiv
2205.05198, Sec. 4.1 and Table 2) and a separate bias-GeLU; Transformer Engine
(`LayerNormLinear`, `LayerNormMLP`, `DotProductAttention`) fuses the attention
core into one kernel and the bias-GeLU into the GEMM epilogue. Backward runs
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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray
from planner.costmodel.gemms import layer_gemms
from planner.specs import ModelSpec, RuntimeFeatures
from planner.units import MICRO

__all__ = ["LayerKernels", "host_s_per_kernel", "layer_kernels"]

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


@dataclass(frozen=True, slots=True)
class LayerKernels:
    """Kernels the host launches for one layer and micro-batch, per candidate."""

    forward: FloatArray
    backward: FloatArray


def host_s_per_kernel(rt: RuntimeFeatures) -> float:
    """Seconds the host spends per kernel launched: CUDA graphs, else fused (TE), else eager (module docstring)."""
    if rt.cuda_graphs:
        return GRAPH_HOST_US_PER_KERNEL * MICRO
    return (FUSED_HOST_US_PER_KERNEL if rt.fused_kernels else EAGER_HOST_US_PER_KERNEL) * MICRO


def layer_kernels(model: ModelSpec, c: Candidates, rt: RuntimeFeatures) -> LayerKernels:
    """Kernels per forward and backward pass of the average layer (module docstring); MoE GEMMs as grouped GEMMs."""
    gemms = sum(g.layer_share for g in layer_gemms(model))
    core = FUSED_ATTENTION_CORE_KERNELS if rt.flash_attention else UNFUSED_ATTENTION_CORE_KERNELS
    activation = 1 if (model.gated_mlp or not rt.fused_kernels) else 0
    rope = 0 if model.learned_position_embeddings else 1
    other = NORMS_PER_LAYER + core + activation + RESIDUALS_PER_LAYER + rope
    comm = np.where(c.tp > 1, TP_COLLECTIVES_PER_LAYER, 0).astype(np.float64)
    grad_accumulation = 0.0 if rt.fused_kernels else gemms
    return LayerKernels(forward=gemms + other + comm, backward=2 * gemms + grad_accumulation + other + comm)
