"""The step's single functions on hand-computed cases: bubble, in-flight micro-batches, ZeRO divisor, assembly."""

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.params import ParamCounts, StageKind, stage_kinds
from planner.costmodel.pipeline import (
    InFlight,
    bubble_s,
    stage_in_flight,
    stage_in_flight_microbatches,
)
from planner.costmodel.shared import LayerSeconds
from planner.costmodel.step import TimeBreakdown, assemble_step, updated_params
from planner.costmodel.zero import ModelState, held_params, shard_group_sizes, sharded_params
from planner.layout import Layout


def _a(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _i(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


@pytest.mark.parametrize(
    ("pp", "vp", "expected"),
    [(4, 1, 3.0), (4, 2, 1.5), (1, 1, 0.0), (8, 4, 1.75)],
    ids=["p4", "p4-v2", "pp1", "p8-v4"],
)
def test_bubble_s(pp: int, vp: int, expected: float) -> None:
    """(p - 1)/v stage times: with a 1 s stage, 3 s at p = 4; interleaving by 2 halves it."""
    assert float(bubble_s(_i(pp), _i(vp), _a(1.0))[0]) == expected


def test_bubble_s_broadcasts() -> None:
    got = bubble_s(_i(4, 8)[:, None], _i(1, 2)[None, :], _a(2.0))
    np.testing.assert_array_equal(got, [[6.0, 3.0], [14.0, 7.0]])


IN_FLIGHT = InFlight(first=_a(5.5), middle=_a(5.0), last=_a(2.5))


@pytest.mark.parametrize(
    ("last", "middle", "expected"),
    [(True, False, 2.5), (False, True, 5.0), (False, False, 5.5)],
    ids=["last", "middle", "first"],
)
def test_stage_in_flight_selects_the_stage_kinds_count(last: bool, middle: bool, expected: float) -> None:
    assert float(stage_in_flight_microbatches(IN_FLIGHT, np.asarray([last]), np.asarray([middle]))[0]) == expected


# Megatron-Core warms rank r up with p - r - 1 forwards (1F1B) or 2 (p - r - 1) + (v - 1) p chunk forwards
# (interleaved), each chunk 1/v of the stage, and runs one more before the first backward: rank 0 holds p (1F1B) or
# (v p + p - 1)/v micro-batches, rank 1 one (1F1B) or 2/v (interleaved) fewer, the last rank one (1F1B) or
# ((v - 1) p + 1)/v; at most the step's m v chunk forwards, and all of them where m = p.
STAGE_ROWS = [
    # (pp, vp, m, rank 0, rank 1, last rank)
    (4, 1, 8, 4.0, 3.0, 1.0),
    (16, 4, 384, (4 * 16 + 15) / 4, (4 * 16 + 13) / 4, (3 * 16 + 1) / 4),
    (8, 2, 64, (2 * 8 + 7) / 2, (2 * 8 + 5) / 2, (8 + 1) / 2),
    (8, 1, 4, 4.0, 4.0, 1.0),
    (16, 2, 16, 16.0, 16.0, 16.0),  # m = p: every chunk forward is in every rank's warm-up, the step's 32
    (4, 2, 5, 5.0, 4.5, 2.5),  # rank 0 capped at m = 5 (uncapped 5.5); rank 1 warms up 8 chunks, 9 in flight
]


@pytest.mark.parametrize(
    ("pp", "vp", "m", "rank0", "rank1", "last"),
    STAGE_ROWS,
    ids=["1f1b", "v4", "v2", "m-below-p", "v2-m-is-p", "v2-m5"],
)
def test_each_stage_holds_what_megatron_warms_up(
    pp: int, vp: int, m: int, rank0: float, rank1: float, last: float
) -> None:
    layers = 8 * pp * vp
    c = Candidates.from_layouts([Layout(tp=1, pp=pp, dp=1, vp=vp)], layers, global_batch_size=m)
    held = stage_in_flight(c)
    assert float(held.first[0]) == pytest.approx(rank0, rel=1e-12)
    assert float(held.middle[0]) == pytest.approx(rank1, rel=1e-12)
    assert float(held.last[0]) == pytest.approx(last, rel=1e-12)


def test_stage_in_flight_broadcasts() -> None:
    held = InFlight(first=_a(4.0, 2.0)[:, None], middle=_a(3.0, 2.0)[:, None], last=_a(1.0, 1.0)[:, None])
    got = stage_in_flight_microbatches(held, np.asarray([[True, False]]), np.asarray([[False, False]]))
    np.testing.assert_array_equal(got, [[1.0, 4.0], [1.0, 2.0]])


@pytest.mark.parametrize(
    ("dp", "cp", "tp", "ep", "etp", "expected"),
    [
        (4, 2, 1, 4, 1, (8, 2)),
        (4, 1, 1, 1, 1, (4, 4)),
        (2, 1, 1, 8, 1, (2, 1)),
        (8, 1, 1, 8, 1, (8, 1)),
        (4, 2, 4, 4, 4, (8, 2)),
        (2, 1, 4, 8, 1, (2, 1)),
        (16, 1, 2, 32, 1, (16, 1)),
        (64, 1, 2, 64, 1, (64, 2)),
    ],
    ids=["dp4-cp2-ep4", "no-ep", "ep-beyond-dp", "ep-equals-dp", "etp-is-tp", "ep-folds-tp", "qwen3-235b", "dsv3-h100"],
)
def test_shard_group_sizes(dp: int, cp: int, tp: int, ep: int, etp: int, expected: tuple[int, int]) -> None:
    """Experts shard over tp cp dp / (etp ep) ranks (Megatron-Core expert_data_parallel_size); e.g. Bridge's
    DeepSeek-V3 H100 recipe, tp 2 etp 1 ep 64 over 128 ranks a stage: 2 ranks hold each expert."""
    dense, expert = shard_group_sizes(_i(dp), _i(cp), _i(tp), _i(ep), _i(etp))
    assert (int(dense[0]), int(expert[0])) == expected


# 800 dense + 80 expert parameters on dp 4 x cp 2 with ep 4: dense over 8 ranks, experts over 2.
# Sharded: 800/8 + 80/2 = 140; whole: 880.
HELD = {
    ModelState.OPTIMIZER: [880.0, 140.0, 140.0, 140.0],
    ModelState.GRADIENTS: [880.0, 880.0, 140.0, 140.0],
    ModelState.PARAMETERS: [880.0, 880.0, 880.0, 140.0],
}


@pytest.mark.parametrize("state", list(ModelState), ids=[s.name for s in ModelState])
def test_held_params_by_zero_stage(state: ModelState) -> None:
    """ZeRO-1 shards the optimizer states, ZeRO-2 also the gradients, ZeRO-3 also the parameters."""
    params = ParamCounts(_a(800.0), _a(80.0))
    c = Candidates.from_layouts([Layout(tp=1, pp=1, dp=4, cp=2, ep=4)], num_layers=4, global_batch_size=64)
    sharded = sharded_params(params, c)
    assert float(sharded[0]) == 140.0
    got = held_params(_i(0, 1, 2, 3), state, params.total, sharded)
    np.testing.assert_array_equal(got, HELD[state])


def test_updated_params_is_the_optimizer_shard() -> None:
    layouts = [Layout(tp=1, pp=1, dp=4, cp=2, ep=4, zero_stage=z) for z in (0, 1, 2, 3)]
    c = Candidates.from_layouts(layouts, num_layers=4, global_batch_size=64)
    got = updated_params(c, ParamCounts(np.full(4, 800.0), np.full(4, 80.0)))
    np.testing.assert_array_equal(got, HELD[ModelState.OPTIMIZER])


def _seconds(
    compute: float, recompute: float, tp: float, cp: float, ep: float, offload: float = 0.0, unpaired: float = 0.0
) -> LayerSeconds:
    return LayerSeconds(
        _a(compute),
        _a(recompute),
        _a(tp),
        _a(cp),
        _a(ep),
        _a(offload),
        _a(compute / 3),
        _a(2 * compute / 3),
        _a(unpaired),
    )


def test_assemble_step_by_hand() -> None:
    """p = 4, m = 8, 1 s per micro-batch and no sends: the bubble is 3 s, 37.5 % of the 8 s of work."""
    step = assemble_step(_a(8.0), _i(4), _i(1), _seconds(1.0, 0.0, 0.0, 0.0, 0.0), _a(0.0), _a(1.0), _a(0.0), _a(0.0))
    assert float(step.bubble[0]) == 3.0
    assert float(step.bubble[0] / step.compute[0]) == 0.375
    assert float(step.total[0]) == 11.0


def test_assemble_step_every_kind() -> None:
    m, sends, average = 8.0, 0.01, 1.5
    step = assemble_step(
        _a(m), _i(4), _i(2), _seconds(1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125), _a(sends), _a(average), _a(0.3), _a(0.2)
    )
    expected = {
        "compute": 8.0,
        "recompute": 4.0,
        "bubble": 3 / 2 * (average + sends),
        "tp_comm": 2.0,
        "pp_comm": m * sends,
        "dp_comm": 0.3,
        "cp_comm": 1.0,
        "ep_comm": 0.5,
        "offload": 0.25,
        "optimizer": 0.2,
    }
    got = {k: float(v[0]) for k, v in step.as_dict().items()}
    assert list(got) == list(expected)  # the API's key order
    assert got == pytest.approx(expected, rel=1e-15)
    assert float(step.total[0]) == pytest.approx(sum(expected.values()), rel=1e-15)


def test_unpaired_microbatches_pay_their_all_to_alls_whole() -> None:
    """p = 4, v = 2, m = 8 under the MoE all-to-all overlap: rank 0 warms up with 2 (p - 1) + (v - 1) p + 1 = 11
    chunk forwards, 5.5 micro-batches, which pay 0.25 s more each: 5.5 x 0.25 = 1.375 s on top of 8 x 1 s."""
    step = assemble_step(
        _a(8.0), _i(4), _i(2), _seconds(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25), _a(0.0), _a(1.0), _a(0.0), _a(0.0)
    )
    assert float(step.ep_comm[0]) == 5.5 * 0.25
    assert float(step.total[0]) == 8.0 + 1.375 + 3 / 2
    # Without a pipeline the first forward and the last backward run alone: one micro-batch; capped at m.
    alone = assemble_step(_a(8.0), _i(1), _i(1), _seconds(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25), *[_a(0.0)] * 4)
    assert float(alone.ep_comm[0]) == 0.25
    few = assemble_step(_a(2.0), _i(4), _i(2), _seconds(1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25), *[_a(0.0)] * 4)
    assert float(few.ep_comm[0]) == 2 * 0.25


def test_time_breakdown_broadcasts_to_a_grid() -> None:
    """A search's grid: pipelined parts per (row, 1, pair), once-per-step parts per (row, ZeRO stage, pair)."""
    once = np.arange(8.0).reshape(1, 4, 2)
    step = assemble_step(
        _a(2.0)[:, None, None],
        _i(2)[:, None, None],
        _i(1)[:, None, None],
        _seconds(1.0, 0.0, 0.0, 0.0, 0.0).map(lambda a: np.broadcast_to(a, (1, 1, 2))),
        np.zeros((1, 1, 2)),
        np.ones((1, 1, 2)),
        once,
        np.zeros((1, 4, 2)),
    )
    assert isinstance(step, TimeBreakdown)
    np.testing.assert_array_equal(step.total, 3.0 + once)


def test_stage_kinds_are_indexed_by_stage_kind() -> None:
    c = Candidates.from_layouts([Layout(tp=1, pp=2, dp=1), Layout(tp=1, pp=4, dp=1)], 8, 8)
    stages = stage_kinds(c)
    assert [int(k) for k in StageKind] == [0, 1, 2]
    np.testing.assert_array_equal(stages[StageKind.FIRST].embedding, [True, True])
    np.testing.assert_array_equal(stages[StageKind.LAST].output, [True, True])
    np.testing.assert_array_equal(stages[StageKind.MIDDLE].layers, [0, 2])  # no middle stage at pp = 2
