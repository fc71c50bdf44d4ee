"""The MoE token dispatch: copies per dispatcher by hand, the overlap's slots, and the step it changes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.costmodel.candidates import Candidates
from planner.costmodel.comm import OVERLAP_SLOWDOWN
from planner.costmodel.compute import LayerTimes
from planner.costmodel.expert_dispatch import a2a_pass_s, dispatch_copies, ep_comm_per_layer_s, none_routed_to
from planner.costmodel.recompute import full_recompute_reruns
from planner.costmodel.topology import GroupPlacement, place
from planner.estimate import estimate
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.plan import plan
from planner.specs import ModelSpec, MoeDispatcher, MoESpec, Recompute, RuntimeFeatures, TrainingSpec

BASE = {"num_layers": 4, "hidden_size": 64, "num_attention_heads": 8, "ffn_hidden_size": 256}


def _moe(experts: int, top_k: int) -> ModelSpec:
    return ModelSpec(
        **BASE, vocab_size=1000, seq_length=16, moe=MoESpec(num_experts=experts, top_k=top_k, expert_ffn_hidden_size=32)
    )


def _group(ep: int, per_domain: int) -> GroupPlacement:
    return GroupPlacement(np.array([ep]), np.array([per_domain]), np.array([ep > per_domain]))


def test_none_routed_to_by_hand() -> None:
    # 2 of 4 experts held, top 2: (2/4)(1/3) = 1/6; all held: 0; none held: 1.
    assert none_routed_to(4, 2, np.array([2.0, 4.0, 0.0])) == pytest.approx([1 / 6, 0.0, 1.0])


def test_alltoall_sends_one_copy_per_routed_expert() -> None:
    """ep 16 over two domains of 8, top 2: 2 x 8/16 = 1 copy over the network, 2 x 7/16 over NVLink."""
    got = dispatch_copies(_moe(16, 2), _group(16, 8), MoeDispatcher.ALLTOALL)
    assert float(got.network[0]) == 1.0 and float(got.nvlink[0]) == 2 * 7 / 16


@pytest.mark.parametrize("dispatcher", [MoeDispatcher.DEEPEP, MoeDispatcher.HYBRIDEP])
def test_flex_sends_a_token_once_per_node_and_per_gpu(dispatcher: MoeDispatcher) -> None:
    """16 experts, one per GPU, ep 16 over two domains of 8, top 2. The other domain holds one of a token's experts
    with probability 1 - (8/16)(7/15) = 23/30; one given GPU with 1 - (15/16)(14/15) = 1/8, so the token goes to
    7/8 of the domain's other GPUs, and as many again arrive to forward: 2 x 7/8 over NVLink."""
    got = dispatch_copies(_moe(16, 2), _group(16, 8), dispatcher)
    assert float(got.network[0]) == pytest.approx(23 / 30, rel=1e-12)
    assert float(got.nvlink[0]) == pytest.approx(2 * 7 / 8, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    log_domain=st.integers(0, 5),
    log_domains=st.integers(0, 4),
    log_per_gpu=st.integers(0, 3),
    top_k=st.integers(1, 16),
)
def test_flex_never_sends_more_over_the_network(
    log_domain: int, log_domains: int, log_per_gpu: int, top_k: int
) -> None:
    """Deduplication never adds network copies; with top_k = 1 there is nothing to deduplicate."""
    g, n, e = 2**log_domain, 2**log_domains, 2**log_per_gpu
    experts = g * n * e
    if top_k > experts:
        return
    model, group = _moe(experts, top_k), _group(g * n, g)
    flex = dispatch_copies(model, group, MoeDispatcher.DEEPEP)
    plain = dispatch_copies(model, group, MoeDispatcher.ALLTOALL)
    assert float(flex.network[0]) <= float(plain.network[0]) * (1 + 1e-12) + 1e-12
    assert 0.0 <= float(flex.network[0]) <= n - 1
    if top_k == 1:
        assert float(flex.network[0]) == pytest.approx(float(plain.network[0]), rel=1e-12, abs=1e-12)


def _b200_deepseek() -> tuple[ModelSpec, Layout, TrainingSpec]:
    model = get_preset("deepseek-v3").model.model_copy(update={"seq_length": 4096})
    layout = Layout(tp=1, pp=8, dp=32, ep=32, vp=2, recompute=Recompute.SELECTIVE, zero_stage=1)
    return model, layout, TrainingSpec(global_batch_size=4096, precision="fp8", grad_reduce_in_fp32=False)


