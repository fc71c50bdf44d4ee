"""Hybrid models (`ModelSpec.hybrid_pattern`): Megatron-LM's hybrid entry point with the pattern, the Mamba mixer's
flags and squared ReLU; NeMo's Nemotron-H recipe with SSMConfig's keys; TorchTitan says it cannot train them.

Every flag and key is checked against the recorded lists of each release (tests/data), as test_flags_exist.py does
for the transformer cases.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

import pytest

from planner.launch import LaunchArgs, launch_args
from planner.launch.megatron import HYBRID_RELEASES, MEGATRON_VERSIONS
from planner.launch.nemo import NEMO_VERSIONS
from planner.launch.pipeline_layout import hybrid_layer_pattern, hybrid_segments
from planner.layout import Layout
from planner.presets import get_preset
from planner.rules.core import rank_chunks
from planner.specs import MambaSpec, ModelSpec, MoESpec, Precision, Recompute, TrainingSpec
from tests.launch.shell import torchrun_argv
from tests.launch.test_flags_exist import MEGATRON_FILES, NEMO_FILES, _names

PATTERN_8B = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
NEMOTRON_H_8B = ModelSpec(
    name="Nemotron-H 8B",
    num_layers=52,
    hidden_size=4096,
    num_attention_heads=32,
    num_query_groups=8,
    ffn_hidden_size=21504,
    vocab_size=131072,
    seq_length=8192,
    hybrid_pattern=PATTERN_8B,
    mamba=MambaSpec(state_dim=128, head_dim=64, num_groups=8, num_heads=128),
)
NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NEMOTRON_3_NANO = ModelSpec(
    name="Nemotron 3 Nano",
    num_layers=52,
    hidden_size=2688,
    num_attention_heads=32,
    num_query_groups=2,
    head_dim=128,
    ffn_hidden_size=1856,
    vocab_size=131072,
    seq_length=8192,
    hybrid_pattern=NANO_PATTERN,
    mamba=MambaSpec(state_dim=128, head_dim=64, num_groups=8, num_heads=64),
    moe=MoESpec(
        num_experts=128,
        top_k=6,
        expert_ffn_hidden_size=1856,
        num_shared_experts=2,
        router_score_function="sigmoid",
        router_expert_bias=True,
        router_topk_scaling_factor=2.5,
        router_load_balancing="seq_aux_loss",
        router_aux_loss_coeff=0.0001,
    ),
)
TRAINING = TrainingSpec(global_batch_size=64)
RELEASES = list(MEGATRON_VERSIONS)


def launch(
    model: ModelSpec = NEMOTRON_H_8B,
    layout: Layout | None = None,
    gpus: int = 32,
    megatron: str = "core_v0.19.2",
    nemo: str = "2.7.3",
    training: TrainingSpec = TRAINING,
) -> LaunchArgs:
    layout = layout or Layout(tp=4, pp=1, dp=8)
    return launch_args(model, training, layout, gpus, 8, None, {"megatron": megatron, "nemo": nemo})


def megatron_program(args: LaunchArgs) -> list[str]:
    """The entry script and its flags, as the shell hands them to torchrun."""
    tokens = shlex.split(args.megatron.command)
    entry = next(t for t in tokens if t.endswith(".py"))
    return tokens[tokens.index(entry) :]


def flag_values(tokens: list[str], flag: str) -> list[str]:
    """The values after `flag` (up to the next flag), or of `flag=value`."""
    for i, token in enumerate(tokens):
        if token.startswith(f"{flag}="):
            return [token.split("=", 1)[1]]
        if token == flag:
            values = []
            for t in tokens[i + 1 :]:
                if t.startswith("--"):
                    break
                values.append(t)
            return values
    raise KeyError(flag)


# --- Megatron-LM ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("release", "entry", "pattern_flag", "spec", "hybrid_flag"),
    [
        (
            "core_v0.19.2",
            "pretrain_hybrid.py",
            "--hybrid-layer-pattern",
            ["megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"],
            False,
        ),
        (
            "core_v0.16.1",
            "pretrain_mamba.py",
            "--hybrid-override-pattern",
            ["megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"],
            True,
        ),
        (
            "core_v0.15.0",
            "pretrain_mamba.py",
            "--hybrid-override-pattern",
            ["megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"],
            True,
        ),
    ],
)
def test_megatron_launches_the_hybrid_entry_point_with_the_mamba_flags(
    release: str, entry: str, pattern_flag: str, spec: list[str], hybrid_flag: bool
) -> None:
    args = launch(megatron=release)
    program = megatron_program(args)
    assert program[0] == entry and "pretrain_gpt.py" not in args.megatron.command
    assert flag_values(program, pattern_flag) == [PATTERN_8B]
    assert flag_values(program, "--spec") == spec
    assert ("--is-hybrid-model" in program) is hybrid_flag
    assert flag_values(program, "--mamba-state-dim") == ["128"]
    assert flag_values(program, "--mamba-head-dim") == ["64"]
    assert flag_values(program, "--mamba-num-groups") == ["8"]
    assert flag_values(program, "--mamba-num-heads") == ["128"]
    assert flag_values(program, "--num-layers") == ["52"]
    assert "--squared-relu" in program and "--swiglu" not in program
    config = args.megatron.config
    assert config[pattern_flag] == PATTERN_8B and config["--spec"] == spec and config["--squared-relu"] is True
    assert HYBRID_RELEASES[release].entry == entry


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize(
    "layout",
    [
        Layout(tp=4, pp=1, dp=8),
        Layout(tp=2, pp=4, dp=4, recompute=Recompute.SELECTIVE, sequence_parallel=True, zero_stage=1),
        Layout(tp=1, pp=8, dp=4, zero_stage=1),
    ],
    ids=["tp4", "pp4", "pp8-uneven"],
)
def test_every_emitted_megatron_flag_exists_in_its_release(release: str, layout: Layout) -> None:
    """The command line, the sbatch script's torchrun line and `config`, against the release's recorded flags."""
    for model in (NEMOTRON_H_8B, NEMOTRON_3_NANO):
        args = launch(model, layout, megatron=release)
        known = _names(MEGATRON_FILES[release])
        entry = HYBRID_RELEASES[release].entry
        assert args.megatron.script is not None
        script = torchrun_argv(args.megatron.script, 0)
        assert script[script.index(entry) + 1 :] == megatron_program(args)[1:]
        flags = [t.split("=", 1)[0] for t in megatron_program(args) if t.startswith("--")]
        assert [f for f in flags if f not in known] == []
        assert set(args.megatron.config) <= known
        assert f"#SBATCH --job-name=megatron-{entry.removesuffix('.py').replace('_', '-')}" in args.megatron.script


def test_a_transformer_still_launches_pretrain_gpt() -> None:
    dense = NEMOTRON_H_8B.model_copy(update={"hybrid_pattern": None, "mamba": None})
    program = megatron_program(launch(dense))
    assert program[0] == "pretrain_gpt.py"
    assert not [t for t in program if "hybrid" in t or "mamba" in t or t in ("--spec", "--squared-relu")]


def test_the_mamba_heads_written_are_the_priced_ones_when_the_spec_leaves_them_to_expand_2() -> None:
    """mamba.num_heads null: the launch writes hidden_size * 2 / head_dim (what Megatron-Core would derive)."""
    derived = NEMOTRON_H_8B.model_copy(update={"mamba": MambaSpec(state_dim=128, head_dim=64, num_groups=8)})
    assert flag_values(megatron_program(launch(derived)), "--mamba-num-heads") == ["128"]
    assert launch(derived).nemo.config["model.config.mamba_num_heads"] == 128


def test_interleaving_on_core_v0_19_is_written_into_the_pattern() -> None:
    """core_v0.19 reads one '|' segment per model chunk, segment vp_stage * pp + pp_rank; no virtual-stage flag."""
    layout = Layout(tp=2, pp=2, dp=8, vp=2, zero_stage=1)
    program = megatron_program(launch(layout=layout))
    segments = flag_values(program, "--hybrid-layer-pattern")[0].split("|")
    assert segments == [PATTERN_8B[i * 13 : (i + 1) * 13] for i in range(4)]
    assert "".join(segments) == PATTERN_8B
    for flag in (
        "--num-layers-per-virtual-pipeline-stage",
        "--num-virtual-stages-per-pipeline-rank",
        "--pipeline-model-parallel-layout",
        "--decoder-first-pipeline-num-layers",
        "--account-for-embedding-in-pipeline-split",
    ):
        assert flag not in program


def test_uneven_interleaved_chunks_are_the_planners() -> None:
    """52 layers over pp 4 x vp 2 with the embedding and loss counted: the chunks `rank_chunks` gives each rank."""
    layout = Layout(
        tp=2,
        pp=4,
        dp=4,
        vp=2,
        account_for_embedding_in_pipeline_split=True,
        account_for_loss_in_pipeline_split=True,
    )
    model = NEMOTRON_H_8B.model_copy(update={"num_layers": 54, "hybrid_pattern": PATTERN_8B + "M-"})
    segments = hybrid_segments(model, layout)
    chunks = rank_chunks((13, 14, 14, 13), 2)
    assert [len(s) for s in segments] == [chunks[r][v] for v in range(2) for r in range(4)]
    assert hybrid_layer_pattern(model, layout) == "|".join(segments)
    program = megatron_program(launch(model, layout))
    assert flag_values(program, "--hybrid-layer-pattern") == ["|".join(segments)]
    assert not [t for t in program if t.startswith("--account-for")]


@pytest.mark.parametrize("release", RELEASES)
def test_an_uneven_split_is_written_as_first_and_last_stage_counts(release: str) -> None:
    """52 layers over pp 8: the planner's [5, 7 x 6, 5]; no pipes without interleaving (the observation parser reads
    the pattern back), so the first/last counts MambaStack and select_pipeline_segment read."""
    program = megatron_program(launch(layout=Layout(tp=1, pp=8, dp=4), megatron=release))
    assert flag_values(program, "--decoder-first-pipeline-num-layers") == ["5"]
    assert flag_values(program, "--decoder-last-pipeline-num-layers") == ["5"]
    assert "|" not in " ".join(program)


@pytest.mark.parametrize("release", RELEASES)
def test_the_embedding_and_loss_in_the_split_become_layer_counts(release: str) -> None:
    """No hybrid stack reads account_for_embedding/loss_in_pipeline_split (core_v0.19 refuses them beside a
    pattern): the same split is written as the first/last counts. 51 layers and the embedding over pp 2: 26
    pipeline layers a stage, [25, 26] layers."""
    counted = Layout(tp=4, pp=2, dp=4, account_for_embedding_in_pipeline_split=True)
    model = NEMOTRON_H_8B.model_copy(update={"num_layers": 51, "hybrid_pattern": PATTERN_8B[:51]})
    program = megatron_program(launch(model, counted, megatron=release))
    assert not [t for t in program if t.startswith("--account-for")]
    assert flag_values(program, "--decoder-first-pipeline-num-layers") == ["25"]
    assert flag_values(program, "--decoder-last-pipeline-num-layers") == ["26"]


@pytest.mark.parametrize(
    ("release", "noted"), [("core_v0.19.2", False), ("core_v0.16.1", True), ("core_v0.15.0", True)]
)
def test_what_an_old_mamba_stack_cannot_run_is_left_out_and_said(release: str, noted: bool) -> None:
    """Interleaving and full recompute up to core_v0.16 (rules hybrid_no_interleaving, hybrid_no_full_recompute)."""
    layout = Layout(tp=2, pp=2, dp=8, vp=2, recompute=Recompute.FULL, zero_stage=1)
    args = launch(layout=layout, megatron=release)
    notes = [n for n in args.megatron.notes if "MambaStack" in n]
    if not noted:
        assert notes == []
        return
    assert len(notes) == 1 and "interleaving (vp 2" in notes[0] and "full recompute" in notes[0]
    program = megatron_program(args)
    assert "|" not in " ".join(program) and "--num-layers-per-virtual-pipeline-stage" not in program


def test_a_pattern_starting_with_an_mlp_is_one_argument() -> None:
    """argparse would read '-M*...' as an option: the launch writes --flag=value."""
    model = NEMOTRON_H_8B.model_copy(update={"hybrid_pattern": "-" + PATTERN_8B[1:]})
    args = launch(model, megatron="core_v0.16.1")
    assert f"--hybrid-override-pattern=-{PATTERN_8B[1:]}" in megatron_program(args)
    assert args.megatron.config["--hybrid-override-pattern"] == "-" + PATTERN_8B[1:]


def test_squared_relu_turns_the_bias_gelu_fusion_off_beside_biases() -> None:
    """TransformerConfig refuses a fused bias activation other than GeLU/SwiGLU; with biases the fusion is on."""
    biased = NEMOTRON_H_8B.model_copy(update={"linear_bias": True})
    program = megatron_program(launch(biased))
    assert "--squared-relu" in program and "--no-bias-gelu-fusion" in program
    assert "--no-bias-gelu-fusion" not in megatron_program(launch())


def test_a_gated_hybrid_mlp_is_swiglu() -> None:
    gated = NEMOTRON_H_8B.model_copy(update={"gated_mlp": True})
    program = megatron_program(launch(gated))
    assert "--swiglu" in program and "--squared-relu" not in program


def test_hybrid_moe_layers_are_the_patterns() -> None:
    """Nemotron 3 Nano: the MoE flags, no --moe-layer-freq (the pattern's E layers are the MoE layers)."""
    args = launch(NEMOTRON_3_NANO, Layout(tp=4, pp=1, dp=8, ep=8, etp=1))
    program = megatron_program(args)
    assert flag_values(program, "--num-experts") == ["128"] and flag_values(program, "--moe-router-topk") == ["6"]
    assert flag_values(program, "--moe-ffn-hidden-size") == ["1856"]
    assert flag_values(program, "--moe-shared-expert-intermediate-size") == ["3712"]
    assert flag_values(program, "--moe-router-topk-scaling-factor") == ["2.5"]
    assert flag_values(program, "--kv-channels") == ["128"]
    assert "--moe-layer-freq" not in program and "--moe-router-enable-expert-bias" in program
    assert args.nemo.config["model.config.num_moe_experts"] == 128
    assert "model.config.moe_layer_freq" not in args.nemo.config


def test_megatron_notes_say_the_published_models_attend_without_position_embeddings() -> None:
    notes = launch().megatron.notes
    assert any("--position-embedding-type none" in n and "model.hybrid_pattern" in n for n in notes)
    assert flag_values(megatron_program(launch()), "--position-embedding-type") == ["rope"]


# --- NeMo ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", list(NEMO_VERSIONS))
@pytest.mark.parametrize(
    ("model", "recipe"),
    [(NEMOTRON_H_8B, "nemotronh_8b"), (NEMOTRON_3_NANO, "nemotronh_8b")],
    ids=["nemotron-h-8b", "nemotron-3-nano"],
)
def test_nemo_sets_ssmconfigs_fields_on_a_nemotron_h_recipe(release: str, model: ModelSpec, recipe: str) -> None:
    """NeMo 2's SSMConfig.hybrid_override_pattern and TransformerConfig's mamba_* fields, every key in the
    release's recorded list; the Nemotron-H recipe (its config class has squared ReLU and is_hybrid_model)."""
    layout = Layout(tp=4, pp=1, dp=8, ep=8 if model.moe else 1, etp=1 if model.moe else 4)
    args = launch(model, layout, nemo=release)
    config = args.nemo.config
    assert shlex.split(args.nemo.command)[4] == recipe
    mamba = model.mamba
    assert mamba is not None
    assert config["model.config.hybrid_override_pattern"] == model.hybrid_pattern
    assert config["model.config.is_hybrid_model"] is True
    assert config["model.config.mamba_state_dim"] == mamba.state_dim
    assert config["model.config.mamba_head_dim"] == mamba.head_dim
    assert config["model.config.mamba_num_groups"] == mamba.num_groups
    assert config["model.config.mamba_num_heads"] == model.mamba_num_heads
    assert config["model.config.gated_linear_unit"] is False
    known = _names(NEMO_FILES[release])
    assert [k for k in config if k not in known] == []
    assert f"factory.{recipe}" in _names(NEMO_FILES["2.7.3"])


def test_nemo_uses_the_56b_recipe_for_its_shape() -> None:
    pattern = (
        "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-"
        "M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    )
    model = ModelSpec(
        num_layers=118,
        hidden_size=8192,
        num_attention_heads=64,
        num_query_groups=8,
        ffn_hidden_size=32768,
        vocab_size=131072,
        seq_length=8192,
        hybrid_pattern=pattern,
        mamba=MambaSpec(state_dim=256, head_dim=64, num_groups=8, num_heads=256),
    )
    args = launch(model, Layout(tp=8, pp=1, dp=4))
    assert shlex.split(args.nemo.command)[4] == "nemotronh_56b"


def test_nemo_writes_the_split_as_stage_counts_without_interleaving() -> None:
    """MambaStack reads num_layers_in_first/last_pipeline_stage (megatron-core 0.16.1); NeMo's SSMConfig refuses vp,
    so the launch writes none and says so."""
    layout = Layout(tp=1, pp=8, dp=4, vp=2, zero_stage=1)
    model = NEMOTRON_H_8B.model_copy(update={"num_layers": 48, "hybrid_pattern": PATTERN_8B[:48]})
    args = launch(model, layout)
    s = "trainer.strategy."
    assert args.nemo.config[f"{s}virtual_pipeline_model_parallel_size"] is None
    assert f"{s}pipeline_model_parallel_layout" not in args.nemo.config
    assert any("interleaving (vp 2" in n for n in args.nemo.notes)
    uneven = launch(NEMOTRON_H_8B, Layout(tp=1, pp=8, dp=4)).nemo.config
    assert (uneven[f"{s}num_layers_in_first_pipeline_stage"], uneven[f"{s}num_layers_in_last_pipeline_stage"]) == (5, 5)


def test_nemo_says_how_to_set_a_gated_hybrid_mlp() -> None:
    gated = NEMOTRON_H_8B.model_copy(update={"gated_mlp": True})
    notes = launch(gated).nemo.notes
    assert any("activation_func" in n and "silu" in n for n in notes)
    assert not any("activation_func" in n for n in launch().nemo.notes)


# --- TorchTitan ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.3.0", "0.2.2"])
def test_torchtitan_launch_says_it_cannot_train_a_hybrid_model(release: str) -> None:
    args = launch_args(
        NEMOTRON_H_8B, TRAINING, Layout(tp=4, pp=1, dp=8, zero_stage=1), 32, 8, None, {"torchtitan": release}
    )
    notes = [n for n in args.torchtitan.notes if "torchtitan_no_hybrid" in n]
    assert len(notes) == 1 and "no Mamba-2 layers" in notes[0]
    dense = NEMOTRON_H_8B.model_copy(update={"hybrid_pattern": None, "mamba": None})
    plain = launch_args(dense, TRAINING, Layout(tp=4, pp=1, dp=8, zero_stage=1), 32, 8, None, {"torchtitan": release})
    assert not any("hybrid" in n for n in plain.torchtitan.notes)


def test_fp8_hybrid_launch_keeps_every_layer_in_fp8_as_priced() -> None:
    """No first/last bf16 layers: Megatron-LM leaves --first-last-layers-bf16 off; NeMo's precision plugin overwrites
    the Nemotron-H config's first_last_layers_bf16 with its own default (false)."""
    args = launch(training=TrainingSpec(global_batch_size=64, precision=Precision.FP8))
    assert "--first-last-layers-bf16" not in megatron_program(args)
    assert args.nemo.config["trainer.plugins.fp8"] == "hybrid"


def test_hybrid_launches_are_pure() -> None:
    layout = replace(Layout(tp=2, pp=4, dp=4), layers_per_stage=(12, 14, 14, 12))
    assert launch(layout=layout) == launch(layout=layout)
    program = megatron_program(launch(layout=layout, megatron="core_v0.16.1"))
    assert flag_values(program, "--decoder-first-pipeline-num-layers") == ["12"]
    assert flag_values(program, "--decoder-last-pipeline-num-layers") == ["12"]


@pytest.mark.parametrize(
    ("preset", "recipe"),
    [
        ("nemotron-h-8b", "nemotronh_8b"),
        ("nemotron-h-56b", "nemotronh_56b"),
        ("nemotron-3-nano-30b-a3b", "nemotronh_8b"),
    ],
)
def test_the_presets_launch_on_nemotron_h_recipes(preset: str, recipe: str) -> None:
    """NeMo 2.7.3 ships nemotronh_8b and nemotronh_56b (NemotronHConfig8B / 56B); Nemotron 3 Nano has no NeMo 2
    recipe, so it takes the family's, whose overrides set its shape."""
    model = get_preset(preset).model
    layout = Layout(tp=4, pp=1, dp=8, ep=8 if model.moe else 1, etp=1 if model.moe else 4)
    args = launch(model, layout)
    assert shlex.split(args.nemo.command)[4] == recipe
    assert megatron_program(args)[0] == "pretrain_hybrid.py"
