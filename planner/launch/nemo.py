"""NeMo 2.0 recipe overrides (`nemo llm pretrain --factory RECIPE key=value ...`) for one plan.

Every key is checked against the recorded list of the release (`tests/data/nemo_strategy_params.v2.7.3.txt` for
2.7.3, `tests/data/nemo_strategy_params.txt` for the 2.5.0rc0 commit): MegatronStrategy's parameters
(trainer.strategy.*), the Megatron-Core dataclasses NeMo builds from (model.config.* from
TransformerConfig and NeMo's GPTConfig, trainer.strategy.ddp.*, optim.config.*), MockDataModule's
parameters (data.*), MegatronMixedPrecision's (trainer.plugins.*) and Lightning Trainer's (trainer.*).

Every parallel setting is written out, even at its default, because recipes set their own
(llama31_70b sets vp = 5 and cp = 2). Left out, with the reason:

- attention backend: `model.config.attention_backend` is an enum the CLI cannot spell; the default
  (auto) lets Transformer Engine pick, cuDNN's fused attention on Hopper, and a plan priced with another
  kernel says how to run it (`common.attention_kernel_notes`).
- TP communication overlap: NeMo turns it on through MegatronCommOverlapCallback (a recipe's
  performance mode), not through a plain key.

A hybrid model (`ModelSpec.hybrid_pattern`) takes a Nemotron-H recipe (`nemo_recipe`) and SSMConfig's
hybrid_override_pattern with Megatron-Core's mamba_* fields (`_hybrid_shape`); its activation is the recipe's squared
ReLU.

The releases (`NEMO_RELEASES`) emit the same keys and recipes: 2.7.3's list only adds keys (megatron-core
0.16.1's new fields, MegatronStrategy's ckpt_optim_fully_reshardable), and the recipe files the launch names are
unchanged. They differ in two defaults. The distributed optimizer's checkpoint: 2.5.0rc0 saves it
fully_sharded_model_space (any layout resumes it), 2.7.3 dp_reshardable (MegatronStrategy
ckpt_optim_fully_reshardable=False; only dp may change on resume), which a note states. The fp8 recipes'
format: 2.7.3's bf16_with_fp8_mixed sets fp8='e4m3' (was 'hybrid'); the launch writes trainer.plugins.fp8=hybrid
in both, as the Megatron-LM launch writes --fp8-format hybrid.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.costmodel.recompute import selective_modules
from planner.launch.common import (
    FrameworkLaunch,
    Nodes,
    attention_kernel_notes,
    backward_prefetch_notes,
    eager_elementwise_notes,
    expert_gemm_notes,
    fp8_weight_storage,
    hybrid_position_notes,
    known_model,
    megatron_gradient_notes,
    model_notes,
    moe_dispatch_config,
    moe_dispatch_notes,
    moe_layer_pattern,
    moe_router_config,
    qk_layernorm_on,
    sequence_parallel_on,
    stage_layers,
    te_window_size,
    tp_pp_dp_mapping_allowed,
)
from planner.launch.inputs import LaunchInputs
from planner.launch.pipeline_layout import pipeline_layout
from planner.layout import Layout
from planner.rules import default_version
from planner.specs import AdamMoments, ExpertGemm, ModelSpec, Precision, Recompute, RecomputeModule, TrainingSpec

__all__ = ["NEMO_RELEASES", "NEMO_VERSION", "NEMO_VERSIONS", "NemoRelease", "equal_nodes", "nemo_launch", "nemo_recipe"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NemoRelease:
    """What the NeMo launch needs to know of one targeted release."""

    stamp: str
    """The launch's framework_version: the release and the Megatron-Core it runs."""
    optimizer_checkpoint: str
    """The distributed optimizer's checkpoint format MegatronStrategy saves by default (its sharded_state_dict
    metadata distrib_optim_sharding_type, without Megatron FSDP)."""
    flex_dispatcher_backend: bool
    """Whether its Megatron-Core's TransformerConfig has moe_flex_dispatcher_backend (else moe_enable_deepep)."""
    window_pattern: bool
    """Whether its Megatron-Core reads window_attn_skip_freq (else every layer of a windowed model is windowed:
    rule nemo_no_window_pattern)."""


