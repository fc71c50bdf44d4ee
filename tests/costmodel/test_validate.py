"""Layout rules: each fires on a crafted layout with its arithmetic in the message; memory fit via estimate()."""

import math

import pytest

from planner.estimate import estimate
from planner.layout import Layout
from planner.presets import get_preset
from planner.profiles import ClusterSpec, load_profiles
from planner.rules import CORE
from planner.specs import Fp8Recipe, ModelSpec, MoESpec, Precision, Recompute, TrainingSpec
from planner.validate import layout_violations

BASE = {"num_layers": 8, "hidden_size": 64, "num_attention_heads": 8, "num_query_groups": 4, "ffn_hidden_size": 256}
DENSE = ModelSpec(**BASE, vocab_size=1000, seq_length=16)
MOE = ModelSpec(**BASE, vocab_size=1000, seq_length=16, moe=MoESpec(num_experts=6, top_k=2, expert_ffn_hidden_size=100))

# (rule, layout, model, global batch, num_gpus, expected messages of that rule, in order)
ROWS = [
    ("positive_sizes", Layout(tp=0, pp=2, dp=2), DENSE, 8, 8, ["tp(0) must be >= 1"]),
    ("positive_sizes", Layout(tp=2, pp=2, dp=2, zero_stage=5), DENSE, 8, 8, ["zero_stage(5) must be 0, 1, 2 or 3"]),
    ("world_size", Layout(tp=8, pp=4, dp=3), DENSE, 24, 64, ["tp(8) * pp(4) * dp(3) * cp(1) = 96 != num_gpus(64)"]),
    (
        "tensor_split",
        Layout(tp=3, pp=1, dp=1),
        DENSE,
        8,
        3,
        [
            "num_attention_heads(8) % tp(3) = 2, must be 0",
            "num_query_groups(4) must be a multiple or a divisor of tp(3)",
            "ffn_hidden_size(256) % tp(3) = 1, must be 0",
        ],
    ),
    ("expert_split", Layout(tp=8, pp=1, dp=1), MOE, 8, 8, ["moe.expert_ffn_hidden_size(100) % etp(8) = 4, must be 0"]),
    (
        "batch_divisible",
        Layout(tp=1, pp=1, dp=3, micro_batch_size=2),
        DENSE,
        8,
        3,
        ["global_batch_size(8) % (micro_batch_size(2) * dp(3)) = 2, must be 0"],
    ),
    ("context_split", Layout(tp=1, pp=1, dp=1, cp=3), DENSE, 8, 3, ["seq_length(16) % (2 * cp(3)) = 4, must be 0"]),
    ("expert_split", Layout(tp=1, pp=1, dp=2, ep=2), DENSE, 8, 2, ["ep(2) > 1 needs a mixture-of-experts model"]),
    (
        "expert_split",
        Layout(tp=1, pp=1, dp=2, ep=4),
        MOE,
        8,
        2,
        ["(tp(1) * cp(1) * dp(2)) % (etp(1) * ep(4)) = 2, must be 0", "moe.num_experts(6) % ep(4) = 2, must be 0"],
    ),
    ("stage_split", Layout(tp=1, pp=1, dp=1, vp=2), DENSE, 8, 1, ["vp(2) > 1 needs pp > 1"]),
    ("stage_split", Layout(tp=1, pp=16, dp=1), DENSE, 8, 16, ["pp(16) > num_layers(8)"]),
    (
        "stage_split",
        Layout(tp=1, pp=2, dp=1, layers_per_stage=(3, 3, 2)),
        DENSE,
        8,
        2,
        ["len(layers_per_stage)(3) != pp(2)"],
    ),
    (
        "stage_split",
        Layout(tp=1, pp=2, dp=1, layers_per_stage=(4, 3)),
        DENSE,
        8,
        2,
        ["sum(layers_per_stage)(7) != num_layers(8)"],
    ),
    (
        "interleave_microbatches",
        Layout(tp=1, pp=2, dp=1, vp=2),
        DENSE,
        3,
        2,
        ["interleaving needs num_microbatches(3) % pp(2) = 0, got 1 (Megatron-LM schedule)"],
    ),
    (
        "sequence_parallel_needs_tp",
        Layout(tp=1, pp=1, dp=1, sequence_parallel=True),
        DENSE,
        8,
        1,
        ["sequence_parallel needs tp > 1"],
    ),
]
IDS = [
    "tp0",
    "zero5",
    "world",
    "heads-groups-ffn",
    "expert-ffn",
    "batch",
    "cp",
    "ep-dense",
    "ep-moe",
    "vp-no-pp",
    "pp-gt-layers",
    "stages-len",
    "stages-sum",
    "interleave-microbatches",
    "sp",
]


