"""Quantities that depend only on a candidate's layer-level key, computed once per distinct key.

Everything here is a function of (tp, cp, pp, dp, ep, etp, micro-batch, recompute,
sequence parallel): not of the ZeRO stage, the interleaving depth or the
number of micro-batches. A search evaluates them on its grid of distinct keys
(`Space.layer_keys`, over which every function here broadcasts) and gathers
them to every candidate; a single estimate computes them directly. The numbers
are the same either way, so the search stays exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates, FloatArray, IntArray, select_max
from planner.costmodel.comm import cp_comm_per_layer_s, exposed_s, exposed_tp_comm_s, tp_collectives_s
from planner.costmodel.data_parallel import DpCollectives, dp_collectives_s
from planner.costmodel.expert_dispatch import ep_comm_per_layer_s
from planner.costmodel.memory import StageTerms, activation_bytes_per_layer, all_stage_terms
from planner.costmodel.offload import exposed_offload_s
from planner.costmodel.params import ParamCounts, largest_stage_params, stage_kinds, stage_params
from planner.costmodel.recompute import (
    dispatch_reruns,
    full_recompute_reruns,
    recomputed_layers,
    recomputed_layers_in_model,
)
from planner.costmodel.topology import Placement, place
from planner.numerics import training_numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["LayerQuantities", "LayerSeconds", "layer_quantities", "output_stage_extra_s"]


@dataclass(frozen=True, slots=True)
class LayerSeconds:
    """Seconds of one micro-batch through one layer (or a stage's layers), by kind.

    The first six are on the critical path and add up to `critical_path_s`;
    `forward` and `backward` (with recomputation) split the compute for overlap
    windows and the schedule drawing. `offload` is a stage's, not a layer's
    (`offload.exposed_offload_s`): zero per layer. `ep_unpaired` is what a micro-batch the schedule runs
    unpaired adds to `ep_comm` under the MoE all-to-all overlap (`expert_dispatch.EpComm`), paid by
    `pipeline.unpaired_microbatches` of them (`step.step_time_s`).
    """

    compute: FloatArray
    recompute: FloatArray
    tp_comm: FloatArray
    cp_comm: FloatArray
    ep_comm: FloatArray
    offload: FloatArray
    forward: FloatArray
    backward: FloatArray
    ep_unpaired: FloatArray

    @property
    def critical_path_s(self) -> FloatArray:
        """compute + recompute + TP, CP and EP communication left exposed + activation copies left exposed."""
        return self.compute + self.recompute + self.tp_comm + self.cp_comm + self.ep_comm + self.offload

    def map(self, fn: Callable[[FloatArray], FloatArray]) -> LayerSeconds:
        """The seconds with `fn` applied to every per-candidate array."""
        return LayerSeconds(*(fn(getattr(self, name)) for name in LayerSeconds.__slots__))


@dataclass(frozen=True, slots=True)
class LayerQuantities:
    placement: Placement
    layer_s: LayerSeconds
    """One layer and micro-batch."""
    logits_s: FloatArray
    """The last stage's seconds per micro-batch beyond its layers (`output_stage_extra_s`: output layer, loss, MTP)."""
    stage_params: tuple[ParamCounts, ...]
    """Parameters per GPU of the first, middle and last stage (`StageKind` order)."""
    stage_terms: tuple[StageTerms, ...]
    """The memory terms of the same stages."""
    largest_params: ParamCounts
    """Parameters per GPU of the stage holding the most."""
    dp_collectives_s: DpCollectives
    """DP all-reduce, reduce-scatter and all-gather seconds over the largest stage's parameters."""
    slowest_stage_s: LayerSeconds
    """One micro-batch on the slowest stage (compute includes the logits there); pipeline sends excluded."""
    average_stage_s: FloatArray
    """One micro-batch on an average stage: all layers and the logits over pp; pipeline sends excluded."""

    def take(self, index: IntArray) -> LayerQuantities:
        def pick(a: np.ndarray) -> np.ndarray:
            return a[index]

        return LayerQuantities(
            placement=self.placement.map(pick),
            layer_s=self.layer_s.map(pick),
            logits_s=self.logits_s[index],
            stage_params=tuple(p.map(pick) for p in self.stage_params),
            stage_terms=tuple(t.map(pick) for t in self.stage_terms),
            largest_params=self.largest_params.map(pick),
            dp_collectives_s=self.dp_collectives_s.map(pick),
            slowest_stage_s=self.slowest_stage_s.map(pick),
            average_stage_s=self.average_stage_s[index],
        )


def _layer_seconds(
    model: ModelSpec, c: Candidates, hw: Hardware, training: TrainingSpec, placement: Placement
) -> LayerSeconds:
    rt, num = training.runtime, training_numerics(training, hw)
    layer = compute.layer_times(model, c, hw, rt)
    layer_compute = layer.forward_s + layer.backward_s
    block = training.recompute_num_layers
    reruns = full_recompute_reruns(model, c, block)
    tp = tp_collectives_s(model, c, placement, hw, rt, num, reruns)
    tp_comm = exposed_tp_comm_s(
        tp.total_s, tp.dgrad_s, layer_compute, layer.backward_s / 2, c, rt, placement.tp.crosses_network
    )
    tp_comm = tp_comm + exposed_s(tp.sp_gather_s, layer.backward_s / 2)
    ep = ep_comm_per_layer_s(model, c, placement, hw, rt, num, layer, dispatch_reruns(model, c, rt, block))
    return LayerSeconds(
        compute=layer_compute,
        recompute=layer.recompute_s,
        tp_comm=tp_comm,
        cp_comm=exposed_s(cp_comm_per_layer_s(model, c, placement, hw, num, reruns), layer_compute),
        ep_comm=ep.paired_s,
        offload=np.zeros_like(layer_compute),
        forward=layer.forward_s,
        backward=layer.backward_s + layer.recompute_s,
        ep_unpaired=ep.unpaired_extra_s,
    )


def output_stage_extra_s(model: ModelSpec, c: Candidates, hw: Hardware, layer_s: LayerSeconds) -> FloatArray:
    """Seconds the last stage spends per micro-batch beyond its layers: the output layer and loss
    (`compute.logits_time_s`), and each multi-token-prediction module (`ModelSpec.mtp_num_layers`): one more
    layer, priced as the average layer with its communication, eh_proj and a second output layer and loss
    (DeepSeek-V3 report, arXiv 2412.19437, Sec. 2.2; Megatron-Core `MultiTokenPredictionBlock` on the last
    stage)."""
    logits = compute.logits_time_s(model, c, hw)
    if model.mtp_num_layers == 0:
        return logits
    module = layer_s.critical_path_s + logits + compute.mtp_projection_time_s(model, c, hw)
    return np.asarray(logits + model.mtp_num_layers * module, dtype=np.float64)


StageOffload = Callable[[IntArray], FloatArray]
"""A stage's exposed offload seconds per micro-batch, from its layer count."""


def _slowest_stage(
    model: ModelSpec,
    c: Candidates,
    layer_s: LayerSeconds,
    logits_s: FloatArray,
    offload_s: StageOffload,
    block: int | None = None,
) -> tuple[LayerSeconds, FloatArray]:
    """Seconds of one micro-batch on the slowest stage, by kind, and on an average stage.

    `offload_s` gives a stage's exposed activation copies from its layer count (zero without offloading); the
    average stage carries the slowest one's share (offloading runs at pp = 1, rule activation_offload).
    `block` (`TrainingSpec.recompute_num_layers`): a stage reruns its recompute on `recompute.recomputed_layers`
    of its layers only.
    """
    layer_total = layer_s.critical_path_s
    stages = stage_kinds(c)
    offload = [offload_s(s.layers) for s in stages]
    rerun = [recomputed_layers(c, s.layers, block) for s in stages]  # every layer without block recompute
    totals = [
        s.layers * layer_total - (s.layers - r) * layer_s.recompute + np.where(s.output, logits_s, 0.0) + o
        for s, r, o in zip(stages, rerun, offload, strict=True)
    ]
    options = ([s.layers for s in stages], [s.output for s in stages], offload, rerun)
    n, has_logits, copies, r = select_max(totals, *options)
    slowest = layer_s.map(lambda a: n * a)
    slowest = replace(
        slowest,
        compute=slowest.compute + np.where(has_logits, logits_s, 0.0),
        recompute=r * layer_s.recompute,
        backward=slowest.backward - (n - r) * layer_s.recompute,
        offload=copies,
    )
    skipped = 0.0 if block is None else model.num_layers - recomputed_layers_in_model(c, block)
    return slowest, (model.num_layers * layer_total - skipped * layer_s.recompute + logits_s + copies) / c.pp


def _stage_offload(
    c: Candidates, hw: Hardware, training: TrainingSpec, layer_s: LayerSeconds, per_layer: FloatArray
) -> StageOffload:
    """`offload.exposed_offload_s` for these candidates (`per_layer`: their activation bytes per layer), as a
    function of a stage's layers."""
    requested = training.activation_offload_layers
    if requested == 0:
        zeros = np.zeros(c.shape)
        return lambda layers: zeros
    return lambda layers: exposed_offload_s(requested, layers, per_layer, layer_s.forward, layer_s.backward, hw)


def layer_quantities(model: ModelSpec, training: TrainingSpec, c: Candidates, hw: Hardware) -> LayerQuantities:
    """The layer-level quantities of every candidate in `c`.

    `c`'s columns broadcast: the search passes its keys as a grid (`Space.layer_keys`, (recompute,
    sequence parallel) pairs down, row keys across), so what depends on neither (the placement, the
    parameters per stage, the DP collectives) is computed once per row key; every quantity then has the
    shape its inputs give it, broadcastable to `c.shape`. The numbers are those of the flat candidates
    (a test checks it).
    """
    placement = place(c, hw.nvlink_domain_gpus, hw.gpus_per_node)
    params = tuple(stage_params(model, c, stage) for stage in stage_kinds(c))
    largest = largest_stage_params(params)
    collectives = dp_collectives_s(model, c, largest, placement, hw, training)
    layer_s = _layer_seconds(model, c, hw, training, placement)
    logits_s = output_stage_extra_s(model, c, hw, layer_s)
    num = training_numerics(training, hw)
    per_layer = activation_bytes_per_layer(model, c, training.runtime, num)
    offload = _stage_offload(c, hw, training, layer_s, per_layer)
    slowest, average = _slowest_stage(model, c, layer_s, logits_s, offload, training.recompute_num_layers)
    return LayerQuantities(
        placement=placement,
        layer_s=layer_s,
        logits_s=logits_s,
        stage_params=params,
        stage_terms=all_stage_terms(model, c, training, num, params, per_layer),
        largest_params=largest,
        dp_collectives_s=collectives,
        slowest_stage_s=slowest,
        average_stage_s=average,
    )
