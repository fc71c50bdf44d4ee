"""Data-parallel gradient and parameter traffic per step, by ZeRO stage.

Sources: Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) Sec. 7: stages 0-2
move 2x the model per step (all-reduce = reduce-scatter + all-gather), stage 3
3x (forward and backward gathers plus the gradient reduce-scatter, and one
more gather when full recompute re-runs the forward, except under PyTorch FSDP,
whose recomputed forward reuses the backward's gather: `recompute_gather_passes`).
Megatron's distributed
optimizer (stage 1) accumulates into a full main-grad buffer and reduce-scatters
it once per step (Megatron-Core `distrib_optimizer` docs; `finish_grad_sync`).
Stage 2 shards the gradients, so each micro-batch's gradients are reduce-scattered
as they are produced: DeepSpeed ZeRO-2, FSDP2's default accumulation (PyTorch
PR 126166 describes both flavours) and Megatron-FSDP, whose `optim_grads`
strategy the planner launches for stage 2 (Megatron-LM PR 7186: it "reduces
gradients during backward"). Stage 3 gathers the weights one transformer layer
at a time (Megatron-FSDP `fsdp_unit_modules`, FSDP2 `fully_shard` per block),
each layer paying one collective's latency (`comm.ring_latency_s`).
Overlap: Megatron-Core `overlap_grad_reduce` hides the reduction behind the last
micro-batch's backward, `overlap_param_gather` the gather behind the first
forward; ZeRO-3 prefetch overlaps each micro-batch, except that PyTorch FSDP's
`BACKWARD_POST` issues each backward gather only once the unit above has its
gradients, so the next unit's gradients wait for it (`specs.BackwardPrefetch`).
Gradients travel in the reduction dtype (`Numerics.gradient_wire_bytes`), which under PyTorch FSDP need
not be the dtype they are held in (`planner.numerics`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from planner.costmodel.candidates import Candidates, FloatArray
from planner.costmodel.comm import all_gather_s, all_reduce_s, exposed_s
from planner.costmodel.params import ParamCounts, fp8_weight_fraction
from planner.costmodel.recompute import full_recompute_reruns
from planner.costmodel.topology import GroupPlacement, Placement
from planner.numerics import Numerics, training_numerics
from planner.profiles import Hardware
from planner.specs import BackwardPrefetch, GradientLayout, ModelSpec, RuntimeFeatures, TrainingSpec

__all__ = [
    "DataParallelTimes",
    "DpCollectives",
    "data_parallel_times",
    "dp_collectives_s",
    "exposed_dp_s",
    "gather_units",
    "gradient_group",
    "recompute_gather_passes",
]


class Collective(Protocol):
    """`comm.all_reduce_s` or `comm.all_gather_s`."""

    def __call__(
        self,
        nbytes: FloatArray,
        group: GroupPlacement,
        hw: Hardware,
        collectives: FloatArray | float = 1.0,
        *,
        rails: bool = True,
    ) -> FloatArray: ...


@dataclass(frozen=True, slots=True)
class DpCollectives:
    """Seconds of each DP collective over one GPU's parameters, whatever the ZeRO stage.

    Dense parameters over the dp x cp group, experts over the expert-dp group (`topology.Placement.edp`).
    """

    all_reduce: FloatArray
    """All-reduce of the gradients."""
    reduce_scatter: FloatArray
    """Reduce-scatter of the gradients."""
    all_gather: FloatArray
    """All-gather of the bf16 weights, as one bucket."""
    unit_gather: FloatArray
    """All-gather of the bf16 weights one ZeRO-3 unit at a time (`gather_units`)."""

    def map(self, fn: Callable[[FloatArray], FloatArray]) -> DpCollectives:
        """The times with `fn` applied to every per-candidate array (to select, repeat or broadcast candidates)."""
        return DpCollectives(fn(self.all_reduce), fn(self.reduce_scatter), fn(self.all_gather), fn(self.unit_gather))


@dataclass(frozen=True, slots=True)
class DataParallelTimes:
    """Seconds per step of each kind of DP collective, before overlap.

    `grad_reduce_s` and `param_gather_s` run once per step (ZeRO 0-2);
    `microbatch_reduce_s` (ZeRO-2, ZeRO-3) and `microbatch_gather_s` (ZeRO-3) once per micro-batch.
    """

    grad_reduce_s: FloatArray
    param_gather_s: FloatArray
    microbatch_reduce_s: FloatArray
    microbatch_gather_s: FloatArray
    backward_gather_s: FloatArray
    """Of `microbatch_gather_s`, the backward pass's: one gather of every ZeRO-3 unit."""