@pytest.mark.parametrize(("rule", "layout", "model", "gbs", "gpus", "messages"), ROWS, ids=IDS)
def test_rule_fires_alone(
    rule: str, layout: Layout, model: ModelSpec, gbs: int, gpus: int, messages: list[str]
) -> None:
    violations = layout_violations(layout, model, TrainingSpec(global_batch_size=gbs), gpus)
    assert [v.rule for v in violations] == [rule] * len(messages)
    assert [v.message for v in violations] == messages


# activation_offload reads the training's offloaded layers: (layout, offloaded layers, expected messages, in order)
OFFLOAD_ROWS = [
    (Layout(tp=1, pp=1, dp=1), 8, ["training.activation_offload_layers(8) must be < num_layers(8)"]),
    (
        Layout(tp=1, pp=2, dp=1, recompute=Recompute.FULL),
        2,
        [
            "training.activation_offload_layers(2) > 0 needs pp = 1; got pp(2)",
            "training.activation_offload_layers(2) > 0 needs recompute none; got recompute(full)",
        ],
    ),
    (
        Layout(tp=2, pp=1, dp=1, recompute=Recompute.SELECTIVE),
        7,
        ["training.activation_offload_layers(7) > 0 needs recompute none; got recompute(selective)"],
    ),
    (Layout(tp=2, pp=1, dp=1), 7, []),
    (Layout(tp=1, pp=2, dp=1, recompute=Recompute.FULL), 0, []),
]


@pytest.mark.parametrize(
    ("layout", "offloaded", "messages"), OFFLOAD_ROWS, ids=["all", "pp-full", "selective", "ok", "off"]
)
def test_activation_offload_rule(layout: Layout, offloaded: int, messages: list[str]) -> None:
    training = TrainingSpec(global_batch_size=8, activation_offload_layers=offloaded)
    violations = layout_violations(layout, DENSE, training, layout.world_size)
    assert [v.rule for v in violations] == ["activation_offload"] * len(messages)
    assert [v.message for v in violations] == messages


# bf16_end_layers reads the training's BF16 end layers and FP8 recipe: (layout, recipe, start, end, messages)
BF16_ROWS = [
    (Layout(tp=1, pp=2, dp=1), Fp8Recipe.TENSORWISE, 1, 1, []),
    (Layout(tp=1, pp=1, dp=1), Fp8Recipe.MXFP8, 8, 0, []),
    (
        Layout(tp=1, pp=2, dp=1),
        None,
        1,
        0,
        [
            "training.bf16_layers_at_start(1) / bf16_layers_at_end(0) keep layers in BF16, which FP8 delayed"
            " scaling does not support; set training.fp8_recipe tensorwise, mxfp8 or blockwise"
        ],
    ),
    (
        Layout(tp=1, pp=4, dp=1),
        Fp8Recipe.TENSORWISE,
        1,
        3,
        ["training.bf16_layers_at_start(1) and bf16_layers_at_end(3) must each be at most num_layers(8) // pp(4) = 2"],
    ),
]


@pytest.mark.parametrize(
    ("layout", "recipe", "start", "end", "messages"), BF16_ROWS, ids=["ok", "all-layers", "delayed", "past-stage"]
)
def test_bf16_end_layers_rule(
    layout: Layout, recipe: Fp8Recipe | None, start: int, end: int, messages: list[str]
) -> None:
    training = TrainingSpec(
        global_batch_size=8,
        precision=Precision.FP8,
        fp8_recipe=recipe,
        bf16_layers_at_start=start,
        bf16_layers_at_end=end,
    )
    violations = layout_violations(layout, DENSE, training, layout.world_size)
    assert [v.rule for v in violations] == ["bf16_end_layers"] * len(messages)
    assert [v.message for v in violations] == messages


