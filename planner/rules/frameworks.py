"""Rule sets per framework and version: the core rules plus what each framework's own code refuses.

`core` is the default everywhere (the planner's behaviour). The framework sets add
the rules read from the framework's source at each version targeted (`VERSIONS`, newest first:
the first is the default); each rule names the file and function that enforces it, and a
rule that a later release dropped is listed only for the releases that still enforce it.

Megatron-LM core_v0.19.2 needs Python >= 3.12 (its wheel's Requires-Python), which this project's
CPython 3.11 cannot install, so its rules are recorded from its source (the megatron-core 0.19.2 wheel
carries megatron/training/arguments.py); core_v0.16.1 is the newest the framework check installs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from planner.costmodel.candidates import BoolArray, IntArray, split_stage_layers, stages_of
from planner.layout import Layout
from planner.rules.core import CORE_RULES
from planner.rules.rule import (
    EMBEDDING_IN_SPLIT,
    LOSS_IN_SPLIT,
    Clause,
    Columns,
    Job,
    Rule,
    SplitClause,
    every_layout,
    layout_columns,
)
from planner.specs import AdamMoments, Fp8Recipe, GradientLayout, ModelSpec, MoeDispatcher, Precision, TrainingSpec

__all__ = [
    "FP8_PARAM_GATHER_NEEDS_DISTRIBUTED_OPTIMIZER",
    "PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER",
    "FRAMEWORK_RULES",
    "Framework",
    "HYBRID_EVEN_STAGES",
    "HYBRID_NO_FULL_RECOMPUTE",
    "HYBRID_NO_INTERLEAVING",
    "MEGATRON_15_HYBRID_FEATURES",
    "MEGATRON_HYBRID_FEATURES",
    "NEMO_25_HYBRID_FEATURES",
    "MEGATRON_GRADIENT_LAYOUT",
    "MEGATRON_FSDP_NEEDS_NO_PP",
    "MEGATRON_15_NO_ACTIVATION_OFFLOAD",
    "MEGATRON_15_NO_HYBRIDEP",
    "MOE_FP16_NO_EXPERT_PARALLEL",
    "NEMO_25_NO_WINDOW_PATTERN",
    "QUERY_GROUPS_SPLIT",
    "RULE_SETS",
    "TORCHTITAN_DDP_ONE_DIMENSIONAL",
    "TORCHTITAN_03_SEQ_LEN_DIVISIBLE",
    "TORCHTITAN_ADAM_MOMENTS",
    "TORCHTITAN_FLEX_ATTENTION_NO_CP",
    "TORCHTITAN_FP8",
    "TORCHTITAN_GRADIENT_LAYOUT",
    "TORCHTITAN_MOE_DISPATCH",
    "TORCHTITAN_NO_ACTIVATION_OFFLOAD",
    "TORCHTITAN_NO_BLOCK_RECOMPUTE",
    "TORCHTITAN_NO_RECOMPUTE_MODULES",
    "TORCHTITAN_EXPERT_TENSOR_PARALLEL",
    "TORCHTITAN_NO_EXPERT_TENSOR_PARALLEL",
    "TORCHTITAN_NO_HYBRID",
    "TORCHTITAN_SEQ_LEN_DIVISIBLE",
    "VERSIONS",
    "RuleSet",
    "default_version",
    "torchtitan_refuses_fp8",
    "rule_set",
    "version_description",
]


class Framework(StrEnum):
    """What a plan is for: a framework whose launch checks the layout, or `core` (the common rules only)."""

    CORE = "core"
    MEGATRON = "megatron"
    NEMO = "nemo"
    TORCHTITAN = "torchtitan"


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules one framework (at one version) enforces, in report order."""

    name: str
    version: str
    rules: tuple[Rule, ...]

    def __getitem__(self, name: str) -> Rule:
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(rule.name for rule in self.rules)


_MEGATRON = "Megatron-LM core_v0.15.0"
_MEGATRON_16 = "Megatron-LM core_v0.16.1"
_MEGATRON_19 = "Megatron-LM core_v0.19.2"
_NEMO = "NeMo main (commit 8cfedd720346) with Megatron-LM b615e731080e"
_NEMO_27 = "NeMo 2.7.3 with megatron-core 0.16.1"
_TORCHTITAN = "TorchTitan v0.2.2"
_TORCHTITAN_03 = "TorchTitan v0.3.0"
_MAMBA_STACK = "megatron/core/ssm/mamba_block.py MambaStack"
"""Megatron-Core's hybrid layer stack up to core_v0.16 (Megatron-LM pretrain_mamba.py, NeMo 2's SSMConfig);
core_v0.19 moved it to megatron/core/models/hybrid/hybrid_block.py HybridStack (pretrain_hybrid.py)."""

MEGATRON_FSDP_NEEDS_NO_PP = Rule(
    name="megatron_fsdp_needs_pp_1",
    axes=("pp", "zero_stage"),
    clauses=(
        Clause(
            lambda c, j: (c["zero_stage"] >= 2) & (c["pp"] > 1),
            lambda x, j: f"zero_stage({x.zero_stage}) runs Megatron-FSDP, which needs pp = 1; got pp({x.pp})",
        ),
    ),
    source=f"{_MEGATRON} to {_MEGATRON_19} megatron/core/distributed/fsdp/mcore_fsdp_adapter.py _get_dp_tp_mesh:"
    " the mesh is '(dp_cp ep tp)' over the whole world size and must match the DP and TP groups, so no pipeline"
    " dimension (unchanged in 0.16.1 and 0.19.2). NeMo enforces it through the same Megatron-Core:"
    f" {_NEMO} and {_NEMO_27} (megatron-core 0.16.1 wheel, the same file and function, reached from"
    " nemo/lightning/megatron_parallel.py MegatronParallel.init_ddp for trainer.strategy.fsdp='megatron')",
)

