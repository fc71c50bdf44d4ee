"""Predicted vs published, per run, per source and per GPU kind, with leave-one-out errors: `planner validate`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from statistics import mean, quantiles

from planner.calibration.accuracy import DECIMALS, AccuracyBand, Workload, workload_of
from planner.calibration.collectives import BusBandwidthRow, bus_bandwidth_rows
from planner.calibration.figures import FigureCheck, run_figure_checks
from planner.calibration.fit import FIT_SETS, calibration_of, fit_constants, fit_rows, leave_one_out, predict, with_fit
from planner.calibration.published import PublishedRun, gpu_kind_of, published_runs
from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import memory_per_gpu
from planner.layout import recompute_text
from planner.profiles import Calibration, HardwareProfile
from planner.units import GIB, TERA

__all__ = [
    "HOLDOUT_ONLY_SOURCES",
    "VALIDATION_PROFILE",
    "VALIDATION_PROFILES",
    "VALIDATION_PROFILES_BY_GPU",
    "GainRow",
    "ErrorStats",
    "GroupSummary",
    "HeldOutAccuracy",
    "KindReport",
    "Report",
    "RunRow",
    "SourceHoldout",
    "accuracy_bands",
    "build_report",
    "error_stats",
    "held_out_error",
    "layout_text",
    "refit",
    "validation_profile_id",
]

VALIDATION_PROFILES: dict[str, str] = {
    "A100": "dgx-a100-80gb",
    "H100": "dgx-h100",
    "B200": "hgx-b200",
    "GB200": "gb200-nvl72",
}
"""The profile each GPU kind's published runs are predicted on (Selene and the sources' DGX systems)."""

VALIDATION_PROFILES_BY_GPU: dict[str, str] = {"A100-SXM4-40GB": "dgx-a100-40gb"}
"""Rows on a GPU that differs from its kind's profile where the cost model sees it (A100 40 GB: 40 GiB of HBM at
1,555 GB/s), predicted on this profile with the kind's constants (the MosaicML A100 40GB table)."""

HOLDOUT_ONLY_SOURCES: frozenset[str] = frozenset(
    {
        "MosaicML_llmfoundry_MPT",
        "MegatronBridge_PerfSummary_26.04.01_MoE",
        "MegatronBridge_PerfSummary_26.04.01_GPT-OSS",
        "MegatronBridge_PerfSummary_26.04.01_Hybrid",
        "MegatronBridge_PerfSummary_26.06_MoE",
        "MegatronBridge_PerfSummary_26.06_GPT-OSS",
        "MegatronBridge_PerfSummary_26.02_NVFP4",
        "MegatronBridge_PerfSummary_26.02.01_NVFP4",
        "MegatronBridge_PerfSummary_26.04.01_NVFP4",
        "MegatronBridge_PerfSummary_26.06_NVFP4",
        "MegatronBridge_Qwen3_30B_Card_2026",
        "NeMo_LongSequence_24.03.01",
        "NeMo_PerfSummary_25.04",
        "NeMo_PerfSummary_25.04_MoE",
        "IBM_fms_fsdp_2024",
    }
)
"""Sources that enter no fit, not even another source's leave-one-source-out refit: they are reported with the
built-in constants and with constants refitted on the kind's other sources, so adding them moves no other figure.
MosaicML's MPT benchmarks (PyTorch FSDP, 191 rows) would otherwise outnumber the Megatron-era sources 6 to 1.
Megatron-Bridge 26.04.01's MoE rows, and the Qwen3 30B-A3B bf16 runs of Megatron-Bridge's model cards (with and
without the all-to-all overlap), judge the dense-fitted constants on MoE layers (token dispatch, per-expert GEMMs,
the overlap; each row's notes list what the model does not price) and fit nothing; so do the same table's GPT-OSS
120B rows (sliding-window attention), kept as a source of their own because the model misses them by 19-73%, and
its Nemotron 3 Nano rows (hybrid Mamba-2 / attention / MoE layers, `costmodel.mamba`). Megatron-Bridge 26.06's GB200
MoE rows (whole-iteration CUDA graphs, grouped expert GEMMs, the all-to-all overlap) fit nothing either; its GPT-OSS
row is again a source of its own. NeMo's long-sequence table (Llama 2 7B FP8 on H100 at 4K-1M tokens, context
parallelism up to 32) judges the attention and the CP ring at lengths no fit row reaches, and fits nothing. NeMo 25.04's
GB200 table (NeMo 2 performance recipes, FP8 current scaling: GPT-3 175B, Llama 3 8B / 70B, Llama 3.1 405B,
Nemotron-4 15B / 340B, and Mixtral 8x7B as a source of its own) judges the GB200 constants on a release and on model
families the fit never saw, and fits nothing. IBM's fms-fsdp table (eager PyTorch FSDP, LLaMA 13B-70B on 128 A100 and
96 H100, each cluster's own network) judges the same constants on a second PyTorch FSDP stack, and fits nothing."""

