"""Independent checks of a stage partition, without the solver: rules, memory, and its slowest stage."""

from __future__ import annotations

from collections.abc import Sequence

from planner.constraints.costs import FIRST, LAST, MIDDLE, StageCosts, StageKind

__all__ = ["partition_problems", "slowest_stage_s"]


def _kind(i: int, pp: int) -> StageKind:
    return FIRST if i == 0 else LAST if i == pp - 1 else MIDDLE


def partition_problems(stages: Sequence[int], num_layers: int, pp: int, vp: int, costs: StageCosts) -> list[str]:
    """Every rule the partition breaks; empty when it is valid and fits."""
    problems = []
    if len(stages) != pp:
        problems.append(f"{len(stages)} stages != pp({pp})")
    if sum(stages) != num_layers:
        problems.append(f"sum {sum(stages)} != num_layers({num_layers})")
    if any(n < vp or n % vp for n in stages):
        problems.append(f"every stage must hold a positive multiple of vp({vp}) layers: {list(stages)}")
    if len(set(stages[1:-1])) > 1:
        problems.append(f"middle stages differ: {list(stages)}")
    for i, n in enumerate(stages):
        need = costs.stage_memory_bytes(_kind(i, len(stages)), n)
        if need > costs.capacity_bytes:
            problems.append(f"stage {i}: {need / 2**30:.1f} GiB > capacity {costs.capacity_bytes / 2**30:.1f} GiB")
    return problems


def slowest_stage_s(stages: Sequence[int], costs: StageCosts) -> float:
    """Seconds of the slowest stage per micro-batch under `costs`."""
    return max(costs.stage_time_s(_kind(i, len(stages)), n) for i, n in enumerate(stages))