def test_deepseek_v3_on_four_b200_nodes_sends_2_7_copies_for_6() -> None:
    """256 experts, 8 to a GPU, ep 32 over four 8-GPU nodes, top 8: the all-to-all sends 8 x 24/32 = 6 copies over
    the network; DeepEP one per other node holding any of the token's experts, 3 (1 - C(192, 8)/C(256, 8))."""
    model, layout, training = _b200_deepseek()
    c = Candidates.from_layouts([layout], model.num_layers, training.global_batch_size)
    hw = load_profiles()["hgx-b200"].hardware(training.precision)
    group = place(c, hw.nvlink_domain_gpus, hw.gpus_per_node).ep
    assert int(group.members_per_domain[0]) == 8
    miss = math.comb(192, 8) / math.comb(256, 8)
    assert float(dispatch_copies(model, group, MoeDispatcher.DEEPEP).network[0]) == pytest.approx(3 * (1 - miss))
    assert float(dispatch_copies(model, group, MoeDispatcher.ALLTOALL).network[0]) == 6.0


def _layer_seconds(
    model: ModelSpec, layout: Layout, training: TrainingSpec, layer: LayerTimes
) -> tuple[float, float, float]:
    c = Candidates.from_layouts([layout], model.num_layers, training.global_batch_size)
    hw = load_profiles()["hgx-b200"].hardware(training.precision)
    placement, num = place(c, hw.nvlink_domain_gpus, hw.gpus_per_node), training_numerics(training, hw)
    one = float(a2a_pass_s(model, c, placement, hw, training.runtime, num)[0])
    reruns = full_recompute_reruns(model, c, training.recompute_num_layers)
    got = ep_comm_per_layer_s(model, c, placement, hw, training.runtime, num, layer, reruns)
    return one, float(got.paired_s[0]), float(got.unpaired_extra_s[0])


def test_overlap_hides_each_pass_behind_its_slot() -> None:
    """Four passes a layer. Windows longer than a pass hide it but for OVERLAP_SLOWDOWN; empty windows hide nothing;
    without the overlap all four show and nothing is unpaired."""
    model, layout, training = _b200_deepseek()
    share = model.num_moe_layers / model.num_layers
    overlapped = training.model_copy(update={"runtime": RuntimeFeatures(moe_a2a_overlap=True)})
    zero = np.zeros(1)
    wide = LayerTimes(zero, zero, zero, np.ones(1), np.ones(1), np.ones(1))
    one, paired, unpaired = _layer_seconds(model, layout, overlapped, wide)
    assert paired == pytest.approx(share * 4 * OVERLAP_SLOWDOWN * one, rel=1e-12)
    assert paired + unpaired == pytest.approx(share * 4 * one, rel=1e-12)
    bare = LayerTimes(zero, zero, zero, zero, zero, zero)
    assert _layer_seconds(model, layout, overlapped, bare)[1:] == pytest.approx((share * 4 * one, 0.0))
    assert _layer_seconds(model, layout, training, wide)[1:] == pytest.approx((share * 4 * one, 0.0))


def test_dispatcher_and_overlap_shorten_the_step_where_the_network_carries_the_all_to_all() -> None:
    model, layout, training = _b200_deepseek()
    cluster = ClusterSpec(profile=load_profiles()["hgx-b200"], num_gpus=256)

    def step(**runtime: object) -> tuple[float, float]:
        t = training.model_copy(update={"runtime": RuntimeFeatures(**runtime)})
        e = estimate(model, cluster, t, layout)
        assert e.fits and not e.violations
        return e.step_time_s, e.time_breakdown_s["ep_comm"]

    plain, deepep, both = step(), step(moe_dispatcher="deepep"), step(moe_dispatcher="deepep", moe_a2a_overlap=True)
    assert plain[1] > deepep[1] > both[1] > 0
    assert plain[0] > deepep[0] > both[0]
    # The network carries 6 copies for DeepEP's 2.7, so the all-to-all shrinks by about that ratio.
    assert deepep[1] / plain[1] == pytest.approx(3 * (1 - math.comb(192, 8) / math.comb(256, 8)) / 6, rel=0.05)


def test_a_search_under_the_overlap_returns_only_what_megatron_runs_it_with() -> None:
    """Rule moe_a2a_overlap binds the search: every plan has ep > 1, no full recompute and vp > 1 where pp > 1."""
    model = get_preset("mixtral-8x7b").model.model_copy(update={"seq_length": 4096})
    training = TrainingSpec(global_batch_size=512, runtime=RuntimeFeatures(moe_a2a_overlap=True))
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=64)
    result = plan(model, cluster, training, {}, 20)
    assert result.plans
    for p in result.plans:
        x = p.layout
        assert x.ep > 1 and x.recompute is not Recompute.FULL and (x.pp == 1 or x.vp > 1), x
