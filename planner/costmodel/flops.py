"""Floating-point work of one forward pass, per micro-batch, for the whole layer (all GPUs).

Source: Narayanan et al. 2021 (arXiv 2104.04473) Sec. 5.1 / Eq. 3: a GPT layer's
forward is 24Bsh^2 (1 + s/(6h)) flop and the logit layer 2BshV. Generalised to
GQA (K and V are kv_hidden wide), gated MLPs (three matrices) and MoE (router
plus top_k routed and the shared experts per token). Attention counts the full
s x s score matrix, the convention of Eq. 3 and of MFU reporting.
"""

from __future__ import annotations

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
    h, kv = model.hidden_size, model.kv_hidden_size
    return 2 * tokens * h * (2 * h + 2 * kv)


def attention_core_flop(model: ModelSpec, sequences: float) -> float:
    """QK^T and AV over the full s x s matrix: 4 b s^2 h (Eq. 3's s/(6h) term)."""
    return 4 * sequences * model.seq_length**2 * model.hidden_size


def mlp_flop(model: ModelSpec, tokens: float, ffn: int) -> float:
    """One MLP of width ffn: 2 T h ffn per matrix, 2 matrices or 3 when gated."""
    return 2 * tokens * model.hidden_size * ffn * (3 if model.gated_mlp else 2)


def _mlp_forward_flop(model: ModelSpec, tokens: float) -> float:
    """Average MLP work per layer: dense layers and MoE layers weighted by their count."""
    dense = mlp_flop(model, tokens, model.ffn_hidden_size)
    if model.moe is None:
        return dense
    moe = model.moe
    router = 2 * tokens * model.hidden_size * moe.num_experts
    experts = (moe.top_k + moe.num_shared_experts) * mlp_flop(model, tokens, moe.expert_ffn_hidden_size)
    share = model.num_moe_layers / model.num_layers
    return (1 - share) * dense + share * (router + experts)


def layer_forward_flop(model: ModelSpec, sequences: float) -> float:
    """Forward flop of one average layer for `sequences` sequences."""
    tokens = sequences * model.seq_length
    return (
        attention_linear_flop(model, tokens) + attention_core_flop(model, sequences) + _mlp_forward_flop(model, tokens)
    )


def logits_flop(model: ModelSpec, sequences: float) -> float:
    """Output layer forward: 2 T h V."""
    return 2 * sequences * model.seq_length * model.hidden_size * model.vocab_size


def model_flop_per_sequence(model: ModelSpec) -> float:
    """Model flop (MFU basis) per sequence: 3x forward (forward + backward), no recompute."""
    return 3 * (model.num_layers * layer_forward_flop(model, 1) + logits_flop(model, 1))


def recompute_flop_per_sequence(model: ModelSpec, mode: int) -> float:
    """Extra forward flop per sequence that recomputation adds (hardware flop minus model flop).

    Full: every layer's forward again (Narayanan Eq. 3's 96 = 72 + 24).
    Selective: the attention core's forward again, 4 s^2 h per layer, so the s/(6h) term of
    Korthikanti 2022 App. A becomes 2s/(9h); the paper prints s/(3h), a typo its authors
    confirmed (NVIDIA/Megatron-LM issue #523).
    """
    if mode == 2:
        return model.num_layers * layer_forward_flop(model, 1)
    if mode == 1:
        return model.num_layers * attention_core_flop(model, 1)
    return 0.0
