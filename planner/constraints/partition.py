"""Layers per pipeline stage with OR-Tools CP-SAT: minimise the slowest stage under each stage's memory.

Megatron-LM expresses an uneven split as a first-stage count, a last-stage
count (`--decoder-first-pipeline-num-layers`, `--decoder-last-pipeline-num-layers`)
and equal middle stages, so the model has three integer variables: first f,
middle m and last l, with f + (pp - 2) m + l = num_layers, each a positive
multiple of vp: the splits those flags spell, within what the stage-list clauses of
`planner.rules.STAGE_SPLIT` accept (which also take an end stage one short chunk
below a multiple of vp, as a pipeline layout; the default split may be one, the
solver does not search them); `constraints.check` tests a solution against the rule itself. Stage
time and memory are affine in the layer count
(`constraints.costs`). Times are scaled to integer microseconds and memory to
integer MiB here, and only here.

Every solve is deterministic: one worker, a fixed seed, and a limit on CP-SAT's
deterministic time (its count of work done, not the clock), so the same problems
give the same splits on any machine under any load. Each problem is solved in its
own model (three variables: solved to optimality in well under a millisecond of
deterministic time, with presolve and the LP relaxation off since they cost more than
the search), except that up to `TOGETHER_MAX` are first tried together in one
model (summed objective), which saves the per-solve overhead; one model holding 100
problems took CP-SAT seconds to prove optimal. A request's solves share one `SplitWork`: when it
is spent, the remaining problems keep their default split and the request says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ortools.sat.python import cp_model

from planner.constraints.costs import FIRST, LAST, MIDDLE, StageCosts, StageKind
from planner.errors import InfeasibleError, SolverTimeoutError
from planner.units import MIB

__all__ = [
    "SOLVE_SEED",
    "SPLIT_WORK_PER_REQUEST",
    "SPLIT_WORK_PER_SOLVE",
    "TOGETHER_MAX",
    "PartitionProblem",
    "SplitWork",
    "solve_partition",
    "solve_partitions",
]

SPLIT_WORK_PER_SOLVE = 0.005
"""CP-SAT deterministic time (`max_deterministic_time`) one solve may use: the largest seen is under 4e-4 (without
presolve, `_solver`)."""
SPLIT_WORK_PER_REQUEST = 0.05
"""CP-SAT deterministic time all the solves of one request may use together (at most 100 problems: top_k)."""
TOGETHER_MAX = 10
"""Up to this many problems are first tried in one model (one solve's overhead instead of ten); past it,
or when that model is infeasible or unproven within its limit, each is solved alone."""
SOLVE_SEED = 0
"""CP-SAT's `random_seed`, fixed."""
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
    bound = _us(p.costs.stage_time_s(LAST, p.num_layers)) + 1
    if any(p.costs.bf16_layers):  # the first stage's BF16 layers may weigh more than the last stage's extra
        bound = max(bound, _us(p.costs.layer_time_s) * p.num_layers + _us(p.costs.total_extra_s) + 1)
    slowest = model.new_int_var(0, bound, f"{tag}slowest_us")
    capacity_mib = math.floor(p.costs.capacity_bytes / MIB)
    for kind, var in chunks.items():
        if kind == MIDDLE and p.pp == 2:
            continue
        layers = p.vp * var
        extra = p.costs.kind_extra_s(kind)
        model.add(slowest >= _us(p.costs.layer_time_s) * layers + _us(extra))
        per_layer = math.ceil(p.costs.memory_per_layer_bytes[kind] / MIB)
        model.add(per_layer * layers + math.ceil(p.costs.memory_intercept_bytes[kind] / MIB) <= capacity_mib)
    spread = model.new_int_var(0, p.num_layers, f"{tag}spread")
    model.add_abs_equality(spread, chunks[FIRST] - chunks[LAST])
    return chunks, slowest * (p.num_layers + 1) + spread


@dataclass(slots=True)
class SplitWork:
    """CP-SAT deterministic time left to a request's solves, and whether a limit cut any solve short."""

    left: float
    truncated: bool = False


def _solver(limit: float) -> cp_model.CpSolver:
    """A deterministic CP-SAT solver for these tiny models (one worker, `SOLVE_SEED`, `limit` of deterministic time),
    without presolve and LP relaxation: on three integer variables per problem they cost more than the search
    (bench/bench_plan.py case (a): 7 ms -> about 1.3 ms for its ten problems in one model, the same optima on
    every problem of nine presets' plans)."""
    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = limit
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SOLVE_SEED
    solver.parameters.cp_model_presolve = False
    solver.parameters.linearization_level = 0
    return solver


def _solve(p: PartitionProblem, limit: float) -> tuple[Any, tuple[int, ...] | None, float]:
    """One problem: (CP-SAT status, split or None, deterministic time used), within `limit`."""
    model = cp_model.CpModel()
    chunks, term = _add_problem(model, p, "")
    model.minimize(term)
    solver = _solver(limit)
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return status, None, solver.deterministic_time
    f, m, last = (p.vp * solver.value(chunks[k]) for k in (FIRST, MIDDLE, LAST))
    return status, (f,) + (m,) * (p.pp - 2) + (last,), solver.deterministic_time


def _solve_together(problems: list[PartitionProblem], limit: float) -> tuple[list[tuple[int, ...]] | None, float]:
    """All problems in one model (summed objective), or None unless CP-SAT proves it optimal within `limit`."""
    model = cp_model.CpModel()
    added = [_add_problem(model, p, f"p{i}_") for i, p in enumerate(problems)]
    model.minimize(sum(term for _, term in added))
    solver = _solver(limit)
    if solver.solve(model) != cp_model.OPTIMAL:
        return None, solver.deterministic_time
    out = []
    for p, (chunks, _) in zip(problems, added, strict=True):
        f, m, last = (p.vp * solver.value(chunks[k]) for k in (FIRST, MIDDLE, LAST))
        out.append((f,) + (m,) * (p.pp - 2) + (last,))
    return out, solver.deterministic_time


def solve_partition(num_layers: int, pp: int, vp: int, costs: StageCosts) -> tuple[int, ...]:
    """Layers per stage (length pp) minimising the slowest stage; raises InfeasibleError if none fits."""
    assert pp >= 2, "a single stage has nothing to partition"
    status, split, _ = _solve(PartitionProblem(num_layers, pp, vp, costs), SPLIT_WORK_PER_SOLVE)
    if status == cp_model.INFEASIBLE:
        raise InfeasibleError("no split of the layers over the stages fits in memory")
    if split is None:
        raise SolverTimeoutError(f"stage partition: CP-SAT status {cp_model.CpSolver().status_name(status)}")
    return split


def solve_partitions(problems: list[PartitionProblem], work: SplitWork | None = None) -> list[tuple[int, ...] | None]:
    """Each problem's split (None where it has none, or where `work` ran out), solved in order.

    `work` is shared by a request's solves (a fresh `SPLIT_WORK_PER_REQUEST` when None); a solve
    stopped by its limit (a feasible but unproven split, or none) or skipped sets `work.truncated`.
    """
    work = SplitWork(SPLIT_WORK_PER_REQUEST) if work is None else work
    if 1 < len(problems) <= TOGETHER_MAX and work.left > 0:
        together, used = _solve_together(problems, min(SPLIT_WORK_PER_SOLVE, work.left))
        work.left -= used
        if together is not None:
            return list(together)
    out: list[tuple[int, ...] | None] = []
    for p in problems:
        if work.left <= 0:
            work.truncated = True
            out.append(None)
            continue
        status, split, used = _solve(p, min(SPLIT_WORK_PER_SOLVE, work.left))
        work.left -= used
        if status not in (cp_model.OPTIMAL, cp_model.INFEASIBLE):
            work.truncated = True
        out.append(split)
    return out