NEMO_RELEASES = {
    "2.7.3": NemoRelease(
        stamp=(
            "NeMo 2.7.3 (nemo-toolkit 2.7.3 wheel, sha256 8cbeb10263d7) with megatron-core 0.16.1 and Lightning 2.4.0"
        ),
        optimizer_checkpoint="dp_reshardable",
        flex_dispatcher_backend=True,
        window_pattern=True,
    ),
    "2.5.0rc0+8cfedd7": NemoRelease(
        stamp="NeMo main (commit 8cfedd720346, 2025-09-20, after v2.5.0rc0) with Megatron-LM b615e731080e",
        optimizer_checkpoint="fully_sharded_model_space",
        flex_dispatcher_backend=False,
        window_pattern=False,
    ),
}
"""Release id (`planner.rules.VERSIONS["nemo"]`) -> release. 2.7.3 is the newest 2.x (nemo-toolkit 3.0.0 has no LLM
collection); its metadata names megatron_core with no version, and 0.16.1 is what it resolves to on Python 3.11.
2.5.0rc0+8cfedd7 is the main commit whose requirements/manifest.json pins Megatron-LM b615e731080e."""

NEMO_VERSIONS = {release: r.stamp for release, r in NEMO_RELEASES.items()}
"""Release id -> the stamp a launch carries."""

NEMO_VERSION = NEMO_VERSIONS[default_version("nemo")]
"""The default (newest targeted) release's stamp."""

_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}
Override = str | int | float | bool | list[int] | list[str] | None


def nemo_recipe(model: ModelSpec) -> str:
    """The recipe NeMo ships for this shape, else the closest family (the overrides set the shape). A hybrid model
    takes a Nemotron-H recipe, whose config class (NemotronHConfigBase, an SSMConfig: NeMo 2.7.3
    nemo/collections/llm/gpt/model/ssm.py) builds Megatron-Core's MambaModel with squared ReLU and
    is_hybrid_model."""
    known = known_model(model)
    if known is not None:
        return known.nemo_recipe
    if model.hybrid_pattern is not None:
        return "nemotronh_8b"
    if model.mla is not None:  # the family whose config (DeepSeekV3Config, an MLATransformerConfig) has MLA's fields
        return "deepseek_v3"
    if model.moe is not None:
        return "mixtral_8x7b"
    return "llama3_8b" if model.gated_mlp else "gpt3_175b"