QUERY_GROUPS_SPLIT = Rule(
    name="query_groups_split",
    axes=("tp",),
    clauses=(
        Clause(
            lambda c, j: j.model.num_query_groups % c["tp"] != 0,
            lambda x, j: (
                f"num_query_groups({j.model.num_query_groups}) % tp({x.tp})"
                f" = {j.model.num_query_groups % x.tp}, must be 0"
            ),
        ),
    ),
    source=f"{_MEGATRON} megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__"
    " ('num_query_groups ... must be a multiple of tensor_model_parallel_size'); from core_v0.16 on it accepts a"
    " multiple or a divisor (KV heads replicated), which the core rule tensor_split already states."
    f" {_NEMO} builds the same TransformerConfig at Megatron-LM b615e731080e, which refuses a divisor;"
    f" not in {_NEMO_27}: megatron-core 0.16.1 megatron/core/transformer/transformer_config.py"
    " TransformerConfig.__post_init__ ('must be a multiple or divisor of tensor_model_parallel_size')",
)


def _fsdp_message(x: Layout, j: Job) -> str:
    held = "Megatron-FSDP's" if x.zero_stage >= 2 else "its DDP buffer's and distributed optimizer's"
    return (
        f"training.gradient_layout('pytorch_fsdp') is PyTorch FSDP's; Megatron-Core runs zero_stage({x.zero_stage})"
        f" with {held} gradients: use gradient_layout 'megatron'"
    )


MEGATRON_GRADIENT_LAYOUT = Rule(
    name="megatron_gradient_layout",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "zero_stage", j.training.gradient_layout is GradientLayout.PYTORCH_FSDP),
            _fsdp_message,
        ),
    ),
    source=f"{_MEGATRON} to {_MEGATRON_19} megatron/core/distributed/param_and_grad_buffer.py"
    " _ParamAndGradBuffer (the gradient buffer in fp32 if grad_reduce_in_fp32 else the parameter dtype, reduced"
    " as held) and megatron/core/optimizer/distrib_optimizer.py (fp32 main-parameter shards, and main-grad copies"
    " of a 16-bit buffer); megatron/core/distributed/fsdp/mcore_fsdp_adapter.py for zero_stage >= 2. The"
    " planner's launches run these (planner/launch/megatron.py, planner/launch/nemo.py: use_distributed_optimizer,"
    f" trainer.strategy.fsdp='megatron'); {_NEMO} and {_NEMO_27} train through the same Megatron-Core",
)


def _megatron_gradients_in_16_bit(j: Job) -> bool:
    return j.training.grad_reduce_in_fp32 is False and j.training.gradient_layout is GradientLayout.MEGATRON


TORCHTITAN_GRADIENT_LAYOUT = Rule(
    name="torchtitan_gradient_layout",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "zero_stage", _megatron_gradients_in_16_bit(j)),
            lambda x, j: (
                "training.gradient_layout('megatron') with grad_reduce_in_fp32(false) prices 16-bit gradients plus"
                " an fp32 copy; TorchTitan's FSDP2 reduces in training.mixed_precision_reduce and holds the fp32"
                " sharded gradient: use gradient_layout 'pytorch_fsdp'"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/models/llama3/infra/parallelize.py apply_fsdp (and the other models'; the"
    f" same FSDP2 wrapping in {_TORCHTITAN_03}): fully_shard with MixedPrecisionPolicy(param_dtype="
    "mixed_precision_param, reduce_dtype=mixed_precision_reduce) over fp32 parameters; torch 2.13"
    " torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce reduce-scatters in reduce_dtype and"
    " casts the reduce output to orig_dtype (the sharded parameter's, fp32), with no other copy",
)


FP8_PARAM_GATHER_NEEDS_DISTRIBUTED_OPTIMIZER = Rule(
    name="fp8_param_gather_needs_distributed_optimizer",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: (c["zero_stage"] == 0) & (j.training.fp8_param_gather is True),
            lambda x, j: (
                "training.fp8_param_gather(true) needs the distributed optimizer or Megatron-FSDP;"
                f" zero_stage({x.zero_stage}) has neither: use zero_stage >= 1"
            ),
        ),
    ),
    source=f"{_MEGATRON}, {_MEGATRON_16} and core_v0.19.0 megatron/training/arguments.py validate_args"
    " ('--fp8-param-gather only supported with distributed optimizer, torch fsdp2, megatron fsdp, or inference"
    " mode'); core_v0.19.2 taken to keep it (its source was not read here)",
)


PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER = Rule(
    name="precision_aware_optimizer_needs_distributed_optimizer",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: (c["zero_stage"] == 0) & (j.training.adam_moments is AdamMoments.BF16),
            lambda x, j: (
                "training.adam_moments(bf16) is Megatron-Core's precision-aware optimizer, which needs the distributed"
                f" optimizer; zero_stage({x.zero_stage}) has none: use zero_stage >= 1"
            ),
        ),
    ),
    source=f"{_MEGATRON}, {_MEGATRON_16} and core_v0.19.0 megatron/core/optimizer/optimizer_config.py"
    " OptimizerConfig.__post_init__ ('--use-precision-aware-optimizer only supported with distributed optimizer',"
    " read in all three),"
    f" which {_NEMO} and {_NEMO_27} run too; core_v0.19.2 taken to keep it (its source was not read here)",
)

