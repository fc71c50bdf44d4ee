"""The rule of thumb: tp = GPUs per server, the smallest pp that fits, the rest data parallel.

Narayanan et al. 2021 Sec. 3.3 (takeaways #1-#2): tensor parallelism up to the
server size, pipeline parallelism to fit the model, data parallelism to scale.
The rule runs on a `Recipe`, the runtime settings it may use; on each setting
(recompute, sequence parallelism, ZeRO stage, expert-parallel degree) it takes
the smallest pp that fits at its best micro-batch, and the fastest setting wins.

- `PAPER`: the paper's 2021 runtime, one setting: full recomputation (their
  runs), no sequence parallelism, ZeRO 0, no expert parallelism; the
  micro-batch by the Sec. 3.4 trade-off, here evaluated with the cost model.
- `MODERN`: today's runtime, the settings the search may use: none, selective
  or full recompute; sequence parallelism (Korthikanti 2022) when tp > 1; the
  distributed optimizer (ZeRO 1); any expert-parallel degree the rules allow
  (MoE). It holds the paper's setting, so it is never slower than `PAPER`.
  The settings are tried one by one, not pooled: pooled, ZeRO 1's memory
  saving lets a smaller pp fit, and the smallest pp is not always the fastest
  (GPT-3 175B on 2048 A100s: pp 2 with ZeRO 1 is slower than pp 8 with ZeRO 0).

Both keep cp = 1 and vp = 1 (layout choices, not runtime features) and pass
the request's framework rules.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.constraints.space import Allowed, build_space, divisors
from planner.costmodel.candidates import RECOMPUTE_CODE, BoolArray
from planner.profiles import Hardware
from planner.rules import CORE, TENSOR_SPLIT, Job, RuleSet
from planner.search.evaluate import Evaluated, evaluate
from planner.specs import ModelSpec, Recompute, TrainingSpec

__all__ = ["BASELINE_RULE", "MODERN", "MODERN_BASELINE_RULE", "PAPER", "Recipe", "baseline_candidates"]

BASELINE_RULE = "tp = gpus_per_node, smallest pp that fits, rest dp, full recompute, best micro-batch"
MODERN_BASELINE_RULE = (
    "tp = gpus_per_node, smallest pp that fits, rest dp, best micro-batch; on each runtime setting"
    " (none/selective/full recompute, sequence parallel, ZeRO 0/1, expert parallel), the fastest"
)


@dataclass(frozen=True, slots=True)
class Recipe:
    """The runtime settings the rule of thumb may use besides tp (cp = vp = 1 always)."""

    rule: str
    recompute: tuple[Recompute, ...]
    sequence_parallel: tuple[bool, ...]
    """Sequence parallelism off and/or on; on only where tp > 1."""
    zero_stages: tuple[int, ...]
    expert_parallel: bool
    """Whether ep > 1 may be chosen (MoE); otherwise ep = 1."""

    def allowed(self, tp: int) -> Allowed:
        """The recipe's space at tensor-parallel degree `tp`, as constraints."""
        out: dict[str, list[int | bool | str]] = {
            "tp": [tp],
            "cp": [1],
            "vp": [1],
            "recompute": [r.value for r in self.recompute],
            "sequence_parallel": [sp for sp in self.sequence_parallel if tp > 1 or not sp],
            "zero_stage": list(self.zero_stages),
            "etp": [tp],
        }
        if not self.expert_parallel:
            out["ep"] = [1]
        return out


PAPER = Recipe(
    rule=BASELINE_RULE,
    recompute=(Recompute.FULL,),
    sequence_parallel=(False,),
    zero_stages=(0,),
    expert_parallel=False,
)
"""Narayanan 2021 as run in the paper."""

MODERN = Recipe(
    rule=MODERN_BASELINE_RULE,
    recompute=(Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL),
    sequence_parallel=(False, True),
    zero_stages=(0, 1),
    expert_parallel=True,
)
"""The same layout rule on today's Megatron runtime (ZeRO 2/3 are FSDP, a different recipe)."""


def _heuristic_tp(model: ModelSpec, training: TrainingSpec, num_gpus: int, gpus_per_node: int, rules: RuleSet) -> int:
    """The largest tensor-parallel degree within a server that the rules on tp alone allow (tensor_split, and
    e.g. Megatron's query-group split)."""
    degrees = np.asarray([t for t in divisors(num_gpus) if t <= gpus_per_node], dtype=np.int64)
    job = Job(model, training, num_gpus)
    ok = np.ones(len(degrees), dtype=np.bool_)
    for rule in (r for r in rules.rules if r.axes == ("tp",) or r is TENSOR_SPLIT):
        ok &= rule.ok({"tp": degrees}, job)
    return int(degrees[ok].max())


def _mask(searched: Evaluated, allowed: Allowed) -> BoolArray:
    """Which of `searched`'s candidates lie in the space `allowed` describes."""
    (space,) = searched.spaces
    rows, modes = space.rows, space.modes
    row_ok = np.ones(len(rows.tp), dtype=np.bool_)
    mode_ok = np.ones(len(modes), dtype=np.bool_)
    for key, values in allowed.items():
        if key == "recompute":
            codes = [RECOMPUTE_CODE[Recompute(str(v))] for v in values]
            mode_ok &= np.isin(modes[:, 0], codes)
        elif key == "sequence_parallel":
            mode_ok &= np.isin(modes[:, 1], [int(bool(v)) for v in values])
        elif key == "zero_stage":
            mode_ok &= np.isin(modes[:, 2], list(values))
        else:
            row_ok &= np.isin(getattr(rows, key), list(values))
    in_space: BoolArray = (row_ok[:, None] & mode_ok[None, :])[space.pairs]
    return in_space


def baseline_candidates(
    model: ModelSpec,
    training: TrainingSpec,
    num_gpus: int,
    hw: Hardware,
    searched: Evaluated | None = None,
    rules: RuleSet = CORE,
    recipe: Recipe = PAPER,
) -> tuple[Evaluated, int] | None:
    """The evaluated space of `recipe` and the index of its chosen layout, or None when nothing fits.

    `searched`, a complete unconstrained evaluation on `num_gpus`, already holds the recipe's
    layouts and is reused; otherwise they are evaluated here.
    """
    tp = _heuristic_tp(model, training, num_gpus, hw.gpus_per_node, rules)
    allowed = recipe.allowed(tp)
    if searched is not None:
        return _choose(searched, _mask(searched, allowed) & (searched.peak_bytes <= hw.hbm_bytes))
    # the layouts name the training's set, as the search's own space does (`plan`: MLA's default under flash)
    space = replace(
        build_space(model, training, num_gpus, allowed, rules), recompute_modules=training.runtime.recompute_modules
    )
    ev = evaluate(model, training, space, hw)
    return _choose(ev, ev.peak_bytes <= hw.hbm_bytes)


def _choose(ev: Evaluated, fits: np.ndarray) -> tuple[Evaluated, int] | None:
    """Per runtime setting the smallest pipeline that fits at its best micro-batch; of those, the fastest."""
    candidates = np.flatnonzero(fits)
    if not len(candidates):
        return None
    c = ev.take(candidates)
    setting = ((c.recompute * 2 + c.sequence_parallel) * 4 + c.zero_stage) * (int(c.ep.max()) + 1) + c.ep
    order = np.lexsort((ev.step_time_s[candidates], c.pp, setting))
    first = order[np.r_[True, setting[order][1:] != setting[order][:-1]]]
    return ev, int(candidates[first[np.argmin(ev.step_time_s[candidates[first]])]])
