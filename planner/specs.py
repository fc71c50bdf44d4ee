"""Input specs: the model's shape, the training setup and the runtime features.

Each is a frozen pydantic model that rejects unknown keys, so every input is
checked once, here, with an error that names the field and the rule.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, model_validator

__all__ = [
    "AdamMoments",
    "AttentionKernel",
    "BackwardPrefetch",
    "CudaGraphScope",
    "ExpertGemm",
    "MoeDispatcher",
    "Fp8Recipe",
    "GradientLayout",
    "MAX_HIDDEN_SIZE",
    "MAX_LAYERS",
    "MAX_SEQ_LENGTH",
    "HYBRID_LAYER_SYMBOLS",
    "MLASpec",
    "MambaSpec",
    "ModelSpec",
    "MoESpec",
    "Precision",
    "QUANTIZED_PRECISIONS",
    "Recompute",
    "RecomputeModule",
    "RouterLoadBalancing",
    "RouterScoreFunction",
    "RuntimeFeatures",
    "TrainingSpec",
]

MAX_LAYERS = 1_024
MAX_HIDDEN_SIZE = 131_072
MAX_SEQ_LENGTH = 4_194_304
MAX_VOCAB = 4_194_304
MAX_GLOBAL_BATCH = 1_048_576

_FROZEN = ConfigDict(frozen=True, extra="forbid", strict=True)
"""Strict: an integer field takes a JSON integer, not `"8"`, `8.0` or `true`; enum fields opt out of
strictness only so that their string values validate from Python dicts too."""


class Precision(StrEnum):
    """Training number format of the matrix multiplications."""

    BF16 = "bf16"
    """bfloat16 weights and activations, fp32 gradients and Adam states (Megatron default)."""
    FP16 = "fp16"
    """float16 with loss scaling, as in Narayanan et al. 2021."""
    FP8 = "fp8"
    """FP8 GEMMs (Transformer Engine); weights, gradients and states as for bf16."""
    NVFP4 = "nvfp4"
    """NVFP4 GEMMs (Transformer Engine `NVFP4BlockScaling`: E2M1 values, one E4M3 scale per 16 elements and an
    fp32 scale per tensor; Megatron-LM `--fp4-format e2m1 --fp4-recipe nvfp4`, Megatron-Bridge
    `bf16_with_nvfp4_mixed`), on GPUs with FP4 tensor cores (Blackwell); the linear layers as FP8 runs them, the
    rest in bf16; weights, gradients and states as for bf16."""


QUANTIZED_PRECISIONS = frozenset({Precision.FP8, Precision.NVFP4})
"""Precisions whose transformer layers' linear GEMMs Transformer Engine quantizes (the rest stays bf16)."""


class Recompute(StrEnum):
    """Activation recomputation (Korthikanti et al. 2022, arXiv 2205.05198)."""

    NONE = "none"
    """Keep every activation."""
    SELECTIVE = "selective"
    """Recompute the attention core (softmax, dropout, QK^T, AV) only (Korthikanti Sec. 5)."""
    FULL = "full"
    """Keep each layer's input; recompute the whole layer in backward (Narayanan Sec. 3.5)."""


class RecomputeModule(StrEnum):
    """A submodule selective recomputation reruns in backward instead of keeping its activations (Megatron-Core
    `TransformerConfig.recompute_modules`, `--recompute-modules`; the seven names every release from core_v0.15.0
    to core_v0.19.0 accepts). Normal checkpointing keeps the module's input and drops what it saves inside;
    output-discarding checkpointing (layernorm, moe_act, mla_up_proj) also drops its output. What each drops and
    reruns is `costmodel.recompute`'s to say and `costmodel.memory` / `costmodel.compute`'s to price."""

    CORE_ATTN = "core_attn"
    """The attention core (Korthikanti et al. 2022, arXiv 2205.05198, Sec. 5): Megatron-Core's default."""
    MLA_UP_PROJ = "mla_up_proj"
    """Multi-latent attention's up-projections and RoPE: Q, K and V are rebuilt from the latents."""
    LAYERNORM = "layernorm"
    """The norms that are modules of their own (not fused into the next linear layer): an MoE layer's pre-MLP norm,
    whose output feeds the router and the experts, and under MLA the input norm ahead of the down-projections."""
    MLP = "mlp"
    """The dense MLP (fc1, activation, fc2): only its input is kept."""
    MOE_ACT = "moe_act"
    """The routed experts' activation function: fc2's input is rebuilt from fc1's output."""
    MOE = "moe"
    """The whole MoE layer: router, dispatch, experts and combine rerun from the layer's input, all-to-alls
    included."""
    SHARED_EXPERTS = "shared_experts"
    """The MoE layer's shared experts."""


class RouterScoreFunction(StrEnum):
    """How the router turns its logits into expert scores (Megatron-Core `--moe-router-score-function`)."""

    SOFTMAX = "softmax"
    """Mixtral, Qwen2/3-MoE, DeepSeek-V2."""
    SIGMOID = "sigmoid"
    """DeepSeek-V3 (arXiv 2412.19437 Sec. 2.1.2, Eq. 15), Llama 4 (Hugging Face `Llama4TextMoe`)."""


class RouterLoadBalancing(StrEnum):
    """The auxiliary load-balancing loss the router trains with (Megatron-Core `--moe-router-load-balancing-type`,
    `transformer_config.py` `moe_router_load_balancing_type`)."""

    AUX_LOSS = "aux_loss"
    """Switch Transformer / GShard loss over each micro-batch (Fedus et al. 2021, arXiv 2101.03961, Eq. 4): Mixtral,
    and every Hugging Face model that trains with `router_aux_loss_coef`."""
    SEQ_AUX_LOSS = "seq_aux_loss"
    """The same loss over each sequence (DeepSeek-V3, arXiv 2412.19437, Sec. 2.1.2, Eq. 17-20; Hugging Face
    DeepSeek `seq_aux` true)."""
    GLOBAL_AUX_LOSS = "global_aux_loss"
    """The loss over the global batch (Qiu et al. 2025, arXiv 2501.11873; Qwen3, arXiv 2505.09388, Sec. 2)."""
    NONE = "none"
    """No auxiliary loss."""


