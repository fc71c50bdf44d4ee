"""Quantities that depend only on a candidate's layer-level key, computed once per distinct key.

Everything here is a function of (tp, cp, pp, dp, ep, micro-batch, recompute,
sequence parallel): not of the ZeRO stage, the interleaving depth or the
number of micro-batches. A search evaluates them on the few distinct keys and
gathers them to every candidate; a single estimate computes them directly.
The numbers are the same either way, so the search stays exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates, FloatArray, IntArray, select_max
from planner.costmodel.comm import (
    cp_comm_per_layer_s,
    ep_comm_per_layer_s,
    exposed_s,
    sp_backward_gather_per_layer_s,
    tp_comm_per_layer_s,
)
from planner.costmodel.data_parallel import dp_collectives_s
from planner.costmodel.memory import StageTerms, all_stage_terms
from planner.costmodel.params import stage_kinds, stage_params
from planner.costmodel.topology import Placement, place
from planner.numerics import numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["LAYER_KEYS", "LayerQuantities", "layer_quantities"]

LAYER_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm")
"""Per-layer critical-path kinds; a stage's time is its layer count times their sum (+ logits)."""


@dataclass(frozen=True, slots=True)
class LayerQuantities:
    placement: Placement
    layer_s: dict[str, FloatArray]
    """Seconds of one layer and micro-batch by LAYER_KEYS, plus `forward` and `backward` (with recompute)."""
    logits_s: FloatArray
    stage_params: tuple[tuple[FloatArray, FloatArray], ...]
    """(dense, expert) parameters per GPU of the first, last and middle stage (`params.stage_kinds` order)."""
    stage_terms: tuple[StageTerms, ...]
    """The memory terms of the same stages."""
    largest_params: tuple[FloatArray, FloatArray]
    """(dense, expert) parameters per GPU of the stage holding the most."""
    dp_collectives_s: dict[str, FloatArray]
    """DP all-reduce, reduce-scatter and all-gather seconds over the largest stage's parameters."""
    slowest_stage_s: dict[str, FloatArray]
    """One micro-batch on the slowest stage: LAYER_KEYS (compute includes the logits there), `forward`,
    `backward`, and `average_stage` (all layers and logits over pp; pipeline sends excluded)."""

    def take(self, index: IntArray) -> LayerQuantities:
        return LayerQuantities(
            placement=self.placement.map(lambda a: a[index]),
            layer_s={k: v[index] for k, v in self.layer_s.items()},
            logits_s=self.logits_s[index],
            stage_params=tuple((d[index], e[index]) for d, e in self.stage_params),
            stage_terms=tuple(
                StageTerms(*(getattr(t, f)[index] for f in StageTerms.__slots__)) for t in self.stage_terms
            ),
            largest_params=(self.largest_params[0][index], self.largest_params[1][index]),
            dp_collectives_s={k: v[index] for k, v in self.dp_collectives_s.items()},
            slowest_stage_s={k: v[index] for k, v in self.slowest_stage_s.items()},
        )


def _layer_seconds(
    model: ModelSpec, c: Candidates, hw: Hardware, train: TrainingSpec, placement: Placement
) -> dict[str, FloatArray]:
    rt, num = train.runtime, numerics(train.precision)
    layer = compute.layer_times(model, c, hw, rt)
    layer_compute = layer.forward_s + layer.backward_s
    tp_comm = tp_comm_per_layer_s(model, c, placement, hw, num)
    if rt.tp_comm_overlap:
        tp_comm = exposed_s(tp_comm, layer_compute)
    tp_comm = tp_comm + exposed_s(sp_backward_gather_per_layer_s(model, c, placement, hw, num), layer.backward_s / 2)
    return {
        "compute": layer_compute,
        "recompute": layer.recompute_s,
        "tp_comm": tp_comm,
        "cp_comm": exposed_s(cp_comm_per_layer_s(model, c, placement, hw, num), layer_compute),
        "ep_comm": ep_comm_per_layer_s(model, c, placement, hw, num),
        "forward": layer.forward_s,
        "backward": layer.backward_s + layer.recompute_s,
    }


def _slowest_stage(
    model: ModelSpec, c: Candidates, layer_s: dict[str, FloatArray], logits_s: FloatArray
) -> dict[str, FloatArray]:
    """Seconds of one micro-batch on the slowest stage, by kind, and the average stage's total."""
    layer_total = np.sum([layer_s[k] for k in LAYER_KEYS], axis=0)
    kinds = stage_kinds(c)
    totals = [n * layer_total + np.where(out, logits_s, 0.0) for n, _, out in kinds]
    n, has_logits = select_max(totals, [k[0] for k in kinds], [k[2] for k in kinds])
    parts = {key: n * layer_s[key] for key in (*LAYER_KEYS, "forward", "backward")}
    parts["compute"] = parts["compute"] + np.where(has_logits, logits_s, 0.0)
    parts["average_stage"] = (model.num_layers * layer_total + logits_s) / c.pp
    return parts


def _spread(x: FloatArray, run: int) -> FloatArray:
    """Per-run values repeated for each member of the run."""
    return x if run == 1 else np.repeat(x, run)


def layer_quantities(
    model: ModelSpec, train: TrainingSpec, c: Candidates, hw: Hardware, *, run: int = 1
) -> LayerQuantities:
    """The layer-level quantities of every candidate in `c`.

    With `run` > 1, `c` holds runs of `run` consecutive candidates that differ
    only in recompute and sequence parallelism (as `Space.layer_candidates`
    does): the placement, the parameters per stage and the DP collectives,
    which depend on neither, are computed once per run. The numbers are the
    same either way (a test checks it).
    """
    base = c if run == 1 else c.take(slice(None, None, run))
    base_placement = place(base, hw.nvlink_domain_gpus)
    placement = base_placement if run == 1 else base_placement.map(lambda a: np.repeat(a, run))
    base_params = [stage_params(model, base, *kind) for kind in stage_kinds(base)]
    dense, expert = select_max(
        [d + e for d, e in base_params], [d for d, _ in base_params], [e for _, e in base_params]
    )
    collectives = dp_collectives_s(base, (dense, expert), base_placement, hw, train.precision)
    params = tuple((_spread(d, run), _spread(e, run)) for d, e in base_params)
    layer_s = _layer_seconds(model, c, hw, train, placement)
    logits_s = compute.logits_time_s(model, c, hw)
    return LayerQuantities(
        placement=placement,
        layer_s=layer_s,
        logits_s=logits_s,
        stage_params=params,
        stage_terms=all_stage_terms(model, c, train.runtime, params),
        largest_params=(_spread(dense, run), _spread(expert, run)),
        dp_collectives_s={k: _spread(v, run) for k, v in collectives.items()},
        slowest_stage_s=_slowest_stage(model, c, layer_s, logits_s),
    )
