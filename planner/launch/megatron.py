"""Megatron-LM `pretrain_gpt.py` flags, the `torchrun` line and a Slurm sbatch script for one plan.

Every flag name is checked against `tests/data/megatron_lm_flags.<release>.txt`, the flags that
`megatron/training/arguments.py` defines at each release in MEGATRON_VERSIONS. The releases differ in one
emitted flag: core_v0.15.0 refuses `--moe-grouped-gemm` without bf16, later releases do not.

A hybrid model (`ModelSpec.hybrid_pattern`) trains through the hybrid entry point instead (`HYBRID_RELEASES`):
`pretrain_mamba.py` with `--hybrid-override-pattern` up to core_v0.16.1, `pretrain_hybrid.py` with
`--hybrid-layer-pattern` from core_v0.19 (an interleaved split written into it as "|" segments), each with its
layer spec (`--spec`), the Mamba mixer's flags and squared ReLU for a non-gated MLP (`common.squared_relu_mlp`).
Its stage split is always written as layer counts (the first/last stage flags), never as the embedding/loss
counted in the split, which the hybrid stacks do not read.
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
    megatron_attention_backend,
    megatron_gradient_notes,
    model_notes,
    moe_dispatch_config,
    moe_dispatch_notes,
    moe_router_config,
    qk_layernorm_on,
    sequence_parallel_on,
    squared_relu_mlp,
    stage_layers,
    te_window_size,
    torchrun_command,
    tp_pp_dp_mapping_allowed,
)
from planner.launch.inputs import LaunchInputs
from planner.launch.pipeline_layout import hybrid_layer_pattern, pipeline_layout
from planner.layout import Layout
from planner.rules import default_version, rule_set
from planner.rules.frameworks import HYBRID_NO_INTERLEAVING, MEGATRON_15_NO_ACTIVATION_OFFLOAD
from planner.specs import (
    AdamMoments,
    ExpertGemm,
    MLASpec,
    ModelSpec,
    Precision,
    Recompute,
    RecomputeModule,
    TrainingSpec,
)

__all__ = [
    "HYBRID_RELEASES",
    "MEGATRON_VERSION",
    "MEGATRON_VERSIONS",
    "HybridRelease",
    "megatron_launch",
    "moe_layer_freq",
]

MEGATRON_VERSIONS = {
    "core_v0.19.2": (
        "Megatron-LM core_v0.19.2 (megatron-core 0.19.2 wheel, sha256 8e3e486f13f5; needs Python >= 3.12:"
        " rules and flags recorded from its source)"
    ),
    "core_v0.16.1": "Megatron-LM core_v0.16.1 (commit 55ac7082517c, 2026-03-16)",
    "core_v0.15.0": "Megatron-LM core_v0.15.0 (commit 0d7e02bd26d3, 2025-12-05)",
}
"""Release id (as `planner.rules.VERSIONS` names it) -> the stamp a launch carries."""

MEGATRON_VERSION = MEGATRON_VERSIONS[default_version("megatron")]
"""The default (newest targeted) release's stamp."""

_SHARDING = {2: "optim_grads", 3: "optim_grads_params"}


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridRelease:
    """How one release launches a hybrid model."""

    entry: str
    """The training script."""
    pattern_flag: str
    """The flag taking the hybrid pattern."""
    spec: tuple[str, str]
    """`--spec` module and function: the layer stack's spec (the builder refuses a hybrid model without one)."""
    interleaves: bool
    """Whether the release interleaves a hybrid model: through "|" segments of the pattern, one per model chunk."""
    hybrid_flag: bool
    """Whether `--is-hybrid-model` is written: read up to core_v0.16 (the FLOPs count and init); core_v0.19 sets it
    from the pattern."""