VALIDATION_PROFILE = VALIDATION_PROFILES["A100"]
"""The A100 profile: Narayanan 2021 and Korthikanti 2022 ran on Selene (DGX A100 80 GB); the figure checks use it."""


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    gpu_kind: str
    group: str
    """The row's source (one published table)."""
    variant: str
    source: str
    layout: str
    published_tflops: float
    predicted_tflops: float
    published_step_s: float
    predicted_step_s: float
    error: float
    """predicted / published throughput - 1 (equivalently, published / predicted step time - 1)."""
    in_fit: bool
    loo_error: float | None
    """Fit rows: the error with constants fitted on the kind's other fit rows."""
    loso_error: float | None
    """The error with constants fitted on the kind's rows from every other source (None: the kind has one source)."""
    peak_memory_gib: float
    capacity_gib: float


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """Mean, 90th percentile and maximum of absolute errors (`error_stats`)."""

    mean: float
    p90: float
    max: float


def error_stats(errors: Sequence[float]) -> ErrorStats:
    """|error| statistics of a non-empty set of errors: the mean, the 90th percentile (linear interpolation over the
    sorted values at rank 1 + 0.9 (n - 1), `statistics.quantiles` with method "inclusive": of 11 values the 10th)
    and the maximum."""
    magnitudes = sorted(abs(e) for e in errors)
    p90 = quantiles(magnitudes, n=10, method="inclusive")[-1] if len(magnitudes) > 1 else magnitudes[0]
    return ErrorStats(mean(magnitudes), p90, magnitudes[-1])


@dataclass(frozen=True, slots=True)
class GroupSummary:
    gpu_kind: str
    group: str
    variant: str
    rows: int
    in_fit: bool
    mean_abs_error: float
    max_abs_error: float
    p90_abs_error: float


@dataclass(frozen=True, slots=True)
class HeldOutAccuracy:
    """Every row of a GPU kind (or of all kinds: `gpu_kind` "all") predicted with constants fitted on no row of its
    source: a prediction row's error, a fit row's leave-one-source-out error (fit rows without one are left out).
    What a held-out check of published runs sees; `moe_rows` of them are mixture-of-experts rows."""

    gpu_kind: str
    rows: int
    moe_rows: int
    mean_abs_error: float
    p90_abs_error: float
    max_abs_error: float


@dataclass(frozen=True, slots=True)
class SourceHoldout:
    """One source predicted with constants fitted on every other source of its GPU kind."""

    gpu_kind: str
    source: str
    rows: int
    fitted_on_sources: list[str]
    gemm_peak_efficiency: float
    gemm_overhead_us: float
    mean_abs_error: float
    max_abs_error: float


@dataclass(frozen=True, slots=True)
class KindReport:
    gpu_kind: str
    profile_id: str
    calibration: Calibration
    fit_sources: list[str]
    loo_mean_abs_error: float | None
    loo_max_abs_error: float | None
    holdouts: list[SourceHoldout]


