"""Hugging Face config.json -> ModelSpec: real configs, parameter totals, and error cases."""

from __future__ import annotations

from typing import Any

import pytest

from planner.costmodel.gemms import attention_gemms
from planner.costmodel.params import active_params, total_params
from planner.errors import InvalidSpecError
from planner.hf_config import SUPPORTED_MODEL_TYPES, model_from_hf_config, resolve_hf_config
from planner.presets import get_preset

# config.json of meta-llama/Meta-Llama-3-8B.
LLAMA3_8B: dict[str, Any] = {
    "_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.38.2",
    "use_cache": True,
    "vocab_size": 128256,
}

# config.json of mistralai/Mixtral-8x7B-v0.1.
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_theta": 1000000.0,
    "router_aux_loss_coef": 0.02,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32000,
}

# config.json of Qwen/Qwen2-7B.
QWEN2_7B: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "hidden_act": "silu",
    "hidden_size": 3584,
    "initializer_range": 0.02,
    "intermediate_size": 18944,
    "max_position_embeddings": 131072,
    "max_window_layers": 28,
    "model_type": "qwen2",
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.41.2",
    "use_cache": False,
    "use_sliding_window": False,
    "vocab_size": 152064,
}

# config.json of gpt2 (openai-community/gpt2): no n_inner key, so the MLP is 4 * n_embd.
GPT2: dict[str, Any] = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_layer": 12,
    "n_positions": 1024,
    "resid_pdrop": 0.1,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    "vocab_size": 50257,
}

# config.json of EleutherAI/gpt-neox-20b.
GPT_NEOX_20B: dict[str, Any] = {
    "architectures": ["GPTNeoXForCausalLM"],
    "attention_probs_dropout_prob": 0,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "hidden_act": "gelu_fast",
    "hidden_dropout_prob": 0,
    "hidden_size": 6144,
    "initializer_range": 0.02,
    "intermediate_size": 24576,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048,
    "model_type": "gpt_neox",
    "num_attention_heads": 64,
    "num_hidden_layers": 44,
    "rotary_emb_base": 10000,
    "rotary_pct": 0.25,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "use_cache": True,
    "use_parallel_residual": True,
    "vocab_size": 50432,
}

ROUTER_DEFAULTS: dict[str, Any] = {
    "router_score_function": "softmax",
    "router_pre_softmax": False,
    "router_expert_bias": False,
    "router_num_groups": None,
    "router_group_topk": None,
    "router_topk_scaling_factor": None,
    "router_score_before_experts": False,
    "router_load_balancing": "aux_loss",
    "router_aux_loss_coeff": 0.0,
}
"""MoESpec's router as Megatron-Core's defaults (a softmax over the chosen top_k logits, renormalised; the Switch
load-balancing loss at weight 0)."""
SWITCH_BALANCING = {"router_aux_loss_coeff": 0.001}
"""What a Mixtral, Qwen-MoE or Llama 4 config.json without router_aux_loss_coef trains: Hugging Face's default."""


# config.json of deepseek-ai/DeepSeek-V3.
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_deepseek.DeepseekV3Config",
        "AutoModel": "modeling_deepseek.DeepseekV3Model",
        "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM",
    },
    "aux_loss_alpha": 0.001,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "first_k_dense_replace": 3,
    "hidden_act": "silu",
    "hidden_size": 7168,
    "initializer_range": 0.02,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "pretraining_tp": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 40,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "seq_aux": True,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.46.3",
    "use_cache": True,
    "v_head_dim": 128,
    "vocab_size": 129280,
}

# config.json of Qwen/Qwen1.5-MoE-A2.7B (the shape keys): shared expert 5632 = 4 x 1408.
QWEN15_MOE_A27B: dict[str, Any] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "max_position_embeddings": 8192,
    "max_window_layers": 21,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "norm_topk_prob": False,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "shared_expert_intermediate_size": 5632,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# config.json of Qwen/Qwen3-30B-A3B (the shape keys). head_dim 128 != 2048 / 32: the attention is 4096 wide.
QWEN3_30B_A3B: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "head_dim": 128,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}


# config.json of Qwen/Qwen3-235B-A22B (the shape keys): 64 heads of 128 over hidden 4096.
QWEN3_235B_A22B: dict[str, Any] = QWEN3_30B_A3B | {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_attention_heads": 64,
    "num_hidden_layers": 94,
}


LLAMA4_TEXT: dict[str, Any] = {
    # meta-llama/Llama-4-Maverick-17B-128E config.json, text_config (as TensorRT-LLM's Llama 4 tests copy it):
    # 48 layers of hidden 5120, 40 query / 8 KV heads of 128, experts of 8192, dense layers of 16384.
    "model_type": "llama4_text",
    "attention_chunk_size": 8192,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "interleave_moe_layer_step": 2,
    "intermediate_size": 8192,
    "intermediate_size_mlp": 16384,
    "max_position_embeddings": 1048576,
    "num_attention_heads": 40,
    "num_experts_per_tok": 1,
    "num_hidden_layers": 48,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "use_qk_norm": False,
    "vocab_size": 202048,
}
LLAMA4_MAVERICK: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": LLAMA4_TEXT,
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 1408, "num_hidden_layers": 34},
}
LLAMA4_SCOUT: dict[str, Any] = LLAMA4_MAVERICK | {
    # meta-llama/Llama-4-Scout-17B-16E: every layer MoE, 16 experts, a 10M-token inference context.
    "text_config": LLAMA4_TEXT
    | {"interleave_moe_layer_step": 1, "num_local_experts": 16, "max_position_embeddings": 10485760},
}


def _without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in keys}


_ROPE_GATED = {"gated_mlp": True, "linear_bias": False, "learned_position_embeddings": False}
_GPT_STYLE = {"gated_mlp": False, "linear_bias": True}

