"""Fit a GPU kind's two constants (GEMM peak efficiency eta, per-GEMM fixed GPU time t0) on named published rows.

eta is the fraction of peak a large, whole-wave GEMM reaches; t0 the fixed
GPU time of one tensor-core kernel (`costmodel.compute.tensor_core_time_s`),
added after tile and wave quantisation. t0 is searched over 0-20 us: a
kernel's own prologue and pipeline fill is microseconds (NVIDIA blog "Getting
Started with CUDA Graphs", 2019: a whole short kernel takes 2.9 us), and the
host's launch cost, which a free t0 used to absorb (127 us), is now the
separate floor of `costmodel.host` (stated, not fitted), overlapping GPU work
instead of adding to it. Table 1 barely separates t0 from eta (RMS log error
0.022 with t0 free at 89 us, 0.026 under the bound).

The fit minimises the mean squared log error of predicted vs published
throughput by a coarse-to-fine grid search (two dimensions, bounded, exact
enough at the grid's resolution and free of local-optimiser surprises).
Each GPU kind with published rows is fitted on the sources named in
`FIT_SETS`; every other row is a prediction. `leave_one_out` refits without
each fit row in turn and predicts it; the report also refits without each
source (leave-one-source-out).

The two constants are named in one place: `Fit`, `_hardware_at` (grid point
-> the cost model's `Hardware`) and `calibration_of` / `with_fit` (fit ->
a profile's `calibration` block). Renaming them touches only those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration.published import PublishedRun
from planner.costmodel.candidates import RECOMPUTE_CODE, Candidates
from planner.costmodel.flops import hardware_flop_per_sequence
from planner.costmodel.step import estimate_steps
from planner.profiles import Calibration, Hardware, HardwareProfile
from planner.units import MICRO, TERA

__all__ = [
    "FIT_SETS",
    "TRANSFERS",
    "Fit",
    "calibration_of",
    "fit_constants",
    "fit_rows",
    "leave_one_out",
    "predict",
    "with_fit",
]

FIT_SETS: dict[str, tuple[str, ...]] = {
    "A100": ("Narayanan2021_Table1",),
    "H100": ("MegatronLM_README_H100_2024",),
}
"""Per GPU kind, the sources (`group`s) its two constants are fitted on. Every other row is a prediction.

A100: Narayanan 2021 Table 1 (10 rows, 1.7B-1T). H100: the Megatron-LM README's
weak-scaling table (9 rows, 1.7B-462B, July 2024). Nemotron-4 340B and the
Megatron-Bridge rows on H100 are predictions.
"""

TRANSFERS: dict[str, str] = {"H200": "H100", "B200": "H100", "GB200": "H100", "MI300X": "H100"}
"""GPU kinds with no fit of their own and the kind whose constants they reuse (stated in each profile).

H200 is an H100 die with more, faster HBM; B200 / GB200 (Blackwell) and MI300X
have no fit set yet, so they take the newest fitted generation. GB200 rows in
the data file are predictions with these transferred constants.
"""

_EFFICIENCY_RANGE = (0.30, 1.00)
_OVERHEAD_RANGE_US = (0.0, 20.0)


@dataclass(frozen=True, slots=True)
class Fit:
    gemm_peak_efficiency: float
    gemm_overhead_us: float
    rms_log_error: float


def published_flop(run: PublishedRun) -> float:
    """Hardware flop of one step of a published run as the 2021/2022 papers count it: the full s x s
    attention matrix (Narayanan 2021 Eq. 3, Korthikanti 2022 App. A), recomputation included."""
    mode = RECOMPUTE_CODE[run.layout.recompute]
    return run.training.global_batch_size * hardware_flop_per_sequence(run.model, mode, full_attention=True)


def _hardware_at(base: Hardware, eta: np.ndarray | float, overhead_s: np.ndarray | float) -> Hardware:
    """The cost model's hardware with the two fitted constants set (scalars, or arrays that broadcast)."""
    return replace(base, gemm_peak_efficiency=eta, gemm_overhead_s=overhead_s)  # type: ignore[arg-type]


