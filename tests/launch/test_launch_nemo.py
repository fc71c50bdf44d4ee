"""The NeMo launch per release: 2.7.3 (the default) and the 2.5.0rc0 main commit emit the same keys, values and
recipe; they differ in the stamp and in 2.7.3's note on its distributed-optimizer checkpoint format.

Hand-checked against nemo-toolkit 2.7.3's wheel: nemo/lightning/pytorch/strategies/megatron_strategy.py
MegatronStrategy.sharded_state_dict_metadata (ckpt_optim_fully_reshardable=False -> 'dp_reshardable'; at
8cfedd720346 ckpt_parallel_save_optim=True -> 'fully_sharded_model_space'), and the recipe files the launch names
(llama31_70b.py, gpt3_175b.py, ...), byte-identical at both.
"""

from __future__ import annotations

from typing import Any

import pytest

from planner.launch import LaunchArgs, launch_args
from planner.launch.nemo import NEMO_RELEASES, NEMO_VERSION
from planner.layout import Layout
from planner.presets import get_preset
from planner.rules import VERSIONS
from planner.specs import Precision, TrainingSpec

OLD = "2.5.0rc0+8cfedd7"
LLAMA70 = get_preset("llama3-70b").model
CHECKPOINT_NOTE = "Checkpoints: this release saves the distributed optimizer dp_reshardable"


def _launch(case: Any, release: str) -> LaunchArgs:
    versions = {"nemo": release}
    return launch_args(case.model, case.training, case.layout, case.num_gpus, case.gpus_per_node, None, versions)


def test_releases_are_the_rules_releases_and_2_7_3_is_the_default() -> None:
    assert list(NEMO_RELEASES) == list(VERSIONS["nemo"]) == ["2.7.3", OLD]
    assert NEMO_VERSION == NEMO_RELEASES["2.7.3"].stamp
    assert NEMO_VERSION == (
        "NeMo 2.7.3 (nemo-toolkit 2.7.3 wheel, sha256 8cbeb10263d7) with megatron-core 0.16.1 and Lightning 2.4.0"
    )


def test_launch_args_passes_the_nemo_release(case: Any) -> None:
    assert case.launch().nemo.framework_version == NEMO_RELEASES["2.7.3"].stamp
    assert _launch(case, OLD).nemo.framework_version.startswith("NeMo main (commit 8cfedd720346")


def test_releases_emit_the_same_overrides(case: Any) -> None:
    """The same overrides, but for the flex dispatcher's backend: 2.7.3's megatron-core 0.16.1 names it
    (moe_flex_dispatcher_backend), the older commit's Megatron-LM has only the DeepEP switch (moe_enable_deepep);
    and for the sliding-window pattern, which only 2.7.3's reads (window_attn_skip_freq)."""
    new, old = _launch(case, "2.7.3").nemo, _launch(case, OLD).nemo
    pattern = "model.config.window_attn_skip_freq"
    if pattern in new.config:
        assert pattern not in old.config
        assert {k: v for k, v in new.config.items() if k != pattern} == old.config
        return
    backend = "model.config.moe_flex_dispatcher_backend"
    if backend in new.config:
        assert old.config["model.config.moe_enable_deepep"] is True and backend not in old.config
        new_config = {k: v for k, v in new.config.items() if k != backend}
        old_config = {k: v for k, v in old.config.items() if k != "model.config.moe_enable_deepep"}
        assert new_config == old_config
        return
    assert (new.args, new.command, new.config) == (old.args, old.command, old.config)


def test_only_2_7_3_notes_its_dp_reshardable_optimizer_checkpoint(case: Any) -> None:
    """2.7.3 adds its checkpoint note; the older commit says where it runs DeepEP for HybridEP and that it cannot
    run a sliding-window pattern."""
    new, old = _launch(case, "2.7.3").nemo, _launch(case, OLD).nemo
    extra = [n for n in new.notes if n not in old.notes]
    old_only = [n for n in old.notes if n not in new.notes]
    assert all("rule megatron_15_no_hybridep" in n or "rule nemo_no_window_pattern" in n for n in old_only)
    assert len(new.notes) == len(old.notes) - len(old_only) + len(extra)
    assert [n[: len(CHECKPOINT_NOTE)] for n in extra] == ([CHECKPOINT_NOTE] if case.layout.zero_stage == 1 else [])


@pytest.mark.parametrize(("zero_stage", "noted"), [(0, False), (1, True), (2, False), (3, False)])
def test_checkpoint_note_is_for_the_distributed_optimizer_without_fsdp(zero_stage: int, noted: bool) -> None:
    """ZeRO 0: no distributed optimizer; ZeRO 2/3: Megatron FSDP saves fsdp_dtensor in both releases."""
    layout = Layout(tp=8, pp=1, dp=8, zero_stage=zero_stage)
    notes = launch_args(LLAMA70, TrainingSpec(global_batch_size=64), layout, 64, 8).nemo.notes
    assert any(n.startswith(CHECKPOINT_NOTE) for n in notes) is noted
    if noted:
        assert "trainer.strategy.ckpt_optim_fully_reshardable=True" in next(n for n in notes if "dp_reshardable" in n)


def test_fp8_format_is_written_out_not_the_2_7_3_recipe_default() -> None:
    """2.7.3's recipes/precision/mixed_precision.py bf16_with_fp8_mixed sets fp8='e4m3' (8cfedd720346: 'hybrid');
    the launch writes hybrid in both, as Megatron-LM's --fp8-format hybrid."""
    training = TrainingSpec(global_batch_size=64, precision=Precision.FP8)
    for release in NEMO_RELEASES:
        launch = launch_args(LLAMA70, training, Layout(tp=8, pp=1, dp=8), 64, 8, None, {"nemo": release}).nemo
        assert launch.config["trainer.plugins.fp8"] == "hybrid" and launch.config["trainer.plugins.precision"] == (
            "bf16-mixed"
        )
