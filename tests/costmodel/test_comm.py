"""Ring collective times, tier choice and overlap (hand-built hardware with round numbers)."""

from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.comm import (
    OVERLAP_SLOWDOWN,
    all_gather_s,
    all_reduce_s,
    exposed_s,
    exposed_tp_comm_s,
    link,
    network_bytes_per_s,
    nvls_all_reduce_s,
    ring_bytes_per_s,
    ring_latency_s,
    tp_collectives_s,
)
from planner.costmodel.recompute import full_recompute_reruns
from planner.costmodel.topology import GroupPlacement, place
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.presets import get_preset
from planner.profiles import Hardware
from planner.specs import Recompute, RuntimeFeatures, TrainingSpec

NVLINK_BW, NIC_BW = 100e9, 10e9
NVLINK_LAT, NET_LAT, BASE_LAT = 1e-6, 5e-6, 2e-6


def _hw(nvlink_latency_s: float = NVLINK_LAT, network_latency_s: float = NET_LAT, base: float = BASE_LAT) -> Hardware:
    return Hardware(
        peak_flop_per_s=100e12,
        hbm_bytes=80e9,
        hbm_bandwidth_bytes_per_s=1e12,
        gpus_per_node=8,
        nvlink_domain_gpus=8,
        nvlink_bytes_per_s=NVLINK_BW,
        nic_bytes_per_s_per_gpu=NIC_BW,
        nvlink_latency_s=nvlink_latency_s,
        network_latency_s=network_latency_s,
        collective_base_latency_s=base,
        net_overhead_s=0.0,
        gemm_peak_efficiency=0.5,
        gemm_overhead_s=0.0,
    )


def _group(size: int, per_domain: int) -> GroupPlacement:
    return GroupPlacement(
        size=np.array([size]), members_per_domain=np.array([per_domain]), crosses_network=np.array([per_domain < size])
    )


NBYTES = 1e9
ALL_REDUCE_ROWS = [
    # inside one NVLink domain: 2(n-1)/n bytes/nvlink + base + 2(n-1) NVLink steps
    (8, 8, 2 * 7 / 8 * NBYTES / NVLINK_BW + BASE_LAT + 2 * 7 * NVLINK_LAT),
    (2, 2, 2 * 1 / 2 * NBYTES / NVLINK_BW + BASE_LAT + 2 * 1 * NVLINK_LAT),
    # 8 ranks, 4 per domain (2 domains): the ring's network hops use 4 NIC shares (40e9 < NVLink);
    # 14 steps, 2(2-1) = 2 of them between domains
    (8, 4, 2 * 7 / 8 * NBYTES / (4 * NIC_BW) + BASE_LAT + 12 * NVLINK_LAT + 2 * NET_LAT),
    # one rank per domain: one NIC share, every step crosses
    (16, 1, 2 * 15 / 16 * NBYTES / NIC_BW + BASE_LAT + 30 * NET_LAT),
    (1, 1, 0.0),  # no peers, no traffic
]
IDS = ["n8-nvlink", "n2-nvlink", "n8-network-4-rails", "n16-network-1-rail", "n1"]


@pytest.mark.parametrize(("n", "per_domain", "expected"), ALL_REDUCE_ROWS, ids=IDS)
def test_all_reduce_s(n: int, per_domain: int, expected: float) -> None:
    got = all_reduce_s(np.array([NBYTES]), _group(n, per_domain), _hw())
    np.testing.assert_allclose(got, [expected], rtol=1e-12)


@pytest.mark.parametrize(("n", "per_domain", "expected"), ALL_REDUCE_ROWS, ids=IDS)
def test_all_gather_is_half_an_all_reduce_without_base_latency(n: int, per_domain: int, expected: float) -> None:
    # (n-1)/n bytes/bw + (n-1) steps (nNodes-1 of them between domains): half of the all-reduce's terms,
    # but the base latency is paid once by each.
    base = BASE_LAT if n > 1 else 0.0
    got = all_gather_s(np.array([NBYTES]), _group(n, per_domain), _hw())
    np.testing.assert_allclose(got, [(expected - base) / 2 + base], rtol=1e-12)


