"""Map a Hugging Face ``config.json`` to a ModelSpec.

`model_from_hf_config` reads the keys that fix a model's shape and ignores the
rest (real configs carry dozens: dropout, token ids, rope scaling, dtype, ...).

Supported ``model_type`` values and what is read:

llama, mistral, qwen2, qwen3
    num_hidden_layers, hidden_size, num_attention_heads, num_key_value_heads
    (default: num_attention_heads), head_dim (default: hidden_size /
    num_attention_heads; Qwen3 and Mistral NeMo set it wider), intermediate_size, vocab_size,
    max_position_embeddings, tie_word_embeddings (default false). Gated (SwiGLU)
    MLP, RoPE, RMSNorm, no biases; qwen3 (and qwen3_moe) with per-head query and
    key RMSNorms (qk_layernorm).
mixtral
    As llama, plus num_local_experts and num_experts_per_tok; every layer is MoE
    and intermediate_size is the width of one expert.
qwen2_moe, qwen3_moe
    As llama, plus num_experts, num_experts_per_tok, moe_intermediate_size,
    decoder_sparse_step (default 1), mlp_only_layers (default []) and, for
    qwen2_moe only, shared_expert_intermediate_size. intermediate_size is the
    width of the dense MLP layers; it may be absent when every layer is MoE.
    norm_topk_prob (default false) says whether the router renormalises its
    chosen weights (MoESpec.router_pre_softmax when it does not).
    mixtral, qwen2_moe, qwen3_moe and llama4 train the Switch load-balancing
    loss over the batch, weighted by router_aux_loss_coef (default 0.001).
deepseek_v2, deepseek_v3
    As llama for the trunk, plus n_routed_experts, num_experts_per_tok,
    moe_intermediate_size, n_shared_experts, first_k_dense_replace,
    moe_layer_freq (default 1); intermediate_size is the dense layers' width;
    multi-latent attention from kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
    v_head_dim and q_lora_rank (null in DeepSeek-V2-Lite: no query latent).
    The router from scoring_func (default: V3 sigmoid, V2 softmax),
    topk_method (noaux_tc: the expert bias), n_group and topk_group (grouped
    routing when n_group > 1), routed_scaling_factor and norm_topk_prob; the
    balancing loss from seq_aux (default true: per sequence) and
    aux_loss_alpha (its weight, default 0.001).
gpt_oss
    As llama, plus num_local_experts and num_experts_per_tok (every layer is
    MoE, intermediate_size is one expert's width; a softmax over the chosen
    experts; no balancing loss, as Megatron-Bridge's GPTOSSBridge trains it),
    and the sliding window below (default layer_types: layers 1, 3, ... of
    128 tokens, every other one full).
llama4, llama4_text
    As llama (read from ``text_config`` when the file is the multimodal
    wrapper; the vision tower is left out), plus num_local_experts,
    num_experts_per_tok, intermediate_size (one routed expert's width; every
    MoE layer also has one shared expert of that width; a sigmoid router whose
    weight scales the token before its expert), moe_layers or
    interleave_moe_layer_step (default 1: every layer is MoE; 2: layers 1, 3,
    5, ...), intermediate_size_mlp (the dense layers' width). Chunked
    attention (attention_chunk_size, 3 of 4 layers) is priced as full causal
    attention: the same at or below the chunk (8,192), dearer above it.
nemotron_h (Nemotron-H, Nemotron Nano 2, Nemotron 3 Nano)
    A hybrid layer stack (ModelSpec.hybrid_pattern) from hybrid_override_pattern (M Mamba-2, * attention,
    - MLP, E MoE), else from layers_block_type / layer_types (mamba or linear_attention, attention or
    full_attention, mlp, moe); its length is num_layers (num_hidden_layers, where given, is ignored, as Hugging
    Face's NemotronHConfig derives it). hidden_size, num_attention_heads, num_key_value_heads, head_dim (or the
    older attention_head_dim; default 128, NemotronHConfig's), intermediate_size (the - layers' width), vocab_size,
    tie_word_embeddings (default false). The Mamba-2 mixer (ModelSpec.mamba, with M layers) from ssm_state_size,
    mamba_head_dim, n_groups (older mamba_n_groups), mamba_num_heads and conv_kernel (older mamba_d_conv), each
    defaulting to NemotronHConfig's (128, 64, 8, 128, 4). With E layers the MoE block from n_routed_experts,
    num_experts_per_tok, moe_intermediate_size and moe_shared_expert_intermediate_size (one shared MLP of that
    width), and DeepSeek-V3's router (`NemotronHTopkRouter`: sigmoid scores, the expert bias, n_group /
    topk_group, routed_scaling_factor), trained with the per-sequence balancing loss at 1e-4 that
    Megatron-Bridge's NemotronHBridge sets (no config key says it). The MLP is not gated: squared ReLU
    (mlp_hidden_act relu2), which ModelSpec, naming no activation, prices as any non-gated MLP.
gpt2
    n_layer, n_embd, n_head, n_inner (absent or null: 4 * n_embd), vocab_size,
    n_positions, tie_word_embeddings (default true). GeLU MLP, LayerNorm and
    biases, learned absolute positions.
gpt_neox
    num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
    vocab_size, max_position_embeddings, tie_word_embeddings (default false).
    GeLU MLP, LayerNorm and biases, rotary positions.

Without ``model_type`` the family is taken from ``architectures`` (e.g.
``LlamaForCausalLM``), else guessed from family-specific keys.

Approximations (ModelSpec cannot say more):

- Qwen2 and Qwen2-MoE put biases on the q/k/v projections only. ModelSpec's
  ``linear_bias`` is all-or-nothing (and also means LayerNorm instead of
  RMSNorm), so it is False: the q/k/v biases, about (h + 2 * kv) per layer,
  are left out. Likewise a Llama ``attention_bias``/``mlp_bias`` is ignored.
- Qwen3's per-head q/k RMSNorm weights, Qwen2-MoE's shared-expert sigmoid gate
  (h x 1) and DeepSeek's router correction bias are left out (each < 1e-4 of
  the model).
- Qwen2-MoE's shared expert is one MLP of width shared_expert_intermediate_size;
  it becomes ceil(shared / moe_intermediate_size) experts of the routed width
  (exact when the division is exact, as in every released checkpoint).
- Qwen-MoE layer i is MoE when (i + 1) % decoder_sparse_step == 0 and i is not
  in mlp_only_layers; DeepSeek layer i when i >= first_k_dense_replace and
  i % moe_layer_freq == 0. Both are mapped exactly onto ModelSpec's
  (first_k_dense_layers, moe_layer_freq) pattern; an mlp_only_layers list that
  breaks the arithmetic progression cannot be expressed and is an error.
- DeepSeek-V3's multi-head latent attention becomes ModelSpec.mla (q_lora_rank,
  kv_lora_rank, qk_nope_head_dim -> qk_head_dim, qk_rope_head_dim ->
  qk_pos_emb_head_dim, v_head_dim), as in the deepseek-v3 preset. The
  multi-token-prediction modules (num_nextn_predict_layers) become
  mtp_num_layers: DeepSeek-V3 is then 682B (the advertised 671B leaves them out,
  its 685B checkpoint counts the shared embedding and output head twice).
- Sliding-window attention becomes sliding_window (the config's
  sliding_window) and sliding_window_pattern: from layer_types where the
  config lists them (sliding_attention / full_attention; the full layers must
  be every N-th, else an error), else every layer for Mistral and Mixtral
  when sliding_window is set (null from Mistral 7B v0.2 on and in Mixtral),
  and for Qwen when use_sliding_window is true (false in every released
  config; it windows the layers from max_window_layers on, an error unless
  that is 0). GPT-OSS's attention sinks and biases and its clamped GLU are
  left out (each under 0.1% of the compute). Partial rotary (GPT-NeoX
  rotary_pct) changes no parameter count and is ignored; so is GPT-NeoX's
  parallel residual.
- Llama-style families always have a gated MLP in Hugging Face's modelling
  code, so gated_mlp is True whatever ``hidden_act`` names (silu in practice).
- Nemotron-H: the attention has no position embedding, while ModelSpec prices
  RoPE (a memory-bound pass over Q and K in the few attention layers); the
  Mamba convolution's bias (use_conv_bias), the optional projection biases
  (mamba_proj_bias, use_bias, mlp_bias, attention_bias: false in every released
  config; Megatron-Core's MambaMixer has none) and the router's correction bias
  are left out. LatentMoE (moe_latent_size, Nemotron 3 Super) and multi-token
  prediction (num_nextn_predict_layers > 0) cannot be expressed with a hybrid
  pattern and are errors.

seq_length is the argument when given. Otherwise it is the family's published
pre-training sequence length, capped by max_position_embeddings (a config's
max_position_embeddings is its longest *inference* context, 128K for Llama 3.1
and Qwen2.5, which nobody pre-trains at): `PRETRAINING_SEQ_LENGTH` lists each
family's value and source. GPT-2 and GPT-NeoX, whose position limit is the
length they were trained at, take n_positions / max_position_embeddings.

Every value is recorded with where it came from (`ResolvedHfConfig.sources`):
``hf_config.<key>`` for a key read, ``hf_config default`` where a missing key
took the family's default, ``architecture`` where the family fixes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from planner.errors import InvalidSpecError, validator_message
from planner.specs import HYBRID_LAYER_SYMBOLS, ModelSpec, MoESpec

__all__ = [
    "PRETRAINING_SEQ_LENGTH",
    "SUPPORTED_MODEL_TYPES",
    "ResolvedHfConfig",
    "model_from_hf_config",
    "resolve_hf_config",
]

_FIELD = "model.hf_config"

_LLAMA4_SEQ = (
    "NVIDIA NeMo's llama4_e16 / llama4_e128 pre-training recipes run 8,192 tokens (NVIDIA/NeMo"
    " nemo/collections/llm/recipes/llama4_e16.py), the attention chunk: Meta publishes no pre-training length"
)
PRETRAINING_SEQ_LENGTH: dict[str, tuple[int, str]] = {
    "llama": (8192, "Llama 3 pre-trains at 8,192 tokens: Llama Team 2024, arXiv 2407.21783, Sec. 3.4.1"),
    "mistral": (8192, "Mistral 7B's context_len is 8,192: Jiang et al. 2023, arXiv 2310.06825, Table 1"),
    "mixtral": (32768, "Mixtral is trained with a 32k context: Jiang et al. 2024, arXiv 2401.04088, Sec. 2"),
    "gpt_oss": (
        4096,
        "GPT-OSS's config.json initial_context_length (4,096) before its YaRN extension; Megatron-Bridge's"
        " gpt_oss_120b_pretrain_config trains at 4,096",
    ),
    "qwen2": (4096, "Qwen2/2.5 pre-train at 4,096 tokens before long-context extension: arXiv 2412.15115, Sec. 3"),
    "qwen2_moe": (4096, "Qwen2 pre-trains at 4,096 tokens before long-context extension: arXiv 2407.10671, Sec. 3"),
    "qwen3": (4096, "Qwen3's general pre-training stage uses 4,096 tokens: arXiv 2505.09388, Sec. 3.2"),
    "qwen3_moe": (4096, "Qwen3's general pre-training stage uses 4,096 tokens: arXiv 2505.09388, Sec. 3.2"),
    "deepseek_v2": (
        4096,
        "DeepSeek-V2 pre-trains at a 4K maximum sequence length before its long-context extension: the"
        " deepseek-ai/DeepSeek-V2-Lite model card, Training Details",
    ),
    "deepseek_v3": (4096, "DeepSeek-V3 pre-trains at a 4K maximum sequence length: arXiv 2412.19437, Sec. 4.2"),
    "llama4": (8192, _LLAMA4_SEQ),
    "llama4_text": (8192, _LLAMA4_SEQ),
    "nemotron_h": (
        8192,
        "Megatron-Bridge's pre-training recipes run 8,192 tokens: nemotronh_8b/56b_pretrain_config and"
        " nemotron_3_nano_pretrain_config (NVIDIA-NeMo/Megatron-Bridge 38b4a06ba1ed src/megatron/bridge/recipes/"
        "nemotronh/nemotronh.py, nemotron_3_nano.py); the Nemotron-H base models are the -Base-8K checkpoints",
    ),
}
"""Per family: the sequence length its published models were pre-trained at, and the source. A config's
max_position_embeddings caps it (Llama 2 has 4,096, Llama 1 2,048)."""

_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MixtralForCausalLM": "mixtral",
    "GptOssForCausalLM": "gpt_oss",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "Llama4ForConditionalGeneration": "llama4",
    "Llama4ForCausalLM": "llama4_text",
    "NemotronHForCausalLM": "nemotron_h",
    "GPT2LMHeadModel": "gpt2",
    "GPTNeoXForCausalLM": "gpt_neox",
}


class _Keys:
    """Typed reads of one config.json; errors name the key and the model_type."""

    def __init__(self, config: Mapping[str, Any], model_type: str, *, inferred: bool = False, prefix: str = "") -> None:
        self._config = config
        self.model_type = model_type
        self._prefix = prefix
        """Where `config` sits in the config.json ("text_config." for a multimodal model's language model)."""
        self._label = f"model_type {model_type!r}" + (
            " (inferred: config.json's model_type is missing or not a family read here)" if inferred else ""
        )
        self.sources: dict[str, str] = {}
        """ModelSpec field (dotted under moe) -> where its value came from."""

    def take(self, field: str, key: str, *, default: int | None = None, minimum: int = 1) -> int:
        """`integer(key)` for ModelSpec `field`, recording the key (or the default) as its source."""
        self.sources[field] = self.source(key) if self.has(key) else "hf_config default"
        return self.integer(key, default=default, minimum=minimum)

    def take_flag(self, field: str, key: str, *, default: bool) -> bool:
        """`flag(key)` for ModelSpec `field`, recording its source."""
        self.sources[field] = self.source(key) if self.has(key) else "hf_config default"
        return self.flag(key, default=default)

    def take_weight(self, field: str, key: str, *, default: float) -> float:
        """`weight(key)` for ModelSpec `field`, recording its source."""
        self.sources[field] = self.source(key) if self.has(key) else "hf_config default"
        return self.weight(key, default=default)

    def fixed(self, **values: Any) -> dict[str, Any]:
        """Fields the family's architecture fixes, recorded as such."""
        self.sources.update(dict.fromkeys(values, f"architecture ({self.model_type})"))
        return values

    def has(self, key: str) -> bool:
        return self._config.get(key) is not None

    def raw(self, key: str) -> Any:
        """The key's value as the file has it (None when missing), for the callers that check its shape."""
        return self._config.get(key)

    def source(self, key: str) -> str:
        """The key as a source: ``hf_config.<key>``, under its place in the file."""
        return f"hf_config.{self._prefix}{key}"

    def error(self, key: str, message: str) -> InvalidSpecError:
        return InvalidSpecError(f"{_FIELD}.{self._prefix}{key}", f"{message} ({self._label})")

    def integer(self, key: str, *, default: int | None = None, minimum: int = 1) -> int:
        """An integer >= minimum; a missing or null key takes `default`, or is an error without one."""
        value = self._config.get(key)
        if value is None:
            if default is None:
                raise self.error(key, f"missing required key {key!r}")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"{key} must be an integer, got {value!r}")
        if value < minimum:
            rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            raise self.error(key, f"{key} must be {rule}, got {value}")
        return value

    def flag(self, key: str, *, default: bool) -> bool:
        value = self._config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"{key} must be true or false, got {value!r}")
        return value

    def text(self, key: str, *, default: str) -> str:
        """A string; missing or null takes `default`."""
        value = self._config.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.error(key, f"{key} must be a string, got {value!r}")
        return value

    def number(self, key: str, *, default: float) -> float:
        """A positive number; missing or null takes `default`."""
        value = self._config.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.error(key, f"{key} must be a positive number, got {value!r}")
        return float(value)

    def weight(self, key: str, *, default: float) -> float:
        """A number in [0, 1] (a loss weight); missing or null takes `default`."""
        value = self._config.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise self.error(key, f"{key} must be a number in [0, 1], got {value!r}")
        return float(value)

    def layer_list(self, key: str, num_layers: int) -> frozenset[int]:
        """A list of layer indices in [0, num_layers); missing or null is empty."""
        value = self._config.get(key)
        if value is None:
            return frozenset()
        if not isinstance(value, list | tuple):
            raise self.error(key, f"{key} must be a list of layer indices, got {value!r}")
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < num_layers:
                raise self.error(key, f"{key} entries must be layer indices in [0, {num_layers}), got {item!r}")
        return frozenset(value)


