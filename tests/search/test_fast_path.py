"""The search's table path agrees with the cost model's reference path on every candidate."""

from __future__ import annotations

import numpy as np
import pytest

from planner.constraints.space import KEY_MODES, build_space
from planner.costmodel.data_parallel import DpCollectives
from planner.costmodel.memory import StageTerms
from planner.costmodel.shared import LayerQuantities, LayerSeconds, layer_quantities
from planner.costmodel.step import estimate_steps
from planner.estimate import estimate
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.search.constraints import parse_constraints
from planner.search.evaluate import evaluate
from planner.specs import RuntimeFeatures, TrainingSpec
from planner.units import GIB

CASES = [
    ("gpt3-175b", "dgx-a100-80gb", 64, 128, RuntimeFeatures()),
    ("llama3-70b", "gb200-nvl72", 144, 144, RuntimeFeatures(overlap_grad_reduce=False, tp_comm_overlap=True)),
    ("mixtral-8x7b", "dgx-h100", 32, 64, RuntimeFeatures(flash_attention=False, overlap_param_gather=False)),
    ("megatron-1.7b", "dgx-a100-40gb", 16, 64, RuntimeFeatures()),
]


@pytest.mark.parametrize(("preset", "profile", "gpus", "batch", "runtime"), CASES, ids=[c[0] for c in CASES])
def test_tables_match_the_reference(preset: str, profile: str, gpus: int, batch: int, runtime: RuntimeFeatures) -> None:
    model = get_preset(preset).model
    training = TrainingSpec(global_batch_size=batch, runtime=runtime)
    hw = load_profiles()[profile].hardware(training.precision)
    space = build_space(model, training, gpus, {})
    q = layer_quantities(model, training, space.layer_candidates, hw)
    ev = evaluate(model, training, space, hw)
    reference = estimate_steps(model, training, space.candidates, hw, q.take(space.layer_index))
    fits = reference.memory.peak <= hw.hbm_bytes
    assert len(ev) > 100 and fits.any() and not fits.all()
    np.testing.assert_allclose(ev.peak_bytes, reference.memory.peak, rtol=1e-12)
    np.testing.assert_allclose(ev.step_time_s[fits], reference.step_time_s[fits], rtol=1e-12)
    assert np.isinf(ev.step_time_s[~fits]).all()


@pytest.mark.parametrize(("preset", "profile", "gpus", "batch", "runtime"), CASES, ids=[c[0] for c in CASES])
def test_quantities_on_the_key_grid_equal_per_candidate(
    preset: str, profile: str, gpus: int, batch: int, runtime: RuntimeFeatures
) -> None:
    """Computing on the key grid (recompute and SP pairs down, row keys across, `Space.layer_keys`), where what
    depends on neither is computed once per row key, changes no number against the flat candidates."""
    model = get_preset(preset).model
    training = TrainingSpec(global_batch_size=batch, runtime=runtime)
    hw = load_profiles()[profile].hardware(training.precision)
    space = build_space(model, training, gpus, {})
    grid = layer_quantities(model, training, space.layer_keys, hw)
    each = layer_quantities(model, training, space.layer_candidates, hw)
    shape = space.layer_keys.shape
    assert shape == (KEY_MODES, len(space.layer_candidates) // KEY_MODES)
    compared = 0
    for a, b in zip(_arrays(grid), _arrays(each), strict=True):
        np.testing.assert_array_equal(np.broadcast_to(a, shape).reshape(-1), b)
        compared += int(np.ndim(a) == 2 and np.shape(a)[0] == 1)  # computed once per row key
    assert compared > 20


def _arrays(q: LayerQuantities) -> list[np.ndarray]:
    p = q.placement
    groups = [p.tp, p.cp, p.pp, p.dp, p.ep]
    out = [getattr(g, f) for g in groups for f in ("size", "members_per_domain", "crosses_network")] + [p.num_gpus]
    out += [getattr(q.layer_s, f) for f in LayerSeconds.__slots__] + [q.logits_s]
    out += [a for params in q.stage_params for a in params] + list(q.largest_params)
    out += [a for t in q.stage_terms for a in (*t.params, *(getattr(t, f) for f in StageTerms.__slots__[1:]))]
    out += [getattr(q.dp_collectives_s, f) for f in DpCollectives.__slots__]
    out += [getattr(q.slowest_stage_s, f) for f in LayerSeconds.__slots__] + [q.average_stage_s]
    return out


def test_splits_that_count_the_embedding_or_loss_match_the_scalar_estimate() -> None:
    """31 layers at pp 2: interleaving needs the embedding or the loss counted (32 = 2 * 16; without middle ranks
    the plain split must divide by pp * vp), and the two splits differ ([15, 16] and [16, 15]); every row
    evaluates as `estimate` does, layout by layout."""
    model = get_preset("llama3-8b").model.model_copy(update={"num_layers": 31})
    training = TrainingSpec(global_batch_size=64)
    cluster = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=32)
    hw = cluster.profile.hardware(training.precision)
    space = build_space(model, training, 32, {"pp": [2], "cp": [1], "micro_batch_size": [1, 2]})
    ev = evaluate(model, training, space, hw)
    c = space.candidates
    splits = {
        (bool(e), bool(lo))
        for e, lo in zip(c.account_for_embedding_in_pipeline_split, c.account_for_loss_in_pipeline_split, strict=True)
    }
    assert splits == {(False, False), (True, False), (False, True)}
    for i in range(len(space)):
        layout = ev.layout(i, model.num_layers)
        e = estimate(model, cluster, training, layout)
        assert not [v for v in e.violations if v.rule != "fits_memory"], (layout, e.violations)
        assert ev.peak_bytes[i] / GIB == pytest.approx(e.memory.peak_gib, rel=1e-12), layout
        if np.isfinite(ev.step_time_s[i]):
            assert ev.step_time_s[i] == pytest.approx(e.step_time_s, rel=1e-12), layout


@pytest.mark.parametrize(
    "allowed",
    [
        {"zero_stage": [0, 3], "recompute": ["full", "none"]},
        {"zero_stage": [2], "sequence_parallel": [True]},
        {"recompute": ["selective"], "zero_stage": [1, 2, 3]},
    ],
)
def test_tables_match_the_reference_on_a_subset_of_modes(allowed: dict[str, list[object]]) -> None:
    """Pinned modes: the grid runs over the pinned pairs and ZeRO stages (`Space.mode_grid`), in the space's
    mode order, and agrees with the reference path on every candidate."""
    model = get_preset("gpt3-175b").model
    training = TrainingSpec(global_batch_size=128)
    hw = load_profiles()["dgx-a100-80gb"].hardware(training.precision)
    space = build_space(model, training, 64, parse_constraints(allowed))
    pairs, zeros = space.mode_grid
    assert len(pairs) * len(zeros) == len(space.modes)
    q = layer_quantities(model, training, space.layer_candidates, hw)
    ev = evaluate(model, training, space, hw)
    reference = estimate_steps(model, training, space.candidates, hw, q.take(space.layer_index))
    fits = reference.memory.peak <= hw.hbm_bytes
    assert len(ev) > 50 and fits.any()
    np.testing.assert_allclose(ev.peak_bytes, reference.memory.peak, rtol=1e-12)
    np.testing.assert_allclose(ev.step_time_s[fits], reference.step_time_s[fits], rtol=1e-12)
