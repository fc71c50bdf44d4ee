"""A quantized run's BF16 end layers (`TrainingSpec.bf16_layers_at_start` / `bf16_layers_at_end`, Megatron-LM
`--first-last-layers-bf16`): each is the same layer with nothing quantized, on the end stages."""

from __future__ import annotations

import numpy as np
import pytest

from planner.constraints.costs import FIRST, LAST, MIDDLE, stage_costs_many
from planner.costmodel.candidates import Candidates
from planner.costmodel.shared import layer_quantities
from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.specs import Fp8Recipe, Precision, TrainingSpec

H100 = load_profiles()["dgx-h100"]
LLAMA8 = get_preset("llama3-8b").model  # 32 layers


def _fp8(start: int = 0, end: int = 0) -> TrainingSpec:
    return TrainingSpec(
        global_batch_size=128,
        precision=Precision.FP8,
        fp8_recipe=Fp8Recipe.TENSORWISE,
        bf16_layers_at_start=start,
        bf16_layers_at_end=end,
    )


def _quantities(training: TrainingSpec, layout: Layout):  # noqa: ANN202 - LayerQuantities
    c = Candidates.from_layouts([layout], LLAMA8.num_layers, training.global_batch_size)
    return layer_quantities(LLAMA8, training, c, H100.training_hardware(training))


def _extra(layout: Layout) -> float:
    """One layer's critical path priced as a bf16 run's less the same layer as an FP8 run's: what the model must
    add per BF16 layer, computed here from the two runs, not from `bf16_layer_extra_s`."""
    bf16 = TrainingSpec(global_batch_size=128, precision=Precision.BF16)
    return float(
        _quantities(bf16, layout).layer_s.critical_path_s[0] - _quantities(_fp8(), layout).layer_s.critical_path_s[0]
    )


@pytest.mark.parametrize(
    ("layout", "start", "end"),
    [(Layout(tp=1, pp=1, dp=8), 32, 0), (Layout(tp=2, pp=2, dp=2, sequence_parallel=True), 16, 16)],
    ids=["pp1-all-at-start", "pp2-both-ends"],
)
def test_every_layer_in_bf16_is_the_bf16_run(layout: Layout, start: int, end: int) -> None:
    # H100 keeps FP8 weights at 2 bytes either way, so only the layers differ: with every one of them in BF16 the
    # step is the bf16 run's.
    cluster = ClusterSpec(profile=H100, num_gpus=layout.world_size)
    bf16 = estimate(LLAMA8, cluster, TrainingSpec(global_batch_size=128, precision=Precision.BF16), layout)
    ends = estimate(LLAMA8, cluster, _fp8(start, end), layout)
    quantized = estimate(LLAMA8, cluster, _fp8(), layout)
    assert not ends.violations or {v.rule for v in ends.violations} == {"fits_memory"}
    assert ends.step_time_s == pytest.approx(bf16.step_time_s, rel=1e-9)
    assert quantized.step_time_s < ends.step_time_s


def test_one_layer_at_each_end() -> None:
    # pp 1: the one stage holds both BF16 layers; pp 4: each end stage one, the slowest (the last, with the logits)
    # pays one, the average stage two over four.
    one = Layout(tp=1, pp=1, dp=8)
    extra = _extra(one)
    assert extra > 0
    base, ends = _quantities(_fp8(), one), _quantities(_fp8(1, 1), one)
    assert ends.slowest_stage_s.critical_path_s[0] - base.slowest_stage_s.critical_path_s[0] == pytest.approx(2 * extra)
    assert ends.bf16_layer_extra_s.critical_path_s[0] == pytest.approx(extra)
    four = Layout(tp=1, pp=4, dp=2)
    extra = _extra(four)
    base, ends = _quantities(_fp8(), four), _quantities(_fp8(1, 1), four)
    slower = ends.slowest_stage_s.critical_path_s[0] - base.slowest_stage_s.critical_path_s[0]
    assert slower == pytest.approx(extra)
    assert ends.average_stage_s[0] - base.average_stage_s[0] == pytest.approx(2 * extra / 4)
    assert np.all(base.bf16_layer_extra_s.critical_path_s == 0)


def test_stage_split_costs_charge_the_end_stages() -> None:
    # CP-SAT's stage lines: the first stage carries the start layers' extra, the last the end ones' and the logits.
    layout = Layout(tp=1, pp=4, dp=2)
    (plain,) = stage_costs_many(LLAMA8, _fp8(), [layout], H100.training_hardware(_fp8()))
    (costs,) = stage_costs_many(LLAMA8, _fp8(2, 1), [layout], H100.training_hardware(_fp8(2, 1)))
    extra = _extra(layout)
    assert costs.bf16_layers == (2, 0, 1)
    assert costs.stage_time_s(FIRST, 8) - plain.stage_time_s(FIRST, 8) == pytest.approx(2 * extra, rel=1e-6)
    assert costs.stage_time_s(MIDDLE, 8) == pytest.approx(plain.stage_time_s(MIDDLE, 8), rel=1e-12)
    assert costs.stage_time_s(LAST, 8) - plain.stage_time_s(LAST, 8) == pytest.approx(extra, rel=1e-6)
    assert costs.total_extra_s - plain.total_extra_s == pytest.approx(3 * extra, rel=1e-6)


def test_a_16_bit_run_has_no_bf16_end_layers() -> None:
    with pytest.raises(ValueError, match=r"bf16_layers_at_start\(1\) keeps layers in BF16 .* precision\(bf16\)"):
        TrainingSpec(global_batch_size=128, bf16_layers_at_start=1)
    nvfp4 = TrainingSpec(global_batch_size=128, precision=Precision.NVFP4, bf16_layers_at_end=2)
    assert nvfp4.bf16_layers_at_end == 2