def _moe_pattern(keys: _Keys, moe_layers: list[int], num_layers: int, key: str) -> tuple[int, int] | None:
    """(first_k_dense_layers, moe_layer_freq) whose MoE layers are exactly `moe_layers`; None if there are none.

    ModelSpec's MoE layers are i >= k with (i - k) % freq == 0: an arithmetic
    progression running to the last layer's stride.
    """
    if not moe_layers:
        return None
    first = moe_layers[0]
    freq = moe_layers[1] - first if len(moe_layers) > 1 else max(1, num_layers - first)
    if moe_layers != list(range(first, num_layers, freq)):
        shown = ", ".join(str(i) for i in moe_layers[:8]) + (", ..." if len(moe_layers) > 8 else "")
        raise keys.error(
            key,
            f"the MoE layers ({len(moe_layers)} of {num_layers}: {shown}) are not every k-th layer from the "
            "first MoE layer on; a ModelSpec cannot express this pattern",
        )
    return first, freq


QK_NORM_MODEL_TYPES = frozenset({"qwen3", "qwen3_moe"})
"""Families whose attention normalises each head's query and key (`ModelSpec.qk_layernorm`): Hugging Face
`Qwen3Attention` and `Qwen3MoeAttention` build `q_norm` and `k_norm`, RMSNorm(head_dim), in every layer; no
config key switches them off."""


