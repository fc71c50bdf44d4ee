"""Parameter counts: whole model, per layer, and per GPU shard.

Source: Narayanan et al. 2021 (arXiv 2104.04473) Eq. 2 for GPT; generalised to
grouped-query attention, gated MLPs, untied embeddings and MoE layers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, IntArray, select_max
from planner.costmodel.gemms import (
    attention_gemms,
    layer_gemms,
    logits_gemm,
    mamba_gemms,
    mlp_gemms,
    mtp_projection_gemm,
    router_gemm,
)
from planner.costmodel.mamba import mixer_params
from planner.specs import ModelSpec

__all__ = [
    "ParamCounts",
    "StageKind",
    "StageShape",
    "active_params",
    "attention_params",
    "dense_mlp_params",
    "embedding_params",
    "expert_params_per_moe_layer",
    "mamba_layer_params",
    "fp8_weight_fraction",
    "narayanan_eq2_params",
    "norm_params",
    "output_params",
    "params_per_gpu",
    "largest_stage_params",
    "stage_fp8_weights",
    "stage_kinds",
    "stage_params",
    "total_params",
]


class StageKind(IntEnum):
    """The pipeline stages whose costs differ: the first holds the embedding, the last the output layer.

    Middle stages hold neither. With one stage, FIRST and LAST are the same stage.
    """

    FIRST = 0
    MIDDLE = 1
    LAST = 2


class ParamCounts(NamedTuple):
    """Parameters per GPU split into dense ones (sharded over dp x cp) and routed experts (over expert-dp)."""

    dense: FloatArray
    expert: FloatArray

    @property
    def total(self) -> FloatArray:
        return self.dense + self.expert

    def map(self, fn: Callable[[FloatArray], FloatArray]) -> ParamCounts:
        """The counts with `fn` applied to both arrays (to select, repeat or broadcast candidates)."""
        return ParamCounts(fn(self.dense), fn(self.expert))


class StageShape(NamedTuple):
    """What one kind of stage holds: its layer count, and whether it holds the embedding and the output layer."""

    layers: IntArray
    embedding: BoolArray
    output: BoolArray


def narayanan_eq2_params(num_layers: int, hidden: int, vocab: int, seq: int) -> int:
    """Parameters of a GPT model, Narayanan 2021 Eq. 2: 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)).

    Written in integers: 12lh^2 + 13lh + (V + s)h.
    """
    return 12 * num_layers * hidden**2 + 13 * num_layers * hidden + (vocab + seq) * hidden


def norm_params(model: ModelSpec) -> int:
    """One normalisation layer: LayerNorm (weight + bias) with linear_bias, else RMSNorm (weight)."""
    return 2 * model.hidden_size if model.linear_bias else model.hidden_size


def attention_params(model: ModelSpec) -> int:
    """Q, K, V and output projections (+ biases), the weights of `gemms.attention_gemms`.

    K and V are kv_hidden wide under GQA; under MLA the down- and up-projections.
    """
    return sum(g.params for g in attention_gemms(model))


def _attention_norm_params(model: ModelSpec) -> int:
    """The attention's own norms (`ModelSpec.attention_norm_widths`), replicated over tp: MLA's latent RMSNorms
    (weights only), or the query and key norms (with a bias under linear_bias, like `norm_params`). Source:
    Megatron-Core `SelfAttention.__init__` (`q_layernorm` / `k_layernorm` built with
    `hidden_size=self.hidden_size_per_attention_head`) and `MLASelfAttention` (its q_layernorm / kv_layernorm
    are the latent norms); Hugging Face `Qwen3Attention` (`q_norm`, `k_norm`: RMSNorm(head_dim))."""
    biased = model.linear_bias and model.mla is None
    return (2 if biased else 1) * sum(model.attention_norm_widths)


def _replicated_attention_params(model: ModelSpec) -> int:
    """The attention parameters every tp rank holds whole: MLA's down-projections (`gemms.GemmRole.LATENT`) and
    the attention's norms (`_attention_norm_params`); zero without MLA or QK-norm."""
    down = sum(g.params for g in attention_gemms(model) if not g.tp_split)
    return down + _attention_norm_params(model)


def dense_mlp_params(model: ModelSpec, ffn: int) -> int:
    """An MLP of width `ffn`, the weights of `gemms.mlp_gemms`: 2 matrices, or 3 when gated (SwiGLU)."""
    return sum(g.params for g in mlp_gemms(model, ffn))


def expert_params_per_moe_layer(model: ModelSpec) -> int:
    """Routed experts of one MoE layer (all of them)."""
    assert model.moe is not None
    return model.moe.num_experts * dense_mlp_params(model, model.moe.expert_ffn_hidden_size)


def _moe_layer_replicated_params(model: ModelSpec) -> int:
    """Router and shared experts of one MoE layer: every expert-parallel rank holds them."""
    assert model.moe is not None
    router = router_gemm(model).params
    shared = model.moe.num_shared_experts * dense_mlp_params(model, model.moe.expert_ffn_hidden_size)
    return router + shared


