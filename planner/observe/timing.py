"""The steady-state step time of a log: skip warm-up, take the median, report the spread.

The logs print one line per logging interval: the iteration (or step) number at its end and the mean time
per iteration over the interval. The first interval holds start-up work (CUDA context, NCCL communicators,
allocator growth, compilation), so warm-up is skipped and the median, not the mean, is taken: one slow
interval (a checkpoint save, an evaluation) moves it at most one rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.observe.observation import StepTiming, refuse

__all__ = ["MIN_INTERVALS", "WARMUP_FRACTION", "Interval", "steady_state", "warmup_end"]

MIN_INTERVALS = 3
"""Fewest intervals after warm-up from which a step time is taken (a median of fewer says little)."""
WARMUP_FRACTION = 0.1
"""By default intervals ending within the first 10% of the logged iterations are warm-up."""


@dataclass(frozen=True, slots=True)
class Interval:
    """One logged interval: the iteration it ends at and its mean seconds per iteration."""

    iteration: int
    step_time_s: float


def warmup_end(intervals: Sequence[Interval], skip: int | None) -> int:
    """Last warm-up iteration: `skip` if given, else max(10% of the last logged iteration, the first interval's end)."""
    if skip is not None:
        return skip
    return max(math.ceil(WARMUP_FRACTION * intervals[-1].iteration), intervals[0].iteration)


def _check_one_run(intervals: Sequence[Interval]) -> None:
    for before, after in zip(intervals, intervals[1:], strict=False):
        if after.iteration <= before.iteration:
            refuse(
                f"iteration {after.iteration} follows iteration {before.iteration}: the log holds more than one run"
                " (a restart or concatenated logs); split it and import each run"
            )


def steady_state(intervals: Sequence[Interval], skip: int | None = None) -> StepTiming:
    """Median step time of the intervals ending after warm-up, with IQR / median as the spread.

    Refuses a log whose iterations do not increase (two runs) or with fewer than MIN_INTERVALS intervals left.
    """
    if not intervals:
        refuse("no iteration timing lines in the log")
    _check_one_run(intervals)
    end = warmup_end(intervals, skip)
    used = [i for i in intervals if i.iteration > end]
    if len(used) < MIN_INTERVALS:
        refuse(
            f"{len(used)} logged intervals after warm-up (iterations <= {end} skipped, {len(intervals)} logged);"
            f" at least {MIN_INTERVALS} are needed"
        )
    times = np.array([i.step_time_s for i in used])
    median = float(np.median(times))
    q1, q3 = np.percentile(times, [25, 75])
    first = intervals[len(intervals) - len(used) - 1].iteration + 1 if len(used) < len(intervals) else 1
    return StepTiming(
        step_time_s=median,
        spread=float(q3 - q1) / median,
        intervals_used=len(used),
        intervals_skipped=len(intervals) - len(used),
        first_iteration=first,
        last_iteration=used[-1].iteration,
    )