class MoESpec(BaseModel):
    """Mixture-of-experts block that replaces the dense MLP in MoE layers.

    The `router_*` fields say how tokens choose their experts. They change what a launch trains, not what a step
    costs (routing is priced balanced, as NVIDIA's MoE benchmarks force it), so the planner only checks them and
    passes them to every launch. Names follow Megatron-Core's `--moe-router-*` flags.
    """

    model_config = _FROZEN

    num_experts: int = Field(ge=1, le=4096, description="Routed experts per MoE layer.")
    top_k: int = Field(ge=1, le=64, description="Routed experts each token is sent to.")
    expert_ffn_hidden_size: int = Field(ge=1, le=MAX_HIDDEN_SIZE * 8, description="FFN width of one expert.")
    num_shared_experts: int = Field(default=0, ge=0, le=64, description="Experts every token also passes.")
    moe_layer_freq: int = Field(default=1, ge=1, le=MAX_LAYERS, description="Every k-th layer is MoE (1 = all).")
    first_k_dense_layers: int = Field(
        default=0, ge=0, le=MAX_LAYERS, description="Leading layers that keep a dense MLP (DeepSeek-V3: 3)."
    )

    router_score_function: RouterScoreFunction = Field(
        default=RouterScoreFunction.SOFTMAX,
        strict=False,
        description="softmax (Mixtral, Qwen) or sigmoid (DeepSeek-V3, Llama 4) scores over the experts.",
    )
    router_pre_softmax: bool = Field(
        default=False,
        description="Softmax over all experts before the top-k, the chosen weights not renormalised (DeepSeek-V2,"
        " Qwen2-MoE: Hugging Face norm_topk_prob false); false: a softmax over the chosen top_k logits (Mixtral,"
        " Qwen3). A softmax router with top_k 1 always takes it before: over one logit it is constant, with no"
        " gradient, and Megatron-Core refuses it. Softmax routers only.",
    )
    router_expert_bias: bool = Field(
        default=False,
        description="Auxiliary-loss-free load balancing: a per-expert bias added to the scores when choosing the"
        " top_k, updated from the experts' loads (DeepSeek-V3, arXiv 2412.19437 Sec. 2.1.2; Hugging Face"
        " topk_method noaux_tc). Sigmoid routers only, as in Megatron-Core.",
    )
    router_num_groups: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="Group-limited routing: the experts in this many equal groups, each token choosing among"
        " router_group_topk of them (DeepSeek-V3: 8 groups, 4 per token; Hugging Face n_group). Null: no groups.",
    )
    router_group_topk: int | None = Field(
        default=None, ge=1, le=4096, description="Groups each token's experts come from (Hugging Face topk_group)."
    )
    router_topk_scaling_factor: float | None = Field(
        default=None,
        gt=0,
        le=1e4,
        description="Factor on the routed experts' weights (DeepSeek-V3 2.5; Hugging Face routed_scaling_factor)."
        " Null: 1.",
    )
    router_score_before_experts: bool = Field(
        default=False,
        description="Scale each token by its router weight before the expert rather than the expert's output after"
        " (Llama 4, Hugging Face Llama4TextMoe; Megatron-Core --moe-apply-probs-on-input, TorchTitan"
        " score_before_experts). top_k 1 only, as in Megatron-Core.",
    )
    router_load_balancing: RouterLoadBalancing = Field(
        default=RouterLoadBalancing.AUX_LOSS,
        strict=False,
        description="The auxiliary load-balancing loss: aux_loss (per micro-batch: Mixtral), seq_aux_loss (per"
        " sequence: DeepSeek-V3), global_aux_loss (per global batch: Qwen3) or none. Megatron-Core's default,"
        " aux_loss, weighs nothing until router_aux_loss_coeff is set.",
    )
    router_aux_loss_coeff: float = Field(
        default=0.0,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="Weight of that loss in the training loss (Mixtral 0.02, Qwen3 0.001, DeepSeek-V3 0.0001;"
        " Hugging Face router_aux_loss_coef / aux_loss_alpha). 0, Megatron-Core's default: the router trains"
        " unbalanced unless router_expert_bias balances it.",
    )

    @model_validator(mode="after")
    def _top_k_fits(self) -> Self:
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k({self.top_k}) must be <= num_experts({self.num_experts})")
        return self

    @model_validator(mode="after")
    def _router_is_consistent(self) -> Self:
        """What Megatron-Core's TransformerConfig checks of the router, and group routing's arithmetic."""
        sigmoid = self.router_score_function is RouterScoreFunction.SIGMOID
        if self.router_expert_bias and not sigmoid:
            raise ValueError("router_expert_bias needs router_score_function sigmoid (as Megatron-Core requires)")
        if self.router_pre_softmax and sigmoid:
            raise ValueError("router_pre_softmax applies to a softmax router; router_score_function is sigmoid")
        if self.router_score_before_experts and self.top_k != 1:
            raise ValueError(f"router_score_before_experts needs top_k 1 (as Megatron-Core requires), got {self.top_k}")
        if self.router_load_balancing is RouterLoadBalancing.NONE and self.router_aux_loss_coeff > 0:
            raise ValueError(
                f"router_aux_loss_coeff({self.router_aux_loss_coeff}) weighs no loss: router_load_balancing is none"
            )
        groups, chosen = self.router_num_groups, self.router_group_topk
        if (groups is None) != (chosen is None):
            raise ValueError("router_num_groups and router_group_topk are set together or not at all")
        if groups is not None and chosen is not None:
            if self.num_experts % groups:
                raise ValueError(f"router_num_groups({groups}) must divide num_experts({self.num_experts})")
            if chosen > groups:
                raise ValueError(f"router_group_topk({chosen}) must be <= router_num_groups({groups})")
            if self.top_k % chosen:
                raise ValueError(
                    f"top_k({self.top_k}) must be a multiple of router_group_topk({chosen}): a group's score is the"
                    " sum of its best top_k / router_group_topk experts' (Megatron-Core group_limited_topk)"
                )
            if self.top_k > chosen * (self.num_experts // groups):
                raise ValueError(
                    f"top_k({self.top_k}) must be <= router_group_topk({chosen}) x experts per group"
                    f" ({self.num_experts // groups})"
                )
        return self

    @property
    def router_softmax_before_topk(self) -> bool:
        """A softmax router that takes the softmax over all experts before the top-k: as stated, and always with
        top_k 1 (`router_pre_softmax`; Megatron-Core's TransformerConfig raises "Please use
        --moe-router-pre-softmax when topk is 1" otherwise)."""
        softmax = self.router_score_function is RouterScoreFunction.SOFTMAX
        return softmax and (self.router_pre_softmax or self.top_k == 1)

    @property
    def router_balancing_unweighted(self) -> bool:
        """A load-balancing loss is named but weighs nothing, and no expert bias balances the experts' loads:
        Megatron-Core's defaults (aux_loss at coefficient 0, no bias), not a stated `none`."""
        named = self.router_load_balancing is not RouterLoadBalancing.NONE
        return named and self.router_aux_loss_coeff == 0 and not self.router_expert_bias


class MLASpec(BaseModel):
    """Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2, arXiv 2405.04434, Sec. 2.1): queries and keys /
    values pass low-rank latents, and each head's query and key carry a decoupled RoPE part.

    Field names are Megatron-Core's (`MLATransformerConfig`; Hugging Face: q_lora_rank, kv_lora_rank,
    qk_nope_head_dim, qk_rope_head_dim, v_head_dim). DeepSeek-V3: 1536, 512, 128, 64, 128 (its config.json).
    """

    model_config = _FROZEN

    q_lora_rank: int | None = Field(
        default=None,
        ge=1,
        le=MAX_HIDDEN_SIZE,
        description="Query latent width; null: queries project from the hidden state.",
    )
    kv_lora_rank: int = Field(ge=1, le=MAX_HIDDEN_SIZE, description="Key/value latent width.")
    qk_head_dim: int = Field(ge=1, le=4096, description="Per-head query/key width without RoPE (qk_nope_head_dim).")
    qk_pos_emb_head_dim: int = Field(
        ge=0, le=4096, description="Per-head query/key RoPE width, one key RoPE part shared by all heads."
    )
    v_head_dim: int = Field(ge=1, le=4096, description="Per-head value width (and of the attention output).")

    @property
    def query_key_head_dim(self) -> int:
        """A head's query (and key) width: the latent part plus the RoPE part."""
        return self.qk_head_dim + self.qk_pos_emb_head_dim


class MambaSpec(BaseModel):
    """The Mamba-2 mixer of a hybrid model's Mamba layers (Dao and Gu 2024, "Transformers are SSMs", arXiv
    2405.21060, Sec. 7 and Fig. 6: one input projection to z, x, B, C and dt, a causal depthwise convolution over
    x, B and C, the SSD scan, a gated RMSNorm and the output projection).

    Field names follow Megatron-LM's flags (`--mamba-state-dim`, `--mamba-head-dim`, `--mamba-num-groups`,
    `--mamba-num-heads`; Megatron-Core `MambaMixer`); Hugging Face's NemotronH config calls them ssm_state_size,
    mamba_head_dim, n_groups, mamba_num_heads and conv_kernel. Nemotron-H 8B: 128, 64, 8, 128 heads, kernel 4.
    """

    model_config = _FROZEN

    state_dim: int = Field(default=128, ge=1, le=4096, description="SSM state size N per head (d_state).")
    head_dim: int = Field(default=64, ge=1, le=4096, description="Channels P of one SSM head.")
    num_groups: int = Field(
        default=8, ge=1, le=4096, description="Groups sharing one B and C (like GQA's key/value groups)."
    )
    num_heads: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        description="SSM heads; the mixer's inner width is num_heads x head_dim. Null: 2 hidden_size / head_dim"
        " (Megatron-Core's expand 2).",
    )
    conv_kernel: int = Field(default=4, ge=1, le=64, description="Width of the causal depthwise convolution (d_conv).")