def embedding_params(model: ModelSpec) -> int:
    """Word embedding V x h, plus the s x h position table when it is learned."""
    positions = model.seq_length * model.hidden_size if model.learned_position_embeddings else 0
    return model.vocab_size * model.hidden_size + positions


def output_params(model: ModelSpec) -> int:
    """Output (logit) layer; zero when tied to the embedding."""
    return 0 if model.tied_embeddings else logits_gemm(model).weights


def _layer_common_params(model: ModelSpec) -> int:
    return attention_params(model) + 2 * norm_params(model) + _attention_norm_params(model)


def mamba_layer_params(model: ModelSpec) -> int:
    """A hybrid's Mamba mixer: its projections (`gemms.mamba_gemms`) and the rest (`mamba.mixer_params`), all
    split by tp; zero without Mamba layers."""
    if model.mamba is None:
        return 0
    return sum(g.params for g in mamba_gemms(model)) + mixer_params(model)


def _hybrid_params(model: ModelSpec) -> int:
    """Every layer of a hybrid (`ModelSpec.hybrid_pattern`): each holds one block behind one norm (Megatron-Core
    `MambaModel`: `MambaLayer`, attention-only and MLP-only `TransformerLayer`s, and MoE ones)."""
    attention = model.num_attention_layers * (attention_params(model) + _attention_norm_params(model))
    mlp = model.num_dense_layers * dense_mlp_params(model, model.ffn_hidden_size)
    moe = 0
    if model.moe is not None:
        moe = model.num_moe_layers * (_moe_layer_replicated_params(model) + expert_params_per_moe_layer(model))
    return (
        attention
        + mlp
        + moe
        + model.num_mamba_layers * mamba_layer_params(model)
        + model.num_layers * norm_params(model)
    )


def total_params(model: ModelSpec) -> int:
    """Every parameter, all experts included. Final norm included (Eq. 2 omits its 2h). Multi-token prediction
    modules add an average layer each, eh_proj and three norms (`_mtp_params_per_gpu`; they share the embedding
    and the output layer)."""
    trunk = embedding_params(model) + output_params(model) + norm_params(model)
    if model.hybrid_pattern is not None:
        return _hybrid_params(model) + trunk  # no multi-token prediction (`ModelSpec` refuses it)
    dense_layer = _layer_common_params(model) + dense_mlp_params(model, model.ffn_hidden_size)
    dense = model.num_dense_layers * dense_layer
    moe = 0
    if model.moe is not None:
        per_layer = _layer_common_params(model) + _moe_layer_replicated_params(model)
        moe = model.num_moe_layers * (per_layer + expert_params_per_moe_layer(model))
    mtp_module = round((dense + moe) / model.num_layers) + mtp_projection_gemm(model).params + 3 * norm_params(model)
    return dense + moe + trunk + model.mtp_num_layers * mtp_module


def active_params(model: ModelSpec) -> int:
    """Parameters one token passes through (top_k routed experts, not all)."""
    if model.moe is None:
        return total_params(model)
    inactive = model.moe.num_experts - model.moe.top_k
    moe_layers = model.num_moe_layers * (1 + model.mtp_num_layers / model.num_layers)  # MTP: average layers
    return total_params(model) - round(
        moe_layers * inactive * dense_mlp_params(model, model.moe.expert_ffn_hidden_size)
    )


def stage_params(model: ModelSpec, c: Candidates, stage: StageShape) -> ParamCounts:
    """(dense, expert) parameters one GPU of a stage holds, before ZeRO sharding.

    Matrices split over tp (Megatron column/row parallel); norms and MLA's down-projections replicated;
    routed experts split over ep and etp (Megatron-Core's expert grid; etp = tp by
    default). The embedding stage holds V x h / tp (and the position table);
    the output stage the output layer, a copy of a tied embedding when the two
    are different stages, and the final norm.
    Assumes MoE layers spread evenly over stages.
    """
    layers, embedding, output = stage
    tp = c.tp.astype(np.float64)
    n = layers.astype(np.float64)
    moe_share = model.moe_layer_share
    dense_mlp = dense_mlp_params(model, model.ffn_hidden_size) * model.dense_mlp_share
    attention = model.attention_layer_share
    replicated = attention * _replicated_attention_params(model)
    split = attention * (attention_params(model) - sum(g.params for g in attention_gemms(model) if not g.tp_split))
    split = split + model.mamba_layer_share * mamba_layer_params(model)  # tp-split attention and Mamba weights
    norms = model.blocks_per_layer * norm_params(model)  # a transformer layer's two, a hybrid's one
    dense = n * ((split + dense_mlp) / tp + replicated + norms)
    expert = np.zeros_like(tp)
    if model.moe is not None:
        dense += n * moe_share * _moe_layer_replicated_params(model) / tp
        expert = n * moe_share * expert_params_per_moe_layer(model) / (c.etp * c.ep)
    output_matrix = np.where(
        embedding,
        output_params(model),
        model.vocab_size * model.hidden_size if model.tied_embeddings else output_params(model),
    )
    dense = dense + np.where(embedding, embedding_params(model) / tp, 0.0)
    dense = dense + np.where(output, output_matrix / tp + norm_params(model), 0.0)
    mtp = _mtp_params_per_gpu(model, c, embedding)
    dense = dense + np.where(output, mtp.dense, 0.0)
    expert = expert + np.where(output, mtp.expert, 0.0)
    return ParamCounts(dense, expert)


