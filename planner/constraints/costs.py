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
from planner.costmodel.params import StageKind
from planner.costmodel.shared import layer_quantities
from planner.layout import Layout, by_training
from planner.numerics import training_numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["FIRST", "LAST", "MIDDLE", "StageCosts", "StageKind", "stage_costs_many"]

FIRST, MIDDLE, LAST = StageKind.FIRST, StageKind.MIDDLE, StageKind.LAST
"""The cost model's stage kinds under the short names the partition code indexes with."""


@dataclass(frozen=True, slots=True)
class StageCosts:
    """Per-stage-kind cost coefficients (indexed by `StageKind`) for one layout."""

    layer_time_s: float
    last_extra_s: float
    memory_intercept_bytes: tuple[float, float, float]
    memory_per_layer_bytes: tuple[float, float, float]
    capacity_bytes: float
    bf16_layers: tuple[int, int, int] = (0, 0, 0)
    """BF16 layers a stage of each kind holds at most (`TrainingSpec.bf16_layers_at_start` on the first,
    `bf16_layers_at_end` on the last)."""
    bf16_layer_extra_s: float = 0.0
    """What one of them takes beyond a quantized layer (`shared.bf16_layer_extra_s`)."""

    def kind_extra_s(self, kind: StageKind) -> float:
        """A stage's seconds beyond its layers at `layer_time_s`: the output layer and loss on the last stage, and
        the BF16 layers' extra on the end stages (a stage holding fewer layers than its BF16 count is still
        charged the count: an upper bound the cost model's estimate of the chosen split then replaces)."""
        logits = self.last_extra_s if kind == StageKind.LAST else 0.0
        return logits + self.bf16_layers[kind] * self.bf16_layer_extra_s

    @property
    def total_extra_s(self) -> float:
        """Every stage's `kind_extra_s` once: the logits and all BF16 layers' extra."""
        return self.last_extra_s + sum(self.bf16_layers) * self.bf16_layer_extra_s

    def stage_time_s(self, kind: StageKind, layers: int) -> float:
        return layers * self.layer_time_s + self.kind_extra_s(kind)

    def stage_memory_bytes(self, kind: StageKind, layers: int) -> float:
        return self.memory_intercept_bytes[kind] + layers * self.memory_per_layer_bytes[kind]


def _by_kind(a: np.ndarray, i: int) -> tuple[float, float, float]:
    """Column i of a (StageKind, layout) array."""
    return float(a[StageKind.FIRST, i]), float(a[StageKind.MIDDLE, i]), float(a[StageKind.LAST, i])


def stage_costs_many(model: ModelSpec, training: TrainingSpec, layouts: list[Layout], hw: Hardware) -> list[StageCosts]:
    """Coefficients of the stage-time and stage-memory lines of each layout (pp >= 2), one vectorised pass per
    training the layouts run (`planner.layout.by_training`: a layout naming its own recompute module set runs apart).

    Each stage kind is evaluated at 1 and 2 layers.
    """
    assert all(x.pp >= 2 for x in layouts), "a single stage has nothing to partition"
    return by_training(training, layouts, lambda run, group: _same_training_costs(model, run, group, hw))


def _same_training_costs(
    model: ModelSpec, training: TrainingSpec, layouts: list[Layout], hw: Hardware
) -> list[StageCosts]:
    k = len(layouts)
    c = Candidates.from_layouts(layouts, model.num_layers, training.global_batch_size)
    twice = c.take(np.concatenate([np.arange(k), np.arange(k)]))
    n = np.repeat([1, 2], k)
    at = replace(twice, stage_layers=n, first_stage_layers=n, last_stage_layers=n)
    qa = layer_quantities(model, training, at, hw)
    # A layer's seconds and the logits' do not depend on the stage's layer count: read them at n = 1.
    layer_time, logits = qa.layer_s.critical_path_s[:k], qa.logits_s[:k]
    bf16_extra = qa.bf16_layer_extra_s.critical_path_s[:k]
    peaks = np.stack([stage.peak for stage in memory_by_stage(at, training_numerics(training, hw), qa.stage_terms)])
    # peaks: (StageKind) x (n=1 block, n=2 block)
    slope = peaks[:, k:] - peaks[:, :k]
    intercept = peaks[:, :k] - slope
    return [
        StageCosts(
            layer_time_s=float(layer_time[i]),
            last_extra_s=float(logits[i]),
            memory_intercept_bytes=_by_kind(intercept, i),
            memory_per_layer_bytes=_by_kind(slope, i),
            capacity_bytes=hw.hbm_bytes,
            bf16_layers=(training.bf16_layers_at_start, 0, training.bf16_layers_at_end),
            bf16_layer_extra_s=float(bf16_extra[i]),
        )
        for i in range(k)
    ]
