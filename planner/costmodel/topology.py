"""Where each parallel group's ranks land: inside one NVLink domain or across the network.

Ranks are numbered with tp innermost, then cp, then pp, then dp (Megatron-LM's
rank order with `--use-tp-pp-dp-mapping`); the expert-parallel group strides
from the same stage's cp ranks first, then its dp ranks. A group of `size` ranks at
`stride` keeps `members_per_domain` of them in one NVLink domain; it crosses
the network when that is fewer than its size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import Candidates, IntArray
from planner.profiles import Hardware

__all__ = ["GroupPlacement", "Placement", "place"]


@dataclass(frozen=True, slots=True)
class GroupPlacement:
    """One kind of group: its size, members per NVLink domain, and whether it crosses the network."""

    size: IntArray
    members_per_domain: IntArray

    @property
    def crosses_network(self) -> np.ndarray:
        return self.members_per_domain < self.size


@dataclass(frozen=True, slots=True)
class Placement:
    tp: GroupPlacement
    cp: GroupPlacement
    pp: GroupPlacement
    dp: GroupPlacement
    ep: GroupPlacement
    pp_hops_over_network: IntArray
    """Stage-to-stage hops of one pipeline that leave the NVLink domain (of pp - 1)."""
    num_gpus: IntArray


def _group(size: IntArray, stride: IntArray, domain: int) -> GroupPlacement:
    per_domain = np.where(stride < domain, np.maximum(domain // stride, 1), 1)
    return GroupPlacement(size=size, members_per_domain=np.minimum(per_domain, size))


def _expert_group(c: Candidates, domain: int) -> GroupPlacement:
    """EP ranks: up to cp of them at stride tp, the rest from dp at stride tp*cp*pp."""
    from_cp = np.minimum(c.ep, c.cp)
    from_dp = np.maximum(c.ep // from_cp, 1)
    cp_part = _group(from_cp, c.tp, domain)
    dp_part = _group(from_dp, c.tp * c.cp * c.pp, domain)
    per_domain = cp_part.members_per_domain * np.where(from_cp < c.cp, 1, dp_part.members_per_domain)
    return GroupPlacement(size=c.ep, members_per_domain=np.minimum(per_domain, c.ep))


def place(c: Candidates, hw: Hardware) -> Placement:
    """Place every group of every candidate on the cluster."""
    domain = hw.nvlink_domain_gpus
    one = np.ones_like(c.tp)
    pp_group = _group(c.pp, c.tp * c.cp, domain)
    domains_spanned = -(-c.pp // pp_group.members_per_domain)
    return Placement(
        tp=_group(c.tp, one, domain),
        cp=_group(c.cp, c.tp, domain),
        pp=pp_group,
        dp=_group(c.dp, c.tp * c.cp * c.pp, domain),
        ep=_expert_group(c, domain),
        pp_hops_over_network=domains_spanned - 1,
        num_gpus=c.tp * c.cp * c.pp * c.dp,
    )
