"""Quantities that depend only on a candidate's layer-level key, computed once per distinct key.

Everything here is a function of (tp, cp, pp, dp, ep, etp, micro-batch, recompute,
sequence parallel): not of the ZeRO stage, the interleaving depth or the
number of micro-batches. A search evaluates them on its grid of distinct keys
(`Space.layer_keys`, over which every function here broadcasts) and gathers
them to every candidate; a single estimate computes them directly. The numbers
are the same either way, so the search stays exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from planner.specs import ModelSpec, Precision, TrainingSpec

__all__ = [
    "LayerQuantities",
    "LayerSeconds",
    "bf16_layer_extra_s",
    "bf16_layers_by_stage",
    "layer_quantities",
    "output_stage_extra_s",
]


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
    bf16_layer_extra_s: LayerSeconds
    """What one of a quantized run's BF16 layers (`TrainingSpec.bf16_layers_at_start` / `bf16_layers_at_end`) takes
    beyond a quantized layer, one micro-batch (`bf16_layer_extra_s`); zero without them."""

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
            bf16_layer_extra_s=self.bf16_layer_extra_s.map(pick),
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


def bf16_layer_extra_s(
    model: ModelSpec,
    c: Candidates,
    hw: Hardware,
    training: TrainingSpec,
    placement: Placement,
    layer_s: LayerSeconds,
) -> LayerSeconds:
    """Seconds one BF16 layer of a quantized run takes beyond a quantized one, one micro-batch, by kind: the layer
    priced on the same GPU with nothing quantized (`Hardware.unquantized`; its GEMMs at the 16-bit peak, no cast
    kernels, its sequence-parallel gathers and saved inputs in 16 bits) less the quantized layer. Zero unless
    the training keeps layers in BF16 (Megatron-Core `fp8_utils.is_first_last_bf16_layer`: the first
    `num_layers_at_start_in_bf16` and the last `num_layers_at_end_in_bf16` layers of the model run outside the
    FP8 / FP4 autocast; Megatron-LM `--first-last-layers-bf16`)."""
    if not (training.bf16_layers_at_start or training.bf16_layers_at_end) or not hw.quantized:
        return layer_s.map(np.zeros_like)
    bf16 = training.model_copy(
        update={
            "precision": Precision.BF16,
            "fp8_recipe": None,
            "fp8_param_gather": None,
            "bf16_layers_at_start": 0,
            "bf16_layers_at_end": 0,
        }
    )
    twin = _layer_seconds(model, c, hw.unquantized(), bf16, placement)
    return LayerSeconds(*(getattr(twin, f) - getattr(layer_s, f) for f in LayerSeconds.__slots__))


def bf16_layers_by_stage(training: TrainingSpec, c: Candidates) -> tuple[IntArray, IntArray, IntArray]:
    """BF16 layers on the first, middle and last stage (`StageKind` order): the first `bf16_layers_at_start` on the
    first stage, the last `bf16_layers_at_end` on the last (one stage holds both at pp = 1), each at most the
    stage's layers. Megatron-Core allows at most num_layers / pp of each (rule bf16_end_layers), so they sit on the
    end stages; under interleaving they are the first chunk's and the last chunk's, priced on those stages."""
    start, end = training.bf16_layers_at_start, training.bf16_layers_at_end
    single = c.pp == 1
    first, middle, last = stage_kinds(c)
    return (
        np.minimum(start + np.where(single, end, 0), first.layers),
        np.zeros_like(middle.layers),
        np.minimum(end + np.where(single, start, 0), last.layers),
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
    bf16: tuple[tuple[IntArray, IntArray, IntArray], LayerSeconds] | None = None,
) -> tuple[LayerSeconds, FloatArray]:
    """Seconds of one micro-batch on the slowest stage, by kind, and on an average stage.

    `offload_s` gives a stage's exposed activation copies from its layer count (zero without offloading); the
    average stage carries the slowest one's share (offloading runs at pp = 1, rule activation_offload).
    `block` (`TrainingSpec.recompute_num_layers`): a stage reruns its recompute on `recompute.recomputed_layers`
    of its layers only. `bf16`: each stage kind's BF16 layers (`bf16_layers_by_stage`) and what one adds
    (`bf16_layer_extra_s`), on top of the stage's layers priced as quantized ones.
    """
    layer_total = layer_s.critical_path_s
    stages = stage_kinds(c)
    offload = [offload_s(s.layers) for s in stages]
    rerun = [recomputed_layers(c, s.layers, block) for s in stages]  # every layer without block recompute
    totals = [
        s.layers * layer_total - (s.layers - r) * layer_s.recompute + np.where(s.output, logits_s, 0.0) + o
        for s, r, o in zip(stages, rerun, offload, strict=True)
    ]
    options: list[Sequence[np.ndarray]] = [[s.layers for s in stages], [s.output for s in stages], offload, rerun]
    if bf16 is not None:
        edges, extra = bf16
        totals = [t + e * extra.critical_path_s for t, e in zip(totals, edges, strict=True)]
        options.append(list(edges))
    n, has_logits, copies, r, *rest = select_max(totals, *options)
    slowest = layer_s.map(lambda a: n * a)
    slowest = replace(
        slowest,
        compute=slowest.compute + np.where(has_logits, logits_s, 0.0),
        recompute=r * layer_s.recompute,
        backward=slowest.backward - (n - r) * layer_s.recompute,
        offload=copies,
    )
    skipped = 0.0 if block is None else model.num_layers - recomputed_layers_in_model(c, block)
    average = model.num_layers * layer_total - skipped * layer_s.recompute + logits_s + copies
    if bf16 is not None:  # the slowest stage's BF16 layers, by kind; every stage's over the average
        (e,) = rest
        slowest = LayerSeconds(*(getattr(slowest, f) + e * getattr(extra, f) for f in LayerSeconds.__slots__))
        kept = edges[0] + edges[2] - np.where(c.pp == 1, edges[0], 0)  # one stage holds both ends at pp = 1
        average = average + kept * extra.critical_path_s
    return slowest, average / c.pp


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
    extra = bf16_layer_extra_s(model, c, hw, training, placement, layer_s)
    bf16 = (
        (bf16_layers_by_stage(training, c), extra)
        if training.bf16_layers_at_start or training.bf16_layers_at_end
        else None
    )
    slowest, average = _slowest_stage(model, c, layer_s, logits_s, offload, training.recompute_num_layers, bf16)
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
        bf16_layer_extra_s=extra,
    )
