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
from planner.costmodel.candidates import Candidates, FloatArray
from planner.costmodel.comm import (
    cp_comm_per_layer_s,
    ep_comm_per_layer_s,
    exposed_s,
    pp_comm_per_microbatch_s,
    sp_backward_gather_per_layer_s,
    tp_comm_per_layer_s,
)
from planner.costmodel.data_parallel import data_parallel_times, exposed_dp_s
from planner.costmodel.memory import MemoryBreakdown, memory_per_gpu
from planner.costmodel.params import params_per_gpu, stage_kinds
from planner.costmodel.topology import Placement, place
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["LAYER_KEYS", "StepEstimates", "TIME_KEYS", "estimate_steps", "per_layer_times"]

LAYER_KEYS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm")
"""Per-layer critical-path kinds; a stage's time is its layer count times their sum (+ logits)."""
TIME_KEYS = ("compute", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "ep_comm", "optimizer")


@dataclass(frozen=True, slots=True)
class StepEstimates:
    """Per-candidate step time with breakdown (seconds), flop per step, memory and placement."""

    time_s: dict[str, FloatArray]
    model_flop: FloatArray
    hardware_flop: FloatArray
    memory: MemoryBreakdown
    placement: Placement

    @property
    def step_time_s(self) -> FloatArray:
        return np.asarray(np.sum([self.time_s[key] for key in TIME_KEYS], axis=0), dtype=np.float64)


def per_layer_times(
    model: ModelSpec, c: Candidates, hw: Hardware, train: TrainingSpec, placement: Placement
) -> dict[str, FloatArray]:
    """Critical-path seconds of one average layer and micro-batch on one GPU, by kind."""
    rt = train.runtime
    layer = compute.layer_times(model, c, hw, rt)
    layer_compute = layer.forward_s + layer.backward_s
    tp_comm = tp_comm_per_layer_s(model, c, placement, hw)
    if rt.tp_comm_overlap:
        tp_comm = exposed_s(tp_comm, layer_compute)
    tp_comm = tp_comm + exposed_s(sp_backward_gather_per_layer_s(model, c, placement, hw), layer.backward_s / 2)
    return {
        "compute": layer_compute,
        "recompute": layer.recompute_s,
        "tp_comm": tp_comm,
        "cp_comm": exposed_s(cp_comm_per_layer_s(model, c, placement, hw), layer_compute),
        "ep_comm": ep_comm_per_layer_s(model, c, placement, hw),
        "forward": layer.forward_s,
        "backward": layer.backward_s + layer.recompute_s,
    }


def _per_microbatch_parts(
    model: ModelSpec, c: Candidates, hw: Hardware, train: TrainingSpec, placement: Placement
) -> dict[str, FloatArray]:
    """Seconds of one micro-batch on the slowest stage, by kind, plus the average stage's total."""
    rt = train.runtime
    times = per_layer_times(model, c, hw, train, placement)
    per_layer = {k: times[k] for k in LAYER_KEYS}
    layer_total = np.sum(list(per_layer.values()), axis=0)
    logits = compute.logits_time_s(model, c, hw)
    kinds = stage_kinds(c)
    totals = np.stack([n * layer_total + np.where(out, logits, 0.0) for n, _, out in kinds])
    pick = np.argmax(totals, axis=0)
    n = np.choose(pick, [k[0] for k in kinds]).astype(np.float64)
    has_logits = np.choose(pick, [k[2] for k in kinds])
    pp_comm = pp_comm_per_microbatch_s(model, c, placement, hw, rt)
    parts = {key: n * value for key, value in per_layer.items()}
    parts["compute"] = parts["compute"] + np.where(has_logits, logits, 0.0)
    parts["pp_comm"] = pp_comm
    parts["forward"] = n * times["forward"]
    parts["backward"] = n * times["backward"]
    parts["average_stage"] = (model.num_layers * layer_total + logits) / c.pp + pp_comm
    return parts


def estimate_steps(model: ModelSpec, train: TrainingSpec, c: Candidates, hw: Hardware) -> StepEstimates:
    """Step time, flop and memory for every candidate, vectorised over `c`."""
    placement = place(c, hw.nvlink_domain_gpus)
    parts = _per_microbatch_parts(model, c, hw, train, placement)
    m = c.num_microbatches.astype(np.float64)
    per_mb_keys = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "pp_comm")
    time_s = {k: m * parts[k] for k in per_mb_keys}
    time_s["bubble"] = (c.pp - 1) / c.vp * parts["average_stage"]
    dp_raw = data_parallel_times(model, c, placement, hw, train.precision)
    time_s["dp_comm"] = exposed_dp_s(dp_raw, c, parts["forward"], parts["backward"], train.runtime)
    time_s["optimizer"] = compute.optimizer_step_time_s(_updated_params(model, c), hw)
    sequences = float(train.global_batch_size)
    model_flop = np.full(len(c), sequences * flops.model_flop_per_sequence(model))
    by_mode = np.array([flops.recompute_flop_per_sequence(model, mode) for mode in (0, 1, 2)])
    recompute_flop = by_mode[c.recompute]
    return StepEstimates(
        time_s=time_s,
        model_flop=model_flop,
        hardware_flop=model_flop + sequences * recompute_flop,
        memory=memory_per_gpu(model, c, train.precision, train.runtime),
        placement=placement,
    )


def _updated_params(model: ModelSpec, c: Candidates) -> FloatArray:
    """Parameters whose Adam step this GPU runs: its shard under ZeRO >= 1, else all it holds."""
    dense, expert = params_per_gpu(model, c)
    dense_shard = np.where(c.zero_stage >= 1, c.dp * c.cp, 1)
    expert_shard = np.where(c.zero_stage >= 1, np.maximum(c.dp * c.cp // c.ep, 1), 1)
    return dense / dense_shard + expert / expert_shard
