"""Pipeline bubble and in-flight micro-batches (Narayanan 2021 Sec. 2.2; Korthikanti 2022 Sec. 4.2.3)."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.pipeline import (
    bubble_fraction,
    exposed_sends_s,
    in_flight_microbatches,
    p2p_messages_per_microbatch,
)
from planner.layout import Layout

BUBBLE_ROWS = [
    (4, 1, 8, 3 / 8),  # (p-1)/(v m) = 3/8 = 0.375
    (4, 2, 8, 3 / 16),  # 3/16 = 0.1875 (paper: 18.8%)
    (1, 1, 8, 0.0),  # no pipeline, no bubble
    (8, 4, 32, 7 / 128),
]


@pytest.mark.parametrize(("p", "v", "m", "expected"), BUBBLE_ROWS, ids=["1f1b", "interleaved", "pp1", "p8-v4-m32"])
def test_bubble_fraction(p: int, v: int, m: int, expected: float) -> None:
    assert float(bubble_fraction(p, v, m)) == expected


def test_bubble_fraction_vectorised() -> None:
    got = bubble_fraction(np.array([4, 4]), np.array([1, 2]), np.array([8, 8]))
    np.testing.assert_array_equal(got, [0.375, 0.1875])


IN_FLIGHT_ROWS = [
    # (pp, vp, global batch with mbs=1, dp=1 -> m, expected)
    (4, 1, 8, 4.0),  # 1F1B: min(p, m) = min(4, 8)
    (4, 1, 2, 2.0),  # min(4, 2)
    (4, 2, 8, 4 * (1 + 3 / 8)),  # interleaved: p (1 + (p-1)/(p v)) = 5.5
    (4, 2, 4, 4.0),  # m = p: all 8 chunk forwards are in the warm-up, so the stage holds the step's 4
    (4, 4, 5, 4 + 3 / 4),  # p + (p-1)/v = 4.75 < m
    (1, 1, 8, 1.0),  # no pipeline
]


@pytest.mark.parametrize(
    ("pp", "vp", "gbs", "expected"), IN_FLIGHT_ROWS, ids=["p4-m8", "p4-m2", "p4-v2-m8", "p4-v2-m4", "p4-v4-m5", "pp1"]
)
def test_in_flight_microbatches(pp: int, vp: int, gbs: int, expected: float) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=pp, dp=1, vp=vp)], num_layers=8, global_batch_size=gbs)
    assert float(in_flight_microbatches(c)[0]) == expected


P2P_ROWS = [(1, 1, 0.0), (4, 1, 2.0), (4, 2, 4.0)]  # 2 sends (fwd + bwd) per model chunk when pp > 1


@pytest.mark.parametrize(("pp", "vp", "expected"), P2P_ROWS, ids=["pp1", "pp4", "pp4-v2"])
def test_p2p_messages_per_microbatch(pp: int, vp: int, expected: float) -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=pp, dp=1, vp=vp)], num_layers=8, global_batch_size=8)
    assert float(p2p_messages_per_microbatch(c.pp, c.vp)[0]) == expected


SENDS_ROWS = [
    # (pp, vp, one send ms, stage forward ms, overlap, exposed ms per micro-batch)
    (1, 1, 1.0, 10.0, True, 0.0),  # no pipeline, no sends
    (4, 1, 1.0, 10.0, True, 2.0),  # 1F1B: both sends block whatever the flag (Megatron forces overlap off)
    (4, 2, 1.0, 10.0, True, 0.0),  # interleaved: each 1 ms send hides behind a 5 ms chunk forward
    (4, 2, 7.0, 10.0, True, 4 * (7.0 - 5.0)),  # only what is longer than the chunk shows: 4 sends x 2 ms
    (4, 2, 1.0, 10.0, False, 4.0),  # overlap off: 4 blocking sends (Megatron-LM of 2021)
    (8, 4, 3.0, 8.0, True, 8 * (3.0 - 2.0)),
]


@pytest.mark.parametrize(
    ("pp", "vp", "message", "forward", "overlap", "expected"),
    SENDS_ROWS,
    ids=["pp1", "1f1b", "hidden", "partly-hidden", "off", "p8-v4"],
)
def test_exposed_sends(pp: int, vp: int, message: float, forward: float, overlap: bool, expected: float) -> None:
    got = exposed_sends_s(np.array([pp]), np.array([vp]), np.array([message]), np.array([forward]), overlap)
    assert float(got[0]) == pytest.approx(expected)


def test_exposed_sends_never_exceed_blocking_sends() -> None:
    rng = np.random.default_rng(7)
    pp, vp = rng.integers(1, 17, 500), rng.integers(1, 9, 500)
    message, forward = rng.exponential(1e-3, 500), rng.exponential(1e-2, 500)
    overlapped = exposed_sends_s(pp, vp, message, forward, True)
    blocking = exposed_sends_s(pp, vp, message, forward, False)
    assert np.all(overlapped >= 0) and np.all(overlapped <= blocking)
    np.testing.assert_array_equal(overlapped[vp == 1], blocking[vp == 1])