def _strategy(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """MegatronStrategy's parallel keys. A hybrid model's MambaStack takes the split from the first/last stage
    counts only (the planned layers per stage, the embedding/loss counted where the layout counts them): no
    interleaving (`_hybrid_notes`), no account_for_* fields and no layout string."""
    hybrid = model.hybrid_pattern is not None
    stages = stage_layers(model, layout)
    counted = layout.pp > 1 and layout.counts_embedding_or_loss and not hybrid
    chunked = None if hybrid else pipeline_layout(model, layout)  # TransformerConfig takes it over first/last counts
    uneven = layout.pp > 1 and len(set(stages)) > 1 and not counted and chunked is None
    vp = layout.vp if layout.vp > 1 and not hybrid else None
    s = "trainer.strategy."
    overrides: dict[str, Override] = {
        f"{s}tensor_model_parallel_size": layout.tp,
        f"{s}pipeline_model_parallel_size": layout.pp,
        f"{s}virtual_pipeline_model_parallel_size": vp,
        f"{s}num_layers_in_first_pipeline_stage": stages[0] if uneven else None,
        f"{s}num_layers_in_last_pipeline_stage": stages[-1] if uneven else None,
        f"{s}context_parallel_size": layout.cp,
        f"{s}expert_model_parallel_size": layout.ep,
        f"{s}sequence_parallel": sequence_parallel_on(model, training, layout),
        f"{s}use_tp_pp_dp_mapping": tp_pp_dp_mapping_allowed(layout),
    }
    if model.moe is not None and layout.etp != layout.tp:  # MegatronStrategy's default (None) is tp
        overrides[f"{s}expert_tensor_parallel_size"] = layout.etp
    if vp is not None:  # Megatron-Core's default is blocking sends; NeMo's comm-overlap callback turns this on
        overlap = training.runtime.overlap_p2p_comm
        overrides |= {"model.config.overlap_p2p_comm": overlap, "model.config.batch_p2p_comm": not overlap}
    if chunked is not None:  # MegatronStrategy's field (NeMo 8cfedd7, 2.7.3); left out (default None) otherwise
        overrides[f"{s}pipeline_model_parallel_layout"] = chunked
    if counted:  # MegatronStrategy's TransformerConfig fields; left out (default false) otherwise
        overrides[f"{s}account_for_embedding_in_pipeline_split"] = layout.account_for_embedding_in_pipeline_split
        overrides[f"{s}account_for_loss_in_pipeline_split"] = layout.account_for_loss_in_pipeline_split
    return overrides


def _data_parallel(training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """ZeRO 1: distributed optimizer; ZeRO 2/3: Megatron FSDP with its sharding strategy (as for Megatron-LM)."""
    runtime = training.runtime
    overrides: dict[str, Override] = {
        "optim.config.use_distributed_optimizer": layout.zero_stage >= 1,
        "trainer.strategy.ddp.overlap_grad_reduce": runtime.overlap_grad_reduce,
        "trainer.strategy.ddp.overlap_param_gather": runtime.overlap_param_gather and layout.zero_stage >= 1,
    }
    if layout.zero_stage >= 2:
        overrides |= {
            "trainer.strategy.fsdp": "megatron",
            "trainer.strategy.ddp.data_parallel_sharding_strategy": _SHARDING[layout.zero_stage],
            "trainer.strategy.save_ckpt_format": "fsdp_dtensor",
            "model.config.gradient_accumulation_fusion": False,
        }
    return overrides


def _batch_recompute(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    full, block = layout.recompute is Recompute.FULL, training.recompute_num_layers
    return (
        {
            "data.micro_batch_size": layout.micro_batch_size,
            "data.global_batch_size": training.global_batch_size,
            "data.seq_length": model.seq_length,
            "model.config.recompute_granularity": None
            if layout.recompute is Recompute.NONE
            else layout.recompute.value,
            "model.config.recompute_method": ("uniform" if block is None else "block") if full else None,
            "model.config.recompute_num_layers": (1 if block is None else block) if full else None,
        }
        | _selective_modules(model, training, layout)
        | _activation_offload(training)
    )


def _selective_modules(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """TransformerConfig.recompute_modules where selective recompute covers more or other than its default
    core_attn (`recompute.selective_modules`); left at the default otherwise."""
    modules = selective_modules(model, training.runtime)
    if layout.recompute is not Recompute.SELECTIVE or modules == (RecomputeModule.CORE_ATTN,):
        return {}
    return {"model.config.recompute_modules": [m.value for m in modules]}


def _activation_offload(training: TrainingSpec) -> dict[str, Override]:
    """Megatron-Core's TransformerConfig CPU offloading, activations only, as Megatron-Bridge's performance recipes
    set it (scripts/performance/utils/overrides.py: cpu_offloading, cpu_offloading_weights False,
    cpu_offloading_num_layers)."""
    if not training.activation_offload_layers:
        return {}
    return {
        "model.config.cpu_offloading": True,
        "model.config.cpu_offloading_activations": True,
        "model.config.cpu_offloading_weights": False,
        "model.config.cpu_offloading_num_layers": training.activation_offload_layers,
    }


def _shape(model: ModelSpec) -> dict[str, Override]:
    c = "model.config."
    return (
        {
            f"{c}num_layers": model.num_layers,
            f"{c}hidden_size": model.hidden_size,
            f"{c}num_attention_heads": model.num_attention_heads,
            f"{c}num_query_groups": model.num_query_groups,
            f"{c}kv_channels": model.head_dim,
            f"{c}ffn_hidden_size": model.ffn_hidden_size,
            f"{c}gated_linear_unit": model.gated_mlp,
            f"{c}add_bias_linear": model.linear_bias,
            f"{c}normalization": "LayerNorm" if model.linear_bias else "RMSNorm",
            f"{c}position_embedding_type": "learned_absolute" if model.learned_position_embeddings else "rope",
            f"{c}qk_layernorm": qk_layernorm_on(model),
            f"{c}share_embeddings_and_output_weights": model.tied_embeddings,
            f"{c}seq_length": model.seq_length,
            f"{c}vocab_size": model.vocab_size,
            f"{c}mtp_num_layers": model.mtp_num_layers or None,  # TransformerConfig's None: no MTP
        }
        | _mla_shape(model)
        | _hybrid_shape(model)
    )


def _hybrid_shape(model: ModelSpec) -> dict[str, Override]:
    """A hybrid model's pattern (NeMo 2's SSMConfig.hybrid_override_pattern; Megatron-Bridge's MambaModelProvider
    calls it hybrid_layer_pattern since it deprecated the old name) and the Mamba mixer's TransformerConfig fields
    (mamba_state_dim, mamba_head_dim, mamba_num_groups, mamba_num_heads: the heads priced, always written, as for
    Megatron-LM). Sources: NeMo 8cfedd7 and 2.7.3 nemo/collections/llm/gpt/model/ssm.py SSMConfig; Megatron-Core
    megatron/core/transformer/transformer_config.py (b615e731080e, 0.16.1)."""
    if model.hybrid_pattern is None:
        return {}
    c = "model.config."
    keys: dict[str, Override] = {f"{c}hybrid_override_pattern": model.hybrid_pattern, f"{c}is_hybrid_model": True}
    if model.mamba is not None:
        keys |= {
            f"{c}mamba_state_dim": model.mamba.state_dim,
            f"{c}mamba_head_dim": model.mamba.head_dim,
            f"{c}mamba_num_groups": model.mamba.num_groups,
            f"{c}mamba_num_heads": model.mamba_num_heads,
        }
    return keys


def _hybrid_notes(model: ModelSpec, layout: Layout) -> list[str]:
    """A hybrid model's activation where the Nemotron-H config cannot take it from a key, and what NeMo's SSMConfig
    and Megatron-Core's MambaStack leave out of the plan (rules hybrid_no_interleaving and hybrid_no_full_recompute
    refuse such plans)."""
    if model.hybrid_pattern is None:
        return []
    notes = []
    if model.gated_mlp:
        notes.append(
            "model.gated_mlp with model.hybrid_pattern: the Nemotron-H recipe's activation is squared ReLU"
            " (NemotronHConfigBase.activation_func, a callable no key=value override can spell): set"
            " model.config.activation_func to torch.nn.functional.silu in the recipe for the SwiGLU MLP priced."
        )
    dropped = []
    if layout.vp > 1:
        dropped.append(f"interleaving (vp {layout.vp}: SSMConfig.configure_model refuses it)")
    if layout.recompute is Recompute.FULL:
        dropped.append("full recompute (MambaStack ignores it)")
    if dropped:
        notes.append(
            "model.hybrid_pattern: NeMo's hybrid model (Megatron-Core MambaStack) has no "
            + "; no ".join(dropped)
            + ", so this launch runs without; plans for NeMo refuse them."
        )
    return notes


def _window_shape(model: ModelSpec, release: NemoRelease) -> dict[str, Override]:
    """TransformerConfig's window_size (`te_window_size`) and window_attn_skip_freq (every N-th layer full), as
    Megatron-LM's `--window-size` and `--window-attn-skip-freq` set them; nothing without a window, and no pattern
    where the release's Megatron-Core reads none (`_window_notes`)."""
    window = te_window_size(model)
    if window is None:
        return {}
    c = "model.config."
    keys: dict[str, Override] = {f"{c}window_size": list(window)}
    if model.sliding_window_pattern is not None and release.window_pattern:
        keys[f"{c}window_attn_skip_freq"] = model.sliding_window_pattern
    return keys


def _window_notes(model: ModelSpec, release: NemoRelease) -> list[str]:
    if model.sliding_window_pattern is None or release.window_pattern:
        return []
    return [
        f"model.sliding_window_pattern({model.sliding_window_pattern}): this release's Megatron-Core has no"
        " window_attn_skip_freq (its GPT-OSS config declares one that Megatron-Core never reads), so every layer"
        " attends through the window; plans for it refuse the pattern (rule nemo_no_window_pattern)."
    ]


def _mla_shape(model: ModelSpec) -> dict[str, Override]:
    """MLATransformerConfig's fields (NeMo 2's DeepSeek configs), for a model with multi-latent attention."""
    if model.mla is None:
        return {}
    c, mla = "model.config.", model.mla
    return {
        f"{c}multi_latent_attention": True,
        f"{c}q_lora_rank": mla.q_lora_rank,
        f"{c}kv_lora_rank": mla.kv_lora_rank,
        f"{c}qk_head_dim": mla.qk_head_dim,
        f"{c}qk_pos_emb_head_dim": mla.qk_pos_emb_head_dim,
        f"{c}v_head_dim": mla.v_head_dim,
    }


def _moe(model: ModelSpec, training: TrainingSpec, layout: Layout, flex_backend: bool) -> dict[str, Override]:
    """The MoE shape, grouped GEMM and the token dispatch (`common.moe_dispatch_config`; `flex_backend`: the
    release's Megatron-Core has moe_flex_dispatcher_backend)."""
    if model.moe is None:
        return {}
    moe = model.moe
    pattern = moe_layer_pattern(model)
    freq: int | list[int] = moe.moe_layer_freq if moe.first_k_dense_layers == 0 else pattern
    shared = moe.num_shared_experts * moe.expert_ffn_hidden_size
    overrides: dict[str, Override] = {
        "model.config.num_moe_experts": moe.num_experts,
        "model.config.moe_router_topk": moe.top_k,
        "model.config.moe_ffn_hidden_size": moe.expert_ffn_hidden_size,
        "model.config.moe_shared_expert_intermediate_size": shared or None,
        "model.config.moe_layer_freq": freq,
        "model.config.moe_grouped_gemm": True,
        "model.config.moe_token_dispatcher_type": "allgather",
    }
    if model.hybrid_pattern is not None:  # its MoE layers are the pattern's E layers
        del overrides["model.config.moe_layer_freq"]
    config = moe_router_config(model) | moe_dispatch_config(training, layout, flex_backend)
    return overrides | {f"model.config.{name}": value for name, value in config.items()}


def _precision(training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """Precision plugin, the gradient dtype (when stated; the plugin's recipe default otherwise) and dropout."""
    recipe: dict[str, Override] = {
        "model.config.attention_dropout": training.attention_dropout,
        "model.config.hidden_dropout": training.hidden_dropout,
    }
    if training.grad_reduce_in_fp32 is not None:
        recipe["trainer.plugins.grad_reduce_in_fp32"] = training.grad_reduce_in_fp32
    if training.adam_moments is AdamMoments.BF16:
        recipe["optim.config.use_precision_aware_optimizer"] = True
    if training.precision is Precision.FP16:
        return {"trainer.plugins.precision": "16-mixed", "trainer.plugins.fp8": None} | recipe
    if training.precision is Precision.FP8:
        recipe |= _fp8(training, layout)
    if training.precision is Precision.NVFP4:
        recipe |= _nvfp4(training, layout)
    if training.bf16_layers_at_start or training.bf16_layers_at_end:  # MegatronMixedPrecision's BF16 end layers
        recipe |= {
            "trainer.plugins.first_last_layers_bf16": True,
            "trainer.plugins.num_layers_at_start_in_bf16": training.bf16_layers_at_start,
            "trainer.plugins.num_layers_at_end_in_bf16": training.bf16_layers_at_end,
        }
    return {
        "trainer.plugins.precision": "bf16-mixed",
        "trainer.plugins.fp8": "hybrid" if training.precision is Precision.FP8 else None,
    } | recipe


def _fp8(training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """MegatronMixedPrecision's FP8 recipe (when stated; its default is delayed) and FP8 weight storage as priced
    (`common.fp8_weight_storage`; the plugin's own default is off, so it is always written)."""
    keys: dict[str, Override] = {}
    if training.fp8_recipe is not None:
        keys["trainer.plugins.fp8_recipe"] = training.fp8_recipe.value
    stored, reuse_grad_buffer = fp8_weight_storage(training, layout)
    keys["trainer.plugins.fp8_param_gather"] = stored
    if reuse_grad_buffer:
        keys["trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag"] = True
    return keys


def _nvfp4(training: TrainingSpec, layout: Layout) -> dict[str, Override]:
    """MegatronMixedPrecision's FP4 format and recipe (`fp4` is Megatron-Core's `TransformerConfig.fp4`, 'e2m1';
    `fp4_recipe` 'nvfp4'), and NVFP4 weight storage as priced (`common.fp8_weight_storage`) on the model config,
    where the plugin has no key for it (`model.config.fp4_param`, Megatron-Core's `--fp4-param-gather`)."""
    stored, _ = fp8_weight_storage(training, layout)
    return {
        "trainer.plugins.fp4": "e2m1",
        "trainer.plugins.fp4_recipe": "nvfp4",
        "model.config.fp4_param": stored,
    }


def _format(value: Override) -> str:
    """As NeMo-Run's CLI parses it: Python literals, bare strings."""
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def equal_nodes(nodes: Nodes) -> tuple[int, int]:
    """(trainer.num_nodes, trainer.devices). Lightning's Trainer runs the same device count on every node, so a
    partly used last node cannot be launched: the GPUs are shared equally over as few nodes as possible
    (100 GPUs on 8-GPU nodes: 20 x 5), and groups the plan keeps inside a node may then cross nodes."""
    num_gpus = (nodes.count - 1) * nodes.per_node + nodes.last
    if not nodes.partial:
        return nodes.count, nodes.per_node
    per_node = max(d for d in range(1, nodes.per_node + 1) if num_gpus % d == 0)
    return num_gpus // per_node, per_node


_MOCK_DATA = (
    "Smoke test on mock data: the pretrain recipe's MockDataModule. For training, pass a data module over"
    " DATA_PREFIX with TOKENIZER (NeMo 2.0: data=PreTrainingDataModule with paths and tokenizer)."
)


def _data_notes(inputs: LaunchInputs) -> list[str]:
    if not inputs.data_path and not inputs.tokenizer_model:
        return [_MOCK_DATA]
    return [
        _MOCK_DATA + " The request's data_path and tokenizer are not applied here: the recipe's data module is an"
        " object (data=PreTrainingDataModule(paths=..., tokenizer=...)) that key=value overrides cannot build;"
        " the Megatron-LM and TorchTitan launches use them."
    ]


def _fp16_notes(training: TrainingSpec) -> list[str]:
    if training.precision is not Precision.FP16:
        return []
    return [
        "Approximation: fp16 is set through trainer.plugins.precision=16-mixed only; the recipe's params_dtype and"
        " pipeline_dtype (torch dtypes, which a key=value override cannot spell) stay as the recipe sets them"
        " (bf16 in the Llama, Mixtral and Nemotron recipes): set them to torch.float16 in the recipe."
    ]


def _adam_moment_notes(training: TrainingSpec) -> list[str]:
    if training.adam_moments is not AdamMoments.BF16:
        return []
    return [
        "bf16 Adam moments: optim.config.use_precision_aware_optimizer=True is set; set optim.config.exp_avg_dtype and"
        " optim.config.exp_avg_sq_dtype to torch.bfloat16 in the recipe (torch dtypes, which a key=value override"
        " cannot spell), as Megatron-Bridge's DeepSeek-V3 recipe does."
    ]


def _checkpoint_notes(release: NemoRelease, layout: Layout) -> list[str]:
    """2.7.3's default distributed-optimizer checkpoint resumes only under the same tp, pp and ep (ZeRO 1; ZeRO 2/3
    save fsdp_dtensor, ZeRO 0 has no distributed optimizer)."""
    if release.optimizer_checkpoint != "dp_reshardable" or layout.zero_stage != 1:
        return []
    return [
        "Checkpoints: this release saves the distributed optimizer dp_reshardable (MegatronStrategy"
        " ckpt_optim_fully_reshardable=False), so a checkpoint resumes only under the same tp, pp and ep; to resume"
        " under another plan's layout, save with trainer.strategy.ckpt_optim_fully_reshardable=True."
    ]


def _node_notes(nodes: Nodes) -> list[str]:
    if not nodes.partial:
        return []
    nnodes, nproc = equal_nodes(nodes)
    return [
        f"Placement differs from the plan: Lightning runs the same device count on every node, so the job runs on"
        f" {nnodes} nodes x {nproc} GPUs instead of {nodes.count - 1} full nodes and one with {nodes.last};"
        " groups the plan keeps inside a node may cross nodes."
    ]


def nemo_launch(
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    nodes: Nodes,
    inputs: LaunchInputs | None = None,
    version: str | None = None,
) -> FrameworkLaunch:
    """The launch for NeMo at `version` (a NEMO_RELEASES id; default the newest targeted)."""
    release = NEMO_RELEASES[version or default_version("nemo")]
    nnodes, nproc = equal_nodes(nodes)
    overrides: dict[str, Override] = {"trainer.num_nodes": nnodes, "trainer.devices": nproc}
    overrides |= _strategy(model, training, layout) | _data_parallel(training, layout)
    overrides |= _batch_recompute(model, training, layout) | _shape(model) | _window_shape(model, release)
    overrides |= _moe(model, training, layout, release.flex_dispatcher_backend)
    overrides |= _precision(training, layout)
    args = [f"{key}={_format(value)}" for key, value in overrides.items()]
    command = shlex.join(["nemo", "llm", "pretrain", "--factory", nemo_recipe(model), "--yes", *args])
    return FrameworkLaunch(
        framework_version=release.stamp,
        args=args,
        command=command,
        config=dict(overrides),
        notes=[
            *_data_notes(inputs or LaunchInputs()),
            *model_notes(model),
            *hybrid_position_notes(model),
            *_node_notes(nodes),
            *_checkpoint_notes(release, layout),
            *_window_notes(model, release),
            *_hybrid_notes(model, layout),
            *_fp16_notes(training),
            *_adam_moment_notes(training),
            *megatron_gradient_notes(training),
            *attention_kernel_notes(training, "NeMo"),
            *eager_elementwise_notes(training, "NeMo"),
            *moe_dispatch_notes(training, layout, release.flex_dispatcher_backend),
            *expert_gemm_notes(model, training, ExpertGemm.MULTI_STREAM),
            *backward_prefetch_notes(training, layout, "Megatron-FSDP"),
        ],
    )
