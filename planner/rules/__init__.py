"""The layout rules, each defined once: `core` (the planner's default) and per-framework rule sets.

`rule.py` says what a rule is (named clauses: a vectorised test and a message),
`core.py` holds the ten core rules, `frameworks.py` the framework rules and the
rule sets. The space, `validate`, the stage checker, the timeline, the baseline
and the launch modules all evaluate these; none restates the arithmetic.
"""

from __future__ import annotations

from planner.rules.core import (
    ACTIVATION_OFFLOAD,
    BATCH_DIVISIBLE,
    CONTEXT_SPLIT,
    CORE_RULES,
    EXPERT_SPLIT,
    INTERLEAVE_MICROBATCHES,
    MOE_A2A_OVERLAP,
    POSITIVE_SIZES,
    RECOMPUTE_BLOCK,
    SEQUENCE_PARALLEL_NEEDS_TP,
    SIZE_AXES,
    STAGE_SPLIT,
    TENSOR_SPLIT,
    WORLD_SIZE,
    interleave_breaks,
    interleave_problem,
)
from planner.rules.frameworks import (
    CORE,
    FRAMEWORK_RULES,
    RULE_SETS,
    VERSIONS,
    Framework,
    RuleSet,
    default_version,
    rule_set,
    version_description,
)
from planner.rules.rule import (
    EMBEDDING_IN_SPLIT,
    LAYOUT_AXES,
    LOSS_IN_SPLIT,
    Clause,
    Columns,
    Job,
    Rule,
    StageClause,
    layout_columns,
)

__all__ = [
    "ACTIVATION_OFFLOAD",
    "RECOMPUTE_BLOCK",
    "BATCH_DIVISIBLE",
    "CONTEXT_SPLIT",
    "CORE",
    "CORE_RULES",
    "EMBEDDING_IN_SPLIT",
    "EXPERT_SPLIT",
    "FRAMEWORK_RULES",
    "Framework",
    "INTERLEAVE_MICROBATCHES",
    "MOE_A2A_OVERLAP",
    "LAYOUT_AXES",
    "LOSS_IN_SPLIT",
    "POSITIVE_SIZES",
    "RULE_SETS",
    "SEQUENCE_PARALLEL_NEEDS_TP",
    "SIZE_AXES",
    "STAGE_SPLIT",
    "TENSOR_SPLIT",
    "VERSIONS",
    "WORLD_SIZE",
    "Clause",
    "Columns",
    "Job",
    "Rule",
    "RuleSet",
    "StageClause",
    "default_version",
    "interleave_breaks",
    "interleave_problem",
    "layout_columns",
    "rule_set",
    "version_description",
]