def test_all_gather_zero_latency() -> None:
    # 4 ranks on NVLink, 4e8 bytes, no latency: 3/4 * 4e8 / 100e9 = 3e-3
    got = all_gather_s(np.array([4e8]), _group(4, 4), _hw(nvlink_latency_s=0.0, base=0.0))
    np.testing.assert_allclose(got, [3e-3], rtol=1e-12)


def test_separate_collectives_each_pay_the_latency_not_the_bytes() -> None:
    # 4 ranks on NVLink, 4e8 bytes in 10 calls: 3e-3 s of bytes + 10 x (2 us base + 3 x 1 us).
    got = all_gather_s(np.array([4e8]), _group(4, 4), _hw(), 10.0)
    np.testing.assert_allclose(got, [3e-3 + 10 * (BASE_LAT + 3 * NVLINK_LAT)], rtol=1e-12)


def test_ring_latency_counts_inter_domain_steps_as_nccl_does() -> None:
    # 16 ranks, 8 per domain (2 domains). All-reduce: 30 steps, 2(2-1) = 2 network; all-gather: 15, 1.
    group = _group(16, 8)
    assert float(ring_latency_s(group, _hw(), 2)[0]) == pytest.approx(BASE_LAT + 28 * NVLINK_LAT + 2 * NET_LAT)
    assert float(ring_latency_s(group, _hw(), 1)[0]) == pytest.approx(BASE_LAT + 14 * NVLINK_LAT + 1 * NET_LAT)


def test_multi_domain_ring_steps_pay_the_network_post_overhead() -> None:
    # NCCL: intraLat = max(intraLat, 3 x netOverhead) once the ring leaves the node; 3 x 2 us > 1 us.
    hw = replace(_hw(), net_overhead_s=2e-6)
    assert float(ring_latency_s(_group(16, 8), hw, 1)[0]) == pytest.approx(BASE_LAT + 14 * 6e-6 + NET_LAT)
    assert float(ring_latency_s(_group(8, 8), hw, 1)[0]) == pytest.approx(BASE_LAT + 7 * NVLINK_LAT)


RAIL_ROWS = [
    # (ranks, members per domain, one rank's NIC share, expected ring rate)
    (16, 8, NIC_BW, 8 * NIC_BW),  # TP 16 over two 8-GPU nodes: 8 rails
    (16, 8, 20e9, NVLINK_BW),  # 8 x 20e9 would exceed NVLink: capped
    (64, 2, NIC_BW, 2 * NIC_BW),  # two members per domain: two rails
    (64, 1, NIC_BW, NIC_BW),  # one member per domain: its own NIC share
]


@pytest.mark.parametrize(("n", "per_domain", "share", "expected"), RAIL_ROWS, ids=["k8", "k8-capped", "k2", "k1"])
def test_ring_runs_over_the_rails_of_its_members(n: int, per_domain: int, share: float, expected: float) -> None:
    hw = replace(_hw(), nic_bytes_per_s_per_gpu=share)
    assert float(ring_bytes_per_s(_group(n, per_domain), hw)[0]) == pytest.approx(expected, rel=1e-12)


def test_ring_without_rails_runs_at_one_nic_share() -> None:
    assert float(ring_bytes_per_s(_group(16, 8), _hw(), rails=False)[0]) == NIC_BW
    assert float(ring_bytes_per_s(_group(8, 8), _hw(), rails=False)[0]) == NVLINK_BW  # inside a domain: NVLink


def test_tp16_over_two_nodes_is_eight_times_faster_with_rails() -> None:
    # Bandwidth-bound (no latency): the whole difference is 8 NIC shares against one.
    hw = _hw(nvlink_latency_s=0.0, network_latency_s=0.0, base=0.0)
    with_rails = all_reduce_s(np.array([NBYTES]), _group(16, 8), hw)
    one_nic = all_reduce_s(np.array([NBYTES]), _group(16, 8), hw, rails=False)
    np.testing.assert_allclose(one_nic / with_rails, [8.0], rtol=1e-12)


