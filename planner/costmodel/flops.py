"""Floating-point work of one forward pass, per micro-batch, for the whole layer (all GPUs).

Source: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1 / Eq. 3: a GPT layer's
forward is 24Bsh^2 (1 + s/(6h)) flop and the logit layer 2BshV. Generalised to
GQA (K and V are kv_hidden wide), gated MLPs (three matrices) and MoE (router
plus top_k routed and the shared experts per token). Attention counts the full
s x s score matrix, the convention of Eq. 3 and of MFU reporting. The GEMMs
themselves are listed once, in `gemms`.
"""

from __future__ import annotations

from planner.costmodel.candidates import FULL, SELECTIVE
from planner.costmodel.gemms import attention_core_flop, attention_gemms, layer_gemms, logits_gemm, mlp_gemms
from planner.specs import ModelSpec

__all__ = [
    "attention_core_flop",
    "attention_linear_flop",
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


def layer_forward_flop(model: ModelSpec, sequences: float) -> float:
    """Forward flop of one average layer for `sequences` sequences: every GEMM of `gemms.layer_gemms`,
    weighted by the share of layers holding it and its copies per token, plus the attention core."""
    tokens = sequences * model.seq_length
    linear = sum(g.layer_share * g.copies_per_token * g.flop(tokens) for g in layer_gemms(model))
    return linear + attention_core_flop(model, sequences)


def logits_flop(model: ModelSpec, sequences: float) -> float:
    """Output layer forward: 2 T h V."""
    return logits_gemm(model).flop(sequences * model.seq_length)


def model_flop_per_sequence(model: ModelSpec) -> float:
    """Model flop (MFU basis) per sequence: 3x forward (forward + backward), no recompute."""
    return 3 * (model.num_layers * layer_forward_flop(model, 1) + logits_flop(model, 1))


def recompute_flop_per_sequence(model: ModelSpec, mode: int) -> float:
    """Extra forward flop per sequence that recomputation adds (hardware flop minus model flop).

    `mode` is a recompute code (`candidates.NONE`, `SELECTIVE`, `FULL`).
    Full: every layer's forward again (Narayanan Eq. 3's 96 = 72 + 24).
    Selective: the attention core's forward again, 4 s^2 h per layer, so the s/(6h) term of
    Korthikanti 2022 App. A becomes 2s/(9h); the paper prints s/(3h), a typo its authors
    confirmed (NVIDIA/Megatron-LM issue #523).
    """
    if mode == FULL:
        return model.num_layers * layer_forward_flop(model, 1)
    if mode == SELECTIVE:
        return model.num_layers * attention_core_flop(model, 1)
    return 0.0
