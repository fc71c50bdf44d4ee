"""Group placement on NVLink domains vs the network (Megatron rank order: tp, cp, pp, dp)."""

import itertools

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.topology import place
from planner.estimate import Estimate, estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, Hardware, load_profiles
from planner.specs import TrainingSpec
from tests.costmodel.hardware import fabric_hardware

DGX, NVL72 = fabric_hardware(8, 8), fabric_hardware(72, 4)

PLACEMENT_ROWS = [
    # (hw, layout, some pp hop crosses the network, tp crosses, dp crosses)
    # DGX, tp=8 fills the domain: each of the 3 stage-to-stage hops leaves it; dp stride 32 > 8.
    (DGX, Layout(tp=8, pp=4, dp=2), True, False, True),
    # NVL72: the 4 stages at stride 8 span ranks 0..31 of one 72-GPU domain, dp stride 32: 72 // 32 = 2 = dp.
    (NVL72, Layout(tp=8, pp=4, dp=2), False, False, False),
    # DGX, tp=2 pp=4: a pipeline spans 2*4 = 8 ranks, one domain; dp stride 8 leaves it.
    (DGX, Layout(tp=2, pp=4, dp=4), False, False, True),
    # DGX, tp=4 pp=4: a pipeline spans 16 ranks, two domains: its middle hop crosses.
    (DGX, Layout(tp=4, pp=4, dp=1), True, False, False),
    # DGX, tp=16 is wider than the domain: the tp group itself crosses.
    (DGX, Layout(tp=16, pp=1, dp=1), False, True, False),
]
PLACEMENT_IDS = ["dgx-tp8-pp4", "nvl72-tp8-pp4", "dgx-tp2-pp4", "dgx-tp4-pp4", "dgx-tp16"]


@pytest.mark.parametrize(("hw", "layout", "hops", "tp_crosses", "dp_crosses"), PLACEMENT_ROWS, ids=PLACEMENT_IDS)
def test_placement(hw: Hardware, layout: Layout, hops: bool, tp_crosses: bool, dp_crosses: bool) -> None:
    p = place(
        Candidates.from_layouts([layout], num_layers=16, global_batch_size=64), hw.nvlink_domain_gpus, hw.gpus_per_node
    )
    assert bool(p.pp.crosses_network[0]) is hops
    assert bool(p.tp.crosses_network[0]) is tp_crosses
    assert bool(p.dp.crosses_network[0]) is dp_crosses


LLAMA70 = get_preset("llama3-70b").model


def _estimate(profile_id: str, layout: Layout, num_gpus: int, batch: int) -> Estimate:
    cluster = ClusterSpec(profile=load_profiles()[profile_id], num_gpus=num_gpus)
    return estimate(LLAMA70, cluster, TrainingSpec(global_batch_size=batch), layout)


def test_pp_hops_dgx_vs_nvl72() -> None:
    layout = Layout(tp=8, pp=4, dp=2)
    dgx, nvl = _estimate("dgx-h100", layout, 64, 64), _estimate("gb200-nvl72", layout, 64, 64)
    # 64 / 4 = 16 rank chains (tp * dp), 3 hops each = 48; on DGX H100 (domain 8) every hop leaves the node.
    assert dgx.network.pp_hops == nvl.network.pp_hops == 16 * 3
    assert dgx.network.pp_hops_over_network == 16 * 3
    assert nvl.network.pp_hops_over_network == 0
    # tp=8 stays on NVLink on both; all 64 / 2 = 32 dp groups cross on DGX (stride 32), none on NVL72.
    assert dgx.network.tp_groups_over_network == nvl.network.tp_groups_over_network == 0
    assert (dgx.network.dp_groups_over_network, nvl.network.dp_groups_over_network) == (32, 0)
    assert 0 < nvl.time_breakdown_s["pp_comm"] < dgx.time_breakdown_s["pp_comm"]


