"""The TorchTitan v0.3.0 launch on hand-checked cases: config function, overrides, stage split, notes.

Split arithmetic: torchtitan/distributed/pipeline_parallel.py `_get_pipeline_metadata` makes
ceil((L + first_less + last_less) / layers_per_stage) stages and `_generate_llm_fqn_per_model_part` gives each
(L + first_less + last_less) / stages effective layers, the first and last trimmed by their `*_less_layers`.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from planner.launch import FrameworkLaunch, LaunchInputs, TokenizerInputs, launch_args
from planner.layout import Layout
from planner.presets import get_preset
from planner.specs import ModelSpec, Precision, Recompute, RuntimeFeatures, TrainingSpec
from tests.launch.shell import processes_per_node

LLAMA8, LLAMA70, LLAMA405 = (get_preset(p).model for p in ("llama3-8b", "llama3-70b", "llama3-405b"))
NEOX, DEEPSEEK, MIXTRAL = (get_preset(p).model for p in ("gpt-neox-20b", "deepseek-v3", "mixtral-8x7b"))


def _titan(
    model: ModelSpec, layout: Layout, batch: int, gpus_per_node: int = 8, inputs: LaunchInputs | None = None, **kw: Any
) -> FrameworkLaunch:
    training = TrainingSpec(global_batch_size=batch, **kw)
    return launch_args(model, training, layout, layout.world_size, gpus_per_node, inputs).torchtitan


def _program(launch: FrameworkLaunch) -> list[str]:
    tokens = shlex.split(launch.command)
    return tokens[tokens.index("torchtitan.train") + 1 :]


def _value(launch: FrameworkLaunch, flag: str) -> str:
    program = _program(launch)
    return program[program.index(flag) + 1]


def _section(launch: FrameworkLaunch, name: str) -> dict[str, Any]:
    section = launch.config[name]
    assert isinstance(section, dict)
    return section


def test_default_release_is_0_3_0_and_0_2_2_stays_reachable() -> None:
    layout = Layout(tp=8, pp=4, dp=4)
    training = TrainingSpec(global_batch_size=256)
    assert _titan(LLAMA70, layout, 256).framework_version.startswith("TorchTitan v0.3.0")
    older = launch_args(LLAMA70, training, layout, 128, 8, None, {"torchtitan": "0.2.2"}).torchtitan
    assert older.framework_version.startswith("TorchTitan v0.2.2") and "--model.flavor" in older.args


def test_even_split_names_the_shipped_function_and_every_degree() -> None:
    launch = _titan(LLAMA70, Layout(tp=8, pp=4, dp=4), 256)  # 80 layers / 4 = 20 per stage
    assert _program(launch)[:4] == ["--module", "llama3", "--config", "llama3_70b"]
    assert _section(launch, "parallelism") == {
        "data_parallel_replicate_degree": 4,
        "data_parallel_shard_degree": 1,
        "fsdp_reshard_after_forward": "never",
        "tensor_parallel_degree": 8,
        "pipeline_parallel_degree": 4,
        "context_parallel_degree": 1,
        "expert_parallel_degree": 1,
        "enable_sequence_parallel": False,
        "pipeline_parallel_schedule": "1F1B",
        "pipeline_parallel_microbatch_size": 1,
        "pipeline_parallel_layers_per_stage": 20,
        "pipeline_parallel_first_stage_less_layers": 0,
        "pipeline_parallel_last_stage_less_layers": 0,
    }
    # pp > 1: one pipeline pass over local_batch_size = 256 / dp(4) = 64 micro-batches of 1
    assert _section(launch, "training") == {
        "local_batch_size": 64,
        "global_batch_size": 256,
        "seq_len": 8192,
        "mixed_precision_param": "bfloat16",
        "disable_cuda_graphs": True,
    }
    assert "--parallelism.no-enable-sequence-parallel" in launch.args
    assert _program(launch)[-1] == "activation-checkpoint:none"
    assert launch.args == _program(launch)[4:]


def test_uneven_split_trims_the_last_stage() -> None:
    """44 layers as (23, 21): layers_per_stage 23, last_less 2 -> ceil(46 / 23) = 2 stages of 23 - (0, 2)."""
    launch = _titan(NEOX, Layout(tp=2, pp=2, dp=4, zero_stage=1, layers_per_stage=(23, 21)), 512)
    split = {k: v for k, v in _section(launch, "parallelism").items() if "layers" in k}
    assert split == {
        "pipeline_parallel_layers_per_stage": 23,
        "pipeline_parallel_first_stage_less_layers": 0,
        "pipeline_parallel_last_stage_less_layers": 2,
    }
    assert _program(launch)[:4] == ["--module", "MODULE", "--config", "CONFIG"]  # no shipped GPT-NeoX function
    assert "placeholders" in launch.notes[0] and "model_spec" in launch.notes[0]


def test_loss_in_the_split_is_torchtitans_last_stage_less_layers() -> None:
    """Megatron's loss counted as a layer: 80 + 1 = 81 over pp(3) * vp(9) chunks of 3, the last one 2 layers:
    layers_per_stage 3, last_less 1 -> ceil(81 / 3) = 27 stages = pp * vp."""
    layout = Layout(tp=4, pp=3, dp=8, vp=9, zero_stage=1, account_for_loss_in_pipeline_split=True)
    par = _section(_titan(LLAMA70, layout, 96), "parallelism")
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert (par["pipeline_parallel_layers_per_stage"], par["pipeline_parallel_last_stage_less_layers"]) == (3, 1)
    assert par["pipeline_parallel_first_stage_less_layers"] == 0


def test_uneven_interleaved_split_names_every_stages_modules_on_the_cli() -> None:
    """126 layers as (6, 8 x 15) over vp 2: 32 chunks, rank 0's of 3 layers, the others of 4."""
    layers = (6,) + (8,) * 15
    layout = Layout(tp=8, pp=16, dp=8, vp=2, sequence_parallel=True, zero_stage=3, layers_per_stage=layers)
    launch = _titan(LLAMA405, layout, 2048, precision=Precision.FP8)
    parts = _section(launch, "parallelism")["module_fqns_per_model_part"]
    assert len(parts) == 32
    assert parts[0] == ["tok_embeddings", "layers.0", "layers.1", "layers.2"]
    assert parts[1] == ["layers.3", "layers.4", "layers.5", "layers.6"]
    assert parts[16] == ["layers.63", "layers.64", "layers.65"]  # rank 0's second chunk
    assert parts[-1][-2:] == ["norm", "lm_head"] and parts[-1][0] == "layers.122"
    program = _program(launch)
    at = program.index("--parallelism.module-fqns-per-model-part")
    assert program[at + 1 : at + 33] == [",".join(p) for p in parts]
    assert _value(launch, "--config") == "llama3_405b"  # its model spec converts Linear layers to float8
    assert _value(launch, "--parallelism.fsdp-reshard-after-forward") == "always"


