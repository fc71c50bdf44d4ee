"""The core layout rules: the divisibility every framework the planner targets needs (the default set).

Each rule is defined here once, with its clauses in the order its messages are
reported and a source. Messages are part of the API (`violations`), word for word.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.costmodel.candidates import BoolArray, default_stage_layers, stages_of
from planner.costmodel.recompute import missing_module
from planner.layout import Layout
from planner.rules.rule import (
    EMBEDDING_IN_SPLIT,
    LOSS_IN_SPLIT,
    Clause,
    Columns,
    Job,
    Rule,
    StageClause,
    every_layout,
)
from planner.specs import Fp8Recipe, Precision, RecomputeModule

__all__ = [
    "ACTIVATION_OFFLOAD",
    "RECOMPUTE_MODULES",
    "BATCH_DIVISIBLE",
    "CONTEXT_SPLIT",
    "CORE_RULES",
    "EXPERT_SPLIT",
    "HYBRID_CONTEXT_PARALLEL",
    "INTERLEAVE_MICROBATCHES",
    "MAMBA_FP8_WIDTH",
    "MAMBA_SPLIT",
    "MOE_A2A_OVERLAP",
    "POSITIVE_SIZES",
    "SEQUENCE_PARALLEL_NEEDS_TP",
    "SIZE_AXES",
    "STAGE_SPLIT",
    "TENSOR_SPLIT",
    "WORLD_SIZE",
    "ZERO_STAGES",
    "chunks_uneven",
    "counted_stages",
    "interleave_breaks",
    "interleave_problem",
    "rank_chunks",
]

SIZE_AXES = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "micro_batch_size")
"""Axes that are group sizes or counts, so at least 1."""
ZERO_STAGES = (0, 1, 2, 3)


def _at_least_one(axis: str) -> Clause:
    return Clause(lambda c, j: c[axis] < 1, lambda x, j: f"{axis}({getattr(x, axis)}) must be >= 1")


POSITIVE_SIZES = Rule(
    name="positive_sizes",
    axes=(*SIZE_AXES, "zero_stage"),
    clauses=(
        *(_at_least_one(axis) for axis in SIZE_AXES if axis != "etp"),
        Clause(  # etp defaults to tp: a bad tp is reported once, as tp's
            lambda c, j: (c["etp"] < 1) & (c["etp"] != c["tp"]),
            lambda x, j: f"etp({x.etp}) must be >= 1",
        ),
        Clause(
            lambda c, j: (c["zero_stage"] < ZERO_STAGES[0]) | (c["zero_stage"] > ZERO_STAGES[-1]),
            lambda x, j: f"zero_stage({x.zero_stage}) must be 0, 1, 2 or 3",
        ),
    ),
    source="Parallel degrees are process-group sizes; ZeRO stages 0-3 are Rajbhandari et al. 2020 (ZeRO) Sec. 5",
)

WORLD_SIZE = Rule(
    name="world_size",
    axes=("tp", "pp", "dp", "cp"),
    clauses=(
        Clause(
            lambda c, j: c["tp"] * c["pp"] * c["dp"] * c["cp"] != j.num_gpus,
            lambda x, j: (
                f"tp({x.tp}) * pp({x.pp}) * dp({x.dp}) * cp({x.cp}) = {x.world_size} != num_gpus({j.num_gpus})"
            ),
        ),
    ),
    source="Narayanan et al. 2021 Sec. 3 (p * t * d = n); Megatron-LM megatron/core/parallel_state.py"
    " initialize_model_parallel (data-parallel size = world / (tp * pp * cp))",
)


def _expert_width(j: Job) -> int:
    """The expert FFN width, or 0 (divisible by anything) for a dense model."""
    return j.model.moe.expert_ffn_hidden_size if j.model.moe is not None else 0


TENSOR_SPLIT = Rule(
    name="tensor_split",
    axes=("tp",),
    clauses=(
        Clause(
            lambda c, j: j.model.num_attention_heads % c["tp"] != 0,
            lambda x, j: (
                f"num_attention_heads({j.model.num_attention_heads}) % tp({x.tp})"
                f" = {j.model.num_attention_heads % x.tp}, must be 0"
            ),
        ),
        Clause(
            lambda c, j: (j.model.num_query_groups % c["tp"] != 0) & (c["tp"] % j.model.num_query_groups != 0),
            lambda x, j: f"num_query_groups({j.model.num_query_groups}) must be a multiple or a divisor of tp({x.tp})",
        ),
        Clause(
            lambda c, j: j.model.ffn_hidden_size % c["tp"] != 0,
            lambda x, j: (
                f"ffn_hidden_size({j.model.ffn_hidden_size}) % tp({x.tp}) = {j.model.ffn_hidden_size % x.tp}, must be 0"
            ),
        ),
    ),
    source="Shoeybi et al. 2019 (Megatron-LM) Sec. 3: attention heads and MLP columns are split over the tensor"
    " ranks; key/value groups are split, or replicated when tp exceeds them",
)


def _mamba_heads(j: Job) -> int:
    """SSM heads of the model's Mamba layers (`ModelSpec.mamba_num_heads`), 0 (divisible by anything) without."""
    return j.model.mamba_num_heads


