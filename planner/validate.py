"""A layout's rule violations, each named, each message showing the arithmetic (rules from `planner.rules`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.layout import Layout, by_training
from planner.rules import CORE, POSITIVE_SIZES, SIZE_AXES, Job, RuleSet, layout_columns
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["Violation", "layout_violations", "layouts_violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str


def layout_violations(
    layout: Layout, model: ModelSpec, training: TrainingSpec, num_gpus: int, rules: RuleSet = CORE
) -> list[Violation]:
    """Every rule of `rules` the layout breaks (memory excluded: that needs the cost model).

    A size below 1 is reported alone: the other rules divide by the sizes.
    """
    return layouts_violations([layout], model, training, num_gpus, rules)[0]


def layouts_violations(
    layouts: Sequence[Layout], model: ModelSpec, training: TrainingSpec, num_gpus: int, rules: RuleSet = CORE
) -> list[list[Violation]]:
    """`layout_violations` of each layout: every rule tested once over all of them (once per training they run,
    `planner.layout.by_training`), explained where broken."""

    def each(run: TrainingSpec, group: list[Layout]) -> list[list[Violation]]:
        own = group[0].recompute_modules is not None  # the group names its own set: say so in messages
        job = Job(model, run, num_gpus, "layout.recompute_modules") if own else Job(model, run, num_gpus)
        return _same_job_violations(group, job, rules)

    return by_training(training, layouts, each)


def _same_job_violations(layouts: Sequence[Layout], job: Job, rules: RuleSet) -> list[list[Violation]]:
    out: list[list[Violation]] = [[] for _ in layouts]
    checked = []
    for i, layout in enumerate(layouts):
        if any(getattr(layout, axis) < 1 for axis in SIZE_AXES):
            out[i] = [Violation(POSITIVE_SIZES.name, m) for m in POSITIVE_SIZES.explain(layout, job)]
        else:
            checked.append(i)
    if not checked:
        return out
    columns = layout_columns([layouts[i] for i in checked])
    for rule in rules.rules:
        broken = np.broadcast_to(rule.broken(columns, job), (len(checked),))
        reads_the_split = rule.reads_the_split
        for j, i in enumerate(checked):
            if broken[j] or (reads_the_split and layouts[i].layers_per_stage is not None):
                out[i] += [Violation(rule.name, m) for m in rule.explain(layouts[i], job)]
    return out