REAL_CONFIGS = [
    pytest.param(
        LLAMA3_8B,
        None,
        {
            "name": "meta-llama/Meta-Llama-3-8B",
            "num_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_query_groups": 8,
            "head_dim": 128,
            "ffn_hidden_size": 14336,
            "vocab_size": 128256,
            "seq_length": 8192,
            "tied_embeddings": False,
            "moe": None,
            **_ROPE_GATED,
        },
        8.03e9,
        0.02,
        id="llama3-8b",
    ),
    pytest.param(
        MIXTRAL_8X7B,
        None,
        {
            "name": None,
            "num_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_query_groups": 8,
            "head_dim": 128,
            "ffn_hidden_size": 14336,
            "vocab_size": 32000,
            "seq_length": 32768,
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                "router_aux_loss_coeff": 0.02,  # router_aux_loss_coef
                "num_experts": 8,
                "top_k": 2,
                "expert_ffn_hidden_size": 14336,
                "num_shared_experts": 0,
                "moe_layer_freq": 1,
                "first_k_dense_layers": 0,
            },
            **_ROPE_GATED,
        },
        46.7e9,
        0.02,
        id="mixtral-8x7b",
    ),
    pytest.param(
        QWEN2_7B,
        None,
        {
            "name": None,
            "num_layers": 28,
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "num_query_groups": 4,
            "head_dim": 128,
            "ffn_hidden_size": 18944,
            "vocab_size": 152064,
            "seq_length": 4096,  # Qwen2's pre-training length, not max_position_embeddings (131072)
            "tied_embeddings": False,
            "moe": None,
            **_ROPE_GATED,
        },
        7.6e9,
        0.02,
        id="qwen2-7b",
    ),
    pytest.param(
        GPT2,
        None,
        {
            "name": None,
            "num_layers": 12,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "num_query_groups": 12,
            "head_dim": 64,
            "ffn_hidden_size": 3072,
            "vocab_size": 50257,
            "seq_length": 1024,
            "tied_embeddings": True,
            "learned_position_embeddings": True,
            "moe": None,
            **_GPT_STYLE,
        },
        124e6,
        0.02,
        id="gpt2",
    ),
    pytest.param(
        GPT_NEOX_20B,
        None,
        {
            "name": None,
            "num_layers": 44,
            "hidden_size": 6144,
            "num_attention_heads": 64,
            "num_query_groups": 64,
            "head_dim": 96,
            "ffn_hidden_size": 24576,
            "vocab_size": 50432,
            "seq_length": 2048,
            "tied_embeddings": False,
            "learned_position_embeddings": False,
            "moe": None,
            **_GPT_STYLE,
        },
        20.6e9,
        0.02,
        id="gpt-neox-20b",
    ),
    pytest.param(
        DEEPSEEK_V3,
        None,
        {
            "name": None,
            "num_layers": 61,
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "num_query_groups": 128,
            "head_dim": 128,  # mla.v_head_dim
            "ffn_hidden_size": 18432,
            "vocab_size": 129280,
            "seq_length": 4096,  # DeepSeek-V3's pre-training length, not max_position_embeddings (163840)
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                "router_score_function": "sigmoid",
                "router_expert_bias": True,
                "router_num_groups": 8,
                "router_group_topk": 4,
                "router_topk_scaling_factor": 2.5,
                "router_load_balancing": "seq_aux_loss",  # seq_aux true
                "router_aux_loss_coeff": 0.001,  # aux_loss_alpha
                "num_experts": 256,
                "top_k": 8,
                "expert_ffn_hidden_size": 2048,
                "num_shared_experts": 1,
                "moe_layer_freq": 1,
                "first_k_dense_layers": 3,
            },
            "mtp_num_layers": 1,  # num_nextn_predict_layers
            "mla": {
                "q_lora_rank": 1536,
                "kv_lora_rank": 512,
                "qk_head_dim": 128,
                "qk_pos_emb_head_dim": 64,
                "v_head_dim": 128,
            },
            **_ROPE_GATED,
        },
        682.1e9,
        0.001,  # 671.03B with multi-latent attention (the report's 671B) + 11.07B for the MTP module's layer
        # (an average one), eh_proj and norms; the 685B checkpoint also counts the shared embedding and head again
        id="deepseek-v3",
    ),
    pytest.param(
        QWEN15_MOE_A27B,
        None,
        {
            "name": None,
            "num_layers": 24,
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_query_groups": 16,
            "head_dim": 128,
            "ffn_hidden_size": 5632,
            "vocab_size": 151936,
            "seq_length": 4096,  # the qwen2_moe family pre-trains at 4096 (max_position_embeddings 8192)
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                "router_pre_softmax": True,  # norm_topk_prob false: the softmax weights as they are
                **SWITCH_BALANCING,
                "num_experts": 60,
                "top_k": 4,
                "expert_ffn_hidden_size": 1408,
                "num_shared_experts": 4,
                "moe_layer_freq": 1,
                "first_k_dense_layers": 0,
            },
            **_ROPE_GATED,
        },
        14.3e9,
        0.02,
        id="qwen1.5-moe-a2.7b",
    ),
    pytest.param(
        QWEN3_30B_A3B,
        4096,
        {
            "name": None,
            "num_layers": 48,
            "hidden_size": 2048,
            "num_attention_heads": 32,
            "num_query_groups": 4,
            "head_dim": 128,
            "ffn_hidden_size": 6144,
            "vocab_size": 151936,
            "seq_length": 4096,
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                **SWITCH_BALANCING,
                "num_experts": 128,
                "top_k": 8,
                "expert_ffn_hidden_size": 768,
                "num_shared_experts": 0,
                "moe_layer_freq": 1,
                "first_k_dense_layers": 0,
            },
            **_ROPE_GATED,
            "qk_layernorm": True,
        },
        30.5e9,
        0.002,  # 30,532,122,624: Hugging Face's count, the q/k norms (48 x 2 x 128) included
        id="qwen3-30b-a3b",
    ),
    pytest.param(
        QWEN3_235B_A22B,
        4096,
        {
            "name": None,
            "num_layers": 94,
            "hidden_size": 4096,
            "num_attention_heads": 64,
            "num_query_groups": 4,
            "head_dim": 128,
            "ffn_hidden_size": 12288,
            "vocab_size": 151936,
            "seq_length": 4096,
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                **SWITCH_BALANCING,
                "num_experts": 128,
                "top_k": 8,
                "expert_ffn_hidden_size": 1536,
                "num_shared_experts": 0,
                "moe_layer_freq": 1,
                "first_k_dense_layers": 0,
            },
            **_ROPE_GATED,
            "qk_layernorm": True,
        },
        235.0e9,
        0.001,  # 235,093,634,560 with the q/k norms (94 x 2 x 128; the model card's 235B; 22.19B active)
        id="qwen3-235b-a22b",
    ),
    pytest.param(
        LLAMA4_MAVERICK,
        None,
        {
            "name": None,
            "num_layers": 48,
            "hidden_size": 5120,
            "num_attention_heads": 40,
            "num_query_groups": 8,
            "head_dim": 128,
            "ffn_hidden_size": 16384,
            "vocab_size": 202048,
            "seq_length": 8192,
            "tied_embeddings": False,
            "moe": {
                **ROUTER_DEFAULTS,
                "router_score_function": "sigmoid",
                "router_score_before_experts": True,
                **SWITCH_BALANCING,
                "num_experts": 128,
                "top_k": 1,
                "expert_ffn_hidden_size": 8192,
                "num_shared_experts": 1,
                "moe_layer_freq": 2,
                "first_k_dense_layers": 1,
            },
            **_ROPE_GATED,
        },
        400e9,
        0.005,  # 400,711,848,960: Meta's model card says 400B total, 17B active
        id="llama4-maverick",
    ),
]


