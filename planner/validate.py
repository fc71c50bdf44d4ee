"""A layout's rule violations, each named, each message showing the arithmetic (rules from `planner.rules`)."""

from __future__ import annotations

from dataclasses import dataclass

from planner.layout import Layout
from planner.rules import CORE, POSITIVE_SIZES, SIZE_AXES, Job, Rule, RuleSet
from planner.specs import ModelSpec, TrainingSpec

__all__ = ["RULES", "Violation", "layout_violations"]


@dataclass(frozen=True, slots=True)
class Violation:
    rule: str
    message: str


RULES: dict[str, Rule] = {rule.name: rule for rule in CORE.rules}
"""The core rules by name, in report order."""


def layout_violations(
    layout: Layout, model: ModelSpec, train: TrainingSpec, num_gpus: int, rules: RuleSet = CORE
) -> list[Violation]:
    """Every rule of `rules` the layout breaks (memory excluded: that needs the cost model).

    A size below 1 is reported alone: the other rules divide by the sizes.
    """
    job = Job(model, train, num_gpus)
    if any(getattr(layout, axis) < 1 for axis in SIZE_AXES):
        return [Violation(POSITIVE_SIZES.name, m) for m in POSITIVE_SIZES.explain(layout, job)]
    return [Violation(rule.name, message) for rule in rules.rules for message in rule.explain(layout, job)]