_MAMBA_STACK_RELEASE = HybridRelease(
    entry="pretrain_mamba.py",
    pattern_flag="--hybrid-override-pattern",
    spec=("megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"),
    interleaves=False,
    hybrid_flag=True,
)
HYBRID_RELEASES = {
    "core_v0.19.2": HybridRelease(
        entry="pretrain_hybrid.py",
        pattern_flag="--hybrid-layer-pattern",
        spec=("megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"),
        interleaves=True,
        hybrid_flag=False,
    ),
    "core_v0.16.1": _MAMBA_STACK_RELEASE,
    "core_v0.15.0": _MAMBA_STACK_RELEASE,
}
"""Release id -> its hybrid launch. Sources: Megatron-LM core_v0.15.0 and core_v0.16.1 pretrain_mamba.py with
mamba_builders.py mamba_builder ('You must provide a valid Mamba layer spec via --spec'),
megatron/core/models/mamba/mamba_layer_specs.py mamba_stack_spec, megatron/training/arguments.py
(--hybrid-override-pattern, --is-hybrid-model, --mamba-state-dim, --mamba-head-dim, --mamba-num-groups,
--mamba-num-heads, --squared-relu, --spec); core_v0.19.0 pretrain_hybrid.py (pretrain_mamba.py is a deprecated
wrapper of it) with hybrid_builders.py hybrid_builder, megatron/core/models/hybrid/hybrid_layer_specs.py
hybrid_stack_spec, and validate_args (--hybrid-override-pattern deprecated for --hybrid-layer-pattern, which also
sets is_hybrid_model and num_layers). core_v0.19.2's flags are in its recorded list; its scripts are taken to be
core_v0.19.0's."""


def _parallel_flags(model: ModelSpec, training: TrainingSpec, layout: Layout) -> list[str]:
    flags = ["--tensor-model-parallel-size", str(layout.tp), "--pipeline-model-parallel-size", str(layout.pp)]
    if layout.cp > 1:
        flags += ["--context-parallel-size", str(layout.cp)]
    if layout.ep > 1:
        flags += ["--expert-model-parallel-size", str(layout.ep)]
    if model.moe is not None and layout.etp != layout.tp:  # Megatron-Core's default expert TP is tp
        flags += ["--expert-tensor-parallel-size", str(layout.etp)]
    if sequence_parallel_on(model, training, layout):
        flags.append("--sequence-parallel")
    # Planner rank order is tp, cp, pp, dp; without the flag Megatron uses tp-cp-ep-dp-pp (pp outermost),
    # and Megatron rejects the flag when pp > 1 and ep != cp (see tp_pp_dp_mapping_allowed).
    if tp_pp_dp_mapping_allowed(layout):
        flags.append("--use-tp-pp-dp-mapping")
    return flags


def _pipes(layout: Layout, release: HybridRelease) -> bool:
    """Whether the launch writes the split into the pattern: interleaved, on a release that reads "|" segments."""
    return release.interleaves and layout.pp > 1 and layout.vp > 1


def _hybrid_pipeline_flags(model: ModelSpec, layout: Layout, release: HybridRelease) -> list[str]:
    """A hybrid model's stage split: an interleaved one in the pattern's "|" segments (nothing here), else the
    planned layers per stage (the embedding/loss counted, where the layout counts them) as the first/last stage
    counts of an uneven split, which core_v0.16.1's MambaStack and core_v0.19's select_pipeline_segment read
    (core_v0.19 logs a deprecation for a pipe-free pattern with pp > 1; the observation parser reads it back);
    core_v0.15.0's splits evenly only (rule hybrid_even_stages). Neither MambaStack reads the account_for_* flags
    (core_v0.19's validate_args refuses them with a pattern), so they are never written. Interleaving has no flag
    up to core_v0.16 (rule hybrid_no_interleaving; `_hybrid_notes`)."""
    if layout.pp == 1 or _pipes(layout, release):
        return []
    stages = stage_layers(model, layout)
    if len(set(stages)) == 1:
        return []
    return [
        "--decoder-first-pipeline-num-layers",
        str(stages[0]),
        "--decoder-last-pipeline-num-layers",
        str(stages[-1]),
    ]