def test_network_rate_never_exceeds_nvlink() -> None:
    # A NIC share faster than NVLink (1000e9 > 100e9) is capped at the NVLink rate.
    hw = replace(_hw(), nic_bytes_per_s_per_gpu=1000e9)
    got = all_reduce_s(np.array([NBYTES]), _group(8, 4), hw)
    np.testing.assert_allclose(
        got, [2 * 7 / 8 * NBYTES / NVLINK_BW + BASE_LAT + 12 * NVLINK_LAT + 2 * NET_LAT], rtol=1e-12
    )


EXPOSED_ROWS = [
    (1.0, 0.4, (1.0 - 0.4) + 0.15 * 0.4),  # what does not fit is exposed; the hidden part slows compute 15%
    (0.2, 1.0, 0.15 * 0.2),  # fully hidden
    (0.5, 0.0, 0.5),  # no window: all exposed
    (0.0, 1.0, 0.0),
]


@pytest.mark.parametrize(("comm", "window", "expected"), EXPOSED_ROWS, ids=["partial", "hidden", "no-window", "none"])
def test_exposed_s(comm: float, window: float, expected: float) -> None:
    assert OVERLAP_SLOWDOWN == 0.15
    np.testing.assert_allclose(exposed_s(np.array([comm]), window), [expected], rtol=1e-12)


def test_link_is_nvlink_inside_a_domain_and_the_nic_share_across() -> None:
    inside, across = link(_group(8, 8), _hw()), link(_group(8, 4), _hw())
    assert (float(inside.bytes_per_s[0]), float(inside.latency_s[0])) == (NVLINK_BW, NVLINK_LAT)
    assert (float(across.bytes_per_s[0]), float(across.latency_s[0])) == (NIC_BW, NET_LAT)


def test_point_to_point_hops_use_one_nic_share_capped_by_nvlink() -> None:
    # A pipeline send leaves through its own rank's NIC share, however many group members share the node.
    assert float(link(_group(16, 8), _hw()).bytes_per_s[0]) == NIC_BW
    hw = replace(_hw(), nic_bytes_per_s_per_gpu=1000e9)
    assert network_bytes_per_s(hw) == NVLINK_BW
    assert float(link(_group(2, 1), hw).bytes_per_s[0]) == NVLINK_BW


@pytest.mark.parametrize(
    ("overlap", "sp", "dgrad", "expected"),
    [
        (True, True, True, 0.15 * 0.2),  # userbuffers: hidden behind the GEMMs, slowing them by OVERLAP_SLOWDOWN
        # without userbuffers (or without SP, which Megatron-LM requires for them) the column-parallel dgrad
        # collectives (0.05 of the 0.2) still run beside the wgrad GEMMs (TE, and Megatron-LM since 2021-09)
        (True, False, True, 0.2 - 0.05 + 0.15 * 0.05),
        (False, True, True, 0.2 - 0.05 + 0.15 * 0.05),
        (False, True, False, 0.2),  # Megatron-LM of April 2021: every collective paid
    ],
    ids=["overlap-sp", "overlap-no-sp", "off-async-dgrad", "off-2021"],
)
def test_tp_comm_overlap_needs_sequence_parallelism(overlap: bool, sp: bool, dgrad: bool, expected: float) -> None:
    c = Candidates.from_layouts([Layout(tp=8, pp=1, dp=1, sequence_parallel=sp)], num_layers=4, global_batch_size=8)
    rt = RuntimeFeatures(tp_comm_overlap=overlap, overlap_dgrad_comm=dgrad)
    got = exposed_tp_comm_s(np.array([0.2]), np.array([0.05]), np.array([1.0]), np.array([1.0]), c, rt, False)
    np.testing.assert_allclose(got, [expected], rtol=1e-12)


def test_userbuffers_stay_inside_one_nvlink_domain() -> None:
    """A TP group that crosses the network overlaps only its dgrad collectives, as without userbuffers."""
    c = Candidates.from_layouts([Layout(tp=16, pp=1, dp=1, sequence_parallel=True)], num_layers=4, global_batch_size=8)
    rt = RuntimeFeatures(tp_comm_overlap=True)
    args = (np.array([0.2]), np.array([0.05]), np.array([1.0]), np.array([1.0]), c, rt)
    np.testing.assert_allclose(exposed_tp_comm_s(*args, np.array([False])), [0.15 * 0.2], rtol=1e-12)
    np.testing.assert_allclose(exposed_tp_comm_s(*args, np.array([True])), [0.2 - 0.05 + 0.15 * 0.05], rtol=1e-12)


