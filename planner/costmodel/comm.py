"""Collective and point-to-point times, per tier, and per parallel dimension.

Ring algorithms (Patarasuk & Yuan 2009; NCCL): all-reduce moves 2(n-1)/n of the
buffer per rank, reduce-scatter and all-gather (n-1)/n. Latency is NCCL's own
model (`src/graph/tuning.cc`, `ncclTopoTuneModel`, Ring/Simple): a base latency
per collective plus one hardware latency per step, the steps that cross a node
boundary at the network latency and the rest at the NVLink latency.

Bandwidth: a group inside one NVLink domain runs at the NVLink rate. A ring that
leaves the domain runs one ring per channel and NCCL's ring search puts the
channels on different NICs (rails): with k members in a domain, each bringing
its own share of its node's NICs, the ring's network hops run at k NIC shares,
never more than the NVLink port that also carries them (`ring_bytes_per_s`).
A point-to-point hop (pipeline send, CP ring exchange, all-to-all) sends one
rank's data through that rank's own NIC share (`network_bytes_per_s`).
Megatron's per-layer TP collectives follow Narayanan et al. 2021 Sec. 3.2
(two all-reduces forward, two backward) and Korthikanti et al. 2022 Sec. 4.2.2
(sequence parallel: a reduce-scatter and an all-gather of the same elements, two calls; under FP8 and NVFP4 the
all-gather moves the quantized GEMM input, `Numerics.gathered_gemm_input_bytes`).

Algorithm choice: NCCL's tuner (`src/graph/tuning.cc`, `ncclTopoTuneModel` and
`topoGetAlgoInfo`) predicts each algorithm's time for the size and runs the
fastest. Here an all-reduce inside one NVLink domain whose switch reduces
(`Hardware.nvls_efficiency` > 0: NVLink SHARP on H100/H200/B200/GB200) is the
faster of the ring and NVLS (`nvls_all_reduce_s`); every other collective is a ring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, FloatArray, tokens_per_microbatch
from planner.costmodel.topology import GroupPlacement, Placement
from planner.numerics import Numerics
from planner.profiles import Hardware
from planner.specs import ModelSpec, RuntimeFeatures

__all__ = [
    "OVERLAP_SLOWDOWN",
    "Link",
    "all_gather_s",
    "all_reduce_s",
    "exposed_s",
    "exposed_tp_comm_s",
    "cp_comm_per_layer_s",
    "link",
    "network_bytes_per_s",
    "nvls_all_reduce_s",
    "ring_bytes_per_s",
    "ring_latency_s",
    "pp_message_s",
    "TpCollectives",
    "tp_collectives_s",
]

NVLS_LATENCY_S = 25e-6
"""Latency of one NVLS collective in one NVLink domain: NCCL `src/graph/tuning.cc`
`ncclTunerConstantsDefaults.hwLatencies[NVLINK][NVLS][Simple]` = 25 us (base latency 0)."""

OVERLAP_SLOWDOWN = 0.15
"""Compute lost while a collective runs beside it: NCCL drives up to 16 channels, one thread block
on its own SM each (NCCL_MAX_NCHANNELS), of the 108 SMs of an A100 (132 on H100). Stated, not fitted."""


def exposed_s(comm_s: FloatArray, window_s: FloatArray | float) -> FloatArray:
    """Critical-path seconds of communication overlapped with `window_s` of compute.

    What does not fit in the window is exposed; what fits still slows the
    compute beside it by OVERLAP_SLOWDOWN.
    """
    hidden = np.minimum(comm_s, window_s)
    return np.asarray(comm_s - hidden + OVERLAP_SLOWDOWN * hidden, dtype=np.float64)


def exposed_tp_comm_s(
    tp_comm_s: FloatArray,
    dgrad_comm_s: FloatArray,
    gemm_window_s: FloatArray,
    wgrad_window_s: FloatArray,
    c: Candidates,
    rt: RuntimeFeatures,
    tp_crosses_network: BoolArray | bool,
) -> FloatArray:
    """TP collective seconds left on the critical path of one layer and micro-batch.

    With `rt.tp_comm_overlap`, Transformer Engine's userbuffers split each
    sequence-parallel all-gather and reduce-scatter into chunks pipelined with the
    GEMM that consumes or produces them (TE `Linear`/`LayerNormLinear` `ub_overlap_ag`,
    `ub_overlap_rs`, `ub_overlap_rs_dgrad`); what does not fit beside the GEMMs stays
    exposed (`exposed_s`). Megatron-LM allows the overlap only with sequence parallelism
    (`arguments.py`: "Tensor parallel communication/GEMM overlap can happen only when
    sequence parallelism is enabled"). `gemm_window_s` is the layer's compute, most of
    which is those GEMMs. Userbuffers work inside one NVLink domain: TE's `initialize_ub`
    makes one communicator per TP group, the "TP model on single NVLink domain", sharing its
    buffers over NVLink (`module/base.py` at d0067d0), so a TP group that crosses the network
    (`tp_crosses_network`) overlaps nothing that way.

    Otherwise, with `rt.overlap_dgrad_comm`, the column-parallel layers' input-gradient collectives
    (`dgrad_comm_s`, part of `tp_comm_s`: a reduce-scatter under sequence parallelism, else an
    all-reduce) are issued asynchronously and the weight-gradient GEMM runs meanwhile (TE v1.8
    `module/linear.py` and `layernorm_linear.py` backward, "Overlap dgrad-RS/AR with wgrad", commit
    3ec998e; Megatron-LM's own layers since commit 16c90445e7 of 2021-09, with sequence parallelism
    since cfd2e21607 of 2022-04, `megatron/mpu/layers.py` LinearWithGradAccumulationAndAsyncCommunication):
    they hide behind `wgrad_window_s`, the backward's weight-gradient half; the rest is paid in full.
    Megatron-LM of April 2021 (`overlap_dgrad_comm` false) pays every collective.
    """
    dgrad = np.asarray(dgrad_comm_s if rt.overlap_dgrad_comm else np.zeros_like(dgrad_comm_s), dtype=np.float64)
    unfused = tp_comm_s - dgrad + exposed_s(dgrad, wgrad_window_s)
    if not rt.tp_comm_overlap:
        return np.asarray(unfused, dtype=np.float64)
    userbuffers = c.sequence_parallel & ~np.asarray(tp_crosses_network, dtype=np.bool_)
    return np.asarray(np.where(userbuffers, exposed_s(tp_comm_s, gemm_window_s), unfused), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Link:
    """The slowest hop of a group, per rank and direction."""

    bytes_per_s: FloatArray
    latency_s: FloatArray


def network_bytes_per_s(hw: Hardware) -> FloatArray:
    """Per-GPU rate of a hop that leaves the NVLink domain: the GPU's share of its node's NICs,
    and never more than its NVLink port (the traffic passes that port too). Elementwise when the rates
    are arrays (a calibration grid, `planner.calibration.fit`)."""
    return np.asarray(np.minimum(hw.nic_bytes_per_s_per_gpu, hw.nvlink_bytes_per_s), dtype=np.float64)


def link(group: GroupPlacement, hw: Hardware) -> Link:
    """Bandwidth and latency of one rank's point-to-point hop in `group`: NVLink when every group of
    its kind stays inside one NVLink domain, the rank's own NIC share (`network_bytes_per_s`) otherwise.

    Pipeline sends, the CP ring exchange and all-to-alls price their hops here.
    """
    crosses = group.crosses_network
    return Link(
        np.where(crosses, network_bytes_per_s(hw), hw.nvlink_bytes_per_s),
        np.where(crosses, hw.network_latency_s, hw.nvlink_latency_s),
    )


def ring_bytes_per_s(group: GroupPlacement, hw: Hardware, rails: bool = True) -> FloatArray:
    """Per-rank bus rate of a ring collective over `group`, bytes/s.

    Inside one NVLink domain: the NVLink rate. Across the network: the ring's
    members in one domain, k, each bring their NIC share, so the bytes every
    ring hop carries leave the domain through k NIC shares; capped at the NVLink
    rate, which the in-domain hops run at.

    Source: NCCL `src/graph/search.cc` (`ncclTopoCompute`: one ring per channel,
    channels spread over the node's NICs; `NCCL_CROSS_NIC` in the NCCL environment
    variable docs) and nccl-tests `doc/PERFORMANCE.md` (bus bandwidth: the per-link
    rate a ring reaches, algbw x 2(n-1)/n for all-reduce). For example two DGX H100
    with 8 x 400 Gb/s each run a 16-rank all-reduce near 8 NICs, not one.
    Assumes every group of the kind runs at once, so a node's NICs are shared
    among its groups in proportion to their members. With `rails` off
    (`RuntimeFeatures.ring_rails`) the ring runs at one rank's NIC share.
    """
    members = np.maximum(group.members_per_domain, 1) if rails else 1
    network = np.minimum(members * hw.nic_bytes_per_s_per_gpu, hw.nvlink_bytes_per_s)
    return np.asarray(np.where(group.crosses_network, network, hw.nvlink_bytes_per_s), dtype=np.float64)


def ring_latency_s(group: GroupPlacement, hw: Hardware, steps_per_rank: int) -> FloatArray:
    """Latency of one ring collective of `steps_per_rank` x (n-1) steps (2 for all-reduce, 1 for
    reduce-scatter and all-gather), seconds: base + intra-domain steps x intra latency + inter-domain
    steps x network latency.

    Source: NCCL `src/graph/tuning.cc` `ncclTopoTuneModel`, Ring/Simple: latency = baseLat +
    (nsteps - nInterSteps) x intraLat + nInterSteps x interLat, nsteps = 2(n-1) (all-reduce) or
    n-1, nInterSteps = 2(nNodes-1) or nNodes-1 (a node here is an NVLink domain); a ring that
    crosses nodes has intraLat = max(intraLat, 3 x getNetOverhead()), three network posts per
    Simple step.
    """
    n = group.size
    crosses = group.crosses_network
    domains = np.where(crosses, -(-n // np.maximum(group.members_per_domain, 1)), 1)
    steps = steps_per_rank * (n - 1)
    inter = steps_per_rank * (domains - 1)
    intra_latency = np.where(crosses, max(hw.nvlink_latency_s, 3 * hw.net_overhead_s), hw.nvlink_latency_s)
    total = hw.collective_base_latency_s + (steps - inter) * intra_latency + inter * hw.network_latency_s
    return np.asarray(np.where(n > 1, total, 0.0), dtype=np.float64)


def _ring_s(
    nbytes: FloatArray,
    group: GroupPlacement,
    hw: Hardware,
    collectives: FloatArray | float,
    rails: bool,
    steps_per_rank: int,
) -> FloatArray:
    """A ring collective of `steps_per_rank` x (n-1) steps over an `nbytes` buffer per rank, sent as
    `collectives` separate calls: steps_per_rank (n-1)/n bytes / `ring_bytes_per_s` + collectives x
    `ring_latency_s` (Patarasuk & Yuan 2009; NCCL)."""
    n = group.size
    wire = steps_per_rank * (n - 1) / n * nbytes / ring_bytes_per_s(group, hw, rails)
    return np.where(n > 1, wire + collectives * ring_latency_s(group, hw, steps_per_rank), 0.0)


def nvls_all_reduce_s(
    nbytes: FloatArray, group: GroupPlacement, hw: Hardware, collectives: FloatArray | float = 1.0
) -> FloatArray:
    """NVLink SHARP all-reduce of `nbytes` per rank in one NVLink domain, seconds (inf where it cannot run).

    Each rank's shard is reduced in the switch (`multimem.ld_reduce`) and the result multicast back
    (`multimem.st`): every rank's link carries the buffer once for the other ranks' reads of its data
    and 1/n for its own shard, each way, so (1 + 1/n) bytes at NCCL's NVLS efficiency times the
    NVLink rate; one `NVLS_LATENCY_S` per call. Source: NCCL `src/device/all_reduce.h`
    (`runRing`/NVLS kernels: reduce-scatter by ld_reduce, all-gather by multicast store) and
    `src/graph/tuning.cc` (`nvlsEfficiency`, NVLS latency; NVLS is single-node without CollNet).
    Check: 8 x H100 gives algbw 0.85 x 360 / 1.125 = 272 GB/s, busbw 476; measured 273 / 480
    (github.com/NVIDIA/nccl/issues/1455, nccl-tests issue 212). Reduce-scatter and all-gather gain
    nothing this way (a rank's link still carries the whole buffer, not less than a ring's (n-1)/n),
    so NCCL's tuner keeps them on the ring.
    """
    n = group.size.astype(np.float64)
    usable = (hw.nvls_efficiency > 0) & ~group.crosses_network & (group.size > 2)
    rate = max(hw.nvls_efficiency, 1e-9) * hw.nvlink_bytes_per_s
    seconds = (1 + 1 / n) * nbytes / rate + collectives * NVLS_LATENCY_S
    return np.asarray(np.where(usable, seconds, np.inf), dtype=np.float64)


def all_reduce_s(
    nbytes: FloatArray,
    group: GroupPlacement,
    hw: Hardware,
    collectives: FloatArray | float = 1.0,
    *,
    rails: bool = True,
) -> FloatArray:
    """All-reduce of `nbytes` per rank sent as `collectives` separate calls, seconds: the faster of the
    ring (2(n-1)/n bytes / `ring_bytes_per_s` + collectives x `ring_latency_s`) and, in an NVLink
    domain with NVLink SHARP, `nvls_all_reduce_s` (NCCL's tuner, module docstring)."""
    ring = _ring_s(nbytes, group, hw, collectives, rails, 2)
    if hw.nvls_efficiency <= 0:
        return ring
    return np.asarray(np.minimum(ring, nvls_all_reduce_s(nbytes, group, hw, collectives)), dtype=np.float64)


def all_gather_s(
    nbytes: FloatArray,
    group: GroupPlacement,
    hw: Hardware,
    collectives: FloatArray | float = 1.0,
    *,
    rails: bool = True,
) -> FloatArray:
    """Ring all-gather (or reduce-scatter) of an `nbytes` buffer sent as `collectives` separate calls,
    seconds: (n-1)/n bytes / `ring_bytes_per_s` + collectives x `ring_latency_s`."""
    return _ring_s(nbytes, group, hw, collectives, rails, 1)


@dataclass(frozen=True, slots=True)
class TpCollectives:
    """Seconds of one layer's TP collectives for one micro-batch, before any overlap (`tp_collectives_s`)."""

    total_s: FloatArray
    """2 forward + 2 backward (+2 under full recompute), each an all-reduce, or with sequence parallelism a
    reduce-scatter and an all-gather (two ring calls)."""
    dgrad_s: FloatArray
    """The part of `total_s` on the input gradients of the layer's two column-parallel linears (QKV and the
    first MLP GEMM) in backward: a reduce-scatter each under sequence parallelism (the mirror of their
    forward all-gather), else an all-reduce each (Megatron's `f` operator, Shoeybi et al. 2019 Fig. 3).
    `exposed_tp_comm_s` says when they overlap the weight-gradient GEMMs."""
    sp_gather_s: FloatArray
    """Sequence parallelism's extra backward all-gathers of the saved sequence shards (two per layer), not in
    `total_s`. Source: Korthikanti 2022 Sec. 4.2.2: the column-parallel inputs are kept sharded and gathered
    again for the weight gradients, overlapped with the input-gradient GEMM."""


@dataclass(frozen=True, slots=True)
class _Block:
    """One attention or MLP block's collectives over its tensor-parallel group, per pass."""

    forward_s: FloatArray
    """The forward's: an all-reduce of the output, or with sequence parallelism an all-gather of the input and a
    reduce-scatter of the output (two ring passes)."""
    backward_s: FloatArray
    """The backward's: an all-reduce of the input gradient, or with sequence parallelism an all-gather of the
    output gradient and a reduce-scatter of the input gradient."""
    dgrad_s: FloatArray
    """Its column-parallel linear's backward input-gradient collective: the reduce-scatter, or the all-reduce."""
    gather_s: FloatArray
    """One all-gather of the block's input (sequence parallelism's backward re-gather)."""

    def scaled(self, weight: FloatArray | float) -> _Block:
        """Every field times `weight` (a share of the layers, or 0/1 per candidate)."""
        return _Block(weight * self.forward_s, weight * self.backward_s, weight * self.dgrad_s, weight * self.gather_s)

    def __add__(self, other: _Block) -> _Block:
        return _Block(
            self.forward_s + other.forward_s,
            self.backward_s + other.backward_s,
            self.dgrad_s + other.dgrad_s,
            self.gather_s + other.gather_s,
        )


def _block_collectives(
    output_elements: FloatArray,
    group: GroupPlacement,
    c: Candidates,
    hw: Hardware,
    rt: RuntimeFeatures,
    gather_bytes: float,
    reduce_bytes: float,
    input_elements: FloatArray | None = None,
) -> _Block:
    """A block whose input side (the forward all-gather, the input-gradient reduction) moves `input_elements`
    (default `output_elements`) and whose output side (the forward reduction, the output-gradient gather)
    `output_elements`. Under sequence parallelism a pass is one all-gather, at `gather_bytes` per element (what
    the linear layer it feeds reads, `Numerics.gathered_gemm_input_bytes`), and one reduce-scatter at
    `reduce_bytes`; without it one all-reduce at `reduce_bytes`."""

    def side(elements: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(all-gather, reduce-scatter, all-reduce) seconds of one side; a reduce-scatter is an all-gather's ring."""
        scatter = all_gather_s(reduce_bytes * elements, group, hw, rails=rt.ring_rails)
        gather = (
            scatter
            if gather_bytes == reduce_bytes
            else all_gather_s(gather_bytes * elements, group, hw, rails=rt.ring_rails)
        )
        return gather, scatter, all_reduce_s(reduce_bytes * elements, group, hw, rails=rt.ring_rails)

    gather_out, scatter_out, reduce_out = side(output_elements)
    gather_in, scatter_in, reduce_in = (
        (gather_out, scatter_out, reduce_out) if input_elements is None else side(input_elements)
    )
    sp = c.sequence_parallel
    return _Block(
        np.asarray(np.where(sp, gather_in + scatter_out, reduce_out), dtype=np.float64),
        np.asarray(np.where(sp, gather_out + scatter_in, reduce_in), dtype=np.float64),
        np.asarray(np.where(sp, scatter_in, reduce_in), dtype=np.float64),
        np.asarray(gather_in, dtype=np.float64),
    )


def _attention_input_width(model: ModelSpec) -> int:
    """Width per token of the attention block's input-side TP collective: the hidden state, or under MLA the
    latents (and the shared RoPE key) that the up-projections gather, q_lora_rank + kv_lora_rank +
    qk_pos_emb_head_dim, with the hidden state in place of the query latent when there is none. Megatron-Core
    `MLASelfAttention.get_query_key_value_tensors`: the replicated down-projections run on the sequence shard,
    then the latents are gathered (the up-projections' sequence-parallel input, and k_pos_emb explicitly)."""
    mla = model.mla
    if mla is None:
        return model.hidden_size
    query = model.hidden_size if mla.q_lora_rank is None else mla.q_lora_rank
    return query + mla.kv_lora_rank + mla.qk_pos_emb_head_dim


def tp_collectives_s(
    model: ModelSpec,
    c: Candidates,
    placement: Placement,
    hw: Hardware,
    rt: RuntimeFeatures,
    num: Numerics,
    reruns: FloatArray,
) -> TpCollectives:
    """One layer's TP collectives (`TpCollectives`): each moves the layer's activations, tokens x hidden; a
    reduce-scatter costs an all-gather's ring pass. Reductions carry `num.wire_bytes` per element; sequence
    parallelism's all-gathers into the attention, dense-MLP, shared-expert and Mamba linears what those layers read
    (`num.gathered_gemm_input_bytes`: one byte under per-tensor FP8, where Transformer Engine gathers the quantized
    tensor), the routed experts' 16-bit tokens (Megatron-Core's token dispatcher gathers them over the expert-TP
    group itself, `gather_from_sequence_parallel_region`, before its grouped linears quantize).

    Per block (attention, MLP; in a hybrid each layer's one block, a Mamba mixer's like an MLP's) and pass, one
    collective over the block's tensor-parallel group: the tp group,
    except the MLP block of an MoE layer, whose routed experts are split over the etp group (none when etp = 1:
    the token all-to-all, `expert_dispatch.ep_comm_per_layer_s`, hands each expert its rows; Megatron-Core MoE
    parallel folding, Liu et al. 2025, arXiv 2504.14960, Sec. 3), plus a tp-group collective for the shared
    experts (split over tp) when etp differs from tp. With etp = tp an MoE layer's MLP block moves a dense one's
    elements, its gathers in 16 bits. Under MLA the attention block's input side moves the latents
    (`_attention_input_width`).
    Passes: forward and backward, plus `reruns` recomputed forwards (`recompute.full_recompute_reruns`).
    """
    tokens = tokens_per_microbatch(model, c)
    hidden = tokens * model.hidden_size
    wire, gathered = num.wire_bytes, num.gathered_gemm_input_bytes
    dense = _block_collectives(hidden, placement.tp, c, hw, rt, gathered, wire)
    attention = dense
    if model.mla is not None:
        latents = tokens * _attention_input_width(model)
        attention = _block_collectives(hidden, placement.tp, c, hw, rt, gathered, wire, latents)
    # A Mamba mixer's in_proj / out_proj pair moves the hidden state like an MLP's fc1 / fc2 (Megatron-Core
    # `MambaMixer`: column- then row-parallel over the tp group).
    blocks = attention.scaled(model.attention_layer_share) + dense.scaled(
        model.dense_mlp_share + model.mamba_layer_share
    )
    if model.moe is not None:
        share = model.moe_layer_share
        routed = _block_collectives(hidden, placement.etp, c, hw, rt, wire, wire)
        shared = np.where(c.etp != c.tp, float(model.moe.num_shared_experts > 0), 0.0)
        blocks = blocks + routed.scaled(share) + dense.scaled(share * shared)
    return TpCollectives(
        total_s=np.asarray((1 + reruns) * blocks.forward_s + blocks.backward_s, dtype=np.float64),
        dgrad_s=np.asarray(blocks.dgrad_s, dtype=np.float64),
        sp_gather_s=np.asarray(np.where(c.sequence_parallel, blocks.gather_s, 0.0), dtype=np.float64),
    )


def cp_comm_per_layer_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, num: Numerics, reruns: FloatArray
) -> FloatArray:
    """Ring-attention K/V exchange of one layer and micro-batch: (cp-1) K+V blocks forward, twice that backward,
    once more per recomputed forward (`reruns`, `recompute.full_recompute_reruns`).

    Source: Megatron-Core context parallelism (ring attention, Liu et al. 2023, arXiv 2310.01889). A block is
    the K and V the core reads (`ModelSpec.key_value_width`: under MLA the up-projected per-head keys and values).
    """
    kv_block = num.wire_bytes * tokens_per_microbatch(model, c) * model.key_value_width / c.tp
    hop = link(placement.cp, hw)
    per_pass = model.attention_layer_share * (c.cp - 1) * (kv_block / hop.bytes_per_s + hop.latency_s)
    passes = 3 + reruns
    return np.where(c.cp > 1, passes * per_pass, 0.0)


def pp_message_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, rt: RuntimeFeatures, num: Numerics
) -> FloatArray:
    """Seconds of one point-to-point send between stages: one micro-batch's activation (or its gradient)
    for one model chunk (Narayanan 2021 Sec. 4.1 scatter/gather).

    Over the network each TP rank sends through its own NIC: the whole activation
    unless scatter/gather or sequence parallel splits it by tp. How many a
    micro-batch sends, and how many of them hide behind compute, is
    `pipeline.exposed_sends_s`.
    """
    full = num.wire_bytes * tokens_per_microbatch(model, c) * model.hidden_size
    split = rt.scatter_gather_p2p | c.sequence_parallel
    per_gpu = np.where(split, full / c.tp, full)
    hop = link(placement.pp, hw)
    return np.asarray(np.where(c.pp > 1, per_gpu / hop.bytes_per_s + hop.latency_s, 0.0), dtype=np.float64)
