"""Evaluated over several spaces: columns come back for exactly the candidates asked for, in that order."""

from __future__ import annotations

import numpy as np

from planner.constraints.space import build_space
from planner.costmodel.candidates import Candidates
from planner.presets import get_preset
from planner.profiles import load_profiles
from planner.search.evaluate import concatenate, evaluate
from planner.specs import TrainingSpec


def test_take_across_spaces_matches_the_materialised_columns() -> None:
    model = get_preset("megatron-1.7b").model
    training = TrainingSpec(global_batch_size=64)
    hw = load_profiles()["dgx-a100-40gb"].hardware(training.precision)
    spaces = [build_space(model, training, n, {}) for n in (8, 16)]
    ev = concatenate([evaluate(model, training, s, hw) for s in spaces])
    full = {f: np.concatenate([getattr(s.candidates, f) for s in spaces]) for f in Candidates.__slots__}
    assert len(ev) == len(full["tp"]) == sum(len(s) for s in spaces)
    index = np.random.default_rng(0).permutation(len(ev))[:500]
    taken = ev.take(index)
    for f in Candidates.__slots__:
        np.testing.assert_array_equal(getattr(taken, f), full[f][index], err_msg=f)
    mask = ev.num_gpus == 16
    np.testing.assert_array_equal(ev.take(mask).tp, full["tp"][mask])
    i = int(index[0])
    assert ev.layout(i, model.num_layers).tp == full["tp"][i]


def test_sequence_parallel_only_with_tensor_parallel() -> None:
    model = get_preset("megatron-1.7b").model
    space = build_space(model, TrainingSpec(global_batch_size=64), 8, {})
    c = space.candidates
    assert not (c.sequence_parallel & (c.tp == 1)).any()
    assert (c.sequence_parallel & (c.tp > 1)).any() and (~c.sequence_parallel & (c.tp == 1)).any()
    assert space.rejected["sequence_parallel_needs_tp"] == np.count_nonzero(~space.valid())


def test_locate_finds_each_candidates_row_and_mode_by_either_path() -> None:
    """A few candidates are located by row offsets, many by one pass over the pairs: both give the row-major
    (row, mode) order of `pairs`, including rows where sequence parallelism leaves gaps (tp = 1)."""
    model = get_preset("megatron-1.7b").model
    space = build_space(model, TrainingSpec(global_batch_size=64), 16, {})
    assert not space.pairs.all()  # tp = 1 rows take no sequence-parallel mode: gaps inside rows
    row, mode = np.nonzero(space.pairs)
    rng = np.random.default_rng(1)
    for size in (0, 1, 7, len(space) // 9, len(space) // 2, len(space)):
        index = rng.choice(len(space), size=size, replace=False)
        found = space.locate(index)
        np.testing.assert_array_equal(found[0], row[index])
        np.testing.assert_array_equal(found[1], mode[index])
    mask = rng.random(len(space)) < 0.01
    np.testing.assert_array_equal(space.locate(mask)[1], mode[mask])
    np.testing.assert_array_equal(space.locate(slice(3, 40))[0], row[3:40])
