"""Hybrid models (`ModelSpec.hybrid_pattern`): the rules that accept them where Megatron-Core, NeMo and TorchTitan do.

Each rule on hand cases (kept, removed, exact message), per framework release; the rules never fire for a
transformer; vectorised = scalar; the search space equals the brute-force legal layouts under each rule set.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from planner.constraints.space import build_space
from planner.costmodel.candidates import RECOMPUTE_CODE
from planner.errors import InvalidSpecError
from planner.launch import launch_args
from planner.layout import Layout
from planner.rules import CORE, VERSIONS, Job, rule_set
from planner.search.constraints import parse_constraints
from planner.specs import MambaSpec, ModelSpec, MoESpec, Precision, Recompute, RuntimeFeatures, TrainingSpec
from planner.validate import layout_violations
from tests.search.reference import legal_layouts

# The attention splits over tp 1, 2, 3, 6 and 12 (12 heads, 6 key/value groups, ffn 768).
SHAPE = {"hidden_size": 384, "num_attention_heads": 12, "num_query_groups": 6, "ffn_hidden_size": 768}
# 12 SSM heads of 32 channels in 4 groups: tp 2 and 4 divide both, tp 3 and 6 the heads only.
MAMBA = MambaSpec(state_dim=16, head_dim=32, num_groups=4, num_heads=12)
HYBRID = ModelSpec(
    **SHAPE, num_layers=6, vocab_size=1000, seq_length=512, hybrid_pattern="M*M-M-", mamba=MAMBA, name="hybrid"
)
HYBRID_MOE = ModelSpec(
    **SHAPE,
    num_layers=6,
    vocab_size=1000,
    seq_length=512,
    hybrid_pattern="M*MEME",
    mamba=MAMBA,
    moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden_size=256),
)
# No Mamba layer: a hybrid stack of attention, MLP and MoE blocks.
NO_MAMBA = ModelSpec(**SHAPE, num_layers=4, vocab_size=1000, seq_length=512, hybrid_pattern="*-*-")
DENSE = ModelSpec(**SHAPE, num_layers=6, vocab_size=1000, seq_length=512)
MOE = ModelSpec(
    **SHAPE,
    num_layers=6,
    vocab_size=1000,
    seq_length=512,
    moe=MoESpec(num_experts=4, top_k=2, expert_ffn_hidden_size=256),
)
RELEASES = [(framework, version) for framework, releases in VERSIONS.items() for version in releases]


def job(model: ModelSpec = HYBRID, gpus: int = 8, **training: object) -> Job:
    return Job(model, TrainingSpec(global_batch_size=48, **training), gpus)


def rules(framework: str, version: str | None = None) -> list[str]:
    return list(rule_set(framework, version).names)


def broken(layout: Layout, j: Job, framework: str = "core", version: str | None = None) -> list[tuple[str, str]]:
    found = layout_violations(layout, j.model, j.training, j.num_gpus, rule_set(framework, version))
    return [(v.rule, v.message) for v in found]


# --- core rules ------------------------------------------------------------------------------------------------


def test_tensor_parallelism_must_divide_the_mamba_heads_and_groups() -> None:
    """Megatron-Core MambaMixer: nheads % tp == 0 and ngroups % tp == 0 (each rank whole heads and groups). The
    attention accepts tp 3 and 6 here; the Mamba mixer does not."""
    j = job(gpus=12)
    assert broken(Layout(tp=2, pp=1, dp=6), j) == []
    assert broken(Layout(tp=3, pp=1, dp=4), j) == [("mamba_split", "mamba.num_groups(4) % tp(3) = 1, must be 0")]
    eight = job(replace_mamba(num_heads=8, head_dim=48), gpus=12)
    assert broken(Layout(tp=6, pp=1, dp=2), eight) == [
        ("mamba_split", "mamba.num_heads(8) % tp(6) = 2, must be 0"),
        ("mamba_split", "mamba.num_groups(4) % tp(6) = 4, must be 0"),
    ]


def replace_mamba(**update: object) -> ModelSpec:
    return HYBRID.model_copy(update={"mamba": MAMBA.model_copy(update=update)})


def test_derived_mamba_heads_are_named_with_their_arithmetic() -> None:
    """mamba.num_heads null: 2 hidden_size / head_dim (Megatron-Core's expand 2) = 16 heads, which tp 3 splits."""
    model = HYBRID.model_copy(update={"mamba": MambaSpec(state_dim=16, head_dim=48, num_groups=4)})
    assert model.mamba_num_heads == 16
    assert broken(Layout(tp=3, pp=1, dp=1), job(model, gpus=3)) == [
        ("mamba_split", "mamba.num_heads(16 = 2 * hidden_size(384) / mamba.head_dim(48)) % tp(3) = 1, must be 0"),
        ("mamba_split", "mamba.num_groups(4) % tp(3) = 1, must be 0"),
    ]


def test_attention_head_rules_still_apply_to_a_hybrid_model() -> None:
    """The pattern's attention and MLP layers split over tp as a transformer's (rule tensor_split)."""
    assert broken(Layout(tp=4, pp=1, dp=2), job()) == [
        ("tensor_split", "num_query_groups(6) must be a multiple or a divisor of tp(4)")
    ]


def test_context_parallelism_is_refused_over_mamba_layers() -> None:
    """This planner does not price context parallelism over Mamba layers (a modelling limit, stated as such)."""
    found = broken(Layout(tp=2, pp=1, dp=2, cp=2), job())
    assert found == [
        (
            "hybrid_context_parallel",
            "cp(2) > 1 with Mamba layers (model.hybrid_pattern has 3 M): this planner does not price context"
            " parallelism over Mamba layers; use cp = 1",
        )
    ]
    assert "modelling limit" in CORE["hybrid_context_parallel"].source
    assert broken(Layout(tp=2, pp=1, dp=2, cp=2), job(NO_MAMBA)) == []  # no Mamba layer, nothing to refuse


def test_fp8_needs_a_mamba_projection_width_of_a_multiple_of_16() -> None:
    """MambaMixer under fp8: (2 d_inner + 2 groups state + heads) % 16 == 0; here 2 * 384 + 2 * 4 * 16 + 12 = 908."""
    layout = Layout(tp=2, pp=1, dp=4)
    assert broken(layout, job(precision=Precision.BF16)) == []
    assert broken(layout, job(precision=Precision.FP8)) == [
        (
            "mamba_fp8_width",
            "mamba in_proj width 2 * d_inner(384) + 2 * num_groups(4) * state_dim(16) + num_heads(12) = 908, must"
            " be a multiple of 16 in fp8 training",
        )
    ]
    aligned = replace_mamba(num_heads=16)  # 2 * 512 + 128 + 16 = 1168 = 73 * 16
    assert broken(layout, job(aligned, precision=Precision.FP8)) == []


# --- framework rules ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("framework", "version", "refused"),
    [
        ("megatron", "core_v0.19.2", False),
        ("megatron", "core_v0.16.1", True),
        ("megatron", "core_v0.15.0", True),
        ("nemo", "2.7.3", True),
        ("nemo", "2.5.0rc0+8cfedd7", True),
        ("core", "planner", False),
    ],
)
def test_interleaving_a_hybrid_model_needs_core_v0_19(framework: str, version: str, refused: bool) -> None:
    """MambaStack up to core_v0.16 (and NeMo's SSMConfig) refuse interleaving; core_v0.19 reads '|' segments."""
    layout = Layout(tp=1, pp=2, dp=4, vp=3)
    found = broken(layout, job(), framework, version)
    expected = [
        (
            "hybrid_no_interleaving",
            "vp(3) > 1 with model.hybrid_pattern: this release's hybrid stack (Megatron-Core MambaStack) has no"
            " interleaved pipeline; use vp = 1",
        )
    ]
    assert found == (expected if refused else [])
    assert broken(layout, job(DENSE), framework, version) == []  # a transformer interleaves