def _trunk(keys: _Keys, *, ffn_key: str | None = "intermediate_size") -> dict[str, Any]:
    """Fields shared by the Llama-style families (RoPE, RMSNorm, gated MLP, no biases)."""
    spec: dict[str, Any] = {
        "num_layers": keys.take("num_layers", "num_hidden_layers"),
        "hidden_size": keys.take("hidden_size", "hidden_size"),
        "num_attention_heads": keys.take("num_attention_heads", "num_attention_heads"),
    }
    spec["num_query_groups"] = keys.take("num_query_groups", "num_key_value_heads", default=spec["num_attention_heads"])
    if keys.has("head_dim"):  # Qwen3, Mistral NeMo: wider heads than hidden / heads
        spec["head_dim"] = keys.take("head_dim", "head_dim")
    if ffn_key is not None:
        spec["ffn_hidden_size"] = keys.take("ffn_hidden_size", ffn_key)
    spec.update(
        vocab_size=keys.take("vocab_size", "vocab_size"),
        tied_embeddings=keys.take_flag("tied_embeddings", "tie_word_embeddings", default=False),
        **keys.fixed(gated_mlp=True, linear_bias=False, learned_position_embeddings=False),
    )
    if keys.model_type in QK_NORM_MODEL_TYPES:
        spec.update(keys.fixed(qk_layernorm=True))
    spec.update(_sliding_window(keys, spec["num_layers"]))
    return spec


ATTENTION_LAYER_TYPES = ("sliding_attention", "full_attention")
"""The `layer_types` entries read (Hugging Face `configuration_utils.ALLOWED_LAYER_TYPES`' attention kinds that
`ModelSpec.sliding_window` expresses)."""