@pytest.mark.parametrize(("config", "seq_length", "expected", "advertised", "rel"), REAL_CONFIGS)
def test_real_config(
    config: dict[str, Any], seq_length: int | None, expected: dict[str, Any], advertised: float, rel: float
) -> None:
    model = model_from_hf_config(config, seq_length=seq_length)
    # MLA and MTP: DeepSeek's alone; the query/key norms: Qwen3's alone; a sliding window: none of these
    unset = {"mla": None, "mtp_num_layers": 0, "qk_layernorm": False, "sliding_window": None}
    unset |= {"hybrid_pattern": None, "mamba": None}  # a transformer (nemotron_h's cases set both)
    assert model.model_dump() == unset | {"sliding_window_pattern": None} | expected
    assert total_params(model) == pytest.approx(advertised, rel=rel)


def test_seq_length_argument_overrides_max_position_embeddings() -> None:
    assert model_from_hf_config(LLAMA3_8B, seq_length=4096).seq_length == 4096
    assert model_from_hf_config(GPT2, seq_length=512).seq_length == 512


def test_seq_length_argument_stands_in_for_a_missing_position_key() -> None:
    config = _without(LLAMA3_8B, "max_position_embeddings")
    assert model_from_hf_config(config, seq_length=2048).seq_length == 2048


def test_gpt2_explicit_n_inner_and_untied() -> None:
    model = model_from_hf_config({**GPT2, "n_inner": 2048, "tie_word_embeddings": False})
    assert (model.ffn_hidden_size, model.tied_embeddings) == (2048, False)


def test_llama_without_num_key_value_heads_is_mha() -> None:
    config = _without(LLAMA3_8B, "num_key_value_heads")
    assert model_from_hf_config(config).num_query_groups == 32


@pytest.mark.parametrize(
    ("config", "model_type"),
    [
        pytest.param(_without(MIXTRAL_8X7B, "model_type"), "mixtral", id="architectures"),
        pytest.param(
            _without(DEEPSEEK_V3, "model_type", "architectures"),
            "deepseek_v3",
            id="keys-deepseek",
        ),
        pytest.param(_without(GPT2, "model_type", "architectures"), "gpt2", id="keys-gpt2"),
    ],
)
def test_model_type_inferred_when_absent(config: dict[str, Any], model_type: str) -> None:
    with_type = {**config, "model_type": model_type}
    assert model_from_hf_config(config) == model_from_hf_config(with_type)


def test_qwen_moe_sparse_step_maps_onto_the_same_layers() -> None:
    # Qwen: layer i is MoE when (i + 1) % step == 0 -> layers 1, 3, ..., 23 of 24.
    model = model_from_hf_config({**QWEN15_MOE_A27B, "decoder_sparse_step": 2})
    assert model.moe is not None
    assert (model.moe.first_k_dense_layers, model.moe.moe_layer_freq) == (1, 2)
    assert (model.num_moe_layers, model.num_dense_layers) == (12, 12)


def test_qwen_moe_leading_mlp_only_layers_become_first_k_dense() -> None:
    model = model_from_hf_config({**QWEN3_30B_A3B, "mlp_only_layers": [0, 1]}, seq_length=4096)
    assert model.moe is not None
    assert (model.moe.first_k_dense_layers, model.moe.moe_layer_freq, model.num_moe_layers) == (2, 1, 46)


def test_qwen_moe_without_intermediate_size_when_every_layer_is_moe() -> None:
    config = _without(QWEN3_30B_A3B, "intermediate_size")
    model = model_from_hf_config(config, seq_length=4096)
    assert model.num_dense_layers == 0


def test_deepseek_moe_layer_freq_maps_onto_the_same_layers() -> None:
    # DeepSeek: layer i is MoE when i >= 3 and i % 2 == 0 -> layers 4, 6, ..., 60 of 61.
    model = model_from_hf_config({**DEEPSEEK_V3, "moe_layer_freq": 2})
    assert model.moe is not None
    assert (model.moe.first_k_dense_layers, model.moe.moe_layer_freq, model.num_moe_layers) == (4, 2, 29)


def test_llama4_scout_reads_the_language_model_of_the_multimodal_config() -> None:
    resolved = resolve_hf_config(LLAMA4_SCOUT)
    model = resolved.model
    assert model.moe is not None
    assert (model.moe.num_experts, model.moe.top_k, model.moe.num_shared_experts) == (16, 1, 1)
    assert (model.num_moe_layers, model.num_dense_layers) == (48, 0)
    # Meta's card: 17B active, 109B total with the vision encoder, which is not trained here (107.8B without).
    assert active_params(model) == pytest.approx(17e9, abs=0.5e9)
    assert total_params(model) == pytest.approx(107.77e9, rel=1e-3)
    assert resolved.sources["moe.num_experts"] == "hf_config.text_config.num_local_experts"
    assert "10485760" in resolved.sources["seq_length"] and "llama4_e16" in resolved.sources["seq_length"]


def test_llama4_flat_text_config_is_the_same_model() -> None:
    assert model_from_hf_config(LLAMA4_TEXT) == model_from_hf_config(LLAMA4_MAVERICK)
    assert model_from_hf_config(_without(LLAMA4_TEXT, "model_type") | {"architectures": ["Llama4ForCausalLM"]}) == (
        model_from_hf_config(LLAMA4_TEXT)
    )


def test_llama4_moe_layers_list_maps_onto_the_same_layers() -> None:
    listed = LLAMA4_TEXT | {"moe_layers": list(range(1, 48, 2))}
    assert model_from_hf_config(listed) == model_from_hf_config(LLAMA4_TEXT)


def test_supported_model_types() -> None:
    assert set(SUPPORTED_MODEL_TYPES) == {
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "mixtral",
        "gpt_oss",
        "qwen2_moe",
        "qwen3_moe",
        "deepseek_v2",
        "deepseek_v3",
        "llama4",
        "llama4_text",
        "nemotron_h",
        "gpt2",
        "gpt_neox",
    }


