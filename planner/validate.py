"""The rules a layout must satisfy, each named, each message showing the arithmetic."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from planner.layout import Layout
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["RULES", "Violation", "layout_violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str


Check = Callable[[Layout, ModelSpec, TrainingSpec, int], Iterator[str]]


def _positive(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    for name in ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch_size"):
        value = getattr(x, name)
        if value < 1:
            yield f"{name}({value}) must be >= 1"
    if x.zero_stage not in (0, 1, 2, 3):
        yield f"zero_stage({x.zero_stage}) must be 0, 1, 2 or 3"


def _world_size(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    if x.world_size != num_gpus:
        yield f"tp({x.tp}) * pp({x.pp}) * dp({x.dp}) * cp({x.cp}) = {x.world_size} != num_gpus({num_gpus})"


def _tensor_split(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    a, g = model.num_attention_heads, model.num_query_groups
    if a % x.tp:
        yield f"num_attention_heads({a}) % tp({x.tp}) = {a % x.tp}, must be 0"
    if g % x.tp and x.tp % g:
        yield f"num_query_groups({g}) must be a multiple or a divisor of tp({x.tp})"
    widths = [("ffn_hidden_size", model.ffn_hidden_size)]
    if model.moe is not None:
        widths.append(("moe.expert_ffn_hidden_size", model.moe.expert_ffn_hidden_size))
    for name, width in widths:
        if width % x.tp:
            yield f"{name}({width}) % tp({x.tp}) = {width % x.tp}, must be 0"


def _batch(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    per_step = x.micro_batch_size * x.dp
    if train.global_batch_size % per_step:
        yield (
            f"global_batch_size({train.global_batch_size}) % (micro_batch_size({x.micro_batch_size})"
            f" * dp({x.dp})) = {train.global_batch_size % per_step}, must be 0"
        )


def _context(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    if x.cp > 1 and model.seq_length % (2 * x.cp):
        yield f"seq_length({model.seq_length}) % (2 * cp({x.cp})) = {model.seq_length % (2 * x.cp)}, must be 0"


def _experts(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    if x.ep == 1:
        return
    if model.moe is None:
        yield f"ep({x.ep}) > 1 needs a mixture-of-experts model"
        return
    if (x.dp * x.cp) % x.ep:
        yield f"(dp({x.dp}) * cp({x.cp})) % ep({x.ep}) = {(x.dp * x.cp) % x.ep}, must be 0"
    if model.moe.num_experts % x.ep:
        yield f"moe.num_experts({model.moe.num_experts}) % ep({x.ep}) = {model.moe.num_experts % x.ep}, must be 0"


def _stages(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    n = model.num_layers
    if x.vp > 1 and x.pp == 1:
        yield f"vp({x.vp}) > 1 needs pp > 1"
    if x.pp > n:
        yield f"pp({x.pp}) > num_layers({n})"
    if x.layers_per_stage is None:
        if x.vp > 1 and n % (x.pp * x.vp):
            yield f"num_layers({n}) % (pp({x.pp}) * vp({x.vp})) = {n % (x.pp * x.vp)}, must be 0 to interleave"
        return
    stages = x.layers_per_stage
    if len(stages) != x.pp:
        yield f"len(layers_per_stage)({len(stages)}) != pp({x.pp})"
    if sum(stages) != n:
        yield f"sum(layers_per_stage)({sum(stages)}) != num_layers({n})"
    if any(k < 1 for k in stages):
        yield f"every stage needs at least one layer; got {list(stages)}"
    if len(set(stages[1:-1])) > 1:
        yield f"middle stages must hold equal layer counts (Megatron sets only first and last); got {list(stages)}"
    if x.vp > 1 and any(k % x.vp for k in stages):
        yield f"every stage's layer count must be a multiple of vp({x.vp}); got {list(stages)}"


def _interleave(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    if x.vp == 1 or x.pp == 1:
        return
    m = x.num_microbatches(train.global_batch_size)
    if m % x.pp:
        yield f"interleaving needs num_microbatches({m}) % pp({x.pp}) = 0, got {m % x.pp} (Megatron-LM schedule)"


def _sequence_parallel(x: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> Iterator[str]:
    if x.sequence_parallel and x.tp == 1:
        yield "sequence_parallel needs tp > 1"


RULES: dict[str, Check] = {
    "positive_sizes": _positive,
    "world_size": _world_size,
    "tensor_split": _tensor_split,
    "batch_divisible": _batch,
    "context_split": _context,
    "expert_split": _experts,
    "stage_split": _stages,
    "interleave_microbatches": _interleave,
    "sequence_parallel_needs_tp": _sequence_parallel,
}


def layout_violations(layout: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int) -> list[Violation]:
    """Every rule the layout breaks (memory excluded: that needs the cost model)."""
    if any(getattr(layout, k) < 1 for k in ("tp", "pp", "dp", "cp", "ep", "vp", "micro_batch_size")):
        return [Violation("positive_sizes", m) for m in _positive(layout, model, train, num_gpus)]
    return [
        Violation(rule, message) for rule, check in RULES.items() for message in check(layout, model, train, num_gpus)
    ]
