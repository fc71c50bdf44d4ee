"""Why nothing fits: the least-memory layout, its shortfall, and which constraint to relax."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from planner.constraints.space import Allowed, build_space
from planner.layout import Layout
from planner.profiles import ClusterSpec, Hardware
from planner.rules import CORE, RuleSet
from planner.search.budget import DIAGNOSIS, WorkBudget
from planner.search.evaluate import Evaluated, evaluate
from planner.specs import ModelSpec, TrainingSpec
from planner.units import GIB

__all__ = ["Diagnosis", "diagnose", "too_slow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    message: str
    least_memory_layout: Layout | None
    least_memory_gib: float | None
    capacity_gib: float
    relax: list[str]
    rejected: dict[str, int]


def _any_fits(
    model: ModelSpec,
    training: TrainingSpec,
    n: int,
    hw: Hardware,
    allowed: Allowed,
    budget: WorkBudget,
    rules: RuleSet,
) -> bool:
    """Whether some layout fits under `allowed`, from the candidates `budget` still allows (spent here).

    Stops at the first block with a fit; where the budget stops it first, the answer is "no" and the
    diagnosis is marked truncated.
    """
    if budget.candidates == 0:
        budget.truncate(DIAGNOSIS)
        return False
    space = build_space(model, training, n, allowed, rules)
    ev = evaluate(model, training, space, hw, budget.candidates, until_fit=True)
    budget.spend(ev.evaluated)
    fits = bool(np.any(ev.peak_bytes <= hw.hbm_bytes))
    if not fits and ev.evaluated < len(ev):
        budget.truncate(DIAGNOSIS)
        budget.candidates = 0  # what is left cannot hold the next row: the remaining keys are not tried
    return fits


def diagnose(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    hw: Hardware,
    ev: Evaluated,
    allowed: Allowed,
    rejected: Counter[str],
    budget: WorkBudget | None = None,
    rules: RuleSet = CORE,
) -> Diagnosis:
    """Explain an empty plan list in words a user can act on.

    The constraints to relax are tried in the request's order, each a re-search drawn from `budget`
    (the request's; a fresh one when None); once it is spent the rest are not tried.
    """
    budget = WorkBudget() if budget is None else budget
    capacity = hw.hbm_bytes / GIB
    relax = [
        key
        for key in allowed
        if _any_fits(model, training, cluster.num_gpus, hw, _without(allowed, key), budget, rules)
    ]
    if len(ev) == 0:
        reasons = ", ".join(f"{k} ({v})" for k, v in rejected.most_common(3))
        return Diagnosis(
            message=f"no layout of {cluster.num_gpus} GPUs passes the divisibility rules; most rejected by: {reasons}",
            least_memory_layout=None,
            least_memory_gib=None,
            capacity_gib=capacity,
            relax=relax,
            rejected=dict(rejected),
        )
    if ev.evaluated == 0:
        return Diagnosis(
            message="the search's work budget ran out before any layout was evaluated; pin some dimensions",
            least_memory_layout=None,
            least_memory_gib=None,
            capacity_gib=capacity,
            relax=relax,
            rejected=dict(rejected),
        )
    i = int(np.argmin(ev.peak_bytes))
    need = float(ev.peak_bytes[i]) / GIB
    layout = ev.layout(i, model.num_layers)
    hint = f"relax constraints: {', '.join(relax)}" if relax else "use more GPUs or GPUs with more memory"
    return Diagnosis(
        message=(
            f"nothing fits: the least-memory layout needs {need:.1f} GiB per GPU against {capacity:.1f} GiB"
            f" usable; {hint}"
        ),
        least_memory_layout=layout,
        least_memory_gib=need,
        capacity_gib=capacity,
        relax=relax,
        rejected=dict(rejected),
    )


def too_slow(max_step_time_s: float, fastest_s: float, gpus: int, hw: Hardware) -> Diagnosis:
    """Layouts fit, but none steps within the request's `max_step_time_s`: the fastest, and what to change."""
    return Diagnosis(
        message=(
            f"no layout that fits steps within max_step_time_s = {max_step_time_s:g} s: the fastest takes"
            f" {fastest_s:.3g} s on {gpus} GPUs; raise max_step_time_s to at least {fastest_s:.3g} or use more GPUs"
        ),
        least_memory_layout=None,
        least_memory_gib=None,
        capacity_gib=hw.hbm_bytes / GIB,
        relax=["max_step_time_s"],
        rejected={},
    )


def _without(allowed: Allowed, key: str) -> Allowed:
    return {k: v for k, v in allowed.items() if k != key}
