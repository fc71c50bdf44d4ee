"""One optimizer step: the only place that sums the cost model's parts.

Time of a pipelined step (Narayanan et al. 2021 Sec. 2.2): m micro-batches at
the slowest stage's pace, plus the bubble (p - 1)/v micro-batch times of an
average stage, plus the data-parallel traffic not hidden behind compute, plus
the optimizer step. TP, CP and EP collectives sit on each layer's critical
path; CP's ring exchange overlaps the attention core, TP's the GEMMs when
`tp_comm_overlap` is on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel import compute, flops
from planner.costmodel.candidates import RECOMPUTE_CODES, Candidates, FloatArray
from planner.costmodel.comm import pp_comm_per_microbatch_s
from planner.costmodel.data_parallel import data_parallel_times, exposed_dp_s
from planner.costmodel.memory import MemoryBreakdown, memory_by_stage, peak_stage
from planner.costmodel.shared import LAYER_KEYS, LayerQuantities, layer_quantities
from planner.costmodel.topology import Placement
from planner.numerics import numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = [
    "LAYER_KEYS",
    "StepEstimates",
    "TIME_KEYS",
    "estimate_steps",
    "peak_memory",
    "step_times_s",
    "updated_params",
]

TIME_KEYS = ("compute", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "ep_comm", "optimizer")


@dataclass(frozen=True, slots=True)
class StepEstimates:
    """Per-candidate step time with breakdown (seconds), flop per step, memory and placement."""

    time_s: dict[str, FloatArray]
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
        return np.asarray(np.sum([self.time_s[key] for key in TIME_KEYS], axis=0), dtype=np.float64)


def step_times_s(
    model: ModelSpec, train: TrainingSpec, c: Candidates, hw: Hardware, q: LayerQuantities
) -> dict[str, FloatArray]:
    """Step time by TIME_KEYS for every candidate (seconds)."""
    parts, num = q.slowest_stage_s, numerics(train.precision)
    pp_comm = pp_comm_per_microbatch_s(model, c, q.placement, hw, train.runtime, num)
    m = c.num_microbatches.astype(np.float64)
    time_s = {k: m * parts[k] for k in LAYER_KEYS}
    time_s["pp_comm"] = m * pp_comm
    time_s["bubble"] = (c.pp - 1) / c.vp * (parts["average_stage"] + pp_comm)
    dp_raw = data_parallel_times(c, q.dp_collectives_s)
    time_s["dp_comm"] = exposed_dp_s(dp_raw, c, parts["forward"], parts["backward"], train.runtime)
    updated = updated_params(c, q.largest_params)
    time_s["optimizer"] = compute.optimizer_step_time_s(updated, hw, num)
    return time_s


def peak_memory(model: ModelSpec, train: TrainingSpec, c: Candidates, q: LayerQuantities) -> MemoryBreakdown:
    """Memory per GPU of the most loaded stage, with breakdown."""
    return peak_stage(memory_by_stage(c, train.precision, q.stage_terms))


def estimate_steps(
    model: ModelSpec, train: TrainingSpec, c: Candidates, hw: Hardware, q: LayerQuantities | None = None
) -> StepEstimates:
    """Step time, flop and memory for every candidate, vectorised over `c`.

    `q` may carry the layer-level quantities already computed for these
    candidates (a search shares them between candidates); by default they are
    computed here.
    """
    q = q or layer_quantities(model, train, c, hw)
    sequences = float(train.global_batch_size)
    model_flop = np.full(len(c), sequences * flops.model_flop_per_sequence(model))
    by_mode = np.array([flops.recompute_flop_per_sequence(model, mode) for mode in RECOMPUTE_CODES])
    return StepEstimates(
        time_s=step_times_s(model, train, c, hw, q),
        model_flop=model_flop,
        hardware_flop=model_flop + sequences * by_mode[c.recompute],
        memory=peak_memory(model, train, c, q),
        placement=q.placement,
        forward_s=q.slowest_stage_s["forward"],
        backward_s=q.slowest_stage_s["backward"],
    )


def updated_params(c: Candidates, params: tuple[FloatArray, FloatArray]) -> FloatArray:
    """Parameters whose optimizer step this GPU runs: its shard under ZeRO >= 1, else all it holds."""
    dense, expert = params
    dense_shard = np.where(c.zero_stage >= 1, c.dp * c.cp, 1)
    expert_shard = np.where(c.zero_stage >= 1, np.maximum(c.dp * c.cp // c.ep, 1), 1)
    return dense / dense_shard + expert / expert_shard
