"""Properties of the cost model over random small models, layouts and hardware (hypothesis, derandomized).

Every number `estimate()` returns is finite; times and memory are positive; a faster network never makes a
layout slower; gathering ZeRO-3 weights after the gradients never makes one faster; recomputing more never keeps
more activations.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

from planner.costmodel import compute
from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import activation_bytes_per_layer
from planner.estimate import Estimate, estimate
from planner.layout import Layout
from planner.numerics import numerics
from planner.profiles import ClusterSpec, HardwareProfile, load_profiles
from planner.rules import CORE
from planner.specs import (
    BackwardPrefetch,
    ModelSpec,
    MoESpec,
    Precision,
    Recompute,
    RecomputeModule,
    RuntimeFeatures,
    TrainingSpec,
)
from planner.validate import layout_violations

PROFILES = load_profiles()
SETTINGS = settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([1, 2, 4, 8, 16, 32]))
    hidden = heads * draw(st.sampled_from([16, 32, 64, 128]))
    layers = draw(st.integers(1, 48))
    moe = None
    if draw(st.booleans()):
        experts = draw(st.sampled_from([2, 4, 8, 16]))
        moe = MoESpec(
            num_experts=experts,
            top_k=draw(st.integers(1, min(experts, 4))),
            expert_ffn_hidden_size=hidden * draw(st.sampled_from([1, 2, 4])),
            num_shared_experts=draw(st.integers(0, 2)),
            moe_layer_freq=draw(st.integers(1, 2)),
            first_k_dense_layers=draw(st.integers(0, min(2, layers))),
        )
    return ModelSpec(
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_query_groups=draw(st.sampled_from([g for g in (1, 2, 4, heads) if heads % g == 0])),
        ffn_hidden_size=hidden * draw(st.integers(1, 8)),
        gated_mlp=draw(st.booleans()),
        vocab_size=draw(st.integers(1000, 160_000)),
        seq_length=draw(st.sampled_from([128, 512, 2048, 8192, 32768])),
        tied_embeddings=draw(st.booleans()),
        linear_bias=draw(st.booleans()),
        learned_position_embeddings=draw(st.booleans()),
        moe=moe,
    )


@st.composite
def profiles(draw: st.DrawFn) -> HardwareProfile:
    """A built-in profile with its rates redrawn over realistic ranges (10x either side of today's systems)."""
    base = PROFILES[draw(st.sampled_from(sorted(PROFILES)))]
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    gpu = base.gpu.model_copy(
        update={
            "memory_gib": draw(st.floats(4, 512)),
            "hbm_bandwidth_gb_per_s": draw(st.floats(200, 20_000)),
            "peak_tflops": base.gpu.peak_tflops.model_copy(update={"bf16": draw(st.floats(20, 10_000))}),
        }
    )
    node = base.node.model_copy(
        update={
            "gpus_per_node": per_node,
            "nvlink_domain_gpus": per_node * draw(st.sampled_from([1, 1, 2, 9])),
            "nvlink_gb_per_s": draw(st.floats(10, 3600)),
        }
    )
    network = base.network.model_copy(
        update={"nics_per_node": draw(st.integers(1, 8)), "nic_gbit_per_s": draw(st.floats(10, 1600))}
    )
    return base.model_copy(update={"gpu": gpu, "node": node, "network": network})


def trainings(batch: int) -> st.SearchStrategy[TrainingSpec]:
    runtime = st.builds(
        RuntimeFeatures,
        flash_attention=st.booleans(),
        overlap_grad_reduce=st.booleans(),
        overlap_param_gather=st.booleans(),
        tp_comm_overlap=st.booleans(),
        scatter_gather_p2p=st.booleans(),
    )
    tokens = st.one_of(st.none(), st.floats(1e6, 1e16))
    return st.builds(
        TrainingSpec,
        global_batch_size=st.just(batch),
        precision=st.just(Precision.BF16),
        runtime=runtime,
        train_tokens=tokens,
    )


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    """Any layout with sizes >= 1, legal or not: estimate() answers for both (fits = false and why)."""
    return Layout(
        tp=draw(st.sampled_from([1, 2, 4, 8])),
        pp=draw(st.sampled_from([1, 2, 3, 4, 8])),
        dp=draw(st.sampled_from([1, 2, 3, 4, 8, 16])),
        cp=draw(st.sampled_from([1, 1, 2, 4])),
        ep=draw(st.sampled_from([1, 1, 2, 4])),
        vp=draw(st.sampled_from([1, 1, 2, 3])),
        micro_batch_size=draw(st.sampled_from([1, 2, 4, 8])),
        recompute=draw(st.sampled_from(list(Recompute))),
        sequence_parallel=draw(st.booleans()),
        zero_stage=draw(st.integers(0, 3)),
    )


@st.composite
def cases(draw: st.DrawFn) -> tuple[ModelSpec, ClusterSpec, TrainingSpec, Layout]:
    model, profile, layout = draw(models()), draw(profiles()), draw(layouts())
    batch = layout.dp * layout.micro_batch_size * draw(st.integers(1, 16))
    training = draw(trainings(batch))
    note(f"model={model!r}\nprofile={profile!r}\ntraining={training!r}\nlayout={layout!r}")
    return model, ClusterSpec(profile=profile, num_gpus=layout.world_size), training, layout


def numbers(e: Estimate) -> dict[str, float]:
    out = {
        "step_time_s": e.step_time_s,
        "tokens_per_s": e.tokens_per_s,
        "model_tflops_per_gpu": e.model_tflops_per_gpu,
        "hardware_tflops_per_gpu": e.hardware_tflops_per_gpu,
        "mfu": e.mfu,
        "bubble_fraction": e.bubble_fraction,
        "memory.peak_gib": e.memory.peak_gib,
        "memory.capacity_gib": e.memory.capacity_gib,
        "microbatch_forward_s": e.microbatch_forward_s,
        "microbatch_backward_s": e.microbatch_backward_s,
    }
    out |= {f"time_breakdown_s.{k}": v for k, v in e.time_breakdown_s.items()}
    out |= {f"memory.breakdown_gib.{k}": v for k, v in e.memory.breakdown_gib.items()}
    out |= {k: v for k, v in (("days_to_train", e.days_to_train), ("gpu_hours", e.gpu_hours)) if v is not None}
    return out


@SETTINGS
@given(cases())
def test_every_number_is_finite_and_times_and_memory_are_positive(
    case: tuple[ModelSpec, ClusterSpec, TrainingSpec, Layout],
) -> None:
    e = estimate(*case)
    values = numbers(e)
    bad = {k: v for k, v in values.items() if not math.isfinite(v)}
    assert not bad, bad
    assert e.step_time_s > 0 and e.tokens_per_s > 0
    assert e.model_tflops_per_gpu > 0 and e.hardware_tflops_per_gpu >= e.model_tflops_per_gpu * (1 - 1e-12)
    assert 0 < e.mfu and 0 <= e.bubble_fraction < 1
    assert e.memory.peak_gib > 0 and e.memory.capacity_gib > 0
    assert all(v >= 0 for k, v in values.items() if k.startswith(("time_breakdown_s.", "memory.breakdown_gib.")))
    assert e.microbatch_forward_s >= 0 and e.microbatch_backward_s >= 0  # 0 on a stage with no layers
    if not e.violations:
        assert e.microbatch_forward_s > 0 and e.microbatch_backward_s > 0
    assert math.isclose(sum(e.time_breakdown_s.values()), e.step_time_s, rel_tol=1e-9)
    assert math.isclose(sum(e.memory.breakdown_gib.values()), e.memory.peak_gib, rel_tol=1e-9)


def _faster(profile: HardwareProfile, nic: float, nvlink: float) -> HardwareProfile:
    return profile.model_copy(
        update={
            "network": profile.network.model_copy(update={"nic_gbit_per_s": profile.network.nic_gbit_per_s * nic}),
            "node": profile.node.model_copy(update={"nvlink_gb_per_s": profile.node.nvlink_gb_per_s * nvlink}),
        }
    )


NETWORK_SLACK = 0.01
"""Known (reported): a faster NVLink can make a step up to ~0.6% slower. It shortens each layer's TP time, so
the slowest stage can switch from a layer-heavy stage to the last (logits) stage, whose shorter backward then
hides less of the DP gradient reduction (`costmodel.shared._slowest_stage`, `data_parallel.exposed_dp_s`).
The case once pinned here (an A100 profile cut to 54 TFLOP/s, a 9-layer h = 128 model, tp 8 pp 4 dp 2) no
longer reproduces since GEMMs are tile/wave-quantised with a few-us fixed time (branch host10), but the
mechanism stands: keep the slack until a fix, not a moved instance, makes it unnecessary."""


@SETTINGS
@given(cases(), st.sampled_from([(2.0, 1.0), (1.0, 2.0), (4.0, 4.0), (1.01, 1.0), (1.0, 1.01)]))
def test_a_faster_network_never_makes_a_layout_slower(
    case: tuple[ModelSpec, ClusterSpec, TrainingSpec, Layout], speedup: tuple[float, float]
) -> None:
    model, cluster, training, layout = case
    base = estimate(model, cluster, training, layout)
    faster_cluster = cluster.model_copy(update={"profile": _faster(cluster.profile, *speedup)})
    faster = estimate(model, faster_cluster, training, layout)
    assert faster.step_time_s <= base.step_time_s * (1 + NETWORK_SLACK), (
        base.time_breakdown_s,
        faster.time_breakdown_s,
    )
    # Each collective's own time never grows (DP's exposed part may: its overlap window is the slowest stage's).
    for key in ("tp_comm", "pp_comm", "cp_comm", "ep_comm"):
        assert faster.time_breakdown_s[key] <= base.time_breakdown_s[key] * (1 + 1e-12) + 1e-15, key
    assert faster.memory == base.memory


@SETTINGS
@given(cases())
def test_gathering_after_the_gradients_is_never_faster(
    case: tuple[ModelSpec, ClusterSpec, TrainingSpec, Layout],
) -> None:
    # PyTorch FSDP's BACKWARD_POST takes the backward gathers out of the overlap window, no prefetch the ZeRO-3
    # reduce-scatters too: never a faster step, and exactly the same one below ZeRO-3.
    model, cluster, training, layout = case

    def with_order(order: BackwardPrefetch) -> Estimate:
        runtime = training.runtime.model_copy(update={"zero3_backward_prefetch": order})
        return estimate(model, cluster, training.model_copy(update={"runtime": runtime}), layout)

    pre, post, none = (with_order(o) for o in (BackwardPrefetch.PRE, BackwardPrefetch.POST, BackwardPrefetch.NONE))
    if layout.zero_stage < 3:
        assert pre.step_time_s == post.step_time_s == none.step_time_s
    else:
        assert pre.step_time_s <= post.step_time_s * (1 + 1e-12) <= none.step_time_s * (1 + 1e-12) ** 2
    assert pre.memory == post.memory == none.memory


@SETTINGS
@given(models(), layouts(), st.booleans())
def test_more_recomputation_never_keeps_more_activations(model: ModelSpec, layout: Layout, flash: bool) -> None:
    rt = RuntimeFeatures(flash_attention=flash)
    variants = [replace(layout, recompute=r) for r in (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)]
    c = Candidates.from_layouts(variants, model.num_layers, global_batch_size=layout.dp * layout.micro_batch_size)
    none, selective, full = (float(x) for x in activation_bytes_per_layer(model, c, rt, numerics(Precision.BF16)))
    assert np.isfinite([none, selective, full]).all()
    assert none >= selective >= full > 0, (none, selective, full)


@SETTINGS
@given(models(), layouts(), st.booleans(), st.sets(st.sampled_from(list(RecomputeModule))), st.data())
def test_recomputing_more_modules_keeps_less_and_reruns_more(
    model: ModelSpec, layout: Layout, flash: bool, wider: set[RecomputeModule], data: st.DataObject
) -> None:
    """Selective recompute over a module set S inside T keeps no fewer activation bytes than over T and reruns no
    more forward time, between no recompute and full recompute; modules the model lacks are left out (rule
    recompute_modules refuses them at the edge)."""
    wider = {m for m in wider if _has_module(model, m)}
    assume(wider)
    narrower = data.draw(st.sets(st.sampled_from(sorted(wider)), min_size=1))
    selective = replace(layout, recompute=Recompute.SELECTIVE)
    variants = [replace(layout, recompute=r) for r in (Recompute.NONE, Recompute.FULL)] + [selective] * 2
    c = Candidates.from_layouts(variants, model.num_layers, global_batch_size=layout.dp * layout.micro_batch_size)
    num, hw = numerics(Precision.BF16), PROFILES["dgx-h100"].hardware(Precision.BF16)

    def measured(modules: set[RecomputeModule]) -> tuple[float, float]:
        rt = RuntimeFeatures(flash_attention=flash, recompute_modules=tuple(sorted(modules)))
        kept = activation_bytes_per_layer(model, c, rt, num)
        rerun = compute.layer_times(model, c, hw, rt).recompute_s
        none, full = float(kept[0]), float(kept[1])
        assert none >= float(kept[2]) >= full > 0
        return float(kept[2]), float(rerun[2])

    (kept_s, rerun_s), (kept_t, rerun_t) = measured(narrower), measured(wider)
    assert kept_s >= kept_t * (1 - 1e-12) and rerun_s <= rerun_t * (1 + 1e-12), (narrower, wider)


def _has_module(model: ModelSpec, module: RecomputeModule) -> bool:
    """Whether the model has the part `module` reruns (rule recompute_modules, read through its own check)."""
    training = TrainingSpec(global_batch_size=8, runtime=RuntimeFeatures(recompute_modules=(module,)))
    layout = Layout(tp=1, pp=1, dp=1)
    return not any(v.rule == "recompute_modules" for v in layout_violations(layout, model, training, 1, CORE))
