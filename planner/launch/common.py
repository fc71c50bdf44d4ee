"""What the three launch builders share: the result types, input checks, the node count and the stage split."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from planner.costmodel.candidates import stages_of
from planner.costmodel.topology import tp_pp_dp_order
from planner.errors import InvalidSpecError
from planner.layout import Layout
from planner.numerics import fp8_param_gather_default, fp8_param_gather_on
from planner.rules import SEQUENCE_PARALLEL_NEEDS_TP, Job
from planner.rules.frameworks import torchtitan_refuses_fp8
from planner.specs import (
    QUANTIZED_PRECISIONS,
    AttentionKernel,
    BackwardPrefetch,
    ExpertGemm,
    Fp8Recipe,
    GradientLayout,
    ModelSpec,
    MoeDispatcher,
    Precision,
    Recompute,
    TrainingSpec,
)
from planner.validate import layout_violations

__all__ = [
    "FrameworkLaunch",
    "KnownModel",
    "LaunchArgs",
    "MEGATRON_ATTENTION_BACKENDS",
    "Nodes",
    "attention_kernel_notes",
    "eager_elementwise_notes",
    "check_inputs",
    "fp8_weight_storage",
    "hybrid_position_notes",
    "known_model",
    "megatron_attention_backend",
    "megatron_gradient_notes",
    "torchtitan_fp8_notes",
    "torchtitan_async_tp",
    "torchtitan_block_recompute_notes",
    "torchtitan_compiles",
    "torchtitan_compile_notes",
    "torchtitan_hybrid_notes",
    "torchtitan_mtp_notes",
    "torchtitan_qk_norm_notes",
    "torchtitan_window_notes",
    "te_window_size",
    "qk_layernorm_on",
    "torchtitan_offload_notes",
    "model_notes",
    "moe_dispatch_config",
    "moe_dispatch_notes",
    "moe_balancing_notes",
    "moe_router_config",
    "torchtitan_router_notes",
    "torchtitan_moe_dispatch_notes",
    "expert_gemm_notes",
    "backward_prefetch_notes",
    "moe_layer_pattern",
    "node_count",
    "sequence_parallel_on",
    "squared_relu_mlp",
    "stage_layers",
    "tp_pp_dp_mapping_allowed",
    "torchrun_command",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class FrameworkLaunch:
    """One framework's launch: flags or overrides, a command line, their structured form, and a version stamp."""

    framework_version: str
    """The framework version (release and commit) whose flag and key names are used."""
    args: list[str]
    """Megatron-LM: CLI flags and values; TorchTitan: CLI overrides; NeMo: recipe overrides `key=value`."""
    command: str
    """A ready-to-run shell command line."""
    config: dict[str, object]
    """Structured form: Megatron-LM flag -> value; TorchTitan 0.2.2 TOML sections, 0.3.0 overrides by section (with
    `module`, `config` and the `activation_checkpoint` subcommand); NeMo override key -> value."""
    notes: list[str]
    """What the launch is: the data it runs on (mock data unless told otherwise, placeholders named) and where it
    departs from the planned model or layout."""
    script: str | None = None
    """Megatron-LM only: a Slurm sbatch script."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchArgs:
    """The same plan for Megatron-LM, TorchTitan and NeMo 2.0."""

    megatron: FrameworkLaunch
    torchtitan: FrameworkLaunch
    nemo: FrameworkLaunch


def sequence_parallel_on(model: ModelSpec, training: TrainingSpec, layout: Layout) -> bool:
    """Whether the launch turns sequence parallelism on: asked for, and sequence_parallel_needs_tp holds."""
    job = Job(model, training, layout.world_size)
    return layout.sequence_parallel and SEQUENCE_PARALLEL_NEEDS_TP.holds(layout, job)


def check_inputs(model: ModelSpec, training: TrainingSpec, layout: Layout, num_gpus: int, gpus_per_node: int) -> None:
    """Raise InvalidSpecError unless the layout is legal for `num_gpus` and `gpus_per_node` is positive."""
    violations = layout_violations(layout, model, training, num_gpus)
    if violations:
        raise InvalidSpecError("layout", "; ".join(f"{v.rule}: {v.message}" for v in violations))
    if gpus_per_node < 1:
        raise InvalidSpecError("gpus_per_node", f"gpus_per_node({gpus_per_node}) must be >= 1")


@dataclass(frozen=True, slots=True)
class Nodes:
    """How the job's processes sit on nodes: full nodes of `per_node` processes, the last one holding `last`.

    This is the placement the cost model prices (`planner.costmodel.topology`: ranks fill NVLink domains
    in order), so the launch must keep it: rank r runs on node r // per_node.
    """

    count: int
    per_node: int
    last: int

    @property
    def partial(self) -> bool:
        return self.last != self.per_node


def node_count(num_gpus: int, gpus_per_node: int) -> Nodes:
    """Nodes filled in rank order: 100 GPUs on 8-GPU nodes are 12 nodes of 8 and one of 4 (not 20 x 5, which
    would split tensor-parallel groups across nodes that the plan keeps in one); a small job is one node."""
    per_node = min(num_gpus, gpus_per_node)
    count = -(-num_gpus // per_node)
    return Nodes(count, per_node, num_gpus - (count - 1) * per_node)


def stage_layers(model: ModelSpec, layout: Layout) -> tuple[int, ...]:
    """Layers per pipeline stage (length pp): as planned, else the cost model's default split."""
    return stages_of(layout, model.num_layers)


