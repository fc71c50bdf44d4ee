"""The paper's rule of thumb: tp = GPUs per server, the smallest pp that fits, the rest data parallel.

Narayanan et al. 2021 Sec. 3.3 (takeaways #1-#2): tensor parallelism up to the
server size, pipeline parallelism to fit the model, data parallelism to scale;
full recomputation (their runs); the micro-batch by the Sec. 3.4 trade-off,
here evaluated with the cost model.
"""

from __future__ import annotations

import numpy as np

from planner.constraints.space import Allowed, build_space, divisors
from planner.profiles import Hardware
from planner.search.evaluate import Evaluated, evaluate
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["BASELINE_RULE", "baseline_candidates"]

BASELINE_RULE = "tp = gpus_per_node, smallest pp that fits, rest dp, full recompute, best micro-batch"


def _heuristic_tp(model: ModelSpec, num_gpus: int, gpus_per_node: int) -> int:
    legal = [
        t
        for t in divisors(num_gpus)
        if t <= gpus_per_node
        and model.num_attention_heads % t == 0
        and model.ffn_hidden_size % t == 0
        and (model.num_query_groups % t == 0 or t % model.num_query_groups == 0)
    ]
    return max(legal)


def baseline_candidates(
    model: ModelSpec, train: TrainingSpec, num_gpus: int, hw: Hardware
) -> tuple[Evaluated, int] | None:
    """The evaluated heuristic space and the index of its chosen layout, or None when nothing fits."""
    tp = _heuristic_tp(model, num_gpus, hw.gpus_per_node)
    allowed: Allowed = {
        "tp": [tp],
        "cp": [1],
        "ep": [1],
        "vp": [1],
        "recompute": ["full"],
        "sequence_parallel": [False],
        "zero_stage": [0],
    }
    space = build_space(model, train, num_gpus, allowed)
    ev = evaluate(model, train, space, hw)
    fits = ev.peak_bytes <= hw.hbm_bytes
    if not fits.any():
        return None
    c = ev.candidates
    smallest_pp = c.pp[fits].min()
    chosen = np.flatnonzero(fits & (c.pp == smallest_pp))
    return ev, int(chosen[np.argmin(ev.step_time_s[chosen])])
