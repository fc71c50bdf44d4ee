"""Why nothing fits: the least-memory layout, its shortfall, and which constraint to relax."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.constraints.space import Allowed, build_space
from planner.costmodel.candidates import RECOMPUTE_CODE
from planner.errors import InvalidSpecError
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
    """What to change: constraint keys whose removal lets a layout fit, then `num_gpus` (when `more_gpus` is
    set) and `memory_headroom` (when the least-memory layout fits the whole HBM). Empty only when none helps."""
    rejected: dict[str, int]
    legal_values: dict[str, list[int | bool | str]] = field(default_factory=dict)
    """Per constraint key of the request: the values some legal layout takes once that key is lifted."""
    more_gpus: int | None = None
    """The smallest whole-node GPU count tried (2x, 4x, ... 64x the request) on which a layout fits."""
    min_gpu_memory_gib: float | None = None
    """GPU memory on which the least-memory layout would fit under the same headroom."""


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


MORE_GPUS_FACTORS = (2, 4, 8, 16, 32, 64)
"""Multiples of the request's GPU count (rounded up to whole nodes) the diagnosis tries, smallest first."""

_ROW_KEYS = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "micro_batch_size")


def legal_values(
    model: ModelSpec, training: TrainingSpec, n: int, allowed: Allowed, key: str, rules: RuleSet
) -> list[int | bool | str]:
    """The values of `key` some legal layout of `n` GPUs takes when the request's `key` constraint is lifted."""
    try:
        space = build_space(model, training, n, _without(allowed, key), rules)
    except InvalidSpecError:  # lifted, the space is beyond the search bound: say nothing rather than guess
        return []
    if len(space) == 0:
        return []
    if key in _ROW_KEYS:
        return sorted({int(v) for v in getattr(space.rows, key)[space.pairs.any(axis=1)]})
    modes = space.modes[space.pairs.any(axis=0)]
    if key == "recompute":
        names = {code: r.value for r, code in RECOMPUTE_CODE.items()}
        return sorted({names[int(c)] for c in modes[:, 0]})
    if key == "sequence_parallel":
        return sorted({bool(v) for v in modes[:, 1]})
    return sorted({int(v) for v in modes[:, 2]})


def _more_gpus(
    model: ModelSpec,
    training: TrainingSpec,
    n: int,
    hw: Hardware,
    allowed: Allowed,
    budget: WorkBudget,
    rules: RuleSet,
) -> int | None:
    """The smallest whole-node count in `MORE_GPUS_FACTORS` x `n` on which a layout fits, from `budget`."""
    per_node = hw.gpus_per_node
    for factor in MORE_GPUS_FACTORS:
        count = math.ceil(n * factor / per_node) * per_node
        if count > 1_048_576 or budget.candidates == 0:
            return None
        try:
            if _any_fits(model, training, count, hw, allowed, budget, rules):
                return count
        except InvalidSpecError:  # beyond the search bound at this count
            return None
    return None


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
    """Explain an empty plan list in words a user can act on: what to change, and to what.

    The constraints to relax are tried in the request's order, each a re-search drawn from `budget`
    (the request's; a fresh one when None); then larger whole-node GPU counts (`MORE_GPUS_FACTORS`);
    once the budget is spent the rest are not tried. `hw.hbm_bytes` is the usable memory
    (`planner.costmodel.memory.usable_hardware`).
    """
    budget = WorkBudget() if budget is None else budget
    capacity = hw.hbm_bytes / GIB
    n = cluster.num_gpus
    relax = [key for key in allowed if _any_fits(model, training, n, hw, _without(allowed, key), budget, rules)]
    values = {key: legal_values(model, training, n, allowed, key, rules) for key in allowed}
    more = _more_gpus(model, training, n, hw, allowed, budget, rules)
    if more is not None:
        relax.append("num_gpus")
    more_text = f"; a layout fits on {more} GPUs ({more // hw.gpus_per_node} nodes)" if more is not None else ""
    if len(ev) == 0:
        reasons = ", ".join(f"{k} ({v})" for k, v in _binding_first(rejected)[:3])
        legal = "; ".join(
            f"{key} {_shown(allowed[key])} is not legal here, legal {key}: {_shown(vs)}"
            for key, vs in values.items()
            if vs
        )
        return Diagnosis(
            message=f"no layout of {n} GPUs passes the divisibility rules; most rejected by: {reasons}"
            + (f"; {legal}" if legal else "")
            + more_text,
            least_memory_layout=None,
            least_memory_gib=None,
            capacity_gib=capacity,
            relax=relax,
            rejected=dict(rejected),
            legal_values=values,
            more_gpus=more,
        )
    if ev.evaluated == 0:
        return Diagnosis(
            message="the search's work budget ran out before any layout was evaluated; pin some dimensions",
            least_memory_layout=None,
            least_memory_gib=None,
            capacity_gib=capacity,
            relax=relax,
            rejected=dict(rejected),
            legal_values=values,
            more_gpus=more,
        )
    i = int(np.argmin(ev.peak_bytes))
    need = float(ev.peak_bytes[i]) / GIB
    layout = ev.layout(i, model.num_layers)
    datasheet = cluster.profile.gpu.memory_gib
    gpu_memory = need * datasheet / capacity  # the same headroom fraction on a larger GPU
    if need <= datasheet < gpu_memory:
        relax.append("memory_headroom")
    hints = []
    if relax:
        hints.append(f"relax: {', '.join(relax)}")
    if more is not None:
        hints.append(f"use {more} GPUs ({more // hw.gpus_per_node} nodes): a layout fits there")
    hints.append(f"or GPUs with at least {gpu_memory:.0f} GiB")
    return Diagnosis(
        message=(
            f"nothing fits: the least-memory layout needs {need:.1f} GiB per GPU against {capacity:.1f} GiB"
            f" usable; {'; '.join(hints)}"
        ),
        least_memory_layout=layout,
        least_memory_gib=need,
        capacity_gib=capacity,
        relax=relax,
        rejected=dict(rejected),
        legal_values=values,
        more_gpus=more,
        min_gpu_memory_gib=gpu_memory,
    )


def _shown(values: Sequence[int | bool | str]) -> str:
    return ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


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


def _binding_first(rejected: Counter[str]) -> list[tuple[str, int]]:
    """Rejection counts with the rules first, then the request's own constraints (`constraint:KEY`), each by count.

    A pinned value that a rule refuses is counted under the rule (`planner.constraints.space`), so the rule
    that binds is named before the constraints that merely left the other values out.
    """
    counted = [(k, v) for k, v in rejected.most_common() if v > 0]
    return sorted(counted, key=lambda kv: kv[0].startswith("constraint:"))


def _without(allowed: Allowed, key: str) -> Allowed:
    return {k: v for k, v in allowed.items() if k != key}