def tp_pp_dp_mapping_allowed(layout: Layout) -> bool:
    """Whether Megatron-Core accepts its tp-cp-ep-pp-dp rank order for this layout (the cost model's rule)."""
    return bool(tp_pp_dp_order(layout.pp, layout.tp, layout.cp, layout.ep, layout.etp))


def moe_layer_pattern(model: ModelSpec) -> list[int]:
    """1 for each MoE layer, 0 for each dense one, as the planner counts them (ModelSpec.num_moe_layers): a hybrid
    model's E layers."""
    if model.moe is None:
        return [0] * model.num_layers
    if model.hybrid_pattern is not None:
        return [int(symbol == "E") for symbol in model.hybrid_pattern]
    k, freq = model.moe.first_k_dense_layers, model.moe.moe_layer_freq
    return [int(i >= k and (i - k) % freq == 0) for i in range(model.num_layers)]


def moe_dispatch_config(training: TrainingSpec, layout: Layout, flex_backend_field: bool) -> dict[str, str | bool]:
    """Megatron-Core TransformerConfig fields for the priced token dispatch of an ep > 1 layout (empty at
    ep = 1): `moe_token_dispatcher_type` alltoall or flex; for flex, `moe_flex_dispatcher_backend` where the
    release has it (`flex_backend_field`: core_v0.16 on), else `moe_enable_deepep` (core_v0.15.0, and Megatron-LM
    b615e731, which NeMo's main commit pins; HybridEP there is refused by rule megatron_15_no_hybridep); and
    `overlap_moe_expert_parallel_comm` for `RuntimeFeatures.moe_a2a_overlap`."""
    runtime = training.runtime
    if layout.ep == 1:
        return {}
    fields: dict[str, str | bool] = {}
    if runtime.moe_dispatcher is MoeDispatcher.ALLTOALL:
        fields["moe_token_dispatcher_type"] = "alltoall"
    else:
        fields["moe_token_dispatcher_type"] = "flex"
        if flex_backend_field:
            fields["moe_flex_dispatcher_backend"] = runtime.moe_dispatcher.value
        else:
            fields["moe_enable_deepep"] = True
    if runtime.moe_a2a_overlap:
        fields["overlap_moe_expert_parallel_comm"] = True
    return fields


def moe_router_config(model: ModelSpec) -> dict[str, str | bool | int | float | None]:
    """Every Megatron-Core TransformerConfig field of the model's router (`MoESpec.router_*`) and its load-balancing
    loss; empty for a dense model. All of them, defaults too: a NeMo recipe's model config class (DeepSeekV3Config:
    a sigmoid router with groups; MixtralConfig: its own loss weight) would otherwise keep its own values. False and
    None are what a Megatron-LM command line leaves out. `moe_router_pre_softmax` follows
    `MoESpec.router_softmax_before_topk` (always with a softmax top-1 router, which Megatron-Core refuses otherwise)."""
    moe = model.moe
    if moe is None:
        return {}
    return {
        "moe_router_score_function": moe.router_score_function.value,
        "moe_router_pre_softmax": moe.router_softmax_before_topk,
        "moe_router_enable_expert_bias": moe.router_expert_bias,
        "moe_router_num_groups": moe.router_num_groups,  # set together with the group top-k, or neither
        "moe_router_group_topk": moe.router_group_topk,
        "moe_router_topk_scaling_factor": moe.router_topk_scaling_factor,
        "moe_apply_probs_on_input": moe.router_score_before_experts,
        "moe_router_load_balancing_type": moe.router_load_balancing.value,
        "moe_aux_loss_coeff": moe.router_aux_loss_coeff,
    }


