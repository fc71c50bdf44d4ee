"""The weight GEMMs of one transformer layer (and of the output layer), written once.

Each `Gemm` is one weight matrix applied to the tokens: `tokens x k` times
`k x n`, 2 * tokens * k * n flop (a multiply and an add per term, Narayanan
et al. 2021, arXiv 2104.04473, Sec. 5.1: "a matrix multiplication of size
A (m x k) x X (k x n) requires 2 m k n flop"). Three readers share the list:
the model flop behind MFU (`flops`), the per-GPU GEMM times (`compute`) and
the parameter counts (`params`: the weights are k x n, plus n biases).

The layer of a GPT (Narayanan 2021 Eq. 3, Korthikanti et al. 2022 arXiv
2205.05198 Sec. 3 and App. A): QKV projection (h -> q + 2 kv_hidden, q = h and 3h
in all under multi-head attention with the default head width), output projection (q -> h), MLP up (h -> ffn, or
h -> 2 ffn fused gate + up when gated) and down (ffn -> h): 24 b s h^2 with
ffn = 4h, which with the 4 b s^2 h of the full score matrix
(`attention_score_flop`; a causal model needs half of it, `attention_core_flop`)
is Eq. 3's 24 b s h^2 (1 + s/(6h)). Tensor parallelism splits every matrix (Megatron
column / row parallel, Narayanan Sec. 2.3) except the MoE router,
which each rank holds whole. In MoE layers (`layer_share` = fraction of layers
that are MoE) the dense MLP gives way to the router, `top_k` routed experts
per token (the expert GEMMs, spread over `num_experts` experts, `num_experts / ep`
of them on one GPU) and the shared experts every token passes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, overload

import numpy.typing as npt

from planner.specs import ModelSpec

__all__ = [
    "CAUSAL_FRACTION",
    "MLA_UP_PROJECTIONS",
    "Gemm",
    "GemmRole",
    "attention_core_flop",
    "attention_core_fraction",
    "attention_gemms",
    "attention_score_flop",
    "layer_gemms",
    "logits_gemm",
    "mamba_gemms",
    "mla_gemms",
    "mlp_gemms",
    "mtp_projection_gemm",
    "router_gemm",
    "up_projection_gemms",
    "windowed_fraction",
]


class GemmRole(StrEnum):
    """Which part of the layer a GEMM belongs to; decides its tokens and its instances per GPU."""

    ATTENTION = "attention"
    """QKV and output projections (MLA's up-projections): every token, split by tp."""
    LATENT = "latent"
    """MLA's down-projections to the query and key/value latents: replicated over tp (Megatron-Core
    `MLASelfAttention` builds them `parallel_mode="duplicated"`), on this rank's sequence shard under SP."""
    DENSE_MLP = "dense_mlp"
    """The MLP of a dense layer: every token, split by tp."""
    ROUTER = "router"
    """The MoE gate h -> num_experts: every token, replicated over tp."""
    ROUTED_EXPERT = "routed_expert"
    """An expert MLP: top_k of num_experts per token; split by tp, the experts spread over ep."""
    SHARED_EXPERT = "shared_expert"
    """A shared expert MLP: every token, split by tp; one GEMM per shared expert."""
    MAMBA = "mamba"
    """A Mamba-2 mixer's input projection (h -> z, x, B, C, dt) and output projection (d_inner -> h): every token,
    split by tp (Megatron-Core `MambaMixer.in_proj` column parallel, `out_proj` row parallel)."""
    OUTPUT = "output"
    """The logit layer h -> V (and an MTP module's eh_proj): every token, split by tp (last stage only)."""


@dataclass(frozen=True, slots=True)
class Gemm:
    """One weight GEMM: `tokens x k` times the `k x n` weight."""

    name: str
    role: GemmRole
    k: int
    """Input width (the reduction dimension)."""
    n: int
    """Output width."""
    copies_per_token: int
    """How many instances of this GEMM each token passes: top_k routed experts, each shared expert, else 1."""
    layer_share: float
    """Fraction of the layers that hold it: 1 (attention), dense layers' share (dense MLP), MoE layers' share."""
    bias: bool
    """Whether it has n biases (GPT-2/3 style `linear_bias`; the router never does)."""

    @property
    def tp_split(self) -> bool:
        """Whether tensor parallelism splits it (all but the router and MLA's down-projections)."""
        return self.role not in (GemmRole.ROUTER, GemmRole.LATENT)

    @property
    def fp8(self) -> bool:
        """Whether it runs in fp8 when the training precision is fp8: the transformer layers' linear
        layers (Transformer Engine's `LayerNormColumnParallelLinear`, `RowParallelLinear` and grouped
        expert GEMMs under `fp8_autocast`, Megatron-Core `TransformerConfig.fp8`); the router and the
        output layer stay in bf16 (Megatron-Core builds them outside TE's fp8 modules)."""
        return self.role not in (GemmRole.ROUTER, GemmRole.OUTPUT)

    @property
    def row_parallel(self) -> bool:
        """Whether tp splits its input width k (Megatron `RowParallelLinear`: proj, fc2); else its output width n."""
        return self.name in ("proj", "fc2", "out_proj")

    def local_shape(self, tp: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """(k, n) of the part of the weight one GPU holds: tp splits k or n (Narayanan 2021 Sec. 2.3), or neither."""
        one = tp * 0 + 1
        if not self.tp_split:
            return self.k * one, self.n * one
        if self.row_parallel:
            return self.k / tp, self.n * one
        return self.k * one, self.n / tp

    @property
    def is_expert(self) -> bool:
        """A routed expert: its tokens are spread over the experts, `num_experts / ep` on each GPU."""
        return self.role is GemmRole.ROUTED_EXPERT

    @property
    def weights(self) -> int:
        """Weight elements, k x n."""
        return self.k * self.n

    @property
    def params(self) -> int:
        """Parameters of one instance: weights plus biases."""
        return self.weights + (self.n if self.bias else 0)

    @overload
    def flop(self, tokens: float) -> float: ...
    @overload
    def flop(self, tokens: npt.NDArray[Any]) -> npt.NDArray[Any]: ...
    def flop(self, tokens: float | npt.NDArray[Any]) -> float | npt.NDArray[Any]:
        """Forward flop of one instance over `tokens` rows: 2 tokens k n (Narayanan 2021 Sec. 5.1)."""
        return 2 * tokens * self.k * self.n


def attention_gemms(model: ModelSpec) -> tuple[Gemm, ...]:
    """QKV (h -> q + 2 kv, K and V narrower under GQA) and the output projection (q -> h); or MLA's.

    q = heads x head_dim and kv = query groups x head_dim (Megatron-Core `SelfAttention`: linear_qkv
    h -> (heads + 2 groups) kv_channels, linear_proj heads kv_channels -> h); q = h unless head_dim is set.
    Multi-latent attention (`mla_gemms`) replaces the QKV projection.
    """
    if model.mla is not None:
        return mla_gemms(model)
    h, q, kv, bias = model.hidden_size, model.attention_hidden_size, model.kv_hidden_size, model.linear_bias
    share = model.attention_layer_share
    return (
        Gemm("qkv", GemmRole.ATTENTION, h, q + 2 * kv, 1, share, bias),
        Gemm("proj", GemmRole.ATTENTION, q, h, 1, share, bias),
    )


def mamba_gemms(model: ModelSpec) -> tuple[Gemm, ...]:
    """A Mamba-2 mixer's two projections, in the Mamba layers' share of the layers (none without them):

    in_proj h -> 2 d_inner + 2 groups x state + heads (z, x, B, C and dt; Dao and Gu 2024, arXiv 2405.21060,
    Sec. 7.1 and Fig. 6, the parallel projections of the Mamba-2 block) and out_proj d_inner -> h, no biases
    (Megatron-Core `MambaMixer.__init__`: `in_proj` to `d_inner * 2 + 2 * ngroups * d_state + nheads`, "assert not
    bias"); Megatron-LM's `hybrid_flops` (`megatron/training/training.py` `mamba_layer_flops`) counts the same two.
    """
    mamba = model.mamba
    if mamba is None or not model.num_mamba_layers:
        return ()
    h, inner, share = model.hidden_size, model.mamba_inner_size, model.mamba_layer_share
    width = 2 * inner + 2 * mamba.num_groups * mamba.state_dim + model.mamba_num_heads
    return (
        Gemm("in_proj", GemmRole.MAMBA, h, width, 1, share, False),
        Gemm("out_proj", GemmRole.MAMBA, inner, h, 1, share, False),
    )


MLA_UP_PROJECTIONS = ("q", "q_up", "kv_up")
"""The `mla_gemms` that Megatron-Core's "mla_up_proj" recompute reruns (`qkv_up_proj_and_rope_apply`)."""


def up_projection_gemms(model: ModelSpec) -> tuple[Gemm, ...]:
    """MLA's up-projections (`MLA_UP_PROJECTIONS`); none without MLA."""
    return tuple(g for g in attention_gemms(model) if model.mla is not None and g.name in MLA_UP_PROJECTIONS)


def mla_gemms(model: ModelSpec) -> tuple[Gemm, ...]:
    """Multi-latent attention's projections (DeepSeek-V2, arXiv 2405.04434, Sec. 2.1.2-2.1.3; Megatron-Core
    `MLASelfAttention`, whose layout Megatron-LM's `num_floating_point_operations` counts the same way):

    q_down h -> q_lora_rank and q_up q_lora_rank -> heads x (qk_head_dim + qk_pos_emb_head_dim), or one q
    h -> heads x (qk + rope) without a query latent; kv_down h -> kv_lora_rank + qk_pos_emb_head_dim (the
    latent and the shared RoPE key); kv_up kv_lora_rank -> heads x (qk_head_dim + v_head_dim); proj
    heads x v_head_dim -> h. The down-projections are replicated over tp (`GemmRole.LATENT`); no biases.
    """
    mla = model.mla
    assert mla is not None
    h, heads = model.hidden_size, model.num_attention_heads
    query = heads * mla.query_key_head_dim
    if mla.q_lora_rank is None:
        q: tuple[Gemm, ...] = (Gemm("q", GemmRole.ATTENTION, h, query, 1, 1.0, False),)
    else:
        q = (
            Gemm("q_down", GemmRole.LATENT, h, mla.q_lora_rank, 1, 1.0, False),
            Gemm("q_up", GemmRole.ATTENTION, mla.q_lora_rank, query, 1, 1.0, False),
        )
    kv_up = heads * (mla.qk_head_dim + mla.v_head_dim)
    return q + (
        Gemm("kv_down", GemmRole.LATENT, h, mla.kv_lora_rank + mla.qk_pos_emb_head_dim, 1, 1.0, False),
        Gemm("kv_up", GemmRole.ATTENTION, mla.kv_lora_rank, kv_up, 1, 1.0, False),
        Gemm("proj", GemmRole.ATTENTION, model.attention_hidden_size, h, 1, 1.0, False),
    )


def mlp_gemms(
    model: ModelSpec, ffn: int, role: GemmRole = GemmRole.DENSE_MLP, copies: int = 1, share: float = 1.0
) -> tuple[Gemm, Gemm]:
    """An MLP of width `ffn`: up h -> ffn (h -> 2 ffn, gate and up fused, when gated) and down ffn -> h."""
    h, bias = model.hidden_size, model.linear_bias
    up_width = (2 if model.gated_mlp else 1) * ffn
    return (
        Gemm("fc1", role, h, up_width, copies, share, bias),
        Gemm("fc2", role, ffn, h, copies, share, bias),
    )


@functools.lru_cache(maxsize=128)
def layer_gemms(model: ModelSpec) -> tuple[Gemm, ...]:
    """Every weight GEMM of the average layer: attention, the dense MLP, and in MoE layers the MoE block; in a
    hybrid model (`ModelSpec.hybrid_pattern`) each in the share of the layers holding its block, and the Mamba
    mixers' projections (`mamba_gemms`).

    Order: attention, Mamba, dense MLP, then routed experts, shared experts, router.
    A dense model has no MoE GEMMs; a model whose layers are all MoE has no dense MLP.
    """
    gemms: tuple[Gemm, ...] = attention_gemms(model) if model.num_attention_layers else ()
    gemms += mamba_gemms(model)
    moe = model.moe
    share = model.moe_layer_share
    if model.num_dense_layers:
        gemms += mlp_gemms(model, model.ffn_hidden_size, share=model.dense_mlp_share)
    if moe is not None:
        ffn = moe.expert_ffn_hidden_size
        gemms += mlp_gemms(model, ffn, GemmRole.ROUTED_EXPERT, moe.top_k, share)
        if moe.num_shared_experts:
            gemms += mlp_gemms(model, ffn, GemmRole.SHARED_EXPERT, moe.num_shared_experts, share)
        gemms += (router_gemm(model),)
    return gemms


def router_gemm(model: ModelSpec) -> Gemm:
    """The MoE gate h -> num_experts, no bias, in the MoE layers' share of the layers."""
    assert model.moe is not None
    share = model.moe_layer_share
    return Gemm("router", GemmRole.ROUTER, model.hidden_size, model.moe.num_experts, 1, share, False)


def mtp_projection_gemm(model: ModelSpec) -> Gemm:
    """A multi-token-prediction module's eh_proj 2h -> h (the normed hidden state and the next token's embedding,
    concatenated; DeepSeek-V3 report, arXiv 2412.19437, Sec. 2.2, Eq. 21's M_k; Megatron-Core
    `MultiTokenPredictionLayer.eh_proj`, column parallel), on the last stage, in bf16 like the output layer."""
    return Gemm("eh_proj", GemmRole.OUTPUT, 2 * model.hidden_size, model.hidden_size, 1, 1.0, False)


def logits_gemm(model: ModelSpec) -> Gemm:
    """The output layer h -> V (Narayanan 2021 Eq. 3's 2 b s h V forward)."""
    return Gemm("logits", GemmRole.OUTPUT, model.hidden_size, model.vocab_size, 1, 1.0, False)


CAUSAL_FRACTION = 0.5
"""Share of the s x s score matrix a causal model needs: the blocks a causal fused kernel computes
(Dao 2023, arXiv 2307.08691, Sec. 3.1.1) and what Megatron-LM's `num_floating_point_operations`
(`megatron/training/training.py`, "causal mask (only half of the mask is non-zero)") and NeMo's
`flops_formulas` (`causal_self_attn`) count."""


@overload
def attention_score_flop(model: ModelSpec, sequences: float) -> float: ...
@overload
def attention_score_flop(model: ModelSpec, sequences: npt.NDArray[Any]) -> npt.NDArray[Any]: ...
def attention_score_flop(model: ModelSpec, sequences: float | npt.NDArray[Any]) -> float | npt.NDArray[Any]:
    """QK^T and AV over the full s x s matrix: 2 b s^2 heads (d_qk + d_v), 4 b s^2 q when the query/key and
    value heads are one width (q = heads x head_dim, = h unless head_dim is set; Narayanan 2021 Eq. 3's
    s/(6h) term); under MLA d_qk = qk_head_dim + qk_pos_emb_head_dim and d_v = v_head_dim (Megatron-LM
    `num_floating_point_operations`, MLA branch); no weights.

    What an unfused (non-flash) kernel computes, masked or not, and the convention
    of the 2021/2022 papers' TFLOP/s (`flops.hardware_flop_per_sequence(full_attention=True)`).
    """
    widths = model.query_width + model.attention_hidden_size
    return 2 * sequences * model.seq_length**2 * widths


def windowed_fraction(window: int, seq_length: int) -> float:
    """Share of the s x s score matrix a causal sliding window of w keys (the query itself included) covers:
    query i attends min(i + 1, w) keys, so over the sequence, in the continuum limit that `CAUSAL_FRACTION`
    takes too, w/s - w^2/(2 s^2) for w < s and 1/2 (causal) from w = s on; the two agree at w = s.
    The fused kernels skip the blocks outside the band as their causal mask skips those above the diagonal
    (Dao 2023, arXiv 2307.08691, Sec. 3.1.1; flash-attn's `window_size`, local attention from v2.3, and Transformer
    Engine's `DotProductAttention(window_size=...)`, which Megatron-Core passes `--window-size` to), and
    Megatron-Bridge's flop count for windowed layers scales with min(window, s) likewise
    (`training/utils/flop_utils.py`, `swa_context`). The partly masked tiles along the band's edges are not
    counted: with GPT-OSS's 128-key window and 128-wide tiles a kernel touches about twice the band, which leaves
    out some 6% of that model's attention-core work (its full layers carry the rest)."""
    if window >= seq_length:
        return CAUSAL_FRACTION
    return window / seq_length - window**2 / (2 * seq_length**2)


def attention_core_fraction(model: ModelSpec) -> float:
    """Share of the s x s score matrix the average layer's attention core computes: `CAUSAL_FRACTION` in a
    full-attention layer, `windowed_fraction` in a sliding-window one (`ModelSpec.num_window_layers` of the
    `num_layers`; Megatron-Core `is_layer_window_attention`), none in a hybrid's layers without attention
    (`ModelSpec.attention_layer_share`; hybrids have no sliding window)."""
    windowed = model.num_window_layers
    if not windowed or model.sliding_window is None:
        return model.attention_layer_share * CAUSAL_FRACTION
    band = windowed_fraction(model.sliding_window, model.seq_length)
    return (windowed * band + (model.num_layers - windowed) * CAUSAL_FRACTION) / model.num_layers


@overload
def attention_core_flop(model: ModelSpec, sequences: float) -> float: ...
@overload
def attention_core_flop(model: ModelSpec, sequences: npt.NDArray[Any]) -> npt.NDArray[Any]: ...
def attention_core_flop(model: ModelSpec, sequences: float | npt.NDArray[Any]) -> float | npt.NDArray[Any]:
    """The causal attention core: `CAUSAL_FRACTION` of `attention_score_flop`, 2 b s^2 h, or under sliding-window
    attention the layers' average share of it (`attention_core_fraction`).

    The model-flop (MFU) convention of Megatron-LM and NeMo today, and what a
    causal fused kernel computes, so time and hardware flop count the same work. Windowed layers follow
    Megatron-Bridge's count (the band); Megatron-LM's `num_floating_point_operations` counts every layer as full
    causal attention, so its MFU of a windowed model reads higher than this one's.
    """
    return attention_core_fraction(model) * attention_score_flop(model, sequences)