@pytest.mark.parametrize(
    ("framework", "version", "refused"),
    [
        ("megatron", "core_v0.19.2", False),
        ("megatron", "core_v0.16.1", True),
        ("megatron", "core_v0.15.0", True),
        ("nemo", "2.7.3", True),
        ("nemo", "2.5.0rc0+8cfedd7", True),
    ],
)
def test_full_recompute_of_a_hybrid_model_needs_core_v0_19(framework: str, version: str, refused: bool) -> None:
    """MambaStack.forward has no checkpointing branch (up to core_v0.16); HybridStack's checkpointed_forward has."""
    full = Layout(tp=2, pp=1, dp=4, recompute=Recompute.FULL)
    found = [rule for rule, _ in broken(full, job(), framework, version)]
    assert found == (["hybrid_no_full_recompute"] if refused else [])
    selective = Layout(tp=2, pp=1, dp=4, recompute=Recompute.SELECTIVE)
    assert broken(selective, job(), framework, version) == []


@pytest.mark.parametrize(
    ("framework", "version", "even_only"),
    [
        ("megatron", "core_v0.19.2", False),
        ("megatron", "core_v0.16.1", False),
        ("megatron", "core_v0.15.0", True),
        ("nemo", "2.7.3", False),
        ("nemo", "2.5.0rc0+8cfedd7", True),
    ],
)
def test_old_mamba_stacks_split_the_pattern_evenly(framework: str, version: str, even_only: bool) -> None:
    """core_v0.15.0's MambaStack (and Megatron-LM b615e731's, NeMo 8cfedd7's) gives each rank num_layers // pp
    layers: 6 layers over pp 4 is [1, 2, 2, 1] by the planner's split, [1, 1, 1, 1] there. The embedding and the
    loss counted in the split are only other layer counts: pp 4 counting both is [1, 2, 2, 1], pp 2 is [3, 3]."""
    uneven = Layout(tp=1, pp=4, dp=2)
    found = broken(uneven, job(), framework, version)
    message = (
        "layers per stage [1, 2, 2, 1] with model.hybrid_pattern: this release's hybrid stack gives every stage"
        " num_layers // pp layers, so the stages must be equal (num_layers(6) % pp(4) = 0, the embedding and the"
        " loss not counted)"
    )
    assert found == ([("hybrid_even_stages", message)] if even_only else [])
    listed = replace(Layout(tp=1, pp=2, dp=4), layers_per_stage=(2, 4))
    found = broken(listed, job(), framework, version)
    explicit = (
        "layers_per_stage [2, 4] with model.hybrid_pattern: this release's hybrid stack gives every stage"
        " num_layers // pp layers, so the stages must be equal"
    )
    assert found == ([("hybrid_even_stages", explicit)] if even_only else [])
    counted = Layout(
        tp=1, pp=2, dp=4, account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True
    )
    assert broken(counted, job(), framework, version) == []  # 6 + 2 over 2 ranks: [3, 3], even
    assert broken(replace(Layout(tp=1, pp=2, dp=4), layers_per_stage=(3, 3)), job(), framework, version) == []
    assert broken(uneven, job(DENSE), framework, version) == []