def test_dgrad_collectives_longer_than_the_wgrad_window_stay_exposed_in_part() -> None:
    c = Candidates.from_layouts([Layout(tp=4, pp=1, dp=1, sequence_parallel=True)], num_layers=4, global_batch_size=8)
    rt = RuntimeFeatures(tp_comm_overlap=False)
    got = exposed_tp_comm_s(np.array([0.2]), np.array([0.1]), np.array([1.0]), np.array([0.04]), c, rt, False)
    # 0.1 paid outright; of the 0.1 of dgrad collectives 0.04 hides (at the 15% slowdown) and 0.06 is exposed
    np.testing.assert_allclose(got, [0.1 + 0.06 + 0.15 * 0.04], rtol=1e-12)


@pytest.mark.parametrize(("sp", "share"), [(True, 2 / 8), (False, 2 / 4)])
def test_dgrad_collectives_are_the_column_parallel_backward_share(sp: bool, share: float) -> None:
    """Of a layer's 8 ring calls under sequence parallelism (AG + RS per forward and backward half of both
    sublayers) the 2 backward reduce-scatters are the dgrad ones; without it 2 of the 4 all-reduces; full
    recompute adds 2 forward collectives (6 AR-equivalents), not dgrad ones; SP's extra gathers are apart."""
    model = get_preset("gpt3-175b").model
    training = TrainingSpec(global_batch_size=64)
    hw = _hw()
    for recompute, count in ((Recompute.NONE, 4), (Recompute.FULL, 6)):
        layout = Layout(tp=8, pp=1, dp=1, recompute=recompute, sequence_parallel=sp)
        c = Candidates.from_layouts([layout], model.num_layers, 64)
        placement = place(c, 8, 8)
        reruns = full_recompute_reruns(model, c, None)
        tp = tp_collectives_s(model, c, placement, hw, training.runtime, training_numerics(training, hw), reruns)
        np.testing.assert_allclose(tp.dgrad_s, share * 4 / count * tp.total_s, rtol=1e-12)
        np.testing.assert_allclose(tp.sp_gather_s, tp.dgrad_s if sp else 0.0, rtol=1e-12)


def test_nvls_all_reduce_by_hand_and_chosen_when_faster() -> None:
    # NVLS at efficiency 0.85: (1 + 1/8) bytes / (0.85 x 100e9) + 25 us, against the ring's
    # 1.75 bytes / 100e9 + 2 + 14 us: 13.26 ms < 17.52 ms, so the all-reduce is the NVLS one.
    hw = replace(_hw(), nvls_efficiency=0.85)
    nvls = (1 + 1 / 8) * NBYTES / (0.85 * NVLINK_BW) + 25e-6
    ring = 2 * 7 / 8 * NBYTES / NVLINK_BW + BASE_LAT + 14 * NVLINK_LAT
    np.testing.assert_allclose(nvls_all_reduce_s(np.array([NBYTES]), _group(8, 8), hw), [nvls], rtol=1e-12)
    np.testing.assert_allclose(all_reduce_s(np.array([NBYTES]), _group(8, 8), hw), [nvls], rtol=1e-12)
    # Without NVLS in the profile the same call is the ring.
    np.testing.assert_allclose(all_reduce_s(np.array([NBYTES]), _group(8, 8), _hw()), [ring], rtol=1e-12)


@pytest.mark.parametrize(("n", "per_domain"), [(2, 2), (16, 8)])
def test_nvls_not_used_for_pairs_or_across_the_network(n: int, per_domain: int) -> None:
    # Two ranks: NVLS moves 1.5 bytes against the ring's 1, never faster (nccl issue 1455: same busbw
    # up to 4 GPUs); across domains NCCL's NVLS needs CollNet, so the ring runs.
    hw = replace(_hw(), nvls_efficiency=0.85)
    assert np.isinf(nvls_all_reduce_s(np.array([NBYTES]), _group(n, per_domain), hw)[0])
    np.testing.assert_allclose(
        all_reduce_s(np.array([NBYTES]), _group(n, per_domain), hw),
        all_reduce_s(np.array([NBYTES]), _group(n, per_domain), _hw()),
        rtol=1e-12,
    )


