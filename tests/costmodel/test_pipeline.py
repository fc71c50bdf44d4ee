"""Pipeline bubble and in-flight micro-batches (Narayanan 2021 Sec. 2.2; Korthikanti 2022 Sec. 4.2.3)."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.pipeline import (
    bubble_fraction,
    exposed_sends_s,
    in_flight_microbatches,
    p2p_messages_per_microbatch,
    stage_in_flight,
)
from planner.layout import Layout
from planner.rules.core import rank_chunks

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


def _replayed_peak(p: int, v: int, m: int, rank: int, chunk_layers: list[int]) -> int:
    """Layers a rank holds at its peak, replaying Megatron-Core's interleaved schedule one chunk pass at a time
    (`pipeline_parallel/schedules.py`): chunk forwards in groups of min(p, m) micro-batches per chunk, the warm-up
    2 (p - rank - 1) + (v - 1) p (all m v where m = p), then one forward before each backward, backwards in the
    reverse chunk order."""
    total, group = m * v, min(p, m)  # a step of fewer than p micro-batches runs them all per chunk in a row
    warm_up = total if m == p else min(2 * (p - rank - 1) + (v - 1) * p, total)

    def forward_chunk(k: int) -> int:
        return (k % (group * v)) // group

    held = peak = done_forward = done_backward = 0
    for _ in range(warm_up):
        held += chunk_layers[forward_chunk(done_forward)]
        done_forward += 1
        peak = max(peak, held)
    while done_forward < total:
        held += chunk_layers[forward_chunk(done_forward)]
        done_forward += 1
        peak = max(peak, held)
        held -= chunk_layers[v - 1 - forward_chunk(done_backward)]
        done_backward += 1
    return peak


@pytest.mark.parametrize("short_at_first", [True, False], ids=["short-first-chunk", "short-last-chunk"])
def test_an_end_rank_with_a_short_chunk_holds_what_the_schedule_replays(short_at_first: bool) -> None:
    """Rank 0 with its short chunk beside the embedding, or the last rank with it beside the loss
    (`rules.core.rank_chunks`), counted chunk by chunk, against a replay of the schedule; the other end rank and
    rank 1 with equal chunks. For DeepSeek-V3's pp 8 x vp 4 ([1, 2, 2, 2] on rank 0) 63 layers, where counting
    every chunk at the rank's average gave 68."""
    checked = 0
    for p in (3, 4, 8):
        for v in (2, 3, 4):
            for full in (1, 2, 3):
                for short in range(full):
                    for m in (1, p - 1, p, 2 * p, 3 * p, 5 * p):
                        end = short + full * (v - 1)
                        stages = [full * v] * p
                        stages[0 if short_at_first else -1] = end
                        layout = Layout(tp=1, pp=p, dp=1, vp=v, layers_per_stage=tuple(stages))
                        c = Candidates.from_layouts([layout], sum(stages), global_batch_size=m)
                        held = stage_in_flight(c)
                        rank = 0 if short_at_first else p - 1
                        chunks = rank_chunks(stages, v)[rank]  # equal where v divides the end rank's count
                        count = held.first if short_at_first else held.last
                        assert float(count[0]) * end == pytest.approx(_replayed_peak(p, v, m, rank, chunks))
                        other, other_rank = (held.last, p - 1) if short_at_first else (held.first, 0)
                        assert float(other[0]) * full * v == pytest.approx(
                            _replayed_peak(p, v, m, other_rank, [full] * v)
                        )
                        assert float(held.middle[0]) * full * v == pytest.approx(_replayed_peak(p, v, m, 1, [full] * v))
                        checked += 1
    assert checked == 3 * 3 * 6 * 6
    deepseek = Layout(tp=1, pp=8, dp=1, vp=4, layers_per_stage=(7, 8, 8, 8, 8, 8, 8, 6))
    c = Candidates.from_layouts([deepseek], 61, global_batch_size=64)
    assert float(stage_in_flight(c).first[0]) * 7 == pytest.approx(63.0)