MISALIGNED = [
    # 96 GB200s are 24 trays, allocated as two 12-tray segments: domain blocks of 48 ranks. tp=8, pp=4, dp=3:
    # the second pipeline holds ranks 32..63, its stages 1 (40..47) and 2 (48..55) in different blocks, so
    # its 8 tp-rank chains each hop the network once; the first (0..31) and third (64..95) stay inside one.
    (Layout(tp=8, pp=4, dp=3), 96, "pp_hops_over_network", 8),
    # tp=16 on 144 GPUs (36 trays, two 18-tray segments of 72): 72 / 16 is not whole; the group of ranks
    # 64..79 straddles the two blocks.
    (Layout(tp=16, pp=1, dp=9), 144, "tp_groups_over_network", 1),
    # dp=3 at stride 32 from offsets 0..31: o + 64 is always in the second 48-rank block and o in the first,
    # so all 32 dp groups cross (in 72-rank blocks only 24 would).
    (Layout(tp=8, pp=4, dp=3), 96, "dp_groups_over_network", 32),
]


JOB_DOMAINS = [
    # (GPUs, GPUs per node, NVLink domain) -> GPUs per domain block of the job
    (64, 8, 8, 8),  # DGX: a node is the domain, whatever the job
    (8, 4, 72, 72),  # fits in one rack
    (72, 4, 72, 72),
    (256, 4, 72, 64),  # 64 trays: --segment 16
    (512, 4, 72, 64),  # 128 trays: 16
    (1152, 4, 72, 72),  # 288 trays: 18
    (96, 4, 72, 48),  # 24 trays: 12
    (76, 4, 72, 4),  # 19 trays, prime: one-tray segments
    (6, 4, 72, 72),  # a partial tray fits in the rack
    (78, 4, 72, 72),  # not whole trays: no segments to take, the domain as numbered
]


@pytest.mark.parametrize(("gpus", "per_node", "domain", "expected"), JOB_DOMAINS)
def test_job_domain_follows_the_allocation_segment(gpus: int, per_node: int, domain: int, expected: int) -> None:
    from planner.costmodel.topology import job_domain_gpus

    assert job_domain_gpus(gpus, per_node, domain) == expected


def test_llama405b_pipeline_on_256_gb200_stays_on_nvlink() -> None:
    # Megatron-Bridge's 405B GB200 layout: tp4 pp16 dp4, tp-cp-pp-dp order, so a pipeline is 64 consecutive
    # ranks: one 16-tray segment each. In 72-rank blocks 3 of the 4 pipelines would cross a rack boundary.
    from planner.costmodel.topology import count_crossings

    counts = count_crossings(tp=4, cp=1, pp=16, dp=4, ep=1, etp=4, nvlink_domain_gpus=72, gpus_per_node=4)
    assert (counts.pp_hops_over_network, counts.pp_hops) == (0, 15 * 4 * 4)
    assert counts.dp_groups_over_network == counts.dp_groups == 64
    p = place(Candidates.from_layouts([Layout(tp=4, pp=16, dp=4)], 128, 1536), 72, 4)
    assert not bool(p.pp.crosses_network[0]) and bool(p.dp.crosses_network[0])


@pytest.mark.parametrize(("layout", "gpus", "field", "expected"), MISALIGNED, ids=["pp-hops", "tp-groups", "dp-groups"])
def test_nvl72_groups_straddling_domains(layout: Layout, gpus: int, field: str, expected: int) -> None:
    assert getattr(_estimate("gb200-nvl72", layout, gpus, gpus).network, field) == expected


def test_dgx_tp4_pp4_counts_one_crossing_hop_per_chain() -> None:
    from planner.costmodel.topology import count_crossings

    # 16 ranks, 4 tp chains; stages 0,1 in domain 0 and 2,3 in domain 1: one of three hops crosses per chain.
    counts = count_crossings(tp=4, cp=1, pp=4, dp=1, ep=1, etp=4, nvlink_domain_gpus=8, gpus_per_node=8)
    assert (counts.pp_hops_over_network, counts.pp_hops) == (4, 12)


def test_misaligned_tp_group_is_priced_as_crossing() -> None:
    # On NVL72, tp=16 over 144 GPUs: one tp group straddles two domains, so TP traffic pays the network.
    p = place(Candidates.from_layouts([Layout(tp=16, pp=1, dp=9)], 16, 144), 72, 4)
    assert bool(p.tp.crosses_network[0])


