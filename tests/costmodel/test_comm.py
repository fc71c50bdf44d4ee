"""Ring collective times, tier choice and overlap (hand-built hardware with round numbers)."""

from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel.comm import OVERLAP_SLOWDOWN, all_gather_s, all_reduce_s, exposed_s, link, network_bytes_per_s
from planner.costmodel.topology import GroupPlacement
from planner.profiles import Hardware

NVLINK_BW, NIC_BW = 100e9, 10e9
NVLINK_LAT, NET_LAT = 1e-6, 5e-6


def _hw(nvlink_latency_s: float = NVLINK_LAT, network_latency_s: float = NET_LAT) -> Hardware:
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
        gemm_peak_efficiency=0.5,
        gemm_overhead_s=0.0,
    )


def _group(size: int, per_domain: int) -> GroupPlacement:
    return GroupPlacement(
        size=np.array([size]), members_per_domain=np.array([per_domain]), crosses_network=np.array([per_domain < size])
    )


NBYTES = 1e9
ALL_REDUCE_ROWS = [
    # inside one NVLink domain: 2(n-1)/n bytes/bw + 2(n-1) lat
    (8, 8, 2 * 7 / 8 * NBYTES / NVLINK_BW + 2 * 7 * NVLINK_LAT),
    (2, 2, 2 * 1 / 2 * NBYTES / NVLINK_BW + 2 * 1 * NVLINK_LAT),
    # 8 ranks, 4 per domain: crosses the network, runs at the NIC rate and network latency
    (8, 4, 2 * 7 / 8 * NBYTES / NIC_BW + 2 * 7 * NET_LAT),
    (16, 1, 2 * 15 / 16 * NBYTES / NIC_BW + 2 * 15 * NET_LAT),
    (1, 1, 0.0),  # no peers, no traffic
]
IDS = ["n8-nvlink", "n2-nvlink", "n8-network", "n16-network", "n1"]


@pytest.mark.parametrize(("n", "per_domain", "expected"), ALL_REDUCE_ROWS, ids=IDS)
def test_all_reduce_s(n: int, per_domain: int, expected: float) -> None:
    got = all_reduce_s(np.array([NBYTES]), _group(n, per_domain), _hw())
    np.testing.assert_allclose(got, [expected], rtol=1e-12)


@pytest.mark.parametrize(("n", "per_domain", "expected"), ALL_REDUCE_ROWS, ids=IDS)
def test_all_gather_is_half_an_all_reduce(n: int, per_domain: int, expected: float) -> None:
    # (n-1)/n bytes/bw + (n-1) lat: exactly half of the ring all-reduce terms above.
    got = all_gather_s(np.array([NBYTES]), _group(n, per_domain), _hw())
    np.testing.assert_allclose(got, [expected / 2], rtol=1e-12)


def test_all_gather_zero_latency() -> None:
    # 4 ranks on NVLink, 4e8 bytes, no latency: 3/4 * 4e8 / 100e9 = 3e-3
    got = all_gather_s(np.array([4e8]), _group(4, 4), _hw(nvlink_latency_s=0.0))
    np.testing.assert_allclose(got, [3e-3], rtol=1e-12)


def test_network_rate_never_exceeds_nvlink() -> None:
    # A NIC share faster than NVLink (1000e9 > 100e9) is capped at the NVLink rate.
    hw = replace(_hw(), nic_bytes_per_s_per_gpu=1000e9)
    got = all_reduce_s(np.array([NBYTES]), _group(8, 4), hw)
    np.testing.assert_allclose(got, [2 * 7 / 8 * NBYTES / NVLINK_BW + 2 * 7 * NET_LAT], rtol=1e-12)


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


def test_link_prices_pipeline_sends_and_all_to_all_as_collectives() -> None:
    # A crossing pipeline group sends at the same slowest hop the ring collectives use (capped NIC share).
    hw = replace(_hw(), nic_bytes_per_s_per_gpu=1000e9)
    assert network_bytes_per_s(hw) == NVLINK_BW
    assert float(link(_group(2, 1), hw).bytes_per_s[0]) == NVLINK_BW