def gradient_group(c: Candidates, placement: Placement) -> GroupPlacement:
    """The group that reduces dense gradients: the dp x cp ranks of one (tp, pp) position."""
    cp, dp = placement.cp, placement.dp
    cp_full = cp.members_per_domain == c.cp
    per_domain = cp.members_per_domain * np.where(cp_full, dp.members_per_domain, 1)
    size = c.dp * c.cp
    return GroupPlacement(
        size=size,
        members_per_domain=np.minimum(per_domain, size),
        crosses_network=cp.crosses_network | dp.crosses_network,
    )


def gather_units(model: ModelSpec, c: Candidates) -> FloatArray:
    """ZeRO-3 all-gathers per pass over one stage's weights: one per transformer layer (module docstring)."""
    return np.asarray(model.num_layers / c.pp, dtype=np.float64)


def dp_collectives_s(
    model: ModelSpec,
    c: Candidates,
    params: ParamCounts,
    placement: Placement,
    hw: Hardware,
    training: TrainingSpec,
) -> DpCollectives:
    """Seconds of each DP collective over (dense, expert) `params` per GPU, whatever the ZeRO stage."""
    dense, expert = params
    num = training_numerics(training, hw)
    dense_group, expert_group = gradient_group(c, placement), placement.edp
    has_experts = bool(np.any(expert > 0))
    units = gather_units(model, c)

    def both(fn: Collective, bytes_per_param: tuple[float, float], collectives: FloatArray | float = 1.0) -> FloatArray:
        rails = training.runtime.ring_rails
        dense_bytes, expert_bytes = bytes_per_param
        out = fn(dense_bytes * dense, dense_group, hw, collectives, rails=rails)
        return out + fn(expert_bytes * expert, expert_group, hw, collectives, rails=rails) if has_experts else out

    gradients = (num.gradient_wire_bytes, num.gradient_wire_bytes)
    gather = param_gather_bytes(model, num)
    return DpCollectives(
        all_reduce=both(all_reduce_s, gradients),
        reduce_scatter=both(all_gather_s, gradients),
        all_gather=both(all_gather_s, gather),
        unit_gather=both(all_gather_s, gather, units),
    )


def param_gather_bytes(model: ModelSpec, num: Numerics) -> tuple[float, float]:
    """(dense, expert) bytes per parameter of a data-parallel parameter all-gather: 16-bit, except the FP8
    linear weights at `Numerics.fp8_weight_gather_bytes` (1 with per-tensor `fp8_param_gather`), by their
    share of the model's parameters (`params.fp8_weight_fraction`; the stage gathered is taken to have the
    model's share)."""
    dense_fraction, expert_fraction = fp8_weight_fraction(model)
    saved = num.weight_bytes - num.fp8_weight_gather_bytes
    return num.weight_bytes - saved * dense_fraction, num.weight_bytes - saved * expert_fraction


def recompute_gather_passes(model: ModelSpec, c: Candidates, training: TrainingSpec) -> FloatArray | float:
    """ZeRO-3 gather passes over a stage's units that full recomputation adds to each micro-batch's two.

    PyTorch FSDP and FSDP2 (`GradientLayout.PYTORCH_FSDP`: Composer, TorchTitan), which wrap each checkpointed
    block as one unit, add none: the recomputed forward runs on the weights the unit's pre-backward hook gathered
    (torch/distributed/fsdp/_runtime_utils.py `_pre_forward`: "For `fully_shard` + `checkpoint`, skip pre-forward
    logic in the recomputed forward"; FSDP2 `_fsdp_state.py` `_pre_forward`: "the pre-backward hook is
    responsible for the unshard"). Otherwise (DeepSpeed ZeRO-3's module hooks, Megatron-FSDP, as the module
    docstring prices them) the recomputed forward gathers again, over the layers it reruns
    (`recompute.full_recompute_reruns`: the first `recompute_num_layers` of a stage under block recompute).
    """
    if training.gradient_layout is GradientLayout.PYTORCH_FSDP:
        return 0.0
    return full_recompute_reruns(model, c, training.recompute_num_layers)