def _sliding_window(keys: _Keys, num_layers: int) -> dict[str, Any]:
    """`sliding_window` and `sliding_window_pattern` as Hugging Face's modelling code applies the window: from
    `layer_types` where the config lists them (GPT-OSS, and the configs recent transformers save), else GPT-OSS's
    default (GptOssConfig: layers 1, 3, ... windowed), Mistral's and Mixtral's window on every layer
    (`MistralAttention`: `sliding_window` null in Mistral 7B v0.2 on and in Mixtral), and Qwen's `use_sliding_window`
    (false in the released configs; true windows the layers from `max_window_layers` on, expressible only from
    layer 0). Other families have none."""
    types = keys.raw("layer_types")
    if types is not None:
        if not isinstance(types, list | tuple) or len(types) != num_layers:
            raise keys.error("layer_types", f"layer_types must list one attention type per layer ({num_layers})")
        unknown = sorted({str(t) for t in types} - set(ATTENTION_LAYER_TYPES))
        if unknown:
            raise keys.error("layer_types", f"layer_types {unknown} cannot be expressed (read: sliding / full)")
        windowed = [t == "sliding_attention" for t in types]
        where = keys.source("layer_types")
    elif keys.model_type == "gpt_oss":
        windowed = [(i + 1) % 2 != 0 for i in range(num_layers)]
        where = "architecture (gpt_oss: GptOssConfig's default layer_types, sliding then full)"
    elif keys.model_type in ("mistral", "mixtral"):
        windowed = [keys.has("sliding_window")] * num_layers
        where = keys.source("sliding_window")
    elif keys.flag("use_sliding_window", default=False):
        first = keys.integer("max_window_layers", default=0, minimum=0)
        if first:
            raise keys.error(
                "max_window_layers",
                f"use_sliding_window windows the layers from max_window_layers ({first}) on; a ModelSpec cannot"
                " express full attention below a window",
            )
        windowed = [True] * num_layers
        where = keys.source("use_sliding_window")
    else:
        return {}
    if not any(windowed):
        return {}
    window = keys.take("sliding_window", "sliding_window")
    full = [i for i, w in enumerate(windowed) if not w]
    if not full:
        keys.sources["sliding_window_pattern"] = where
        return {"sliding_window": window}
    period = full[0] + 1
    if period < 2 or any(w != ((i + 1) % period != 0) for i, w in enumerate(windowed)):
        shown = ", ".join(str(i) for i in full[:8]) + (", ..." if len(full) > 8 else "")
        raise keys.error(
            "layer_types",
            f"the full-attention layers ({len(full)} of {num_layers}: {shown}) are not every N-th layer; a"
            " ModelSpec cannot express this pattern",
        )
    keys.sources["sliding_window_pattern"] = where
    return {"sliding_window": window, "sliding_window_pattern": period}


def _softmax_router(keys: _Keys) -> dict[str, Any]:
    """A softmax router's one choice: Hugging Face takes the softmax over all experts, then the top_k, and with
    norm_topk_prob renormalises the chosen weights, which is Megatron-Core's default (a softmax over the chosen
    logits); without it, the weights stay as the softmax gave them (`MoESpec.router_pre_softmax`). norm_topk_prob
    defaults to false in every family read here (Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV2Config; Qwen3's
    released configs set it true)."""
    renormalised = keys.take_flag("moe.router_pre_softmax", "norm_topk_prob", default=False)
    return {} if renormalised else {"router_pre_softmax": True}


AUX_LOSS_COEF_DEFAULT = 0.001
"""`router_aux_loss_coef` where a config.json leaves it out: MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig and
Llama4TextConfig all default to 0.001 (Hugging Face transformers); DeepseekV2Config / DeepseekV3Config's
`aux_loss_alpha` too."""


def _switch_balancing(keys: _Keys) -> dict[str, Any]:
    """The load-balancing loss of Hugging Face's Mixtral, Qwen-MoE and Llama 4: the Switch loss over the batch
    (`load_balancing_loss_func`, Megatron-Core aux_loss, MoESpec's default type) weighted by router_aux_loss_coef, as
    Megatron-Bridge's importer maps it (`model_bridge.py` CONFIG_MAPPING: router_aux_loss_coef -> moe_aux_loss_coeff).
    transformers itself adds that loss only when output_router_logits is set (false in the released configs); a
    model meant to train without it says router_load_balancing none."""
    coeff = keys.take_weight("moe.router_aux_loss_coeff", "router_aux_loss_coef", default=AUX_LOSS_COEF_DEFAULT)
    return {"router_aux_loss_coeff": coeff}


def _llama(keys: _Keys) -> dict[str, Any]:
    return _trunk(keys)


def _gpt_oss(keys: _Keys) -> dict[str, Any]:
    """GPT-OSS: Llama-style trunk with head_dim, every layer MoE (intermediate_size is one expert's width), a
    softmax over the chosen top-k logits (`GptOssTopKRouter`, Megatron-Core's default), trained without a balancing
    loss as Megatron-Bridge's GPTOSSBridge sets it (moe_router_load_balancing_type none; transformers adds
    router_aux_loss_coef's loss only under output_router_logits, false in the released configs)."""
    spec = _trunk(keys)
    spec["moe"] = {
        "num_experts": keys.take("moe.num_experts", "num_local_experts"),
        "top_k": keys.take("moe.top_k", "num_experts_per_tok"),
        "expert_ffn_hidden_size": spec["ffn_hidden_size"],
    }
    keys.sources["moe.expert_ffn_hidden_size"] = keys.sources["ffn_hidden_size"]
    spec["moe"].update(keys.fixed(router_load_balancing="none"))
    keys.sources["moe.router_load_balancing"] = keys.sources.pop("router_load_balancing")
    return spec


def _mixtral(keys: _Keys) -> dict[str, Any]:
    spec = _trunk(keys)
    num_experts = keys.take("moe.num_experts", "num_local_experts")
    spec["moe"] = {
        "num_experts": num_experts,
        "top_k": keys.take("moe.top_k", "num_experts_per_tok"),
        "expert_ffn_hidden_size": spec["ffn_hidden_size"],
        **_switch_balancing(keys),
    }
    keys.sources["moe.expert_ffn_hidden_size"] = keys.sources["ffn_hidden_size"]
    return spec