def _mamba_groups(j: Job) -> int:
    """B/C groups of the model's Mamba layers, 0 (divisible by anything) without."""
    return j.model.mamba.num_groups if j.model.mamba is not None else 0


def _mamba_heads_text(j: Job) -> str:
    """`mamba.num_heads(H)`, with the derivation when the spec leaves it to Megatron-Core's expand 2."""
    mamba = j.model.mamba
    if mamba is None or mamba.num_heads is not None:
        return f"mamba.num_heads({_mamba_heads(j)})"
    return (
        f"mamba.num_heads({_mamba_heads(j)} = 2 * hidden_size({j.model.hidden_size}) / mamba.head_dim"
        f"({mamba.head_dim}))"
    )


_MAMBA_MIXER = "megatron/core/ssm/mamba_mixer.py MambaMixer.__init__"

MAMBA_SPLIT = Rule(
    name="mamba_split",
    axes=("tp",),
    clauses=(
        Clause(
            lambda c, j: _mamba_heads(j) % c["tp"] != 0,
            lambda x, j: f"{_mamba_heads_text(j)} % tp({x.tp}) = {_mamba_heads(j) % x.tp}, must be 0",
        ),
        Clause(
            lambda c, j: _mamba_groups(j) % c["tp"] != 0,
            lambda x, j: f"mamba.num_groups({_mamba_groups(j)}) % tp({x.tp}) = {_mamba_groups(j) % x.tp}, must be 0",
        ),
    ),
    source="Megatron-LM core_v0.15.0, core_v0.16.1 and core_v0.19.0 (and main at d98e8a64)"
    f" {_MAMBA_MIXER}: 'nheads must be evenly divisble by tp_size' and 'ngroups must be evenly divisible by"
    " tp_size' (each tensor rank holds whole SSM heads and whole B/C groups; d_inner = nheads * headdim then"
    " splits too). The hybrid pattern's attention and MLP layers keep tensor_split's rules",
)

BATCH_DIVISIBLE = Rule(
    name="batch_divisible",
    axes=("dp", "micro_batch_size"),
    clauses=(
        Clause(
            lambda c, j: j.training.global_batch_size % (c["micro_batch_size"] * c["dp"]) != 0,
            lambda x, j: (
                f"global_batch_size({j.training.global_batch_size}) % (micro_batch_size({x.micro_batch_size})"
                f" * dp({x.dp})) = {j.training.global_batch_size % (x.micro_batch_size * x.dp)}, must be 0"
            ),
        ),
    ),
    source="Megatron-LM megatron/core/num_microbatches_calculator.py (global batch % (micro_batch_size *"
    " data_parallel_size) == 0)",
)

CONTEXT_SPLIT = Rule(
    name="context_split",
    axes=("cp",),
    clauses=(
        Clause(
            lambda c, j: (c["cp"] > 1) & (j.model.seq_length % (2 * c["cp"]) != 0),
            lambda x, j: (
                f"seq_length({j.model.seq_length}) % (2 * cp({x.cp})) = {j.model.seq_length % (2 * x.cp)}, must be 0"
            ),
        ),
    ),
    source="Megatron-LM megatron/core/utils.py get_batch_on_this_cp_rank: the sequence is cut into 2 * cp chunks"
    " (load-balanced causal context parallelism)",
)


def _has_mamba(j: Job) -> bool:
    return j.model.num_mamba_layers > 0


