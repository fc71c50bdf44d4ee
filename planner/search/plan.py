"""`plan(...)`: every legal layout evaluated, the best ranked, stage splits refined, the baseline attached."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.constraints.check import partition_problems, slowest_stage_s
from planner.constraints.costs import StageCosts, stage_costs_many
from planner.constraints.partition import PartitionProblem, SplitWork, solve_partitions
from planner.constraints.space import Allowed, Space, build_space, divisors, respace
from planner.costmodel.memory import usable_hardware
from planner.costmodel.recompute import default_is_idle, own_selective_modules, searched_module_sets
from planner.estimate import Estimate, estimate_many
from planner.layout import Layout, with_modules
from planner.profiles import ClusterSpec, Hardware
from planner.rules import CORE, RuleSet
from planner.search.baseline import MODERN, PAPER, Recipe, baseline_candidates
from planner.search.budget import CANDIDATES, MAX_EVALUATED, WorkBudget
from planner.search.constraints import parse_constraints
from planner.search.diagnose import Diagnosis, diagnose, too_slow
from planner.search.evaluate import Evaluated, concatenate, evaluate
from planner.search.rank import Objective, rank
from planner.specs import ModelSpec, Recompute, RecomputeModule, TrainingSpec

__all__ = [
    "EQUIVALENT_WITHIN",
    "Baseline",
    "Plan",
    "PlanResult",
    "SearchStats",
    "factors_well",
    "gpu_counts",
    "idle_reason",
    "plan",
]


EQUIVALENT_WITHIN = 0.03
"""Relative objective gap under which a plan is as good as the fastest: the model's stated uncertainty.
`planner validate`: Narayanan 2021 Table 2 (PTD-P), rows not used by the fit, is predicted with a mean
absolute step-time error of 3.0% (README "Accuracy"); a smaller predicted gap is not a real ranking."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    rank: int
    layout: Layout
    num_gpus: int
    estimate: Estimate
    equivalent: bool = False
    """Within `EQUIVALENT_WITHIN` of the fastest plan's objective: ranked among those by `simplicity`."""


