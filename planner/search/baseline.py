"""The paper's rule of thumb: tp = GPUs per server, the smallest pp that fits, the rest data parallel.

Narayanan et al. 2021 Sec. 3.3 (takeaways #1-#2): tensor parallelism up to the
server size, pipeline parallelism to fit the model, data parallelism to scale;
full recomputation (their runs); the micro-batch by the Sec. 3.4 trade-off,
here evaluated with the cost model.
"""

from __future__ import annotations

import numpy as np

from planner.constraints.space import Allowed, build_space, divisors
from planner.costmodel.candidates import RECOMPUTE_CODE
from planner.profiles import Hardware
from planner.rules import CORE, TENSOR_SPLIT, Job, RuleSet
from planner.search.evaluate import Evaluated, evaluate
from planner.specs import ModelSpec, Recompute, TrainingSpec

__all__ = ["BASELINE_RULE", "baseline_candidates"]

BASELINE_RULE = "tp = gpus_per_node, smallest pp that fits, rest dp, full recompute, best micro-batch"


def _heuristic_tp(model: ModelSpec, training: TrainingSpec, num_gpus: int, gpus_per_node: int, rules: RuleSet) -> int:
    """The largest tensor-parallel degree within a server that the rules on tp alone allow (tensor_split, and
    e.g. Megatron's query-group split)."""
    degrees = np.asarray([t for t in divisors(num_gpus) if t <= gpus_per_node], dtype=np.int64)
    job = Job(model, training, num_gpus)
    ok = np.ones(len(degrees), dtype=np.bool_)
    for rule in (r for r in rules.rules if r.axes == ("tp",) or r is TENSOR_SPLIT):
        ok &= rule.ok({"tp": degrees}, job)
    return int(degrees[ok].max())


def baseline_candidates(
    model: ModelSpec,
    training: TrainingSpec,
    num_gpus: int,
    hw: Hardware,
    searched: Evaluated | None = None,
    rules: RuleSet = CORE,
) -> tuple[Evaluated, int] | None:
    """The evaluated heuristic space and the index of its chosen layout, or None when nothing fits.

    `searched`, a complete unconstrained evaluation on `num_gpus`, already holds the heuristic's
    layouts and is reused; otherwise they are evaluated here.
    """
    tp = _heuristic_tp(model, training, num_gpus, hw.gpus_per_node, rules)
    if searched is not None:
        (space,) = searched.spaces
        rows, modes = space.rows, space.modes
        row_rule = (rows.tp == tp) & (rows.cp == 1) & (rows.ep == 1) & (rows.vp == 1)
        mode_rule = (modes[:, 0] == RECOMPUTE_CODE[Recompute.FULL]) & (modes[:, 1] == 0) & (modes[:, 2] == 0)
        fits = row_rule[space.row] & mode_rule[space.mode] & (searched.peak_bytes <= hw.hbm_bytes)
        return _choose(searched, fits)
    allowed: Allowed = {
        "tp": [tp],
        "cp": [1],
        "ep": [1],
        "vp": [1],
        "recompute": ["full"],
        "sequence_parallel": [False],
        "zero_stage": [0],
    }
    space = build_space(model, training, num_gpus, allowed, rules)
    ev = evaluate(model, training, space, hw)
    return _choose(ev, ev.peak_bytes <= hw.hbm_bytes)


def _choose(ev: Evaluated, fits: np.ndarray) -> tuple[Evaluated, int] | None:
    """The smallest pipeline that fits, at its best micro-batch."""
    candidates = np.flatnonzero(fits)
    if not len(candidates):
        return None
    pp = ev.take(candidates).pp
    chosen = candidates[pp == pp.min()]
    return ev, int(chosen[np.argmin(ev.step_time_s[chosen])])
