"""Layers per pipeline stage with OR-Tools CP-SAT: minimise the slowest stage under each stage's memory.

Megatron-LM expresses an uneven split as a first-stage count, a last-stage
count (`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`)
and equal middle stages, so the model has three integer variables: first f,
middle m and last l, with f + (pp - 2) m + l = num_layers, each a positive
multiple of vp. Stage time and memory are affine in the layer count
(`constraints.costs`). Times are scaled to integer microseconds and memory to
integer MiB here, and only here. Every solve has a time limit.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from planner.constraints.costs import FIRST, LAST, MIDDLE, StageCosts
from planner.errors import InfeasibleError, SolverTimeoutError
from planner.units import MIB

__all__ = ["SOLVE_TIME_LIMIT_S", "solve_partition"]

SOLVE_TIME_LIMIT_S = 1.0
_US = 1e6


def _us(seconds: float) -> int:
    return max(0, round(seconds * _US))


def solve_partition(num_layers: int, pp: int, vp: int, costs: StageCosts) -> tuple[int, ...]:
    """Layers per stage (length pp) minimising the slowest stage; raises InfeasibleError if none fits."""
    assert pp >= 2, "a single stage has nothing to partition"
    model = cp_model.CpModel()
    upper = num_layers // vp
    first_chunks = model.new_int_var(1, upper, "first_chunks")
    last_chunks = model.new_int_var(1, upper, "last_chunks")
    middle_chunks = model.new_int_var(1 if pp > 2 else 0, upper if pp > 2 else 0, "middle_chunks")
    model.add(vp * (first_chunks + (pp - 2) * middle_chunks + last_chunks) == num_layers)
    chunks = {FIRST: first_chunks, MIDDLE: middle_chunks, LAST: last_chunks}
    slowest = model.new_int_var(0, _us(costs.stage_time_s(LAST, num_layers)) + 1, "slowest_stage_us")
    capacity_mib = math.floor(costs.capacity_bytes / MIB)
    for kind, var in chunks.items():
        if kind == MIDDLE and pp == 2:
            continue
        layers = vp * var
        extra = costs.last_extra_s if kind == LAST else 0.0
        model.add(slowest >= _us(costs.layer_time_s) * layers + _us(extra))
        per_layer = math.ceil(costs.memory_per_layer_bytes[kind] / MIB)
        model.add(per_layer * layers + math.ceil(costs.memory_intercept_bytes[kind] / MIB) <= capacity_mib)
    spread = model.new_int_var(0, num_layers, "spread")
    model.add_abs_equality(spread, first_chunks - last_chunks)
    model.minimize(slowest * (num_layers + 1) + spread)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = SOLVE_TIME_LIMIT_S
    solver.parameters.num_workers = 1
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        raise InfeasibleError(f"no split of {num_layers} layers over {pp} stages fits in memory")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise SolverTimeoutError(f"stage partition: CP-SAT status {solver.status_name(status)}")
    f, m, last = (vp * solver.value(chunks[k]) for k in (FIRST, MIDDLE, LAST))
    return (f,) + (m,) * (pp - 2) + (last,)
