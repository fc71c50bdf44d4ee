"""One optimizer step: the only place that sums the cost model's parts.

Time of a pipelined step (Narayanan et al. 2021 Sec. 2.2): m micro-batches at
the slowest stage's pace, plus the bubble (p - 1)/v micro-batch times of an
average stage, plus the data-parallel traffic not hidden behind compute, plus
the optimizer step. TP, CP and EP collectives sit on each layer's critical
path; CP's ring exchange overlaps the attention core, TP's the GEMMs when
`tp_comm_overlap` is on; activation offloading's copies overlap compute where the
schedule lets them (`costmodel.offload`). `assemble_step` and `once_per_step_s` are called by
both the reference path here and the search's tables (`costmodel.tables`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from planner.costmodel import compute, flops
from planner.costmodel.candidates import RECOMPUTE_CODES, Candidates, FloatArray, IntArray
from planner.costmodel.comm import pp_message_s
from planner.costmodel.data_parallel import DpCollectives, data_parallel_times, exposed_dp_s, recompute_gather_passes
from planner.costmodel.memory import MemoryBreakdown, memory_by_stage, peak_stage
from planner.costmodel.params import ParamCounts
from planner.costmodel.pipeline import average_stage_forward_s, bubble_s, exposed_sends_s, unpaired_microbatches
from planner.costmodel.recompute import recomputed_share, selective_modules
from planner.costmodel.shared import LayerQuantities, LayerSeconds, layer_quantities
from planner.costmodel.topology import Placement
from planner.costmodel.zero import ModelState, held_params, sharded_params
from planner.numerics import training_numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = [
    "StepEstimates",
    "TimeBreakdown",
    "assemble_step",
    "estimate_steps",
    "once_per_step_s",
    "step_time_s",
    "updated_params",
]


@dataclass(frozen=True, slots=True)
class TimeBreakdown:
    """Seconds of one step (`total`, from `step_time_s`) and its split by kind. Fields broadcast."""

    compute: FloatArray
    recompute: FloatArray
    bubble: FloatArray
    tp_comm: FloatArray
    pp_comm: FloatArray
    dp_comm: FloatArray
    cp_comm: FloatArray
    ep_comm: FloatArray
    offload: FloatArray
    """Activation copies to and from the host that compute does not hide (`costmodel.offload`)."""
    optimizer: FloatArray
    total: FloatArray
    """The step (`step_time_s`); the kinds above add up to it (to rounding)."""

    def as_dict(self) -> dict[str, FloatArray]:
        """The kinds by name, in field order (the API's `time_breakdown_s` keys); `total` is not a kind."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "total"}


def step_time_s(
    m: FloatArray,
    pp: IntArray,
    vp: IntArray,
    critical_path_s: FloatArray,
    sends_s: FloatArray,
    average_stage_s: FloatArray,
    once_s: FloatArray | float,
    unpaired_s: FloatArray | float = 0.0,
) -> FloatArray:
    """Seconds of one pipelined step (Narayanan 2021 Sec. 2.2, Eq. 1 generalised): the only step formula.

    m micro-batches at the slowest stage's pace (`critical_path_s`: compute,
    recompute and exposed TP/CP/EP time of one micro-batch there), each with its
    point-to-point sends (`sends_s`); under the MoE all-to-all overlap, the
    `pipeline.unpaired_microbatches` of them that run unpaired pay `unpaired_s`
    more (`LayerSeconds.ep_unpaired` of the stage); the bubble of (p - 1)/v average stages
    with their sends (`pipeline.bubble_s`); and what happens once per step
    (`once_s`: exposed DP traffic and the optimizer). Broadcasts over all
    arguments: the reference path calls it per candidate, the search's grid per
    (row, mode).
    """
    return np.asarray(
        m * (critical_path_s + sends_s)
        + unpaired_microbatches(pp, vp, m) * unpaired_s
        + bubble_s(pp, vp, average_stage_s + sends_s)
        + once_s,
        dtype=np.float64,
    )


def assemble_step(
    m: FloatArray,
    pp: IntArray,
    vp: IntArray,
    slowest: LayerSeconds,
    sends_s: FloatArray,
    average_stage_s: FloatArray,
    dp_comm_s: FloatArray,
    optimizer_s: FloatArray,
) -> TimeBreakdown:
    """The step (`step_time_s`) and its split by kind: each per-micro-batch kind times m, the bubble, the rest once."""
    return TimeBreakdown(
        compute=m * slowest.compute,
        recompute=m * slowest.recompute,
        bubble=bubble_s(pp, vp, average_stage_s + sends_s),
        tp_comm=m * slowest.tp_comm,
        pp_comm=m * sends_s,
        dp_comm=dp_comm_s,
        cp_comm=m * slowest.cp_comm,
        ep_comm=m * slowest.ep_comm + unpaired_microbatches(pp, vp, m) * slowest.ep_unpaired,
        offload=m * slowest.offload,
        optimizer=optimizer_s,
        total=step_time_s(
            m, pp, vp, slowest.critical_path_s, sends_s, average_stage_s, dp_comm_s + optimizer_s, slowest.ep_unpaired
        ),
    )


def updated_params(c: Candidates, params: ParamCounts) -> FloatArray:
    """Parameters whose optimizer step this GPU runs: its shard under ZeRO >= 1, else all it holds."""
    return held_params(c.zero_stage, ModelState.OPTIMIZER, params.total, sharded_params(params, c))


def once_per_step_s(
    model: ModelSpec,
    c: Candidates,
    collectives: DpCollectives,
    largest_params: ParamCounts,
    slowest: LayerSeconds,
    training: TrainingSpec,
    hw: Hardware,
) -> tuple[FloatArray, FloatArray]:
    """(exposed DP seconds, optimizer seconds) of one step, by the candidate's ZeRO stage; broadcasts over `c`."""
    times = data_parallel_times(c, collectives, recompute_gather_passes(model, c, training))
    dp = exposed_dp_s(times, c, slowest.forward, slowest.backward, training.runtime)
    return dp, compute.optimizer_step_time_s(updated_params(c, largest_params), hw, training_numerics(training, hw))


@dataclass(frozen=True, slots=True)
class StepEstimates:
    """Per-candidate step time with breakdown (seconds), flop per step, memory and placement."""

    time_s: TimeBreakdown
    model_flop: FloatArray
    hardware_flop: FloatArray
    memory: MemoryBreakdown
    placement: Placement
    forward_s: FloatArray
    """One micro-batch's forward on the slowest stage (all its chunks), for drawing the schedule."""
    backward_s: FloatArray
    """One micro-batch's backward (with recomputation) on the slowest stage."""

    @property
    def step_time_s(self) -> FloatArray:
        return self.time_s.total


def _step_times_s(
    model: ModelSpec, training: TrainingSpec, c: Candidates, hw: Hardware, q: LayerQuantities
) -> TimeBreakdown:
    """Step time by kind for every candidate (seconds)."""
    dp_comm, optimizer = once_per_step_s(
        model, c, q.dp_collectives_s, q.largest_params, q.slowest_stage_s, training, hw
    )
    return assemble_step(
        c.num_microbatches.astype(np.float64),
        c.pp,
        c.vp,
        q.slowest_stage_s,
        exposed_sends_s(
            c.pp,
            c.vp,
            pp_message_s(model, c, q.placement, hw, training.runtime, training_numerics(training, hw)),
            average_stage_forward_s(q.layer_s.forward, model.num_layers, c.pp),
            training.runtime.overlap_p2p_comm,
        ),
        q.average_stage_s,
        dp_comm,
        optimizer,
    )


def estimate_steps(
    model: ModelSpec, training: TrainingSpec, c: Candidates, hw: Hardware, q: LayerQuantities | None = None
) -> StepEstimates:
    """Step time, flop and memory for every candidate, vectorised over `c`.

    `q` may carry the layer-level quantities already computed for these
    candidates (a search shares them between candidates); by default they are
    computed here.
    """
    q = q or layer_quantities(model, training, c, hw)
    sequences = float(training.global_batch_size)
    per_sequence = flops.model_flop_per_sequence(model)
    model_flop = np.full(len(c), sequences * per_sequence)
    modules = selective_modules(model, training.runtime)
    rerun = np.array([flops.recompute_flop_per_sequence(model, m, modules=modules) for m in RECOMPUTE_CODES])
    rerun = rerun[c.recompute]
    share = recomputed_share(model, c, training.recompute_num_layers)
    return StepEstimates(
        time_s=_step_times_s(model, training, c, hw, q),
        model_flop=model_flop,
        hardware_flop=sequences * (per_sequence + rerun * share),
        memory=peak_stage(memory_by_stage(c, training_numerics(training, hw), q.stage_terms)),
        placement=q.placement,
        forward_s=q.slowest_stage_s.forward,
        backward_s=q.slowest_stage_s.backward,
    )