def test_core_v0_15_knows_no_moe_layers_in_a_hybrid_pattern() -> None:
    """Symbols.VALID is M, * and - in core_v0.15.0 and Megatron-LM b615e731 (NeMo 8cfedd7); core_v0.16.1 adds E."""
    layout = Layout(tp=2, pp=1, dp=4)
    message = (
        "model.hybrid_pattern has 2 MoE layers (E): this release's hybrid layer allocation knows only M, * and -"
        " (Symbols.VALID); use a release with megatron-core 0.16 or later"
    )
    for framework, version in (("megatron", "core_v0.15.0"), ("nemo", "2.5.0rc0+8cfedd7")):
        assert broken(layout, job(HYBRID_MOE), framework, version) == [("megatron_hybrid_features", message)]
    for framework, version in (("megatron", "core_v0.16.1"), ("megatron", "core_v0.19.2"), ("nemo", "2.7.3")):
        assert broken(layout, job(HYBRID_MOE), framework, version) == []


@pytest.mark.parametrize(("framework", "version"), [r for r in RELEASES if r[0] in ("megatron", "nemo")])
def test_megatron_convolves_over_four_positions(framework: str, version: str) -> None:
    """MambaMixer's d_conv=4 has no config field: another conv_kernel cannot be launched on Megatron-Core."""
    model = replace_mamba(conv_kernel=3)
    found = broken(Layout(tp=2, pp=1, dp=4), job(model), framework, version)
    assert found == [
        (
            "megatron_hybrid_features",
            "model.mamba.conv_kernel(3): Megatron-Core's MambaMixer convolves over 4 positions (d_conv, no config"
            " field); use 4",
        )
    ]
    assert broken(Layout(tp=2, pp=1, dp=4), job(model)) == []  # the planner prices any kernel


@pytest.mark.parametrize(("framework", "version"), [r for r in RELEASES if r[0] in ("megatron", "nemo")])
def test_hybrid_models_overlap_no_moe_all_to_all(framework: str, version: str) -> None:
    """The combined 1F1B schedule needs GPTModel.build_schedule_plan, which the hybrid model lacks."""
    j = Job(HYBRID_MOE, TrainingSpec(global_batch_size=16, runtime=RuntimeFeatures(moe_a2a_overlap=True)), 8)
    found = [rule for rule, _ in broken(Layout(tp=1, pp=1, dp=8, ep=2), j, framework, version)]
    assert "megatron_hybrid_features" in found


