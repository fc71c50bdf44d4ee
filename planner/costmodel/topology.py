"""Where each parallel group's ranks land: inside one NVLink domain or across the network.

Ranks are numbered the way Megatron-LM will number them. With
`--use-tp-pp-dp-mapping` the order is tp innermost, then cp, pp, dp, which
keeps pipeline neighbours close; Megatron-Core accepts that order only when
pp = 1 or the experts' data-parallel size is the attention's (`tp_pp_dp_order`),
and otherwise uses its default tp, cp, (ep,) dp, pp, with pp outermost. The
experts have their own grid over a stage's tp x cp x dp ranks, in the same order
(MoE parallel folding, Megatron-Core `initialize_model_parallel`'s expert
`RankGenerator`: etp innermost, then ep, then the expert data-parallel ranks):
an expert-parallel group is ep ranks at stride etp (the stage's cp ranks, then
its dp ranks, when etp = tp). NVLink domains are contiguous
blocks of `job_domain_gpus` ranks: the whole domain where a node is one
domain (DGX) or the job fits in one, else the job's allocation segment
(an NVL72 rack holds 18 four-GPU trays; Megatron-Bridge's Slurm executor
asks for `--segment` = the largest divisor of the job's trays up to 18,
`scripts/performance/utils/executors.py`, so a 64-tray job lands as four
16-tray blocks, each inside one rack).

For time, a collective runs at the pace of its slowest group, so a kind of
group is priced as crossing the network when any group of that kind does:
groups of one kind tile the ranks in aligned blocks of stride x size ranks,
and one crosses a domain boundary unless that block fits in a domain and
divides it (or the whole job fits in one domain). `count_crossings` counts
the groups and hops that cross, exactly, for reporting.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import BoolArray, Candidates, IntArray

__all__ = [
    "Crossings",
    "GroupPlacement",
    "Placement",
    "count_crossings",
    "job_domain_gpus",
    "place",
    "tp_pp_dp_order",
]


@functools.cache
def job_domain_gpus(num_gpus: int, gpus_per_node: int, nvlink_domain_gpus: int) -> int:
    """GPUs per NVLink-domain block of a job's ranks: where the domain boundaries fall for this job.

    A job that fits in one domain, or a profile whose domain is one node, keeps the domain. A larger job
    on a multi-node domain (GB200 NVL72) is allocated in segments of whole nodes, each inside one domain:
    Megatron-Bridge's Slurm executor (`scripts/performance/utils/executors.py`, NeMo 26.04) passes
    `--segment` = the job's node count up to 18 trays, else its largest divisor <= 18, so the ranks
    fill aligned blocks of segment x gpus_per_node. A job whose node count has no divisor above 1
    within a domain gets one-node segments: no NVLink between nodes is promised.
    """
    if num_gpus <= nvlink_domain_gpus or nvlink_domain_gpus == gpus_per_node or num_gpus % gpus_per_node:
        return nvlink_domain_gpus
    nodes, most = num_gpus // gpus_per_node, nvlink_domain_gpus // gpus_per_node
    return gpus_per_node * next(k for k in range(most, 0, -1) if nodes % k == 0)


def _job_domains(num_gpus: IntArray, gpus_per_node: int, nvlink_domain_gpus: int) -> IntArray:
    """`job_domain_gpus` per candidate (a request has a few distinct GPU counts: computed once each)."""
    sizes, index = np.unique(num_gpus, return_inverse=True)
    blocks = np.array([job_domain_gpus(int(n), gpus_per_node, nvlink_domain_gpus) for n in sizes], dtype=np.int64)
    return blocks[index.reshape(np.shape(num_gpus))]


def tp_pp_dp_order(
    pp: IntArray | int, tp: IntArray | int, cp: IntArray | int, ep: IntArray | int, etp: IntArray | int
) -> np.ndarray:
    """Whether Megatron-Core accepts the tp-cp-pp-dp rank order (`--use-tp-pp-dp-mapping`).

    `initialize_model_parallel` asserts, for an order that does not end in pp
    with pp > 1, that the expert data-parallel size, tp cp dp / (etp ep), equals
    the dense one, i.e. etp x ep == tp x cp (ep == cp when etp = tp); every model
    builds the expert grid, MoE or not.
    """
    experts = np.asarray(etp) * np.asarray(ep)
    return np.asarray((np.asarray(pp) == 1) | (experts == np.asarray(tp) * np.asarray(cp)))


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    """One kind of group: its size, members per NVLink domain, and whether any group crosses the network."""

    size: IntArray
    members_per_domain: IntArray
    crosses_network: BoolArray


@dataclass(frozen=True, slots=True)
class Placement:
    tp: GroupPlacement
    cp: GroupPlacement
    pp: GroupPlacement
    dp: GroupPlacement
    ep: GroupPlacement
    etp: GroupPlacement
    """The ranks one routed expert's weights are split over."""
    edp: GroupPlacement
    """The expert-data-parallel group: the ranks holding the same experts, which reduce their gradients."""
    num_gpus: IntArray

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> Placement:
        """The placement with `fn` applied to every per-candidate array (to select or repeat candidates)."""

        def group(g: GroupPlacement) -> GroupPlacement:
            return GroupPlacement(fn(g.size), fn(g.members_per_domain), fn(g.crosses_network))

        return Placement(
            tp=group(self.tp),
            cp=group(self.cp),
            pp=group(self.pp),
            dp=group(self.dp),
            ep=group(self.ep),
            etp=group(self.etp),
            edp=group(self.edp),
            num_gpus=fn(self.num_gpus),
        )


