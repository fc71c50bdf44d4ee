"""The work one plan request may do, counted in work done, never in time: the same request gives the same answer.

A clock budget made the answer depend on the machine and its load; this one
counts what the search does, in the order it does it, so where it truncates,
it truncates at the same place everywhere, and says so (`SearchStats.truncated_by`).
Sized so that the worst legal requests finish within 2 s on the 2-core
reference machine (bench/bench_worst.py, README "Limits").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.constraints.partition import SPLIT_WORK_PER_REQUEST, SplitWork

__all__ = ["CANDIDATES", "DIAGNOSIS", "MAX_EVALUATED", "STAGE_SPLIT", "WorkBudget"]

MAX_EVALUATED = 3_000_000
"""Candidates the cost model may evaluate for one request: the search over every GPU count, then the
diagnosis's re-searches. Equal to `space.MAX_CANDIDATES`, so a single-count (step-time) search always
completes; 3,000,000 took up to 2.0 s on the reference machine (bench/bench_worst.py)."""

CANDIDATES = "candidates"
"""`truncated_by` reason: the candidate budget ran out before the space (or the GPU counts) did."""
STAGE_SPLIT = "stage_split"
"""`truncated_by` reason: CP-SAT's work limit cut a stage-split solve short (that plan may keep a worse split)."""
DIAGNOSIS = "diagnosis"
"""`truncated_by` reason: the candidate budget ran out before every constraint of the diagnosis was tried."""


@dataclass(slots=True)
class WorkBudget:
    """What is left of one request's work; spent in the order the search visits candidates and problems."""

    candidates: int = MAX_EVALUATED
    split: SplitWork = field(default_factory=lambda: SplitWork(SPLIT_WORK_PER_REQUEST))
    truncated_by: list[str] = field(default_factory=list)

    def spend(self, evaluated: int) -> None:
        self.candidates = max(0, self.candidates - evaluated)

    def truncate(self, reason: str) -> None:
        if reason not in self.truncated_by:
            self.truncated_by.append(reason)

    def reasons(self) -> list[str]:
        """Why the answer is incomplete, in the order the limits were hit; empty when it is complete."""
        out = list(self.truncated_by)
        if self.split.truncated and STAGE_SPLIT not in out:
            out.append(STAGE_SPLIT)
        return out