def simplicity(layout: Layout) -> tuple[int, ...]:
    """Order among equivalent plans, simplest first: fewer parallel dimensions (tp, pp, cp, ep above 1),
    then smaller tp, smaller pp, no interleaving (vp), less recomputation (none, selective, full; under selective
    the request's own module set, then fewer named modules), lower ZeRO stage, no context/expert parallelism,
    experts split as tp (etp = tp), no sequence parallelism, smaller micro-batch."""
    recompute = {Recompute.NONE: 0, Recompute.SELECTIVE: 1, Recompute.FULL: 2}[layout.recompute]
    dims = sum(1 for d in (layout.tp, layout.pp, layout.cp, layout.ep) if d > 1)
    return (
        dims,
        layout.tp,
        layout.pp,
        layout.vp,
        recompute,
        len(layout.recompute_modules or ()),
        layout.zero_stage,
        layout.cp,
        layout.ep,
        int(layout.etp != layout.tp),
        int(layout.sequence_parallel),
        layout.micro_batch_size,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    rule: str
    plan: Plan | None
    speedup_of_best: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchStats:
    candidates: int
    evaluated: int
    feasible: int
    elapsed_ms: float
    complete: bool
    """False when a work limit cut the search short (`truncated_by` says which); the same everywhere."""
    truncated_by: list[str]
    """The work limits that cut the answer short, in the order hit (`planner.search.budget`); empty when complete."""
    rejected: dict[str, int]
    framework: str
    """The rule set every layout passed (`planner.rules`)."""
    framework_version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanResult:
    plans: list[Plan]
    baseline: Baseline
    """The paper's 2021 recipe (`planner.search.baseline.PAPER`)."""
    modern_baseline: Baseline
    """The same rule of thumb on today's runtime (`planner.search.baseline.MODERN`)."""
    search: SearchStats
    diagnosis: Diagnosis | None
    idle_gpus: int = 0
    """GPUs of the request the best plan leaves unused (`gpu_counts`): a badly factoring count, or gpu_efficiency."""
    idle_reason: str | None = None
    """Why they are idle, in words; None when the best plan uses every GPU (or there is no plan)."""


MIN_LAYERS_PER_STAGE = 2
"""Layers a pipeline stage should hold at least when the stages split the layers evenly."""

MIN_LAYERS_PER_UNEVEN_STAGE = 4
"""Layers per stage (on average) when pp does not divide the layers: one stage then holds at most one
layer more than the average, at most 25% above it."""

EXTRA_GPU_COUNTS = 3
"""Whole-node GPU counts below a badly factoring request that the step-time search also tries."""

MAX_NODES_SCANNED = 4096
"""How far below a badly factoring request (in whole nodes) the extra counts are looked for."""


def _sane_pp(pp: int, num_layers: int) -> bool:
    return pp == 1 or (
        pp * MIN_LAYERS_PER_STAGE <= num_layers
        and (num_layers % pp == 0 or pp * MIN_LAYERS_PER_UNEVEN_STAGE <= num_layers)
    )


def factors_well(n: int, gpus_per_node: int, num_layers: int, global_batch: int) -> bool:
    """Whether `n` GPUs split as tp x pp x dp with tp | gpus per node, dp | global batch and a sane pp.

    The stated rule behind whole-cluster search, from Narayanan et al. 2021 Sec. 3.3 (takeaways #1-#2:
    tensor parallelism up to the server size, pipeline parallelism only as much as the model needs,
    data parallelism for the rest, each replica an equal share of the batch). A sane pp divides the
    layers with at least `MIN_LAYERS_PER_STAGE` per stage, or leaves at least
    `MIN_LAYERS_PER_UNEVEN_STAGE` per stage. For an 80-layer model and batch 1024: 504 = 8 x 63 and
    496 = 8 x 31 x 2 fail, 480 = 8 x 15 x 4 passes.
    """
    for tp in divisors(gpus_per_node):
        if n % tp:
            continue
        rest = n // tp
        if any(rest % dp == 0 and _sane_pp(rest // dp, num_layers) for dp in divisors(global_batch) if dp <= rest):
            return True
    return False


def gpu_counts(
    num_gpus: int, gpus_per_node: int, objective: Objective, model: ModelSpec, training: TrainingSpec
) -> list[int]:
    """GPU counts to search, the requested count first.

    Step time: the requested count, and when it does not `factors_well`, also the largest
    `EXTRA_GPU_COUNTS` whole-node counts below it (within `MAX_NODES_SCANNED` nodes) that do
    (504 -> 480, 448, 416 for an 80-layer model at batch 1024); the fastest plan over all of them
    wins, and the GPUs it leaves idle are reported.
    GPU efficiency: up to 16 node-aligned counts <= num_gpus, ascending.
    """
    if objective is Objective.GPU_EFFICIENCY:
        if num_gpus <= gpus_per_node:
            return [num_gpus]
        nodes = num_gpus // gpus_per_node
        steps = sorted({max(1, round(nodes * j / 16)) for j in range(1, 17)})
        return sorted({n * gpus_per_node for n in steps} | {num_gpus})
    layers, batch = model.num_layers, training.global_batch_size
    if factors_well(num_gpus, gpus_per_node, layers, batch):
        return [num_gpus]
    extra: list[int] = []
    nodes = (num_gpus - 1) // gpus_per_node
    lowest = max(1, nodes - MAX_NODES_SCANNED + 1)
    while nodes >= lowest and len(extra) < EXTRA_GPU_COUNTS:
        n = nodes * gpus_per_node
        if factors_well(n, gpus_per_node, layers, batch):
            extra.append(n)
        nodes -= 1
    return [num_gpus, *extra]


def idle_reason(
    num_gpus: int, used: int, objective: Objective, gpus_per_node: int, model: ModelSpec, training: TrainingSpec
) -> str | None:
    """Why the best plan leaves `num_gpus - used` GPUs idle, in words; None when it uses them all."""
    if used >= num_gpus:
        return None
    idle = num_gpus - used
    if objective is Objective.GPU_EFFICIENCY:
        return f"gpu_efficiency: {used} GPUs give the most tokens per GPU-second; {idle} of {num_gpus} left idle"
    return (
        f"{num_gpus} GPUs factor badly: no tp dividing {gpus_per_node} (GPUs per node), dp dividing the global"
        f" batch {training.global_batch_size} and pp splitting {model.num_layers} layers into stages of at least"
        f" {MIN_LAYERS_PER_STAGE} (even) or {MIN_LAYERS_PER_UNEVEN_STAGE} (uneven) multiply to {num_gpus};"
        f" {used} GPUs ({used // gpus_per_node} whole nodes) give the fastest step, leaving {idle} idle"
    )


def _needs_split(model: ModelSpec, layout: Layout, default: Estimate, costs: StageCosts) -> bool:
    """Whether CP-SAT could beat the default split: it does not fit, or its slowest stage is above the ideal."""
    stages = layout.layers_per_stage or ()
    ideal = (model.num_layers * costs.layer_time_s + costs.total_extra_s) / layout.pp
    return not default.fits or slowest_stage_s(stages, costs) > max(ideal, layout.vp * costs.layer_time_s) * (1 + 1e-9)


def _refine_all(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    hw: Hardware,
    layouts: list[Layout],
    partition: bool,
    work: SplitWork | None = None,
    rules: RuleSet = CORE,
    also: tuple[Layout, ...] = (),
) -> tuple[list[tuple[Layout, Estimate]], list[Estimate]]:
    """Estimates of `layouts` (one GPU count), each with CP-SAT's split where that is valid and faster; and
    the estimates of the layouts `also` (the baselines), made in the same vectorised call."""
    estimated = estimate_many(model, cluster, training, [*layouts, *also], rules)
    defaults, extra = estimated[: len(layouts)], estimated[len(layouts) :]
    # With the embedding or loss counted in the split, Megatron-Core fixes an even split: nothing to refine. Under
    # block recompute a stage's time and memory are piecewise in its layers, not the lines `stage_costs_many`
    # measures: the default split stays.
    block = training.recompute_num_layers is not None
    piped = [
        i
        for i, x in enumerate(layouts)
        if x.pp >= 2 and not x.counts_embedding_or_loss and not (block and x.recompute is Recompute.FULL)
    ]
    if not partition or not piped:
        return list(zip(layouts, defaults, strict=True)), extra
    costs = stage_costs_many(model, training, [layouts[i] for i in piped], hw)
    todo = [(i, c) for i, c in zip(piped, costs, strict=True) if _needs_split(model, layouts[i], defaults[i], c)]
    problems = [PartitionProblem(model.num_layers, layouts[i].pp, layouts[i].vp, c) for i, c in todo]
    splits = {}
    for (i, c), split in zip(todo, solve_partitions(problems, work), strict=True):
        x = layouts[i]
        valid = split is not None and not partition_problems(split, model.num_layers, x.pp, x.vp, c)
        if split is not None and valid and split != x.layers_per_stage:
            splits[i] = replace(x, layers_per_stage=split)
    alternatives = dict(zip(splits, estimate_many(model, cluster, training, list(splits.values()), rules), strict=True))
    out = []
    for i, (layout, e) in enumerate(zip(layouts, defaults, strict=True)):
        alt = alternatives.get(i)
        better = alt is not None and alt.fits and (not e.fits or alt.step_time_s < e.step_time_s)
        out.append((splits[i], alt) if better and alt is not None else (layout, e))
    return out, extra


def _objective_of(e: Estimate, n: int, objective: Objective) -> float:
    return e.step_time_s if objective is Objective.STEP_TIME else e.step_time_s * n


def plan(
    model: ModelSpec,
    cluster: ClusterSpec,
    training: TrainingSpec,
    constraints: Mapping[str, Any] | None = None,
    top_k: int = 10,
    objective: Objective = Objective.STEP_TIME,
    partition: bool = True,
    max_evaluated: int = MAX_EVALUATED,
    rules: RuleSet = CORE,
    max_step_time_s: float | None = None,
) -> PlanResult:
    """The best `top_k` layouts under the cost model, with the heuristic baseline and search statistics.

    `max_step_time_s`: plans whose step takes longer are dropped (a wall-clock bound; with
    `gpu_efficiency` it keeps the search from trading any amount of time for fewer GPUs).

    `rules`: what the target framework accepts (`planner.rules.rule_set`); every plan, the baseline and
    the diagnosis pass them, and `search.rejected` counts what each removed.

    Bounded by work, not time: the request evaluates at most `max_evaluated` candidates (the GPU
    counts in `gpu_counts` order, each space in its own order; then the diagnosis) and gives CP-SAT a
    fixed deterministic-time budget, so the answer is the same on any machine under any load. Exact
    when `search.complete`; otherwise `search.truncated_by` names the limits hit and the plans are
    the best of the `evaluated` candidates.
    """
    started = time.perf_counter()
    budget = WorkBudget(candidates=max_evaluated)
    allowed: Allowed = parse_constraints(constraints)
    hw = usable_hardware(cluster, training)
    parts: list[Evaluated] = []
    own: list[Evaluated] = []  # the request's own module set: what the baselines and the diagnosis read
    rejected: Counter[str] = Counter()
    counts = gpu_counts(cluster.num_gpus, hw.gpus_per_node, objective, model, training)
    sets = _module_sets(model, training, allowed)
    # The request's own space runs its default without an idle core_attn where that differs (MLA under flash
    # attention: `recompute.own_selective_modules`); its selective layouts then name the set, and launch it.
    own_set = own_selective_modules(model, training)
    run = training if own_set is None else with_modules(training, own_set)
    for n in counts:
        if parts and budget.candidates == 0:  # spent exactly: the remaining GPU counts are not searched
            budget.truncate(CANDIDATES)
            break
        space = replace(build_space(model, run, n, allowed, rules), recompute_modules=own_set)
        rejected.update(space.rejected)
        part = evaluate(model, run, _undominated(space, model, run, allowed, rules), hw, budget.candidates)
        budget.spend(part.evaluated)
        parts.append(part)
        own.append(part)
        if part.evaluated < len(part) or not _search_module_sets(
            model, training, space, allowed, sets, hw, rules, budget, parts
        ):
            budget.truncate(CANDIDATES)
            break
    ev: Evaluated = concatenate(parts)
    requested: Evaluated = concatenate(own)
    bound = math.inf if max_step_time_s is None else max_step_time_s
    order = rank(ev, hw.hbm_bytes, objective, top=top_k, max_step_s=bound)
    fit = ev.peak_bytes <= hw.hbm_bytes
    feasible = int(np.count_nonzero(fit))
    reusable = (
        not allowed and objective is Objective.STEP_TIME and len(counts) == 1 and requested.evaluated == len(requested)
    )
    recipes = (PAPER, MODERN)
    found = [
        baseline_candidates(model, run, cluster.num_gpus, hw, requested if reusable else None, rules, r)
        for r in recipes
    ]
    rule_layouts = [None if f is None else f[0].layout(f[1], model.num_layers) for f in found]
    plans, rule_estimates = _top_plans(
        model,
        training,
        cluster,
        hw,
        ev,
        order,
        top_k,
        objective,
        partition,
        budget.split,
        rules,
        tuple(x for x in rule_layouts if x is not None),
    )
    diagnosis = None
    if not plans and feasible and max_step_time_s is not None:
        fastest = int(np.argmin(np.where(fit, ev.step_time_s, np.inf)))
        diagnosis = too_slow(max_step_time_s, float(ev.step_time_s[fastest]), int(ev.num_gpus[fastest]), hw)
    elif not plans:
        diagnosis = diagnose(model, run, cluster, hw, requested, allowed, rejected, budget, rules)
    baseline, modern = _baselines(recipes, rule_layouts, rule_estimates, plans, objective, cluster.num_gpus)
    stats = SearchStats(
        candidates=len(ev),
        evaluated=ev.evaluated,
        feasible=feasible,
        elapsed_ms=(time.perf_counter() - started) * 1e3,
        complete=not budget.reasons(),
        truncated_by=budget.reasons(),
        rejected=dict(rejected.most_common()),
        framework=rules.name,
        framework_version=rules.version,
    )
    used = plans[0].num_gpus if plans else cluster.num_gpus
    return PlanResult(
        plans=plans,
        baseline=baseline,
        modern_baseline=modern,
        search=stats,
        diagnosis=diagnosis,
        idle_gpus=cluster.num_gpus - used,
        idle_reason=idle_reason(cluster.num_gpus, used, objective, hw.gpus_per_node, model, training),
    )


def _undominated(space: Space, model: ModelSpec, training: TrainingSpec, allowed: Allowed, rules: RuleSet) -> Space:
    """`space` without its selective-recompute candidates where each is dominated by the same layout without
    recompute: the request's selective reruns nothing but an idle core_attn (`recompute.default_is_idle`: no
    named set, the default the attention core alone, flash attention on, so the core keeps no scores and its rerun
    frees nothing while costing the core's forward); only while recompute none is allowed. The recipes' module sets
    are searched beside it (`_search_module_sets`)."""
    allows = allowed.get("recompute", [r.value for r in Recompute])
    dominated = (
        default_is_idle(model, training) and Recompute.NONE.value in allows and Recompute.SELECTIVE.value in allows
    )
    if not dominated:
        return space
    return respace(
        space, model, training, {**allowed, "recompute": [r for r in allows if r != Recompute.SELECTIVE.value]}, rules
    )


def _module_sets(model: ModelSpec, training: TrainingSpec, allowed: Allowed) -> tuple[tuple[RecomputeModule, ...], ...]:
    """The recipes' module sets the search tries beside the request's own (`recompute.searched_module_sets`); none
    when the request's constraints rule selective recompute out."""
    pinned = allowed.get("recompute")
    if pinned is not None and Recompute.SELECTIVE.value not in pinned:
        return ()
    return searched_module_sets(model, training)


def _search_module_sets(
    model: ModelSpec,
    training: TrainingSpec,
    own: Space,
    allowed: Allowed,
    sets: tuple[tuple[RecomputeModule, ...], ...],
    hw: Hardware,
    rules: RuleSet,
    budget: WorkBudget,
    parts: list[Evaluated],
) -> bool:
    """Evaluate the selective-recompute candidates of the request's own space `own` once per module set in `sets`,
    each as a space of its own over `own`'s rows (`respace`, `Space.recompute_modules`), appended to `parts`; False
    when the candidate budget ran out first. What the rules remove there is not counted again: `own` counted it."""
    for modules in sets:
        if budget.candidates == 0:
            return False
        run = with_modules(training, modules)
        space = respace(own, model, run, {**allowed, "recompute": [Recompute.SELECTIVE.value]}, rules)
        part = evaluate(model, run, replace(space, recompute_modules=modules), hw, budget.candidates)
        budget.spend(part.evaluated)
        parts.append(part)
        if part.evaluated < len(part):
            return False
    return True


def _top_plans(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    hw: Hardware,
    ev: Evaluated,
    order: np.ndarray,
    top_k: int,
    objective: Objective,
    partition: bool,
    work: SplitWork | None = None,
    rules: RuleSet = CORE,
    also: tuple[Layout, ...] = (),
) -> tuple[list[Plan], list[Estimate]]:
    """The ranked plans of the shortlist `order`, and the estimates of the layouts `also` on all the cluster's
    GPUs (the baselines), made beside the shortlist's own at that GPU count."""
    shortlist = [int(i) for i in order[:top_k]]
    by_gpus: dict[int, list[int]] = {}
    for i in shortlist:
        by_gpus.setdefault(int(ev.num_gpus[i]), []).append(i)
    if also:
        by_gpus.setdefault(cluster.num_gpus, [])
    scored: list[tuple[float, int, int, Estimate, Layout]] = []
    extra: list[Estimate] = []
    for n, indexes in by_gpus.items():
        layouts = [ev.layout(i, model.num_layers) for i in indexes]
        cluster_n = cluster.model_copy(update={"num_gpus": n})
        with_rules = also if n == cluster.num_gpus else ()
        refined, found = _refine_all(model, training, cluster_n, hw, layouts, partition, work, rules, with_rules)
        extra += found
        for i, (layout, e) in zip(indexes, refined, strict=True):
            scored.append((_objective_of(e, n, objective), shortlist.index(i), n, e, layout))
    scored.sort(key=lambda s: (s[0], s[1]))
    if not scored:
        return [], extra
    within = scored[0][0] * (1 + EQUIVALENT_WITHIN)
    equivalent = sorted((s for s in scored if s[0] <= within), key=lambda s: (simplicity(s[4]), s[0], s[1]))
    ordered = [(True, s) for s in equivalent] + [(False, s) for s in scored if s[0] > within]
    plans = [
        Plan(rank=r + 1, layout=layout, num_gpus=n, estimate=e, equivalent=same)
        for r, (same, (_, _, n, e, layout)) in enumerate(ordered)
    ]
    return plans, extra


def _baselines(
    recipes: tuple[Recipe, ...],
    layouts: list[Layout | None],
    estimates: list[Estimate],
    plans: list[Plan],
    objective: Objective,
    num_gpus: int,
) -> list[Baseline]:
    """Each recipe's rule-of-thumb layout (None where nothing fits) with its estimate (`estimates`, one per
    layout that is not None, in order), against the best plan."""
    given = iter(estimates)
    out = []
    for recipe, layout in zip(recipes, layouts, strict=True):
        if layout is None:
            out.append(Baseline(rule=recipe.rule, plan=None, speedup_of_best=None))
            continue
        e = next(given)
        base = Plan(rank=0, layout=layout, num_gpus=num_gpus, estimate=e)
        speedup = None
        if plans:  # against the fastest plan (the first may be a simpler equivalent one)
            ours = min(_objective_of(p.estimate, p.num_gpus, objective) for p in plans)
            speedup = _objective_of(e, num_gpus, objective) / ours
        out.append(Baseline(rule=recipe.rule, plan=base, speedup_of_best=speedup))
    return out
