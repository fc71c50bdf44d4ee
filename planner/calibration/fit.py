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

The constants are named in one place: `BOUNDS` (their plausible ranges),
`_hardware_at` (grid point -> the cost model's `Hardware`), `constants_of` /
`with_constants` (profile <-> values) and `calibration_of` / `with_fit` (fit ->
a profile's `calibration` block). Renaming them touches only those. A third
constant, the network's efficiency, is fitted only by a site calibration
(`planner.calibration.site`); the built-in fit keeps the two of DESIGN.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.calibration.published import PublishedRun
from planner.costmodel.candidates import RECOMPUTE_CODE, Candidates
from planner.costmodel.flops import hardware_flop_per_sequence
from planner.costmodel.step import estimate_steps
from planner.profiles import DEFAULT_CALIBRATION, Calibration, Hardware, HardwareProfile
from planner.units import MICRO, TERA

__all__ = [
    "BOUNDS",
    "FIT_SETS",
    "GEMM_OVERHEAD_US",
    "GEMM_PEAK_EFFICIENCY",
    "NETWORK_EFFICIENCY",
    "TRANSFERS",
    "Bound",
    "Fit",
    "calibration_of",
    "constants_of",
    "fit_constants",
    "fit_rows",
    "fit_values",
    "grid_search",
    "leave_one_out",
    "log_errors",
    "measured_step_s",
    "predict",
    "with_constants",
    "with_fit",
]

FIT_SETS: dict[str, tuple[str, ...]] = {
    "A100": ("Narayanan2021_Table1",),
    "H100": ("MegatronLM_README_H100_2024", "NeMo_PerfSummary_24.07"),
    "GB200": ("MegatronBridge_PerfSummary_26.04.01",),
}
"""Per GPU kind, the sources (`group`s) its two constants are fitted on. Every other row is a prediction.

A100: Narayanan 2021 Table 1 (10 rows, 1.7B-1T). H100: the Megatron-LM README's
weak-scaling table (9 rows, 1.7B-462B, July 2024, bf16) and NeMo 24.07's performance summary (12 FP8 rows,
GPT-3 5B-175B, Llama 2 / 3, Nemotron 8B-340B on 8-512 GPUs; NVIDIA/NeMo v2.1.0
docs/source/performance/performance_summary.md), one fit over both. GB200: the Megatron-Bridge
performance summary of NeMo 26.04.01 (its 4 GB200 rows: Llama 3 70B MXFP8 on 64 GPUs
at tp 2 pp 4, Llama 3 70B FP8 on 64 with Megatron-FSDP and 40 of 80 layers' activations
offloaded, Llama 3.1 405B FP8 and MXFP8 on 256). Nemotron-4
340B and the Megatron-Bridge rows on H100, and the NeMo 25.11 rows on GB200 and
B200, are predictions.
"""

TRANSFERS: dict[str, str] = {"H200": "H100", "B200": "GB200", "MI300X": "H100"}
"""GPU kinds with no fit of their own and the kind whose constants they reuse (stated in each profile).

H200 is an H100 die with more, faster HBM; B200 is the GB200's Blackwell GPU at a
lower power limit (each profile states its own peaks, so eta transfers as a
fraction of them), and its rows (NeMo 25.11) are predictions with GB200's
constants. MI300X has no fit set and takes the H100's.
"""

GEMM_PEAK_EFFICIENCY = "gemm_peak_efficiency"
GEMM_OVERHEAD_US = "gemm_overhead_us"
NETWORK_EFFICIENCY = "network_efficiency"
"""`efficiency.network` of a profile: NCCL bus bandwidth over the NICs / line rate."""


@dataclass(frozen=True, slots=True)
class Bound:
    """The physically plausible range of one fitted constant; a fit never leaves it."""

    lower: float
    upper: float
    unit: str
    decimals: int
    """A fitted value is rounded to this many decimals (finer than the final grid step)."""
    reason: str


BOUNDS: dict[str, Bound] = {
    GEMM_PEAK_EFFICIENCY: Bound(
        0.30,
        1.00,
        "fraction of peak",
        4,
        "a whole-wave tensor-core GEMM cannot beat the datasheet peak (1.0); below 0.30 the GEMM is not running"
        " on tensor cores at all (the A100 and H100 fits give 0.73 and 0.65, Narayanan 2021 Table 1 and the"
        " Megatron-LM README's H100 table).",
    ),
    GEMM_OVERHEAD_US: Bound(
        0.0,
        20.0,
        "us",
        2,
        "a kernel's own prologue and pipeline fill is microseconds (NVIDIA blog 'Getting Started with CUDA"
        " Graphs', 2019: a whole short kernel takes 2.9 us); the host's launch cost is the separate floor of"
        " costmodel.host, not this constant.",
    ),
    NETWORK_EFFICIENCY: Bound(
        0.30,
        0.98,
        "fraction of line rate",
        4,
        "the nccl-tests rows in planner/data/published_runs.json reach 0.75-0.80 of the NICs' line rate"
        " across nodes (NVIDIA/nccl issues 495 and 1221); 0.98 leaves only the packet headers of a 4 KiB"
        " InfiniBand MTU; below 0.30 the fabric is misconfigured (e.g. NCCL fell back to TCP sockets), a fault"
        " to fix rather than a constant to calibrate.",
    ),
}
"""Each fitted constant's range, with the reason for it."""

_BUILT_IN = (GEMM_PEAK_EFFICIENCY, GEMM_OVERHEAD_US)
"""The two constants the built-in calibration fits per GPU kind (DESIGN.md: at most two)."""


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


def measured_step_s(run: PublishedRun) -> float:
    """The run's measured step time, seconds: as published, or implied by its published TFLOP/s per GPU
    in the papers' convention (`published_flop`)."""
    if run.step_time_s is not None:
        return run.step_time_s
    assert run.tflops_per_gpu is not None, run.id
    return published_flop(run) / (run.tflops_per_gpu * TERA * run.num_gpus)


def _hardware_at(profile: HardwareProfile, base: Hardware, values: Mapping[str, np.ndarray]) -> Hardware:
    """The cost model's hardware with the given constants set (arrays that broadcast like candidates);
    constants not in `values` keep the profile's."""
    update: dict[str, np.ndarray] = {}
    if GEMM_PEAK_EFFICIENCY in values:
        update["gemm_peak_efficiency"] = values[GEMM_PEAK_EFFICIENCY]
    if GEMM_OVERHEAD_US in values:
        update["gemm_overhead_s"] = values[GEMM_OVERHEAD_US] * MICRO
    if NETWORK_EFFICIENCY in values:
        per_unit = base.nic_bytes_per_s_per_gpu / profile.efficiency.network
        update["nic_bytes_per_s_per_gpu"] = per_unit * values[NETWORK_EFFICIENCY]
    return replace(base, **update)  # type: ignore[arg-type]


def constants_of(profile: HardwareProfile) -> dict[str, float]:
    """The profile's value of every constant in `BOUNDS` (`DEFAULT_CALIBRATION` when it carries none)."""
    cal = profile.calibration or DEFAULT_CALIBRATION
    return {
        GEMM_PEAK_EFFICIENCY: cal.gemm_peak_efficiency,
        GEMM_OVERHEAD_US: cal.gemm_overhead_us,
        NETWORK_EFFICIENCY: profile.efficiency.network,
    }


def with_constants(profile: HardwareProfile, values: Mapping[str, float]) -> HardwareProfile:
    """The profile with the given constants replaced (calibration block and `efficiency.network`), unvalidated."""
    cal = profile.calibration or DEFAULT_CALIBRATION
    cal_update = {k: v for k, v in values.items() if k in _BUILT_IN}
    eff_update = {"network": values[NETWORK_EFFICIENCY]} if NETWORK_EFFICIENCY in values else {}
    return profile.model_copy(
        update={
            "calibration": cal.model_copy(update=cal_update),
            "efficiency": profile.efficiency.model_copy(update=eff_update),
        }
    )


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
    hw = hw or run.hardware(profile)
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    steps = estimate_steps(run.model, run.training, c, hw)
    step = float(steps.step_time_s[0])
    return published_flop(run) / step / run.num_gpus / TERA, step


def log_errors(run: PublishedRun, profile: HardwareProfile, values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Log error (log of predicted / published throughput) of one run at every grid point at once: `values`
    holds one array per constant set, all of one length (the constants broadcast like candidates)."""
    hw = _hardware_at(profile, run.hardware(profile), values)
    size = next(iter(values.values())).shape[0]
    one = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    grid = one.take(np.zeros(size, dtype=np.int64))
    steps = estimate_steps(run.model, run.training, grid, hw)
    step = steps.step_time_s
    if run.tflops_per_gpu is not None:
        return np.log(published_flop(run) / step / run.num_gpus / TERA / run.tflops_per_gpu)
    assert run.step_time_s is not None
    return np.log(run.step_time_s / step)


Objective = Callable[[list[np.ndarray]], np.ndarray]
"""Scores (lower is better) of grid points given as one array of values per axis."""


def grid_search(
    objective: Objective, bounds: Sequence[tuple[float, float]], rounds: int, points: int, zoom: float = 4
) -> tuple[list[float], float]:
    """The best point of `objective` and its score by a coarse-to-fine grid search inside `bounds`.

    Each round lays `points` values per axis over the current window (the first window is `bounds`),
    keeps the best point so far and shrinks the window `zoom` times around it, clipped to `bounds`: no
    point outside them is ever scored. The final grid step per axis is at most
    (upper - lower) / (points - 1) / zoom**(rounds - 1).
    """
    lo, hi = [b[0] for b in bounds], [b[1] for b in bounds]
    best, best_score = list(lo), np.inf
    for _ in range(rounds):
        axes = [np.linspace(a, b, points) for a, b in zip(lo, hi, strict=True)]
        grid = [g.ravel() for g in reversed(np.meshgrid(*reversed(axes), indexing="ij"))]  # first axis fastest
        scores = objective(grid)
        i = int(np.argmin(scores))
        if scores[i] < best_score:
            best, best_score = [float(g[i]) for g in grid], float(scores[i])
        spans = [(b - a) / zoom for a, b in zip(lo, hi, strict=True)]
        lo = [max(x - s / 2, b[0]) for x, s, b in zip(best, spans, bounds, strict=True)]
        hi = [min(x + s / 2, b[1]) for x, s, b in zip(best, spans, bounds, strict=True)]
    return best, best_score


def fit_values(
    runs: Sequence[PublishedRun],
    profile: HardwareProfile,
    free: Sequence[str],
    rounds: int = 5,
    points: int = 21,
    zoom: float = 4,
) -> tuple[dict[str, float], float]:
    """The `free` constants (names in `BOUNDS`) minimising the RMS log error over `runs`, each within its
    bounds and rounded to its decimals, and that RMS log error; the other constants keep the profile's."""

    def rms(grid: list[np.ndarray]) -> np.ndarray:
        values = dict(zip(free, grid, strict=True))
        errors = np.stack([log_errors(run, profile, values) for run in runs])
        return np.asarray(np.sqrt(np.mean(errors**2, axis=0)))

    best, score = grid_search(rms, [(BOUNDS[k].lower, BOUNDS[k].upper) for k in free], rounds, points, zoom)
    return {k: round(v, BOUNDS[k].decimals) for k, v in zip(free, best, strict=True)}, score


def fit_constants(runs: Sequence[PublishedRun], profile: HardwareProfile, rounds: int = 5, points: int = 21) -> Fit:
    """Grid-search (eta, t0) minimising the RMS log error over `runs` (`fit_values` of the built-in two)."""
    values, score = fit_values(runs, profile, _BUILT_IN, rounds, points)
    return Fit(
        gemm_peak_efficiency=values[GEMM_PEAK_EFFICIENCY],
        gemm_overhead_us=values[GEMM_OVERHEAD_US],
        rms_log_error=score,
    )


def leave_one_out(runs: Sequence[PublishedRun], profile: HardwareProfile) -> dict[str, Fit]:
    """For each run, the constants fitted on all the others."""
    return {run.id: fit_constants([r for r in runs if r.id != run.id], profile) for run in runs}