@dataclass(frozen=True, slots=True)
class GainRow:
    id: str
    published_pct: float
    predicted_pct: float


@dataclass(frozen=True, slots=True)
class Report:
    kinds: list[KindReport]
    runs: list[RunRow]
    groups: list[GroupSummary]
    gains: list[GainRow]
    figures: list[FigureCheck] = field(default_factory=list)
    bus_bandwidth: list[BusBandwidthRow] = field(default_factory=list)
    """Published nccl-tests bus bandwidth against the ring model (`calibration.collectives`)."""
    held_out: list[HeldOutAccuracy] = field(default_factory=list)
    """Per GPU kind and over all kinds, the rows no fit saw (`_held_out`)."""
    bands: list[AccuracyBand] = field(default_factory=list)
    """Per GPU kind and workload, the held-out errors an answer quotes (`accuracy_bands`)."""

    def kind(self, gpu_kind: str) -> KindReport:
        return next(k for k in self.kinds if k.gpu_kind == gpu_kind)


def layout_text(run: PublishedRun) -> str:
    """The run's layout and training settings in one short line (`tp8 pp4 dp32 vp3 b2 B1792 full fp16`); selective
    recompute of named modules shows them (`selective[layernorm,moe_act]`)."""
    x = run.layout
    recompute = recompute_text(x.recompute, run.training.runtime.recompute_modules)
    return (
        f"tp{x.tp} pp{x.pp} dp{x.dp}{f' cp{x.cp}' if x.cp > 1 else ''} vp{x.vp} b{x.micro_batch_size}"
        f" B{run.training.global_batch_size} {recompute}{' sp' if x.sequence_parallel else ''}"
        f"{f' zero{x.zero_stage}' if x.zero_stage else ''} {run.training.precision.value}"
    )


ProfileOf = Callable[[PublishedRun, HardwareProfile], HardwareProfile]
"""The profile one run is predicted on, given its kind's profile (with the constants to use)."""


def validation_profile_id(run: PublishedRun) -> str:
    """The profile a run is predicted on: `VALIDATION_PROFILES_BY_GPU` where its GPU is listed, else its kind's."""
    return VALIDATION_PROFILES_BY_GPU.get(run.gpu, VALIDATION_PROFILES[run.gpu_kind])


def _profile_of(profiles: Mapping[str, HardwareProfile]) -> ProfileOf:
    """`validation_profile_id`'s profile, carrying the constants of its kind's profile."""

    def of(run: PublishedRun, kind_profile: HardwareProfile) -> HardwareProfile:
        profile_id = validation_profile_id(run)
        if profile_id == kind_profile.id:
            return kind_profile
        return profiles[profile_id].model_copy(update={"calibration": kind_profile.calibration})

    return of


def _error(run: PublishedRun, profile: HardwareProfile) -> float:
    """predicted / published throughput - 1 for one run on one profile."""
    tflops, step = predict(run, profile)
    if run.tflops_per_gpu is not None:
        return tflops / run.tflops_per_gpu - 1
    assert run.step_time_s is not None
    return run.step_time_s / step - 1


_Errors = dict[tuple[str, str], float]
"""Held-out errors keyed by (run id, variant)."""


def _key(run: PublishedRun) -> tuple[str, str]:
    return run.id, run.variant


def _row(run: PublishedRun, profile: HardwareProfile, loo: _Errors, loso: _Errors) -> RunRow:
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
    memory = memory_per_gpu(run.model, c, run.training, run.hardware(profile))
    return RunRow(
        id=run.id,
        gpu_kind=run.gpu_kind,
        group=run.group,
        variant=run.variant,
        source=run.source,
        layout=layout_text(run),
        published_tflops=pub_tflops,
        predicted_tflops=tflops,
        published_step_s=pub_step,
        predicted_step_s=step,
        error=pub_step / step - 1,
        in_fit=run.group in FIT_SETS.get(run.gpu_kind, ()),
        loo_error=loo.get(_key(run)),
        loso_error=loso.get(_key(run)),
        peak_memory_gib=float(memory.peak[0]) / GIB,
        capacity_gib=profile.gpu.memory_gib,
    )