def data_parallel_times(
    c: Candidates, collectives: DpCollectives, recompute_passes: FloatArray | float
) -> DataParallelTimes:
    """Raw (not yet overlapped) DP communication seconds per step, by the candidate's ZeRO stage; ZeRO-3 gathers
    every unit twice per micro-batch plus `recompute_passes` (`recompute_gather_passes`)."""
    zero = c.zero_stage
    scatter, gather = collectives.reduce_scatter, collectives.all_gather
    grad_reduce = np.where(zero == 0, collectives.all_reduce, np.where(zero == 1, scatter, 0.0))
    param_gather = np.where((zero == 1) | (zero == 2), gather, 0.0)
    gathers_per_microbatch = 2 + np.asarray(recompute_passes)
    microbatch_reduce = np.where(zero >= 2, scatter, 0.0)
    microbatch_gather = np.where(zero == 3, gathers_per_microbatch * collectives.unit_gather, 0.0)
    backward_gather = np.where(zero == 3, collectives.unit_gather, 0.0)
    return DataParallelTimes(grad_reduce, param_gather, microbatch_reduce, microbatch_gather, backward_gather)


def exposed_dp_s(
    times: DataParallelTimes,
    c: Candidates,
    stage_forward_s: FloatArray,
    stage_backward_s: FloatArray,
    rt: RuntimeFeatures,
) -> FloatArray:
    """DP seconds left on the critical path after overlap.

    Per-step traffic hides behind one micro-batch's backward (reduction) or
    forward (gather); per-micro-batch traffic behind that micro-batch's compute.
    Only the traffic whose overlap flag is on is hidden. Under PyTorch FSDP's
    `BACKWARD_POST` (`rt.zero3_backward_prefetch` post) the backward gathers
    are never beside compute: each is issued once the unit above has its
    gradients, and the next unit's gradients wait for it (PyTorch
    torch/distributed/fsdp/api.py `BackwardPrefetch`: it overlaps "communication
    (current reduce-scatter) and computation (next gradient computation)", the next
    all-gather "reordered to be before the current reduce-scatter"), so they are paid
    in full; the forward gathers (FSDP's implicit forward prefetch from its own
    stream, PyTorch docs "FSDP Notes") and the reduce-scatters still hide. With no
    backward prefetch (`none`) each gather also queues behind the unit above's
    reduce-scatter, so the ZeRO-3 reduce-scatters are paid in full too.
    """
    grad = exposed_s(times.grad_reduce_s, stage_backward_s) if rt.overlap_grad_reduce else times.grad_reduce_s
    gather = exposed_s(times.param_gather_s, stage_forward_s) if rt.overlap_param_gather else times.param_gather_s
    zero = np.zeros_like(times.microbatch_gather_s)
    prefetch = rt.zero3_backward_prefetch
    waited = zero if prefetch is BackwardPrefetch.PRE else times.backward_gather_s
    queued = np.where(c.zero_stage == 3, times.microbatch_reduce_s, 0.0) if prefetch is BackwardPrefetch.NONE else zero
    hideable = (times.microbatch_gather_s - waited if rt.overlap_param_gather else zero) + (
        times.microbatch_reduce_s - queued if rt.overlap_grad_reduce else zero
    )
    serial = times.microbatch_gather_s + times.microbatch_reduce_s - hideable
    per_mb = serial + exposed_s(hideable, stage_forward_s + stage_backward_s)
    return grad + gather + c.num_microbatches * per_mb