HYBRID_CONTEXT_PARALLEL = Rule(
    name="hybrid_context_parallel",
    axes=("cp",),
    clauses=(
        Clause(
            lambda c, j: (c["cp"] > 1) & _has_mamba(j),
            lambda x, j: (
                f"cp({x.cp}) > 1 with Mamba layers (model.hybrid_pattern has {j.model.num_mamba_layers} M): this"
                " planner does not price context parallelism over Mamba layers; use cp = 1"
            ),
        ),
    ),
    source="A modelling limit, not a framework's: Megatron-Core runs a Mamba layer under cp > 1 by all-to-alls"
    " that trade the sequence split for a split of the SSM heads and groups (megatron/core/ssm/"
    "mamba_context_parallel.py MambaContextParallel, core_v0.15.0 on), communication and a head split the cost"
    " model does not price (`costmodel` prices context parallelism over attention layers only)",
)


def _num_experts(j: Job) -> int:
    return j.model.moe.num_experts if j.model.moe is not None else 1


EXPERT_SPLIT = Rule(
    name="expert_split",
    axes=("tp", "dp", "cp", "ep", "etp"),
    clauses=(
        Clause(
            lambda c, j: (c["ep"] > 1) & (j.model.moe is None),
            lambda x, j: f"ep({x.ep}) > 1 needs a mixture-of-experts model",
        ),
        Clause(
            lambda c, j: (c["etp"] != c["tp"]) & (j.model.moe is None),
            lambda x, j: f"etp({x.etp}) != tp({x.tp}) needs a mixture-of-experts model (etp splits the routed experts)",
        ),
        Clause(
            lambda c, j: (j.model.moe is not None) & ((c["tp"] * c["cp"] * c["dp"]) % (c["etp"] * c["ep"]) != 0),
            lambda x, j: (
                f"(tp({x.tp}) * cp({x.cp}) * dp({x.dp})) % (etp({x.etp}) * ep({x.ep}))"
                f" = {(x.tp * x.cp * x.dp) % (x.etp * x.ep)}, must be 0"
            ),
        ),
        Clause(
            lambda c, j: (c["ep"] > 1) & (j.model.moe is not None) & (_num_experts(j) % c["ep"] != 0),
            lambda x, j: f"moe.num_experts({_num_experts(j)}) % ep({x.ep}) = {_num_experts(j) % x.ep}, must be 0",
        ),
        Clause(
            lambda c, j: _expert_width(j) % c["etp"] != 0,
            lambda x, j: (
                f"moe.expert_ffn_hidden_size({_expert_width(j)}) % etp({x.etp}) = {_expert_width(j) % x.etp}, must be 0"
            ),
        ),
    ),
    source="Megatron-LM megatron/training/arguments.py validate_args (num_experts % expert_model_parallel_size);"
    " megatron/core/parallel_state.py initialize_model_parallel at core_v0.16.1 (MoE parallel folding: the expert"
    " grid is etp x ep x expert-dp x pp over the same ranks, etp defaulting to tp, and world_size % (etp * ep *"
    " pp) == 0); the expert FFN is split over etp (megatron/core/transformer/moe/experts.py, TEGroupedMLP)",
)


def _middle_differ(stages: Sequence[int], num_layers: int, pp: int, vp: int, in_split: tuple[int, int]) -> bool:
    return len(set(stages[1:-1])) > 1


def counted_stages(stages: Sequence[int], in_split: tuple[int, int]) -> list[int]:
    """The pipeline layers Megatron-Core counts per stage: the embedding on the first, the loss on the last.

    Source: megatron-core 0.16 megatron/core/transformer/transformer_block.py get_num_layers_to_build
    (num_layers + 1 for each of account_for_embedding/loss_in_pipeline_split, split evenly).
    """
    counted = list(stages)
    counted[0] += in_split[0]
    counted[-1] += in_split[1]
    return counted