def _groups(rows: list[RunRow]) -> list[GroupSummary]:
    keys = list(dict.fromkeys((r.gpu_kind, r.group, r.variant) for r in rows))
    out = []
    for key in keys:
        members = [r for r in rows if (r.gpu_kind, r.group, r.variant) == key]
        stats = error_stats([r.error for r in members])
        out.append(GroupSummary(*key, len(members), members[0].in_fit, stats.mean, stats.max, stats.p90))
    return out


def held_out_error(row: RunRow) -> float | None:
    """A row's error with constants fitted on no row of its source: a prediction row's error, a fit row's
    leave-one-source-out error (None where its kind has no other source)."""
    return row.loso_error if row.in_fit else row.error


def _held_out(rows: list[RunRow], moe_ids: frozenset[str]) -> list[HeldOutAccuracy]:
    """`HeldOutAccuracy` per GPU kind, then over every kind."""
    errors = [(r, e) for r in rows if (e := held_out_error(r)) is not None]
    out = []
    for kind in [*dict.fromkeys(r.gpu_kind for r, _ in errors), "all"]:
        chosen = [(r, e) for r, e in errors if kind in ("all", r.gpu_kind)]
        stats = error_stats([e for _, e in chosen])
        moe = sum(1 for r, _ in chosen if r.id in moe_ids)
        out.append(HeldOutAccuracy(kind, len(chosen), moe, stats.mean, stats.p90, stats.max))
    return out


def accuracy_bands(runs: Sequence[PublishedRun], rows: Sequence[RunRow]) -> list[AccuracyBand]:
    """`AccuracyBand` per GPU kind and workload (`accuracy.workload_of`) over the rows' held-out errors
    (`held_out_error`), in the rows' order; `runs` are the rows' runs."""
    workloads = {r.id: workload_of(r.model, r.training) for r in runs}
    groups: dict[tuple[str, Workload], list[tuple[str, float]]] = {}
    for row in rows:
        if (e := held_out_error(row)) is not None:
            groups.setdefault((row.gpu_kind, workloads[row.id]), []).append((row.group, e))
    return [_band(kind, workload, errors) for (kind, workload), errors in groups.items()]


def _band(gpu_kind: str, workload: Workload, errors: list[tuple[str, float]]) -> AccuracyBand:
    """The band of one group from its (source, held-out error) pairs; `errors` is not empty."""
    values = [e for _, e in errors]
    stats = error_stats(values)
    return AccuracyBand(
        gpu_kind=gpu_kind,
        workload=workload,
        rows=len(values),
        sources=tuple(dict.fromkeys(s for s, _ in errors)),
        mean_error=round(mean(values), DECIMALS),
        mean_abs_error=round(stats.mean, DECIMALS),
        p90_abs_error=round(stats.p90, DECIMALS),
        min_error=round(min(values), DECIMALS),
        max_error=round(max(values), DECIMALS),
    )


def _gains(rows: list[RunRow]) -> list[GainRow]:
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


def _loo(fit_set: list[PublishedRun], profile: HardwareProfile) -> _Errors:
    """Error of each fit row predicted with constants fitted on the other fit rows."""
    by_id = {r.id: r for r in fit_set}
    fits = leave_one_out(fit_set, profile)
    return {_key(by_id[run_id]): _error(by_id[run_id], with_fit(profile, fit)) for run_id, fit in fits.items()}


