"""Collective and point-to-point times, per tier, and per parallel dimension.

Ring algorithms (Patarasuk & Yuan 2009; NCCL): all-reduce moves 2(n-1)/n of the
buffer per rank, reduce-scatter and all-gather (n-1)/n, each step paying the
link latency. A group inside one NVLink domain runs at the NVLink rate; one that
crosses the network runs at each rank's own share of its node's NICs. Rails are
not assumed to add up for a flat ring whose members share a node: Narayanan
et al. 2021 Table 2's ZeRO-3 rows (eight members per node) scale as one NIC
per GPU, not eight. Megatron's per-layer TP collectives follow
Narayanan et al. 2021 Sec. 3.2 (two all-reduces forward, two backward) and
Korthikanti et al. 2022 Sec. 4.2.2 (sequence parallel: reduce-scatter +
all-gather of the same volume).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import FULL, Candidates, FloatArray, tokens_per_microbatch
from planner.costmodel.pipeline import p2p_messages_per_microbatch
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
    "cp_comm_per_layer_s",
    "ep_comm_per_layer_s",
    "link",
    "network_bytes_per_s",
    "pp_comm_per_microbatch_s",
    "sp_backward_gather_per_layer_s",
    "tp_comm_per_layer_s",
]

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


@dataclass(frozen=True, slots=True)
class Link:
    """The slowest hop of a group, per rank and direction."""

    bytes_per_s: FloatArray
    latency_s: FloatArray


def network_bytes_per_s(hw: Hardware) -> float:
    """Per-GPU rate of a hop that leaves the NVLink domain: the GPU's share of its node's NICs,
    and never more than its NVLink port (the traffic passes that port too)."""
    return min(hw.nic_bytes_per_s_per_gpu, hw.nvlink_bytes_per_s)


def link(group: GroupPlacement, hw: Hardware) -> Link:
    """Bandwidth and latency of the slowest hop of `group`: NVLink when every group of its kind
    stays inside one NVLink domain, the network share (`network_bytes_per_s`) otherwise.

    Every collective, point-to-point send and all-to-all prices its hops here.
    """
    crosses = group.crosses_network
    return Link(
        np.where(crosses, network_bytes_per_s(hw), hw.nvlink_bytes_per_s),
        np.where(crosses, hw.network_latency_s, hw.nvlink_latency_s),
    )


def all_reduce_s(nbytes: FloatArray, group: GroupPlacement, hw: Hardware) -> FloatArray:
    """Ring all-reduce of `nbytes` per rank: 2(n-1)/n bytes/bw + 2(n-1) latency."""
    hop = link(group, hw)
    n = group.size
    return np.where(n > 1, 2 * (n - 1) / n * nbytes / hop.bytes_per_s + 2 * (n - 1) * hop.latency_s, 0.0)


def all_gather_s(nbytes: FloatArray, group: GroupPlacement, hw: Hardware) -> FloatArray:
    """Ring all-gather (or reduce-scatter) of an `nbytes` buffer: (n-1)/n bytes/bw + (n-1) latency."""
    hop = link(group, hw)
    n = group.size
    return np.where(n > 1, (n - 1) / n * nbytes / hop.bytes_per_s + (n - 1) * hop.latency_s, 0.0)


def tp_comm_per_layer_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, num: Numerics
) -> FloatArray:
    """TP collectives of one layer and micro-batch: 2 forward + 2 backward (+2 under full recompute)."""
    nbytes = num.wire_bytes * tokens_per_microbatch(model, c) * model.hidden_size
    count = 4 + np.where(c.recompute == FULL, 2, 0)
    return count * all_reduce_s(nbytes, placement.tp, hw)


def sp_backward_gather_per_layer_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, num: Numerics
) -> FloatArray:
    """Sequence parallel's extra backward all-gathers of the saved sequence shards (two per layer).

    Source: Korthikanti 2022 Sec. 4.2.2: the column-parallel inputs are kept
    sharded and gathered again for the weight gradients, overlapped with the
    input-gradient GEMM.
    """
    nbytes = num.wire_bytes * tokens_per_microbatch(model, c) * model.hidden_size
    return np.where(c.sequence_parallel, 2 * all_gather_s(nbytes, placement.tp, hw), 0.0)


def cp_comm_per_layer_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, num: Numerics
) -> FloatArray:
    """Ring-attention K/V exchange of one layer and micro-batch: (cp-1) K+V blocks forward, twice that backward.

    Source: Megatron-Core context parallelism (ring attention, Liu et al. 2023, arXiv 2310.01889).
    """
    kv_block = 2 * num.wire_bytes * tokens_per_microbatch(model, c) * model.kv_hidden_size / c.tp
    hop = link(placement.cp, hw)
    per_pass = (c.cp - 1) * (kv_block / hop.bytes_per_s + hop.latency_s)
    passes = 3 + np.where(c.recompute == FULL, 1, 0)
    return np.where(c.cp > 1, passes * per_pass, 0.0)


def ep_comm_per_layer_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, num: Numerics
) -> FloatArray:
    """All-to-all of one MoE layer and micro-batch: dispatch + combine, forward and backward.

    Source: Megatron-Core MoE token dispatcher (DeepSeek-V3 report, arXiv 2412.19437 Sec. 3.2.2).
    Each rank sends (ep-1)/ep of its routed tokens; the share leaving the NVLink domain goes
    through its NIC, the rest over NVLink, concurrently. Averaged over all layers.
    """
    if model.moe is None:
        return np.zeros(len(c))
    nbytes = num.wire_bytes * tokens_per_microbatch(model, c) * model.moe.top_k * model.hidden_size / c.tp
    group = placement.ep
    ep = group.size.astype(np.float64)
    in_domain = (group.members_per_domain - 1) / ep * nbytes / hw.nvlink_bytes_per_s
    off_domain = (ep - group.members_per_domain) / ep * nbytes / network_bytes_per_s(hw)
    one = np.maximum(in_domain, off_domain) + link(group, hw).latency_s
    count = 4 + np.where(c.recompute == FULL, 2, 0)
    share = model.num_moe_layers / model.num_layers
    return np.where(ep > 1, share * count * one, 0.0)


def pp_comm_per_microbatch_s(
    model: ModelSpec, c: Candidates, placement: Placement, hw: Hardware, rt: RuntimeFeatures, num: Numerics
) -> FloatArray:
    """Blocking sends on one stage per micro-batch (Narayanan 2021 Sec. 4.1 scatter/gather).

    Over the network each TP rank sends through its own NIC: the whole activation
    unless scatter/gather or sequence parallel splits it by tp.
    """
    full = num.wire_bytes * tokens_per_microbatch(model, c) * model.hidden_size
    split = rt.scatter_gather_p2p | c.sequence_parallel
    per_gpu = np.where(split, full / c.tp, full)
    hop = link(placement.pp, hw)
    return p2p_messages_per_microbatch(c) * (per_gpu / hop.bytes_per_s + hop.latency_s)