def rank_chunks(stages: Sequence[int], vp: int) -> list[list[int]]:
    """Transformer layers of each pipeline rank's vp model chunks (chunk order), given layers per rank.

    A rank whose count vp divides gets equal chunks (Megatron-LM's `--num-virtual-stages-per-pipeline-rank`
    with `--decoder-first/last-pipeline-num-layers`). Otherwise (an end rank of a pipeline with middle ranks,
    rule `stage_split`) the rank holds vp - 1 chunks of a middle rank's size and one short chunk: the first
    rank's first, beside the embedding, or the last rank's last, beside the loss, possibly empty. That is the
    uneven interleaved split Megatron-Core expresses only as a `pipeline_model_parallel_layout`
    (megatron/core/transformer/pipeline_parallel_layer_layout.py), and the one NVIDIA's DeepSeek-V3 recipes
    write: pp 8 x vp 4 as "Et|(tt|)*30mL" is [7, 8, ..., 8, 6] per rank, whose first rank holds [1, 2, 2, 2]
    and last [2, 2, 2, 0].
    """
    chunks: list[list[int]] = []
    for rank, count in enumerate(stages):
        if count % vp == 0:
            chunks.append([count // vp] * vp)
            continue
        # A middle rank's chunk; without middle ranks (pp <= 2, where rule stage_split needs the embedding or the
        # loss counted for an end rank's count not to be a multiple of vp) the end rank's own chunk, rounded up:
        # 26 layers and the embedding in vp 27 chunks of one are [0, 1, ..., 1].
        size = stages[1] // vp if len(stages) > 2 else -(-count // vp)
        full, rest = [size] * (vp - 1), count - size * (vp - 1)
        chunks.append([rest, *full] if rank == 0 else [*full, rest])
    return chunks


def chunks_uneven(stages: Sequence[int], vp: int) -> bool:
    """Whether a rank's model chunks differ in layers (`rank_chunks`): a split only a pipeline layout spells."""
    return vp > 1 and any(n % vp for n in stages)


def _one_short_chunk(n: Any, middle: Any, vp: Any) -> Any:
    """Whether an end rank of `n` layers is vp equal chunks or vp - 1 chunks of the middle ranks' size and
    one short one (`rank_chunks`): middle - middle / vp <= n <= middle. Broadcasts (ints or columns)."""
    return (n % vp == 0) | ((n >= middle - middle // vp) & (n <= middle))


def _uneven_chunk_problem(stages: Sequence[int], vp: int) -> str | None:
    """Why a split has no model-chunk reading under interleaving (`rank_chunks`), or None: without middle
    ranks every count must be a multiple of vp; with them the middle counts must be, and each end rank's
    must be too or leave one short chunk beside the embedding or the loss (so its chunks are never longer
    than a middle rank's: the bubble and the sends are priced at a middle rank's chunk)."""
    if vp == 1:
        return None
    if len(stages) <= 2:
        if any(n % vp for n in stages):
            return f"every stage's layer count must be a multiple of vp({vp}); got {list(stages)}"
        return None
    middle = stages[1]
    if any(n % vp for n in stages[1:-1]):
        return f"every middle stage's layer count must be a multiple of vp({vp}); got {list(stages)}"
    for rank in (0, len(stages) - 1):
        if not _one_short_chunk(stages[rank], middle, vp):
            return (
                f"stage {rank}'s {stages[rank]} layers are neither a multiple of vp({vp}) nor vp - 1 chunks of"
                f" the middle stages' {middle // vp} and one short chunk ({middle - middle // vp} to {middle}"
                f" layers); got {list(stages)}"
            )
    return None


def _default_split_breaks(c: Columns, j: Job) -> Any:
    """Where the default split (`candidates.default_stage_layers`) cannot interleave: with the embedding or the
    loss counted, or without middle ranks, unless pp x vp divides the pipeline layers; else unless
    `_uneven_chunk_problem` finds nothing (middle counts multiples of vp, ends one short chunk at most)."""
    counted = c[EMBEDDING_IN_SPLIT] + c[LOSS_IN_SPLIT] > 0
    even = _pipeline_layers(c, j) % (c["pp"] * c["vp"]) == 0
    first, middle, last = default_stage_layers(j.model.num_layers, c["pp"])
    vp = np.maximum(c["vp"], 1)
    chunked = (middle % vp == 0) & _one_short_chunk(first, middle, vp) & _one_short_chunk(last, middle, vp)
    legal = np.where(counted | (c["pp"] <= 2), even, chunked)
    return ((c["vp"] > 1) | counted) & ~legal


def _pipeline_layers(c: Columns, j: Job) -> Any:
    """num_layers plus the embedding and the loss where they count in the split (a column)."""
    return j.model.num_layers + c[EMBEDDING_IN_SPLIT] + c[LOSS_IN_SPLIT]


def _pipeline_layers_text(x: Layout, j: Job) -> str:
    text = f"num_layers({j.model.num_layers})"
    if x.account_for_embedding_in_pipeline_split:
        text += " + embedding(1)"
    if x.account_for_loss_in_pipeline_split:
        text += " + loss(1)"
    return text


def _in_split(x: Layout) -> int:
    return int(x.account_for_embedding_in_pipeline_split) + int(x.account_for_loss_in_pipeline_split)


def _split_message(x: Layout, j: Job) -> str:
    if x.vp > 1 and x.pp > 2 and not x.counts_embedding_or_loss:
        return str(_uneven_chunk_problem(stages_of(x, j.model.num_layers), x.vp))
    counted = j.model.num_layers + _in_split(x)
    need = "to interleave" if x.vp > 1 else "with embedding/loss in the split"
    return f"{_pipeline_layers_text(x, j)} % (pp({x.pp}) * vp({x.vp})) = {counted % (x.pp * x.vp)}, must be 0 {need}"


STAGE_SPLIT = Rule(
    name="stage_split",
    axes=("pp", "vp", EMBEDDING_IN_SPLIT, LOSS_IN_SPLIT),
    clauses=(
        Clause(
            lambda c, j: (c["vp"] > 1) & (c["pp"] == 1),
            lambda x, j: f"vp({x.vp}) > 1 needs pp > 1",
        ),
        Clause(
            lambda c, j: c["pp"] > j.model.num_layers,
            lambda x, j: f"pp({x.pp}) > num_layers({j.model.num_layers})",
        ),
        Clause(_default_split_breaks, _split_message, default_split_only=True),
    ),
    stage_clauses=(
        StageClause(
            lambda s, n, pp, vp, a: len(s) != pp,
            lambda s, n, pp, vp, a: f"len(layers_per_stage)({len(s)}) != pp({pp})",
        ),
        StageClause(
            lambda s, n, pp, vp, a: sum(s) != n,
            lambda s, n, pp, vp, a: f"sum(layers_per_stage)({sum(s)}) != num_layers({n})",
        ),
        StageClause(
            lambda s, n, pp, vp, a: any(k < 1 for k in s),
            lambda s, n, pp, vp, a: f"every stage needs at least one layer; got {list(s)}",
        ),
        StageClause(
            _middle_differ,
            lambda s, n, pp, vp, a: (
                f"middle stages must hold equal layer counts (Megatron sets only first and last); got {list(s)}"
            ),
        ),
        StageClause(
            lambda s, n, pp, vp, a: any(a) and vp > 1 and len(s) > 0 and any(k % vp for k in counted_stages(s, a)),
            lambda s, n, pp, vp, a: (
                f"every stage's layer count must be a multiple of vp({vp}); got {counted_stages(s, a)}"
                " (embedding/loss counted)"
            ),
        ),
        StageClause(
            lambda s, n, pp, vp, a: not any(a) and len(s) == pp > 0 and _uneven_chunk_problem(s, vp) is not None,
            lambda s, n, pp, vp, a: str(_uneven_chunk_problem(s, vp)),
        ),
        StageClause(
            lambda s, n, pp, vp, a: any(a) and len(s) > 0 and len(set(counted_stages(s, a))) > 1,
            lambda s, n, pp, vp, a: (
                "with embedding/loss in the pipeline split Megatron-Core splits evenly (no first/last counts);"
                f" got {counted_stages(s, a)} counted"
            ),
        ),
    ),
    source="Narayanan et al. 2021 Sec. 2.2.2 (each of pp * vp chunks holds num_layers / (pp * vp) layers);"
    " megatron-core 0.16 megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__"
    " (uneven first/last: each and the middle per-rank count a multiple of vp; account_for_embedding/loss:"
    " num_layers + 1 each, divisible by pp, per-rank count by vp; not both),"
    " megatron/core/transformer/transformer_block.py get_num_layers_to_build and, for first/last counts vp"
    " does not divide, megatron/core/transformer/pipeline_parallel_layer_layout.py (any decoder layers per"
    " virtual stage, empty stages allowed; Megatron-LM --pipeline-model-parallel-layout, core_v0.13.0 on;"
    " NeMo MegatronStrategy pipeline_model_parallel_layout at 8cfedd7 and 2.7.3): `rank_chunks`",
)


def interleave_breaks(num_microbatches: Any, pp: Any, vp: Any) -> BoolArray:
    """Where Megatron-Core's interleaved schedule refuses the micro-batch count (vp > 1, pp > 1).

    Source: megatron-core 0.16 megatron/core/pipeline_parallel/schedules.py
    forward_backward_pipelining_with_interleaving: with N = microbatch_group_size_per_vp_stage
    (the micro-batches a chunk runs back to back), it raises unless pp <= N <= m, and unless
    m % N is 0 or at least pp. N defaults to pp (megatron/core/model_parallel_config.py
    ModelParallelConfig.__post_init__) and the planner keeps the default, so the rule reads
    m >= pp and m % pp == 0. Arguments are ints or integer arrays that broadcast.
    """
    m, group = np.asarray(num_microbatches), np.asarray(pp)
    remainder = m % group
    schedule_refuses = (group > m) | ((remainder > 0) & (remainder < np.asarray(pp)))
    broken: BoolArray = (np.asarray(vp) > 1) & (np.asarray(pp) > 1) & schedule_refuses
    return broken


def interleave_problem(num_microbatches: int, pp: int, vp: int) -> str | None:
    """Why the interleaved schedule refuses this micro-batch count, or None (the rule of `interleave_breaks`).

    m < pp also leaves a remainder, so one message states both of the schedule's conditions.
    """
    if not interleave_breaks(num_microbatches, pp, vp):
        return None
    return (
        f"interleaving needs num_microbatches({num_microbatches}) % pp({pp}) = 0, got {num_microbatches % pp}"
        " (Megatron-LM schedule)"
    )


def _microbatches(c: Columns, j: Job) -> BoolArray:
    return interleave_breaks(j.training.global_batch_size // (c["micro_batch_size"] * c["dp"]), c["pp"], c["vp"])


def _microbatches_message(x: Layout, j: Job) -> str:
    problem = interleave_problem(x.num_microbatches(j.training.global_batch_size), x.pp, x.vp)
    assert problem is not None
    return problem


INTERLEAVE_MICROBATCHES = Rule(
    name="interleave_microbatches",
    axes=("pp", "vp", "dp", "micro_batch_size"),
    clauses=(Clause(_microbatches, _microbatches_message),),
    source="Narayanan et al. 2021 Sec. 2.2.2 (interleaved 1F1B runs micro-batches in rounds of pp);"
    " megatron-core 0.16 megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving"
    " (pp <= microbatch_group_size_per_vp_stage <= m; m % group is 0 or >= pp; group defaults to pp)",
)

SEQUENCE_PARALLEL_NEEDS_TP = Rule(
    name="sequence_parallel_needs_tp",
    axes=("tp", "sequence_parallel"),
    clauses=(
        Clause(
            lambda c, j: (c["sequence_parallel"] != 0) & (c["tp"] == 1),
            lambda x, j: "sequence_parallel needs tp > 1",
        ),
    ),
    source="Korthikanti et al. 2022 Sec. 4.2.2 (sequence parallelism shards over the tensor-parallel group);"
    " Megatron-LM megatron/training/arguments.py validate_args turns it off when tensor_model_parallel_size == 1",
)


def _offloaded(j: Job) -> int:
    return j.training.activation_offload_layers


ACTIVATION_OFFLOAD = Rule(
    name="activation_offload",
    axes=("pp", "recompute"),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "pp", _offloaded(j) >= j.model.num_layers),
            lambda x, j: (
                f"training.activation_offload_layers({_offloaded(j)}) must be < num_layers({j.model.num_layers})"
            ),
        ),
        Clause(
            lambda c, j: (c["pp"] > 1) & (_offloaded(j) > 0),
            lambda x, j: f"training.activation_offload_layers({_offloaded(j)}) > 0 needs pp = 1; got pp({x.pp})",
        ),
        Clause(
            lambda c, j: (c["recompute"] != 0) & (_offloaded(j) > 0),
            lambda x, j: (
                f"training.activation_offload_layers({_offloaded(j)}) > 0 needs recompute none;"
                f" got recompute({x.recompute.value})"
            ),
        ),
    ),
    source="Megatron-LM core_v0.15.0 to core_v0.19.0 megatron/core/transformer/transformer_config.py"
    " TransformerConfig.__post_init__ ('CPU offloading can be done only for layers less than num_layers', 'no"
    " support for Pipeline parallelism with CPU offloading', 'CPU offloading does not work when activation"
    " recomputation is enabled'); Transformer Engine docs/features/other_optimizations/cpu_offloading/"
    "cpu_offloading.rst (commit d0067d0): the default scheduling assumes all forwards then all backwards and"
    " num_layers at most model_layers - 1, which is what the cost model prices (`costmodel.offload`)",
)


def _named_modules(j: Job) -> tuple[RecomputeModule, ...]:
    """The modules the request names for selective recompute (`RuntimeFeatures.recompute_modules`; none when unset)."""
    return j.training.runtime.recompute_modules or ()


def _absent_module(j: Job) -> str | None:
    """Why the first named module the model lacks cannot be recomputed (`recompute.missing_module`), or None."""
    named = _named_modules(j)
    for module in (m for m in RecomputeModule if m in named):
        if (why := missing_module(j.model, module)) is not None:
            return f"{j.modules_field} names {module.value}, but {why}"
    return None


def _output_discarding_under_delayed_fp8(j: Job) -> bool:
    named = _named_modules(j)
    discarding = RecomputeModule.MOE_ACT in named or RecomputeModule.LAYERNORM in named
    recipe = j.training.fp8_recipe
    return j.training.precision is Precision.FP8 and discarding and recipe in (None, Fp8Recipe.DELAYED)


RECOMPUTE_MODULES = Rule(
    name="recompute_modules",
    axes=("recompute",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "recompute", _absent_module(j) is not None),
            lambda x, j: f"{_absent_module(j)}; name only modules the model has",
        ),
        Clause(
            lambda c, j: (c["recompute"] == 1) & _output_discarding_under_delayed_fp8(j),
            lambda x, j: (
                f"{j.modules_field} with moe_act or layernorm under FP8 needs current or block"
                " scaling: delayed scaling cannot recompute them; set training.fp8_recipe to tensorwise, mxfp8 or"
                " blockwise"
            ),
        ),
    ),
    source="Megatron-LM core_v0.15.0 to core_v0.19.0 megatron/core/transformer/transformer_config.py"
    " TransformerConfig.__post_init__ ('mla_up_proj in recompute_modules is only supported with"
    " multi_latent_attention', 'Delayed scaling does not support moe_act and layernorm recompute for fp8') and"
    " transformer_layer.py (layernorm recompute applies only to a norm that is not an IdentityOp, i.e. not fused into"
    " Transformer Engine's LayerNormLinear; mlp only where the layer's MLP is dense, moe and moe_act only in MoE"
    " layers): a module the model lacks would be accepted and do nothing, so the planner refuses the name",
)


