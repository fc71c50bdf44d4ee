"""Predicted vs published, per run and per table, with leave-one-out error: `planner validate`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import mean

from planner.calibration.collectives import BusBandwidthRow, bus_bandwidth_rows
from planner.calibration.figures import FigureCheck, run_figure_checks
from planner.calibration.fit import FIT_GROUPS, fit_constants, leave_one_out, predict
from planner.calibration.published import PublishedRun, published_runs
from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import memory_per_gpu
from planner.profiles import Calibration, HardwareProfile, load_profiles
from planner.units import GIB, TERA

__all__ = ["GainRow", "GroupSummary", "Report", "RunRow", "build_report", "refit"]

VALIDATION_PROFILE = "dgx-a100-80gb"
"""Every published run in the data file ran on Selene (DGX A100 80 GB)."""


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    group: str
    variant: str
    layout: str
    published_tflops: float
    predicted_tflops: float
    published_step_s: float
    predicted_step_s: float
    error: float
    """predicted / published throughput - 1 (equivalently, published / predicted step time - 1)."""
    in_fit: bool
    loo_error: float | None
    peak_memory_gib: float
    capacity_gib: float


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group: str
    variant: str
    rows: int
    mean_abs_error: float
    max_abs_error: float


@dataclass(frozen=True, slots=True)
class GainRow:
    id: str
    published_pct: float
    predicted_pct: float


@dataclass(frozen=True, slots=True)
class Report:
    calibration: Calibration
    runs: list[RunRow]
    groups: list[GroupSummary]
    loo_mean_abs_error: float
    loo_max_abs_error: float
    gains: list[GainRow]
    figures: list[FigureCheck] = field(default_factory=list)
    bus_bandwidth: list[BusBandwidthRow] = field(default_factory=list)
    """Published nccl-tests bus bandwidth against the ring model (`calibration.collectives`)."""


def _layout_text(run: PublishedRun) -> str:
    x = run.layout
    return (
        f"tp{x.tp} pp{x.pp} dp{x.dp} vp{x.vp} b{x.micro_batch_size} B{run.training.global_batch_size}"
        f" {x.recompute.value}{' sp' if x.sequence_parallel else ''}{f' zero{x.zero_stage}' if x.zero_stage else ''}"
    )


def _row(run: PublishedRun, profile: HardwareProfile, loo: Mapping[str, float]) -> RunRow:
    tflops, step = predict(run, profile)
    hardware_flop = tflops * TERA * step * run.num_gpus
    if run.tflops_per_gpu is not None:
        pub_tflops = run.tflops_per_gpu
        pub_step = hardware_flop / (pub_tflops * TERA * run.num_gpus)
    else:
        assert run.step_time_s is not None
        pub_step = run.step_time_s
        pub_tflops = hardware_flop / pub_step / run.num_gpus / TERA
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    memory = memory_per_gpu(run.model, c, run.training.precision, run.training.runtime)
    return RunRow(
        id=run.id,
        group=run.group,
        variant=run.variant,
        layout=_layout_text(run),
        published_tflops=pub_tflops,
        predicted_tflops=tflops,
        published_step_s=pub_step,
        predicted_step_s=step,
        error=pub_step / step - 1,
        in_fit=run.group in FIT_GROUPS,
        loo_error=loo.get(run.id),
        peak_memory_gib=float(memory.peak[0]) / GIB,
        capacity_gib=profile.gpu.memory_gib,
    )


def _groups(rows: list[RunRow]) -> list[GroupSummary]:
    keys = sorted(
        {(r.group, r.variant) for r in rows},
        key=lambda k: [r.id for r in rows].index(next(r.id for r in rows if (r.group, r.variant) == k)),
    )
    out = []
    for group, variant in keys:
        errors = [abs(r.error) for r in rows if (r.group, r.variant) == (group, variant)]
        out.append(GroupSummary(group, variant, len(errors), mean(errors), max(errors)))
    return out


def _gains(rows: list[RunRow], runs: tuple[PublishedRun, ...]) -> list[GainRow]:
    by_id: dict[str, dict[str, RunRow]] = {}
    for r in rows:
        if r.group == "Korthikanti2022":
            by_id.setdefault(r.id, {})[r.variant] = r
    out = []
    for run_id, arms in by_id.items():
        full, sp = arms["full_recompute"], arms["sp_selective"]
        out.append(
            GainRow(
                run_id,
                100 * (full.published_step_s / sp.published_step_s - 1),
                100 * (full.predicted_step_s / sp.predicted_step_s - 1),
            )
        )
    return out


def _loo(runs: tuple[PublishedRun, ...], profile: HardwareProfile) -> dict[str, float]:
    """Error of each fit row predicted with constants fitted on the other fit rows."""
    fit_rows = [r for r in runs if r.group in FIT_GROUPS]
    errors = {}
    for run_id, fit in leave_one_out(fit_rows, profile).items():
        refit = _with_constants(profile, fit.gemm_peak_efficiency, fit.gemm_overhead_us)
        run = next(r for r in fit_rows if r.id == run_id)
        tflops, _ = predict(run, refit)
        assert run.tflops_per_gpu is not None
        errors[run_id] = tflops / run.tflops_per_gpu - 1
    return errors


def _with_constants(profile: HardwareProfile, eta: float, overhead_us: float) -> HardwareProfile:
    cal = Calibration(gemm_peak_efficiency=eta, gemm_overhead_us=overhead_us)
    return profile.model_copy(update={"calibration": cal})


def build_report(
    profile: HardwareProfile, with_figures: bool = True, profiles: Mapping[str, HardwareProfile] | None = None
) -> Report:
    """Validate the profile's calibration against every published run, and the collectives against the
    published bus bandwidths on `profiles` (the built-in profiles when None)."""
    assert profile.calibration is not None, "the validation profile must carry fitted constants"
    runs = published_runs()
    loo = _loo(runs, profile)
    rows = [_row(run, profile, loo) for run in runs]
    return Report(
        calibration=profile.calibration,
        runs=rows,
        groups=_groups(rows),
        loo_mean_abs_error=mean(abs(e) for e in loo.values()),
        loo_max_abs_error=max(abs(e) for e in loo.values()),
        gains=_gains(rows, runs),
        figures=run_figure_checks(profile) if with_figures else [],
        bus_bandwidth=bus_bandwidth_rows(load_profiles() if profiles is None else profiles),
    )


def refit(profile: HardwareProfile) -> Calibration:
    """Constants fitted on every row of FIT_GROUPS, stamped with the rows and the command."""
    rows = [r for r in published_runs() if r.group in FIT_GROUPS]
    fit = fit_constants(rows, profile)
    return Calibration(
        gemm_peak_efficiency=fit.gemm_peak_efficiency,
        gemm_overhead_us=fit.gemm_overhead_us,
        fitted_on=[r.id for r in rows],
        fitted_by="planner calibrate --write",
    )
