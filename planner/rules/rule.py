"""What a layout rule is: named clauses, each a vectorised test over candidate columns and a message.

A rule reads some layout axes (its `axes`) and the job's shape (model, training,
GPU count). Each clause says where it is broken, over numpy integer columns that
broadcast against each other (one layout is a batch of one), and explains a
broken single layout with the arithmetic written out. Stage-list clauses check
an explicit layers-per-stage split, which has no column form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from planner.costmodel.candidates import RECOMPUTE_CODE, BoolArray, IntArray
from planner.layout import Layout
from planner.specs import ModelSpec, TrainingSpec

__all__ = [
    "EMBEDDING_IN_SPLIT",
    "LAYOUT_AXES",
    "LOSS_IN_SPLIT",
    "Clause",
    "Columns",
    "Job",
    "Rule",
    "SplitClause",
    "StageClause",
    "every_layout",
    "layout_columns",
]

EMBEDDING_IN_SPLIT = "account_for_embedding_in_pipeline_split"
LOSS_IN_SPLIT = "account_for_loss_in_pipeline_split"
LAYOUT_AXES = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vp",
    "micro_batch_size",
    "recompute",
    "sequence_parallel",
    "zero_stage",
    EMBEDDING_IN_SPLIT,
    LOSS_IN_SPLIT,
)
"""The axes a rule may read; `recompute` is its code column (`candidates.RECOMPUTE_CODE`), `sequence_parallel`
and the two pipeline-split flags are 0/1 columns."""

Columns = Mapping[str, IntArray]
"""Axis name -> integer column; columns broadcast against each other."""


def every_layout(c: Columns, axis: str, broken: bool) -> BoolArray:
    """`broken` for every layout of the columns, read through the rule's `axis`: a clause on the job alone (the
    model or the training), which no layout changes."""
    out: BoolArray = np.full(np.shape(c[axis]), broken, dtype=np.bool_)
    return out


@dataclass(frozen=True, slots=True)
class Job:
    """What a rule reads besides the layout."""

    model: ModelSpec
    training: TrainingSpec
    num_gpus: int
    modules_field: str = "training.runtime.recompute_modules"
    """Where the request named the selective-recompute module set the rules read (`training.runtime`'s, or the
    layout's own, `layout.recompute_modules`): what their messages call it."""


@dataclass(frozen=True, slots=True)
class Clause:
    """One condition of a rule: `broken` is True where it fails; `message` explains one failing layout.

    `default_split_only`: the clause holds for Megatron's default (even) stage split and is
    replaced by the stage-list clauses when a layout names its layers per stage.
    """

    broken: Callable[[Columns, Job], BoolArray]
    message: Callable[[Layout, Job], str]
    default_split_only: bool = False


@dataclass(frozen=True, slots=True)
class StageClause:
    """One condition on an explicit layers-per-stage list.

    (stages, num_layers, pp, vp, in_split) -> broken, message; `in_split` is (embedding, loss), each 1
    where that layer counts in the pipeline split (the layout's two account_for_* flags).
    """

    broken: Callable[[Sequence[int], int, int, int, tuple[int, int]], bool]
    message: Callable[[Sequence[int], int, int, int, tuple[int, int]], str]


@dataclass(frozen=True, slots=True)
class SplitClause:
    """One condition on an explicit layers-per-stage list that also reads the job (a model whose layers differ in
    kind: a hybrid pattern's split is the framework's, not the transformer stage split's).

    (stages, job) -> broken, message. Like a stage clause it replaces the rule's default-split clauses when a
    layout names its layers per stage.
    """

    broken: Callable[[Sequence[int], Job], bool]
    message: Callable[[Sequence[int], Job], str]


@dataclass(frozen=True, slots=True)
class Rule:
    """A named layout rule, defined once: the axes it reads, its clauses, and where it comes from."""

    name: str
    axes: tuple[str, ...]
    clauses: tuple[Clause, ...]
    source: str
    stage_clauses: tuple[StageClause, ...] = ()
    split_clauses: tuple[SplitClause, ...] = ()

    @property
    def reads_the_split(self) -> bool:
        """Whether an explicit layers-per-stage list changes what this rule says about a layout."""
        explicit = bool(self.stage_clauses) or bool(self.split_clauses)
        return explicit or any(clause.default_split_only for clause in self.clauses)

    def broken(self, columns: Columns, job: Job) -> BoolArray:
        """Where any clause fails, over broadcast columns (the default stage split)."""
        out: BoolArray = np.asarray(self.clauses[0].broken(columns, job), dtype=np.bool_)
        for clause in self.clauses[1:]:
            out = out | clause.broken(columns, job)
        return out

    def ok(self, columns: Columns, job: Job) -> BoolArray:
        """Where every clause holds, over broadcast columns (the default stage split)."""
        ok: BoolArray = ~self.broken(columns, job)
        return ok

    def holds(self, layout: Layout, job: Job) -> bool:
        """Whether one layout passes every clause (its stage list included, if it names one)."""
        return not self.explain(layout, job)

    def explain(self, layout: Layout, job: Job) -> list[str]:
        """The message of every clause the layout breaks, in clause order."""
        columns = layout_columns([layout])
        explicit = layout.layers_per_stage is not None
        messages = [
            clause.message(layout, job)
            for clause in self.clauses
            if not (explicit and clause.default_split_only) and bool(clause.broken(columns, job).any())
        ]
        if layout.layers_per_stage is not None:
            in_split = (
                int(layout.account_for_embedding_in_pipeline_split),
                int(layout.account_for_loss_in_pipeline_split),
            )
            messages += self.stage_problems(
                layout.layers_per_stage, job.model.num_layers, layout.pp, layout.vp, in_split
            )
            stages = layout.layers_per_stage
            messages += [clause.message(stages, job) for clause in self.split_clauses if clause.broken(stages, job)]
        return messages

    def stage_problems(
        self, stages: Sequence[int], num_layers: int, pp: int, vp: int, in_split: tuple[int, int] = (0, 0)
    ) -> list[str]:
        """The message of every stage-list clause an explicit split breaks."""
        args = (stages, num_layers, pp, vp, in_split)
        return [clause.message(*args) for clause in self.stage_clauses if clause.broken(*args)]


def layout_columns(layouts: Sequence[Layout]) -> dict[str, IntArray]:
    """Layouts as rule columns, one entry per layout (a single layout is a batch of one)."""
    return {axis: np.asarray([_code(x, axis) for x in layouts], dtype=np.int64) for axis in LAYOUT_AXES}


def _code(layout: Layout, axis: str) -> int:
    """One layout's value on a rule axis: the integer, the flag as 0/1, the recompute mode as its code."""
    return RECOMPUTE_CODE[layout.recompute] if axis == "recompute" else int(getattr(layout, axis))