def _a2a_overlap(j: Job) -> bool:
    return j.model.moe is not None and j.training.runtime.moe_a2a_overlap


MOE_A2A_OVERLAP = Rule(
    name="moe_a2a_overlap",
    axes=("ep", "pp", "vp", "recompute"),
    clauses=(
        Clause(
            lambda c, j: (c["ep"] == 1) & _a2a_overlap(j),
            lambda x, j: "training.runtime.moe_a2a_overlap needs ep > 1; got ep(1)",
        ),
        Clause(
            lambda c, j: (c["pp"] > 1) & (c["vp"] == 1) & _a2a_overlap(j),
            lambda x, j: f"training.runtime.moe_a2a_overlap with pp({x.pp}) > 1 needs vp > 1; got vp(1)",
        ),
        Clause(
            lambda c, j: (c["recompute"] == 2) & _a2a_overlap(j),
            lambda x, j: "training.runtime.moe_a2a_overlap needs recompute none or selective; got recompute(full)",
        ),
        Clause(
            lambda c, j: (c["recompute"] == 1) & _a2a_overlap(j) & (RecomputeModule.MOE in _named_modules(j)),
            lambda x, j: (
                "training.runtime.moe_a2a_overlap cannot recompute the whole MoE layer; drop moe from"
                f" {j.modules_field}"
            ),
        ),
        Clause(
            lambda c, j: every_layout(c, "ep", _a2a_overlap(j) and j.model.mtp_num_layers > 1),
            lambda x, j: (
                f"training.runtime.moe_a2a_overlap needs model.mtp_num_layers <= 1; got {j.model.mtp_num_layers}"
            ),
        ),
    ),
    source="Megatron-LM core_v0.15.0 to core_v0.19.2 megatron/core/transformer/transformer_config.py"
    " TransformerConfig.__post_init__ ('overlap_moe_expert_parallel_comm is only supported with expert model"
    " parallelism', 'virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1',"
    " 'disable full recomputation when enabling overlap_moe_expert_parallel_comm', 'MTP supports at most one layer"
    " when enabling overlap_moe_expert_parallel_comm'); core_v0.19.0 also 'disable moe in recompute_modules when"
    " enabling overlap_moe_expert_parallel_comm' (the combined schedule splits the MoE layer into callables a"
    " whole-layer checkpoint would wrap)",
)