@pytest.mark.parametrize(
    ("framework", "version", "refused_by"),
    [
        ("megatron", "core_v0.19.2", ["megatron_hybrid_features"]),
        ("megatron", "core_v0.16.1", ["megatron_hybrid_features"]),
        ("megatron", "core_v0.15.0", ["megatron_no_activation_offload"]),  # no flag at all there: one refusal
        ("nemo", "2.7.3", ["megatron_hybrid_features"]),
        ("nemo", "2.5.0rc0+8cfedd7", ["megatron_hybrid_features"]),
        ("core", "planner", []),
    ],
)
def test_hybrid_stacks_offload_no_activations(framework: str, version: str, refused_by: list[str]) -> None:
    """The CPU-offload context is TransformerBlock's; neither MambaStack nor HybridStack enters one."""
    j = job(activation_offload_layers=2)
    assert [rule for rule, _ in broken(Layout(tp=2, pp=1, dp=4), j, framework, version)] == refused_by


@pytest.mark.parametrize("version", ["0.3.0", "0.2.2"])
def test_torchtitan_refuses_hybrid_models(version: str) -> None:
    """TorchTitan (v0.2.2's models, v0.3.0's wheel) has no Mamba-2 layers."""
    layout = Layout(tp=2, pp=1, dp=4, zero_stage=1)
    message = (
        "model.hybrid_pattern: TorchTitan has no Mamba-2 layers (nor a per-layer hybrid stack), so it cannot train a"
        " hybrid model; plan it for Megatron-LM or NeMo"
    )
    assert broken(layout, job(), "torchtitan", version) == [("torchtitan_no_hybrid", message)]
    assert broken(layout, job(NO_MAMBA), "torchtitan", version) == [("torchtitan_no_hybrid", message)]
    assert broken(layout, job(DENSE), "torchtitan", version) == []


def test_every_hybrid_rule_cites_its_source() -> None:
    names = {
        "mamba_split",
        "hybrid_context_parallel",
        "mamba_fp8_width",
        "hybrid_no_interleaving",
        "hybrid_no_full_recompute",
        "hybrid_even_stages",
        "megatron_hybrid_features",
        "torchtitan_no_hybrid",
    }
    found = {rule.name: rule for framework, version in RELEASES for rule in rule_set(framework, version).rules}
    assert names <= set(found)
    for name in names:
        assert ".py" in found[name].source, name


# --- no effect on transformers, vectorised = scalar, the space ---------------------------------------------------


