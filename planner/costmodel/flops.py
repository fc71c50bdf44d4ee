"""Floating-point work of one forward pass, per micro-batch, for the whole layer (all GPUs).

Source: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1 / Eq. 3: a GPT layer's
forward is 24Bsh^2 (1 + s/(6h)) flop and the logit layer 2BshV. Generalised to
GQA (K and V are kv_hidden wide), gated MLPs (three matrices) and MoE (router
plus top_k routed and the shared experts per token). The GEMMs themselves are
listed once, in `gemms`.

One convention for model flop (the MFU basis) and hardware flop: causal
attention counts half of the s x s matrix (`gemms.attention_core_flop`), as
Megatron-LM's `num_floating_point_operations` (`megatron/training/training.py`)
and NeMo's `flops_formulas` (`causal_self_attn = True`) report it, and as the
causal fused kernels that `compute` times execute it; so hardware flop over
step time never exceeds the peak. The 2021/2022 papers counted the full
matrix (Eq. 3); `full_attention=True` gives their convention, which the
calibration uses to compare with their published TFLOP/s.
"""

from __future__ import annotations

from planner.costmodel.candidates import FULL, SELECTIVE
from planner.costmodel.gemms import (
    GemmRole,
    attention_core_flop,
    attention_gemms,
    attention_score_flop,
    layer_gemms,
    logits_gemm,
    mlp_gemms,
    mtp_projection_gemm,
    up_projection_gemms,
)
from planner.costmodel.mamba import ssd_scan_flop
from planner.costmodel.recompute import default_selective_modules
from planner.specs import ModelSpec, RecomputeModule

__all__ = [
    "attention_core_flop",
    "attention_linear_flop",
    "hardware_flop_per_sequence",
    "layer_forward_flop",
    "logits_flop",
    "mlp_flop",
    "model_flop_per_sequence",
    "narayanan_eq3_flop",
    "recompute_flop_per_sequence",
]


