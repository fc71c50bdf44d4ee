"""Where a published run's predicted step goes: the step split by kind and one layer's parts.

The tool behind issue 10's investigations (`tools/row_breakdown.py`): for each
published run, the predicted step (`fit.predict`) split as `costmodel.step`
assembles it (`TimeBreakdown`: compute, recompute, bubble, TP/PP/DP/CP/EP
communication left exposed, optimizer) and the forward parts of one average
layer and micro-batch on one GPU (`costmodel.compute`: weight GEMMs, attention
core, memory-bound element-wise work, fp8 casts, and the host's launch floor
they are compared with). Nothing here is a formula of its own: every number is
read from the cost model's functions (the layer parts from
`costmodel.compute`'s private helpers, which `layer_times` sums).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from planner.calibration.fit import published_flop
from planner.calibration.published import PublishedRun
from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.costmodel.host import layer_host_s
from planner.costmodel.step import estimate_steps
from planner.profiles import HardwareProfile
from planner.units import TERA

__all__ = ["LayerParts", "RowBreakdown", "layer_parts", "row_breakdown"]


@dataclass(frozen=True, slots=True)
class LayerParts:
    """Forward seconds of one average layer and micro-batch on one GPU, by part (`costmodel.compute`)."""

    gemms_s: float
    attention_core_s: float
    attention_core_backward_s: float
    elementwise_s: float
    quantize_s: float
    host_floor_s: float
    """Kernels launched in the forward times the host's cost per kernel (`costmodel.host`)."""
    logits_s: float
    """Output layer and loss, forward + backward, on the last stage (once per micro-batch, not per layer)."""


@dataclass(frozen=True, slots=True)
class RowBreakdown:
    id: str
    gpu_kind: str
    published_step_s: float
    predicted_step_s: float
    error: float
    """predicted / published throughput - 1, as `planner validate` prints it."""
    num_microbatches: int
    step_parts_s: dict[str, float]
    """The predicted step by kind (`TimeBreakdown.as_dict`); the values add up to `predicted_step_s`."""
    layer: LayerParts


def layer_parts(run: PublishedRun, profile: HardwareProfile) -> LayerParts:
    """One layer's forward parts for a published run's layout (`LayerParts`)."""
    hw = run.hardware(profile)
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    rt = run.training.runtime
    core_fwd, core_bwd = compute._attention_core_s(run.model, c, hw, rt)
    cast_fwd, _ = compute.quantize_s(run.model, c, hw)
    return LayerParts(
        gemms_s=float(compute._gemm_set_time_s(run.model, c, hw, rt)[0]),
        attention_core_s=float(core_fwd[0]),
        attention_core_backward_s=float(core_bwd[0]),
        elementwise_s=float(compute._elementwise_forward_s(run.model, c, hw, rt)[0]),
        quantize_s=float(cast_fwd[0]),
        host_floor_s=float(layer_host_s(run.model, c, rt).forward[0]),
        logits_s=float(compute.logits_time_s(run.model, c, hw)[0]),
    )


def _published_step_s(run: PublishedRun) -> float:
    if run.step_time_s is not None:
        return run.step_time_s
    assert run.tflops_per_gpu is not None
    return published_flop(run) / (run.tflops_per_gpu * TERA * run.num_gpus)


def row_breakdown(run: PublishedRun, profiles: Mapping[str, HardwareProfile], profile_id: str) -> RowBreakdown:
    """The predicted step of `run` on `profiles[profile_id]`, split by kind, and its layer's parts."""
    profile = profiles[profile_id]
    hw = run.hardware(profile)
    c = Candidates.from_layouts([run.layout], run.model.num_layers, run.training.global_batch_size)
    time_s = estimate_steps(run.model, run.training, c, hw).time_s
    predicted = float(time_s.total[0])
    published = _published_step_s(run)
    return RowBreakdown(
        id=run.id,
        gpu_kind=run.gpu_kind,
        published_step_s=published,
        predicted_step_s=predicted,
        error=published / predicted - 1,
        num_microbatches=int(c.num_microbatches[0]),
        step_parts_s={kind: float(seconds[0]) for kind, seconds in time_s.as_dict().items()},
        layer=layer_parts(run, profile),
    )