ERROR_CASES = [
    pytest.param(
        _without(LLAMA3_8B, "num_attention_heads"),
        None,
        "model.hf_config.num_attention_heads",
        ["num_attention_heads", "llama", "missing"],
        id="missing-num-attention-heads",
    ),
    pytest.param(
        _without(GPT2, "n_head"), None, "model.hf_config.n_head", ["n_head", "gpt2"], id="missing-gpt2-n-head"
    ),
    pytest.param(
        _without(DEEPSEEK_V3, "n_routed_experts"),
        None,
        "model.hf_config.n_routed_experts",
        ["n_routed_experts", "deepseek_v3"],
        id="missing-deepseek-experts",
    ),
    pytest.param(
        {**_without(LLAMA3_8B, "architectures"), "model_type": "bert"},  # no modelling class read here either
        None,
        "model.hf_config.model_type",
        ["'bert'", "supported:", "llama", "deepseek_v3", "gpt_neox"],
        id="unsupported-model-type",
    ),
    pytest.param(
        {"hidden_size": 768, "num_layers": 12},
        None,
        "model.hf_config.model_type",
        ["no model_type", "supported:"],
        id="no-model-type-unrecognised-keys",
    ),
    pytest.param(
        {**LLAMA3_8B, "num_hidden_layers": -32},
        None,
        "model.hf_config.num_hidden_layers",
        ["num_hidden_layers", "positive", "-32"],
        id="negative-value",
    ),
    pytest.param(
        {**GPT2, "vocab_size": 0},
        None,
        "model.hf_config.vocab_size",
        ["vocab_size", "positive"],
        id="zero-value",
    ),
    pytest.param(
        {**LLAMA3_8B, "hidden_size": "4096"},
        None,
        "model.hf_config.hidden_size",
        ["hidden_size", "integer", "'4096'"],
        id="string-value",
    ),
    pytest.param(
        {**LLAMA3_8B, "hidden_size": 4096.5},
        None,
        "model.hf_config.hidden_size",
        ["hidden_size", "integer"],
        id="float-value",
    ),
    pytest.param(
        {**LLAMA3_8B, "num_hidden_layers": True},
        None,
        "model.hf_config.num_hidden_layers",
        ["num_hidden_layers", "integer"],
        id="bool-value",
    ),
    pytest.param(
        {**DEEPSEEK_V3, "n_shared_experts": -1},
        None,
        "model.hf_config.n_shared_experts",
        ["n_shared_experts", ">= 0"],
        id="negative-shared-experts",
    ),
    pytest.param(
        {**LLAMA3_8B, "tie_word_embeddings": "no"},
        None,
        "model.hf_config.tie_word_embeddings",
        ["tie_word_embeddings", "true or false"],
        id="non-bool-flag",
    ),
    pytest.param(
        {**LLAMA3_8B, "num_attention_heads": 24, "num_key_value_heads": 8},
        None,
        "model.hf_config",
        ["hidden_size(4096) % num_attention_heads(24)", "llama"],
        id="heads-not-dividing-hidden",
    ),
    pytest.param(
        {**LLAMA3_8B, "num_key_value_heads": 5},
        None,
        "model.hf_config",
        ["num_attention_heads(32) % num_query_groups(5)"],
        id="kv-heads-not-dividing-heads",
    ),
    pytest.param(
        {**MIXTRAL_8X7B, "num_experts_per_tok": 9},
        None,
        "model.hf_config",
        ["top_k(9) must be <= num_experts(8)"],
        id="top-k-over-experts",
    ),
    pytest.param(
        {**GPT_NEOX_20B, "max_position_embeddings": 10_000_000},
        None,
        "model.hf_config",
        ["seq_length", "10000000"],
        id="context-over-spec-limit",
    ),
    pytest.param(
        _without(GPT_NEOX_20B, "max_position_embeddings"),
        None,
        "model.hf_config.max_position_embeddings",
        ["max_position_embeddings", "seq_length", "gpt_neox"],
        id="no-seq-length-anywhere",
    ),
    pytest.param(LLAMA3_8B, 0, "model.seq_length", ["seq_length", "positive"], id="bad-seq-length-argument"),
    pytest.param(
        {**QWEN3_30B_A3B, "mlp_only_layers": [5, 9]},
        4096,
        "model.hf_config.mlp_only_layers",
        ["cannot express"],
        id="irregular-mlp-only-layers",
    ),
    pytest.param(
        {**QWEN3_30B_A3B, "mlp_only_layers": [48]},
        4096,
        "model.hf_config.mlp_only_layers",
        ["layer indices"],
        id="mlp-only-layer-out-of-range",
    ),
    pytest.param(
        {**_without(QWEN3_30B_A3B, "intermediate_size"), "decoder_sparse_step": 2},
        4096,
        "model.hf_config.intermediate_size",
        ["intermediate_size", "qwen3_moe"],
        id="qwen-moe-dense-layers-need-intermediate-size",
    ),
    pytest.param(
        LLAMA4_MAVERICK | {"text_config": [1, 2]},
        None,
        "model.hf_config.text_config",
        ["text_config must be an object"],
        id="llama4-text-config-not-an-object",
    ),
    pytest.param(
        LLAMA4_MAVERICK | {"text_config": _without(LLAMA4_TEXT, "hidden_size")},
        None,
        "model.hf_config.text_config.hidden_size",
        ["missing required key 'hidden_size'", "llama4"],
        id="llama4-missing-key-named-under-text-config",
    ),
    pytest.param(
        LLAMA4_TEXT | {"moe_layers": [1, 2, 7]},
        None,
        "model.hf_config.moe_layers",
        ["cannot express"],
        id="llama4-irregular-moe-layers",
    ),
]


@pytest.mark.parametrize(("config", "seq_length", "field", "fragments"), ERROR_CASES)
def test_invalid_config(config: dict[str, Any], seq_length: int | None, field: str, fragments: list[str]) -> None:
    with pytest.raises(InvalidSpecError) as info:
        model_from_hf_config(config, seq_length=seq_length)
    assert info.value.field == field
    for fragment in fragments:
        assert fragment in info.value.message
    # A pydantic ValidationError never leaks, not even as the exception's cause.
    assert info.value.__cause__ is None


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (LLAMA3_8B, 8192),  # max_position_embeddings 8192 = Llama 3's pre-training length
        ({**LLAMA3_8B, "max_position_embeddings": 131072}, 8192),  # Llama 3.1: 128K is the inference context
        ({**LLAMA3_8B, "max_position_embeddings": 4096}, 4096),  # Llama 2: the config caps the family length
        (QWEN2_7B, 4096),
        (GPT2, 1024),  # learned positions: trained at n_positions
        (GPT_NEOX_20B, 2048),
    ],
)
def test_default_seq_length_is_the_pretraining_length(config: dict[str, Any], expected: int) -> None:
    resolved = resolve_hf_config(config)
    assert resolved.model.seq_length == expected
    assert resolved.sources["seq_length"].startswith(("hf_config.", "family pre-training length"))