def _mtp_params_per_gpu(model: ModelSpec, c: Candidates, embedding: BoolArray) -> ParamCounts:
    """The multi-token-prediction modules one GPU of the last stage holds (`ModelSpec.mtp_num_layers`): each one
    average layer (`stage_params` at one layer; DeepSeek-V3's is an MoE layer, as 58 of its 61 are), eh_proj
    (`gemms.mtp_projection_gemm`) and three norms (enorm, hnorm, its final norm), and, on a last stage that does
    not also hold the embedding, a copy of an untied embedding for the next tokens (Megatron-Core `GPTModel`
    builds `self.embedding` where `mtp_process`; a tied one is there already as the output layer)."""
    zero = np.zeros(c.shape)
    if model.mtp_num_layers == 0:
        return ParamCounts(zero, zero)
    one = np.ones_like(c.tp)
    layer = stage_params(model.model_copy(update={"mtp_num_layers": 0}), c, StageShape(one, one < 0, one < 0))
    module = mtp_projection_gemm(model).params / c.tp + 3 * norm_params(model)
    copy = np.where(embedding | model.tied_embeddings, 0.0, model.vocab_size * model.hidden_size / c.tp)
    return ParamCounts(model.mtp_num_layers * (layer.dense + module) + copy, model.mtp_num_layers * layer.expert)


def _fp8_weights_per_layer(model: ModelSpec) -> tuple[float, float, float]:
    """(tp-split dense, tp-replicated dense, expert) weight elements of the average layer's FP8 linear layers
    (`gemms.Gemm.fp8`), whole (no tp or ep split): attention (MLA's down-projections are the replicated ones), the
    MLP or shared experts, and every routed expert; biases excluded."""
    split = replicated = expert = 0.0
    for g in layer_gemms(model):
        if not g.fp8:
            continue
        if g.is_expert:
            assert model.moe is not None
            expert += g.layer_share * g.weights * model.moe.num_experts
        elif g.tp_split:
            split += g.layer_share * g.weights * g.copies_per_token
        else:
            replicated += g.layer_share * g.weights * g.copies_per_token
    return split, replicated, expert


def stage_fp8_weights(model: ModelSpec, c: Candidates, layers: IntArray) -> ParamCounts:
    """(dense, expert) weights of the FP8 linear layers one GPU of a stage with `layers` layers holds, before
    ZeRO sharding, split as `stage_params` splits them (over tp; experts over etp and ep). The rest of the
    stage's parameters (norms, biases, embedding, output layer, router) stay 16-bit under FP8 training."""
    split, replicated, expert = _fp8_weights_per_layer(model)
    tp, n = c.tp.astype(np.float64), layers.astype(np.float64)
    return ParamCounts(n * (split / tp + replicated), n * expert / (c.etp * c.ep))


def fp8_weight_fraction(model: ModelSpec) -> tuple[float, float]:
    """(dense, expert) fraction of the model's parameters that are FP8 linear weights (`stage_fp8_weights` over
    every layer, against `total_params` less the experts, and the experts)."""
    split, replicated, expert = (model.num_layers * x for x in _fp8_weights_per_layer(model))
    dense = split + replicated
    experts = model.num_moe_layers * expert_params_per_moe_layer(model) if model.moe is not None else 0
    return dense / (total_params(model) - experts), (expert / experts if experts else 0.0)


def stage_kinds(c: Candidates) -> tuple[StageShape, StageShape, StageShape]:
    """The first, middle and last stage, indexed by `StageKind` (a middle stage has 0 layers when pp <= 2)."""
    single = c.pp == 1
    return (
        StageShape(c.first_stage_layers, np.ones_like(single), single),
        StageShape(np.where(c.pp > 2, c.stage_layers, 0), np.zeros_like(single), np.zeros_like(single)),
        StageShape(c.last_stage_layers, single, np.ones_like(single)),
    )


def largest_stage_params(stages: tuple[ParamCounts, ...]) -> ParamCounts:
    """Per candidate, the counts of the stage holding the most parameters (the first such stage on ties)."""
    dense, expert = select_max([p.total for p in stages], [p.dense for p in stages], [p.expert for p in stages])
    return ParamCounts(dense, expert)


def params_per_gpu(model: ModelSpec, c: Candidates) -> ParamCounts:
    """(dense, expert) parameters of one GPU on the stage holding the most."""
    return largest_stage_params(tuple(stage_params(model, c, stage) for stage in stage_kinds(c)))
