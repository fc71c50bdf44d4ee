"""Vectorised evaluation of a candidate space with the cost model, in bounded chunks."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from planner.constraints.space import Space
from planner.costmodel.candidates import Candidates, FloatArray, IntArray
from planner.costmodel.shared import layer_quantities
from planner.costmodel.tables import key_tables, step_time_and_peak
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["CHUNK", "Evaluated", "concatenate", "evaluate"]

CHUNK = 8192
"""Candidates per cost-model call: small enough that the temporaries stay in cache
(bench/bench_plan.py: fastest at 8192 on the 2-core reference machine, ~1.5x faster than 200,000)."""


@dataclass(frozen=True, slots=True)
class Evaluated:
    """Candidates with their step time, peak memory and GPU count, ready to rank."""

    candidates: Candidates
    step_time_s: FloatArray
    peak_bytes: FloatArray
    num_gpus: IntArray
    evaluated: int

    def __len__(self) -> int:
        return len(self.candidates)


def evaluate(
    model: ModelSpec, train: TrainingSpec, space: Space, hw: Hardware, deadline: float | None = None
) -> Evaluated:
    """Step time and peak memory of every candidate in `space`; step time is inf where it does not fit.

    Past `deadline` (a `time.perf_counter()` value) the remaining chunks are
    left unevaluated: their peak and step time are inf and `evaluated` says
    how many were.
    """
    c = space.candidates
    keys = space.layer_candidates
    tables = key_tables(model, train, keys, layer_quantities(model, train, keys, hw), hw)
    steps, peaks = [], []
    for start in range(0, len(c), CHUNK):
        chunk = np.arange(start, min(start + CHUNK, len(c)))
        if deadline is not None and time.perf_counter() > deadline:
            steps.append(np.full(len(chunk), np.inf))
            peaks.append(np.full(len(chunk), np.inf))
            continue
        step, peak = step_time_and_peak(tables, space.layer_index[chunk], c.take(chunk))
        steps.append(np.where(peak <= hw.hbm_bytes, step, np.inf))
        peaks.append(peak)
    empty = np.zeros(0)
    peak_bytes = np.concatenate(peaks) if peaks else empty
    return Evaluated(
        candidates=c,
        step_time_s=np.concatenate(steps) if steps else empty,
        peak_bytes=peak_bytes,
        num_gpus=np.full(len(c), space.num_gpus, dtype=np.int64),
        evaluated=int(np.count_nonzero(np.isfinite(peak_bytes))),
    )


def concatenate(parts: list[Evaluated]) -> Evaluated:
    """One `Evaluated` from several (the GPU-efficiency objective searches several GPU counts)."""
    if len(parts) == 1:
        return parts[0]
    fields = Candidates.__slots__
    return Evaluated(
        candidates=Candidates(**{f: np.concatenate([getattr(p.candidates, f) for p in parts]) for f in fields}),
        step_time_s=np.concatenate([p.step_time_s for p in parts]),
        peak_bytes=np.concatenate([p.peak_bytes for p in parts]),
        num_gpus=np.concatenate([p.num_gpus for p in parts]),
        evaluated=sum(p.evaluated for p in parts),
    )