def moe_balancing_notes(model: ModelSpec) -> list[str]:
    """Where a launch trains the router with nothing balancing it (`MoESpec.router_balancing_unweighted`: the
    defaults, Megatron-Core's own)."""
    if model.moe is None or not model.moe.router_balancing_unweighted:
        return []
    return [
        f"model.moe: router_load_balancing {model.moe.router_load_balancing.value} at router_aux_loss_coeff 0 and no"
        " router_expert_bias (Megatron-Core's defaults): this launch trains the router with nothing balancing the"
        " experts' loads. Set model.moe.router_aux_loss_coeff (Mixtral 0.02, Qwen3 0.001, DeepSeek-V3 0.0001), or"
        " router_load_balancing none to mean it."
    ]


def torchtitan_router_notes(model: ModelSpec) -> list[str]:
    """TorchTitan takes the router from the model flavor the launch registers, not from its command line: what that
    flavor's MoE arguments must say for the model's router (`MoESpec.router_*`), and the load-balancing loss it cannot
    train (TorchTitan's MoE has none: `load_balance_coeff` drives the expert bias only, and its default 1e-3 turns
    that bias on)."""
    moe = model.moe
    if moe is None:
        return []
    wanted = [f"score_func={moe.router_score_function.value!r}"]
    if moe.router_expert_bias:
        wanted.append("load_balance_coeff set (the auxiliary-loss-free expert bias)")
    else:
        wanted.append("load_balance_coeff=None (no expert bias; TorchTitan's default 1e-3 turns it on)")
    if moe.router_num_groups is not None:
        wanted.append(f"num_expert_groups={moe.router_num_groups}, num_limited_groups={moe.router_group_topk}")
    if moe.router_topk_scaling_factor is not None:
        wanted.append(f"route_scale={moe.router_topk_scaling_factor}")
    if moe.router_score_before_experts:
        wanted.append("score_before_experts=True")
    # Megatron-Core renormalises the chosen weights of a sigmoid router with top_k > 1 and of a softmax taken after
    # the top-k; TorchTitan takes a softmax over all experts first and renormalises under route_norm.
    wanted.append(f"route_norm={moe.top_k > 1 and not moe.router_softmax_before_topk}")
    notes = [
        "model.moe router: TorchTitan builds the router from the registered flavor's MoE arguments, which must read "
        + "; ".join(wanted)
        + "."
    ]
    if moe.router_aux_loss_coeff > 0:
        notes.append(
            f"model.moe.router_load_balancing({moe.router_load_balancing.value}) at {moe.router_aux_loss_coeff}:"
            " TorchTitan's MoE trains no auxiliary load-balancing loss, so this launch leaves it out."
        )
    return notes


def moe_dispatch_notes(training: TrainingSpec, layout: Layout, flex_backend_field: bool) -> list[str]:
    """What a Megatron-Core release without moe_flex_dispatcher_backend runs for a HybridEP plan: DeepEP
    (`moe_dispatch_config`; rule megatron_15_no_hybridep refuses such plans)."""
    if layout.ep == 1 or flex_backend_field or training.runtime.moe_dispatcher is not MoeDispatcher.HYBRIDEP:
        return []
    return [
        "training.runtime.moe_dispatcher(hybridep): this release's flex dispatcher has no HybridEP backend, so this"
        " launch runs DeepEP (moe_enable_deepep); plans for it refuse HybridEP (rule megatron_15_no_hybridep)."
    ]


def torchtitan_moe_dispatch_notes(training: TrainingSpec, layout: Layout) -> list[str]:
    """TorchTitan's launch runs the plain all-to-all, unpaired (rule torchtitan_moe_dispatch)."""
    runtime = training.runtime
    if layout.ep == 1 or (runtime.moe_dispatcher is MoeDispatcher.ALLTOALL and not runtime.moe_a2a_overlap):
        return []
    return [
        f"training.runtime.moe_dispatcher({runtime.moe_dispatcher.value}) / moe_a2a_overlap({runtime.moe_a2a_overlap}):"
        " this launch runs TorchTitan's all-to-all dispatch without overlap, which the estimate does not price;"
        " plans for it refuse them (rule torchtitan_moe_dispatch)."
    ]