def test_every_field_has_a_source() -> None:
    for config in (LLAMA3_8B, QWEN2_7B, GPT2, GPT_NEOX_20B, DEEPSEEK_V3, QWEN3_30B_A3B, GPT_OSS_120B):
        resolved = resolve_hf_config(config, seq_length=4096)
        fields = set(resolved.model.model_dump(exclude={"moe", "mla", "name"}, exclude_none=True))
        if resolved.model.moe is not None:
            fields |= {f"moe.{k}" for k in resolved.model.moe.model_dump()}
        if resolved.model.mla is not None:
            fields |= {f"mla.{k}" for k in resolved.model.mla.model_dump()}
        fields -= {"moe.num_shared_experts", "moe.first_k_dense_layers", "moe.moe_layer_freq"} - set(resolved.sources)
        assert fields <= set(resolved.sources), fields - set(resolved.sources)
        assert resolved.sources["seq_length"] == "request (seq_length)"


def test_sources_name_the_key_read() -> None:
    sources = resolve_hf_config(QWEN2_7B).sources
    assert sources["num_layers"] == "hf_config.num_hidden_layers"
    assert sources["num_query_groups"] == "hf_config.num_key_value_heads"
    assert sources["gated_mlp"] == "architecture (qwen2)"
    assert "131072" in sources["seq_length"] and "arXiv 2412.15115" in sources["seq_length"]
    gpt2 = resolve_hf_config(GPT2).sources
    assert gpt2["hidden_size"] == "hf_config.n_embd" and gpt2["seq_length"].startswith("hf_config.n_positions")


# The architecture keys of deepseek-ai/DeepSeek-V2-Lite's config.json (its card: 15.7B total, 2.4B activated).
DEEPSEEK_V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "model_type": "deepseek_v2",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_experts_per_tok": 6,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 102400,
    "max_position_embeddings": 163840,
    "tie_word_embeddings": False,
}


def test_deepseek_v2_lite_has_no_query_latent() -> None:
    """DeepSeek-V2-Lite does not compress the queries (q_lora_rank null): one q projection h -> heads x 192; the
    card's 15.7B total parameters; pre-trained at 4K."""
    resolved = resolve_hf_config(DEEPSEEK_V2_LITE)
    model = resolved.model
    assert model.mla is not None and model.mla.q_lora_rank is None
    assert (model.mla.kv_lora_rank, model.query_key_head_dim, model.head_dim) == (512, 192, 128)
    assert model.seq_length == 4096 and resolved.sources["mla.q_lora_rank"] == "null in hf_config"
    assert total_params(model) == pytest.approx(15.7e9, rel=0.01)
    assert [g.name for g in attention_gemms(model)] == ["q", "kv_down", "kv_up", "proj"]


def test_deepseek_routers_read_from_their_keys() -> None:
    """DeepSeek-V2-Lite (softmax, greedy, n_group 1, norm_topk_prob false: the softmax weights as they are),
    DeepSeek-V2's group-limited greedy routing (8 groups, 3 per token, weights x 16) and DeepSeek-V3's sigmoid with
    the noaux_tc expert bias (4 of 8 groups, x 2.5), each field sourced; an unknown scoring_func is refused."""
    lite_keys = {"scoring_func": "softmax", "topk_method": "greedy", "n_group": 1, "topk_group": 1}
    lite = resolve_hf_config(DEEPSEEK_V2_LITE | lite_keys | {"routed_scaling_factor": 1.0, "norm_topk_prob": False})
    assert lite.model.moe is not None
    per_sequence = {"router_load_balancing": "seq_aux_loss", "router_aux_loss_coeff": 0.001}  # seq_aux, aux_loss_alpha
    assert lite.model.moe.model_dump(include=set(ROUTER_DEFAULTS)) == ROUTER_DEFAULTS | per_sequence | {
        "router_pre_softmax": True
    }
    assert lite.sources["moe.router_pre_softmax"] == "hf_config.norm_topk_prob"
    v2 = DEEPSEEK_V2_LITE | {"topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3}
    grouped = model_from_hf_config(v2 | {"routed_scaling_factor": 16.0, "n_routed_experts": 160}).moe
    assert grouped is not None
    assert (grouped.router_num_groups, grouped.router_group_topk, grouped.router_topk_scaling_factor) == (8, 3, 16.0)
    assert (grouped.router_score_function, grouped.router_pre_softmax) == ("softmax", True)
    v3 = resolve_hf_config(DEEPSEEK_V3)
    assert v3.model.moe is not None and v3.model.moe.router_expert_bias
    assert v3.sources["moe.router_expert_bias"] == "hf_config.topk_method"
    assert v3.sources["moe.router_topk_scaling_factor"] == "hf_config.routed_scaling_factor"
    with pytest.raises(InvalidSpecError, match="scoring_func must be softmax or sigmoid, got 'sqrtsoftplus'"):
        model_from_hf_config(DEEPSEEK_V3 | {"scoring_func": "sqrtsoftplus"})


def test_the_balancing_loss_is_read_from_its_keys() -> None:
    """DeepSeek's seq_aux picks the per-sequence or the batch loss and aux_loss_alpha weighs it; Mixtral's, Qwen's and
    Llama 4's router_aux_loss_coef weighs the batch (Switch) loss, Hugging Face's 0.001 where the key is absent; each
    value is sourced, and a weight outside [0, 1] is refused naming its key."""
    v3 = resolve_hf_config(DEEPSEEK_V3)
    assert v3.model.moe is not None
    assert (v3.model.moe.router_load_balancing, v3.model.moe.router_aux_loss_coeff) == ("seq_aux_loss", 0.001)
    assert v3.sources["moe.router_load_balancing"] == "hf_config.seq_aux"
    assert v3.sources["moe.router_aux_loss_coeff"] == "hf_config.aux_loss_alpha"
    batch = model_from_hf_config(DEEPSEEK_V3 | {"seq_aux": False, "aux_loss_alpha": 0}).moe
    assert batch is not None and (batch.router_load_balancing, batch.router_aux_loss_coeff) == ("aux_loss", 0.0)
    mixtral = resolve_hf_config(MIXTRAL_8X7B)
    assert mixtral.model.moe is not None and mixtral.model.moe.router_aux_loss_coeff == 0.02
    assert mixtral.sources["moe.router_aux_loss_coeff"] == "hf_config.router_aux_loss_coef"
    unstated = resolve_hf_config({k: v for k, v in MIXTRAL_8X7B.items() if k != "router_aux_loss_coef"})
    assert unstated.model.moe is not None and unstated.model.moe.router_aux_loss_coeff == 0.001
    assert unstated.sources["moe.router_aux_loss_coeff"] == "hf_config default"
    for bad in (1.5, -0.01, "0.01", True):
        with pytest.raises(InvalidSpecError, match=r"router_aux_loss_coef must be a number in \[0, 1\]") as caught:
            model_from_hf_config(MIXTRAL_8X7B | {"router_aux_loss_coef": bad})
        assert caught.value.field == "model.hf_config.router_aux_loss_coef"
    with pytest.raises(InvalidSpecError, match=r"aux_loss_alpha must be a number in \[0, 1\]"):
        model_from_hf_config(DEEPSEEK_V3 | {"aux_loss_alpha": 2})


def test_a_known_modelling_class_under_its_own_model_type_is_read_by_that_class() -> None:
    """Kimi K2 ships model_type kimi_k2 with architectures DeepseekV3ForCausalLM, the class Hugging Face builds:
    such a config reads as that family (here DeepSeek-V3's keys under another model_type); a class this module
    does not read is still refused."""
    renamed = DEEPSEEK_V3 | {"model_type": "kimi_k2"}
    assert model_from_hf_config(renamed) == model_from_hf_config(DEEPSEEK_V3)
    with pytest.raises(InvalidSpecError, match="unsupported model_type 'kimi_k2'"):
        model_from_hf_config(renamed | {"architectures": ["KimiForCausalLM"]})


# config.json of openai/gpt-oss-120b (the keys this module reads, and the MoE/attention extras it ignores).
GPT_OSS_120B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "experts_per_token": 4,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "num_local_experts": 128,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "original_max_position_embeddings": 4096, "rope_type": "yarn"},
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "vocab_size": 201088,
}