def calibration_of(fit: Fit, fitted_on: Sequence[str], transferred_from: str | None = None) -> Calibration:
    """A profile's calibration block holding `fit`, stamped with its rows (or the kind it was transferred from)."""
    return Calibration(
        gemm_peak_efficiency=fit.gemm_peak_efficiency,
        gemm_overhead_us=fit.gemm_overhead_us,
        fitted_on=list(fitted_on),
        fitted_by="planner calibrate --write",
        transferred_from=transferred_from,
    )


def with_fit(profile: HardwareProfile, fit: Fit) -> HardwareProfile:
    """The profile with its two constants replaced by `fit` (for predicting held-out rows)."""
    return profile.model_copy(update={"calibration": calibration_of(fit, [])})


def fit_rows(runs: Sequence[PublishedRun], gpu_kind: str) -> list[PublishedRun]:
    """The runs a GPU kind's constants are fitted on (its FIT_SETS sources), in file order."""
    return [r for r in runs if r.gpu_kind == gpu_kind and r.group in FIT_SETS.get(gpu_kind, ())]


def predict(run: PublishedRun, profile: HardwareProfile, hw: Hardware | None = None) -> tuple[float, float]:
    """(TFLOP/s per GPU in the papers' convention, `published_flop`; step seconds) predicted for a published run."""
    hw = hw or profile.hardware(run.training.precision)
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    steps = estimate_steps(run.model, run.training, c, hw)
    step = float(steps.step_time_s[0])
    return published_flop(run) / step / run.num_gpus / TERA, step


def _grid_log_errors(run: PublishedRun, profile: HardwareProfile, eta: np.ndarray, t0_s: np.ndarray) -> np.ndarray:
    """Log error of one run at every grid point at once (the constants broadcast like candidates)."""
    hw = _hardware_at(profile.hardware(run.training.precision), eta, t0_s)
    one = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    grid = one.take(np.zeros(eta.shape[0], dtype=np.int64))
    steps = estimate_steps(run.model, run.training, grid, hw)
    step = steps.step_time_s
    if run.tflops_per_gpu is not None:
        return np.log(published_flop(run) / step / run.num_gpus / TERA / run.tflops_per_gpu)
    assert run.step_time_s is not None
    return np.log(run.step_time_s / step)


def fit_constants(runs: Sequence[PublishedRun], profile: HardwareProfile, rounds: int = 5, points: int = 21) -> Fit:
    """Grid-search (eta, t0) minimising the RMS log error over `runs`; each round zooms in 4x."""
    lo_e, hi_e = _EFFICIENCY_RANGE
    lo_t, hi_t = _OVERHEAD_RANGE_US
    best = (np.inf, lo_e, lo_t)
    for _ in range(rounds):
        eta, t0 = (g.ravel() for g in np.meshgrid(np.linspace(lo_e, hi_e, points), np.linspace(lo_t, hi_t, points)))
        errors = np.stack([_grid_log_errors(run, profile, eta, t0 * MICRO) for run in runs])
        rms = np.sqrt(np.mean(errors**2, axis=0))
        i = int(np.argmin(rms))
        if rms[i] < best[0]:
            best = (float(rms[i]), float(eta[i]), float(t0[i]))
        span_e, span_t = (hi_e - lo_e) / 4, (hi_t - lo_t) / 4
        lo_e, hi_e = max(best[1] - span_e / 2, 0.01), min(best[1] + span_e / 2, 1.0)
        lo_t, hi_t = max(best[2] - span_t / 2, 0.0), min(best[2] + span_t / 2, _OVERHEAD_RANGE_US[1])
    return Fit(gemm_peak_efficiency=round(best[1], 4), gemm_overhead_us=round(best[2], 2), rms_log_error=best[0])


def leave_one_out(runs: Sequence[PublishedRun], profile: HardwareProfile) -> dict[str, Fit]:
    """For each run, the constants fitted on all the others."""
    return {run.id: fit_constants([r for r in runs if r.id != run.id], profile) for run in runs}
