"""Exactness: on seeded random instances the search's best equals the brute-force enumerator's best."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.constraints.space import build_space
from planner.estimate import estimate
from planner.profiles import ClusterSpec, load_profiles
from planner.search.constraints import parse_constraints
from planner.search.plan import gpu_counts, plan
from planner.search.rank import Objective
from planner.specs import Fp8Recipe, ModelSpec, MoESpec, Precision, TrainingSpec
from planner.validate import layout_violations

from .reference import legal_layouts, reference_best

INSTANCES = 200
PROFILES = ["dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "gb200-nvl72"]


def _instance(seed: int) -> tuple[ModelSpec, ClusterSpec, TrainingSpec, dict[str, list[object]]]:
    rng = np.random.default_rng(seed)
    heads = int(rng.choice([4, 8, 12, 16]))
    hidden = heads * int(rng.choice([64, 128, 256, 512, 1024]))
    groups = int(rng.choice([g for g in (1, 2, 4, heads) if heads % g == 0]))
    moe = None
    if rng.random() < 0.2:
        moe = MoESpec(num_experts=int(rng.choice([2, 4])), top_k=1, expert_ffn_hidden_size=2 * hidden)
    model = ModelSpec(
        num_layers=int(rng.integers(2, 13)),
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=groups,
        ffn_hidden_size=4 * hidden,
        gated_mlp=bool(rng.random() < 0.5),
        vocab_size=int(rng.choice([1000, 32000, 128000])),
        seq_length=int(rng.choice([512, 2048, 8192])),
        moe=moe,
    )
    profile = load_profiles()[PROFILES[seed % len(PROFILES)]]
    profile = profile.model_copy(
        update={"gpu": profile.gpu.model_copy(update={"memory_gib": float(rng.choice([1, 4, 16, 80]))})}
    )
    gpus = int(rng.choice([1, 2, 4, 8, 16]))
    batch = int(rng.choice([1, 2, 4, 8, 16, 32]))
    # Pin two cheap axes so the scalar enumerator stays within seconds per instance.
    allowed: dict[str, list[object]] = {"zero_stage": [int(rng.integers(0, 4))], "vp": [1, 2]}
    if gpus >= 8:
        allowed["cp"] = [1, 2]
    # A fifth of the instances offload activations (own stream, so the other draws stay as they were).
    extra = np.random.default_rng(10_000 + seed)
    offload = int(extra.integers(1, model.num_layers)) if extra.random() < 0.2 else 0
    # A fifth recompute only the first k layers of each stage under full recompute (a third stream).
    third = np.random.default_rng(20_000 + seed)
    block = int(third.integers(1, model.num_layers + 1)) if third.random() < 0.2 else None
    training = TrainingSpec(global_batch_size=batch, activation_offload_layers=offload, recompute_num_layers=block)
    # On FP8 GPUs a quarter train in FP8 current scaling with BF16 end layers (a fourth stream).
    fourth = np.random.default_rng(30_000 + seed)
    if profile.gpu.peak_tflops.fp8 is not None and fourth.random() < 0.25:
        ends = {"bf16_layers_at_start": int(fourth.integers(0, 2)), "bf16_layers_at_end": 1}
        training = training.model_copy(update={"precision": Precision.FP8, "fp8_recipe": Fp8Recipe.TENSORWISE} | ends)
    return model, ClusterSpec(profile=profile, num_gpus=gpus), training, allowed


@pytest.mark.parametrize("seed", range(INSTANCES))
def test_search_matches_brute_force(seed: int) -> None:
    model, cluster, training, allowed = _instance(seed)
    result = plan(model, cluster, training, allowed, top_k=3, partition=False)
    per_node = cluster.profile.node.gpus_per_node
    counts = gpu_counts(cluster.num_gpus, per_node, Objective.STEP_TIME, model, training)
    found = [
        r
        for n in counts
        if (r := reference_best(model, cluster.model_copy(update={"num_gpus": n}), training, allowed)) is not None
    ]
    reference = min(found, key=lambda r: r[1].step_time_s, default=None)
    if reference is None:
        assert result.plans == []
        assert result.diagnosis is not None
        return
    best = min(result.plans, key=lambda p: p.estimate.step_time_s)  # plans[0] may be a simpler equivalent
    assert best.estimate.step_time_s == pytest.approx(reference[1].step_time_s, rel=1e-12)
    for p in result.plans:
        assert p.num_gpus in counts
        assert layout_violations(p.layout, model, training, p.num_gpus) == []
        assert p.estimate.fits
        assert p.layout.world_size == p.num_gpus
    assert result.idle_gpus == cluster.num_gpus - result.plans[0].num_gpus
    assert (result.idle_reason is None) == (result.idle_gpus == 0)


@pytest.mark.parametrize("seed", range(0, INSTANCES, 10))
def test_stage_partition_never_worse_and_more_memory_never_slower(seed: int) -> None:
    model, cluster, training, allowed = _instance(seed)
    plain = plan(model, cluster, training, allowed, top_k=3, partition=False)
    split = plan(model, cluster, training, allowed, top_k=3, partition=True)
    if not plain.plans:
        return
    fastest = min(p.estimate.step_time_s for p in plain.plans)  # plans[0] may be a simpler equivalent
    assert min(p.estimate.step_time_s for p in split.plans) <= fastest * (1 + 1e-12)
    for p in split.plans:
        e = estimate(model, cluster.model_copy(update={"num_gpus": p.num_gpus}), training, p.layout)
        assert e.fits and e.step_time_s == pytest.approx(p.estimate.step_time_s, rel=1e-12)
    bigger = cluster.profile.model_copy(
        update={"gpu": cluster.profile.gpu.model_copy(update={"memory_gib": cluster.profile.gpu.memory_gib * 2})}
    )
    roomier = plan(model, cluster.model_copy(update={"profile": bigger}), training, allowed, top_k=1, partition=False)
    assert min(p.estimate.step_time_s for p in roomier.plans) <= fastest * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(0, INSTANCES, 4))
def test_space_is_exactly_the_legal_layouts(seed: int) -> None:
    """The vectorised space holds every layout the scalar rules accept, and nothing else."""
    model, cluster, training, allowed = _instance(seed)
    space = build_space(model, training, cluster.num_gpus, parse_constraints(allowed))
    c = space.candidates
    searched = [c.layout(i, model.num_layers) for i in range(len(c))]
    as_key = lambda x: replace(x, layers_per_stage=None)  # noqa: E731
    expected = {as_key(x) for x in legal_layouts(model, cluster.num_gpus, training, allowed)}
    assert len(searched) == len(expected)
    assert {as_key(x) for x in searched} == expected