def _qwen_moe(keys: _Keys) -> dict[str, Any]:
    spec = _trunk(keys, ffn_key=None)
    num_layers: int = spec["num_layers"]
    num_experts = keys.take("moe.num_experts", "num_experts")
    top_k = keys.take("moe.top_k", "num_experts_per_tok")
    expert_width = keys.take("moe.expert_ffn_hidden_size", "moe_intermediate_size")
    shared_width = 0
    if keys.model_type == "qwen2_moe":
        shared_width = keys.take("moe.num_shared_experts", "shared_expert_intermediate_size", minimum=0)
    step = keys.take("moe.moe_layer_freq", "decoder_sparse_step", default=1)
    dense_only = keys.layer_list("mlp_only_layers", num_layers)
    moe_layers = [i for i in range(num_layers) if (i + 1) % step == 0 and i not in dense_only]
    pattern = _moe_pattern(keys, moe_layers, num_layers, "mlp_only_layers" if dense_only else "decoder_sparse_step")
    has_dense_layers = len(moe_layers) < num_layers
    if has_dense_layers or keys.has("intermediate_size"):
        spec["ffn_hidden_size"] = keys.take("ffn_hidden_size", "intermediate_size")
    else:
        spec["ffn_hidden_size"] = expert_width  # no dense layer: the value is never used
        keys.sources["ffn_hidden_size"] = "hf_config.moe_intermediate_size (no dense layer uses it)"
    if dense_only:
        keys.sources["moe.first_k_dense_layers"] = "hf_config.mlp_only_layers"
    if pattern is not None:
        first_k, freq = pattern
        spec["moe"] = {
            "num_experts": num_experts,
            "top_k": top_k,
            "expert_ffn_hidden_size": expert_width,
            "num_shared_experts": math.ceil(shared_width / expert_width),
            "moe_layer_freq": freq,
            "first_k_dense_layers": first_k,
            **_softmax_router(keys),
            **_switch_balancing(keys),
        }
    return spec


def _deepseek_v3(keys: _Keys) -> dict[str, Any]:
    spec = _trunk(keys)
    spec["num_query_groups"] = spec["num_attention_heads"]  # MLA: every head its own key and value
    num_layers: int = spec["num_layers"]
    keys.sources["num_query_groups"] = (
        f"architecture ({keys.model_type}: multi-latent attention, one key/value per head)"
    )
    spec.pop("head_dim", None)  # MLA's heads are the mla widths; ModelSpec takes head_dim = v_head_dim
    keys.sources["head_dim"] = "mla.v_head_dim"
    keys.sources["mla.q_lora_rank"] = keys.source("q_lora_rank") if keys.has("q_lora_rank") else "null in hf_config"
    # DeepSeek-V3's multi-token prediction module (num_nextn_predict_layers 1); none in DeepSeek-V2.
    spec["mtp_num_layers"] = keys.take("mtp_num_layers", "num_nextn_predict_layers", default=0, minimum=0)
    spec["mla"] = {
        "q_lora_rank": keys.integer("q_lora_rank") if keys.has("q_lora_rank") else None,  # null: DeepSeek-V2-Lite
        "kv_lora_rank": keys.take("mla.kv_lora_rank", "kv_lora_rank"),
        "qk_head_dim": keys.take("mla.qk_head_dim", "qk_nope_head_dim"),
        "qk_pos_emb_head_dim": keys.take("mla.qk_pos_emb_head_dim", "qk_rope_head_dim", minimum=0),
        "v_head_dim": keys.take("mla.v_head_dim", "v_head_dim"),
    }
    num_experts = keys.take("moe.num_experts", "n_routed_experts")
    top_k = keys.take("moe.top_k", "num_experts_per_tok")
    expert_width = keys.take("moe.expert_ffn_hidden_size", "moe_intermediate_size")
    shared = keys.take("moe.num_shared_experts", "n_shared_experts", minimum=0)
    first_dense = keys.take("moe.first_k_dense_layers", "first_k_dense_replace", minimum=0)
    freq = keys.take("moe.moe_layer_freq", "moe_layer_freq", default=1)
    moe_layers = [i for i in range(first_dense, num_layers) if i % freq == 0]
    pattern = _moe_pattern(keys, moe_layers, num_layers, "first_k_dense_replace")
    if pattern is not None:
        first_k, spec_freq = pattern
        spec["moe"] = {
            "num_experts": num_experts,
            "top_k": top_k,
            "expert_ffn_hidden_size": expert_width,
            "num_shared_experts": shared,
            "moe_layer_freq": spec_freq,
            "first_k_dense_layers": first_k,
            **_deepseek_router(keys),
        }
    return spec


def _deepseek_router(keys: _Keys) -> dict[str, Any]:
    """DeepSeek's router (Hugging Face `DeepseekV3TopkRouter` / `DeepseekV2MoEGate`): scoring_func (V3's default
    sigmoid, V2's softmax), topk_method noaux_tc (the auxiliary-loss-free expert bias, e_score_correction_bias),
    n_group / topk_group (group-limited routing, when n_group > 1), routed_scaling_factor (when not 1) and, for a
    softmax router, norm_topk_prob (`_softmax_router`). A sigmoid router's top_k > 1 weights are renormalised, as
    Megatron-Core always does; V3's norm_topk_prob says the same."""
    v3 = keys.model_type == "deepseek_v3"
    router: dict[str, Any] = {}
    score = keys.text("scoring_func", default="sigmoid" if v3 else "softmax")
    if score not in ("softmax", "sigmoid"):
        raise keys.error("scoring_func", f"scoring_func must be softmax or sigmoid, got {score!r}")
    keys.sources["moe.router_score_function"] = "hf_config default"
    if keys.has("scoring_func"):
        keys.sources["moe.router_score_function"] = keys.source("scoring_func")
    if score == "sigmoid":
        router["router_score_function"] = "sigmoid"
    else:
        router |= _softmax_router(keys)
    method = keys.text("topk_method", default="noaux_tc" if v3 else "greedy")
    keys.sources["moe.router_expert_bias"] = "hf_config default"
    if keys.has("topk_method"):
        keys.sources["moe.router_expert_bias"] = keys.source("topk_method")
    if method == "noaux_tc":
        router["router_expert_bias"] = True
    groups = keys.integer("n_group", default=1)
    if groups > 1:
        router["router_num_groups"] = keys.take("moe.router_num_groups", "n_group")
        router["router_group_topk"] = keys.take("moe.router_group_topk", "topk_group")
    factor = keys.number("routed_scaling_factor", default=1.0)
    if factor != 1.0:
        router["router_topk_scaling_factor"] = factor
        keys.sources["moe.router_topk_scaling_factor"] = keys.source("routed_scaling_factor")
    return router | _deepseek_balancing(keys)