TORCHTITAN_ADAM_MOMENTS = Rule(
    name="torchtitan_adam_moments",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "zero_stage", j.training.adam_moments is not AdamMoments.FP32),
            lambda x, j: (
                "training.adam_moments(bf16): TorchTitan's AdamW keeps its states in the fp32 sharded"
                " parameters' dtype; use fp32"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/config/job_config.py Optimizer (name, lr, betas, eps, weight_decay,"
    " implementation: no state dtype; torch's AdamW keeps its states in the dtype of FSDP2's fp32 sharded"
    f" parameters); {_TORCHTITAN_03} taken to keep it (its optimizer config was not read here)",
)


def torchtitan_refuses_fp8(training: TrainingSpec) -> bool:
    """Whether the quantized settings ask for what TorchTitan's float8 launch cannot run (rule torchtitan_fp8):
    NVFP4, FP8 weight storage, a recipe other than its tensorwise scaling, or layers kept in BF16."""
    return (
        training.precision is Precision.NVFP4
        or training.fp8_param_gather is True
        or training.fp8_recipe not in (None, Fp8Recipe.TENSORWISE)
        or bool(training.bf16_layers_at_start or training.bf16_layers_at_end)
    )


def _torchtitan_fp8_message(x: Layout, j: Job) -> str:
    if j.training.precision is Precision.NVFP4:
        return (
            "training.precision(nvfp4): the planner's TorchTitan launch quantizes with its float8 converter only"
            " (quantize.linear.float8); use Megatron-LM or NeMo for NVFP4"
        )
    if j.training.fp8_param_gather is True:
        return (
            "training.fp8_param_gather(true) is Megatron-Core's FP8 weight storage; TorchTitan's float8 keeps"
            " fp32 sharded weights (quantize.linear.float8.enable_fsdp_float8_all_gather only changes the gather)"
        )
    if j.training.bf16_layers_at_start or j.training.bf16_layers_at_end:
        return (
            f"training.bf16_layers_at_start({j.training.bf16_layers_at_start}) / bf16_layers_at_end"
            f"({j.training.bf16_layers_at_end}): the planner's TorchTitan launch converts every transformer layer's"
            " linears to float8; use Megatron-LM or NeMo to keep layers in BF16"
        )
    recipe = j.training.fp8_recipe.value if j.training.fp8_recipe is not None else None
    return f"training.fp8_recipe({recipe}): the planner's TorchTitan launch runs float8 tensorwise; use tensorwise"


TORCHTITAN_FP8 = Rule(
    name="torchtitan_fp8",
    axes=("zero_stage",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "zero_stage", torchtitan_refuses_fp8(j.training)),
            _torchtitan_fp8_message,
        ),
    ),
    source=f"{_TORCHTITAN} and {_TORCHTITAN_03}: the launch's converter quantize.linear.float8"
    " (planner/launch/torchtitan.py) with recipe_name unset, torchao's tensorwise dynamic scaling (Float8LinearConfig"
    " default); no delayed scaling, and MXFP8 is another converter (quantize.linear.mx) the planner does not emit,"
    " nor any NVFP4 training path",
)


def _offload_rule(name: str, framework: str, source: str) -> Rule:
    """A framework that cannot offload activations (`TrainingSpec.activation_offload_layers`): one rule, named."""
    return Rule(
        name=name,
        axes=("pp",),
        clauses=(
            Clause(
                lambda c, j: every_layout(c, "pp", j.training.activation_offload_layers > 0),
                lambda x, j: (
                    f"training.activation_offload_layers({j.training.activation_offload_layers}) > 0: {framework}"
                    " has no activation offloading the planner can launch; use 0"
                ),
            ),
        ),
        source=source,
    )


