"""Independent checks of a stage partition, without the solver: stage_split's stage rules, memory, slowest stage."""

from __future__ import annotations

from collections.abc import Sequence

from planner.constraints.costs import FIRST, LAST, MIDDLE, StageCosts, StageKind
from planner.rules import STAGE_SPLIT

__all__ = ["partition_problems", "slowest_stage_s"]


def _kind(i: int, pp: int) -> StageKind:
    return FIRST if i == 0 else LAST if i == pp - 1 else MIDDLE


def partition_problems(stages: Sequence[int], num_layers: int, pp: int, vp: int, costs: StageCosts) -> list[str]:
    """Every rule the partition breaks; empty when it is valid and fits."""
    problems = STAGE_SPLIT.stage_problems(stages, num_layers, pp, vp)
    for i, n in enumerate(stages):
        need = costs.stage_memory_bytes(_kind(i, len(stages)), n)
        if need > costs.capacity_bytes:
            problems.append(f"stage {i}: {need / 2**30:.1f} GiB > capacity {costs.capacity_bytes / 2**30:.1f} GiB")
    return problems


def slowest_stage_s(stages: Sequence[int], costs: StageCosts) -> float:
    """Seconds of the slowest stage per micro-batch under `costs`."""
    return max(costs.stage_time_s(_kind(i, len(stages)), n) for i, n in enumerate(stages))
