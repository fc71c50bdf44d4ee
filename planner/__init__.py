"""Parallel-layout planner for transformer training.

Glossary (used everywhere, JSON keys included):
    tp, pp, dp, cp, ep  degrees of tensor, pipeline, data, context and expert parallelism
    vp                  model chunks per pipeline rank (interleaving); 1 = none
    world_size          tp * pp * dp * cp, the GPUs one layout uses
    micro_batch_size    sequences per micro-batch (b in Narayanan et al. 2021)
    num_microbatches    micro-batches per pipeline per step (m)
    global_batch_size   sequences per optimizer step (B)
    recompute           none | selective | full activation recomputation
    zero_stage          0 none, 1 optimizer states, 2 + gradients, 3 + weights sharded over dp x cp

Entry points: `plan` (ranked layouts), `estimate` (one layout), and the specs
they take. Units are SI internally, named in every field (`_s`, `_gib`, ...).
"""

from planner.errors import (
    InfeasibleError,
    InvalidSpecError,
    PlannerError,
    SolverTimeoutError,
    UnknownHardwareError,
    UnknownPresetError,
)
from planner.estimate import Estimate, estimate, estimate_many
from planner.layout import Layout
from planner.presets import Preset, get_preset, load_presets
from planner.profiles import ClusterSpec, HardwareProfile, load_profiles
from planner.search.plan import Plan, PlanResult, plan
from planner.search.rank import Objective
from planner.specs import MLASpec, ModelSpec, MoESpec, Precision, Recompute, RuntimeFeatures, TrainingSpec
from planner.validate import Violation, layout_violations

__all__ = [
    "ClusterSpec",
    "Estimate",
    "HardwareProfile",
    "InfeasibleError",
    "InvalidSpecError",
    "Layout",
    "MLASpec",
    "ModelSpec",
    "MoESpec",
    "Objective",
    "Plan",
    "PlanResult",
    "PlannerError",
    "Precision",
    "Preset",
    "Recompute",
    "RuntimeFeatures",
    "SolverTimeoutError",
    "TrainingSpec",
    "UnknownHardwareError",
    "UnknownPresetError",
    "Violation",
    "estimate",
    "estimate_many",
    "get_preset",
    "layout_violations",
    "load_presets",
    "load_profiles",
    "plan",
]