TORCHTITAN_NO_BLOCK_RECOMPUTE = Rule(
    name="torchtitan_no_block_recompute",
    axes=("recompute",),
    clauses=(
        Clause(
            lambda c, j: (c["recompute"] == 2) & (j.training.recompute_num_layers is not None),
            lambda x, j: (
                f"training.recompute_num_layers({j.training.recompute_num_layers}) with recompute full: TorchTitan's"
                " full activation checkpointing wraps every layer; use null"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} and {_TORCHTITAN_03}: activation_checkpoint.mode full checkpoints every transformer block;"
    " selective_ac_option picks op-level or every n-th layer, not the first n of a stage",
)


TORCHTITAN_NO_RECOMPUTE_MODULES = Rule(
    name="torchtitan_no_recompute_modules",
    axes=("recompute",),
    clauses=(
        Clause(
            lambda c, j: (c["recompute"] == 1) & (j.training.runtime.recompute_modules is not None),
            lambda x, j: (
                f"{j.modules_field}: TorchTitan's selective activation checkpointing picks ops"
                " (selective_ac_option op) or every n-th layer, not modules by name; use null"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} and {_TORCHTITAN_03}: activation_checkpoint.mode selective with selective_ac_option"
    " 'op' (per-op: matmul outputs kept, the rest recomputed) or an integer (every n-th block), the whole choice;"
    " no per-module list",
)


MEGATRON_15_NO_ACTIVATION_OFFLOAD = _offload_rule(
    "megatron_no_activation_offload",
    _MEGATRON,
    f"{_MEGATRON} megatron/training/arguments.py has no --cpu-offloading-num-layers (TransformerConfig's"
    f" cpu_offloading fields are not on its CLI); {_MEGATRON_16} builds the TransformerConfig arguments with"
    " ArgumentGroupFactory, so --cpu-offloading-num-layers exists there and validate_args sets cpu_offloading",
)
TORCHTITAN_NO_ACTIVATION_OFFLOAD = _offload_rule(
    "torchtitan_no_activation_offload",
    "TorchTitan",
    f"{_TORCHTITAN} and {_TORCHTITAN_03}: no per-layer activation offloading to the host; training.enable_cpu_offload"
    " is FSDP2's CPUOffloadPolicy, which moves parameters, gradients and the optimizer, not activations",
)


def _fp16(j: Job) -> bool:
    return j.training.precision is Precision.FP16


MOE_FP16_NO_EXPERT_PARALLEL = Rule(
    name="fp16_no_expert_parallel",
    axes=("ep",),
    clauses=(
        Clause(
            lambda c, j: (c["ep"] > 1) & _fp16(j),
            lambda x, j: f"ep({x.ep}) > 1 is refused in fp16 training; use ep = 1 or bf16",
        ),
    ),
    source=f"{_MEGATRON} megatron/training/arguments.py validate_args ('Expert parallelism is not supported with"
    " fp16 training.'); gone from validate_args in core_v0.16.1 and core_v0.19.2",
)


def _replicated_only(c: Columns) -> BoolArray:
    """TorchTitan's ZeRO 0 is plain DDP only without cp and ep (those shard with FSDP2; launch/torchtitan.py)."""
    ddp: BoolArray = (c["zero_stage"] == 0) & (c["cp"] == 1) & (c["ep"] == 1) & (c["dp"] > 1)
    return ddp


TORCHTITAN_DDP_ONE_DIMENSIONAL = Rule(
    name="ddp_one_dimensional",
    axes=("tp", "pp", "dp", "cp", "ep", "zero_stage"),
    clauses=(
        Clause(
            lambda c, j: _replicated_only(c) & (c["tp"] * c["pp"] > 1),
            lambda x, j: (
                f"zero_stage(0) runs plain DDP, which has no > 1-D parallelism: tp({x.tp}) * pp({x.pp})"
                f" = {x.tp * x.pp}, must be 1"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/models/llama3/infra/parallelize.py parallelize_llama (and the other"
    " models' parallelize): 'DDP has not supported > 1D parallelism' when the dp_replicate mesh is not the world."
    f" Gone in {_TORCHTITAN_03}: torchtitan/models/llama3/parallelize.py parallelize_llama (and deepseek_v3's)"
    " always runs apply_fsdp_to_decoder (HSDP over dp_replicate x dp_shard), with no DDP path",
)


def _flex_attention(model: ModelSpec) -> bool:
    """The model runs on TorchTitan's DeepSeek-V3 flavors, which set attn_type = 'flex'."""
    from planner.launch.common import known_model  # launch imports the rules; resolved at call time

    known = known_model(model)
    return known is not None and known.torchtitan is not None and known.torchtitan[0] == "deepseek_v3"


def _flex_message(x: Layout, j: Job) -> str:
    return f"cp({x.cp}) > 1 needs SDPA attention; TorchTitan's DeepSeek-V3 uses flex attention"


TORCHTITAN_FLEX_ATTENTION_NO_CP = Rule(
    name="flex_attention_no_cp",
    axes=("cp",),
    clauses=(Clause(lambda c, j: (c["cp"] > 1) & _flex_attention(j.model), _flex_message),),
    source=f"{_TORCHTITAN} torchtitan/models/deepseek_v3/infra/parallelize.py parallelize_deepseekv3 ('Context"
    " Parallel only supports SDPA attention'); torchtitan/models/deepseek_v3/__init__.py flavors 16B/236B/671B"
    f" set attn_type='flex'. Reversed in {_TORCHTITAN_03}: torchtitan/distributed/full_dtensor.py validate_config"
    " refuses CP with SDPA or varlen attention ('Use FlexAttention + CP'), and"
    " torchtitan/models/common/config_utils.py get_attention_config has no SDPA for language models; the"
    " llama3 and deepseek_v3 model_registry default to attn_backend='flex', so CP is accepted",
)

TORCHTITAN_SPLIT_BY_TRANSFORMER_LAYERS = Rule(
    name="torchtitan_split_by_transformer_layers",
    axes=(EMBEDDING_IN_SPLIT, LOSS_IN_SPLIT),
    clauses=(
        Clause(
            lambda c, j: (c[EMBEDDING_IN_SPLIT] + c[LOSS_IN_SPLIT]) > 0,
            lambda x, j: (
                "the embedding or the loss counted as a pipeline layer is Megatron-Core's split;"
                " the TorchTitan launch assigns whole transformer layers to stages, so it is not offered"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/config/job_config.py Parallelism: the stage split is"
    " pipeline_parallel_layers_per_stage / module_fqns_per_model_part (first/last_stage_less_layers trim"
    " whole layers); there is no account_for_embedding/loss option. This planner's TorchTitan launch writes"
    " the split as transformer layers per stage (planner/launch/torchtitan.py), which these layouts would break."
    f" Not in {_TORCHTITAN_03}: torchtitan/config/configs.py ParallelismConfig.module_fqns_per_model_part is a"
    " CLI key (one comma-separated list per stage), and torchtitan/distributed/pipeline_parallel.py"
    " _generate_llm_fqn_per_model_part with first/last_stage_less_layers = 1 is Megatron's embedding/loss"
    " counted as a layer, so the v0.3.0 launch writes these splits (planner/launch/torchtitan_v03.py)",
)


def _seq_len_divisor_v02(c: Columns) -> IntArray:
    divisor: IntArray = c["tp"] * 2 * c["cp"]
    return divisor


def _seq_len_divisor_v03(c: Columns) -> IntArray:
    sp: IntArray = np.where((c["sequence_parallel"] != 0) & (c["tp"] > 1), c["tp"], 1)
    divisor: IntArray = sp * np.where(c["cp"] > 1, 2 * c["cp"], 1)
    return divisor


def _seq_len_rule(release: str, divisor: Callable[[Columns], IntArray], spelled: str, source: str) -> Rule:
    """TorchTitan's sequence-length divisor, which moved between releases: one rule, parameterised."""
    return Rule(
        name="torchtitan_seq_len_divisible",
        axes=("tp", "cp", "sequence_parallel"),
        clauses=(
            Clause(
                lambda c, j: j.model.seq_length % divisor(c) != 0,
                lambda x, j: (
                    f"seq_length({j.model.seq_length}) % {spelled}"
                    f" = {j.model.seq_length % int(divisor(layout_columns([x]))[0])}, must be 0"
                    f" (tp({x.tp}), cp({x.cp}))"
                ),
            ),
        ),
        source=f"{release} {source}",
    )


TORCHTITAN_SEQ_LEN_DIVISIBLE = _seq_len_rule(
    _TORCHTITAN,
    _seq_len_divisor_v02,
    "(tp * 2 * cp)",
    "torchtitan/models/llama3/infra/parallelize.py parallelize_llama (and the other models' parallelize):"
    " training.seq_len % ParallelDims.seq_len_divisor (tp * cp * 2) == 0",
)
TORCHTITAN_03_SEQ_LEN_DIVISIBLE = _seq_len_rule(
    _TORCHTITAN_03,
    _seq_len_divisor_v03,
    "((tp if sequence parallel) * (2 * cp if cp > 1))",
    "torchtitan/trainer.py Trainer.__init__ ('Training sequence length ... must be divisible by'"
    " (tp if parallelism.enable_sequence_parallel else 1) * (2 * cp if cp > 1 else 1))",
)


def _experts_unsplit_without_ep(c: Columns, j: Job) -> BoolArray:
    broken: BoolArray = (j.model.moe is not None) & (c["ep"] == 1) & (c["etp"] != c["tp"])
    return broken


_TORCHTITAN_EXPERTS_WITHOUT_EP = Clause(
    _experts_unsplit_without_ep,
    lambda x, j: (
        f"etp({x.etp}) != tp({x.tp}) with ep(1): without expert parallelism TorchTitan splits the experts over tp"
        " like the rest of the layer"
    ),
)

TORCHTITAN_EXPERT_TENSOR_PARALLEL = Rule(
    name="torchtitan_expert_tensor_parallel",
    axes=("tp", "ep", "etp"),
    clauses=(
        _TORCHTITAN_EXPERTS_WITHOUT_EP,
        Clause(
            lambda c, j: (j.model.moe is not None) & (c["ep"] > 1) & (c["etp"] != 1) & (c["etp"] != c["tp"]),
            lambda x, j: f"etp({x.etp}) must be 1 or tp({x.tp}) with ep({x.ep}) > 1 in TorchTitan v0.2.2",
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/distributed/parallel_dims.py ParallelDims._validate ('Currently we only"
    " support ETP=TP or ETP=1'); expert_tensor_parallel_degree applies with ep > 1 (EP borrows dp_shard * cp, and"
    " tp too when etp = 1)",
)

TORCHTITAN_NO_EXPERT_TENSOR_PARALLEL = Rule(
    name="torchtitan_no_expert_tensor_parallel",
    axes=("tp", "ep", "etp"),
    clauses=(
        _TORCHTITAN_EXPERTS_WITHOUT_EP,
        Clause(
            lambda c, j: (j.model.moe is not None) & (c["ep"] > 1) & (c["etp"] != 1),
            lambda x, j: (
                f"etp({x.etp}) must be 1 with ep({x.ep}) > 1: TorchTitan v0.3.0 has no expert tensor parallelism,"
                " so each expert is whole on its rank"
            ),
        ),
    ),
    source=f"{_TORCHTITAN_03} torchtitan/models/common/moe_sharding.py _routed_experts_sharding_configs: with EP"
    " the routed experts' weights are expert_param_placement_sparse (sharded over ep only, no tp);"
    " torchtitan/config/configs.py ParallelismConfig has no expert_tensor_parallel_degree (EP borrows ranks from"
    " FSDP and TP: efsdp = dp_shard * cp * tp / ep, i.e. etp = 1)",
)


def _moe_runtime(j: Job) -> bool:
    return j.model.moe is not None


def _dispatcher(j: Job) -> MoeDispatcher:
    return j.training.runtime.moe_dispatcher


MEGATRON_15_NO_HYBRIDEP = Rule(
    name="megatron_15_no_hybridep",
    axes=("ep",),
    clauses=(
        Clause(
            lambda c, j: (c["ep"] > 1) & _moe_runtime(j) & (_dispatcher(j) is MoeDispatcher.HYBRIDEP),
            lambda x, j: (
                f"training.runtime.moe_dispatcher hybridep with ep({x.ep}) > 1 needs a Megatron-Core with"
                " moe_flex_dispatcher_backend (core_v0.16 on); this release's flex dispatcher runs DeepEP only"
            ),
        ),
    ),
    source=f"{_MEGATRON} and Megatron-LM b615e731080e (what {_NEMO} pins)"
    " megatron/core/transformer/transformer_config.py: no moe_flex_dispatcher_backend field, the flex dispatcher's"
    " backend is DeepEP through moe_enable_deepep (core_v0.16.1 adds moe_flex_dispatcher_backend deepep | hybridep)",
)

NEMO_25_NO_WINDOW_PATTERN = Rule(
    name="nemo_no_window_pattern",
    axes=("pp",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "pp", j.model.sliding_window_pattern is not None),
            lambda x, j: (
                f"model.sliding_window_pattern({j.model.sliding_window_pattern}): this NeMo's Megatron-Core has"
                " window_size but no window_attn_skip_freq, so every layer would attend through the window; use"
                " NeMo 2.7.3"
            ),
        ),
    ),
    source="Megatron-LM b615e731080e (what NeMo main 8cfedd720346 pins) megatron/core/transformer/"
    "transformer_config.py: window_size, no window_attn_skip_freq, and nothing under megatron/core reads one (NeMo's"
    " GPTOSSConfig declares window_attn_skip_freq = 2 in nemo/collections/llm/gpt/model/gpt_oss.py); Megatron-LM"
    " core_v0.15.0 and megatron-core 0.16.1 have both (megatron/core/transformer/utils.py is_layer_window_attention)",
)

TORCHTITAN_MOE_DISPATCH = Rule(
    name="torchtitan_moe_dispatch",
    axes=("ep",),
    clauses=(
        Clause(
            lambda c, j: (c["ep"] > 1) & _moe_runtime(j) & (_dispatcher(j) is not MoeDispatcher.ALLTOALL),
            lambda x, j: (
                f"training.runtime.moe_dispatcher {_dispatcher(j).value} with ep({x.ep}) > 1: the"
                " TorchTitan launch runs its all-to-all dispatch (moe_dispatcher alltoall)"
            ),
        ),
        Clause(
            lambda c, j: (c["ep"] > 1) & _moe_runtime(j) & j.training.runtime.moe_a2a_overlap,
            lambda x, j: (
                f"training.runtime.moe_a2a_overlap with ep({x.ep}) > 1: TorchTitan has no all-to-all overlap across"
                " micro-batches"
            ),
        ),
    ),
    source=f"{_TORCHTITAN_03} torchtitan/config/configs.py ParallelismConfig and {_TORCHTITAN}"
    " torchtitan/config/job_config.py Parallelism: no schedule that pairs one micro-batch's forward with another's"
    " backward; v0.3.0 has no expert-parallel communication backend, and v0.2.2's expert_parallel_comm_backend"
    " deepep (DeepEP's kernels, not HybridEP) is not what the planner launches (a launch limit, not TorchTitan's)",
)


def _hybrid(j: Job) -> bool:
    return j.model.hybrid_pattern is not None


_OLD_MAMBA_STACK = (
    f"Megatron-LM core_v0.15.0 and core_v0.16.1, and b615e731080e (what {_NEMO} pins; {_NEMO_27} runs megatron-core"
    f" 0.16.1's): {_MAMBA_STACK}"
)

HYBRID_NO_INTERLEAVING = Rule(
    name="hybrid_no_interleaving",
    axes=("vp",),
    clauses=(
        Clause(
            lambda c, j: (c["vp"] > 1) & _hybrid(j),
            lambda x, j: (
                f"vp({x.vp}) > 1 with model.hybrid_pattern: this release's hybrid stack (Megatron-Core MambaStack)"
                " has no interleaved pipeline; use vp = 1"
            ),
        ),
    ),
    source=f"{_OLD_MAMBA_STACK}._select_layers_for_pipeline_parallel ('The Mamba hybrid model does not currently"
    " support virtual/interleaved pipeline parallelism'); NeMo 8cfedd7 and 2.7.3 nemo/collections/llm/gpt/model/"
    "ssm.py SSMConfig.configure_model asserts the same. core_v0.19.0 interleaves a hybrid model through '|'"
    " segments of --hybrid-layer-pattern (megatron/core/models/hybrid/hybrid_layer_allocation.py"
    " select_pipeline_segment; megatron/training/arguments.py validate_args derives vp from them)",
)


def _uneven_default_split(c: Columns, j: Job) -> BoolArray:
    """Where a hybrid model's default split (the embedding/loss counted where the columns say) is not even."""
    first, middle, last = split_stage_layers(j.model.num_layers, c["pp"], c[EMBEDDING_IN_SPLIT], c[LOSS_IN_SPLIT])
    even = (first == last) & ((c["pp"] <= 2) | (middle == first))
    broken: BoolArray = (c["pp"] > 1) & _hybrid(j) & ~even
    return broken


def _uneven_message(x: Layout, j: Job) -> str:
    stages = list(stages_of(x, j.model.num_layers))
    return (
        f"layers per stage {stages} with model.hybrid_pattern: this release's hybrid stack gives every stage"
        f" num_layers // pp layers, so the stages must be equal (num_layers({j.model.num_layers}) % pp({x.pp}) = 0,"
        " the embedding and the loss not counted)"
    )


def _even_split_breaks(stages: Sequence[int], j: Job) -> bool:
    return _hybrid(j) and len(set(stages)) > 1


HYBRID_EVEN_STAGES = Rule(
    name="hybrid_even_stages",
    axes=("pp", EMBEDDING_IN_SPLIT, LOSS_IN_SPLIT),
    clauses=(Clause(_uneven_default_split, _uneven_message, default_split_only=True),),
    split_clauses=(
        SplitClause(
            _even_split_breaks,
            lambda s, j: (
                f"layers_per_stage {list(s)} with model.hybrid_pattern: this release's hybrid stack gives every"
                " stage num_layers // pp layers, so the stages must be equal"
            ),
        ),
    ),
    source="Megatron-LM core_v0.15.0 and b615e731080e (what NeMo 8cfedd7 pins)"
    f" {_MAMBA_STACK}._select_layers_for_pipeline_parallel: each rank takes layers [rank * num_layers // pp, ...)"
    " of the pattern, whatever --decoder-first/last-pipeline-num-layers or account_for_embedding/loss_in_pipeline_"
    "split say (core_v0.16.1 reads the first/last counts, which is how the launches write any split)",
)

HYBRID_NO_FULL_RECOMPUTE = Rule(
    name="hybrid_no_full_recompute",
    axes=("recompute",),
    clauses=(
        Clause(
            lambda c, j: (c["recompute"] == 2) & _hybrid(j),
            lambda x, j: (
                "recompute(full) with model.hybrid_pattern: this release's hybrid stack (Megatron-Core MambaStack)"
                " runs its layers without activation checkpointing, so every activation would be kept; use none"
                " or selective"
            ),
        ),
    ),
    source=f"{_OLD_MAMBA_STACK}.forward: a plain loop over the layers, no recompute_granularity 'full' branch"
    " (TransformerBlock's _checkpointed_forward); core_v0.19.0 megatron/core/models/hybrid/hybrid_block.py"
    " HybridStack.forward checkpoints through megatron/core/recompute.py checkpointed_forward (uniform and block)",
)


MEGATRON_MAMBA_CONV = 4
"""Megatron-Core's Mamba convolution width: MambaMixer's d_conv=4, which no layer spec or config field changes."""


def _conv_kernel(j: Job) -> int:
    return j.model.mamba.conv_kernel if j.model.mamba is not None else MEGATRON_MAMBA_CONV


def _hybrid_features_rule(release: str, *, moe_layers: bool, offload: bool) -> Rule:
    """What Megatron-Core's hybrid model lacks at a release, on the model and the training (no layout changes
    it): one rule, its clauses chosen per release. `moe_layers`: the pattern may hold E layers; `offload`: the
    release would offload activations otherwise (core_v0.15.0 has no flag for it: rule
    megatron_no_activation_offload already refuses it)."""
    clauses = [
        Clause(
            lambda c, j: every_layout(c, "pp", _hybrid(j) and _conv_kernel(j) != MEGATRON_MAMBA_CONV),
            lambda x, j: (
                f"model.mamba.conv_kernel({_conv_kernel(j)}): Megatron-Core's MambaMixer convolves over"
                f" {MEGATRON_MAMBA_CONV} positions (d_conv, no config field); use {MEGATRON_MAMBA_CONV}"
            ),
        ),
        Clause(
            lambda c, j: every_layout(
                c, "pp", _hybrid(j) and j.model.moe is not None and j.training.runtime.moe_a2a_overlap
            ),
            lambda x, j: (
                "training.runtime.moe_a2a_overlap with model.hybrid_pattern: the combined 1F1B schedule builds its"
                " plan from GPTModel.build_schedule_plan, which Megatron-Core's hybrid model lacks; use false"
            ),
        ),
    ]
    if offload:
        clauses.append(
            Clause(
                lambda c, j: every_layout(c, "pp", _hybrid(j) and j.training.activation_offload_layers > 0),
                lambda x, j: (
                    f"training.activation_offload_layers({j.training.activation_offload_layers}) > 0 with"
                    " model.hybrid_pattern: Megatron-Core's hybrid stack enters no CPU-offload context"
                    " (TransformerBlock's), so nothing would be offloaded; use 0"
                ),
            )
        )
    if not moe_layers:
        clauses.append(
            Clause(
                lambda c, j: every_layout(
                    c, "pp", j.model.hybrid_pattern is not None and "E" in j.model.hybrid_pattern
                ),
                lambda x, j: (
                    f"model.hybrid_pattern has {j.model.num_moe_layers} MoE layers (E): this release's hybrid layer"
                    " allocation knows only M, * and - (Symbols.VALID); use a release with megatron-core 0.16 or"
                    " later"
                ),
            )
        )
    return Rule(
        name="megatron_hybrid_features",
        axes=("pp",),
        clauses=tuple(clauses),
        source=f"{release}: megatron/core/ssm/mamba_mixer.py MambaMixer.__init__ (d_conv=4; no layer spec passes"
        " another), megatron/core/pipeline_parallel/combined_1f1b.py (core_v0.15.0, core_v0.16.1: 'only GPTModel is"
        " supported for EP A2A overlapping'; core_v0.19.0 looks up build_schedule_plan, which"
        " megatron/core/models/hybrid/hybrid_model.py HybridModel lacks, and pretrain_hybrid.py's forward_step has"
        " no return_schedule_plan), megatron/core/transformer/transformer_block.py (the CPU-offload context is"
        f" TransformerBlock's; {_MAMBA_STACK} and core_v0.19.0 HybridStack enter none), and"
        " megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols.VALID (core_v0.15.0 and b615e731080e: M, *"
        " and -; core_v0.16.1 adds E)",
    )


MEGATRON_HYBRID_FEATURES = _hybrid_features_rule(
    f"{_MEGATRON_16} and core_v0.19.0 (core_v0.19.2 taken to keep it), {_NEMO_27} (megatron-core 0.16.1)",
    moe_layers=True,
    offload=True,
)
MEGATRON_15_HYBRID_FEATURES = _hybrid_features_rule(_MEGATRON, moe_layers=False, offload=False)
NEMO_25_HYBRID_FEATURES = _hybrid_features_rule(f"{_NEMO} (Megatron-LM b615e731080e)", moe_layers=False, offload=True)

TORCHTITAN_NO_HYBRID = Rule(
    name="torchtitan_no_hybrid",
    axes=("pp",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "pp", _hybrid(j)),
            lambda x, j: (
                "model.hybrid_pattern: TorchTitan has no Mamba-2 layers (nor a per-layer hybrid stack), so it cannot"
                " train a hybrid model; plan it for Megatron-LM or NeMo"
            ),
        ),
    ),
    source=f"{_TORCHTITAN} torchtitan/models/__init__.py and its model folders (deepseek_v3, flux, gpt_oss, llama3,"
    " llama3_ft, llama4, moe, qwen3: no file under torchtitan/ names Mamba or an SSM) and"
    f" {_TORCHTITAN_03} (torchtitan-0.3.0 wheel sha256 5563ccf9a295: models common, deepseek_v3, flux, gpt_oss,"
    " kimi_k2_7, llama3, muse_glimmer, qwen3, qwen3_5, none with a Mamba mixer); the launches name a model's"
    " registered flavor (planner/launch/torchtitan.py, torchtitan_v03.py)",
)

_MAMBA_STACK_RULES = (HYBRID_NO_INTERLEAVING, HYBRID_NO_FULL_RECOMPUTE)
"""What Megatron-Core's MambaStack (up to core_v0.16) refuses or ignores of a hybrid model's layout."""
_MEGATRON_15_RULES = (
    MEGATRON_FSDP_NEEDS_NO_PP,
    MEGATRON_15_NO_HYBRIDEP,
    QUERY_GROUPS_SPLIT,
    MOE_FP16_NO_EXPERT_PARALLEL,
    MEGATRON_GRADIENT_LAYOUT,
    FP8_PARAM_GATHER_NEEDS_DISTRIBUTED_OPTIMIZER,
    MEGATRON_15_NO_ACTIVATION_OFFLOAD,
    PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
    *_MAMBA_STACK_RULES,
    HYBRID_EVEN_STAGES,
    MEGATRON_15_HYBRID_FEATURES,
)
_MEGATRON_16_RULES = (
    MEGATRON_FSDP_NEEDS_NO_PP,
    MEGATRON_GRADIENT_LAYOUT,
    FP8_PARAM_GATHER_NEEDS_DISTRIBUTED_OPTIMIZER,
    PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
    *_MAMBA_STACK_RULES,
    MEGATRON_HYBRID_FEATURES,
)
_MEGATRON_19_RULES = (
    MEGATRON_FSDP_NEEDS_NO_PP,
    MEGATRON_GRADIENT_LAYOUT,
    FP8_PARAM_GATHER_NEEDS_DISTRIBUTED_OPTIMIZER,
    PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
    MEGATRON_HYBRID_FEATURES,
)
_TORCHTITAN_RULES = (
    TORCHTITAN_DDP_ONE_DIMENSIONAL,
    TORCHTITAN_FLEX_ATTENTION_NO_CP,
    TORCHTITAN_SPLIT_BY_TRANSFORMER_LAYERS,
    TORCHTITAN_SEQ_LEN_DIVISIBLE,
    TORCHTITAN_GRADIENT_LAYOUT,
    TORCHTITAN_FP8,
    TORCHTITAN_NO_ACTIVATION_OFFLOAD,
    TORCHTITAN_NO_BLOCK_RECOMPUTE,
    TORCHTITAN_NO_RECOMPUTE_MODULES,
    TORCHTITAN_ADAM_MOMENTS,
    TORCHTITAN_EXPERT_TENSOR_PARALLEL,
    TORCHTITAN_MOE_DISPATCH,
    TORCHTITAN_NO_HYBRID,
)
_TORCHTITAN_03_RULES = (
    TORCHTITAN_NO_EXPERT_TENSOR_PARALLEL,
    TORCHTITAN_03_SEQ_LEN_DIVISIBLE,
    TORCHTITAN_GRADIENT_LAYOUT,
    TORCHTITAN_FP8,
    TORCHTITAN_NO_ACTIVATION_OFFLOAD,
    TORCHTITAN_NO_BLOCK_RECOMPUTE,
    TORCHTITAN_NO_RECOMPUTE_MODULES,
    TORCHTITAN_ADAM_MOMENTS,
    TORCHTITAN_MOE_DISPATCH,
    TORCHTITAN_NO_HYBRID,
)

VERSIONS: dict[str, dict[str, tuple[str, tuple[Rule, ...]]]] = {
    "core": {"planner": ("planner", ())},
    "megatron": {
        "core_v0.19.2": (_MEGATRON_19, _MEGATRON_19_RULES),
        "core_v0.16.1": (_MEGATRON_16, _MEGATRON_16_RULES),
        "core_v0.15.0": (_MEGATRON, _MEGATRON_15_RULES),
    },
    "nemo": {
        "2.7.3": (
            _NEMO_27,
            (
                MEGATRON_FSDP_NEEDS_NO_PP,
                MEGATRON_GRADIENT_LAYOUT,
                PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
                *_MAMBA_STACK_RULES,
                MEGATRON_HYBRID_FEATURES,
            ),
        ),
        "2.5.0rc0+8cfedd7": (
            _NEMO,
            (
                MEGATRON_FSDP_NEEDS_NO_PP,
                MEGATRON_15_NO_HYBRIDEP,
                NEMO_25_NO_WINDOW_PATTERN,
                QUERY_GROUPS_SPLIT,
                MEGATRON_GRADIENT_LAYOUT,
                PRECISION_AWARE_OPTIMIZER_NEEDS_DISTRIBUTED_OPTIMIZER,
                *_MAMBA_STACK_RULES,
                HYBRID_EVEN_STAGES,
                NEMO_25_HYBRID_FEATURES,
            ),
        ),
    },
    "torchtitan": {"0.3.0": (_TORCHTITAN_03, _TORCHTITAN_03_RULES), "0.2.2": (_TORCHTITAN, _TORCHTITAN_RULES)},
}
"""Per framework, the releases targeted (newest first; the first is the default): release id -> (what it is,
the rules it adds to the core). Megatron-LM core_v0.16 dropped validate_args' fp16 expert-parallel and
grouped-GEMM checks and let num_query_groups divide tp; Megatron-FSDP still needs pp = 1 in core_v0.19.2.
NeMo trains through Megatron-Core (FSDP adapter and TransformerConfig at the Megatron-LM commit its manifest
pins; NeMo 2.7.3: megatron-core 0.16.1, which its Python 3.11 install resolves the unversioned requirement to)
but not through Megatron-LM's `validate_args`, so it does not inherit the fp16 check; with megatron-core 0.16.1
NeMo 2.7.3 drops query_groups_split as Megatron-LM core_v0.16 does. TorchTitan 0.3.0
(the registry's newest) configures a job in Python (`--module M --config FN`); it dropped plain DDP (so
ddp_one_dimensional), needs flex attention for CP instead of refusing it (flex_attention_no_cp), spells any
stage split on the CLI (so torchtitan_split_by_transformer_layers: Megatron's embedding/loss-in-split is
first/last_stage_less_layers = 1), lost expert tensor parallelism (torchtitan_no_expert_tensor_parallel) and
moved the sequence-length divisor (torchtitan_seq_len_divisible, one rule per release's divisor). The gradient
layout (`TrainingSpec.gradient_layout`) is each framework's own: Megatron-LM and NeMo refuse PyTorch FSDP's
(megatron_gradient_layout), TorchTitan refuses Megatron's under 16-bit reduction (torchtitan_gradient_layout; under
fp32 reduction the two hold and move the same bytes). FP8 weight storage (`TrainingSpec.fp8_param_gather`) needs
Megatron-LM's distributed optimizer (fp8_param_gather_needs_distributed_optimizer; NeMo's own path to it was not
read, so NeMo does not list it); TorchTitan refuses it and any recipe but its float8 tensorwise (torchtitan_fp8).
bf16 Adam moments (`TrainingSpec.adam_moments`) are Megatron-Core's precision-aware optimizer, which its
OptimizerConfig refuses without the distributed optimizer (precision_aware_optimizer_needs_distributed_optimizer,
for NeMo too: the check is Megatron-Core's own); TorchTitan has no such optimizer (torchtitan_adam_moments).
The flex dispatcher's HybridEP backend needs core_v0.16's moe_flex_dispatcher_backend (megatron_15_no_hybridep, for
the NeMo commit on Megatron-LM b615e731 too); the TorchTitan launch runs the plain all-to-all without the MoE
overlap (torchtitan_moe_dispatch). Activation offloading (`TrainingSpec.activation_offload_layers`) is
Megatron-Core's: the core rule activation_offload states its limits, Megatron-LM core_v0.15.0 has no flag for it and
TorchTitan none at all (the two *_no_activation_offload rules); NeMo sets the TransformerConfig fields directly.
Hybrid models (`ModelSpec.hybrid_pattern`) train on Megatron-Core's Mamba stack: up to core_v0.16 (Megatron-LM
core_v0.15.0 and core_v0.16.1, both NeMo releases) its MambaStack refuses interleaving and has no full recompute
(hybrid_no_interleaving, hybrid_no_full_recompute); core_v0.15.0's and Megatron-LM b615e731's also split only
evenly and know no MoE layers (hybrid_even_stages, megatron_hybrid_features); the launches write any split as
layer counts, never as the embedding/loss counted in it, which no hybrid stack reads. Every release convolves over
4 positions, offloads no hybrid activations and overlaps no MoE all-to-all in a hybrid model
(megatron_hybrid_features). core_v0.19's HybridStack interleaves (through '|' segments of the pattern) and
recomputes. TorchTitan has no Mamba layers (torchtitan_no_hybrid)."""

FRAMEWORK_RULES: dict[str, tuple[Rule, ...]] = {name: next(iter(v.values()))[1] for name, v in VERSIONS.items()}
"""Rules each framework's default (newest targeted) release adds to the core."""

RULE_SETS: dict[str, RuleSet] = {
    name: RuleSet(name, next(iter(v)), CORE_RULES + FRAMEWORK_RULES[name]) for name, v in VERSIONS.items()
}
"""The default rule set of each framework."""


def default_version(framework: str | Framework) -> str:
    """The newest release targeted for `framework`."""
    return next(iter(VERSIONS[framework]))


def rule_set(framework: str | Framework = Framework.CORE, version: str | None = None) -> RuleSet:
    """The rule set of `framework` ('core', 'megatron', 'nemo', 'torchtitan') at `version` (default: the newest
    targeted). Raises ValueError naming the versions accepted."""
    if framework not in VERSIONS:
        raise ValueError(f"unknown framework {framework!r}; known: {', '.join(VERSIONS)}")
    releases = VERSIONS[framework]
    if version is None:
        return RULE_SETS[framework]
    if version not in releases:
        raise ValueError(f"unknown {framework} version {version!r}; accepted: {', '.join(releases)}")
    return RuleSet(str(framework), version, CORE_RULES + releases[version][1])


def version_description(framework: str | Framework, version: str) -> str:
    """What a release id names (e.g. 'Megatron-LM core_v0.19.2')."""
    return VERSIONS[framework][version][0]


CORE = RULE_SETS["core"]
