"""Fit a GPU kind's two constants (GEMM peak efficiency, per-GEMM overhead) on named published rows.

The fit minimises the mean squared log error of predicted vs published
throughput by a coarse-to-fine grid search (two dimensions, bounded, exact
enough at the grid's resolution and free of local-optimiser surprises).
Every row not named in the fit is a prediction; `leave_one_out` refits
without each fit row in turn and predicts it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration.published import PublishedRun
from planner.costmodel.candidates import Candidates
from planner.costmodel.step import estimate_steps
from planner.profiles import Hardware, HardwareProfile
from planner.units import MICRO, TERA

__all__ = ["FIT_GROUPS", "Fit", "fit_constants", "leave_one_out", "predict"]

FIT_GROUPS = ("Narayanan2021_Table1",)
"""Rows the A100 constants are fitted on. Table 2 and Korthikanti 2022 are predictions."""

_EFFICIENCY_RANGE = (0.30, 1.00)
_OVERHEAD_RANGE_US = (0.0, 400.0)


@dataclass(frozen=True, slots=True)
class Fit:
    gemm_peak_efficiency: float
    gemm_overhead_us: float
    rms_log_error: float


def predict(run: PublishedRun, profile: HardwareProfile, hw: Hardware | None = None) -> tuple[float, float]:
    """(hardware TFLOP/s per GPU, step seconds) predicted for a published run."""
    hw = hw or profile.hardware(run.training.precision)
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    steps = estimate_steps(run.model, run.training, c, hw)
    step = float(steps.step_time_s[0])
    return float(steps.hardware_flop[0]) / step / run.num_gpus / TERA, step


def _log_errors(runs: Sequence[PublishedRun], profile: HardwareProfile, eta: float, overhead_us: float) -> np.ndarray:
    errors = []
    for run in runs:
        hw = replace(profile.hardware(run.training.precision), gemm_peak_efficiency=eta, gemm_overhead_s=overhead_us * MICRO)
        tflops, step = predict(run, profile, hw)
        if run.tflops_per_gpu is not None:
            errors.append(np.log(tflops / run.tflops_per_gpu))
        elif run.step_time_s is not None:
            errors.append(np.log(run.step_time_s / step))
    return np.asarray(errors)


def fit_constants(runs: Sequence[PublishedRun], profile: HardwareProfile, rounds: int = 4) -> Fit:
    """Grid-search (eta, t0) minimising the RMS log error over `runs`; each round zooms 4x."""
    lo_e, hi_e = _EFFICIENCY_RANGE
    lo_t, hi_t = _OVERHEAD_RANGE_US
    best = (np.inf, lo_e, lo_t)
    for _ in range(rounds):
        for eta in np.linspace(lo_e, hi_e, 15):
            for t0 in np.linspace(lo_t, hi_t, 15):
                rms = float(np.sqrt(np.mean(_log_errors(runs, profile, eta, t0) ** 2)))
                if rms < best[0]:
                    best = (rms, float(eta), float(t0))
        span_e, span_t = (hi_e - lo_e) / 4, (hi_t - lo_t) / 4
        lo_e, hi_e = max(best[1] - span_e / 2, 0.01), min(best[1] + span_e / 2, 1.0)
        lo_t, hi_t = max(best[2] - span_t / 2, 0.0), best[2] + span_t / 2
    return Fit(gemm_peak_efficiency=round(best[1], 4), gemm_overhead_us=round(best[2], 2), rms_log_error=best[0])


def leave_one_out(runs: Sequence[PublishedRun], profile: HardwareProfile) -> dict[str, Fit]:
    """For each run, the constants fitted on all the others."""
    return {run.id: fit_constants([r for r in runs if r.id != run.id], profile, rounds=3) for run in runs}
