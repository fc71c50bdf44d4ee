"""Where the rule of thumb loses: the baseline against the best plan, and published layouts against the planner.

Used by `planner compare` to print the README's tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from planner.calibration.published import PublishedRun, published_runs
from planner.constraints.space import build_space
from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, HardwareProfile
from planner.search.plan import plan
from planner.specs import TrainingSpec

__all__ = ["HeuristicRow", "PublishedRow", "heuristic_rows", "published_rows", "MODERN_CASES"]

MODERN_CASES: tuple[tuple[str, str, int, int], ...] = (
    ("gpt3-175b", "dgx-a100-80gb", 1024, 1536),
    ("llama3-8b", "dgx-h100", 64, 512),
    ("llama3-70b", "dgx-h100", 1024, 1024),
    ("llama3-405b", "dgx-h100", 16384, 2048),
    ("mixtral-8x7b", "dgx-h100", 256, 512),
    ("nemotron4-340b", "dgx-h100", 6144, 2304),
    ("llama3-70b", "gb200-nvl72", 576, 1152),
    ("deepseek-v3", "dgx-h100", 2048, 4096),
)
"""(preset, profile, GPUs, global batch): modern models on the kind of cluster they were trained on."""

PAPER_SPACE = {"recompute": ["full"], "sequence_parallel": [False], "zero_stage": [0], "cp": [1], "ep": [1]}
"""Narayanan 2021's own space: full recompute, no sequence parallelism, no optimizer sharding."""


@dataclass(frozen=True, slots=True)
class HeuristicRow:
    """One case: the best plan against the rule of thumb on today's runtime (`modern_*`, the headline)
    and as the paper ran it in 2021 (`baseline*`, `speedup`)."""

    case: str
    baseline: Layout | None
    baseline_step_s: float | None
    best: Layout
    best_step_s: float
    speedup: float | None
    modern: Layout | None
    modern_step_s: float | None
    modern_speedup: float | None


@dataclass(frozen=True, slots=True)
class PublishedRow:
    run_id: str
    published: Layout
    published_step_s: float
    in_space: bool
    fits: bool
    paper_space_best: Layout
    paper_space_step_s: float
    modern_best: Layout
    modern_step_s: float


def heuristic_rows(
    profiles: dict[str, HardwareProfile], cases: Sequence[tuple[str, str, int, int]] = MODERN_CASES
) -> list[HeuristicRow]:
    """Best plan vs the rule of thumb (today's runtime and the paper's) for each (preset, profile, GPUs, batch)."""
    rows = []
    for preset, profile, gpus, batch in cases:
        model = get_preset(preset).model
        result = plan(
            model, ClusterSpec(profile=profiles[profile], num_gpus=gpus), TrainingSpec(global_batch_size=batch)
        )
        best = result.plans[0]
        base, modern = result.baseline.plan, result.modern_baseline.plan
        rows.append(
            HeuristicRow(
                case=f"{preset} on {gpus} x {profile}, B={batch}",
                baseline=base.layout if base else None,
                baseline_step_s=base.estimate.step_time_s if base else None,
                best=best.layout,
                best_step_s=best.estimate.step_time_s,
                speedup=result.baseline.speedup_of_best,
                modern=modern.layout if modern else None,
                modern_step_s=modern.estimate.step_time_s if modern else None,
                modern_speedup=result.modern_baseline.speedup_of_best,
            )
        )
    return rows


def _in_space(run: PublishedRun) -> bool:
    x = run.layout
    allowed = {"tp": [x.tp], "pp": [x.pp], "cp": [x.cp], "vp": [x.vp], "micro_batch_size": [x.micro_batch_size]}
    space = build_space(run.model, run.training, run.num_gpus, allowed).candidates
    return len(space) > 0


def published_rows(profile: HardwareProfile) -> list[PublishedRow]:
    """Each Table 1 run: its layout as published, the best in the paper's space, the best in the full space."""
    rows = []
    for run in published_runs():
        if run.group != "Narayanan2021_Table1":
            continue
        cluster = ClusterSpec(profile=profile, num_gpus=run.num_gpus)
        published = estimate(run.model, cluster, run.training, run.layout)
        paper = plan(run.model, cluster, run.training, PAPER_SPACE, top_k=1).plans[0]
        modern = plan(run.model, cluster, run.training, None, top_k=1).plans[0]
        rows.append(
            PublishedRow(
                run_id=run.id,
                published=run.layout,
                published_step_s=published.step_time_s,
                in_space=_in_space(run),
                fits=published.fits,
                paper_space_best=paper.layout,
                paper_space_step_s=paper.estimate.step_time_s,
                modern_best=modern.layout,
                modern_step_s=modern.estimate.step_time_s,
            )
        )
    return rows
