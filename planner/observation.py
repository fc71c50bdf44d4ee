"""Physical sanity of a measured run against the planner's own accounting of its work.

A measured step is checked with the estimate of the same layout (`planner.estimate`), so the FLOP count
and the memory capacity are the ones every prediction uses:
- implied hardware TFLOP/s per GPU = the estimate's hardware FLOPs per GPU per step (recompute included,
  the basis of Narayanan et al. 2021 Table 1, arXiv 2104.04473) / the measured step time, at most the
  GPU's datasheet peak for the run's precision;
- measured peak memory per GPU at most the GPU's memory (datasheet HBM);
- measured tokens/s within `TOKENS_PER_S_TOLERANCE` of global_batch_size x seq_length / step time (the
  definition of a step: one optimizer update over the global batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import InvalidSpecError
from planner.estimate import Estimate
from planner.profiles import HardwareProfile
from planner.specs import ModelSpec, TrainingSpec

__all__ = [
    "TOKENS_PER_S_TOLERANCE",
    "Measured",
    "check_measured",
    "implied_hardware_tflops_per_gpu",
    "relative_error",
]

TOKENS_PER_S_TOLERANCE = 0.05
"""Allowed relative gap between a stated tokens/s and global_batch_size x seq_length / step_time_s (logs round
their figures and average over different windows)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    step_time_s: float
    peak_memory_gib: float | None = None
    tokens_per_s: float | None = None


def implied_hardware_tflops_per_gpu(e: Estimate, step_time_s: float) -> float:
    """Hardware TFLOP/s per GPU a step of `step_time_s` would run at: the estimate's work over that time.

    Source: `planner.estimate` (hardware FLOPs per GPU per step = hardware_tflops_per_gpu x step_time_s)."""
    return e.hardware_tflops_per_gpu * e.step_time_s / step_time_s


def check_measured(
    measured: Measured, e: Estimate, model: ModelSpec, training: TrainingSpec, profile: HardwareProfile
) -> None:
    """Raise InvalidSpecError naming the first measured field that no real run could have produced."""
    peak = getattr(profile.gpu.peak_tflops, training.precision.value)
    implied = implied_hardware_tflops_per_gpu(e, measured.step_time_s)
    if peak is not None and implied > peak:
        raise InvalidSpecError(
            "measured.step_time_s",
            f"{measured.step_time_s:g} s per step means {implied:.0f} hardware TFLOP/s per GPU"
            f" ({e.hardware_tflops_per_gpu * e.step_time_s:.4g} TFLOP per GPU per step), above the"
            f" {profile.gpu.name} {training.precision.value} peak of {peak:g} TFLOP/s",
        )
    capacity = profile.gpu.memory_gib
    if measured.peak_memory_gib is not None and measured.peak_memory_gib > capacity:
        raise InvalidSpecError(
            "measured.peak_memory_gib",
            f"{measured.peak_memory_gib:g} GiB is above the {profile.gpu.name}'s {capacity:g} GiB of memory",
        )
    if measured.tokens_per_s is not None:
        tokens = training.global_batch_size * model.seq_length
        expected = tokens / measured.step_time_s
        if abs(measured.tokens_per_s / expected - 1) > TOKENS_PER_S_TOLERANCE:
            raise InvalidSpecError(
                "measured.tokens_per_s",
                f"{measured.tokens_per_s:g} differs by more than {TOKENS_PER_S_TOLERANCE:.0%} from"
                f" global_batch_size x seq_length / step_time_s = {training.global_batch_size} x"
                f" {model.seq_length} / {measured.step_time_s:g} = {expected:.6g}",
            )


def relative_error(predicted: float, measured: float) -> float:
    """predicted / measured - 1: positive when the planner predicts more than was measured."""
    return predicted / measured - 1
