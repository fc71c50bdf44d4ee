"""A hybrid model's Mamba-2 mixer outside its two projections: the convolution, the SSD scan and the gated norm.

The projections are weight GEMMs (`gemms.mamba_gemms`). What is left runs as memory-bound kernels: the
original SSD implementation "is mostly bottlenecked by memory bandwidth and latency" (PyTorch blog,
"Accelerating Mamba2 with Kernel Fusion", 2025, on the five Triton kernels chunk cumsum, chunk state, state
passing, BMM and chunk scan that Megatron-Core trains with). So a pass is priced at its HBM bytes over the
achieved bandwidth, or its tensor-core work at the bf16 rate where that is larger.

Megatron-Core's training path (`megatron/core/ssm/mamba_mixer.py`, `MambaMixer.ssm_training`, the default
`use_mamba_mem_eff_path`): the in_proj output (z, x, B, C, dt; `in_width`) is transposed to batch-first, one
fused `mamba_split_conv1d_scan_combined` runs the causal depthwise convolution over x, B and C, the SSD scan
with its chunk size `SSD_CHUNK_SIZE` and the z gate, the output is transposed back and a grouped RMSNorm
(`ExtendedRMSNorm`) feeds out_proj. The fused function's backward (mamba_ssm
`ops/triton/ssd_combined.py`, `MambaSplitConv1dScanCombinedFn`) reruns the convolution and the chunk states
from what it saved (zxbcdt and the scan output) rather than keeping them.

Widths: d_inner = heads x head_dim (P), G groups of state N each, H heads, Q the chunk size (Dao and Gu 2024,
"Transformers are SSMs", arXiv 2405.21060, Sec. 6 and 7: the SSD algorithm's chunk states are H x P x N per
chunk, its intra-chunk scores G x Q x Q).
"""

from __future__ import annotations

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray, tokens_per_microbatch
from planner.numerics import Numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec

__all__ = [
    "MIXER_BACKWARD_KERNELS",
    "MIXER_FORWARD_KERNELS",
    "SSD_CHUNK_SIZE",
    "in_width",
    "mixer_activation_bytes_per_token",
    "mixer_params",
    "mixer_time_s",
    "ssd_scan_flop",
]

SSD_CHUNK_SIZE = 128
"""Tokens per SSD chunk, Q: Megatron-Core `MambaMixer(chunk_size=128)`, which no Megatron-LM flag changes."""
MIXER_FORWARD_KERNELS = 9
"""Forward kernels of the mixer between its projections: two transposes, the convolution, the five SSD kernels
(module docstring) and the grouped RMSNorm."""
MIXER_BACKWARD_KERNELS = 16
"""Backward kernels there: the two transposes and the norm's backward, the convolution rerun and its backward,
the chunk cumsum and chunk states rerun (2), and the SSD backward's nine kernels (mamba_ssm
`_mamba_chunk_scan_combined_bwd`: dstates, state-passing backward, dx, dB, dC, dCB, ddA cumsum (2) and the dt
backward)."""
BYTES = 2
"""16-bit activations."""
STATE_BYTES = 4
"""The SSD's chunk states and intra-chunk scores are fp32 (mamba_ssm `_chunk_state_fwd` and `_bmm_chunk_fwd`
allocate `torch.float32` outputs)."""
RERUN_PASSES = 1
"""The backward reruns the convolution and the chunk states once (module docstring)."""


def in_width(model: ModelSpec) -> int:
    """Width of in_proj's output per token: z and x (d_inner each), B and C (G x N each) and dt (H)."""
    assert model.mamba is not None
    return 2 * model.mamba_inner_size + 2 * model.mamba.num_groups * model.mamba.state_dim + model.mamba_num_heads


def ssd_scan_flop(model: ModelSpec, sequences: float) -> float:
    """Forward flop of one Mamba layer's scan for `sequences` sequences: 7 T d_inner N, the count Megatron-LM's
    `num_floating_point_operations` uses (`megatron/training/training.py` `mamba_layer_flops`, "scan", with d_inner
    = 2 h there; heads x head_dim here, the same for Nemotron-H); zero without Mamba layers."""
    if model.mamba is None:
        return 0.0
    return 7 * sequences * model.seq_length * model.mamba_inner_size * model.mamba.state_dim


