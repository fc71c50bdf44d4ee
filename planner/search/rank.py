"""Ranking: by the objective, ties broken deterministically toward the simpler layout."""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np

from planner.costmodel.candidates import IntArray
from planner.search.evaluate import Evaluated

__all__ = ["Objective", "objective_value", "rank"]


class Objective(StrEnum):
    STEP_TIME = "step_time"
    """Fastest optimizer step on all the GPUs given."""
    GPU_EFFICIENCY = "gpu_efficiency"
    """Most tokens per GPU-second; the GPU count is an upper bound."""


def objective_value(ev: Evaluated, objective: Objective) -> np.ndarray:
    """Lower is better: step seconds, or GPU-seconds per step (inverse tokens per GPU-second)."""
    if objective is Objective.STEP_TIME:
        return ev.step_time_s
    return ev.step_time_s * ev.num_gpus


def rank(
    ev: Evaluated,
    capacity_bytes: float,
    objective: Objective,
    top: int | None = None,
    max_step_s: float = math.inf,
) -> IntArray:
    """Indices of the candidates that fit and step within `max_step_s`, best first (the best `top`, when given).

    Ties (equal objective) go to the simpler layout: fewer GPUs, then no
    context or expert parallelism, no interleaving, less pipeline, less tensor
    parallelism, lower ZeRO stage, less recomputation, no sequence
    parallelism, smaller micro-batch.
    """
    fits = np.flatnonzero((ev.peak_bytes <= capacity_bytes) & (ev.step_time_s <= max_step_s))
    value = objective_value(ev, objective)[fits]
    if top is not None and len(fits) > top:
        kth = np.partition(value, top - 1)[top - 1]
        keep = value <= kth
        fits, value = fits[keep], value[keep]
    c = ev.take(fits)
    keys = (
        c.micro_batch_size,
        c.sequence_parallel,
        c.recompute,
        c.zero_stage,
        c.tp,
        c.pp,
        c.vp,
        c.ep,
        c.etp,
        c.cp,
        ev.num_gpus[fits],
        value,
    )
    ordered = fits[np.lexsort(keys)]
    return ordered if top is None else ordered[:top]