def expert_gemm_notes(model: ModelSpec, training: TrainingSpec, launched: ExpertGemm) -> list[str]:
    """Where the framework's launch runs its experts' GEMMs otherwise than the plan priced them
    (`RuntimeFeatures.expert_gemm`): Megatron-Core and NeMo launch Transformer Engine's GroupedLinear (multi_stream),
    TorchTitan `torch._grouped_mm` (grouped)."""
    priced = training.runtime.expert_gemm
    if model.moe is None or priced is launched:
        return []
    how = {
        ExpertGemm.MULTI_STREAM: "Transformer Engine's GroupedLinear, one cuBLAS GEMM per local expert (set"
        " NVTE_USE_CUTLASS_GROUPED_GEMM=1 on Hopper to run TE's CUTLASS grouped GEMM, as priced)",
        ExpertGemm.GROUPED: "one torch._grouped_mm kernel per weight over the local experts",
    }[launched]
    return [
        f"training.runtime.expert_gemm({priced.value}): this launch runs {how}; the estimate priced {priced.value}"
        f" (set expert_gemm {launched.value} to price what runs)."
    ]


def backward_prefetch_notes(training: TrainingSpec, layout: Layout, fsdp: str) -> list[str]:
    """Where the plan priced a PyTorch FSDP backward order without prefetch ahead of the gradients
    (`RuntimeFeatures.zero3_backward_prefetch` post or none) for a ZeRO-3 layout whose launch runs `fsdp`
    (Megatron-FSDP, FSDP2), which gathers each unit ahead of its backward (`specs.BackwardPrefetch.PRE` says where
    each does)."""
    priced = training.runtime.zero3_backward_prefetch
    if layout.zero_stage != 3 or priced is BackwardPrefetch.PRE:
        return []
    return [
        f"training.runtime.zero3_backward_prefetch({priced.value}): this launch's {fsdp} gathers each unit's weights"
        " ahead of its backward, beside the unit above's gradients; the estimate waited for every backward gather"
        " (set zero3_backward_prefetch pre to price what runs)."
    ]


def torchrun_command(nodes: Nodes, program: list[str], *, slurm: bool = False) -> str:
    """`torchrun` for `nodes`, rendezvous at $MASTER_ADDR:$MASTER_PORT (left for the shell to expand).

    Whole nodes: c10d rendezvous (under Slurm with the job id as rendezvous id, so every node's torchrun
    joins the same one). A partly used last node: the static rendezvous, where node rank k is group rank k
    and global ranks are the running sum of the nodes' process counts (torch 2.13
    torch/distributed/elastic/agent/server/api.py SimpleElasticAgent._assign_worker_ranks), with the
    process count chosen per node from its rank ($NODE_RANK; $SLURM_NODEID under Slurm).
    """
    if not nodes.partial:
        head = shlex.join(["torchrun", "--nnodes", str(nodes.count), "--nproc-per-node", str(nodes.per_node)])
        rdzv_id = ' --rdzv-id "$SLURM_JOB_ID"' if slurm else ""
        endpoint = ' --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT"'
        return f"{head}{rdzv_id}{endpoint} {shlex.join(program)}"
    rank = "$SLURM_NODEID" if slurm else "$NODE_RANK"
    nproc = f'"$(( {rank} < {nodes.count - 1} ? {nodes.per_node} : {nodes.last} ))"'
    head = f'torchrun --nnodes {nodes.count} --node-rank "{rank}" --nproc-per-node {nproc}'
    return f'{head} --master-addr "$MASTER_ADDR" --master-port "$MASTER_PORT" {shlex.join(program)}'


@dataclass(frozen=True, slots=True)
class KnownModel:
    """A model the frameworks ship: TorchTitan's (model name, flavor), if it has one, and NeMo's recipe."""

    torchtitan: tuple[str, str] | None
    nemo_recipe: str


