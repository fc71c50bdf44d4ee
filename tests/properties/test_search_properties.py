"""Properties of the search over random small models and clusters (hypothesis, derandomized).

More GPU memory never makes the best plan slower; every returned layout breaks no rule and fits; the same
request gives the same answer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from planner.profiles import ClusterSpec, HardwareProfile, load_profiles
from planner.search.plan import PlanResult, plan
from planner.search.rank import Objective
from planner.specs import ModelSpec, MoESpec, Recompute, RuntimeFeatures, TrainingSpec
from planner.validate import layout_violations

PROFILES = load_profiles()
SETTINGS = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
Case = tuple[ModelSpec, ClusterSpec, TrainingSpec, dict[str, Any], Objective]


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([2, 4, 8, 16]))
    hidden = heads * draw(st.sampled_from([32, 64, 128, 256]))
    layers = draw(st.integers(2, 24))
    moe = None
    if draw(st.integers(0, 4)) == 0:
        experts = draw(st.sampled_from([2, 4, 8]))
        moe = MoESpec(
            num_experts=experts,
            top_k=draw(st.integers(1, 2)),
            expert_ffn_hidden_size=hidden * draw(st.sampled_from([1, 2])),
            moe_layer_freq=draw(st.integers(1, 2)),
        )
    return ModelSpec(
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=draw(st.sampled_from([g for g in (1, 2, heads) if heads % g == 0])),
        ffn_hidden_size=hidden * draw(st.sampled_from([2, 4])),
        gated_mlp=draw(st.booleans()),
        vocab_size=draw(st.sampled_from([1000, 32000, 128000])),
        seq_length=draw(st.sampled_from([512, 2048, 8192])),
        moe=moe,
    )


@st.composite
def cases(draw: st.DrawFn) -> Case:
    model = draw(models())
    base = PROFILES[draw(st.sampled_from(sorted(PROFILES)))]
    profile: HardwareProfile = base.model_copy(
        update={"gpu": base.gpu.model_copy(update={"memory_gib": draw(st.sampled_from([1.0, 2.0, 6.0, 16.0, 80.0]))})}
    )
    gpus = draw(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]))
    training = TrainingSpec(
        global_batch_size=draw(st.sampled_from([1, 4, 8, 16, 32, 64])),
        runtime=RuntimeFeatures(
            flash_attention=draw(st.booleans()),
            tp_comm_overlap=draw(st.booleans()),
            overlap_grad_reduce=draw(st.booleans()),
        ),
    )
    constraints: dict[str, Any] = {}
    if draw(st.booleans()):
        constraints["zero_stage"] = draw(st.lists(st.integers(0, 3), min_size=1, max_size=2, unique=True))
    if draw(st.booleans()):
        constraints["recompute"] = draw(
            st.lists(st.sampled_from([r.value for r in Recompute]), min_size=1, max_size=2, unique=True)
        )
    objective = draw(st.sampled_from([Objective.STEP_TIME, Objective.STEP_TIME, Objective.GPU_EFFICIENCY]))
    note(f"model={model!r}\nprofile={profile.id} memory_gib={profile.gpu.memory_gib} gpus={gpus}")
    note(f"training={training!r}\nconstraints={constraints} objective={objective}")
    return model, ClusterSpec(profile=profile, num_gpus=gpus), training, constraints, objective


def _plan(case: Case, top_k: int = 3) -> PlanResult:
    model, cluster, training, constraints, objective = case
    result = plan(model, cluster, training, constraints, top_k=top_k, objective=objective)
    assert result.search.complete, result.search  # small instances: the work budget never runs out
    return result


def _with_memory(cluster: ClusterSpec, factor: float) -> ClusterSpec:
    gpu = cluster.profile.gpu.model_copy(update={"memory_gib": cluster.profile.gpu.memory_gib * factor})
    return cluster.model_copy(update={"profile": cluster.profile.model_copy(update={"gpu": gpu})})


def _cost(result: PlanResult, objective: Objective) -> float:
    """The fastest plan's objective (plans[0] may be a simpler equivalent one, planner.search.plan.simplicity)."""
    return min(
        p.estimate.step_time_s * (p.num_gpus if objective is Objective.GPU_EFFICIENCY else 1) for p in result.plans
    )


@SETTINGS
@given(cases())
def test_more_gpu_memory_never_makes_the_best_plan_slower(case: Case) -> None:
    model, cluster, training, constraints, objective = case
    base = _plan(case, top_k=5)
    more = _plan((model, _with_memory(cluster, 2.0), training, constraints, objective), top_k=5)
    if not base.plans:
        return
    assert more.plans, "a plan that fits in M GiB fits in 2M GiB"
    assert _cost(more, objective) <= _cost(base, objective) * (1 + 1e-9), (base.plans[0], more.plans[0])


@SETTINGS
@given(cases())
def test_every_returned_layout_is_legal_and_fits(case: Case) -> None:
    model, cluster, training, _, _ = case
    result = _plan(case)
    returned = list(result.plans) + ([result.baseline.plan] if result.baseline.plan else [])
    for p in returned:
        assert p.layout.world_size == p.num_gpus <= cluster.num_gpus
        assert layout_violations(p.layout, model, training, p.num_gpus) == [], p.layout
        assert p.estimate.fits and not p.estimate.violations, p.estimate.violations
        assert p.estimate.memory.peak_gib <= p.estimate.memory.capacity_gib
        assert p.layout.layers_per_stage is not None and sum(p.layout.layers_per_stage) == model.num_layers
    assert [p.rank for p in result.plans] == list(range(1, len(result.plans) + 1))
    if not result.plans:
        assert result.diagnosis is not None


def _comparable(result: PlanResult) -> dict[str, Any]:
    out = dataclasses.asdict(result)
    del out["search"]["elapsed_ms"]
    return out


@SETTINGS
@given(cases())
def test_the_same_request_gives_the_same_answer(case: Case) -> None:
    assert _comparable(_plan(case)) == _comparable(_plan(case))