HYBRID_LAYER_SYMBOLS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
"""One character per layer of `ModelSpec.hybrid_pattern`, as Megatron-LM's `--hybrid-override-pattern` spells it
(`megatron/core/ssm/mamba_hybrid_layer_allocation.py` `Symbols`: M Mamba, * attention, - MLP, E MoE)."""


_DEFAULTED = ("num_query_groups", "ffn_hidden_size", "head_dim")
"""ModelSpec fields that may be omitted or null: `ModelSpec._defaults` fills them before validation."""


def _defaulted_in_schema(schema: dict[str, Any]) -> None:
    """State in the JSON schema what `_defaults` accepts: the defaulted fields are optional and nullable."""
    schema["required"] = [k for k in schema.get("required", []) if k not in _DEFAULTED]
    for key in _DEFAULTED:
        prop = schema["properties"][key]
        description = prop.pop("description", None)
        title = prop.pop("title", key)
        schema["properties"][key] = {"anyOf": [prop, {"type": "null"}], "default": None, "title": title} | (
            {"description": description} if description else {}
        )


class ModelSpec(BaseModel):
    """A decoder-only transformer's shape. Omitted optional sizes take GPT defaults."""

    model_config = _FROZEN | ConfigDict(json_schema_extra=_defaulted_in_schema)

    name: str | None = Field(default=None, max_length=100, description="Label only; never changes the math.")
    num_layers: int = Field(ge=1, le=MAX_LAYERS, description="Transformer layers (l in Narayanan 2021).")
    hidden_size: int = Field(ge=1, le=MAX_HIDDEN_SIZE, description="Model width (h).")
    num_attention_heads: int = Field(ge=1, le=4096, description="Query heads (a).")
    num_query_groups: int = Field(ge=1, le=4096, description="Key/value heads for GQA; default = heads (MHA).")
    head_dim: int = Field(
        ge=1,
        le=4096,
        description="Width of one attention head (Megatron-LM --kv-channels, Hugging Face head_dim); default"
        " hidden_size / num_attention_heads. Qwen3 sets 128 at every size (Qwen3-235B-A22B: hidden 4096, 64 heads).",
    )
    ffn_hidden_size: int = Field(ge=1, le=MAX_HIDDEN_SIZE * 8, description="Dense MLP width; default 4*hidden.")
    gated_mlp: bool = Field(default=False, description="SwiGLU-style MLP with three matrices.")
    vocab_size: int = Field(ge=1, le=MAX_VOCAB, description="Vocabulary (V), padded as trained.")
    seq_length: int = Field(ge=1, le=MAX_SEQ_LENGTH, description="Tokens per sequence (s).")
    tied_embeddings: bool = Field(default=False, description="Output layer shares the input embedding.")
    linear_bias: bool = Field(
        default=False, description="GPT-2/3 style: biases on linear layers and LayerNorm (else RMSNorm, no bias)."
    )
    learned_position_embeddings: bool = Field(
        default=False, description="A learned (seq_length x hidden) position table (GPT-3); else RoPE."
    )
    qk_layernorm: bool = Field(
        default=False,
        description="A norm over each attention head's query and key before RoPE (Qwen3's QK-norm;"
        " Megatron-LM --qk-layernorm, Hugging Face Qwen3 q_norm / k_norm): head_dim-wide weights shared by the"
        " heads, one more memory-bound pass over Q and K and their saved inputs. Under mla the latent norms are"
        " always priced (DeepSeek-V2/V3 have them) and this changes nothing.",
    )
    sliding_window: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQ_LENGTH,
        description="Sliding-window attention: the keys a query attends to in a windowed layer, itself included"
        " (Hugging Face sliding_window; Megatron-LM --window-size (sliding_window - 1, 0)); null: every layer attends"
        " to its whole causal prefix. GPT-OSS: 128, in every other layer (sliding_window_pattern 2).",
    )
    sliding_window_pattern: int | None = Field(
        default=None,
        ge=2,
        le=MAX_LAYERS,
        description="With sliding_window: every N-th layer (layers N, 2N, ... counted from 1) attends fully and the"
        " others through the window (Megatron-LM --window-attn-skip-freq N, Hugging Face Gemma's"
        " sliding_window_pattern; GPT-OSS 2, Gemma 3 6); null: every layer is windowed.",
    )
    moe: MoESpec | None = Field(default=None, description="Mixture-of-experts block; null for a dense model.")
    mtp_num_layers: int = Field(
        default=0,
        ge=0,
        le=16,
        description="Multi-token prediction depth (DeepSeek-V3: 1; Megatron-LM --mtp-num-layers): each MTP module is"
        " one more transformer layer, a 2h -> h projection and a second output head and loss on the last stage.",
    )
    mla: MLASpec | None = Field(
        default=None,
        description="Multi-head latent attention (DeepSeek-V2/V3); null: multi-head or grouped-query attention."
        " With it head_dim is the value head width (default mla.v_head_dim) and num_query_groups equals the heads.",
    )
    hybrid_pattern: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LAYERS,
        pattern=r"^[M*E-]+$",
        description="A hybrid model's layers, one character each (Megatron-LM --hybrid-override-pattern): M a Mamba-2"
        " mixer (`mamba`), * self-attention, - a dense MLP, E an MoE block (`moe`); each layer holds that one block"
        " behind its own norm and residual. Its length is num_layers. Null: every layer is a transformer layer"
        " (attention and an MLP or MoE block). Nemotron-H 8B: 52 layers, 24 M, 4 *, 24 -.",
    )
    mamba: MambaSpec | None = Field(
        default=None, description="The Mamba-2 mixer of hybrid_pattern's M layers; null when it has none."
    )

    @model_validator(mode="wrap")
    @classmethod
    def _defaults(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Fill the omitted defaulted sizes; they stay out of `model_fields_set`, which then holds what was given."""
        filled: set[str] = set()
        if isinstance(data, dict):
            data = dict(data)
            if data.get("num_query_groups") is None and "num_attention_heads" in data:
                data["num_query_groups"] = data["num_attention_heads"]
                filled.add("num_query_groups")
            if data.get("ffn_hidden_size") is None and isinstance(data.get("hidden_size"), int):
                data["ffn_hidden_size"] = 4 * data["hidden_size"]
                filled.add("ffn_hidden_size")
            mla = data.get("mla")
            if data.get("head_dim") is None and isinstance(mla, dict) and type(mla.get("v_head_dim")) is int:
                data["head_dim"] = mla["v_head_dim"]
                filled.add("head_dim")
            elif data.get("head_dim") is None and isinstance(mla, MLASpec):
                data["head_dim"] = mla.v_head_dim
                filled.add("head_dim")
            if data.get("head_dim") is None:
                h, a = data.get("hidden_size"), data.get("num_attention_heads")
                if type(h) is int and type(a) is int and a >= 1 and h >= 1:
                    if h % a:
                        raise ValueError(
                            f"hidden_size({h}) % num_attention_heads({a}) = {h % a}, must be 0 unless head_dim is given"
                        )
                    data["head_dim"] = h // a
                    filled.add("head_dim")
        model = handler(data)
        if filled:
            object.__setattr__(model, "__pydantic_fields_set__", model.model_fields_set - filled)
        return model

    @model_validator(mode="after")
    def _shape_rules(self) -> Self:
        a, g = self.num_attention_heads, self.num_query_groups
        if a * self.head_dim > MAX_HIDDEN_SIZE:
            raise ValueError(
                f"num_attention_heads({a}) * head_dim({self.head_dim}) = {a * self.head_dim}, must be at most"
                f" {MAX_HIDDEN_SIZE} (the attention's width is bounded like hidden_size)"
            )
        if a % g:
            raise ValueError(f"num_attention_heads({a}) % num_query_groups({g}) = {a % g}, must be 0")
        if self.mla is not None and self.head_dim != self.mla.v_head_dim:
            raise ValueError(
                f"head_dim({self.head_dim}) must equal mla.v_head_dim({self.mla.v_head_dim}) or be omitted: under"
                " multi-latent attention the heads' widths are mla's"
            )
        if self.mla is not None and g != a:
            raise ValueError(
                f"num_query_groups({g}) must equal num_attention_heads({a}) under multi-latent attention: every head"
                " has its own key and value (Megatron-LM refuses --group-query-attention with MLA)"
            )
        if self.sliding_window_pattern is not None and self.sliding_window is None:
            raise ValueError(
                f"sliding_window_pattern({self.sliding_window_pattern}) needs sliding_window: it says which layers"
                " attend fully among windowed ones"
            )
        self._hybrid_rules()
        if self.moe is not None and self.moe.first_k_dense_layers > self.num_layers:
            raise ValueError(
                f"moe.first_k_dense_layers({self.moe.first_k_dense_layers}) > num_layers({self.num_layers})"
            )
        return self

    def _hybrid_rules(self) -> None:
        """What Megatron-LM's hybrid model (`MambaModel`, `--hybrid-override-pattern`) and this planner's pricing of
        it accept."""
        pattern = self.hybrid_pattern
        if pattern is None:
            if self.mamba is not None:
                raise ValueError("mamba needs hybrid_pattern: it says which layers are Mamba layers")
            return
        if len(pattern) != self.num_layers:
            raise ValueError(f"hybrid_pattern has {len(pattern)} layers, must equal num_layers({self.num_layers})")
        if ("M" in pattern) != (self.mamba is not None):
            raise ValueError(
                "hybrid_pattern has Mamba layers (M) but mamba is null"
                if self.mamba is None
                else "mamba is set but hybrid_pattern has no Mamba layer (M)"
            )
        if ("E" in pattern) != (self.moe is not None):
            raise ValueError(
                "hybrid_pattern has MoE layers (E) but moe is null"
                if self.moe is None
                else "moe is set but hybrid_pattern has no MoE layer (E)"
            )
        if self.moe is not None and (self.moe.moe_layer_freq != 1 or self.moe.first_k_dense_layers):
            raise ValueError(
                "moe.moe_layer_freq and moe.first_k_dense_layers must keep their defaults with hybrid_pattern: the"
                " pattern's E layers are the MoE layers"
            )
        for field, given in (
            ("sliding_window", self.sliding_window is not None),
            ("mla", self.mla is not None),
            ("mtp_num_layers", self.mtp_num_layers > 0),
        ):
            if given:
                raise ValueError(f"{field} is not supported with hybrid_pattern (not priced for hybrid models)")
        if self.mamba is not None:
            heads, groups = self.mamba_num_heads, self.mamba.num_groups
            if heads % groups:
                raise ValueError(f"mamba num_heads({heads}) % num_groups({groups}) = {heads % groups}, must be 0")

    def _layers_of(self, symbol: str) -> int:
        """Layers of `hybrid_pattern` holding `symbol`'s block."""
        return 0 if self.hybrid_pattern is None else self.hybrid_pattern.count(symbol)

    @property
    def mamba_num_heads(self) -> int:
        """SSM heads of a Mamba layer: `mamba.num_heads`, or 2 hidden_size / head_dim (Megatron-Core `MambaMixer`,
        expand 2); 0 without Mamba layers."""
        if self.mamba is None:
            return 0
        return self.mamba.num_heads or max(1, 2 * self.hidden_size // self.mamba.head_dim)

    @property
    def mamba_inner_size(self) -> int:
        """A Mamba layer's inner width d_inner = SSM heads x head_dim (x in Dao and Gu 2024 Fig. 6); 0 without."""
        return 0 if self.mamba is None else self.mamba_num_heads * self.mamba.head_dim

    @property
    def num_attention_layers(self) -> int:
        """Layers holding self-attention: every layer of a transformer, the * layers of a hybrid."""
        return self.num_layers if self.hybrid_pattern is None else self._layers_of("*")

    @property
    def num_mamba_layers(self) -> int:
        """A hybrid's Mamba (M) layers; 0 for a transformer."""
        return self._layers_of("M")

    @property
    def attention_layer_share(self) -> float:
        """Share of the layers holding attention: 1 for a transformer."""
        return self.num_attention_layers / self.num_layers

    @property
    def mamba_layer_share(self) -> float:
        """Share of the layers holding a Mamba mixer: 0 for a transformer."""
        return self.num_mamba_layers / self.num_layers

    @property
    def moe_layer_share(self) -> float:
        """Share of the layers holding an MoE block."""
        return self.num_moe_layers / self.num_layers

    @property
    def dense_mlp_share(self) -> float:
        """Share of the layers holding a dense MLP."""
        return self.num_dense_layers / self.num_layers

    @property
    def blocks_per_layer(self) -> float:
        """Blocks (attention, Mamba mixer, MLP or MoE), each behind its own norm and residual add, in the average
        layer: 2 for a transformer layer (attention and an MLP), 1 in a hybrid (Megatron-Core `MambaModel`'s
        layers each wrap one block)."""
        return self.attention_layer_share + self.mamba_layer_share + self.moe_layer_share + self.dense_mlp_share

    @property
    def attention_hidden_size(self) -> int:
        """Width of the attention output (the output projection's input): heads x head dim (hidden_size unless
        head_dim is set; heads x mla.v_head_dim under MLA). Also Q's width without MLA."""
        return self.num_attention_heads * self.head_dim

    @property
    def kv_hidden_size(self) -> int:
        """Width of K (and of V) without MLA: query groups x head dim."""
        return self.num_query_groups * self.head_dim

    @property
    def qk_norm_width(self) -> int:
        """Width per token that `qk_layernorm`'s norms read and write, all heads: Q (heads x head_dim) and K
        (query groups x head_dim); zero without it or under MLA, whose latent norms are priced on their own."""
        if not self.qk_layernorm or self.mla is not None:
            return 0
        return self.attention_hidden_size + self.kv_hidden_size

    @property
    def attention_norm_widths(self) -> tuple[int, ...]:
        """Widths of the attention's own norms, one kernel each: under MLA its latent RMSNorms (the query latent's,
        absent without one, and the key/value latent's; Megatron-Core `MLASelfAttention` `q_layernorm`,
        `kv_layernorm`), else with `qk_layernorm` the query and the key norm, head_dim wide and shared by the heads
        (Megatron-Core `SelfAttention` `q_layernorm` / `k_layernorm`); none otherwise."""
        if self.mla is not None:
            query = () if self.mla.q_lora_rank is None else (self.mla.q_lora_rank,)
            return (*query, self.mla.kv_lora_rank)
        return (self.head_dim, self.head_dim) if self.qk_layernorm else ()

    @property
    def query_key_head_dim(self) -> int:
        """One head's query and key width: head_dim, or under MLA its latent part plus its RoPE part."""
        return self.head_dim if self.mla is None else self.mla.query_key_head_dim

    @property
    def query_width(self) -> int:
        """Width of Q per token, all heads: heads x `query_key_head_dim`."""
        return self.num_attention_heads * self.query_key_head_dim

    @property
    def key_value_width(self) -> int:
        """Width of K plus V per token, all heads, as the attention core reads them (and context parallelism
        exchanges them): 2 kv_hidden, or under MLA the up-projected heads x (query_key_head_dim + v_head_dim)."""
        if self.mla is None:
            return 2 * self.kv_hidden_size
        return self.num_attention_heads * (self.mla.query_key_head_dim + self.mla.v_head_dim)

    @property
    def num_window_layers(self) -> int:
        """Layers that attend through `sliding_window`: all of them, or all but every `sliding_window_pattern`-th
        (Megatron-Core `is_layer_window_attention`: layer n, counted from 1, is full iff n % N == 0); 0 without a
        window."""
        if self.sliding_window is None:
            return 0
        if self.sliding_window_pattern is None:
            return self.num_layers
        return self.num_layers - self.num_layers // self.sliding_window_pattern

    @property
    def num_moe_layers(self) -> int:
        """Layers holding an MoE block: a hybrid's E layers, else by first_k_dense_layers and moe_layer_freq."""
        if self.moe is None:
            return 0
        if self.hybrid_pattern is not None:
            return self._layers_of("E")
        eligible = range(self.moe.first_k_dense_layers, self.num_layers)
        return sum(1 for i in eligible if (i - self.moe.first_k_dense_layers) % self.moe.moe_layer_freq == 0)

    @property
    def num_dense_layers(self) -> int:
        """Layers holding a dense MLP: a hybrid's - layers, else every layer that is not MoE."""
        if self.hybrid_pattern is not None:
            return self._layers_of("-")
        return self.num_layers - self.num_moe_layers


class AttentionKernel(StrEnum):
    """The fused attention kernel that runs the attention core (with `RuntimeFeatures.flash_attention`)."""

    CUDNN = "cudnn"
    """cuDNN's fused attention: what Transformer Engine's DotProductAttention runs on Hopper (Megatron-Core,
    NeMo)."""
    FLASH2 = "flash2"
    """FlashAttention-2 (Dao 2023, arXiv 2307.08691): the flash-attn package and PyTorch SDPA's flash backend,
    as PyTorch FSDP stacks without Transformer Engine run it."""
    FLASH1 = "flash1"
    """FlashAttention (v1; Dao et al. 2022, arXiv 2205.14135): the flash-attn 1.x CUDA kernels and their Triton
    port, which MosaicML llm-foundry runs as `attn_impl: triton` (`llmfoundry/models/layers/flash_attn_triton.py`:
    its forward is faster than the CUDA v1 kernel's, its backward slower, fwd+bwd "slightly slower")."""


class MoeDispatcher(StrEnum):
    """How an MoE layer's tokens reach their experts' ranks and come back (Megatron-Core
    `moe_token_dispatcher_type`, and `moe_flex_dispatcher_backend` for the flex dispatcher). What each sends is
    `costmodel.expert_dispatch`'s to price."""

    ALLTOALL = "alltoall"
    """Megatron-Core's all-to-all dispatcher (`moe_token_dispatcher_type alltoall`): one copy of a token per
    routed expert, each to its expert's rank, through NCCL's all-to-all (TorchTitan's default too)."""
    DEEPEP = "deepep"
    """The flex dispatcher over DeepEP (DeepSeek-AI, github.com/deepseek-ai/DeepEP; the DeepSeek-V3 report,
    arXiv 2412.19437, Sec. 3.2.2): a token crosses the network once per destination node, to the rank of its
    own rail there, which forwards it over NVLink once per destination GPU."""
    HYBRIDEP = "hybridep"
    """The flex dispatcher over HybridEP (NVIDIA's, DeepEP's hybrid-ep branch): DeepEP's per-node and per-GPU
    deduplication, and the only backend that spans a multi-node NVLink domain (GB200 NVL72; Megatron-Core
    `moe_flex_dispatcher_backend` docstring)."""


class CudaGraphScope(StrEnum):
    """What CUDA graphs capture, with `RuntimeFeatures.cuda_graphs` (Megatron-Core `cuda_graph_impl` and
    `cuda_graph_scope`). It sets which kernels the host still launches (`costmodel.host`)."""

    MODULES = "modules"
    """Transformer Engine graphs per module (`cuda_graph_impl transformer_engine`): every layer of a dense model;
    in an MoE model the attention, router and dispatch preprocessing (`attn moe_router moe_preprocess`, as
    NVIDIA's MoE recipes set it), the dropless expert section running eagerly."""
    FULL_ITERATION = "full_iteration"
    """Megatron-Core's whole forward-backward graph (`cuda_graph_impl local`, `cuda_graph_scope full_iteration`):
    everything replayed, the expert section included (Megatron-Bridge's GB200 Qwen3 30B-A3B MXFP8 recipe)."""


class ExpertGemm(StrEnum):
    """How one GPU runs its local experts' GEMMs (one weight of every local expert at a time). What each costs is
    `costmodel.compute`'s and `costmodel.host`'s to price."""

    MULTI_STREAM = "multi_stream"
    """Transformer Engine's `GroupedLinear` (Megatron-Core `--moe-grouped-gemm`, `TEGroupedMLP`): one cuBLAS GEMM
    per local expert, issued round-robin on TE's 4 compute streams, which measured take about as long as if they
    ran one after another, each paying its kernel's fixed time and launch (`costmodel.host.expert_gemm_concurrency`
    cites the measurements; TE `transformer_engine/common/gemm/cublaslt_gemm.cu`
    `multi_stream_cublas_gemm`, `common/util/multi_stream.cpp` `num_compute_streams = 4`; TE 2.x, the cuBLAS path
    `nvte_multi_tensor_gemm` takes unless `NVTE_USE_CUTLASS_GROUPED_GEMM` is set on Hopper)."""
    GROUPED = "grouped"
    """One grouped kernel whose tiles are every local expert's: TorchTitan's `torch._grouped_mm`, TE's CUTLASS
    grouped GEMM (`NVTE_USE_CUTLASS_GROUPED_GEMM=1`, Hopper)."""


class BackwardPrefetch(StrEnum):
    """When a ZeRO-3 unit's backward all-gather is issued, with `RuntimeFeatures.zero3_backward_prefetch` (PyTorch
    FSDP's `BackwardPrefetch`, torch/distributed/fsdp/api.py). Collectives of one process group share one NCCL
    stream whatever CUDA stream issues them (that docstring), so the order they are issued in sets what overlaps.
    What each exposes is `costmodel.data_parallel.exposed_dp_s`'s to price."""

    PRE = "pre"
    """The next unit's gather is issued before the current unit's gradient computation and runs beside it: PyTorch
    FSDP `BACKWARD_PRE`; FSDP2's default explicit backward prefetch in reverse post-forward order (PyTorch PR 128884,
    TorchTitan); Megatron-FSDP's pre-backward hook, which gathers ahead in backward-pass order
    (`megatron_fsdp.py` `_pre_backward_param_unshard`, `PrefetchOrder.BACKWARD_PASS_ORDER`)."""
    POST = "post"
    """The next unit's gather is issued after the current unit's gradient computation, ahead of its reduce-scatter:
    only the reduce-scatter overlaps the next unit's gradients, and every backward gather sits between two units'
    gradient computations (PyTorch FSDP `BACKWARD_POST`, MosaicML Composer's default `backward_prefetch`)."""
    NONE = "none"
    """No backward prefetch: each unit's gather is issued from its own pre-backward hook, behind the unit above's
    reduce-scatter on the one NCCL stream (`BACKWARD_POST` is the order that moves "the next all-gather ... before the
    current reduce-scatter", that docstring), so the backward waits for every gather and every reduce-scatter
    (PyTorch FSDP `backward_prefetch=None`, Composer `NONE`)."""


class RuntimeFeatures(BaseModel):
    """Framework features that change time or memory. Defaults: current Megatron-Core practice."""

    model_config = _FROZEN

    flash_attention: bool = Field(default=True, description="Fused attention; no s x s scores in memory.")
    attention_kernel: AttentionKernel = Field(
        default=AttentionKernel.CUDNN,
        strict=False,
        description="Which fused attention kernel runs (with flash_attention): cudnn (Transformer Engine, the"
        " Megatron-Core default), flash2 (FlashAttention-2: flash-attn, PyTorch SDPA's flash backend) or flash1"
        " (FlashAttention v1 and its Triton port, llm-foundry's attn_impl triton), each at the profile's published"
        " rate for it (gpu.fused_attention_tflops, gpu.flash2_attention_tflops, gpu.flash1_attention_tflops).",
    )
    overlap_grad_reduce: bool = Field(default=True, description="DP gradient reduction overlaps backward.")
    overlap_param_gather: bool = Field(default=True, description="ZeRO/FSDP parameter gathers overlap compute.")
    tp_comm_overlap: bool = Field(
        default=True,
        description="TP all-gathers and reduce-scatters overlap their GEMMs (TE userbuffers); needs sequence"
        " parallelism, as Megatron-LM requires, and a TP group inside one NVLink domain. On in NeMo's performance"
        " recipes.",
    )
    scatter_gather_p2p: bool = Field(
        default=True, description="Pipeline sends cross the network split by tp (Narayanan Sec. 4.1)."
    )
    overlap_p2p_comm: bool = Field(
        default=True,
        description="With interleaving (vp > 1), pipeline sends overlap the next model chunk's compute"
        " (Megatron-Core overlap_p2p_comm: on unless --no-overlap-p2p-communication; Megatron forces it off"
        " without interleaving, where the sends block); off: every send blocks (Megatron-LM of 2021).",
    )
    overlap_dgrad_comm: bool = Field(
        default=True,
        description="The column-parallel layers' input-gradient collectives (an all-reduce, or a reduce-scatter"
        " under sequence parallelism) run while the weight-gradient GEMM computes: Megatron-LM's asynchronous"
        " tensor-parallel all-reduce (since 2021-09, commit 16c90445e7; with sequence parallelism since 2022-04,"
        " cfd2e21607; always in Megatron-Core's and Transformer Engine's layers); false: Megatron-LM of April"
        " 2021 (Narayanan et al.), which waits for each.",
    )
    fused_kernels: bool = Field(
        default=True,
        description="Transformer Engine fused layers (bias, activation and dropout-add fused into fewer kernels, "
        "launched from C++); false: eager Megatron-LM of 2021, one Python-launched kernel per op.",
    )
    eager_elementwise: bool = Field(
        default=False,
        description="The model code's norms, rotary embedding, gated activation and residual adds run as chains of"
        " eager PyTorch ops with fp32 intermediates (Hugging Face-style LLaMA code such as IBM's fms without"
        " torch.compile), each op reading and writing HBM, not as one fused kernel each (Transformer Engine,"
        " Megatron-Core, or a compiled model); priced at the bytes counted in `costmodel.elementwise`.",
    )
    cuda_graphs: bool = Field(
        default=False,
        description="Layers captured as CUDA graphs (Megatron-Core --enable-cuda-graph): one host launch "
        "replays all their kernels, so the host no longer paces small layers.",
    )
    cuda_graph_scope: CudaGraphScope = Field(
        default=CudaGraphScope.MODULES,
        strict=False,
        description="What cuda_graphs captures (`CudaGraphScope`): modules (Transformer Engine graphs per module; in"
        " an MoE model attention, router and dispatch preprocessing, the dropless expert section launched eagerly) or"
        " full_iteration (Megatron-Core's whole forward-backward graph). Ignored without cuda_graphs.",
    )
    moe_dispatcher: MoeDispatcher = Field(
        default=MoeDispatcher.ALLTOALL,
        strict=False,
        description="How MoE tokens reach their experts (`MoeDispatcher`): alltoall (Megatron-Core's all-to-all"
        " dispatcher, one copy per routed expert), deepep or hybridep (the flex dispatcher: one copy per"
        " destination node over the network and per destination GPU over NVLink). Ignored for dense models.",
    )
    moe_a2a_overlap: bool = Field(
        default=False,
        description="MoE all-to-all overlap (Megatron-Core --overlap-moe-expert-parallel-comm): the forward of"
        " one micro-batch and the backward of another run layer by layer together, each one's dispatch and"
        " combine hidden behind the other's attention and experts. Needs ep > 1, no full recompute, and vp > 1"
        " where pp > 1 (rule moe_a2a_overlap). Off by default, as in Megatron-Core; on in NVIDIA's"
        " Megatron-Bridge recipes for DeepSeek-V3 and Qwen3 235B on H100 and B200.",
    )
    expert_gemm: ExpertGemm = Field(
        default=ExpertGemm.MULTI_STREAM,
        strict=False,
        description="How a GPU runs its local experts' GEMMs (`ExpertGemm`): multi_stream (Transformer Engine's"
        " GroupedLinear under Megatron-Core: one cuBLAS GEMM per local expert, priced one after another, each with"
        " its own fixed time and launch) or grouped (one grouped kernel over all local experts: TorchTitan's"
        " torch._grouped_mm, TE's CUTLASS grouped GEMM on Hopper). Ignored for dense models.",
    )
    zero3_backward_prefetch: BackwardPrefetch = Field(
        default=BackwardPrefetch.PRE,
        strict=False,
        description="When a ZeRO-3 unit's backward all-gather is issued (`BackwardPrefetch`): pre (the default:"
        " before the unit above computes its gradients, beside them; FSDP2 / TorchTitan, Megatron-FSDP, PyTorch FSDP"
        " BACKWARD_PRE), post (after them, so every backward gather waits between two units' gradients: PyTorch"
        " FSDP BACKWARD_POST, MosaicML Composer's default) or none (no prefetch: each gather also waits behind the"
        " unit above's reduce-scatter, so the backward pays both). Ignored below zero_stage 3.",
    )
    recompute_modules: tuple[Annotated[RecomputeModule, Field(strict=False)], ...] | None = Field(
        default=None,
        strict=False,
        min_length=1,
        description="What recompute selective reruns (`RecomputeModule`; Megatron-Core `--recompute-modules`):"
        " any of core_attn, mla_up_proj, layernorm, mlp, moe_act, moe, shared_experts, each at most once, every one"
        " a part the model has (rule recompute_modules). null (default): core_attn, and with multi-latent attention"
        " also mla_up_proj; a plan then also tries the module sets NVIDIA's performance recipes run that the model"
        " has (its layout.recompute_modules says which it runs). Set, it is the only set searched. Ignored by plans"
        " with recompute none or full.",
    )
    ring_rails: bool = Field(
        default=True,
        description="A ring collective that leaves the NVLink domain runs over the NICs of all its members"
        " there (NCCL channels on separate rails); off: at one rank's NIC share (the 2021 ZeRO-3 runs).",
    )

    @model_validator(mode="after")
    def _recompute_modules_once(self) -> Self:
        modules = self.recompute_modules or ()
        repeated = sorted({m.value for m in modules if modules.count(m) > 1})
        if repeated:
            raise ValueError(f"recompute_modules names {', '.join(repeated)} more than once; name each module once")
        return self


class GradientLayout(StrEnum):
    """How the gradients are held and reduced: which data-parallel / optimizer-sharding implementation runs.

    The two agree under fp32 reduction (4 bytes held, 4 on the wire, no copy); they differ under 16-bit
    reduction (`TrainingSpec.grad_reduce_in_fp32` false), which `planner.numerics.training_numerics` resolves.
    """

    MEGATRON = "megatron"
    """Megatron-Core's DDP gradient buffer, distributed optimizer and Megatron-FSDP: the buffer is held in the
    reduction dtype and reduced as held; under 16-bit reduction the optimizer keeps an fp32 copy of its shard
    (Megatron-LM `docs/source/api-guide/dist_optimizer.md`, `megatron/core/distributed/param_and_grad_buffer.py`)."""
    PYTORCH_FSDP = "pytorch_fsdp"
    """PyTorch FSDP (FULL_SHARD / SHARD_GRAD_OP, FSDP2 `fully_shard`) over fp32 sharded parameters, as MosaicML
    Composer and TorchTitan run it: the unsharded 16-bit gradient of one unit exists only transiently, is
    reduce-scattered in `MixedPrecision.reduce_dtype`, and the sharded gradient is held in the sharded
    parameter's dtype (fp32), with no separate copy. Sources: FSDP2
    `torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py` `foreach_reduce` (reduce-scatter in
    `reduce_dtype`, the new sharded grad cast to the sharded parameter's `orig_dtype`); FSDP1
    `torch/distributed/fsdp/_runtime_utils.py` `_cast_grad_to_param_dtype` ("Casts sharded_grad back to the
    full parameter dtype so that the optimizer step runs with that dtype")."""


class AdamMoments(StrEnum):
    """How Adam's two moments are stored (Megatron-Core `--use-precision-aware-optimizer` with `--exp-avg-dtype`
    and `--exp-avg-sq-dtype`). It sets optimizer-state bytes (`planner.numerics`)."""

    FP32 = "fp32"
    """4 bytes each, beside an fp32 master weight: Megatron-LM's default."""
    BF16 = "bf16"
    """2 bytes each (Megatron-Bridge's DeepSeek-V3 recipe; NeMo 1's distributed_fused_adam `dtype: bf16`)."""


class Fp8Recipe(StrEnum):
    """How FP8 training scales its tensors (Megatron-LM `--fp8-recipe`, Megatron-Bridge `fp8_recipe`); with
    `TrainingSpec.precision` fp8 only. It sets what a quantized weight costs (`planner.numerics`)."""

    DELAYED = "delayed"
    """Per-tensor scales from an amax history (Transformer Engine `DelayedScaling`); Megatron-LM's default."""
    TENSORWISE = "tensorwise"
    """Per-tensor scales from the current tensor (TE `Float8CurrentScaling`); Megatron-Bridge's `fp8_cs`."""
    MXFP8 = "mxfp8"
    """Block scaling, one E8M0 scale per 32 elements (TE `MXFP8BlockScaling`), on GPUs with MXFP8 tensor cores
    (Blackwell); Megatron-Bridge's `fp8_mx`."""
    BLOCKWISE = "blockwise"
    """DeepSeek-V3-style block scaling (TE `Float8BlockScaling`): one fp32 scale per 1 x 128 elements of
    activations and gradients and per 128 x 128 block of weights, E4M3 (TE docs `features/low_precision_training/
    fp8_blockwise_scaling`); Megatron-Bridge's `fp8_sc` ("subchannel"), which its H100 DeepSeek-V3, Qwen3 MoE and
    Kimi K2 perf recipes run. Needs FP8 block-scaled GEMMs (`GpuSection.fp8_block_scaling`: Hopper natively,
    Blackwell emulating it with MXFP8)."""


class TrainingSpec(BaseModel):
    """What one optimizer step processes, in which number format, and the recipe settings that change memory.

    Defaults follow today's Megatron-Core recipes for Llama-style models: no dropout
    (Megatron-Bridge / NeMo Llama 3 recipes set `hidden_dropout = attention_dropout = 0`;
    Megatron-LM's own CLI default is 0.1) and the framework's gradient dtype.
    """

    model_config = _FROZEN

    global_batch_size: int = Field(ge=1, le=MAX_GLOBAL_BATCH, description="Sequences per optimizer step (B).")
    precision: Precision = Field(
        default=Precision.BF16,
        strict=False,
        description="bf16, fp16, fp8 or nvfp4 (the transformer layers' linear GEMMs in NVFP4, Blackwell only; "
        "attention, the output layer and the router stay bf16, as under fp8).",
    )
    runtime: RuntimeFeatures = Field(default_factory=RuntimeFeatures, description="Framework features.")
    grad_reduce_in_fp32: bool | None = Field(
        default=None,
        description="Accumulate and reduce gradients in fp32 (true) or in the 16-bit training dtype (false); "
        "null: the framework default, fp32 under bf16/fp8 and fp16 under fp16 (Megatron-LM "
        "`--accumulate-allreduce-grads-in-fp32` / `--grad-reduce-in-bf16`, DDP config `grad_reduce_in_fp32`; "
        "PyTorch FSDP `MixedPrecision.reduce_dtype`). It sets the bytes of the data-parallel gradient reduction "
        "on the wire; `gradient_layout` says what the held gradient costs.",
    )
    gradient_layout: GradientLayout = Field(
        default=GradientLayout.MEGATRON,
        strict=False,
        description="Which implementation holds the gradients. megatron (default): Megatron-Core's gradient "
        "buffer in the reduction dtype, plus an fp32 copy of the optimizer's shard under 16-bit reduction (2 + 4 "
        "bytes per parameter). pytorch_fsdp: PyTorch FSDP / FSDP2 (MosaicML Composer, TorchTitan), which "
        "reduce-scatters in the reduction dtype and holds the sharded gradient in fp32, the sharded parameter's "
        "dtype, with no copy (4 bytes). The two agree under fp32 reduction.",
    )
    fp8_recipe: Fp8Recipe | None = Field(
        default=None,
        strict=False,
        description="FP8 scaling (precision fp8 only): delayed, tensorwise (current scaling), mxfp8 (block "
        "scaling; GPUs with MXFP8 tensor cores) or blockwise (1 x 128 / 128 x 128 scaling, Megatron-Bridge's "
        "fp8_sc; GPUs with FP8 block-scaled GEMMs); null: the framework's default (Megatron-LM and NeMo delayed, "
        "TorchTitan's float8 tensorwise), per-tensor either way. Sets the bytes of a quantized weight: one "
        "per-tensor FP8 copy, plus its transpose on GPUs whose FP8 GEMMs are TN-only (Hopper); row- and "
        "column-wise copies with their scales under mxfp8 and blockwise.",
    )
    fp8_param_gather: bool | None = Field(
        default=None,
        description="Keep the quantized linear layers' weights only as FP8 (precision fp8, Megatron-LM "
        "`--fp8-param-gather`) or NVFP4 (precision nvfp4, `--fp4-param-gather`) tensors. null: today's recipes, "
        "on wherever the layout has the distributed optimizer or Megatron-FSDP (zero_stage >= 1; NeMo's "
        "per-tensor, Megatron-Bridge's FP8 presets and its NVFP4 preset from 26.04 set it, Megatron-LM refuses "
        "FP8 weights at zero_stage 0). Off: bf16 weights plus the quantized copy Transformer Engine caches "
        "across micro-batches.",
    )
    bf16_layers_at_start: int = Field(
        default=0,
        ge=0,
        le=MAX_LAYERS,
        description="Under precision fp8 or nvfp4, the first this many transformer layers run in BF16 (Megatron-LM "
        "`--first-last-layers-bf16 --num-layers-at-start-in-bf16`). 0 (default): every layer quantized, Megatron-LM's "
        "default and what NVIDIA's performance scripts run; Megatron-Bridge's and NeMo 2's FP8 current-scaling "
        "precision keeps 1 (Nemotron-H: 2). At most num_layers / pp and not with fp8_recipe delayed (rule "
        "bf16_end_layers).",
    )
    bf16_layers_at_end: int = Field(
        default=0,
        ge=0,
        le=MAX_LAYERS,
        description="Under precision fp8 or nvfp4, the last this many transformer layers run in BF16 (Megatron-LM "
        "`--num-layers-at-end-in-bf16` with `--first-last-layers-bf16`); as bf16_layers_at_start.",
    )
    adam_moments: AdamMoments = Field(
        default=AdamMoments.FP32,
        strict=False,
        description="Storage of Adam's moments: fp32 (default) or bf16, Megatron-Core's precision-aware optimizer "
        "(`--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`), which needs the "
        "distributed optimizer. With bf16 weights its master weight is then the 16-bit remainder beside them "
        "(`store_param_remainders`, on by default), 2 bytes: 6 bytes of optimizer state per parameter instead of 12.",
    )
    activation_offload_layers: int = Field(
        default=0,
        ge=0,
        le=MAX_LAYERS,
        description="Transformer layers whose activations are copied to host memory in forward and back for "
        "backward (Megatron-Core `cpu_offloading_num_layers`, Transformer Engine `get_cpu_offload_context` default "
        "scheduling); 0 (default): none. At most num_layers - offloaded layers' activations are on a GPU at once; "
        "the copies cross the profile's host link (`node.host_link_gb_per_s`) while the GPU computes, and what "
        "they do not hide is time. Needs pp = 1, no recomputation and fewer layers than the model has (rule "
        "activation_offload).",
    )
    recompute_num_layers: int | None = Field(
        default=None,
        ge=1,
        le=MAX_LAYERS,
        description="Under full recomputation, recompute only this many layers of each pipeline stage, the first "
        "ones, and keep the other layers' activations (Megatron-Core `recompute_method` block with "
        "`recompute_num_layers`); null (default): every layer (method uniform, one layer per unit). Applies to "
        "plans with recompute full; under interleaving the first ones of each model chunk (Megatron-Core builds "
        "one TransformerBlock per chunk).",
    )
    attention_dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Dropout rate on the attention probabilities; 0 (Llama-style recipes) keeps no mask.",
    )
    hidden_dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        allow_inf_nan=False,
        description="Dropout rate after the attention and MLP blocks; 0 (Llama-style recipes) keeps no mask.",
    )
    train_tokens: float | None = Field(
        default=None, gt=0, le=1e16, allow_inf_nan=False, description="Tokens to train on; adds days_to_train."
    )

    @model_validator(mode="after")
    def _fp8_settings_need_fp8(self) -> Self:
        if self.precision not in (Precision.FP8, Precision.NVFP4):
            for name in ("bf16_layers_at_start", "bf16_layers_at_end"):
                if getattr(self, name):
                    raise ValueError(
                        f"{name}({getattr(self, name)}) keeps layers in BF16 under a quantized run; precision"
                        f"({self.precision.value}) is neither fp8 nor nvfp4"
                    )
        if self.precision is Precision.FP8:
            return self
        if self.fp8_param_gather is True and self.precision is not Precision.NVFP4:
            raise ValueError(
                f"fp8_param_gather(true) keeps FP8 or NVFP4 weights; precision({self.precision.value}) is neither"
                " fp8 nor nvfp4"
            )
        if self.fp8_recipe is not None:
            recipe, precision = self.fp8_recipe.value, self.precision.value
            raise ValueError(f"fp8_recipe({recipe}) applies to precision fp8; got precision({precision})")
        return self