def _mamba_in_proj_width(j: Job) -> int:
    """The Mamba input projection's output width, z x B C dt: 2 d_inner + 2 groups state + heads (0 without)."""
    mamba = j.model.mamba
    if mamba is None:
        return 0
    return 2 * j.model.mamba_inner_size + 2 * mamba.num_groups * mamba.state_dim + j.model.mamba_num_heads


def _fp8_width_breaks(j: Job) -> bool:
    return j.training.precision is Precision.FP8 and _mamba_in_proj_width(j) % 16 != 0


def _fp8_width_message(x: Layout, j: Job) -> str:
    m, width = j.model.mamba, _mamba_in_proj_width(j)
    assert m is not None
    return (
        f"mamba in_proj width 2 * d_inner({j.model.mamba_inner_size}) + 2 * num_groups({m.num_groups}) * state_dim"
        f"({m.state_dim}) + num_heads({j.model.mamba_num_heads}) = {width}, must be a multiple of 16 in fp8 training"
    )


MAMBA_FP8_WIDTH = Rule(
    name="mamba_fp8_width",
    axes=("pp",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "pp", _fp8_width_breaks(j)),
            _fp8_width_message,
        ),
    ),
    source=f"Megatron-LM core_v0.15.0, core_v0.16.1 and core_v0.19.0 {_MAMBA_MIXER} (with config.fp8: 'For FP8,"
    " the innermost dimension of the Mamba layer input projection output tensor must be a multiple of 16')",
)