def _deepseek_balancing(keys: _Keys) -> dict[str, Any]:
    """DeepSeek's load-balancing loss (Hugging Face `MoEGate`): aux_loss_alpha weighs it, seq_aux (default true)
    takes it per sequence (Megatron-Core seq_aux_loss), else over the batch (aux_loss)."""
    per_sequence = keys.take_flag("moe.router_load_balancing", "seq_aux", default=True)
    return {
        "router_load_balancing": "seq_aux_loss" if per_sequence else "aux_loss",
        "router_aux_loss_coeff": keys.take_weight(
            "moe.router_aux_loss_coeff", "aux_loss_alpha", default=AUX_LOSS_COEF_DEFAULT
        ),
    }


def _llama4(keys: _Keys) -> dict[str, Any]:
    """Llama 4's language model: MoE layers of top-k routed experts plus one shared expert of the same width
    (Hugging Face `Llama4TextMoe`), dense layers of width intermediate_size_mlp between them."""
    spec = _trunk(keys, ffn_key=None)
    num_layers: int = spec["num_layers"]
    expert_width = keys.take("moe.expert_ffn_hidden_size", "intermediate_size")
    step = keys.take("moe.moe_layer_freq", "interleave_moe_layer_step", default=1)
    listed = keys.layer_list("moe_layers", num_layers) if keys.has("moe_layers") else None
    moe_layers = sorted(listed) if listed is not None else list(range(step - 1, num_layers, step))
    key = "moe_layers" if listed is not None else "interleave_moe_layer_step"
    pattern = _moe_pattern(keys, moe_layers, num_layers, key)
    if len(moe_layers) < num_layers or keys.has("intermediate_size_mlp"):
        spec["ffn_hidden_size"] = keys.take("ffn_hidden_size", "intermediate_size_mlp")
    else:
        spec["ffn_hidden_size"] = expert_width  # no dense layer: the value is never used
        keys.sources["ffn_hidden_size"] = f"{keys.source('intermediate_size')} (no dense layer uses it)"
    if pattern is not None:
        first_k, freq = pattern
        keys.sources["moe.first_k_dense_layers"] = keys.sources["moe.moe_layer_freq"]
        spec["moe"] = {
            "num_experts": keys.take("moe.num_experts", "num_local_experts"),
            "top_k": keys.take("moe.top_k", "num_experts_per_tok"),
            "expert_ffn_hidden_size": expert_width,
            **keys.fixed(num_shared_experts=1, router_score_function="sigmoid", router_score_before_experts=True),
            "moe_layer_freq": freq,
            "first_k_dense_layers": first_k,
            **_switch_balancing(keys),
        }
        for name in ("num_shared_experts", "router_score_function", "router_score_before_experts"):
            keys.sources[f"moe.{name}"] = keys.sources.pop(name)
    return spec


NEMOTRON_H_LAYER_TYPES = {
    "mamba": "M",
    "linear_attention": "M",
    "attention": "*",
    "full_attention": "*",
    "mlp": "-",
    "moe": "E",
}
"""Hugging Face NemotronHConfig's layers_block_type names (current and legacy: `remap_legacy_layer_types` maps mamba
and attention to linear_attention and full_attention) -> the `hybrid_pattern` symbol (NemotronHConfig
`_pattern_to_list`)."""


def _hybrid_pattern(keys: _Keys) -> str:
    """The layer pattern: hybrid_override_pattern (the configs NVIDIA publishes), else the per-layer list Hugging Face
    saves (layers_block_type, aliased layer_types)."""
    raw = keys.raw("hybrid_override_pattern")
    if raw is not None:
        if not isinstance(raw, str) or not raw or any(symbol not in HYBRID_LAYER_SYMBOLS for symbol in raw):
            raise keys.error(
                "hybrid_override_pattern",
                "hybrid_override_pattern must be a string of M, *, - and E (Mamba-2, attention, MLP, MoE),"
                f" got {raw!r}",
            )
        keys.sources["hybrid_pattern"] = keys.source("hybrid_override_pattern")
        return raw
    for key in ("layers_block_type", "layer_types"):
        listed = keys.raw(key)
        if listed is None:
            continue
        if not isinstance(listed, list | tuple) or not listed:
            raise keys.error(key, f"{key} must list one block type per layer, got {listed!r}")
        unknown = sorted({str(t) for t in listed} - set(NEMOTRON_H_LAYER_TYPES))
        if unknown:
            raise keys.error(key, f"{key} {unknown} cannot be expressed (read: {', '.join(NEMOTRON_H_LAYER_TYPES)})")
        keys.sources["hybrid_pattern"] = keys.source(key)
        return "".join(NEMOTRON_H_LAYER_TYPES[str(t)] for t in listed)
    raise keys.error("hybrid_override_pattern", "missing required key 'hybrid_override_pattern' (or layers_block_type)")


def _alias(keys: _Keys, field: str, names: tuple[str, ...], default: int) -> int:
    """The first of `names` the config has (the current name, then the older), else NemotronHConfig's default."""
    for name in names:
        if keys.has(name):
            return keys.take(field, name)
    return keys.take(field, names[0], default=default)


