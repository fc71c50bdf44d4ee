"""What one pipeline stage costs as a function of its layer count, read off the cost model.

Stage time and memory are affine in the stage's layer count n: time = n * a
(+ the logits on the last stage); memory = intercept + n * slope, with a
different intercept and slope for the first, middle and last stage (embedding,
logits, in-flight micro-batches). The slope and intercept are measured from
the cost model at n = 1 and n = 2, so the partitioner never re-derives a formula.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import memory_by_stage
from planner.costmodel.shared import LAYER_KEYS, layer_quantities
from planner.layout import Layout
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["StageCosts", "stage_costs"]

FIRST, MIDDLE, LAST = 0, 1, 2


@dataclass(frozen=True, slots=True)
class StageCosts:
    """Per-stage-kind cost coefficients (index FIRST, MIDDLE, LAST) for one layout."""

    layer_time_s: float
    last_extra_s: float
    memory_intercept_bytes: tuple[float, float, float]
    memory_per_layer_bytes: tuple[float, float, float]
    capacity_bytes: float

    def stage_time_s(self, kind: int, layers: int) -> float:
        return layers * self.layer_time_s + (self.last_extra_s if kind == LAST else 0.0)

    def stage_memory_bytes(self, kind: int, layers: int) -> float:
        return self.memory_intercept_bytes[kind] + layers * self.memory_per_layer_bytes[kind]


def stage_costs(model: ModelSpec, train: TrainingSpec, layout: Layout, hw: Hardware) -> StageCosts:
    """Coefficients of the stage-time and stage-memory lines for `layout` (pp >= 2)."""
    assert layout.pp >= 2, "a single stage has nothing to partition"
    c = Candidates.from_layouts([layout], model.num_layers, train.global_batch_size)
    q = layer_quantities(model, train, c, hw)
    layer_time = float(np.sum([q.layer_s[k] for k in LAYER_KEYS], axis=0)[0])
    at = [_memory_at(model, train, c, hw, n) for n in (1, 2)]
    slope = tuple(float(b - a) for a, b in zip(at[0], at[1], strict=True))
    intercept = tuple(float(a - s) for a, s in zip(at[0], slope, strict=True))
    return StageCosts(
        layer_time_s=layer_time,
        last_extra_s=float(q.logits_s[0]),
        memory_intercept_bytes=(intercept[0], intercept[1], intercept[2]),
        memory_per_layer_bytes=(slope[0], slope[1], slope[2]),
        capacity_bytes=hw.hbm_bytes,
    )


def _memory_at(model: ModelSpec, train: TrainingSpec, c: Candidates, hw: Hardware, layers: int) -> list[float]:
    """Peak bytes of a first, middle and last stage (FIRST, MIDDLE, LAST order) holding `layers` layers."""
    n = np.full_like(c.tp, layers)
    with_layers = replace(c, stage_layers=n, first_stage_layers=n, last_stage_layers=n)
    q = layer_quantities(model, train, with_layers, hw)
    first, last, middle = memory_by_stage(
        model, with_layers, train.precision, q.stage_params, q.activation_bytes, q.working_bytes
    )
    return [float(s.peak[0]) for s in (first, middle, last)]
