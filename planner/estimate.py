"""`estimate(...)`: everything the API's `estimate` object holds, for one layout."""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.costmodel.candidates import Candidates
from planner.costmodel.step import TIME_KEYS, StepEstimates, estimate_steps
from planner.costmodel.topology import Crossings, count_crossings
from planner.layout import Layout
from planner.profiles import ClusterSpec
from planner.specs import ModelSpec, TrainingSpec
from planner.units import GIB, SECONDS_PER_DAY, SECONDS_PER_HOUR, TERA
from planner.validate import Violation, layout_violations

__all__ = ["Estimate", "MemoryEstimate", "estimate", "narayanan_eq4_days"]

MEMORY_KEYS = ("parameters", "gradients", "optimizer_states", "activations", "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    peak_gib: float
    capacity_gib: float
    breakdown_gib: dict[str, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    step_time_s: float
    tokens_per_s: float
    model_tflops_per_gpu: float
    hardware_tflops_per_gpu: float
    mfu: float
    bubble_fraction: float
    num_microbatches: int
    time_breakdown_s: dict[str, float]
    memory: MemoryEstimate
    network: Crossings
    fits: bool
    violations: list[Violation]
    days_to_train: float | None = None
    gpu_hours: float | None = None


def narayanan_eq4_days(tokens: float, params: float, num_gpus: int, flop_per_s_per_gpu: float) -> float:
    """Training days by Narayanan 2021 Eq. 4: 8 T P / (n X) (full recompute, s << 6h)."""
    return 8 * tokens * params / (num_gpus * flop_per_s_per_gpu) / SECONDS_PER_DAY


def estimate(model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, layout: Layout) -> Estimate:
    """Predicted step time, throughput and memory of one layout, with every rule it breaks.

    A layout that breaks a divisibility rule is still estimated where the
    arithmetic allows (sizes >= 1); `fits` is false and `violations` says why.
    """
    violations = layout_violations(layout, model, training, cluster.num_gpus)
    if any(v.rule == "positive_sizes" for v in violations):
        raise ValueError("layout sizes must be >= 1; validate at the edge before estimating")
    hw = cluster.profile.hardware(training.precision)
    if layout.layers_per_stage is not None and len(layout.layers_per_stage) != layout.pp:
        layout = replace(layout, layers_per_stage=None)
    c = Candidates.from_layouts([layout], model.num_layers, training.global_batch_size)
    steps = estimate_steps(model, training, c, hw)
    result = _to_estimate(steps, model, training, cluster, c)
    if result.memory.peak_gib > result.memory.capacity_gib:
        violations.append(
            Violation(
                "fits_memory",
                f"peak memory {result.memory.peak_gib:.1f} GiB > capacity {result.memory.capacity_gib:.1f} GiB",
            )
        )
    return replace(result, fits=not violations, violations=violations)


def _to_estimate(
    s: StepEstimates, model: ModelSpec, train: TrainingSpec, cluster: ClusterSpec, c: Candidates
) -> Estimate:
    n = cluster.num_gpus
    step = float(s.step_time_s[0])
    tokens_per_step = train.global_batch_size * model.seq_length
    model_flop_per_s = float(s.model_flop[0]) / step / n
    peak = cluster.profile.hardware(train.precision).peak_flop_per_s
    breakdown = {k: float(s.time_s[k][0]) for k in TIME_KEYS}
    days = gpu_hours = None
    if train.train_tokens is not None:
        seconds = train.train_tokens / tokens_per_step * step
        days, gpu_hours = seconds / SECONDS_PER_DAY, seconds * n / SECONDS_PER_HOUR
    return Estimate(
        step_time_s=step,
        tokens_per_s=tokens_per_step / step,
        model_tflops_per_gpu=model_flop_per_s / TERA,
        hardware_tflops_per_gpu=float(s.hardware_flop[0]) / step / n / TERA,
        mfu=model_flop_per_s / peak,
        bubble_fraction=breakdown["bubble"] / step,
        num_microbatches=int(c.num_microbatches[0]),
        time_breakdown_s=breakdown,
        memory=_memory(s, cluster),
        network=_crossings(c, cluster.profile.node.nvlink_domain_gpus),
        fits=True,
        violations=[],
        days_to_train=days,
        gpu_hours=gpu_hours,
    )


def _memory(s: StepEstimates, cluster: ClusterSpec) -> MemoryEstimate:
    breakdown = {k: float(getattr(s.memory, k)[0]) / GIB for k in MEMORY_KEYS}
    return MemoryEstimate(
        peak_gib=sum(breakdown.values()),
        capacity_gib=cluster.profile.gpu.memory_gib,
        breakdown_gib=breakdown,
    )


def _crossings(c: Candidates, hw_domain: int) -> Crossings:
    return count_crossings(int(c.tp[0]), int(c.cp[0]), int(c.pp[0]), int(c.dp[0]), int(c.ep[0]), hw_domain)