def _group(size: IntArray, stride: IntArray, num_gpus: IntArray, domain: IntArray) -> GroupPlacement:
    block = stride * size
    aligned = (block <= domain) & ((domain % block == 0) | (num_gpus <= domain))
    per_domain = np.where(stride < domain, np.maximum(domain // stride, 1), 1)
    return GroupPlacement(
        size=size,
        members_per_domain=np.where(aligned, size, np.minimum(per_domain, size)),
        crosses_network=(size > 1) & ~aligned,
    )


def place(c: Candidates, nvlink_domain_gpus: int, gpus_per_node: int) -> Placement:
    """Place every group of every candidate on the cluster (domains of `job_domain_gpus` ranks).

    The expert groups (module docstring): ep at stride etp; the expert-data-parallel ranks at stride
    etp x ep, or, in the tp-cp-pp-dp order with pp > 1 (where etp x ep = tp x cp), the dp group itself.
    """
    n = c.tp * c.cp * c.pp * c.dp
    d = _job_domains(n, gpus_per_node, nvlink_domain_gpus)
    one = np.ones_like(c.tp)
    pp_inside = tp_pp_dp_order(c.pp, c.tp, c.cp, c.ep, c.etp)
    pp_stride = np.where(pp_inside, c.tp * c.cp, c.tp * c.cp * c.dp)
    dp_stride = np.where(pp_inside, c.tp * c.cp * c.pp, c.tp * c.cp)
    experts = c.etp * c.ep
    edp_stride = np.where(pp_inside & (c.pp > 1), dp_stride, experts)
    return Placement(
        tp=_group(c.tp, one, n, d),
        cp=_group(c.cp, c.tp, n, d),
        pp=_group(c.pp, pp_stride, n, d),
        dp=_group(c.dp, dp_stride, n, d),
        ep=_group(c.ep, c.etp, n, d),
        etp=_group(c.etp, one, n, d),
        edp=_group(np.maximum(c.tp * c.cp * c.dp // experts, 1), edp_stride, n, d),
        num_gpus=n,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossings:
    """Groups (and pipeline hops) whose traffic leaves an NVLink domain, counted over the whole job."""

    tp_groups_over_network: int
    cp_groups_over_network: int
    ep_groups_over_network: int
    dp_groups_over_network: int
    dp_groups: int
    pp_hops_over_network: int
    pp_hops: int


@functools.lru_cache(maxsize=4096)
def count_crossings(
    tp: int, cp: int, pp: int, dp: int, ep: int, etp: int, nvlink_domain_gpus: int, gpus_per_node: int
) -> Crossings:
    """Exact counts for one layout, from every rank's domain (`job_domain_gpus`). A pipeline is one
    (dp, cp, tp) chain of pp ranks; an expert-parallel group ep ranks at stride etp of a stage's tp x cp x dp
    ranks in rank order (module docstring).

    Linear in the GPU count, so results are memoised: the plans of one request share a few shapes.
    """
    n = tp * cp * pp * dp
    ranks = np.arange(n) // job_domain_gpus(n, gpus_per_node, nvlink_domain_gpus)
    pp_inside = bool(tp_pp_dp_order(pp, tp, cp, ep, etp))
    if pp_inside:
        domain = ranks.reshape(dp, pp, cp, tp)
    else:
        domain = ranks.reshape(pp, dp, cp, tp).transpose(1, 0, 2, 3)

    def spanning(groups: np.ndarray) -> int:
        # Along each group axis the ranks increase, so its domains do too: the group spans a
        # boundary when its first and last domains differ (no min/max over a short axis).
        return int(np.count_nonzero(groups[..., 0] != groups[..., -1]))

    split = ep > 1 and (tp * cp * dp) % (etp * ep) == 0
    if split and pp_inside and pp > 1:  # etp x ep = tp x cp: one expert grid per (dp, pp) block of tp x cp ranks
        stage = domain.reshape(dp, pp, ep, etp).transpose(0, 1, 3, 2)
    elif split:  # a stage's tp x cp x dp ranks in rank order (dp outer), cut into (expert dp, ep, etp)
        stage = domain.transpose(1, 0, 2, 3).reshape(pp, (tp * cp * dp) // (etp * ep), ep, etp).transpose(0, 1, 3, 2)
    return Crossings(
        tp_groups_over_network=spanning(domain),
        cp_groups_over_network=spanning(domain.transpose(0, 1, 3, 2)),
        ep_groups_over_network=spanning(stage) if split else 0,
        dp_groups_over_network=spanning(domain.transpose(1, 2, 3, 0)),
        dp_groups=tp * cp * pp,
        pp_hops_over_network=int(np.sum(domain[:, 1:] != domain[:, :-1])),
        pp_hops=(pp - 1) * dp * cp * tp,
    )