def _holdouts(
    runs: Sequence[PublishedRun], profile: HardwareProfile, profile_of: ProfileOf
) -> tuple[list[SourceHoldout], _Errors]:
    """Leave-one-source-out: each source of a kind predicted with constants fitted on all its other sources' rows
    (never on `HOLDOUT_ONLY_SOURCES`); a source with no such other rows is not held out."""
    sources = list(dict.fromkeys(r.group for r in runs))
    if len(sources) < 2:
        return [], {}
    out: list[SourceHoldout] = []
    errors: _Errors = {}
    for source in sources:
        others = [r for r in runs if r.group != source and r.group not in HOLDOUT_ONLY_SOURCES]
        if not others:
            continue
        assert all(profile_of(r, profile) is profile for r in others), "fits run on the kind's profile only"
        fit = fit_constants(others, profile)
        held = {_key(r): _error(r, with_fit(profile_of(r, profile), fit)) for r in runs if r.group == source}
        errors |= held
        out.append(
            SourceHoldout(
                gpu_kind=runs[0].gpu_kind,
                source=source,
                rows=len(held),
                fitted_on_sources=list(dict.fromkeys(r.group for r in others)),
                gemm_peak_efficiency=fit.gemm_peak_efficiency,
                gemm_overhead_us=fit.gemm_overhead_us,
                mean_abs_error=mean(abs(e) for e in held.values()),
                max_abs_error=max(abs(e) for e in held.values()),
            )
        )
    return out, errors


def _kind(
    gpu_kind: str, runs: list[PublishedRun], profile: HardwareProfile, profile_of: ProfileOf
) -> tuple[KindReport, _Errors, _Errors]:
    assert profile.calibration is not None, f"the {gpu_kind} validation profile must carry fitted constants"
    fit_set = fit_rows(runs, gpu_kind)
    loo = _loo(fit_set, profile) if len(fit_set) > 1 else {}
    holdouts, loso = _holdouts(runs, profile, profile_of)
    report = KindReport(
        gpu_kind=gpu_kind,
        profile_id=profile.id,
        calibration=profile.calibration,
        fit_sources=list(FIT_SETS.get(gpu_kind, ())),
        loo_mean_abs_error=mean(abs(e) for e in loo.values()) if loo else None,
        loo_max_abs_error=max(abs(e) for e in loo.values()) if loo else None,
        holdouts=holdouts,
    )
    return report, loo, loso


def build_report(profiles: Mapping[str, HardwareProfile], with_figures: bool = True) -> Report:
    """Validate every GPU kind's calibration against its published runs (each on its VALIDATION_PROFILES entry)."""
    runs = published_runs()
    profile_of = _profile_of(profiles)
    kinds: list[KindReport] = []
    rows: list[RunRow] = []
    for gpu_kind in dict.fromkeys(r.gpu_kind for r in runs):
        profile = profiles[VALIDATION_PROFILES[gpu_kind]]
        of_kind = [r for r in runs if r.gpu_kind == gpu_kind]
        kind, loo, loso = _kind(gpu_kind, of_kind, profile, profile_of)
        kinds.append(kind)
        rows += [_row(r, profile_of(r, profile), loo, loso) for r in of_kind]
    moe_ids = frozenset(r.id for r in runs if r.model.moe is not None)
    return Report(
        kinds=kinds,
        runs=rows,
        groups=_groups(rows),
        gains=_gains(rows),
        figures=run_figure_checks(profiles[VALIDATION_PROFILE]) if with_figures else [],
        bus_bandwidth=bus_bandwidth_rows(profiles),
        held_out=_held_out(rows, moe_ids),
        bands=accuracy_bands(runs, rows),
    )


def refit(profile: HardwareProfile) -> Calibration:
    """The profile's GPU kind fitted on its FIT_SETS rows, stamped with the rows and the command."""
    rows = fit_rows(published_runs(), gpu_kind_of(profile.gpu.name))
    assert rows, f"no fit set for {profile.gpu.name}"
    return calibration_of(fit_constants(rows, profile), [r.id for r in rows])
