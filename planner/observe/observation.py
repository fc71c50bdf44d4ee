"""What a training log yields: the run's estimate-request fields, the measured step time and how it was taken.

`Observation.body()` is the body of `POST /v1/observations`: the estimate request's `model`, `cluster`,
`training`, `layout` and `framework`, plus `measured` and `source`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NoReturn

from planner.errors import InvalidSpecError

__all__ = ["LogFormat", "Observation", "StepTiming", "log_lines", "refuse"]


class LogFormat(StrEnum):
    """The log formats `planner observe` reads."""

    MEGATRON = "megatron"
    """Megatron-LM `pretrain_gpt.py`: argument dump and `elapsed time per iteration (ms)` lines."""
    NEMO = "nemo"
    """NeMo 2 / Megatron-Bridge: the task configuration YAML and the same Megatron-style iteration lines."""
    TORCHTITAN = "torchtitan"
    """TorchTitan `torchtitan.train` (v0.2.2, v0.3.0): device-mesh line, the model, `step: N ... tps: ...` lines."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTiming:
    """The steady-state step time of a log: median over the logged intervals after warm-up."""

    step_time_s: float
    """Median of the intervals' mean step times."""
    spread: float
    """Interquartile range over median (0: every interval the same)."""
    intervals_used: int
    intervals_skipped: int
    first_iteration: int
    """First iteration of the first interval used (after warm-up)."""
    last_iteration: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """One measured run recovered from a log."""

    log_format: LogFormat
    request: dict[str, Any]
    """The estimate request's fields: model (explicit shape), cluster, training, layout, framework."""
    timing: StepTiming
    peak_memory_gib: float | None = None
    tokens_per_s: float | None = None
    file: str = ""
    notes: list[str] = field(default_factory=list)
    """Where the log's run departs from what the planner can express (e.g. partial recompute)."""

    def body(self) -> dict[str, Any]:
        measured: dict[str, float] = {"step_time_s": self.timing.step_time_s}
        if self.peak_memory_gib is not None:
            measured["peak_memory_gib"] = self.peak_memory_gib
        if self.tokens_per_s is not None:
            measured["tokens_per_s"] = self.tokens_per_s
        t = self.timing
        note = (
            f"median of {t.intervals_used} logged intervals (iterations {t.first_iteration}-{t.last_iteration},"
            f" {t.intervals_skipped} warm-up intervals skipped), IQR/median {t.spread:.3f}"
        )
        source = {
            "kind": "log",
            "framework": self.log_format.value,
            "file": self.file,
            "note": "; ".join([note, *self.notes]),
        }
        return {**self.request, "measured": measured, "source": source}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RANK_PREFIX = re.compile(r"^\[(?:default)?(?:rank)?\d+\]:")


def log_lines(text: str) -> list[str]:
    """The log's lines without terminal colours and without torchrun's `--tee` prefix (`[rank0]:`, `[default0]:`)."""
    return [_RANK_PREFIX.sub("", _ANSI.sub("", line)) for line in text.splitlines()]


def refuse(message: str) -> NoReturn:
    """A log the planner cannot take: the message says what is missing or wrong."""
    raise InvalidSpecError("log", message)