def test_megatron_default_order_when_tp_pp_dp_mapping_is_refused() -> None:
    # Dense model with cp=2, pp=2: ep(1) != cp(2), so Megatron keeps tp-cp-dp-pp (pp outermost).
    # On 8-GPU domains, tp2 x cp2 x dp2 = 8 ranks share a node and every pipeline hop leaves it.
    layout = Layout(tp=2, cp=2, pp=2, dp=2)
    p = place(Candidates.from_layouts([layout], 16, 16), 8, 8)
    assert bool(p.pp.crosses_network[0]) and not bool(p.dp.crosses_network[0])
    from planner.costmodel.topology import count_crossings

    counts = count_crossings(tp=2, cp=2, pp=2, dp=2, ep=1, etp=2, nvlink_domain_gpus=8, gpus_per_node=8)
    assert (counts.pp_hops_over_network, counts.dp_groups_over_network) == (8, 0)
    # With cp = ep the tp-cp-pp-dp order applies: the pipeline stays inside the node, dp leaves it.
    same = count_crossings(tp=2, cp=1, pp=2, dp=4, ep=1, etp=2, nvlink_domain_gpus=8, gpus_per_node=8)
    assert (same.pp_hops_over_network, same.dp_groups_over_network) == (0, 4)


def _spanning_by_min_max(groups: np.ndarray) -> int:
    return int(np.sum(groups.min(axis=-1) != groups.max(axis=-1)))


def _expert_groups(tp: int, cp: int, pp: int, dp: int, ep: int, etp: int, pp_inside: bool) -> list[list[int]]:
    """Every expert-parallel group's ranks, written out from Megatron-Core's expert RankGenerator: etp
    fastest, then ep, then expert dp, over the tp x cp x dp ranks of a stage (pp outermost), or with the
    tp-cp-pp-dp order over the tp x cp ranks of one (dp, pp) block."""
    groups = []
    if pp_inside and pp > 1:
        for d, stage, t in itertools.product(range(dp), range(pp), range(etp)):
            groups.append([d * pp * tp * cp + stage * tp * cp + e * etp + t for e in range(ep)])
    else:
        edp = tp * cp * dp // (etp * ep)
        for stage, x, t in itertools.product(range(pp), range(edp), range(etp)):
            groups.append([stage * tp * cp * dp + x * etp * ep + e * etp + t for e in range(ep)])
    return groups


@pytest.mark.parametrize("domain", [4, 8, 72])
def test_crossing_counts_equal_a_min_max_count_of_every_group(domain: int) -> None:
    """count_crossings compares each group's first and last domain; a min/max over the group must agree, and
    its expert groups are the ones written out rank by rank (`_expert_groups`)."""
    from planner.costmodel.topology import count_crossings, tp_pp_dp_order

    sizes = itertools.product([1, 2, 4, 8], [1, 2], [1, 2, 3, 4], [1, 2, 6, 9], [1, 2, 4])
    for (tp, cp, pp, dp, ep), folded in itertools.product(sizes, (False, True)):
        etp = 1 if folded else tp
        if folded and tp == 1:
            continue
        ranks = np.arange(tp * cp * pp * dp) // domain
        pp_inside = bool(tp_pp_dp_order(pp, tp, cp, ep, etp))
        if pp_inside:
            grid = ranks.reshape(dp, pp, cp, tp)
        else:
            grid = ranks.reshape(pp, dp, cp, tp).transpose(1, 0, 2, 3)
        counts = count_crossings(tp, cp, pp, dp, ep, etp, domain, gpus_per_node=domain)
        assert counts.tp_groups_over_network == _spanning_by_min_max(grid)
        assert counts.cp_groups_over_network == _spanning_by_min_max(grid.transpose(0, 1, 3, 2))
        assert counts.dp_groups_over_network == _spanning_by_min_max(grid.transpose(1, 2, 3, 0))
        if ep > 1 and (tp * cp * dp) % (etp * ep) == 0:
            groups = _expert_groups(tp, cp, pp, dp, ep, etp, pp_inside)
            assert counts.ep_groups_over_network == sum(len(set(ranks[g].tolist())) > 1 for g in groups)