def test_nvls_matches_published_h100_algbw() -> None:
    # DGX H100 profile: 450 GB/s x 0.80 NVLink efficiency x 0.85 NVLS / 1.125 = 272 GB/s algbw on 8 GPUs;
    # measured 273 (github.com/NVIDIA/nccl/issues/1455), within 1%.
    from planner.profiles import load_profiles
    from planner.specs import Precision

    hw = load_profiles()["dgx-h100"].hardware(Precision.BF16)
    nbytes = 4 * 2**30
    algbw = nbytes / nvls_all_reduce_s(np.array([float(nbytes)]), _group(8, 8), hw)[0]
    assert abs(algbw / 273e9 - 1) < 0.01


def test_block_recompute_reruns_the_collectives_of_its_layers_only() -> None:
    """Full recompute of 24 of GPT-3 175B's 96 layers (one stage, block recompute) adds a quarter of a forward's
    TP collectives to the average layer: 2.25 passes, against 3 for every layer and 2 without recompute."""
    model = get_preset("gpt3-175b").model
    training = TrainingSpec(global_batch_size=64)
    hw = _hw()
    num = training_numerics(training, hw)

    def total(recompute: Recompute, block: int | None) -> float:
        layout = Layout(tp=8, pp=1, dp=1, recompute=recompute, sequence_parallel=True)
        c = Candidates.from_layouts([layout], model.num_layers, 64)
        reruns = full_recompute_reruns(model, c, block)
        return float(tp_collectives_s(model, c, place(c, 8, 8), hw, training.runtime, num, reruns).total_s[0])

    none, every, quarter = total(Recompute.NONE, None), total(Recompute.FULL, None), total(Recompute.FULL, 24)
    assert every == pytest.approx(none * 3 / 2, rel=1e-12)
    assert quarter == pytest.approx(none * 2.25 / 2, rel=1e-12)


@pytest.mark.parametrize(
    ("precision", "recipe", "gathered"),
    [("bf16", None, 2.0), ("fp8", None, 1.0), ("fp8", "tensorwise", 1.0), ("nvfp4", None, 0.5625)],
)
def test_sequence_parallel_gathers_move_the_quantized_gemm_input(
    precision: str, recipe: str | None, gathered: float
) -> None:
    """GPT-3 175B at tp 8, micro-batch 1, sequence parallel: 2048 x 12288 elements per block and pass. Each
    block's forward gathers its input at the GEMM input's bytes (1 under per-tensor FP8, 0.5625 under NVFP4:
    Transformer Engine quantizes, then gathers) and reduce-scatters its output in bf16; its backward gathers the
    output gradient likewise and reduce-scatters the input gradient in bf16 (the dgrad collective); the wgrad
    re-gather moves the quantized input. Two blocks, one forward and one backward pass."""
    model = get_preset("gpt3-175b").model
    training = TrainingSpec.model_validate(
        {"global_batch_size": 64, "precision": precision, **({"fp8_recipe": recipe} if recipe else {})}
    )
    hw = _hw()
    c = Candidates.from_layouts([Layout(tp=8, pp=1, dp=1, sequence_parallel=True)], model.num_layers, 64)
    num = training_numerics(training, hw)
    assert num.gathered_gemm_input_bytes == gathered
    tp = tp_collectives_s(model, c, place(c, 8, 8), hw, training.runtime, num, full_recompute_reruns(model, c, None))
    elements = 2048 * 12288

    def ring(nbytes: float) -> float:  # (n-1)/n of the bytes over NVLink, base latency and 7 NVLink steps
        return 7 / 8 * nbytes / NVLINK_BW + BASE_LAT + 7 * NVLINK_LAT

    gather, scatter = ring(gathered * elements), ring(2 * elements)
    np.testing.assert_allclose(tp.total_s, [2 * 2 * (gather + scatter)], rtol=1e-12)
    np.testing.assert_allclose(tp.dgrad_s, [2 * scatter], rtol=1e-12)
    np.testing.assert_allclose(tp.sp_gather_s, [2 * gather], rtol=1e-12)