def _pipeline_flags(model: ModelSpec, layout: Layout, version: str) -> list[str]:
    """Interleaving and the uneven split. There is no --virtual-pipeline-model-parallel-size flag. Model chunks
    of unequal size take `--pipeline-model-parallel-layout` alone: validate_args refuses it beside either
    virtual-stage flag and sets vp from its stage count, and TransformerConfig.__post_init__ refuses it beside
    the first/last counts and the account_for_* flags. A hybrid model's split: `_hybrid_pipeline_flags`."""
    if model.hybrid_pattern is not None:
        return _hybrid_pipeline_flags(model, layout, HYBRID_RELEASES[version])
    if layout.pp == 1:
        return []
    chunked = pipeline_layout(model, layout)
    if chunked is not None:
        return ["--pipeline-model-parallel-layout", chunked]
    stages = stage_layers(model, layout)
    counted = layout.counts_embedding_or_loss
    uneven = len(set(stages)) > 1 and not counted
    flags: list[str] = []
    if layout.account_for_embedding_in_pipeline_split:
        flags.append("--account-for-embedding-in-pipeline-split")
    if layout.account_for_loss_in_pipeline_split:
        flags.append("--account-for-loss-in-pipeline-split")
    if uneven:
        flags += ["--decoder-first-pipeline-num-layers", str(stages[0])]
        flags += ["--decoder-last-pipeline-num-layers", str(stages[-1])]
    if layout.vp > 1 and (uneven or counted):
        # validate_args: an uneven split (or one that counts the embedding/loss) gives vp as stages per rank.
        flags += ["--num-virtual-stages-per-pipeline-rank", str(layout.vp)]
    elif layout.vp > 1:
        flags += ["--num-layers-per-virtual-pipeline-stage", str(model.num_layers // (layout.pp * layout.vp))]
    return flags


def _batch_recompute_flags(model: ModelSpec, training: TrainingSpec, layout: Layout) -> list[str]:
    flags = ["--micro-batch-size", str(layout.micro_batch_size), "--global-batch-size", str(training.global_batch_size)]
    if layout.recompute is Recompute.FULL:
        block = training.recompute_num_layers  # the first `block` layers of each stage, or every layer (uniform, 1)
        method, count = ("uniform", 1) if block is None else ("block", block)
        flags += ["--recompute-granularity", "full", "--recompute-method", method, "--recompute-num-layers", str(count)]
    elif layout.recompute is Recompute.SELECTIVE:
        flags += ["--recompute-granularity", "selective"]
        modules = selective_modules(model, training.runtime)  # Megatron-Core's own default is core_attn alone
        flags += [] if modules == (RecomputeModule.CORE_ATTN,) else ["--recompute-modules", *(m.value for m in modules)]
    return flags


def _offload_flags(training: TrainingSpec, version: str) -> list[str]:
    """core_v0.16+: `--cpu-offloading-num-layers`, a TransformerConfig field on the CLI; validate_args then sets
    cpu_offloading (activations on, weights off by default). core_v0.15.0 has no such flag: nothing is written
    and a note says so (rule megatron_no_activation_offload refuses such plans)."""
    no_flag = MEGATRON_15_NO_ACTIVATION_OFFLOAD in rule_set("megatron", version).rules
    if not training.activation_offload_layers or no_flag:
        return []
    return ["--cpu-offloading-num-layers", str(training.activation_offload_layers)]


def _offload_notes(training: TrainingSpec, version: str) -> list[str]:
    if not training.activation_offload_layers or _offload_flags(training, version):
        return []
    return [
        f"training.activation_offload_layers({training.activation_offload_layers}): Megatron-LM {version} has no"
        " --cpu-offloading-num-layers, so this launch does not offload (rule megatron_no_activation_offload)."
    ]


def _hybrid_notes(model: ModelSpec, training: TrainingSpec, layout: Layout, version: str) -> list[str]:
    """What a release's MambaStack leaves out of a hybrid plan (core_v0.15.0 and core_v0.16.1): interleaving and full
    recompute; plans for these releases refuse them (`planner.rules`)."""
    if model.hybrid_pattern is None or HYBRID_NO_INTERLEAVING not in rule_set("megatron", version).rules:
        return []
    dropped = []
    if layout.vp > 1:
        dropped.append(f"interleaving (vp {layout.vp}; rule hybrid_no_interleaving)")
    if layout.recompute is Recompute.FULL:
        dropped.append("full recompute, which it ignores (rule hybrid_no_full_recompute)")
    if not dropped:
        return []
    return [
        f"model.hybrid_pattern: Megatron-LM {version}'s hybrid stack (MambaStack) has no "
        + "; no ".join(dropped)
        + ", so this launch runs without; plans for this release refuse them."
    ]


def _zero_flags(layout: Layout) -> list[str]:
    """ZeRO 1: the distributed optimizer. ZeRO 2/3: Megatron FSDP with its sharding strategy.

    Megatron-LM has no ZeRO-2/3 switch on the distributed optimizer; the closest real flags are
    Megatron FSDP (`--use-megatron-fsdp`) with `--data-parallel-sharding-strategy optim_grads` (ZeRO-2)
    or `optim_grads_params` (ZeRO-3), as its docs give them (with the distributed optimizer and without
    gradient-accumulation fusion). Megatron FSDP requires `--ckpt-format fsdp_dtensor`. The pinned docs list
    TP, EP and CP as compatible with Megatron FSDP, not pipeline parallelism (rule megatron_fsdp_needs_pp_1 in
    `planner.rules`, set "megatron").
    """
    if layout.zero_stage == 0:
        return []
    if layout.zero_stage == 1:
        return ["--use-distributed-optimizer"]
    return [
        "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy",
        _SHARDING[layout.zero_stage],
        "--use-distributed-optimizer",
        "--no-gradient-accumulation-fusion",
        "--ckpt-format",
        "fsdp_dtensor",
    ]


def _mla_flags(mla: MLASpec) -> list[str]:
    """Megatron-LM's multi-latent attention flags (`_add_mla_args`); --q-lora-rank unset means no query latent."""
    flags = ["--multi-latent-attention", "--kv-lora-rank", str(mla.kv_lora_rank)]
    flags += [] if mla.q_lora_rank is None else ["--q-lora-rank", str(mla.q_lora_rank)]
    flags += ["--qk-head-dim", str(mla.qk_head_dim), "--qk-pos-emb-head-dim", str(mla.qk_pos_emb_head_dim)]
    return flags + ["--v-head-dim", str(mla.v_head_dim)]


def _window_flags(model: ModelSpec) -> list[str]:
    """Sliding-window attention: `--window-size` is Transformer Engine's (left, right) window (`te_window_size`);
    `--window-attn-skip-freq N` makes every N-th layer full (Megatron-Core `is_layer_window_attention`). Parsed by
    `tuple_type` and `moe_freq_type` (megatron/training/arguments.py)."""
    window = te_window_size(model)
    if window is None:
        return []
    flags = ["--window-size", ",".join(map(str, window))]
    pattern = model.sliding_window_pattern
    return flags + ([] if pattern is None else ["--window-attn-skip-freq", str(pattern)])


def _flag_value(flag: str, value: str) -> list[str]:
    """`flag value`, or `flag=value` for a value argparse would take for an option (a pattern starting with "-")."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def _hybrid_flags(model: ModelSpec, layout: Layout, version: str) -> list[str]:
    """A hybrid model's pattern (with an interleaved split in it: `hybrid_layer_pattern`), its layer
    spec and the Mamba mixer's shape. `--mamba-num-heads` is always written, the heads the estimate priced: left
    out, Megatron-Core derives hidden_size * 2 / head_dim (MambaMixer's expand 2), which `ModelSpec.mamba_num_heads`
    also takes by default. core_v0.15.0 and core_v0.16.1 read `--is-hybrid-model` (its FLOPs count and init);
    core_v0.19 sets it from the pattern."""
    if model.hybrid_pattern is None:
        return []
    release = HYBRID_RELEASES[version]
    pattern = hybrid_layer_pattern(model, layout) if _pipes(layout, release) else model.hybrid_pattern
    flags = _flag_value(release.pattern_flag, pattern) + ["--spec", *release.spec]
    flags += ["--is-hybrid-model"] if release.hybrid_flag else []
    mamba = model.mamba
    if mamba is not None:
        flags += ["--mamba-state-dim", str(mamba.state_dim), "--mamba-head-dim", str(mamba.head_dim)]
        flags += ["--mamba-num-groups", str(mamba.num_groups), "--mamba-num-heads", str(model.mamba_num_heads)]
    return flags


def _activation_flags(model: ModelSpec) -> list[str]:
    """SwiGLU for a gated MLP; squared ReLU for a hybrid model's non-gated one (`common.squared_relu_mlp`), with the
    bias-GeLU fusion off where biases would leave it on (TransformerConfig refuses a fused bias activation other
    than GeLU or SwiGLU; validate_args turns the fusion off without biases); else Megatron-Core's GeLU."""
    if model.gated_mlp:
        return ["--swiglu"]
    if squared_relu_mlp(model):
        return ["--squared-relu"] + (["--no-bias-gelu-fusion"] if model.linear_bias else [])
    return []


def _shape_flags(model: ModelSpec, layout: Layout, version: str) -> list[str]:
    flags = ["--num-layers", str(model.num_layers), "--hidden-size", str(model.hidden_size)]
    flags += ["--num-attention-heads", str(model.num_attention_heads), "--ffn-hidden-size", str(model.ffn_hidden_size)]
    flags += ["--seq-length", str(model.seq_length), "--max-position-embeddings", str(model.seq_length)]
    if model.mtp_num_layers:  # on the last stage, beside the loss (Megatron-Core mtp_on_this_rank)
        flags += ["--mtp-num-layers", str(model.mtp_num_layers)]
    if model.mla is not None:
        flags += _mla_flags(model.mla)
    elif model.attention_hidden_size != model.hidden_size:
        flags += ["--kv-channels", str(model.head_dim)]  # unset: hidden / heads (Megatron-LM validate_args)
    if model.num_query_groups < model.num_attention_heads:
        # --num-query-groups is ignored unless --group-query-attention is given.
        flags += ["--group-query-attention", "--num-query-groups", str(model.num_query_groups)]
    if qk_layernorm_on(model):
        flags.append("--qk-layernorm")
    flags += _window_flags(model) + _hybrid_flags(model, layout, version) + _activation_flags(model)
    if not model.tied_embeddings:
        flags.append("--untie-embeddings-and-output-weights")
    position = "learned_absolute" if model.learned_position_embeddings else "rope"
    flags += ["--position-embedding-type", position]
    if model.linear_bias:
        flags += ["--normalization", "LayerNorm"]
    else:
        flags += ["--disable-bias-linear", "--normalization", "RMSNorm"]
    return flags


def moe_layer_freq(model: ModelSpec) -> str:
    """--moe-layer-freq: an integer N (layer i is MoE iff i % N == 0), else a Python list expression.

    Megatron-LM has no first-k-dense flag: leading dense layers go in the pattern, e.g. "[0]*3+[1]*58".
    """
    assert model.moe is not None
    k, freq = model.moe.first_k_dense_layers, model.moe.moe_layer_freq
    if k == 0:
        return str(freq)
    blocks, rest = divmod(model.num_layers - k, freq)
    parts = [f"[0]*{k}"]
    if blocks:
        parts.append(f"[1]*{blocks}" if freq == 1 else f"([1]+[0]*{freq - 1})*{blocks}")
    if rest:
        parts.append("[1]" if rest == 1 else f"[1]+[0]*{rest - 1}")
    return "+".join(parts)


def _moe_flags(model: ModelSpec, layout: Layout, training: TrainingSpec, version: str) -> list[str]:
    """MoE flags. Grouped GEMM: core_v0.15.0's validate_args asserts `args.bf16` when `--moe-grouped-gemm` is set
    ("Currently GroupedGEMM for MoE only supports bf16 dtype"; fp8 runs with --bf16), so not in fp16 there;
    core_v0.16.1 and core_v0.19.2 check only the compute capability (>= 8), so always."""
    if model.moe is None:
        return []
    moe = model.moe
    flags = ["--num-experts", str(moe.num_experts), "--moe-router-topk", str(moe.top_k)]
    flags += ["--moe-ffn-hidden-size", str(moe.expert_ffn_hidden_size)]
    if model.hybrid_pattern is None:  # a hybrid model's MoE layers are its pattern's E layers
        flags += ["--moe-layer-freq", moe_layer_freq(model)]
    if moe.num_shared_experts:
        shared = moe.num_shared_experts * moe.expert_ffn_hidden_size
        flags += ["--moe-shared-expert-intermediate-size", str(shared)]
    if training.precision is not Precision.FP16 or version != "core_v0.15.0":
        flags.append("--moe-grouped-gemm")
    config = moe_router_config(model) | moe_dispatch_config(training, layout, version != "core_v0.15.0")
    for name, value in config.items():
        if value is not None and value is not False:  # Megatron-LM's default: the flag left out
            flags += [f"--{name.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return flags


def _recipe_flags(training: TrainingSpec) -> list[str]:
    """Dropout rates (always: Megatron-LM's defaults are 0.1), bf16 Adam moments (the precision-aware optimizer) and
    the gradient dtype where it differs from Megatron-LM's default for the precision (fp32 main grads under bf16,
    fp16 grads under fp16)."""
    flags = ["--attention-dropout", str(training.attention_dropout), "--hidden-dropout", str(training.hidden_dropout)]
    if training.adam_moments is AdamMoments.BF16:  # master weights as priced: Megatron-Core's store_param_remainders
        flags += ["--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    half = training.precision is Precision.FP16
    if training.grad_reduce_in_fp32 is False and not half:
        flags.append("--grad-reduce-in-bf16")
    elif training.grad_reduce_in_fp32 is True and half:
        flags.append("--accumulate-allreduce-grads-in-fp32")
    return flags


def _fp8_flags(training: TrainingSpec, layout: Layout) -> list[str]:
    """The FP8 recipe when stated (Megatron-LM's default is delayed) and FP8 weight storage as priced
    (`common.fp8_weight_storage`)."""
    flags = ["--fp8-recipe", training.fp8_recipe.value] if training.fp8_recipe is not None else []
    stored, reuse_grad_buffer = fp8_weight_storage(training, layout)
    flags += ["--fp8-param-gather"] if stored else []
    return flags + (["--reuse-grad-buf-for-mxfp8-param-ag"] if reuse_grad_buffer else [])


def _nvfp4_flags(training: TrainingSpec, layout: Layout) -> list[str]:
    """NVFP4 (Megatron-LM core_v0.15.0 on: `--fp4-format e2m1 --fp4-recipe nvfp4`, never with `--fp8-format`,
    which validate_args refuses, on Transformer Engine >= 2.7) and NVFP4 weight storage as priced
    (`--fp4-param-gather`, `common.fp8_weight_storage`)."""
    stored, _ = fp8_weight_storage(training, layout)
    return ["--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"] + (["--fp4-param-gather"] if stored else [])


def _bf16_end_layer_flags(training: TrainingSpec) -> list[str]:
    """The layers a quantized run keeps in BF16 (`TrainingSpec.bf16_layers_at_start` / `bf16_layers_at_end`), both
    counts written: Megatron-Core defaults each to 1 once `--first-last-layers-bf16` is set."""
    start, end = training.bf16_layers_at_start, training.bf16_layers_at_end
    if not (start or end):
        return []
    return [
        "--first-last-layers-bf16",
        "--num-layers-at-start-in-bf16",
        str(start),
        "--num-layers-at-end-in-bf16",
        str(end),
    ]


def _precision_runtime_flags(model: ModelSpec, training: TrainingSpec, layout: Layout) -> list[str]:
    runtime = training.runtime
    flags = ["--fp16"] if training.precision is Precision.FP16 else ["--bf16"]
    if training.precision is Precision.FP8:
        flags += ["--fp8-format", "hybrid"] + _fp8_flags(training, layout)
    if training.precision is Precision.NVFP4:
        flags += _nvfp4_flags(training, layout)
    flags += _bf16_end_layer_flags(training)
    flags += _recipe_flags(training)
    flags += ["--attention-backend", megatron_attention_backend(training)]
    if runtime.overlap_grad_reduce:
        flags.append("--overlap-grad-reduce")
        # validate_args: --overlap-param-gather needs the distributed optimizer (or Megatron FSDP).
        if runtime.overlap_param_gather and layout.zero_stage >= 1:
            flags.append("--overlap-param-gather")
    # validate_args: TP communication overlap needs sequence parallelism.
    if runtime.tp_comm_overlap and sequence_parallel_on(model, training, layout):
        flags.append("--tp-comm-overlap")
    # Interleaved sends overlap compute unless turned off; without interleaving Megatron forces them blocking.
    if layout.vp > 1 and not runtime.overlap_p2p_comm:
        flags.append("--no-overlap-p2p-communication")
    return flags


def _run_flags(model: ModelSpec, inputs: LaunchInputs) -> list[str]:
    """The data and tokenizer: as the request gives them, else mock data and the null tokenizer (a throughput
    smoke test). The null tokenizer adds one token (end of document) to --vocab-size; Megatron then pads to a
    multiple of 128 * tp, as for every tokenizer. The schedule values are placeholders."""
    flags = ["--data-path", inputs.data_path] if inputs.data_path else ["--mock-data"]
    if inputs.tokenizer_model:
        flags += ["--tokenizer-type", inputs.tokenizer_type or "HuggingFaceTokenizer"]
        flags += ["--tokenizer-model", inputs.tokenizer_model]
    else:
        flags += ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(model.vocab_size - 1)]
    return flags + ["--train-iters", "100", "--lr", "1e-4", "--log-interval", "1"]


_MOCK_DATA = (
    "Smoke test on mock data: --mock-data with the null tokenizer and placeholder schedule (--train-iters 100,"
    " --lr 1e-4). For training, replace --mock-data --tokenizer-type NullTokenizer --vocab-size with"
    " --data-path DATA_PREFIX --tokenizer-type HuggingFaceTokenizer --tokenizer-model TOKENIZER."
)


def _data_notes(inputs: LaunchInputs) -> list[str]:
    """What the launch runs on, and the placeholders left."""
    schedule = "the schedule (--train-iters 100, --lr 1e-4) is a placeholder"
    if inputs.data_path and inputs.tokenizer_model:
        return [f"Trains on --data-path and --tokenizer-model as given; {schedule}."]
    if inputs.data_path:
        return [
            f"Trains on --data-path as given with the null tokenizer (placeholder: pass --tokenizer-type"
            f" HuggingFaceTokenizer --tokenizer-model TOKENIZER in place of --tokenizer-type NullTokenizer"
            f" --vocab-size); {schedule}."
        ]
    if inputs.tokenizer_model:
        return [
            f"Smoke test on mock data (--mock-data) with the given tokenizer; placeholder: replace --mock-data with"
            f" --data-path DATA_PREFIX; {schedule}."
        ]
    return [_MOCK_DATA]


LIST_FLAGS = frozenset({"--recompute-modules"})
"""Flags of `config` that argparse reads as a list (Megatron-LM core_v0.16.1: `--recompute-modules`, a list field of
TransformerConfig, nargs '*'): `config` gives their values as a list, one value too."""


def _config(args: list[str]) -> dict[str, object]:
    """Flag -> value: True for a switch, the string for one value (also from `--flag=value`), a list for several or
    for a list flag (`LIST_FLAGS`)."""
    config: dict[str, object] = {}
    flag = ""
    for token in args:
        if token.startswith("--") and "=" in token:
            flag, value = token.split("=", 1)
            config[flag] = [value] if flag in LIST_FLAGS else value
        elif token.startswith("--"):
            flag = token
            config[flag] = True
        elif config[flag] is True:
            config[flag] = [token] if flag in LIST_FLAGS else token
        else:
            previous = config[flag]
            config[flag] = [*previous, token] if isinstance(previous, list) else [previous, token]
    return config


def _env(layout: Layout) -> dict[str, str | None]:
    """CUDA_DEVICE_MAX_CONNECTIONS: must be 1 with tp or cp > 1 (Hopper and older), must not be 1 with Megatron FSDP."""
    if layout.zero_stage >= 2:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": None}
    if layout.tp > 1 or layout.cp > 1:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


def _command(entry: str, args: list[str], env: dict[str, str | None], nodes: Nodes) -> str:
    unset = [f"-u {name}" for name, value in env.items() if value is None]
    assign = [f"{name}={shlex.quote(value)}" for name, value in env.items() if value is not None]
    prefix = " ".join((["env", *unset] if unset else []) + assign)
    line = torchrun_command(nodes, [entry, *args])
    return f"{prefix} {line}" if prefix else line


def _grouped(args: list[str]) -> list[str]:
    """One line per flag with its values, shell-quoted."""
    lines: list[list[str]] = []
    for token in args:
        if token.startswith("--") or not lines:
            lines.append([token])
        else:
            lines[-1].append(token)
    return [shlex.join(line) for line in lines]


def _srun(entry: str, args: list[str], nodes: Nodes) -> str:
    """The srun line, one flag per line. With a partial last node the torchrun line reads the node's own
    $SLURM_NODEID, so it runs under `bash -c` on each node (the batch shell would expand it to 0 for all)."""
    launcher = torchrun_command(nodes, [entry], slurm=True)
    if not nodes.partial:
        return " \\\n    ".join([f"srun {launcher}", *_grouped(args)])
    return "srun bash -c " + shlex.quote(" \\\n    ".join([launcher, *_grouped(args)]))


def _sbatch(entry: str, args: list[str], env: dict[str, str | None], nodes: Nodes) -> str:
    exports = [f"unset {n}" if v is None else f"export {n}={shlex.quote(v)}" for n, v in env.items()]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name=megatron-{entry.removesuffix('.py').replace('_', '-')}",
        f"#SBATCH --nodes={nodes.count}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={nodes.per_node}",
        "#SBATCH --exclusive",
        "set -euo pipefail",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_ADDR",
        "export MASTER_PORT=${MASTER_PORT:-29500}",
        *exports,
        _srun(entry, args, nodes),
    ]
    return "\n".join(lines) + "\n"


def megatron_launch(
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    nodes: Nodes,
    inputs: LaunchInputs | None = None,
    version: str | None = None,
) -> FrameworkLaunch:
    """The launch for Megatron-LM at `version` (a MEGATRON_VERSIONS id; default the newest targeted)."""
    version = version or default_version("megatron")
    inputs = inputs or LaunchInputs()
    args = _parallel_flags(model, training, layout) + _pipeline_flags(model, layout, version)
    args += _batch_recompute_flags(model, training, layout) + _offload_flags(training, version)
    args += _zero_flags(layout) + _shape_flags(model, layout, version) + _moe_flags(model, layout, training, version)
    args += _precision_runtime_flags(model, training, layout)
    run = args + _run_flags(model, inputs)
    env = _env(layout)
    entry = "pretrain_gpt.py" if model.hybrid_pattern is None else HYBRID_RELEASES[version].entry
    return FrameworkLaunch(
        framework_version=MEGATRON_VERSIONS[version],
        args=args,
        command=_command(entry, run, env, nodes),
        config=_config(args),
        notes=[
            *_data_notes(inputs),
            *model_notes(model),
            *hybrid_position_notes(model),
            *_hybrid_notes(model, training, layout, version),
            *megatron_gradient_notes(training),
            *attention_kernel_notes(training, "Megatron-LM"),
            *eager_elementwise_notes(training, "Megatron-LM"),
            *_offload_notes(training, version),
            *moe_dispatch_notes(training, layout, version != "core_v0.15.0"),
            *expert_gemm_notes(model, training, ExpertGemm.MULTI_STREAM),
            *backward_prefetch_notes(training, layout, "Megatron-FSDP"),
        ],
        script=_sbatch(entry, run, env, nodes),
    )
