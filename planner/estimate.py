"""`estimate(...)`: everything the API's `estimate` object holds, for one layout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import usable_hardware
from planner.costmodel.recompute import selective_modules
from planner.costmodel.step import StepEstimates, estimate_steps
from planner.costmodel.topology import Crossings, count_crossings
from planner.layout import Layout, by_training, training_for
from planner.profiles import ClusterSpec, Hardware
from planner.rules import CORE, RuleSet
from planner.specs import ModelSpec, Recompute, RecomputeModule, TrainingSpec
from planner.units import GIB, SECONDS_PER_DAY, SECONDS_PER_HOUR, TERA
from planner.validate import Violation, layouts_violations

__all__ = ["Estimate", "MemoryEstimate", "estimate", "estimate_many", "layout_modules", "narayanan_eq4_days"]

MEMORY_KEYS = ("parameters", "gradients", "optimizer_states", "activations", "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    peak_gib: float
    capacity_gib: float
    usable_gib: float
    """What a plan may fill: `capacity_gib` less the cluster's memory headroom (`usable_hardware`)."""
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
    microbatch_forward_s: float = 0.0
    """One micro-batch's forward on the slowest stage (for drawing the pipeline schedule)."""
    microbatch_backward_s: float = 0.0
    days_to_train: float | None = None
    gpu_hours: float | None = None


def layout_modules(model: ModelSpec, training: TrainingSpec, layout: Layout) -> tuple[RecomputeModule, ...] | None:
    """The modules `layout` reruns under selective recompute (its own set, else the training's, else the default:
    `planner.layout.training_for`, `recompute.selective_modules`); None when it does not recompute selectively."""
    if layout.recompute is not Recompute.SELECTIVE:
        return None
    return selective_modules(model, training_for(training, layout).runtime)


def narayanan_eq4_days(tokens: float, params: float, num_gpus: int, flop_per_s_per_gpu: float) -> float:
    """Training days by Narayanan 2021 Eq. 4: 8 T P / (n X) (full recompute, s << 6h)."""
    return 8 * tokens * params / (num_gpus * flop_per_s_per_gpu) / SECONDS_PER_DAY


def estimate(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, layout: Layout, rules: RuleSet = CORE
) -> Estimate:
    """Predicted step time, throughput and memory of one layout, with every rule it breaks.

    A layout that breaks a divisibility rule is still estimated where the
    arithmetic allows (sizes >= 1); `fits` is false and `violations` says why.
    """
    return estimate_many(model, cluster, training, [layout], rules)[0]


def estimate_many(
    model: ModelSpec,
    cluster: ClusterSpec,
    training: TrainingSpec,
    layouts: Sequence[Layout],
    rules: RuleSet = CORE,
) -> list[Estimate]:
    """`estimate` for several layouts on the same cluster, one vectorised cost-model call per training they run
    (`planner.layout.by_training`: layouts naming their own recompute module set run apart).

    `rules`: the rule set the layouts must pass (`planner.rules`; the core rules by default).
    """
    return by_training(training, layouts, lambda run, group: _estimate_same_training(model, cluster, run, group, rules))


def _estimate_same_training(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, layouts: Sequence[Layout], rules: RuleSet
) -> list[Estimate]:
    """`estimate_many` for layouts that all run `training`, in one vectorised cost-model call."""
    violations = layouts_violations(layouts, model, training, cluster.num_gpus, rules)
    if any(v.rule == "positive_sizes" for vs in violations for v in vs):
        raise ValueError("layout sizes must be >= 1; validate at the edge before estimating")
    hw = usable_hardware(cluster, training)
    layouts = [
        replace(x, layers_per_stage=None) if x.layers_per_stage is not None and len(x.layers_per_stage) != x.pp else x
        for x in layouts
    ]
    c = Candidates.from_layouts(layouts, model.num_layers, training.global_batch_size)
    steps = estimate_steps(model, training, c, hw)
    out = []
    for i, found in enumerate(violations):
        result = _to_estimate(steps, i, model, training, cluster, c, hw)
        mem = result.memory
        if mem.peak_gib * GIB > hw.hbm_bytes:
            found = found + [
                Violation(
                    "fits_memory",
                    f"peak memory {mem.peak_gib:.1f} GiB > usable {mem.usable_gib:.1f} GiB"
                    f" ({mem.capacity_gib:.0f} GiB less {cluster.memory_headroom:.0%} headroom)",
                )
            ]
        out.append(replace(result, fits=not found, violations=found))
    return out


def _to_estimate(
    s: StepEstimates,
    i: int,
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    c: Candidates,
    hw: Hardware,
) -> Estimate:
    n = int(c.tp[i] * c.pp[i] * c.dp[i] * c.cp[i])  # the layout's GPUs (the cluster's when the layout is valid)
    step = float(s.step_time_s[i])
    tokens_per_step = training.global_batch_size * model.seq_length
    model_flop_per_s = float(s.model_flop[i]) / step / n
    peak = hw.peak_flop_per_s
    breakdown = {kind: float(seconds[i]) for kind, seconds in s.time_s.as_dict().items()}
    days = gpu_hours = None
    if training.train_tokens is not None:
        seconds = training.train_tokens / tokens_per_step * step
        days, gpu_hours = seconds / SECONDS_PER_DAY, seconds * n / SECONDS_PER_HOUR
    return Estimate(
        step_time_s=step,
        tokens_per_s=tokens_per_step / step,
        model_tflops_per_gpu=model_flop_per_s / TERA,
        hardware_tflops_per_gpu=float(s.hardware_flop[i]) / step / n / TERA,
        mfu=model_flop_per_s / peak,
        bubble_fraction=float(s.time_s.bubble[i]) / step,
        num_microbatches=int(c.num_microbatches[i]),
        time_breakdown_s=breakdown,
        memory=_memory(s, i, cluster, hw),
        network=count_crossings(
            int(c.tp[i]),
            int(c.cp[i]),
            int(c.pp[i]),
            int(c.dp[i]),
            int(c.ep[i]),
            int(c.etp[i]),
            cluster.profile.node.nvlink_domain_gpus,
            cluster.profile.node.gpus_per_node,
        ),
        fits=True,
        violations=[],
        microbatch_forward_s=float(s.forward_s[i]),
        microbatch_backward_s=float(s.backward_s[i]),
        days_to_train=days,
        gpu_hours=gpu_hours,
    )


def _memory(s: StepEstimates, i: int, cluster: ClusterSpec, hw: Hardware) -> MemoryEstimate:
    breakdown = {k: float(getattr(s.memory, k)[i]) / GIB for k in MEMORY_KEYS}
    return MemoryEstimate(
        peak_gib=sum(breakdown.values()),
        capacity_gib=cluster.profile.gpu.memory_gib,
        usable_gib=hw.hbm_bytes / GIB,
        breakdown_gib=breakdown,
    )