def _bf16_layers(j: Job) -> tuple[int, int]:
    return j.training.bf16_layers_at_start, j.training.bf16_layers_at_end


def _bf16_under_delayed_scaling(j: Job) -> bool:
    """BF16 end layers under FP8 delayed scaling (the recipe Megatron-LM runs when none is named)."""
    fp8 = j.training.precision is Precision.FP8 and j.training.fp8_recipe in (None, Fp8Recipe.DELAYED)
    return fp8 and any(_bf16_layers(j))


BF16_END_LAYERS = Rule(
    name="bf16_end_layers",
    axes=("pp",),
    clauses=(
        Clause(
            lambda c, j: every_layout(c, "pp", _bf16_under_delayed_scaling(j)),
            lambda x, j: (
                f"training.bf16_layers_at_start({_bf16_layers(j)[0]}) / bf16_layers_at_end({_bf16_layers(j)[1]})"
                " keep layers in BF16, which FP8 delayed scaling does not support; set training.fp8_recipe"
                " tensorwise, mxfp8 or blockwise"
            ),
        ),
        Clause(
            lambda c, j: max(_bf16_layers(j)) > j.model.num_layers // c["pp"],
            lambda x, j: (
                f"training.bf16_layers_at_start({_bf16_layers(j)[0]}) and bf16_layers_at_end({_bf16_layers(j)[1]})"
                f" must each be at most num_layers({j.model.num_layers}) // pp({x.pp}) ="
                f" {j.model.num_layers // x.pp}"
            ),
        ),
    ),
    source="Megatron-LM (main of 2026-08, d98e8a64) megatron/core/transformer/transformer_config.py"
    " TransformerConfig.__post_init__ (with fp8: 'Delayed scaling does not support first / last layer in BF16';"
    " num_layers_at_start_in_bf16 and num_layers_at_end_in_bf16 'must be between 0 and number of layers per"
    " pipeline stage', num_layers // pipeline_model_parallel_size)",
)

CORE_RULES = (
    POSITIVE_SIZES,
    WORLD_SIZE,
    TENSOR_SPLIT,
    MAMBA_SPLIT,
    BATCH_DIVISIBLE,
    CONTEXT_SPLIT,
    HYBRID_CONTEXT_PARALLEL,
    EXPERT_SPLIT,
    STAGE_SPLIT,
    INTERLEAVE_MICROBATCHES,
    SEQUENCE_PARALLEL_NEEDS_TP,
    ACTIVATION_OFFLOAD,
    RECOMPUTE_MODULES,
    MOE_A2A_OVERLAP,
    MAMBA_FP8_WIDTH,
    BF16_END_LAYERS,
)
"""Today's rules, in the order their violations are reported."""
