"""Block recompute (`TrainingSpec.recompute_num_layers`): under full recompute the first k layers of each pipeline
stage (of each model chunk under interleaving) rerun their forward and keep only their inputs; the other layers keep
their activations and rerun nothing."""

import pytest

from planner.estimate import Estimate, estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.specs import Recompute, TrainingSpec

MODEL = get_preset("llama3-8b").model  # 32 layers
CLUSTER = ClusterSpec(profile=load_profiles()["dgx-h100"], num_gpus=8)


def _run(block: int | None, recompute: Recompute = Recompute.FULL, pp: int = 1, vp: int = 1) -> Estimate:
    training = TrainingSpec(global_batch_size=64, recompute_num_layers=block)
    layout = Layout(tp=1, pp=pp, dp=8 // pp, vp=vp, micro_batch_size=1, recompute=recompute, zero_stage=1)
    return estimate(MODEL, CLUSTER, training, layout)


def _activations(e: Estimate) -> float:
    return e.memory.breakdown_gib["activations"]


def test_the_first_k_layers_rerun_their_forward() -> None:
    uniform = _run(None)
    for k in (1, 8, 31):
        e = _run(k)
        assert e.time_breakdown_s["recompute"] == pytest.approx(k / 32 * uniform.time_breakdown_s["recompute"])
        assert e.time_breakdown_s["compute"] == pytest.approx(uniform.time_breakdown_s["compute"])
    for k in (32, 40):  # k at or above a stage's layers: every layer, as the uniform method
        assert _run(k).step_time_s == uniform.step_time_s
        assert _activations(_run(k)) == _activations(uniform)


def test_per_stage_on_a_pipeline() -> None:
    """pp 4: eight layers a stage, two recomputed in each; the bubble's average stage carries the same share."""
    uniform, block = _run(None, pp=4), _run(2, pp=4)
    assert block.time_breakdown_s["recompute"] == pytest.approx(2 / 8 * uniform.time_breakdown_s["recompute"])
    none = _run(None, Recompute.NONE, pp=4)
    assert none.time_breakdown_s["bubble"] < block.time_breakdown_s["bubble"] < uniform.time_breakdown_s["bubble"]


def test_per_model_chunk_under_interleaving() -> None:
    """pp 4, vp 2: two chunks of four layers a stage (Megatron-Core builds one TransformerBlock per chunk), k of
    each recomputed, 2k of the stage's eight; k at or above a chunk's four layers is every layer."""
    uniform = _run(None, pp=4, vp=2)
    for k in (1, 3):
        block = _run(k, pp=4, vp=2)
        assert block.time_breakdown_s["recompute"] == pytest.approx(2 * k / 8 * uniform.time_breakdown_s["recompute"])
        assert _activations(uniform) < _activations(block) < _activations(_run(None, Recompute.NONE, pp=4, vp=2))
    for k in (4, 6):
        assert _run(k, pp=4, vp=2).step_time_s == uniform.step_time_s
        assert _activations(_run(k, pp=4, vp=2)) == _activations(uniform)


def test_activations_are_k_inputs_and_the_other_layers_whole() -> None:
    """Each layer moved from kept to recomputed saves (whole layer - its input); with some layers kept, the recompute
    working set needs no room of its own (the recomputed layers' backward comes after the others freed theirs)."""
    saved_per_layer = (_activations(_run(8)) - _activations(_run(16))) / 8
    assert saved_per_layer == pytest.approx((_activations(_run(16)) - _activations(_run(24))) / 8)
    none = _run(None, Recompute.NONE)
    assert (_activations(none) - _activations(_run(31))) / 31 == pytest.approx(saved_per_layer)
    # 31 of 32: 31 inputs and one whole layer; uniform: 32 inputs and the working set, one whole layer more.
    assert _activations(_run(31)) < _activations(_run(None)) < _activations(_run(16)) < _activations(none)


def test_hardware_flops_count_the_recomputed_layers_only() -> None:
    def rerun_flop(e: Estimate) -> float:
        return (e.hardware_tflops_per_gpu - e.model_tflops_per_gpu) * e.step_time_s

    uniform = _run(None)
    assert rerun_flop(_run(5)) == pytest.approx(5 / 32 * rerun_flop(uniform))
    assert _run(5, Recompute.NONE).step_time_s == _run(None, Recompute.NONE).step_time_s  # other modes ignore k
    assert _run(5, Recompute.SELECTIVE).step_time_s == _run(None, Recompute.SELECTIVE).step_time_s