# Keyed by (layers, hidden, heads, query groups, head width, ffn, experts, MLA): the shape, never the label.
_KNOWN: dict[tuple[int, int, int, int, int, int, int, bool], KnownModel] = {
    (32, 4096, 32, 8, 128, 14336, 0, False): KnownModel(("llama3", "8B"), "llama31_8b"),
    (80, 8192, 64, 8, 128, 28672, 0, False): KnownModel(("llama3", "70B"), "llama31_70b"),
    (126, 16384, 128, 8, 128, 53248, 0, False): KnownModel(("llama3", "405B"), "llama31_405b"),
    (61, 7168, 128, 128, 128, 18432, 256, True): KnownModel(("deepseek_v3", "671B"), "deepseek_v3"),
    (32, 4096, 32, 8, 128, 14336, 8, False): KnownModel(None, "mixtral_8x7b"),
    (56, 6144, 48, 8, 128, 16384, 8, False): KnownModel(None, "mixtral_8x22b"),
    (96, 12288, 96, 96, 128, 49152, 0, False): KnownModel(None, "gpt3_175b"),
    (32, 6144, 48, 8, 128, 24576, 0, False): KnownModel(None, "nemotron4_15b"),
    (96, 18432, 96, 8, 192, 73728, 0, False): KnownModel(None, "nemotron4_340b"),
    (48, 2048, 32, 4, 128, 6144, 128, False): KnownModel(None, "qwen3_30b_a3b"),
    (94, 4096, 64, 4, 128, 12288, 128, False): KnownModel(None, "qwen3_235b_a22b"),
    (48, 5120, 40, 8, 128, 16384, 16, False): KnownModel(None, "llama4_e16"),
    (48, 5120, 40, 8, 128, 16384, 128, False): KnownModel(None, "llama4_e128"),
}


# A hybrid model's shape (`ModelSpec.hybrid_pattern`): pattern, hidden, heads, query groups, head width, ffn, experts,
# Mamba state, head width, groups and heads. The shape, never the label.
_KNOWN_HYBRID: dict[tuple[str, int, int, int, int, int, int, int, int, int, int], KnownModel] = {
    ("M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", 4096, 32, 8, 128, 21504, 0, 128, 64, 8, 128): KnownModel(
        None, "nemotronh_8b"
    ),
    (
        "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
        "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
        8192,
        64,
        8,
        128,
        32768,
        0,
        256,
        64,
        8,
        256,
    ): KnownModel(None, "nemotronh_56b"),
}
"""NeMo 2.7.3's Nemotron-H recipes (nemo/collections/llm/recipes/nemotronh_8b.py, nemotronh_56b.py: NemotronHConfig8B
and NemotronHConfig56B of nemo/collections/llm/gpt/model/ssm.py). TorchTitan has no hybrid model."""


def squared_relu_mlp(model: ModelSpec) -> bool:
    """Whether the launch gives the model's MLPs and experts squared ReLU (Megatron-LM `--squared-relu`): a hybrid
    model's non-gated MLP. ModelSpec names no activation (a non-gated MLP is priced alike whatever it applies);
    every hybrid model NVIDIA trains with Megatron-Core uses squared ReLU (Megatron-LM
    examples/post_training/modelopt/conf/nvidia/Nemotron-H-8B-Base-8K.sh, Nemotron-H-56B-Base-8K.sh and
    NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.sh: --squared-relu; Megatron-Bridge and NeMo 2's Nemotron-H configs:
    activation_func squared_relu; Hugging Face NemotronHConfig: mlp_hidden_act relu2), so that is the hybrid
    reading of a non-gated MLP; a transformer's stays Megatron-Core's default GeLU."""
    return model.hybrid_pattern is not None and not model.gated_mlp


def hybrid_position_notes(model: ModelSpec) -> list[str]:
    """What a hybrid model's Megatron-LM or NeMo launch cannot take from the spec: its attention's position
    embedding (Megatron-Bridge's NemotronHBridge.provider_bridge sets position_embedding_type 'none', as NeMo 2's
    SSMConfig defaults it; the spec's RoPE is what the estimate prices)."""
    if model.hybrid_pattern is None or model.learned_position_embeddings:
        return []
    return [
        "model.hybrid_pattern: the attention layers are launched with RoPE, as the estimate prices them. NVIDIA's"
        " hybrid models (Nemotron-H, Nemotron 3) attend without position embeddings (Megatron-LM"
        " --position-embedding-type none, NeMo position_embedding_type none), which a ModelSpec cannot say: set"
        " none to train them as published."
    ]


def model_notes(model: ModelSpec) -> list[str]:
    """What every framework's launch says of the model: where it departs from the model's architecture (the planner
    prices the spec's shape), and a router nothing balances (`moe_balancing_notes`)."""
    notes: list[str] = []
    if not model.learned_position_embeddings:
        notes.append(
            "Position embedding: RoPE (the model has no learned position table). A model trained with ALiBi, such as"
            " BLOOM, is launched with RoPE: Megatron-LM's --position-embedding-type has no ALiBi choice."
        )
    return notes + moe_balancing_notes(model)


def torchtitan_hybrid_notes(model: ModelSpec) -> list[str]:
    """TorchTitan has no Mamba layers (rule torchtitan_no_hybrid)."""
    if model.hybrid_pattern is None:
        return []
    return [
        f"model.hybrid_pattern({model.num_mamba_layers} Mamba, {model.num_attention_layers} attention layers):"
        " TorchTitan has no Mamba-2 layers, so this launch cannot train the hybrid model (a flavor registered for"
        " it would be a transformer of its width); plans for it refuse hybrid models (rule torchtitan_no_hybrid)."
    ]