def _conv_ssd_bytes_per_token(model: ModelSpec) -> float:
    """Forward HBM bytes per token of the convolution and the five SSD kernels (all heads, before tp): the
    convolution reads and writes x, B and C; the scan reads x twice (chunk state, chunk scan), B and C twice
    each, z and the gate's output once; the chunk states (d_inner N / Q per token, fp32) are written, read and
    written by the state passing, and read; the intra-chunk scores (G x Q per token, fp32) written and read."""
    assert model.mamba is not None
    inner, groups, state = model.mamba_inner_size, model.mamba.num_groups, model.mamba.state_dim
    conv = 2 * BYTES * (inner + 2 * groups * state)
    scan = BYTES * (2 * inner + 4 * groups * state + 2 * inner)
    states = 4 * STATE_BYTES * inner * state / SSD_CHUNK_SIZE
    scores = 2 * STATE_BYTES * groups * SSD_CHUNK_SIZE
    return conv + scan + states + scores


def _layout_bytes_per_token(model: ModelSpec) -> float:
    """Forward HBM bytes per token of the two transposes (in_proj's output, the scan's output) and the grouped
    RMSNorm, each reading and writing its tensor once."""
    return 2 * BYTES * in_width(model) + 2 * BYTES * model.mamba_inner_size + 2 * BYTES * model.mamba_inner_size


def mixer_time_s(model: ModelSpec, c: Candidates, hw: Hardware) -> tuple[FloatArray, FloatArray]:
    """(forward, backward) seconds of one Mamba layer's mixer between its projections, one micro-batch on one GPU
    (heads and groups split by tp; module docstring): HBM bytes over the achieved bandwidth, or the scan's flop
    (`ssd_scan_flop`) at the bf16 tensor-core rate when that is longer. The backward moves twice the forward's
    bytes (reads the saved input and the output gradient, writes the input gradient), plus one forward's worth
    of convolution and chunk states rerun (`RERUN_PASSES`), and does twice its flop."""
    tokens = tokens_per_microbatch(model, c)
    tp = c.tp.astype(np.float64)
    conv_ssd, layout = _conv_ssd_bytes_per_token(model), _layout_bytes_per_token(model)
    bandwidth = hw.hbm_bandwidth_bytes_per_s
    forward_bytes = (conv_ssd + layout) * tokens / tp
    backward_bytes = (2 * (conv_ssd + layout) + RERUN_PASSES * conv_ssd) * tokens / tp
    flop = ssd_scan_flop(model, 1.0) * c.micro_batch_size / tp
    rate = hw.gemm_peak_efficiency * hw.gemm_peak_flop_per_s(False)
    forward = np.maximum(forward_bytes / bandwidth, flop / rate)
    backward = np.maximum(backward_bytes / bandwidth, 2 * flop / rate)
    return np.asarray(forward, dtype=np.float64), np.asarray(backward, dtype=np.float64)


def mixer_activation_bytes_per_token(model: ModelSpec, num: Numerics) -> float:
    """Bytes per token (all heads, before tp) one Mamba layer keeps for backward between its projections: the
    fused function's saved zxbcdt (in_proj's output) and scan output (d_inner), the norm's input (d_inner) and its
    output as out_proj's saved input (`Numerics.saved_gemm_input_bytes`; mamba_ssm
    `MambaSplitConv1dScanCombinedFn.forward` `ctx.save_for_backward(zxbcdt, ..., out_x, ...)`)."""
    inner = model.mamba_inner_size
    return num.activation_bytes * (in_width(model) + 2 * inner) + num.saved_gemm_input_bytes * inner


def mixer_params(model: ModelSpec) -> int:
    """Parameters of one mixer besides its projections, all split by tp (Megatron-Core `MambaMixer`: the
    depthwise convolution's weight and bias over x, B and C, `conv_kernel` taps; dt_bias, A_log and D per head;
    the grouped RMSNorm's d_inner weights)."""
    assert model.mamba is not None
    channels = model.mamba_inner_size + 2 * model.mamba.num_groups * model.mamba.state_dim
    return channels * (model.mamba.conv_kernel + 1) + 3 * model.mamba_num_heads + model.mamba_inner_size
