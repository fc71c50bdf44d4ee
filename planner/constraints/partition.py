"""Layers per pipeline stage with OR-Tools CP-SAT: minimise the slowest stage under each stage's memory.

Megatron-LM expresses an uneven split as a first-stage count, a last-stage
count (`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`)
and equal middle stages, so the model has three integer variables: first f,
middle m and last l, with f + (pp - 2) m + l = num_layers, each a positive
multiple of vp: the stage-list clauses of `planner.rules.STAGE_SPLIT`, encoded as
variables; `constraints.check` tests a solution against the rule itself. Stage
time and memory are affine in the layer count
(`constraints.costs`). Times are scaled to integer microseconds and memory to
integer MiB here, and only here. Every solve has a time limit; the plans of one search are
solved together in one model (independent problems, summed objective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from planner.constraints.costs import FIRST, LAST, MIDDLE, StageCosts, StageKind
from planner.errors import InfeasibleError, SolverTimeoutError
from planner.units import MIB

__all__ = ["SOLVE_TIME_LIMIT_S", "PartitionProblem", "solve_partition", "solve_partitions"]

SOLVE_TIME_LIMIT_S = 1.0
_US = 1e6


def _us(seconds: float) -> int:
    return max(0, round(seconds * _US))


@dataclass(frozen=True, slots=True)
class PartitionProblem:
    num_layers: int
    pp: int
    vp: int
    costs: StageCosts


def _add_problem(
    model: cp_model.CpModel, p: PartitionProblem, tag: str
) -> tuple[dict[StageKind, cp_model.IntVar], Any]:
    """The variables and the objective term of one partition problem, added to `model`."""
    upper = p.num_layers // p.vp
    chunks = {
        FIRST: model.new_int_var(1, upper, f"{tag}first"),
        MIDDLE: model.new_int_var(1 if p.pp > 2 else 0, upper if p.pp > 2 else 0, f"{tag}middle"),
        LAST: model.new_int_var(1, upper, f"{tag}last"),
    }
    model.add(p.vp * (chunks[FIRST] + (p.pp - 2) * chunks[MIDDLE] + chunks[LAST]) == p.num_layers)
    slowest = model.new_int_var(0, _us(p.costs.stage_time_s(LAST, p.num_layers)) + 1, f"{tag}slowest_us")
    capacity_mib = math.floor(p.costs.capacity_bytes / MIB)
    for kind, var in chunks.items():
        if kind == MIDDLE and p.pp == 2:
            continue
        layers = p.vp * var
        extra = p.costs.last_extra_s if kind == LAST else 0.0
        model.add(slowest >= _us(p.costs.layer_time_s) * layers + _us(extra))
        per_layer = math.ceil(p.costs.memory_per_layer_bytes[kind] / MIB)
        model.add(per_layer * layers + math.ceil(p.costs.memory_intercept_bytes[kind] / MIB) <= capacity_mib)
    spread = model.new_int_var(0, p.num_layers, f"{tag}spread")
    model.add_abs_equality(spread, chunks[FIRST] - chunks[LAST])
    return chunks, slowest * (p.num_layers + 1) + spread


def _solve(problems: list[PartitionProblem]) -> list[tuple[int, ...]]:
    """Solve independent problems in one model: minimising the sum minimises each term."""
    model = cp_model.CpModel()
    added = [_add_problem(model, p, f"p{i}_") for i, p in enumerate(problems)]
    model.minimize(sum(term for _, term in added))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = SOLVE_TIME_LIMIT_S
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        raise InfeasibleError("no split of the layers over the stages fits in memory")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise SolverTimeoutError(f"stage partition: CP-SAT status {solver.status_name(status)}")
    out = []
    for p, (chunks, _) in zip(problems, added, strict=True):
        f, m, last = (p.vp * solver.value(chunks[k]) for k in (FIRST, MIDDLE, LAST))
        out.append((f,) + (m,) * (p.pp - 2) + (last,))
    return out


def solve_partition(num_layers: int, pp: int, vp: int, costs: StageCosts) -> tuple[int, ...]:
    """Layers per stage (length pp) minimising the slowest stage; raises InfeasibleError if none fits."""
    assert pp >= 2, "a single stage has nothing to partition"
    return _solve([PartitionProblem(num_layers, pp, vp, costs)])[0]


def solve_partitions(problems: list[PartitionProblem]) -> list[tuple[int, ...] | None]:
    """Each problem's split (None where it has none), in one CP-SAT solve when all are feasible.

    One model for all saves building a model per plan; if any problem is infeasible, each is solved alone.
    """
    if not problems:
        return []
    try:
        return list(_solve(problems))
    except (InfeasibleError, SolverTimeoutError):
        pass
    out: list[tuple[int, ...] | None] = []
    for p in problems:
        try:
            out.append(_solve([p])[0])
        except (InfeasibleError, SolverTimeoutError):
            out.append(None)
    return out
