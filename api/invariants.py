"""What every successful answer of the service satisfies, read from its JSON body (soak bench and HTTP tests).

Each function returns the broken invariants as messages (empty when all hold), so that a bench can count
them and a test can assert there are none.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["estimate_invariants", "plan_invariants"]


def _layout_gpus(layout: dict[str, Any]) -> int:
    return int(layout["tp"] * layout["pp"] * layout["dp"] * layout["cp"])


def _estimate_broken(where: str, e: dict[str, Any]) -> list[str]:
    broken = []
    if not (math.isfinite(e["step_time_s"]) and e["step_time_s"] > 0):
        broken.append(f"{where}: step_time_s {e['step_time_s']} is not a positive number")
    if not 0 < e["mfu"] <= 1:
        broken.append(f"{where}: mfu {e['mfu']} outside (0, 1]")
    return broken


def plan_invariants(body: dict[str, Any], num_gpus: int, objective: str = "step_time") -> list[str]:
    """Plans: each layout multiplies to its GPU count, at most the cluster's (idle GPUs: `idle_gpus`),
    fits memory, ranks run 1, 2, ...; equivalent plans (within `equivalent_within` of the fastest) lead, and
    the others' step times do not decrease along the ranks (for step_time)."""
    broken = []
    plans = body["plans"]
    for i, p in enumerate(plans):
        lay, mem, where = p["layout"], p["estimate"]["memory"], f"plans[{i}]"
        gpus = _layout_gpus(lay)
        if gpus != p["num_gpus"] or gpus > num_gpus:  # fewer: gpu_efficiency, or a whole-cluster count below
            broken.append(f"{where}: tp*pp*dp*cp = {gpus}, num_gpus {p['num_gpus']}, cluster {num_gpus}")
        if mem["peak_gib"] > mem["usable_gib"]:
            broken.append(f"{where}: peak {mem['peak_gib']} GiB > usable {mem['usable_gib']} GiB")
        if p["rank"] != i + 1:
            broken.append(f"{where}: rank {p['rank']}")
        broken += _estimate_broken(where, p["estimate"])
    times = [p["estimate"]["step_time_s"] for p in plans]
    tied = [bool(p["equivalent"]) for p in plans]
    if tied != sorted(tied, reverse=True):
        broken.append(f"equivalent plans do not lead: {tied}")
    rest = [t for t, e in zip(times, tied, strict=True) if not e]
    if objective == "step_time" and rest != sorted(rest):
        broken.append(f"step times of the plans after the equivalent ones out of rank order: {rest}")
    if objective == "step_time" and times:
        bound = min(times) * (1 + body["equivalent_within"])
        broken += [
            f"plans[{i}] marked equivalent at {t} s > {bound} s" for i, t in enumerate(times) if tied[i] and t > bound
        ]
    return broken


def _same(key: str, asked: Any, answered: Any) -> bool:
    """Whether the answered layout field is the one asked: a module list in any order; an unset one the resolved
    default (`layout.recompute_modules`)."""
    if key == "recompute_modules":
        return asked is None or sorted(asked) == sorted(answered or [])
    return bool(asked == answered)


def estimate_invariants(body: dict[str, Any], layout: dict[str, Any]) -> list[str]:
    """An estimate: the layout it answers is the one asked, fits means no violation, and a fit is in memory."""
    answered = body["layout"]
    broken = [
        f"layout.{k}: asked {v}, answered {answered[k]}" for k, v in layout.items() if not _same(k, v, answered[k])
    ]
    if body["fits"] != (not body["violations"]):
        broken.append(f"fits {body['fits']} with {len(body['violations'])} violations")
    mem = body["estimate"]["memory"]
    if body["fits"] and mem["peak_gib"] > mem["capacity_gib"]:
        broken.append(f"fits, yet peak {mem['peak_gib']} GiB > capacity {mem['capacity_gib']} GiB")
    return broken + _estimate_broken("estimate", body["estimate"])