def test_gpt_oss_is_the_preset() -> None:
    """The 120B config.json reads as the preset, window, pattern, router and pre-training length included."""
    resolved = resolve_hf_config(GPT_OSS_120B)
    preset = get_preset("gpt-oss-120b").model
    assert resolved.model.model_dump(exclude={"name"}) == preset.model_dump(exclude={"name"})
    assert resolved.sources["sliding_window"] == "hf_config.sliding_window"
    assert resolved.sources["sliding_window_pattern"] == "hf_config.layer_types"
    assert resolved.sources["moe.router_load_balancing"] == "architecture (gpt_oss)"
    # Without layer_types, GptOssConfig's default: sliding then full.
    assert model_from_hf_config(_without(GPT_OSS_120B, "layer_types")) == resolved.model


@pytest.mark.parametrize(
    ("update", "window", "pattern"),
    [
        ({"layer_types": ["sliding_attention"] * 36}, 128, None),
        ({"layer_types": ["full_attention"] * 36}, None, None),
        ({"layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 6}, 128, 6),  # Gemma 3's 5:1
    ],
)
def test_layer_types_become_the_window_pattern(update: dict[str, Any], window: int | None, pattern: int | None) -> None:
    model = model_from_hf_config(GPT_OSS_120B | update)
    assert (model.sliding_window, model.sliding_window_pattern) == (window, pattern)


def test_mistral_windows_every_layer_and_mixtral_none() -> None:
    """Mistral 7B v0.1 (sliding_window 4096) windows every layer; Mixtral's null window is full attention."""
    mistral = LLAMA3_8B | {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "sliding_window": 4096}
    model = model_from_hf_config(mistral)
    assert (model.sliding_window, model.sliding_window_pattern, model.num_window_layers) == (4096, None, 32)
    assert model_from_hf_config(MIXTRAL_8X7B).sliding_window is None
    # Qwen's window is off unless use_sliding_window says otherwise (every released config).
    assert model_from_hf_config(LLAMA3_8B | {"model_type": "qwen2", "sliding_window": 4096}).sliding_window is None


WINDOW_ERROR_CASES = [
    pytest.param(
        GPT_OSS_120B | {"layer_types": ["full_attention"] + ["sliding_attention"] * 35},
        None,
        "model.hf_config.layer_types",
        ["full-attention layers (1 of 36: 0)", "every N-th layer", "gpt_oss"],
        id="gpt-oss-full-first-layer",
    ),
    pytest.param(
        GPT_OSS_120B | {"layer_types": ["sliding_attention", "chunked_attention"] * 18},
        None,
        "model.hf_config.layer_types",
        ["['chunked_attention']", "cannot be expressed"],
        id="gpt-oss-chunked-layer-type",
    ),
    pytest.param(
        GPT_OSS_120B | {"layer_types": ["sliding_attention"] * 35},
        None,
        "model.hf_config.layer_types",
        ["one attention type per layer (36)"],
        id="gpt-oss-layer-types-length",
    ),
    pytest.param(
        LLAMA3_8B
        | {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 28},
        None,
        "model.hf_config.max_window_layers",
        ["from max_window_layers (28) on", "qwen2"],
        id="qwen2-window-above-max-window-layers",
    ),
]


@pytest.mark.parametrize(("config", "seq_length", "field", "fragments"), WINDOW_ERROR_CASES)
def test_inexpressible_windows_are_refused(
    config: dict[str, Any], seq_length: int | None, field: str, fragments: list[str]
) -> None:
    test_invalid_config(config, seq_length, field, fragments)


# Nemotron-H / Nemotron 3 (model_type nemotron_h). Key names: Hugging Face NemotronHConfig (transformers
# models/nemotron_h/configuration_nemotron_h.py, with its older aliases); values: Megatron-Bridge's recipes
# (NVIDIA-NeMo/Megatron-Bridge 38b4a06ba1ed src/megatron/bridge/recipes/nemotronh/nemotronh.py
# nemotronh_8b/56b_pretrain_config, nemotron_3_nano.py nemotron_3_nano_pretrain_config) and NeMo 2.7.3's
# NemotronHConfig8B / 56B (nemo/collections/llm/gpt/model/ssm.py).
NEMOTRON_H_8B_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
NEMOTRON_H_56B_PATTERN = (
    "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
    "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
)
NEMOTRON_3_NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NEMOTRON_H_8B: dict[str, Any] = {
    "_name_or_path": "nvidia/Nemotron-H-8B-Base-8K",
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 4096,
    "intermediate_size": 21504,
    "num_hidden_layers": 52,
    "hybrid_override_pattern": NEMOTRON_H_8B_PATTERN,
    "num_attention_heads": 32,
    "attention_head_dim": 128,  # the older name of head_dim
    "num_key_value_heads": 8,
    "mlp_hidden_act": "relu2",
    "ssm_state_size": 128,
    "mamba_num_heads": 128,
    "mamba_head_dim": 64,
    "n_groups": 8,
    "conv_kernel": 4,
    "expand": 2,
    "use_conv_bias": True,
    "mamba_proj_bias": False,
    "use_bias": False,
    "vocab_size": 131072,
    "tie_word_embeddings": False,
    "max_position_embeddings": 8192,
}
NEMOTRON_H_56B: dict[str, Any] = NEMOTRON_H_8B | {
    "_name_or_path": "nvidia/Nemotron-H-56B-Base-8K",
    "hidden_size": 8192,
    "intermediate_size": 32768,
    "num_hidden_layers": 118,
    "hybrid_override_pattern": NEMOTRON_H_56B_PATTERN,
    "num_attention_heads": 64,
    "ssm_state_size": 256,
    "mamba_num_heads": 256,
}
NEMOTRON_3_NANO: dict[str, Any] = {
    "_name_or_path": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "architectures": ["NemotronHForCausalLM"],
    "model_type": "nemotron_h",
    "hidden_size": 2688,
    "intermediate_size": 1856,
    "num_hidden_layers": 52,
    "hybrid_override_pattern": NEMOTRON_3_NANO_PATTERN,
    "num_attention_heads": 32,
    "head_dim": 128,
    "num_key_value_heads": 2,
    "mlp_hidden_act": "relu2",
    "ssm_state_size": 128,
    "mamba_num_heads": 64,
    "mamba_head_dim": 64,
    "n_groups": 8,
    "conv_kernel": 4,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712,
    "num_experts_per_tok": 6,
    "routed_scaling_factor": 2.5,
    "n_group": 1,
    "topk_group": 1,
    "norm_topk_prob": True,
    "vocab_size": 131072,
    "tie_word_embeddings": False,
    "max_position_embeddings": 262144,
}
_NEMOTRON_H = {"gated_mlp": False, "linear_bias": False, "learned_position_embeddings": False}
_NEMOTRON_ROUTER = {
    "router_score_function": "sigmoid",
    "router_expert_bias": True,
    "router_load_balancing": "seq_aux_loss",
    "router_aux_loss_coeff": 0.0001,
}


@pytest.mark.parametrize(
    ("config", "expected", "advertised", "rel"),
    [
        pytest.param(
            NEMOTRON_H_8B,
            {
                "num_layers": 52,
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_query_groups": 8,
                "head_dim": 128,
                "ffn_hidden_size": 21504,
                "vocab_size": 131072,
                "tied_embeddings": False,
                "hybrid_pattern": NEMOTRON_H_8B_PATTERN,
                "mamba": {"state_dim": 128, "head_dim": 64, "num_groups": 8, "num_heads": 128, "conv_kernel": 4},
                "moe": None,
            },
            8_100_852_736,  # the checkpoint's weights, one by one
            1e-9,
            id="nemotron-h-8b",
        ),
        pytest.param(
            NEMOTRON_H_56B,
            {
                "num_layers": 118,
                "hidden_size": 8192,
                "num_attention_heads": 64,
                "num_query_groups": 8,
                "head_dim": 128,
                "ffn_hidden_size": 32768,
                "vocab_size": 131072,
                "tied_embeddings": False,
                "hybrid_pattern": NEMOTRON_H_56B_PATTERN,
                "mamba": {"state_dim": 256, "head_dim": 64, "num_groups": 8, "num_heads": 256, "conv_kernel": 4},
                "moe": None,
            },
            56e9,  # the Nemotron-H report (arXiv 2504.03624): 56B
            0.01,
            id="nemotron-h-56b",
        ),
        pytest.param(
            NEMOTRON_3_NANO,
            {
                "num_layers": 52,
                "hidden_size": 2688,
                "num_attention_heads": 32,
                "num_query_groups": 2,
                "head_dim": 128,
                "ffn_hidden_size": 1856,
                "vocab_size": 131072,
                "tied_embeddings": False,
                "hybrid_pattern": NEMOTRON_3_NANO_PATTERN,
                "mamba": {"state_dim": 128, "head_dim": 64, "num_groups": 8, "num_heads": 64, "conv_kernel": 4},
                "moe": {
                    **ROUTER_DEFAULTS,
                    **_NEMOTRON_ROUTER,
                    "num_experts": 128,
                    "top_k": 6,
                    "expert_ffn_hidden_size": 1856,
                    "num_shared_experts": 2,  # one shared MLP of 3712 = 2 x 1856
                    "moe_layer_freq": 1,
                    "first_k_dense_layers": 0,
                    "router_topk_scaling_factor": 2.5,
                },
            },
            31.6e9,  # NVIDIA's Nemotron 3 Nano card: 31.6B total
            0.005,
            id="nemotron-3-nano",
        ),
    ],
)
def test_nemotron_h_config(config: dict[str, Any], expected: dict[str, Any], advertised: float, rel: float) -> None:
    """A nemotron_h config.json maps to the hybrid stack: pattern, Mamba-2 mixer, non-gated (squared ReLU) MLP and,
    for Nemotron 3 Nano, the MoE block with DeepSeek-V3's router; trained at 8,192 tokens."""
    resolved = resolve_hf_config(config)
    model = resolved.model
    unset = {"mla": None, "mtp_num_layers": 0, "qk_layernorm": False, "sliding_window": None}
    dumped = model.model_dump(exclude={"name"})
    assert dumped == unset | {"sliding_window_pattern": None, "seq_length": 8192} | _NEMOTRON_H | expected
    assert model.name == config["_name_or_path"]
    assert total_params(model) == pytest.approx(advertised, rel=rel)
    assert resolved.sources["hybrid_pattern"] == "hf_config.hybrid_override_pattern"
    assert resolved.sources["num_layers"] == "hf_config.hybrid_override_pattern (its length)"
    assert resolved.sources["mamba.num_heads"] == "hf_config.mamba_num_heads"
    assert resolved.sources["gated_mlp"] == "architecture (nemotron_h)"


def test_nemotron_3_nano_is_mostly_inactive_experts() -> None:
    """The card's 3.6B active parameters with the embeddings (3.2B without): 6 of 128 experts and the shared one."""
    model = model_from_hf_config(NEMOTRON_3_NANO)
    assert active_params(model) == pytest.approx(3.6e9, rel=0.01)


def test_nemotron_h_older_key_names_and_the_per_layer_list_read_the_same() -> None:
    """mamba_n_groups / mamba_d_conv (the names Hugging Face still accepts) and layers_block_type (what it saves,
    legacy mamba/attention names included) give the same model as n_groups / conv_kernel and the pattern."""
    expected = model_from_hf_config(NEMOTRON_H_8B)
    older = _without(NEMOTRON_H_8B, "n_groups", "conv_kernel") | {"mamba_n_groups": 8, "mamba_d_conv": 4}
    assert model_from_hf_config(older) == expected
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    listed = _without(NEMOTRON_H_8B, "hybrid_override_pattern") | {
        "layers_block_type": [names[s] for s in NEMOTRON_H_8B_PATTERN]
    }
    resolved = resolve_hf_config(listed)
    assert resolved.model == expected and resolved.sources["hybrid_pattern"] == "hf_config.layers_block_type"
    current = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    renamed = _without(listed, "layers_block_type") | {"layer_types": [current[s] for s in NEMOTRON_H_8B_PATTERN]}
    assert model_from_hf_config(renamed) == expected


def test_nemotron_h_is_recognised_without_model_type() -> None:
    """The modelling class, else the pattern key (a Nemotron 3 config has DeepSeek's n_routed_experts too)."""
    assert model_from_hf_config(_without(NEMOTRON_3_NANO, "model_type")) == model_from_hf_config(NEMOTRON_3_NANO)
    bare = _without(NEMOTRON_3_NANO, "model_type", "architectures")
    assert model_from_hf_config(bare).hybrid_pattern == NEMOTRON_3_NANO_PATTERN


def test_nemotron_h_without_mamba_layers_has_no_mixer() -> None:
    config = NEMOTRON_H_8B | {"hybrid_override_pattern": "*-*-", "num_hidden_layers": 4}
    model = model_from_hf_config(config)
    assert model.mamba is None and model.num_layers == 4 and model.num_attention_layers == 2


def test_nemotron_h_num_hidden_layers_follows_the_pattern() -> None:
    """Hugging Face's NemotronHConfig derives the layer count from the pattern (a stale num_hidden_layers warns)."""
    assert model_from_hf_config(NEMOTRON_H_8B | {"num_hidden_layers": 60}).num_layers == 52


NEMOTRON_ERROR_CASES = [
    pytest.param(
        NEMOTRON_H_8B | {"hybrid_override_pattern": "M-M|M-M"},
        "model.hf_config.hybrid_override_pattern",
        ["hybrid_override_pattern must be a string of M, *, - and E", "nemotron_h"],
        id="pipe-in-pattern",
    ),
    pytest.param(
        _without(NEMOTRON_H_8B, "hybrid_override_pattern"),
        "model.hf_config.hybrid_override_pattern",
        ["missing required key 'hybrid_override_pattern'"],
        id="no-pattern",
    ),
    pytest.param(
        _without(NEMOTRON_H_8B, "hybrid_override_pattern") | {"layers_block_type": ["mamba", "sliding_attention"]},
        "model.hf_config.layers_block_type",
        ["['sliding_attention'] cannot be expressed"],
        id="unknown-block-type",
    ),
    pytest.param(
        NEMOTRON_3_NANO | {"moe_latent_size": 1024},
        "model.hf_config.moe_latent_size",
        ["LatentMoE", "cannot be expressed with a hybrid pattern"],
        id="latent-moe",
    ),
    pytest.param(
        NEMOTRON_3_NANO | {"num_nextn_predict_layers": 1},
        "model.hf_config.num_nextn_predict_layers",
        ["multi-token prediction cannot be expressed with a hybrid pattern"],
        id="mtp",
    ),
    pytest.param(
        NEMOTRON_H_8B | {"mamba_num_heads": 100},
        "model.hf_config",
        ["mamba num_heads(100) % num_groups(8) = 4, must be 0"],
        id="heads-not-grouped",
    ),
    pytest.param(
        _without(NEMOTRON_H_8B, "intermediate_size"),
        "model.hf_config.intermediate_size",
        ["missing required key 'intermediate_size'"],
        id="mlp-layers-without-width",
    ),
]


@pytest.mark.parametrize(("config", "field", "fragments"), NEMOTRON_ERROR_CASES)
def test_inexpressible_nemotron_h_configs_are_refused(config: dict[str, Any], field: str, fragments: list[str]) -> None:
    with pytest.raises(InvalidSpecError) as info:
        model_from_hf_config(config)
    assert info.value.field == field
    for fragment in fragments:
        assert fragment in info.value.message


def test_every_nemotron_h_field_has_a_source() -> None:
    for config in (NEMOTRON_H_8B, NEMOTRON_3_NANO):
        resolved = resolve_hf_config(config)
        model = resolved.model
        assert model.mamba is not None
        fields = set(model.model_dump(exclude={"moe", "mla", "mamba", "name"}, exclude_none=True))
        fields |= {f"mamba.{k}" for k in model.mamba.model_dump()}
        if model.moe is not None:
            fields |= {f"moe.{k}" for k in model.moe.model_dump(exclude_none=True)}
        assert fields <= set(resolved.sources), fields - set(resolved.sources)
    assert resolve_hf_config(NEMOTRON_H_8B).sources["head_dim"] == "hf_config.attention_head_dim"


@pytest.mark.parametrize(
    ("config", "preset"),
    [
        (NEMOTRON_H_8B, "nemotron-h-8b"),
        (NEMOTRON_H_56B, "nemotron-h-56b"),
        (NEMOTRON_3_NANO, "nemotron-3-nano-30b-a3b"),
    ],
)
def test_nemotron_h_configs_are_the_presets(config: dict[str, Any], preset: str) -> None:
    resolved = resolve_hf_config(config).model
    assert resolved.model_dump(exclude={"name"}) == get_preset(preset).model.model_dump(exclude={"name"})