MEGATRON_ATTENTION_BACKENDS: dict[AttentionKernel, str] = {
    AttentionKernel.CUDNN: "fused",
    AttentionKernel.FLASH2: "flash",
    AttentionKernel.FLASH1: "flash",
}
"""Megatron-LM's `--attention-backend` for the kernel a plan is priced with: `fused` is cuDNN's fused attention
(Megatron-Core sets NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0 for Transformer Engine), `flash` the flash-attn package
(NVTE_FLASH_ATTN=1, NVTE_FUSED_ATTN=0). Source: Megatron-Core `megatron/core/transformer/enums.py` `AttnBackend` and
`megatron/core/models/common/language_module/language_module.py` (`check_and_set_env_variable` per backend). Without
flash attention the launch asks for `unfused`. Transformer Engine runs flash-attn 2 or later, never v1
(`attention_kernel_notes`)."""


def megatron_attention_backend(training: TrainingSpec) -> str:
    """`--attention-backend` for Megatron-LM (`MEGATRON_ATTENTION_BACKENDS`)."""
    runtime = training.runtime
    return MEGATRON_ATTENTION_BACKENDS[runtime.attention_kernel] if runtime.flash_attention else "unfused"


def attention_kernel_notes(training: TrainingSpec, framework: str) -> list[str]:
    """What a Megatron-LM or NeMo launch runs when the plan is priced with another attention kernel than cuDNN's.

    The kernel moves long-sequence predictions by up to 1.5x (README, "Where the model is weak"), so a launch that
    runs another one says so. Megatron-LM picks the kernel with `--attention-backend` (`megatron_attention_backend`);
    NeMo's `model.config.attention_backend` is an enum its CLI cannot spell, and its default (auto) lets Transformer
    Engine choose, which on Hopper is cuDNN's fused attention unless NVTE_FUSED_ATTN=0 (TE
    `DotProductAttention`'s backend selection: "Select FusedAttention on sm90")."""
    runtime = training.runtime
    if not runtime.flash_attention or runtime.attention_kernel is AttentionKernel.CUDNN:
        return []
    if runtime.attention_kernel is AttentionKernel.FLASH1:
        return [
            "training.runtime.attention_kernel is flash1 (FlashAttention v1), which Transformer Engine does not run:"
            f" this {framework} launch runs the flash-attn 2 package, faster than priced."
        ]
    if framework == "NeMo":
        return [
            "Priced with flash-attn 2 (training.runtime.attention_kernel flash2): NeMo's default attention backend lets"
            " Transformer Engine choose, cuDNN's fused attention on Hopper; set NVTE_FUSED_ATTN=0 in the job's"
            " environment (or the recipe's model.config.attention_backend to flash) to run what was priced."
        ]
    return []


def eager_elementwise_notes(training: TrainingSpec, framework: str) -> list[str]:
    """A Megatron-LM or NeMo launch runs Transformer Engine's fused norms, activations and RoPE, whatever
    `RuntimeFeatures.eager_elementwise` priced (`costmodel.elementwise`)."""
    if not training.runtime.eager_elementwise:
        return []
    return [
        "training.runtime.eager_elementwise prices eager PyTorch model code (fp32 norms and RoPE, unfused SwiGLU):"
        f" this {framework} launch runs Transformer Engine's fused kernels, faster than priced."
    ]


def torchtitan_async_tp(training: TrainingSpec, layout: Layout) -> bool:
    """TorchTitan's async TP (its TP communication overlap) is on: TP overlap asked for and tp > 1."""
    return training.runtime.tp_comm_overlap and layout.tp > 1


