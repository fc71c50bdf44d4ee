"""Activation offloading: the layers it moves, the copy time it leaves exposed, and what a layout then holds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.costmodel.candidates import Candidates
from planner.costmodel.memory import (
    FRAGMENTATION_FRACTION,
    activation_bytes_per_layer,
    memory_per_gpu,
)
from planner.costmodel.offload import exposed_offload_s, offloaded_layers
from planner.costmodel.step import estimate_steps
from planner.errors import InvalidSpecError
from planner.estimate import estimate
from planner.layout import Layout
from planner.numerics import training_numerics
from planner.presets import get_preset
from planner.profiles import ClusterSpec, Hardware, load_profiles
from planner.specs import Precision, TrainingSpec

PROFILES = load_profiles()


def _link(bytes_per_s: float | None) -> Hardware:
    return replace(PROFILES["dgx-h100"].hardware(Precision.BF16), host_link_bytes_per_s=bytes_per_s)


def _a(*x: float) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def test_offloaded_layers_keep_one_on_the_gpu() -> None:
    assert offloaded_layers(3, np.asarray([8, 4, 3, 1])).tolist() == [3, 3, 2, 0]
    assert offloaded_layers(0, np.asarray([8])).tolist() == [0]


def test_exposed_copies_by_hand() -> None:
    """L = 4, k = 2 (g = 2 sets on the GPU), c = 10 s a copy, t_f = 2, t_b = 4.

    Forward: stream 2*10 - 3*2 = 14, window 2*max(0, 10 - 1*2) = 16 -> 16. Backward: stream 20 - 12 = 8, window
    2*max(0, 10 - 4) = 12 -> 12. A link ten times faster (c = 1) hides both; k = L - 1 = 3 (one set) hides
    nothing: 3*10 each way.
    """
    slow, fast = _link(1.0), _link(10.0)
    layers = np.asarray([4])
    assert exposed_offload_s(2, layers, _a(10.0), _a(2.0), _a(4.0), slow).tolist() == [28.0]
    assert exposed_offload_s(2, layers, _a(10.0), _a(2.0), _a(4.0), fast).tolist() == [0.0]
    assert exposed_offload_s(3, layers, _a(10.0), _a(2.0), _a(4.0), slow).tolist() == [60.0]
    assert exposed_offload_s(0, layers, _a(10.0), _a(2.0), _a(4.0), _link(None)).tolist() == [0.0]


def test_offloading_without_a_host_link_names_the_field() -> None:
    with pytest.raises(InvalidSpecError, match="training.activation_offload_layers"):
        exposed_offload_s(1, np.asarray([4]), _a(1.0), _a(1.0), _a(1.0), _link(None))


def _fsdp_70b(offload: int, profile: str = "gb200-nvl72") -> tuple[Candidates, TrainingSpec, Hardware]:
    model = get_preset("llama3-70b").model
    layout = Layout(tp=1, pp=1, dp=64, micro_batch_size=1, zero_stage=3)
    c = Candidates.from_layouts([layout], num_layers=model.num_layers, global_batch_size=256)
    training = TrainingSpec(global_batch_size=256, activation_offload_layers=offload)
    return c, training, PROFILES[profile].hardware(training.precision)


@pytest.mark.parametrize("offload", [1, 20, 79])
def test_offloaded_layers_hold_no_activations(offload: int) -> None:
    """Megatron-Bridge's GB200 Llama 3 70B recipe (FSDP, tp = pp = 1, 20 of 80 layers offloaded): the GPU keeps
    80 - k layers' activations, and the fragmentation allowance shrinks with them."""
    model = get_preset("llama3-70b").model
    c, training, hw = _fsdp_70b(offload)
    per_layer = float(activation_bytes_per_layer(model, c, training.runtime, training_numerics(training, hw))[0])
    kept, none = memory_per_gpu(model, c, training, hw), memory_per_gpu(model, c, replace_offload(training, 0), hw)
    assert float(none.activations[0] - kept.activations[0]) == pytest.approx(offload * per_layer, rel=1e-12)
    assert float(none.other[0] - kept.other[0]) == pytest.approx(
        FRAGMENTATION_FRACTION * offload * per_layer, rel=1e-12
    )
    assert float(none.parameters[0]) == float(kept.parameters[0])


def replace_offload(training: TrainingSpec, offload: int) -> TrainingSpec:
    return training.model_copy(update={"activation_offload_layers": offload})


def test_copies_hide_behind_compute_on_nvlink_c2c_but_not_over_pcie() -> None:
    """Every offloaded copy of 70B's ~2.3 GB layer takes 9 ms at GB200's 255 GB/s (under a layer's forward) and
    36 ms at PCIe Gen5's 64 GB/s (over it): 20 layers hide on GB200; 79 over PCIe cannot."""
    model = get_preset("llama3-70b").model
    for profile, offload, hidden in (("gb200-nvl72", 20, True), ("dgx-h100", 79, False)):
        c, training, hw = _fsdp_70b(offload, profile)
        steps = estimate_steps(model, training, c, hw)
        plain = estimate_steps(model, replace_offload(training, 0), c, hw)
        exposed = float(steps.time_s.offload[0])
        assert (exposed == 0.0) is hidden
        assert float(steps.time_s.total[0]) == pytest.approx(float(plain.time_s.total[0]) + exposed, rel=1e-12)


def test_estimate_reports_offload_and_the_rule() -> None:
    model = get_preset("llama3-70b").model
    cluster = ClusterSpec(profile=PROFILES["dgx-h100"], num_gpus=64)
    training = TrainingSpec(global_batch_size=256, activation_offload_layers=40)
    fits = estimate(model, cluster, training, Layout(tp=8, pp=1, dp=8, sequence_parallel=True, zero_stage=1))
    assert fits.time_breakdown_s["offload"] >= 0.0
    assert "activation_offload" not in {v.rule for v in fits.violations}
    broken = estimate(model, cluster, training, Layout(tp=8, pp=2, dp=4, sequence_parallel=True, zero_stage=1))
    assert [v.message for v in broken.violations if v.rule == "activation_offload"] == [
        "training.activation_offload_layers(40) > 0 needs pp = 1; got pp(2)"
    ]


def test_exposed_copies_grow_with_what_is_offloaded_and_shrink_with_the_link() -> None:
    """Over random stages: never negative, never more than every copy unhidden (k c each way), non-decreasing in
    k and in the bytes per layer, non-increasing in the link's rate."""
    rng = np.random.default_rng(5)
    layers = rng.integers(2, 130, 400)
    per_layer, t_f = rng.uniform(1e8, 5e9, 400), rng.uniform(1e-3, 5e-2, 400)
    t_b = 2 * t_f
    for link in (32e9, 64e9, 255e9):
        hw, faster = _link(link), _link(2 * link)
        previous = np.zeros(400)
        for k in (1, 2, 5, 20, 60, 129):
            s = exposed_offload_s(k, layers, per_layer, t_f, t_b, hw)
            assert np.all(s >= 0) and np.all(s >= previous - 1e-12)
            assert np.all(s <= 2 * offloaded_layers(k, layers) * per_layer / link * (1 + 1e-12))
            assert np.all(exposed_offload_s(k, layers, 2 * per_layer, t_f, t_b, hw) >= s)
            assert np.all(exposed_offload_s(k, layers, per_layer, t_f, t_b, faster) <= s)
            previous = s
