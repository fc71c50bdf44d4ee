"""Predicted against published nccl-tests bus bandwidth, one collective per row: part of `planner validate`.

The rows are `nccl_tests_bus_bandwidth` in `planner/data/published_runs.json`,
each with its source. Bus bandwidth is nccl-tests' figure (`doc/PERFORMANCE.md`):
algbw = size / time, times 2(n-1)/n for all-reduce and (n-1)/n for all-gather
and reduce-scatter, so that it reads as the per-link rate of a ring. The
prediction times the same message with the cost model's collectives (`comm.all_reduce_s`,
the faster of ring and NVLS where the profile has NVLink SHARP, and the ring `comm.all_gather_s`)
and converts it the same way. A row measured with `NCCL_ALGO=RING` (`algorithm: ring`) is predicted
on the profile without NVLS.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from planner.calibration.published import DATA_FILE
from planner.costmodel.comm import all_gather_s, all_reduce_s
from planner.costmodel.topology import GroupPlacement
from planner.profiles import HardwareProfile, NetworkSection
from planner.specs import Precision
from planner.units import GB

__all__ = ["BusBandwidthRow", "bus_bandwidth_rows", "predicted_bus_bytes_per_s"]

_STEPS_PER_RANK = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}
"""Ring steps per rank, in units of n - 1: also the busbw factor's numerator (2(n-1)/n or (n-1)/n)."""


@dataclass(frozen=True, slots=True)
class BusBandwidthRow:
    id: str
    profile: str
    collective: str
    ranks: int
    nodes: int
    published_gb_per_s: float
    predicted_gb_per_s: float
    one_nic_gb_per_s: float
    """The prediction with `ring_rails` off: every ring at one GPU's NIC share."""
    error: float
    """predicted / published - 1."""
    source: str


@cache
def _rows() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(DATA_FILE.read_text())["nccl_tests_bus_bandwidth"])


def predicted_bus_bytes_per_s(
    profile: HardwareProfile, collective: str, nodes: int, gpus_per_node: int, nbytes: float, *, rails: bool = True
) -> float:
    """nccl-tests bus bandwidth the ring model predicts for one collective over `nodes` x `gpus_per_node` ranks.

    The group fills whole NVLink domains of the profile (or part of one when it is smaller).
    """
    hw = profile.hardware(Precision.BF16)
    n = nodes * gpus_per_node
    crosses = n > hw.nvlink_domain_gpus
    group = GroupPlacement(
        size=np.array([n]),
        members_per_domain=np.array([hw.nvlink_domain_gpus if crosses else n]),
        crosses_network=np.array([crosses]),
    )
    steps = _STEPS_PER_RANK[collective]
    ring = all_reduce_s if steps == 2 else all_gather_s
    seconds = float(ring(np.array([nbytes]), group, hw, rails=rails)[0])
    return steps * (n - 1) / n * nbytes / seconds


def _profile(row: dict[str, Any], profiles: Mapping[str, HardwareProfile]) -> HardwareProfile:
    profile = profiles[row["profile"]]
    override = row.get("network_override")
    if override is not None:
        profile = profile.model_copy(update={"network": NetworkSection(**override)})
    if row.get("algorithm") == "ring":
        profile = profile.model_copy(update={"node": profile.node.model_copy(update={"nvls_efficiency": None})})
    return profile


def bus_bandwidth_rows(profiles: Mapping[str, HardwareProfile]) -> list[BusBandwidthRow]:
    """Every published bus-bandwidth row against the ring model (and against one NIC share per ring)."""
    out = []
    for row in _rows():
        profile = _profile(row, profiles)
        args = (profile, row["collective"], row["nodes"], row["gpus_per_node"], row["message_bytes"])
        predicted = predicted_bus_bytes_per_s(*args) / GB
        out.append(
            BusBandwidthRow(
                id=row["id"],
                profile=row["profile"] + (" (NICs overridden)" if row.get("network_override") else ""),
                collective=row["collective"],
                ranks=row["nodes"] * row["gpus_per_node"],
                nodes=row["nodes"],
                published_gb_per_s=row["bus_gb_per_s"],
                predicted_gb_per_s=predicted,
                one_nic_gb_per_s=predicted_bus_bytes_per_s(*args, rails=False) / GB,
                error=predicted / row["bus_gb_per_s"] - 1,
                source=row["source"],
            )
        )
    return out