@pytest.mark.parametrize(
    ("layout", "degrees"),
    [
        (Layout(tp=2, pp=1, dp=32), (32, 1)),
        (Layout(tp=2, pp=1, dp=32, zero_stage=2), (1, 32)),
        (Layout(tp=1, pp=4, dp=16, ep=4), (4, 4)),  # ZeRO 0, ep 4: experts shard out of dp_shard * cp
        (Layout(tp=1, pp=1, dp=32, cp=2, ep=4), (16, 2)),  # cp(2) * dp_shard(2) = 4 = ep
    ],
)
def test_dp_degrees(layout: Layout, degrees: tuple[int, int]) -> None:
    model = MIXTRAL if layout.ep > 1 else LLAMA8
    par = _section(_titan(model, layout, 512), "parallelism")
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == degrees


@pytest.mark.parametrize("recompute", list(Recompute))
def test_recompute_is_the_last_token_subcommand(recompute: Recompute) -> None:
    launch = _titan(LLAMA8, Layout(tp=2, pp=1, dp=4, recompute=recompute), 64)
    assert _program(launch)[-1] == f"activation-checkpoint:{recompute.value}"
    assert launch.config["activation_checkpoint"] == recompute.value


@pytest.mark.parametrize(
    ("model", "precision", "function"),
    [
        (LLAMA8, Precision.BF16, "llama3_8b"),
        (LLAMA8, Precision.FP8, "CONFIG"),  # no float8 function ships for 8B
        (LLAMA405, Precision.BF16, "CONFIG"),  # llama3_405b is float8
        (LLAMA405, Precision.FP8, "llama3_405b"),
        (DEEPSEEK, Precision.BF16, "deepseek_v3_671b"),
        (DEEPSEEK, Precision.FP8, "deepseek_v3_671b_float8"),
        (MIXTRAL, Precision.BF16, "CONFIG"),
    ],
)
def test_config_function_by_shape_and_precision(model: ModelSpec, precision: Precision, function: str) -> None:
    layout = Layout(tp=8, pp=1, dp=16, zero_stage=1)
    launch = _titan(model, layout, 256, precision=precision)
    assert _value(launch, "--config") == function
    if function == "CONFIG":
        assert _value(launch, "--module") == "MODULE"
        assert ("Float8LinearConverter" in launch.notes[0]) == (precision is Precision.FP8)