def narayanan_eq3_flop(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Flop per iteration with full recompute, Narayanan 2021 Eq. 3: 96Bslh^2 (1 + s/(6h) + V/(16lh))."""
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def attention_linear_flop(model: ModelSpec, tokens: float) -> float:
    """Q, K, V and output projections: 2 T h (2h + 2 kv_hidden)."""
    return sum(g.flop(tokens) for g in attention_gemms(model))


def mlp_flop(model: ModelSpec, tokens: float, ffn: int) -> float:
    """One MLP of width ffn: 2 T h ffn per matrix, 2 matrices or 3 when gated."""
    return sum(g.flop(tokens) for g in mlp_gemms(model, ffn))


def _core_flop(model: ModelSpec, sequences: float, full_attention: bool) -> float:
    """The average layer's attention core: causal (`attention_core_flop`), or the full matrix (the 2021 papers'
    convention), in the layers holding attention."""
    if full_attention:
        return model.attention_layer_share * attention_score_flop(model, sequences)
    return attention_core_flop(model, sequences)


def layer_forward_flop(model: ModelSpec, sequences: float, full_attention: bool = False) -> float:
    """Forward flop of one average layer for `sequences` sequences: every GEMM of `gemms.layer_gemms`,
    weighted by the share of layers holding it and its copies per token, plus the attention core and, in a
    hybrid's Mamba layers, the scan (`mamba.ssd_scan_flop`, Megatron-LM's `hybrid_flops` count)."""
    tokens = sequences * model.seq_length
    linear = sum(g.layer_share * g.copies_per_token * g.flop(tokens) for g in layer_gemms(model))
    scan = model.mamba_layer_share * ssd_scan_flop(model, sequences)
    return linear + _core_flop(model, sequences, full_attention) + scan


def logits_flop(model: ModelSpec, sequences: float) -> float:
    """Output layer forward: 2 T h V."""
    return logits_gemm(model).flop(sequences * model.seq_length)


def model_flop_per_sequence(model: ModelSpec, full_attention: bool = False) -> float:
    """Model flop (MFU basis) per sequence: 3x forward (forward + backward), no recompute.

    Megatron-LM `num_floating_point_operations`: 3 (forward, dgrad, wgrad) x 2 flop per
    multiply-add over every GEMM, the core attention causal; NeMo's flops callbacks agree. Multi-token
    prediction adds a layer (the average one here; Megatron counts the last layer's kind), eh_proj and a logit
    layer per module, as Megatron-LM does (`mtp_num_layers`: "(1 + mtp_num_layers)" logits).
    """
    layers = (model.num_layers + model.mtp_num_layers) * layer_forward_flop(model, 1, full_attention)
    mtp = model.mtp_num_layers * mtp_projection_gemm(model).flop(model.seq_length)
    return 3 * (layers + (1 + model.mtp_num_layers) * logits_flop(model, 1) + mtp)


def hardware_flop_per_sequence(model: ModelSpec, mode: int, full_attention: bool = False) -> float:
    """Hardware flop per sequence: model flop plus what recompute `mode` adds (Narayanan 2021 Sec. 5.1), selective
    recompute over its default modules.

    With `full_attention` and full recompute on a GPT this is Narayanan Eq. 3 / B (`narayanan_eq3_flop`).
    """
    return model_flop_per_sequence(model, full_attention) + recompute_flop_per_sequence(model, mode, full_attention)


_SELECTIVE_GEMM_ROLES = {
    RecomputeModule.MLP: (GemmRole.DENSE_MLP,),
    RecomputeModule.MOE: (GemmRole.ROUTER, GemmRole.ROUTED_EXPERT, GemmRole.SHARED_EXPERT),
    RecomputeModule.SHARED_EXPERTS: (GemmRole.SHARED_EXPERT,),
}
"""The weight GEMMs each module of selective recompute reruns besides the attention's (`costmodel.recompute`)."""


def recompute_flop_per_sequence(
    model: ModelSpec,
    mode: int,
    full_attention: bool = False,
    modules: tuple[RecomputeModule, ...] | None = None,
) -> float:
    """Extra forward flop per sequence that recomputation adds (hardware flop minus model flop).

    `mode` is a recompute code (`candidates.NONE`, `SELECTIVE`, `FULL`); `modules` what selective recompute reruns
    (`recompute.selective_modules`; None: `recompute.default_selective_modules`).
    Full: every layer's forward again (Narayanan Eq. 3's 96 = 72 + 24).
    Selective: the forward flop of each module it reruns: core_attn the attention core, 4 s^2 h per layer (full
    matrix), so the s/(6h) term of Korthikanti 2022 App. A becomes 2s/(9h) (the paper prints s/(3h), a typo its
    authors confirmed, NVIDIA/Megatron-LM issue #523); mla_up_proj MLA's up-projections; mlp, moe and
    shared_experts their weight GEMMs (`_SELECTIVE_GEMM_ROLES`; moe_act and layernorm rerun no GEMM).
    """
    layers = model.num_layers + model.mtp_num_layers  # each MTP module's layer recomputes like the others
    if mode == FULL:
        return layers * layer_forward_flop(model, 1, full_attention)
    if mode != SELECTIVE:
        return 0.0
    chosen = default_selective_modules(model) if modules is None else modules
    tokens = model.seq_length
    rerun = _core_flop(model, 1, full_attention) if RecomputeModule.CORE_ATTN in chosen else 0.0
    if RecomputeModule.MLA_UP_PROJ in chosen:
        rerun += sum(g.flop(tokens) for g in up_projection_gemms(model))
    roles = {role for m in chosen for role in _SELECTIVE_GEMM_ROLES.get(m, ())}
    rerun += sum(g.layer_share * g.copies_per_token * g.flop(tokens) for g in layer_gemms(model) if g.role in roles)
    return layers * rerun