def _nemotron_h(keys: _Keys) -> dict[str, Any]:
    """Nemotron-H / Nemotron 3: a hybrid stack of Mamba-2, attention, squared-ReLU MLP and MoE layers (Hugging Face
    `NemotronHForCausalLM`; Megatron-Bridge's NemotronHBridge maps the same keys: CONFIG_MAPPING's mamba_head_dim,
    mamba_num_heads, n_groups -> mamba_num_groups, ssm_state_size -> mamba_state_dim, hybrid_override_pattern ->
    hybrid_layer_pattern, head_dim or attention_head_dim -> kv_channels, plus the base mapping's MoE keys)."""
    for key, what in (
        ("moe_latent_size", "LatentMoE (moe_latent_size: experts in a narrower latent)"),
        ("sliding_window", "sliding-window attention"),
    ):
        if keys.has(key):
            raise keys.error(key, f"{what} cannot be expressed with a hybrid pattern")
    if keys.integer("num_nextn_predict_layers", default=0, minimum=0):
        raise keys.error("num_nextn_predict_layers", "multi-token prediction cannot be expressed with a hybrid pattern")
    pattern = _hybrid_pattern(keys)
    keys.sources["num_layers"] = f"{keys.sources['hybrid_pattern']} (its length)"
    heads = keys.take("num_attention_heads", "num_attention_heads")
    spec: dict[str, Any] = {
        "num_layers": len(pattern),
        "hybrid_pattern": pattern,
        "hidden_size": keys.take("hidden_size", "hidden_size"),
        "num_attention_heads": heads,
        "num_query_groups": keys.take("num_query_groups", "num_key_value_heads", default=heads),
        "head_dim": _alias(keys, "head_dim", ("head_dim", "attention_head_dim"), 128),
        "vocab_size": keys.take("vocab_size", "vocab_size"),
        "tied_embeddings": keys.take_flag("tied_embeddings", "tie_word_embeddings", default=False),
        # Squared ReLU, not gated (mlp_hidden_act relu2); no biases priced; the spec's RoPE (module docstring).
        **keys.fixed(gated_mlp=False, linear_bias=False, learned_position_embeddings=False),
    }
    if "M" in pattern:
        spec["mamba"] = {
            "state_dim": keys.take("mamba.state_dim", "ssm_state_size", default=128),
            "head_dim": keys.take("mamba.head_dim", "mamba_head_dim", default=64),
            "num_groups": _alias(keys, "mamba.num_groups", ("n_groups", "mamba_n_groups"), 8),
            "num_heads": keys.take("mamba.num_heads", "mamba_num_heads", default=128),
            "conv_kernel": _alias(keys, "mamba.conv_kernel", ("conv_kernel", "mamba_d_conv"), 4),
        }
    if "E" in pattern:
        expert_width = keys.take("moe.expert_ffn_hidden_size", "moe_intermediate_size", default=7688)
        shared_width = keys.take(
            "moe.num_shared_experts", "moe_shared_expert_intermediate_size", default=7688, minimum=0
        )
        spec["moe"] = {
            "num_experts": keys.take("moe.num_experts", "n_routed_experts", default=8),
            "top_k": keys.take("moe.top_k", "num_experts_per_tok", default=2),
            "expert_ffn_hidden_size": expert_width,
            # One shared MLP of moe_shared_expert_intermediate_size (NemotronHMoE.shared_experts), as experts of the
            # routed width (Nemotron 3 Nano: 3712 = 2 x 1856, exact).
            "num_shared_experts": math.ceil(shared_width / expert_width),
            **_nemotron_h_router(keys),
        }
        for field in ("moe.moe_layer_freq", "moe.first_k_dense_layers"):  # ModelSpec's defaults with a pattern
            keys.sources[field] = f"{keys.sources['hybrid_pattern']} (its E layers are the MoE layers)"
    if "-" in pattern or keys.has("intermediate_size"):
        spec["ffn_hidden_size"] = keys.take("ffn_hidden_size", "intermediate_size")
    else:
        spec["ffn_hidden_size"] = spec["moe"]["expert_ffn_hidden_size"] if "moe" in spec else 4 * spec["hidden_size"]
        keys.sources["ffn_hidden_size"] = "default (no MLP layer uses it)"
    return spec


def _nemotron_h_router(keys: _Keys) -> dict[str, Any]:
    """Nemotron 3's router, Hugging Face `NemotronHTopkRouter` (DeepSeek-V3's): sigmoid scores, the auxiliary-loss-free
    expert bias (e_score_correction_bias, always built), group-limited routing when n_group > 1 and
    routed_scaling_factor; the balancing loss Megatron-Bridge's NemotronHBridge.provider_bridge trains it with
    (moe_router_load_balancing_type seq_aux_loss, moe_aux_loss_coeff 0.0001), which no config key states."""
    router: dict[str, Any] = {
        "router_score_function": "sigmoid",
        "router_expert_bias": True,
        "router_load_balancing": "seq_aux_loss",
        "router_aux_loss_coeff": 0.0001,
    }
    for name in router:
        keys.sources[f"moe.{name}"] = "architecture (nemotron_h: NemotronHTopkRouter; Megatron-Bridge NemotronHBridge)"
    if keys.integer("n_group", default=1) > 1:
        router["router_num_groups"] = keys.take("moe.router_num_groups", "n_group")
        router["router_group_topk"] = keys.take("moe.router_group_topk", "topk_group")
    factor = keys.number("routed_scaling_factor", default=1.0)
    if factor != 1.0:
        router["router_topk_scaling_factor"] = factor
        keys.sources["moe.router_topk_scaling_factor"] = keys.source("routed_scaling_factor")
    return router


def _gpt2(keys: _Keys) -> dict[str, Any]:
    hidden = keys.take("hidden_size", "n_embd")
    heads = keys.take("num_attention_heads", "n_head")
    keys.sources["num_query_groups"] = "architecture (gpt2: multi-head attention)"
    return {
        "num_layers": keys.take("num_layers", "n_layer"),
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_query_groups": heads,
        "ffn_hidden_size": keys.take("ffn_hidden_size", "n_inner", default=4 * hidden),
        "vocab_size": keys.take("vocab_size", "vocab_size"),
        "tied_embeddings": keys.take_flag("tied_embeddings", "tie_word_embeddings", default=True),
        **keys.fixed(gated_mlp=False, linear_bias=True, learned_position_embeddings=True),
    }


def _gpt_neox(keys: _Keys) -> dict[str, Any]:
    heads = keys.take("num_attention_heads", "num_attention_heads")
    keys.sources["num_query_groups"] = "architecture (gpt_neox: multi-head attention)"
    return {
        "num_layers": keys.take("num_layers", "num_hidden_layers"),
        "hidden_size": keys.take("hidden_size", "hidden_size"),
        "num_attention_heads": heads,
        "num_query_groups": heads,
        "ffn_hidden_size": keys.take("ffn_hidden_size", "intermediate_size"),
        "vocab_size": keys.take("vocab_size", "vocab_size"),
        "tied_embeddings": keys.take_flag("tied_embeddings", "tie_word_embeddings", default=False),
        **keys.fixed(gated_mlp=False, linear_bias=True, learned_position_embeddings=False),
    }


_FAMILIES: dict[str, Callable[[_Keys], dict[str, Any]]] = {
    "llama": _llama,
    "mistral": _llama,
    "qwen2": _llama,
    "qwen3": _llama,
    "mixtral": _mixtral,
    "gpt_oss": _gpt_oss,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "deepseek_v2": _deepseek_v3,  # the same keys: MLA and DeepSeekMoE (arXiv 2405.04434, Sec. 2)
    "deepseek_v3": _deepseek_v3,
    "llama4": _llama4,
    "llama4_text": _llama4,
    "nemotron_h": _nemotron_h,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_FAMILIES)
"""The ``model_type`` values `model_from_hf_config` accepts."""


def _architecture_family(config: Mapping[str, Any]) -> str | None:
    """The family of the first modelling class ``architectures`` names that this module reads (Hugging Face
    builds the model from that class, whatever ``model_type`` says: Kimi K2's is kimi_k2 over
    DeepseekV3ForCausalLM); None when it names none."""
    architectures = config.get("architectures")
    if isinstance(architectures, list | tuple):
        for name in architectures:
            if isinstance(name, str) and name in _ARCHITECTURES:
                return _ARCHITECTURES[name]
    return None