def test_async_tp_compiles_the_model_and_is_off_otherwise() -> None:
    overlap = _titan(LLAMA8, Layout(tp=4, pp=1, dp=2, sequence_parallel=True), 64, runtime=RuntimeFeatures())
    plain = _titan(LLAMA8, Layout(tp=4, pp=1, dp=2), 64, runtime=RuntimeFeatures(tp_comm_overlap=False))
    on = ["--compile.enable", "--compile.components", "model,loss", "--compile.enable-async-tensor-parallel"]
    assert " ".join(on) in " ".join(overlap.args) and "--parallelism.enable-sequence-parallel" in overlap.args
    fused = ["--compile.enable", "--compile.components", "model,loss", "--compile.no-enable-async-tensor-parallel"]
    assert " ".join(fused) in " ".join(plain.args)


def test_compile_follows_the_element_wise_code_the_plan_was_priced_for() -> None:
    """Priced fused (the default), the model is compiled; priced eager (`runtime.eager_elementwise`), the config
    function's compile is turned off, spelled out because the function, not a default, decides it otherwise."""
    layout = Layout(tp=1, pp=1, dp=8)
    fused = _titan(LLAMA8, layout, 64)
    eager = _titan(LLAMA8, layout, 64, runtime=RuntimeFeatures(eager_elementwise=True))
    assert "--compile.enable" in fused.args and "--compile.no-enable" not in fused.args
    assert "--compile.no-enable" in eager.args and "--compile.enable" not in eager.args
    assert any("torch.compile (model and loss) is on" in n for n in fused.notes)
    assert any("torch.compile is off" in n for n in eager.notes)


def test_cuda_graphs_are_left_on_without_pp_or_ep() -> None:
    assert "--training.disable-cuda-graphs" not in _titan(LLAMA8, Layout(tp=2, pp=1, dp=4), 64).args
    moe = _titan(MIXTRAL, Layout(tp=1, pp=1, dp=8, ep=8, zero_stage=1), 64)
    assert "--training.disable-cuda-graphs" in moe.args


def test_sample_data_and_given_data() -> None:
    layout = Layout(tp=2, pp=1, dp=4)
    sample = _titan(LLAMA8, layout, 64)
    assert _value(sample, "--dataloader.dataset") == "c4_test"
    assert _value(sample, "--hf-assets-path") == "./tests/assets/tokenizer"
    assert sample.notes[0].startswith("Starts from TorchTitan's llama3 config function llama3_8b: its optimizer")
    assert sample.notes[1].startswith("Smoke test on TorchTitan's sample data")
    given = LaunchInputs(data_path="/data/c4 en", tokenizer=TokenizerInputs(model="/assets/llama"))
    real = _titan(LLAMA8, layout, 64, inputs=given)
    assert _value(real, "--dataloader.dataset-path") == "/data/c4 en" and "--dataloader.dataset" not in real.args
    assert _value(real, "--hf-assets-path") == "/assets/llama"
    assert real.notes[1] == "Trains on dataloader.dataset_path and hf_assets_path as given."
    half = _titan(LLAMA8, layout, 64, inputs=LaunchInputs(data_path="/d"))
    assert "--hf-assets-path TOKENIZER_DIR (the test tokenizer is used)" in half.notes[1]


def test_fp16_and_bf16_gradient_reduce_are_noted() -> None:
    launch = _titan(LLAMA8, Layout(tp=2, pp=1, dp=4), 64, precision=Precision.FP16, grad_reduce_in_fp32=False)
    assert any(n.startswith("fp16: ") for n in launch.notes)
    assert any("accepts only float32" in n for n in launch.notes)
    assert "mixed_precision_reduce" not in _section(launch, "training")


def test_partial_last_node() -> None:
    launch = _titan(LLAMA70, Layout(tp=4, pp=1, dp=25, zero_stage=1), 100)
    assert processes_per_node(launch.command, 13) == [8] * 12 + [4]