def torchtitan_compiles(training: TrainingSpec, layout: Layout) -> bool:
    """Whether a TorchTitan launch compiles its model and loss with `torch.compile`: wherever the plan was priced
    at fused element-wise kernels (`RuntimeFeatures.eager_elementwise` off, `costmodel.elementwise.FUSED`), and
    wherever async TP needs it.

    TorchTitan's model code is plain PyTorch ops (torchtitan/models/llama3/model/model.py at v0.2.2): RoPE on
    complex fp32 copies (`apply_rotary_emb`: `float`, the complex product, `type_as`) and SwiGLU as two ops
    (`F.silu(self.w1(x)) * self.w3(x)`) run eagerly as one kernel per op, as the `EAGER` table counts for code of
    this kind (its `nn.RMSNorm` is one kernel eagerly too in PyTorch since its fused RMSNorm, pytorch/pytorch PR
    153666, 2025). Only compiled (`Compile.enable`: off in JobConfig and in the shipped 8B and 70B train configs,
    on in the 405B one) do they run fused, as `FUSED` prices them. The float8 MoE and MXFP8 converters warn that
    they need compile for speed (torchtitan/components/quantization/float8.py, mx.py), and async TP refuses to run
    without it (torchtitan/distributed/tensor_parallel.py).
    """
    return torchtitan_async_tp(training, layout) or not training.runtime.eager_elementwise


def torchtitan_compile_notes(training: TrainingSpec, layout: Layout) -> list[str]:
    """What a TorchTitan launch's compile setting means for the priced step (`torchtitan_compiles`)."""
    if not torchtitan_compiles(training, layout):
        return [
            "torch.compile is off, as training.runtime.eager_elementwise prices the model code eagerly; the eager"
            " byte counts are those of IBM's fms LLaMA (costmodel.elementwise.EAGER), and TorchTitan's own eager"
            " code moves fewer (PyTorch's fused RMSNorm, a RoPE of about 20 bytes per element against 36), so it"
            " runs somewhat faster than priced."
        ]
    if training.runtime.eager_elementwise:
        return [
            "torch.compile is on because async TP needs it: it fuses the element-wise code that"
            " training.runtime.eager_elementwise priced eagerly, so this launch runs faster than priced."
        ]
    return [
        "torch.compile (model and loss) is on: the plan prices a fused RoPE and activation, which TorchTitan's"
        " model code reaches only compiled. The first steps include the compilation time."
    ]


def megatron_gradient_notes(training: TrainingSpec) -> list[str]:
    """Megatron-LM's and NeMo's launches run Megatron-Core's gradient buffers, whatever `gradient_layout` says."""
    if training.gradient_layout is not GradientLayout.PYTORCH_FSDP:
        return []
    return [
        "training.gradient_layout is pytorch_fsdp, which this launch cannot run: Megatron-Core holds gradients in its"
        " own buffers (under 16-bit reduction a 16-bit buffer plus the optimizer's fp32 copy, 2 bytes per parameter"
        " more than priced); plans for it refuse pytorch_fsdp (rule megatron_gradient_layout)."
    ]


def fp8_weight_storage(training: TrainingSpec, layout: Layout) -> tuple[bool, bool]:
    """(FP8 weights stored as FP8, MXFP8's parameter all-gather through the gradient buffer) as the cost model prices
    them (`numerics.fp8_param_gather_on`: as stated, or today's recipes' default, `fp8_param_gather_default`, at
    zero_stage >= 1; MXFP8 with FP8 storage reuses the gradient buffer, which Megatron-Core's `OptimizerConfig` warns
    is needed to avoid "a significant amount of additional GPU memory"). Both False outside FP8 and NVFP4; under
    NVFP4 the first is Megatron-LM's `--fp4-param-gather`."""
    if training.precision not in QUANTIZED_PRECISIONS:
        return False, False
    gather = fp8_param_gather_default(training.fp8_param_gather, training.fp8_recipe)
    stored = bool(fp8_param_gather_on(gather, layout.zero_stage))
    return stored, stored and training.fp8_recipe is Fp8Recipe.MXFP8


def torchtitan_fp8_notes(training: TrainingSpec) -> list[str]:
    """TorchTitan's float8 converter runs tensorwise scaling over fp32 sharded weights, whatever the FP8 recipe and
    weight storage say (rule torchtitan_fp8 refuses the others)."""
    if not torchtitan_refuses_fp8(training):
        return []
    if training.precision is Precision.NVFP4:
        return [
            "training.precision nvfp4 asks for what this launch cannot run: it trains in bf16 here (TorchTitan's"
            " float8 converter is FP8 only); plans for it refuse nvfp4 (rule torchtitan_fp8)."
        ]
    return [
        "training.fp8_recipe / fp8_param_gather / bf16_layers_at_start / bf16_layers_at_end ask for what this launch"
        " cannot run: TorchTitan's float8 converter scales tensorwise, converts every layer and keeps fp32 sharded"
        " weights; plans for it refuse them (rule torchtitan_fp8)."
    ]