def _guess_model_type(config: Mapping[str, Any]) -> str | None:
    """The family of a config.json without ``model_type``: from ``architectures``, else from telltale keys."""
    if (family := _architecture_family(config)) is not None:
        return family
    if "n_embd" in config and "n_layer" in config:
        return "gpt2"
    if "hybrid_override_pattern" in config or "layers_block_type" in config:
        return "nemotron_h"
    if "n_routed_experts" in config:
        return "deepseek_v3"
    if "num_local_experts" in config:
        return "mixtral"
    if "num_experts" in config and "moe_intermediate_size" in config:
        return "qwen2_moe" if "shared_expert_intermediate_size" in config else "qwen3_moe"
    if "rotary_pct" in config or "use_parallel_residual" in config:
        return "gpt_neox"
    if all(k in config for k in ("num_hidden_layers", "hidden_size", "num_key_value_heads", "intermediate_size")):
        return "llama"
    return None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = validator_message(str(err["msg"]))
        shown = "" if isinstance(err["input"], Mapping) else f" (got {err['input']!r})"
        parts.append(f"{loc}: {msg}{shown}" if loc else msg)
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class ResolvedHfConfig:
    """The model a config.json maps to, and where each field's value came from."""

    model: ModelSpec
    sources: Mapping[str, str]


def model_from_hf_config(config: Mapping[str, Any], seq_length: int | None = None) -> ModelSpec:
    """The ModelSpec of a Hugging Face ``config.json``; see `resolve_hf_config`."""
    return resolve_hf_config(config, seq_length).model


def _seq_length(keys: _Keys, seq_length: int | None) -> int:
    """The sequence length to train at: the argument, else the family's pre-training length capped by the config."""
    if seq_length is not None:
        if isinstance(seq_length, bool) or not isinstance(seq_length, int) or seq_length < 1:
            raise InvalidSpecError("model.seq_length", f"seq_length must be a positive integer, got {seq_length!r}")
        keys.sources["seq_length"] = "request (seq_length)"
        return seq_length
    position_key = "n_positions" if keys.model_type == "gpt2" else "max_position_embeddings"
    if not keys.has(position_key):
        raise keys.error(position_key, f"missing key {position_key!r} and no seq_length given")
    positions = keys.integer(position_key)
    if keys.model_type not in PRETRAINING_SEQ_LENGTH:
        keys.sources["seq_length"] = f"{keys.source(position_key)} (the family trains at its position limit)"
        return positions
    length, source = PRETRAINING_SEQ_LENGTH[keys.model_type]
    if positions <= length:
        keys.sources["seq_length"] = f"{keys.source(position_key)} ({positions} <= the family's {length}: {source})"
        return positions
    keys.sources["seq_length"] = (
        f"family pre-training length ({source}); {keys.source(position_key)} ({positions}) is the inference context;"
        " give seq_length to train longer"
    )
    return length


def _text_keys(config: Mapping[str, Any], model_type: str, *, inferred: bool) -> _Keys:
    """The keys to read: a multimodal config.json (Llama 4's `Llama4ForConditionalGeneration`) keeps its
    language model under ``text_config``, which is what the planner trains; the vision tower is left out."""
    if model_type != "llama4":
        return _Keys(config, model_type, inferred=inferred)
    text = config.get("text_config")
    if text is None and "num_hidden_layers" in config:  # a flat config saved with the wrapper's model_type
        return _Keys(config, model_type, inferred=inferred)
    if not isinstance(text, Mapping):
        raise InvalidSpecError(
            f"{_FIELD}.text_config", f"text_config must be an object holding the language model's keys, got {text!r}"
        )
    return _Keys(text, model_type, inferred=inferred, prefix="text_config.")


def resolve_hf_config(config: Mapping[str, Any], seq_length: int | None = None) -> ResolvedHfConfig:
    """The ModelSpec of a Hugging Face ``config.json`` (already parsed), for the families listed in this module.

    `seq_length` is the length to train at; without it, the family's published
    pre-training length capped by max_position_embeddings (see the module
    docstring). Raises InvalidSpecError, with field ``model.hf_config.<key>``, for a
    missing, non-integer or non-positive key; ``model.hf_config.model_type`` for
    an unsupported family (a model_type read here, or else a modelling class in ``architectures`` that is:
    Kimi K2's kimi_k2 reads as its DeepseekV3ForCausalLM); ``model.hf_config`` when the mapped shape breaks a
    ModelSpec rule (e.g. hidden_size not divisible by num_attention_heads).
    """
    if not isinstance(config, Mapping):
        raise InvalidSpecError(_FIELD, f"config.json must be a JSON object, got {type(config).__name__}")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    raw_type = config.get("model_type")
    if raw_type is None:
        guessed = _guess_model_type(config)
        if guessed is None:
            raise InvalidSpecError(
                f"{_FIELD}.model_type",
                f"config.json has no model_type and its keys match no supported family; supported: {supported}",
            )
        model_type = guessed
    elif isinstance(raw_type, str) and raw_type in _FAMILIES:
        model_type = raw_type
    elif (by_class := _architecture_family(config)) is not None:
        model_type = by_class  # a checkpoint of a known modelling class under its own model_type (Kimi K2)
    else:
        raise InvalidSpecError(f"{_FIELD}.model_type", f"unsupported model_type {raw_type!r}; supported: {supported}")

    keys = _text_keys(config, model_type, inferred=raw_type is None or model_type != raw_type)
    spec = _FAMILIES[model_type](keys)
    spec["seq_length"] = _seq_length(keys, seq_length)
    keys.sources.setdefault("head_dim", "default (hidden_size / num_attention_heads)")  # ModelSpec fills it
    keys.sources.setdefault("mtp_num_layers", "default (0: no multi-token prediction)")
    keys.sources.setdefault("qk_layernorm", "default (false: no query/key norms in this family)")
    if spec.get("moe") is not None:
        for field in MoESpec.model_fields:
            if field.startswith("router_"):
                keys.sources.setdefault(f"moe.{field}", "default (MoESpec's: this family's router does not differ)")

    name = config.get("_name_or_path")
    if isinstance(name, str) and name:
        spec["name"] = name[:100]
        keys.sources["name"] = "hf_config._name_or_path"

    try:
        model = ModelSpec.model_validate(spec)
    except ValidationError as exc:
        raise InvalidSpecError(
            _FIELD, f"config.json for model_type {model_type!r} gives an invalid model: {_describe(exc)}"
        ) from None
    return ResolvedHfConfig(model=model, sources=dict(sorted(keys.sources.items())))