# moe_a2a_overlap reads the runtime's overlap and the model's MoE and MTP: (layout, model, expected messages)
OVERLAP = "training.runtime.moe_a2a_overlap"
A2A_ROWS = [
    (Layout(tp=1, pp=2, dp=3, ep=3, vp=2), MOE, []),
    (Layout(tp=1, pp=1, dp=3, ep=3, recompute=Recompute.SELECTIVE), MOE, []),
    (Layout(tp=1, pp=2, dp=3, ep=1, vp=2), DENSE, []),
    (Layout(tp=1, pp=2, dp=3, ep=1, vp=2), MOE, [f"{OVERLAP} needs ep > 1; got ep(1)"]),
    (Layout(tp=1, pp=2, dp=3, ep=3), MOE, [f"{OVERLAP} with pp(2) > 1 needs vp > 1; got vp(1)"]),
    (
        Layout(tp=1, pp=1, dp=3, ep=3, recompute=Recompute.FULL),
        MOE,
        [f"{OVERLAP} needs recompute none or selective; got recompute(full)"],
    ),
    (
        Layout(tp=1, pp=2, dp=3, ep=3, vp=2),
        MOE.model_copy(update={"mtp_num_layers": 2}),
        [f"{OVERLAP} needs model.mtp_num_layers <= 1; got 2"],
    ),
]


@pytest.mark.parametrize(
    ("layout", "model", "messages"), A2A_ROWS, ids=["ok", "no-pipeline", "dense", "ep-1", "no-vp", "full", "mtp-2"]
)
def test_moe_a2a_overlap_rule(layout: Layout, model: ModelSpec, messages: list[str]) -> None:
    training = TrainingSpec(global_batch_size=12, runtime={"moe_a2a_overlap": True})
    violations = layout_violations(layout, model, training, layout.world_size)
    assert [(v.rule, v.message) for v in violations] == [("moe_a2a_overlap", m) for m in messages]
    off = TrainingSpec(global_batch_size=12)
    assert layout_violations(layout, model, off, layout.world_size) == []


def test_every_rule_has_a_crafted_case() -> None:
    crafted = {"activation_offload", "moe_a2a_overlap", "bf16_end_layers"}
    crafted |= {"mamba_split", "hybrid_context_parallel", "mamba_fp8_width"}  # tests/rules/test_hybrid_rules.py
    crafted |= {"recompute_modules"}  # tests/rules/test_recompute_modules.py
    assert {row[0] for row in ROWS} | crafted == set(CORE.names)


GOOD = [
    (Layout(tp=2, pp=2, dp=2), DENSE, 8),
    (Layout(tp=4, pp=2, dp=2, cp=2, ep=2, vp=2, micro_batch_size=2, sequence_parallel=True), MOE, 32),
    (Layout(tp=1, pp=3, dp=1, layers_per_stage=(2, 3, 3)), DENSE, 3),
]


@pytest.mark.parametrize(("layout", "model", "gpus"), GOOD, ids=["dense", "moe-all-dims", "uneven-stages"])
def test_good_layout_has_no_violations(layout: Layout, model: ModelSpec, gpus: int) -> None:
    assert layout_violations(layout, model, TrainingSpec(global_batch_size=16), gpus) == []


def _a100_40gb(num_gpus: int) -> ClusterSpec:
    return ClusterSpec(profile=load_profiles()["dgx-a100-40gb"], num_gpus=num_gpus)


def test_estimate_flags_memory_overflow() -> None:
    # GPT-3 175B on one node: 174.6e9 params / 8 GPUs * 18 bytes ~ 366 GiB per GPU of model states alone.
    model = get_preset("gpt3-175b").model
    result = estimate(model, _a100_40gb(8), TrainingSpec(global_batch_size=8), Layout(tp=8, pp=1, dp=1))
    assert result.fits is False
    assert [v.rule for v in result.violations] == ["fits_memory"]
    assert result.memory.capacity_gib == 40.0
    assert result.memory.peak_gib > 174.6e9 / 8 * 18 / 2**30
    assert result.memory.usable_gib == 40.0 * 0.95  # the default 5% memory headroom
    assert "> usable 38.0 GiB (40 GiB less 5% headroom)" in result.violations[0].message
    assert math.isfinite(result.step_time_s) and result.step_time_s > 0


def test_estimate_reports_rule_violations_but_still_estimates() -> None:
    # batch 9 over dp=2: 9 % 2 = 1; the layout is still estimated.
    result = estimate(DENSE, _a100_40gb(2), TrainingSpec(global_batch_size=9), Layout(tp=1, pp=1, dp=2))
    assert result.fits is False
    assert [v.rule for v in result.violations] == ["batch_divisible"]
    assert math.isfinite(result.step_time_s) and result.step_time_s > 0


def test_estimate_refuses_non_positive_sizes() -> None:
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        estimate(DENSE, _a100_40gb(2), TrainingSpec(global_batch_size=8), Layout(tp=1, pp=0, dp=2))