def qk_layernorm_on(model: ModelSpec) -> bool:
    """Megatron-Core's `qk_layernorm` for the model: the query and key norms it prices (`ModelSpec.qk_layernorm`),
    and under MLA always, since the same switch builds MLA's latent norms, which the planner always prices
    (Megatron-Core `gpt_layer_specs.py`: `q_layernorm` / `k_layernorm`, and MLA's `q_layernorm` / `kv_layernorm`,
    are TENorm if qk_layernorm else IdentityOp; DeepSeek-V2/V3 have the latent norms)."""
    return model.qk_layernorm or model.mla is not None


def te_window_size(model: ModelSpec) -> tuple[int, int] | None:
    """Megatron-Core's `window_size`, Transformer Engine's (left, right) window: the `sliding_window` keys a query
    sees, itself included, are sliding_window - 1 back and none ahead (TE `DotProductAttention`); None without a
    window."""
    return None if model.sliding_window is None else (model.sliding_window - 1, 0)


def torchtitan_qk_norm_notes(model: ModelSpec) -> list[str]:
    """TorchTitan builds the query and key norms only in the model it registers with them (its qwen3 model)."""
    if not model.qk_norm_width:
        return []
    return [
        "model.qk_layernorm: the estimate prices a norm over each head's query and key (Qwen3's q_norm / k_norm)."
        " TorchTitan's qwen3 model has them; its llama3 model has none, so a flavor registered on llama3 trains"
        " without them."
    ]


def torchtitan_window_notes(model: ModelSpec) -> list[str]:
    """TorchTitan's llama3, qwen3 and deepseek_v3 models attend over the whole causal prefix in every layer; its
    gpt_oss model (torchtitan/models/gpt_oss, v0.2.2) is the one with sliding-window attention."""
    if model.sliding_window is None:
        return []
    layers = "every layer" if model.sliding_window_pattern is None else f"{model.num_window_layers} layers"
    return [
        f"model.sliding_window({model.sliding_window}): the estimate prices windowed attention in {layers}."
        " TorchTitan's llama3, qwen3 and deepseek_v3 models attend fully everywhere (its gpt_oss model has the"
        " window), so a flavor registered on them computes the full causal attention, more than priced at long"
        " sequences."
    ]


def torchtitan_mtp_notes(model: ModelSpec) -> list[str]:
    """TorchTitan's models have no multi-token prediction: its launch trains without the MTP modules priced."""
    if not model.mtp_num_layers:
        return []
    return [
        f"model.mtp_num_layers({model.mtp_num_layers}): TorchTitan's models have no multi-token prediction, so this"
        " launch trains without the MTP modules the estimate prices on the last stage (a layer, eh_proj and a"
        " second output layer and loss each)."
    ]


def torchtitan_offload_notes(training: TrainingSpec) -> list[str]:
    """TorchTitan offloads no activations (rule torchtitan_no_activation_offload)."""
    if not training.activation_offload_layers:
        return []
    return [
        f"training.activation_offload_layers({training.activation_offload_layers}): TorchTitan has no activation"
        " offloading, so this launch keeps every layer's activations; plans for it refuse it"
        " (rule torchtitan_no_activation_offload)."
    ]


def torchtitan_block_recompute_notes(training: TrainingSpec, layout: Layout) -> list[str]:
    """TorchTitan's full activation checkpointing wraps every layer (rule torchtitan_no_block_recompute)."""
    if training.recompute_num_layers is None or layout.recompute is not Recompute.FULL:
        return []
    return [
        f"training.recompute_num_layers({training.recompute_num_layers}): TorchTitan's full activation checkpointing"
        " recomputes every layer, so this launch does; plans for it refuse it (rule torchtitan_no_block_recompute)."
    ]


def known_model(model: ModelSpec) -> KnownModel | None:
    experts = model.moe.num_experts if model.moe is not None else 0
    if model.hybrid_pattern is not None:
        mamba = model.mamba
        state, head, groups = (mamba.state_dim, mamba.head_dim, mamba.num_groups) if mamba is not None else (0, 0, 0)
        hybrid = (
            model.hybrid_pattern,
            model.hidden_size,
            model.num_attention_heads,
            model.num_query_groups,
            model.head_dim,
            model.ffn_hidden_size,
            experts,
            state,
            head,
            groups,
            model.mamba_num_heads,
        )
        return _KNOWN_HYBRID.get(hybrid)
    key = (
        model.num_layers,
        model.hidden_size,
        model.num_attention_heads,
        model.num_query_groups,
        model.head_dim,
        model.ffn_hidden_size,
        experts,
        model.mla is not None,
    )
    return _KNOWN.get(key)