_BY_CODE = {code: mode for mode, code in RECOMPUTE_CODE.items()}
_FLAGS = ("sequence_parallel", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")


def _random_columns(count: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {
        "tp": rng.choice([1, 2, 3, 4, 8], count),
        "pp": rng.choice([1, 2, 3, 4, 6], count),
        "dp": rng.choice([1, 2, 4], count),
        "cp": rng.choice([1, 2], count),
        "ep": rng.choice([1, 2, 4], count),
        "etp": rng.choice([1, 2, 4], count),
        "vp": rng.choice([1, 2, 3], count),
        "micro_batch_size": rng.choice([1, 2], count),
        "recompute": rng.integers(0, 3, count),
        "sequence_parallel": rng.integers(0, 2, count),
        "zero_stage": rng.integers(0, 4, count),
        "account_for_embedding_in_pipeline_split": rng.integers(0, 2, count),
        "account_for_loss_in_pipeline_split": rng.integers(0, 2, count),
    }


def _layout(columns: dict[str, np.ndarray], i: int) -> Layout:
    return Layout(
        **{a: int(v[i]) for a, v in columns.items() if a not in (*_FLAGS, "recompute")},
        **{a: bool(columns[a][i]) for a in _FLAGS},
        recompute=_BY_CODE[int(columns["recompute"][i])],
    )


_HYBRID_RULES = {
    "mamba_split",
    "hybrid_context_parallel",
    "mamba_fp8_width",
    "hybrid_no_interleaving",
    "hybrid_no_full_recompute",
    "hybrid_even_stages",
    "megatron_hybrid_features",
    "torchtitan_no_hybrid",
}


@pytest.mark.parametrize(("framework", "version"), RELEASES)
def test_hybrid_rules_never_fire_for_a_transformer(framework: str, version: str) -> None:
    columns = _random_columns(200)
    for model in (DENSE, MOE):
        for training in (
            TrainingSpec(global_batch_size=16, precision=Precision.FP8),
            TrainingSpec(global_batch_size=16, activation_offload_layers=2),
        ):
            j = Job(model, training, 16)
            for rule in rule_set(framework, version).rules:
                if rule.name in _HYBRID_RULES:
                    assert bool(rule.ok(columns, j).all()), (rule.name, model.name)


@pytest.mark.parametrize(("framework", "version"), RELEASES)
@pytest.mark.parametrize("model", [HYBRID, HYBRID_MOE, NO_MAMBA], ids=["hybrid", "hybrid-moe", "no-mamba"])
def test_vectorised_test_equals_the_scalar_one(framework: str, version: str, model: ModelSpec) -> None:
    columns = _random_columns(150)
    trainings = (
        TrainingSpec(global_batch_size=16, precision=Precision.FP8),
        TrainingSpec(global_batch_size=16, activation_offload_layers=2),
        TrainingSpec(global_batch_size=16, runtime=RuntimeFeatures(moe_a2a_overlap=True)),
    )
    for training in trainings:
        j = Job(model, training, 16)
        for rule in rule_set(framework, version).rules:
            ok = np.broadcast_to(rule.ok(columns, j), (150,))
            for i in range(150):
                assert bool(ok[i]) == rule.holds(_layout(columns, i), j), (rule.name, _layout(columns, i))


# (model, GPUs, rule set): each release's own refusals in a small space (vp up to 3, ZeRO 1).
SPACES = [
    (HYBRID, 4, "core", None),
    (HYBRID, 8, "megatron", "core_v0.19.2"),
    (HYBRID, 8, "megatron", "core_v0.16.1"),
    (HYBRID, 8, "megatron", "core_v0.15.0"),
    (HYBRID, 8, "nemo", "2.5.0rc0+8cfedd7"),
    (HYBRID_MOE, 4, "nemo", "2.7.3"),
    (HYBRID_MOE, 4, "megatron", "core_v0.15.0"),
    (HYBRID, 4, "torchtitan", "0.3.0"),
]


@pytest.mark.parametrize(("model", "gpus", "framework", "version"), SPACES)
def test_space_is_exactly_the_legal_layouts(model: ModelSpec, gpus: int, framework: str, version: str | None) -> None:
    """The search's candidates (rules applied at the level binding their axes) are the layouts the scalar rules
    of the set accept, and nothing else."""
    training = TrainingSpec(global_batch_size=8)
    allowed: dict[str, list[object]] = {"vp": [1, 2, 3], "zero_stage": [1], "micro_batch_size": [1, 2]}
    rules_of = rule_set(framework, version)
    space = build_space(model, training, gpus, parse_constraints(allowed), rules_of)
    c = space.candidates
    searched = {replace(c.layout(i, model.num_layers), layers_per_stage=None) for i in range(len(c))}
    expected = {
        x
        for x in legal_layouts(model, gpus, training, allowed)
        if not layout_violations(x, model, training, gpus, rules_of)
    }
    assert searched == expected
    assert len(searched) == len(c)


def test_the_space_counts_what_each_hybrid_rule_removes() -> None:
    training = TrainingSpec(global_batch_size=48)
    space = build_space(HYBRID, training, 12, {}, rule_set("megatron", "core_v0.16.1"))
    assert space.rejected["mamba_split"] > 0 and space.rejected["hybrid_context_parallel"] > 0
    assert space.rejected["hybrid_no_interleaving"] > 0 and space.rejected["hybrid_no_full_recompute"] > 0
    c = space.candidates
    assert set(c.cp.tolist()) == {1} and set(c.vp.tolist()) == {1} and set(c.tp.tolist()) == {1, 2}
    assert RECOMPUTE_CODE[Recompute.FULL] not in set(c.recompute.tolist())


# --- the error names the field and the rule ---------------------------------------------------------------------


def test_a_launch_for_a_tp_that_splits_a_mamba_head_is_refused_naming_the_rule() -> None:
    model = replace_mamba(num_heads=8, head_dim=48)
    with pytest.raises(InvalidSpecError) as refused:
        launch_args(model, TrainingSpec(global_batch_size=16), Layout(tp=3, pp=1, dp=1), 3, 8)
    assert refused.value.field == "layout"
    assert refused.value.message == (
        "mamba_split: mamba.num_heads(8) % tp(3) = 2, must be 0; mamba_split: mamba.num_groups(4) % tp(3) = 1, must"
        " be 0"
    )
