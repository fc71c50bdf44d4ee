"""Launch arguments carry the plan: right flags with right values, node counts, shell-safe commands.

The TorchTitan assertions here are v0.2.2's (TOML JobConfig), so every launch pins that release; v0.3.0's form
is tested in test_launch_torchtitan03.py.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import planner.launch
from planner.errors import InvalidSpecError
from planner.launch import FrameworkLaunch, LaunchArgs, LaunchInputs, TokenizerInputs
from planner.launch import launch_args as _launch_args
from planner.launch.common import moe_layer_pattern, stage_layers
from planner.launch.megatron import moe_layer_freq
from planner.layout import Layout
from planner.presets import get_preset
from planner.specs import (
    AttentionKernel,
    Fp8Recipe,
    GradientLayout,
    ModelSpec,
    MoESpec,
    Precision,
    Recompute,
    RecomputeModule,
    RouterLoadBalancing,
    RuntimeFeatures,
    TrainingSpec,
)
from tests.launch.shell import option, processes_per_node, torchrun_argv

LLAMA70 = get_preset("llama3-70b").model
GPT3 = get_preset("gpt3-175b").model
DEEPSEEK = get_preset("deepseek-v3").model
LLAMA3_8B = get_preset("llama3-8b").model
TORCHTITAN = "0.2.2"
"""The TorchTitan release these tests read (test_launch_torchtitan03.py covers 0.3.0)."""


def launch_args(
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    num_gpus: int,
    gpus_per_node: int,
    inputs: LaunchInputs | None = None,
    versions: dict[str, str] | None = None,
) -> LaunchArgs:
    """planner.launch.launch_args with TorchTitan pinned to TORCHTITAN."""
    versions = {"torchtitan": TORCHTITAN} | (versions or {})
    return _launch_args(model, training, layout, num_gpus, gpus_per_node, inputs, versions)


def _case(case: Any) -> LaunchArgs:
    return launch_args(case.model, case.training, case.layout, case.num_gpus, case.gpus_per_node)


def _flags(launch: FrameworkLaunch) -> dict[str, list[str]]:
    """Megatron args as flag -> values."""
    out: dict[str, list[str]] = {}
    flag = ""
    for token in launch.args:
        if token.startswith("--"):
            flag = token
            out[flag] = []
        else:
            out[flag].append(token)
    return out


def _launch(model: ModelSpec, layout: Layout, batch: int = 1024, **training: Any) -> LaunchArgs:
    return launch_args(model, TrainingSpec(global_batch_size=batch, **training), layout, layout.world_size, 8)


def _option(tokens: list[str], name: str) -> str:
    return tokens[tokens.index(name) + 1]


# --- the plan the brief names: interleaving, GQA, SwiGLU, context parallel, distributed optimizer ---


def test_interleaved_gqa_swiglu_cp_distributed_optimizer() -> None:
    layout = Layout(tp=4, pp=4, dp=32, cp=2, vp=5, recompute=Recompute.SELECTIVE, sequence_parallel=True, zero_stage=1)
    flags = _flags(_launch(LLAMA70, layout).megatron)
    assert flags["--num-layers-per-virtual-pipeline-stage"] == ["4"]  # 80 / (4 * 5)
    assert "--virtual-pipeline-model-parallel-size" not in flags
    assert "--num-virtual-stages-per-pipeline-rank" not in flags
    assert flags["--group-query-attention"] == []
    assert flags["--num-query-groups"] == ["8"]
    assert flags["--swiglu"] == []
    assert flags["--context-parallel-size"] == ["2"]
    assert flags["--use-distributed-optimizer"] == []
    assert flags["--tensor-model-parallel-size"] == ["4"]
    assert flags["--pipeline-model-parallel-size"] == ["4"]
    assert flags["--sequence-parallel"] == []
    assert flags["--recompute-granularity"] == ["selective"]
    assert "--recompute-method" not in flags
    assert flags["--micro-batch-size"] == ["1"]
    assert flags["--global-batch-size"] == ["1024"]
    assert flags["--num-layers"] == ["80"] and flags["--hidden-size"] == ["8192"]
    assert flags["--ffn-hidden-size"] == ["28672"] and flags["--num-attention-heads"] == ["64"]
    assert flags["--seq-length"] == ["8192"] and flags["--max-position-embeddings"] == ["8192"]
    assert flags["--position-embedding-type"] == ["rope"]
    assert flags["--normalization"] == ["RMSNorm"] and "--disable-bias-linear" in flags
    assert "--untie-embeddings-and-output-weights" in flags
    assert "--expert-model-parallel-size" not in flags and "--use-megatron-fsdp" not in flags
    assert flags["--bf16"] == [] and "--fp8-format" not in flags
    assert flags["--attention-backend"] == ["fused"]  # cuDNN's fused attention, the kernel priced by default
    assert "--overlap-grad-reduce" in flags and "--overlap-param-gather" in flags
    # cp = 2 != ep = 1 with pp > 1: Megatron-Core rejects --use-tp-pp-dp-mapping for this layout.
    assert "--use-tp-pp-dp-mapping" not in flags


def test_same_plan_for_torchtitan_and_nemo() -> None:
    layout = Layout(tp=4, pp=4, dp=32, cp=2, vp=5, recompute=Recompute.SELECTIVE, sequence_parallel=True, zero_stage=1)
    launch = _launch(LLAMA70, layout)
    parallelism = launch.torchtitan.config["parallelism"]
    assert isinstance(parallelism, dict)
    assert parallelism["tensor_parallel_degree"] == 4 and parallelism["pipeline_parallel_degree"] == 4
    assert parallelism["context_parallel_degree"] == 2
    assert parallelism["data_parallel_shard_degree"] == 32 and parallelism["data_parallel_replicate_degree"] == 1
    assert parallelism["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert parallelism["pipeline_parallel_layers_per_stage"] == 4
    assert launch.torchtitan.config["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    nemo = launch.nemo.config
    assert nemo["trainer.strategy.virtual_pipeline_model_parallel_size"] == 5
    assert nemo["trainer.strategy.context_parallel_size"] == 2
    assert nemo["trainer.strategy.sequence_parallel"] is True
    assert nemo["optim.config.use_distributed_optimizer"] is True
    assert nemo["model.config.num_query_groups"] == 8 and nemo["model.config.gated_linear_unit"] is True
    assert nemo["trainer.num_nodes"] == 128 and nemo["trainer.devices"] == 8
    assert "trainer.strategy.virtual_pipeline_model_parallel_size=5" in launch.nemo.args


# --- every plan ---


def test_num_query_groups_never_without_group_query_attention(case: Any) -> None:
    flags = _flags(_case(case).megatron)
    assert ("--num-query-groups" in flags) == ("--group-query-attention" in flags)
    gqa = case.model.num_query_groups < case.model.num_attention_heads
    assert ("--group-query-attention" in flags) == gqa
    if gqa:
        assert flags["--num-query-groups"] == [str(case.model.num_query_groups)]


def test_no_virtual_pipeline_size_flag_anywhere(case: Any) -> None:
    megatron = _case(case).megatron
    assert megatron.script is not None
    for text in (" ".join(megatron.args), megatron.command, megatron.script):
        assert "--virtual-pipeline-model-parallel-size" not in text


def test_torchrun_puts_ranks_on_nodes_as_the_plan_places_them(case: Any) -> None:
    """Full nodes of gpus_per_node in rank order, the last node partly used: what topology.count_crossings prices."""
    launch = _case(case)
    full, last = divmod(case.num_gpus, case.gpus_per_node)
    expected = [case.gpus_per_node] * full + ([last] if last else [])
    assert launch.megatron.script is not None
    for text in (launch.megatron.command, launch.torchtitan.command, launch.megatron.script):
        argv = torchrun_argv(text, 0)
        nnodes = int(option(argv, "--nnodes"))
        assert processes_per_node(text, nnodes) == expected
        if full and last:  # static rendezvous: group rank = node rank, so global ranks follow node order
            assert "--rdzv-backend" not in argv and option(argv, "--master-addr") == "node0"
            assert [option(torchrun_argv(text, r), "--node-rank") for r in (0, nnodes - 1)] == ["0", str(nnodes - 1)]
        else:
            assert option(argv, "--rdzv-backend") == "c10d"
            assert option(argv, "--rdzv-endpoint") == "node0:29500"
    assert launch.nemo.config["trainer.num_nodes"] * launch.nemo.config["trainer.devices"] == case.num_gpus


def test_sbatch_script_matches_the_torchrun_line(case: Any) -> None:
    megatron = _case(case).megatron
    script = megatron.script
    assert script is not None and script.startswith("#!/bin/bash\n")
    command = torchrun_argv(megatron.command, 0)
    srun = torchrun_argv(script, 0)
    assert re.search(rf"^#SBATCH --nodes={option(command, '--nnodes')}$", script, re.M)
    assert re.search(r"^#SBATCH --ntasks-per-node=1$", script, re.M)
    assert re.search(rf"^#SBATCH --gpus-per-node={min(case.num_gpus, case.gpus_per_node)}$", script, re.M)
    assert re.search(r"^#SBATCH --exclusive$", script, re.M)
    assert option(srun, "--nnodes") == option(command, "--nnodes")
    assert option(srun, "--nproc-per-node") == option(command, "--nproc-per-node")
    if "--rdzv-id" in srun:
        assert option(srun, "--rdzv-id") == "1"
    assert srun[srun.index("pretrain_gpt.py") :] == command[command.index("pretrain_gpt.py") :]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_script_and_commands_parse_as_shell(case: Any) -> None:
    launch = _case(case)
    assert launch.megatron.script is not None
    for text in (launch.megatron.script, launch.megatron.command, launch.torchtitan.command, launch.nemo.command):
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_args_appear_verbatim_in_the_command(case: Any) -> None:
    launch = _case(case)
    megatron = shlex.split(launch.megatron.command)
    start = megatron.index("pretrain_gpt.py") + 1
    assert megatron[start : start + len(launch.megatron.args)] == launch.megatron.args
    titan = shlex.split(launch.torchtitan.command)
    assert titan[-len(launch.torchtitan.args) :] == launch.torchtitan.args
    nemo = shlex.split(launch.nemo.command)
    assert nemo[-len(launch.nemo.args) :] == launch.nemo.args
    assert nemo[:5] == ["nemo", "llm", "pretrain", "--factory", nemo[4]]


def test_parallel_sizes_are_the_layouts(case: Any) -> None:
    x = case.layout
    launch = _case(case)
    flags = _flags(launch.megatron)
    assert flags["--tensor-model-parallel-size"] == [str(x.tp)]
    assert flags["--pipeline-model-parallel-size"] == [str(x.pp)]
    assert flags.get("--context-parallel-size", ["1"]) == [str(x.cp)]
    assert flags.get("--expert-model-parallel-size", ["1"]) == [str(x.ep)]
    assert ("--sequence-parallel" in flags) == (x.sequence_parallel and x.tp > 1)
    par = launch.torchtitan.config["parallelism"]
    assert par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] == x.dp
    dims = ("tensor_parallel_degree", "pipeline_parallel_degree", "context_parallel_degree", "expert_parallel_degree")
    assert [par[k] for k in dims] == [x.tp, x.pp, x.cp, x.ep]
    nemo = launch.nemo.config
    s = "trainer.strategy."
    assert nemo[f"{s}tensor_model_parallel_size"] == x.tp and nemo[f"{s}pipeline_model_parallel_size"] == x.pp
    assert nemo[f"{s}context_parallel_size"] == x.cp and nemo[f"{s}expert_model_parallel_size"] == x.ep
    assert nemo[f"{s}virtual_pipeline_model_parallel_size"] == (x.vp if x.vp > 1 else None)


def test_megatron_config_is_the_args(case: Any) -> None:
    megatron = _case(case).megatron
    flags = _flags(megatron)
    assert list(megatron.config) == list(flags)
    for flag, values in flags.items():
        expected: object = True if not values else values[0] if len(values) == 1 else values
        assert megatron.config[flag] == expected


def test_torchtitan_batch_gives_the_planned_micro_batches(case: Any) -> None:
    x, batch = case.layout, case.training.global_batch_size
    titan = _case(case).torchtitan.config
    training, par = titan["training"], titan["parallelism"]
    assert training["global_batch_size"] == batch and training["seq_len"] == case.model.seq_length
    accumulation = batch // (training["local_batch_size"] * x.dp)
    if x.pp > 1:
        pipeline_micro_batches = training["local_batch_size"] // par["pipeline_parallel_microbatch_size"]
        assert par["pipeline_parallel_microbatch_size"] == x.micro_batch_size
        assert accumulation * pipeline_micro_batches == x.num_microbatches(batch)
    else:
        assert training["local_batch_size"] == x.micro_batch_size
        assert accumulation == x.num_microbatches(batch)


def test_torchtitan_expert_parallel_fits_in_its_fsdp_dimension(case: Any) -> None:
    par = _case(case).torchtitan.config["parallelism"]
    fsdp = par["data_parallel_shard_degree"] * par["context_parallel_degree"]
    etp = par["expert_tensor_parallel_degree"]
    assert etp in (1, par["tensor_parallel_degree"])
    assert (fsdp * par["tensor_parallel_degree"]) % (etp * par["expert_parallel_degree"]) == 0


def test_torchtitan_stage_split_is_the_planned_one(case: Any) -> None:
    """Replays TorchTitan's generate_llm_fqn_per_model_part on the emitted keys."""
    x = case.layout
    if x.pp == 1:
        return
    par = _case(case).torchtitan.config["parallelism"]
    stages = stage_layers(case.model, x)
    expected = [n // x.vp for _ in range(x.vp) for n in stages]
    if "module_fqns_per_model_part" in par:
        parts = par["module_fqns_per_model_part"]
        counts = [sum(name.startswith("layers.") for name in part) for part in parts]
        names = [name for part in parts for name in part]
        layers = [f"layers.{i}" for i in range(case.model.num_layers)]
        assert names == ["tok_embeddings", *layers, "norm", "output"]
    else:
        counts = _titan_split(case.model.num_layers, x.pp * x.vp, par)
    assert counts == expected


def _titan_split(num_layers: int, num_stages: int, par: dict[str, int]) -> list[int]:
    first, last = par["pipeline_parallel_first_stage_less_layers"], par["pipeline_parallel_last_stage_less_layers"]
    effective = num_layers + first + last
    assert -(-effective // par["pipeline_parallel_layers_per_stage"]) == num_stages
    per, extra = divmod(effective, num_stages)
    counts = [per + (i < extra) for i in range(num_stages)]
    counts[0] -= first
    counts[-1] -= last
    return counts


def test_nemo_sets_every_parallel_key_even_at_its_default(case: Any) -> None:
    keys = set(_case(case).nemo.config)
    s = "trainer.strategy."
    for name in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "num_layers_in_first_pipeline_stage",
        "num_layers_in_last_pipeline_stage",
        "context_parallel_size",
        "expert_model_parallel_size",
        "sequence_parallel",
        "use_tp_pp_dp_mapping",
    ):
        assert s + name in keys


# --- pipeline splits ---


def test_uneven_split_uses_first_and_last_stage_flags() -> None:
    model = get_preset("llama3-405b").model
    layout = Layout(tp=8, pp=16, dp=8, sequence_parallel=True, zero_stage=1, layers_per_stage=(7,) + (8,) * 14 + (7,))
    launch = _launch(model, layout, batch=2048)
    flags = _flags(launch.megatron)
    assert flags["--decoder-first-pipeline-num-layers"] == ["7"]
    assert flags["--decoder-last-pipeline-num-layers"] == ["7"]
    assert flags["--use-tp-pp-dp-mapping"] == []
    par = launch.torchtitan.config["parallelism"]
    assert isinstance(par, dict)
    assert par["pipeline_parallel_layers_per_stage"] == 8
    assert (
        par["pipeline_parallel_first_stage_less_layers"] == 1 and par["pipeline_parallel_last_stage_less_layers"] == 1
    )
    assert launch.nemo.config["trainer.strategy.num_layers_in_first_pipeline_stage"] == 7
    assert launch.nemo.config["trainer.strategy.num_layers_in_last_pipeline_stage"] == 7


def test_uneven_interleaved_split_gives_stages_per_rank() -> None:
    model = get_preset("llama3-405b").model
    layout = Layout(tp=8, pp=16, dp=8, vp=2, sequence_parallel=True, layers_per_stage=(6,) + (8,) * 14 + (8,))
    launch = _launch(model, layout, batch=2048)
    flags = _flags(launch.megatron)
    assert flags["--num-virtual-stages-per-pipeline-rank"] == ["2"]
    assert "--num-layers-per-virtual-pipeline-stage" not in flags
    assert flags["--decoder-first-pipeline-num-layers"] == ["6"]
    assert flags["--decoder-last-pipeline-num-layers"] == ["8"]
    par = launch.torchtitan.config["parallelism"]
    assert isinstance(par, dict)
    assert len(par["module_fqns_per_model_part"]) == 32
    assert not any("module_fqns_per_model_part" in a for a in launch.torchtitan.args)  # TOML only


def test_default_split_of_an_indivisible_model_is_the_cost_models() -> None:
    """61 layers over 8 stages: the cost model's default split is 7, 8 x 6, 6; Megatron must be told."""
    layout = Layout(tp=2, pp=8, dp=64, ep=8, sequence_parallel=True, zero_stage=1)
    flags = _flags(_launch(DEEPSEEK, layout, batch=2048).megatron)
    assert stage_layers(DEEPSEEK, layout) == (7, 8, 8, 8, 8, 8, 8, 6)
    assert flags["--decoder-first-pipeline-num-layers"] == ["7"]
    assert flags["--decoder-last-pipeline-num-layers"] == ["6"]


def test_even_split_sets_no_stage_flags() -> None:
    flags = _flags(_launch(LLAMA70, Layout(tp=8, pp=4, dp=32)).megatron)
    assert not any(f.startswith("--decoder-") for f in flags)
    assert "--num-layers-per-virtual-pipeline-stage" not in flags


# --- data parallel, recompute, precision, runtime ---


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_stage_flags(zero: int) -> None:
    launch = _launch(LLAMA70, Layout(tp=8, pp=1, dp=128, sequence_parallel=True, zero_stage=zero))
    flags = _flags(launch.megatron)
    assert ("--use-distributed-optimizer" in flags) == (zero >= 1)
    assert ("--overlap-param-gather" in flags) == (zero >= 1)
    if zero >= 2:
        strategy = {2: "optim_grads", 3: "optim_grads_params"}[zero]
        assert flags["--use-megatron-fsdp"] == []
        assert flags["--data-parallel-sharding-strategy"] == [strategy]
        assert flags["--ckpt-format"] == ["fsdp_dtensor"]
        assert launch.nemo.config["trainer.strategy.fsdp"] == "megatron"
        assert launch.nemo.config["trainer.strategy.ddp.data_parallel_sharding_strategy"] == strategy
        assert launch.megatron.command.startswith("env -u CUDA_DEVICE_MAX_CONNECTIONS ")
    else:
        assert "--use-megatron-fsdp" not in flags and "trainer.strategy.fsdp" not in launch.nemo.config
        assert launch.megatron.command.startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 ")
    par = launch.torchtitan.config["parallelism"]
    assert isinstance(par, dict)
    expected = (128, 1) if zero == 0 else (1, 128)
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == expected
    assert par["fsdp_reshard_after_forward"] == ("always" if zero == 3 else "never")
    assert launch.nemo.config["optim.config.use_distributed_optimizer"] is (zero >= 1)


def test_zero0_with_expert_parallel_shards_just_enough_for_torchtitan() -> None:
    model = get_preset("mixtral-8x7b").model
    par = _launch(model, Layout(tp=2, pp=4, dp=8, ep=4), batch=512).torchtitan.config["parallelism"]
    assert isinstance(par, dict)
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (2, 4)
    assert par["expert_tensor_parallel_degree"] == 2


@pytest.mark.parametrize(
    ("recompute", "megatron", "titan", "nemo"),
    [
        (Recompute.NONE, [], "none", None),
        (Recompute.SELECTIVE, ["--recompute-granularity", "selective"], "selective", "selective"),
        (
            Recompute.FULL,
            ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"],
            "full",
            "full",
        ),
    ],
)
def test_recompute(recompute: Recompute, megatron: list[str], titan: str, nemo: str | None) -> None:
    launch = _launch(LLAMA70, Layout(tp=8, pp=4, dp=32, recompute=recompute))
    args = launch.megatron.args
    recompute_args = [
        a for i, a in enumerate(args) if a.startswith("--recompute") or args[i - 1].startswith("--recompute")
    ]
    assert recompute_args == megatron
    checkpointing = launch.torchtitan.config["activation_checkpoint"]
    assert isinstance(checkpointing, dict) and checkpointing["mode"] == titan
    assert launch.nemo.config["model.config.recompute_granularity"] == nemo


@pytest.mark.parametrize(
    ("precision", "flags", "absent", "plugin", "fp8"),
    [
        (Precision.BF16, ["--bf16"], ["--fp16", "--fp8-format"], "bf16-mixed", None),
        (Precision.FP16, ["--fp16"], ["--bf16", "--fp8-format"], "16-mixed", None),
        (Precision.FP8, ["--bf16", "--fp8-format"], ["--fp16"], "bf16-mixed", "hybrid"),
    ],
)
def test_precision(precision: Precision, flags: list[str], absent: list[str], plugin: str, fp8: str | None) -> None:
    launch = _launch(LLAMA70, Layout(tp=8, pp=4, dp=32), precision=precision)
    megatron = _flags(launch.megatron)
    assert all(f in megatron for f in flags) and not any(f in megatron for f in absent)
    if precision is Precision.FP8:
        assert megatron["--fp8-format"] == ["hybrid"]
        model = launch.torchtitan.config["model"]
        assert isinstance(model, dict) and model["converters"] == ["quantize.linear.float8"]
    assert launch.nemo.config["trainer.plugins.precision"] == plugin
    assert launch.nemo.config["trainer.plugins.fp8"] == fp8


@pytest.mark.parametrize(
    ("recipe", "gather", "megatron", "nemo"),
    [
        (None, False, [], {"trainer.plugins.fp8_param_gather": False}),
        (None, None, ["--fp8-param-gather"], {"trainer.plugins.fp8_param_gather": True}),  # today's recipes, zero 1
        (
            Fp8Recipe.TENSORWISE,
            True,
            ["--fp8-recipe", "tensorwise", "--fp8-param-gather"],
            {"trainer.plugins.fp8_recipe": "tensorwise", "trainer.plugins.fp8_param_gather": True},
        ),
        (
            Fp8Recipe.MXFP8,
            True,
            ["--fp8-recipe", "mxfp8", "--fp8-param-gather", "--reuse-grad-buf-for-mxfp8-param-ag"],
            {
                "trainer.plugins.fp8_recipe": "mxfp8",
                "trainer.plugins.fp8_param_gather": True,
                "trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag": True,
            },
        ),
        (
            Fp8Recipe.DELAYED,
            False,
            ["--fp8-recipe", "delayed"],
            {"trainer.plugins.fp8_recipe": "delayed", "trainer.plugins.fp8_param_gather": False},
        ),
        (  # Megatron-Bridge's sub-channel presets keep 16-bit weights: no --fp8-param-gather by default
            Fp8Recipe.BLOCKWISE,
            None,
            ["--fp8-recipe", "blockwise"],
            {"trainer.plugins.fp8_recipe": "blockwise", "trainer.plugins.fp8_param_gather": False},
        ),
        (
            Fp8Recipe.BLOCKWISE,
            True,
            ["--fp8-recipe", "blockwise", "--fp8-param-gather"],
            {"trainer.plugins.fp8_recipe": "blockwise", "trainer.plugins.fp8_param_gather": True},
        ),
    ],
)
def test_fp8_recipe_and_weight_storage(
    recipe: Fp8Recipe | None, gather: bool | None, megatron: list[str], nemo: dict[str, object]
) -> None:
    # As priced: the recipe when stated, FP8 weights stored as FP8, MXFP8's all-gather through the gradient buffer.
    layout = Layout(tp=8, pp=4, dp=32, zero_stage=1)
    launch = _launch(LLAMA70, layout, precision=Precision.FP8, fp8_recipe=recipe, fp8_param_gather=gather)
    args = launch.megatron.args
    fp8 = args[args.index("--fp8-format") + 2 :]
    assert fp8[: len(megatron)] == megatron and "--fp8-recipe" not in fp8[len(megatron) :]
    config = launch.nemo.config
    assert {
        k: v
        for k, v in config.items()
        if k.startswith("trainer.plugins.")
        and k.endswith(("fp8_recipe", "fp8_param_gather", "reuse_grad_buf_for_mxfp8_param_ag"))
    } == nemo
    titan_noted = [n for n in launch.torchtitan.notes if "rule torchtitan_fp8" in n]
    assert len(titan_noted) == int(recipe not in (None, Fp8Recipe.TENSORWISE) or gather is True)
    # today's recipes' default needs the distributed optimizer: none at zero_stage 0
    if gather is None:
        plain = _launch(LLAMA70, Layout(tp=8, pp=4, dp=32), precision=Precision.FP8, fp8_recipe=recipe)
        assert "--fp8-param-gather" not in plain.megatron.args
        assert plain.nemo.config["trainer.plugins.fp8_param_gather"] is False


def test_bf16_end_layers() -> None:
    # Layers kept in BF16 as priced: Megatron-LM's switch with both counts written (its TransformerConfig defaults
    # each to 1 once the switch is on), NeMo's MegatronMixedPrecision keys; TorchTitan cannot and says so. Every
    # flag and key is in each recorded release's list.
    layout = Layout(tp=4, pp=8, dp=2, vp=5, sequence_parallel=True, zero_stage=1)
    ends = {"bf16_layers_at_start": 0, "bf16_layers_at_end": 2}
    launch = _launch(LLAMA70, layout, batch=128, precision=Precision.FP8, fp8_recipe=Fp8Recipe.TENSORWISE, **ends)
    flags = _flags(launch.megatron)
    assert flags["--first-last-layers-bf16"] == []
    assert (flags["--num-layers-at-start-in-bf16"], flags["--num-layers-at-end-in-bf16"]) == (["0"], ["2"])
    keys = {k: v for k, v in launch.nemo.config.items() if "bf16" in k}
    assert keys == {
        "trainer.plugins.first_last_layers_bf16": True,
        "trainer.plugins.num_layers_at_start_in_bf16": 0,
        "trainer.plugins.num_layers_at_end_in_bf16": 2,
    }
    assert [n for n in launch.torchtitan.notes if "rule torchtitan_fp8" in n]
    data = Path(__file__).resolve().parents[1] / "data"
    for path in data.glob("megatron_lm_flags.*.txt"):
        listed = set(path.read_text().split())
        assert {"--first-last-layers-bf16", "--num-layers-at-start-in-bf16", "--num-layers-at-end-in-bf16"} <= listed
    for path in data.glob("nemo_strategy_params*.txt"):
        listed = set(path.read_text().split())
        assert set(keys) <= listed, path.name
    plain = _launch(LLAMA70, layout, batch=128, precision=Precision.FP8, fp8_recipe=Fp8Recipe.TENSORWISE)
    assert "--first-last-layers-bf16" not in plain.megatron.args
    assert not any("bf16" in k for k in plain.nemo.config)


@pytest.mark.parametrize(("gather", "zero_stage", "stored"), [(None, 1, True), (False, 1, False), (None, 0, False)])
def test_nvfp4(gather: bool | None, zero_stage: int, stored: bool) -> None:
    # Megatron-LM's FP4 flags, never with --fp8-format; NVFP4 weights as priced (today's recipes: gathered as NVFP4
    # wherever the distributed optimizer runs); NeMo's plugin keys; TorchTitan cannot run it and says so.
    layout = Layout(tp=2, pp=4, dp=8, vp=5, sequence_parallel=True, zero_stage=zero_stage)
    launch = _launch(LLAMA70, layout, batch=256, precision=Precision.NVFP4, fp8_param_gather=gather)
    flags = _flags(launch.megatron)
    assert flags["--bf16"] == [] and flags["--fp4-format"] == ["e2m1"] and flags["--fp4-recipe"] == ["nvfp4"]
    assert ("--fp4-param-gather" in flags) is stored
    assert not any(f.startswith("--fp8") for f in flags)
    config = launch.nemo.config
    assert (config["trainer.plugins.precision"], config["trainer.plugins.fp8"]) == ("bf16-mixed", None)
    assert (config["trainer.plugins.fp4"], config["trainer.plugins.fp4_recipe"]) == ("e2m1", "nvfp4")
    assert config["model.config.fp4_param"] is stored
    assert [n for n in launch.torchtitan.notes if "nvfp4" in n and "rule torchtitan_fp8" in n]


def test_runtime_features() -> None:
    runtime = RuntimeFeatures(flash_attention=False, tp_comm_overlap=True, overlap_param_gather=True)
    layout = Layout(tp=8, pp=4, dp=32, sequence_parallel=True, zero_stage=1)
    launch = _launch(LLAMA70, layout, runtime=runtime)
    flags = _flags(launch.megatron)
    assert flags["--attention-backend"] == ["unfused"]
    assert "--tp-comm-overlap" in flags and "--overlap-grad-reduce" in flags and "--overlap-param-gather" in flags
    assert "--parallelism.enable_async_tensor_parallel" in launch.torchtitan.args
    assert "--compile.enable" in launch.torchtitan.args
    no_sp = _flags(_launch(LLAMA70, dataclasses.replace(layout, sequence_parallel=False), runtime=runtime).megatron)
    assert "--tp-comm-overlap" not in no_sp  # Megatron: TP overlap needs sequence parallelism


@pytest.mark.parametrize("torchtitan", ["0.3.0", "0.2.2"])
def test_torchtitan_compiles_what_was_priced_fused(torchtitan: str) -> None:
    """TorchTitan's model code is eager PyTorch ops; only torch.compile runs them as the fused kernels the default
    plan prices (`costmodel.elementwise.FUSED`), so every release's launch turns it on, and off (with a note) for a
    plan priced eager, unless async TP needs it (then a note says the launch runs faster than priced)."""
    versions = {"torchtitan": torchtitan}

    def compiled(layout: Layout, **runtime: bool) -> tuple[bool, list[str]]:
        training = TrainingSpec(global_batch_size=64, runtime=runtime)
        launch = launch_args(LLAMA3_8B, training, layout, layout.world_size, 8, versions=versions).torchtitan
        return "--compile.enable" in launch.args, launch.notes

    plain, overlapped = Layout(tp=1, pp=1, dp=8), Layout(tp=4, pp=1, dp=2, sequence_parallel=True)
    on, notes = compiled(plain)
    assert on and any("torch.compile (model and loss) is on" in n for n in notes)
    on, notes = compiled(plain, eager_elementwise=True)
    assert not on and any("torch.compile is off" in n for n in notes)
    on, notes = compiled(overlapped, eager_elementwise=True)
    assert on and any("async TP needs it" in n and "faster than priced" in n for n in notes)


@pytest.mark.parametrize(
    ("kernel", "backend", "noted"),
    [
        (AttentionKernel.CUDNN, "fused", ()),
        (AttentionKernel.FLASH2, "flash", ("NeMo",)),
        (AttentionKernel.FLASH1, "flash", ("Megatron-LM", "NeMo")),
    ],
)
def test_attention_backend_runs_the_kernel_priced(
    kernel: AttentionKernel, backend: str, noted: tuple[str, ...]
) -> None:
    """Megatron-LM's --attention-backend picks the kernel (fused: cuDNN, flash: the flash-attn package); NeMo's CLI
    cannot, so its launch says how when the plan is priced with flash-attn; Transformer Engine never runs v1."""
    layout = Layout(tp=8, pp=4, dp=32, sequence_parallel=True, zero_stage=1)
    launch = _launch(LLAMA70, layout, runtime=RuntimeFeatures(attention_kernel=kernel))
    assert _flags(launch.megatron)["--attention-backend"] == [backend]
    for framework, args in (("Megatron-LM", launch.megatron), ("NeMo", launch.nemo)):
        notes = [n for n in args.notes if "attention_kernel" in n]
        assert bool(notes) == (framework in noted), (framework, notes)
    if kernel is AttentionKernel.FLASH2:
        (note,) = [n for n in launch.nemo.notes if "attention_kernel" in n]
        assert "NVTE_FUSED_ATTN=0" in note


@pytest.mark.parametrize("eager", [False, True])
def test_megatron_and_nemo_say_they_run_fused_kernels_where_eager_code_was_priced(eager: bool) -> None:
    """Both run Transformer Engine's fused norms and activations: a plan priced with eager model code says so."""
    layout = Layout(tp=8, pp=4, dp=32, sequence_parallel=True, zero_stage=1)
    launch = _launch(LLAMA70, layout, runtime=RuntimeFeatures(eager_elementwise=eager))
    for framework, args in (("Megatron-LM", launch.megatron), ("NeMo", launch.nemo)):
        notes = [n for n in args.notes if "eager_elementwise" in n]
        assert len(notes) == int(eager) and all(framework in n and "faster than priced" in n for n in notes)


def test_tp_pp_dp_mapping_only_where_megatron_accepts_it() -> None:
    model = get_preset("mixtral-8x7b").model
    cases = [
        (Layout(tp=8, pp=4, dp=32), True),
        (Layout(tp=4, pp=4, dp=32, cp=2), False),  # expert dp = 2 * dense dp
        (Layout(tp=1, pp=1, dp=32, cp=8, ep=8), True),
        (Layout(tp=2, pp=4, dp=8, ep=4), False),
        (Layout(tp=2, pp=4, dp=8, cp=2, ep=2), True),
    ]
    for layout, allowed in cases:
        launch = _launch(model, layout, batch=512)
        assert ("--use-tp-pp-dp-mapping" in launch.megatron.args) is allowed
        assert launch.nemo.config["trainer.strategy.use_tp_pp_dp_mapping"] is allowed


# --- model shapes ---


def test_gpt3_style_dense_model_with_biases() -> None:
    flags = _flags(_launch(GPT3, Layout(tp=8, pp=8, dp=16), batch=1536).megatron)
    assert flags["--position-embedding-type"] == ["learned_absolute"]
    assert flags["--normalization"] == ["LayerNorm"]
    for absent in ("--disable-bias-linear", "--swiglu", "--untie-embeddings-and-output-weights", "--num-experts"):
        assert absent not in flags
    assert "--group-query-attention" not in flags and "--num-query-groups" not in flags


def test_moe_flags_for_deepseek_v3() -> None:
    layout = Layout(tp=2, pp=8, dp=64, ep=8, sequence_parallel=True, zero_stage=1)
    launch = _launch(DEEPSEEK, layout, batch=2048)
    flags = _flags(launch.megatron)
    assert flags["--num-experts"] == ["256"] and flags["--moe-router-topk"] == ["8"]
    assert flags["--moe-ffn-hidden-size"] == ["2048"]
    assert flags["--moe-shared-expert-intermediate-size"] == ["2048"]  # 1 shared expert x 2048
    assert flags["--moe-layer-freq"] == ["[0]*3+[1]*58"]  # first 3 layers dense
    assert flags["--expert-model-parallel-size"] == ["8"]
    assert launch.nemo.config["model.config.moe_layer_freq"] == [0, 0, 0] + [1] * 58
    assert launch.nemo.config["model.config.num_moe_experts"] == 256


@pytest.mark.parametrize(
    ("release", "backend"),
    [
        ("core_v0.19.2", ["--moe-flex-dispatcher-backend", "deepep"]),
        ("core_v0.16.1", ["--moe-flex-dispatcher-backend", "deepep"]),
        ("core_v0.15.0", ["--moe-enable-deepep"]),
    ],
)
def test_moe_dispatcher_and_overlap_flags(release: str, backend: list[str]) -> None:
    """The priced dispatch launches as Megatron-Core's flex dispatcher with its backend (core_v0.15.0: the DeepEP
    switch) and the all-to-all overlap; NeMo sets the same TransformerConfig fields."""
    stages = (8,) * 7 + (5,)
    layout = Layout(
        tp=1, pp=8, dp=32, ep=32, vp=2, recompute=Recompute.SELECTIVE, zero_stage=1, layers_per_stage=stages
    )
    runtime = {"moe_dispatcher": "deepep", "moe_a2a_overlap": True}
    training = TrainingSpec(global_batch_size=4096, precision=Precision.FP8, runtime=runtime)
    launch = launch_args(DEEPSEEK, training, layout, 256, 8, versions={"megatron": release})
    args = launch.megatron.args
    at = args.index("--moe-token-dispatcher-type")
    assert args[at : at + 2 + len(backend)] == ["--moe-token-dispatcher-type", "flex", *backend]
    assert "--overlap-moe-expert-parallel-comm" in args
    config = launch.nemo.config
    assert config["model.config.moe_token_dispatcher_type"] == "flex"
    assert config["model.config.moe_flex_dispatcher_backend"] == "deepep"
    assert config["model.config.overlap_moe_expert_parallel_comm"] is True
    assert any("rule torchtitan_moe_dispatch" in n for n in launch.torchtitan.notes)
    plain = launch_args(DEEPSEEK, TrainingSpec(global_batch_size=4096), layout, 256, 8)
    assert "--overlap-moe-expert-parallel-comm" not in plain.megatron.args
    assert _flags(plain.megatron)["--moe-token-dispatcher-type"] == ["alltoall"]
    assert not any("moe_dispatcher" in n for n in plain.torchtitan.notes)


def test_hybridep_on_a_release_without_it_says_it_runs_deepep() -> None:
    layout = Layout(tp=1, pp=1, dp=16, ep=16, zero_stage=1)
    training = TrainingSpec(global_batch_size=1024, runtime={"moe_dispatcher": "hybridep"})
    qwen = get_preset("qwen3-30b-a3b").model
    old = launch_args(qwen, training, layout, 16, 8, versions={"megatron": "core_v0.15.0", "nemo": "2.5.0rc0+8cfedd7"})
    assert "--moe-enable-deepep" in old.megatron.args
    assert any("rule megatron_15_no_hybridep" in n for n in old.megatron.notes + old.nemo.notes)
    assert old.nemo.config["model.config.moe_enable_deepep"] is True
    new = launch_args(qwen, training, layout, 16, 8)
    assert _option(new.megatron.args, "--moe-flex-dispatcher-backend") == "hybridep"
    assert not any("megatron_15_no_hybridep" in n for n in new.megatron.notes + new.nemo.notes)


def test_each_launch_says_when_its_expert_gemms_are_not_the_priced_ones() -> None:
    """Megatron-Core and NeMo run TE's GroupedLinear (expert_gemm multi_stream, the default), TorchTitan one
    torch._grouped_mm kernel per weight (grouped): the launch whose kernel differs from the priced one says so."""
    layout = Layout(tp=1, pp=1, dp=8, ep=8, zero_stage=1)
    qwen = get_preset("qwen3-30b-a3b").model

    def notes(runtime: dict[str, str]) -> dict[str, bool]:
        launch = launch_args(qwen, TrainingSpec(global_batch_size=512, runtime=runtime), layout, 8, 8)
        return {
            name: any("training.runtime.expert_gemm" in n for n in getattr(launch, name).notes)
            for name in ("megatron", "nemo", "torchtitan")
        }

    assert notes({}) == {"megatron": False, "nemo": False, "torchtitan": True}
    assert notes({"expert_gemm": "grouped"}) == {"megatron": True, "nemo": True, "torchtitan": False}
    llama = get_preset("llama3-8b").model
    dense = launch_args(llama, TrainingSpec(global_batch_size=512), Layout(tp=1, pp=1, dp=8), 8, 8)
    assert not any("expert_gemm" in n for n in dense.torchtitan.notes)


@pytest.mark.parametrize("torchtitan", ["0.3.0", "0.2.2"])
def test_each_launch_says_its_fsdp_gathers_ahead_of_the_backward(torchtitan: str) -> None:
    """Megatron-FSDP (Megatron-LM, NeMo) and FSDP2 (TorchTitan) prefetch each unit's backward gather; a ZeRO-3
    plan priced with PyTorch FSDP's BACKWARD_POST says so in every launch, and nothing is said otherwise."""
    llama = get_preset("llama3-8b").model
    post = TrainingSpec(global_batch_size=64, runtime={"zero3_backward_prefetch": "post"})
    versions = {"torchtitan": torchtitan}

    def noted(training: TrainingSpec, zero: int) -> dict[str, bool]:
        launch = launch_args(llama, training, Layout(tp=1, pp=1, dp=8, zero_stage=zero), 8, 8, versions=versions)
        order = training.runtime.zero3_backward_prefetch.value
        return {
            name: any(f"training.runtime.zero3_backward_prefetch({order})" in n for n in getattr(launch, name).notes)
            for name in ("megatron", "nemo", "torchtitan")
        }

    assert noted(post, 3) == {"megatron": True, "nemo": True, "torchtitan": True}
    none = TrainingSpec(global_batch_size=64, runtime={"zero3_backward_prefetch": "none"})
    assert noted(none, 3) == {"megatron": True, "nemo": True, "torchtitan": True}
    assert noted(post, 1) == {"megatron": False, "nemo": False, "torchtitan": False}
    assert noted(TrainingSpec(global_batch_size=64), 3) == {"megatron": False, "nemo": False, "torchtitan": False}


def test_mla_flags_for_deepseek_v3() -> None:
    """Multi-latent attention launches as Megatron-LM's MLA arguments (`_add_mla_args`) and NeMo's
    MLATransformerConfig fields; --kv-channels, which MLA ignores, is left out."""
    launch = _launch(DEEPSEEK, Layout(tp=2, pp=8, dp=64, ep=8, sequence_parallel=True, zero_stage=1), batch=2048)
    flags = _flags(launch.megatron)
    assert flags["--multi-latent-attention"] == []
    assert flags["--q-lora-rank"] == ["1536"] and flags["--kv-lora-rank"] == ["512"]
    assert flags["--qk-head-dim"] == ["128"] and flags["--qk-pos-emb-head-dim"] == ["64"]
    assert flags["--v-head-dim"] == ["128"]
    assert "--kv-channels" not in flags and "--group-query-attention" not in flags
    config = launch.nemo.config
    assert "--factory deepseek_v3" in launch.nemo.command
    assert config["model.config.multi_latent_attention"] is True
    assert (config["model.config.q_lora_rank"], config["model.config.kv_lora_rank"]) == (1536, 512)
    assert (config["model.config.qk_head_dim"], config["model.config.qk_pos_emb_head_dim"]) == (128, 64)
    assert config["model.config.v_head_dim"] == 128


def test_mla_without_a_query_latent_leaves_q_lora_rank_unset() -> None:
    """DeepSeek-V2-Lite's shape (no query latent): --q-lora-rank stays unset, Megatron-LM's None."""
    lite = DEEPSEEK.model_copy(
        update={"mla": DEEPSEEK.mla.model_copy(update={"q_lora_rank": None}) if DEEPSEEK.mla else None}
    )
    flags = _flags(_launch(lite, Layout(tp=2, pp=8, dp=64, ep=8, sequence_parallel=True, zero_stage=1), 2048).megatron)
    assert "--q-lora-rank" not in flags and flags["--kv-lora-rank"] == ["512"]


@pytest.mark.parametrize("release", ["core_v0.15.0", "core_v0.16.1", "core_v0.19.2"])
@pytest.mark.parametrize("precision", [Precision.BF16, Precision.FP8, Precision.FP16])
def test_grouped_gemm_only_where_megatron_allows_it(precision: Precision, release: str) -> None:
    """core_v0.15.0's validate_args asserts bf16 for --moe-grouped-gemm (fp8 runs with --bf16); later ones do not."""
    layout = Layout(tp=2, pp=8, dp=64, sequence_parallel=True, zero_stage=1)
    training = TrainingSpec(global_batch_size=2048, precision=precision)
    launch = launch_args(DEEPSEEK, training, layout, layout.world_size, 8, None, {"megatron": release})
    refused = precision is Precision.FP16 and release == "core_v0.15.0"
    assert ("--moe-grouped-gemm" in launch.megatron.args) == (not refused)


@pytest.mark.parametrize(
    ("layers", "freq", "first_k"),
    [(32, 1, 0), (32, 2, 0), (61, 1, 3), (12, 2, 1), (13, 3, 2), (10, 4, 1), (8, 1, 8)],
)
def test_moe_layer_freq_reproduces_the_planners_moe_layers(layers: int, freq: int, first_k: int) -> None:
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=64, moe_layer_freq=freq, first_k_dense_layers=first_k)
    model = ModelSpec(num_layers=layers, hidden_size=64, num_attention_heads=4, vocab_size=100, seq_length=128, moe=moe)
    value = moe_layer_freq(model)
    if first_k == 0:
        pattern = [int(i % int(value) == 0) for i in range(layers)]  # Megatron's reading of an integer
    else:
        pattern = eval(value, {"__builtins__": {}})  # Megatron evaluates the list expression the same way
    assert pattern == moe_layer_pattern(model)
    assert sum(pattern) == model.num_moe_layers


def test_custom_moe_model_falls_back_to_family_recipes() -> None:
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=1024, moe_layer_freq=2, first_k_dense_layers=1)
    model = ModelSpec(
        num_layers=12,
        hidden_size=1024,
        num_attention_heads=16,
        num_query_groups=4,
        gated_mlp=True,
        vocab_size=32000,
        seq_length=4096,
        moe=moe,
    )
    launch = launch_args(model, TrainingSpec(global_batch_size=64), Layout(tp=2, pp=2, dp=4, ep=2), 16, 4)
    assert "--factory mixtral_8x7b" in launch.nemo.command
    assert "--job.config_file CONFIG.toml" in launch.torchtitan.command
    assert "model" not in launch.torchtitan.config
    assert _flags(launch.megatron)["--moe-layer-freq"] == ["[0]*1+([1]+[0]*1)*5+[1]"]


@pytest.mark.parametrize(
    ("preset", "recipe", "flavor"),
    [
        ("llama3-8b", "llama31_8b", ("llama3", "8B")),
        ("llama3-70b", "llama31_70b", ("llama3", "70B")),
        ("llama3-405b", "llama31_405b", ("llama3", "405B")),
        ("deepseek-v3", "deepseek_v3", ("deepseek_v3", "671B")),
        ("mixtral-8x7b", "mixtral_8x7b", None),
        ("mixtral-8x22b", "mixtral_8x22b", None),
        ("gpt3-175b", "gpt3_175b", None),
        ("nemotron4-340b", "nemotron4_340b", None),
        ("megatron-1.7b", "gpt3_175b", None),
        ("qwen3-30b-a3b", "qwen3_30b_a3b", None),
        ("qwen3-235b-a22b", "qwen3_235b_a22b", None),
        ("llama4-scout", "llama4_e16", None),
        ("llama4-maverick", "llama4_e128", None),
    ],
)
def test_known_models_use_the_frameworks_own_recipes(preset: str, recipe: str, flavor: tuple[str, str] | None) -> None:
    model = get_preset(preset).model
    tp = 8 if model.num_attention_heads % 8 == 0 else 4
    launch = launch_args(model, TrainingSpec(global_batch_size=64), Layout(tp=tp, pp=1, dp=8), tp * 8, 8)
    assert shlex.split(launch.nemo.command)[4] == recipe
    titan = shlex.split(launch.torchtitan.command)
    if flavor is None:
        assert _option(titan, "--job.config_file") == "CONFIG.toml" and "--model.flavor" not in titan
    else:
        assert "--job.config_file" not in titan  # shipped TOMLs set features (float8 for 405B) the CLI cannot unset
        assert (_option(titan, "--model.name"), _option(titan, "--model.flavor")) == flavor


def test_torchtitan_split_that_names_modules_reads_the_toml_even_for_a_shipped_flavor() -> None:
    # Llama 3 405B, uneven and interleaved: the CLI would drop module_fqns_per_model_part (a list of lists).
    layout = Layout(tp=8, pp=16, dp=8, vp=2, sequence_parallel=True, zero_stage=3, layers_per_stage=(6,) + (8,) * 15)
    launch = launch_args(get_preset("llama3-405b").model, TrainingSpec(global_batch_size=2048), layout, 1024, 8)
    titan = shlex.split(launch.torchtitan.command)
    assert _option(titan, "--job.config_file") == "CONFIG.toml"
    assert (_option(titan, "--model.name"), _option(titan, "--model.flavor")) == ("llama3", "405B")
    parts = launch.torchtitan.config["parallelism"]["module_fqns_per_model_part"]  # type: ignore[index]
    assert [sum(m.startswith("layers.") for m in part) for part in parts] == [3] + [4] * 15 + [3] + [4] * 15


# --- API ---


def test_public_api() -> None:
    assert set(planner.launch.__all__) == {
        "FrameworkLaunch",
        "LaunchArgs",
        "LaunchInputs",
        "TokenizerInputs",
        "launch_args",
    }
    launch = _launch(LLAMA70, Layout(tp=8, pp=4, dp=32))
    assert launch.megatron.script is not None
    assert launch.torchtitan.script is None and launch.nemo.script is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch.megatron.command = "x"  # type: ignore[misc]
    for framework in (launch.megatron, launch.torchtitan, launch.nemo):
        stamp = framework.framework_version
        assert re.search(r"commit [0-9a-f]{12}|sha256 [0-9a-f]{12}", stamp), stamp


def test_version_stamps_name_the_pinned_releases() -> None:
    launch = _launch(LLAMA70, Layout(tp=8, pp=4, dp=32))
    assert launch.megatron.framework_version.startswith("Megatron-LM core_v0.19.2")  # the newest targeted
    layout, training = Layout(tp=8, pp=4, dp=32), TrainingSpec(global_batch_size=1024)
    older = launch_args(LLAMA70, training, layout, 1024, 8, None, {"megatron": "core_v0.15.0"})
    assert older.megatron.framework_version.startswith("Megatron-LM core_v0.15.0")
    assert launch.torchtitan.framework_version.startswith("TorchTitan v0.2.2")
    assert launch.nemo.framework_version.startswith("NeMo")


def test_pure_same_inputs_same_outputs() -> None:
    layout = Layout(tp=4, pp=4, dp=32, cp=2, vp=5, sequence_parallel=True, zero_stage=1)
    assert _launch(LLAMA70, layout) == _launch(LLAMA70, layout)


@pytest.mark.parametrize(
    ("layout", "num_gpus", "gpus_per_node", "field"),
    [
        (Layout(tp=8, pp=4, dp=32), 512, 8, "layout"),  # world size 1024 != 512
        (Layout(tp=8, pp=4, dp=32), 1024, 0, "gpus_per_node"),
    ],
)
def test_bad_inputs_raise(layout: Layout, num_gpus: int, gpus_per_node: int, field: str) -> None:
    with pytest.raises(InvalidSpecError) as err:
        launch_args(LLAMA70, TrainingSpec(global_batch_size=96 * 32), layout, num_gpus, gpus_per_node)
    assert err.value.field == field


def test_illegal_layout_is_refused_with_the_rule() -> None:
    bad = Layout(tp=8, pp=4, dp=32, vp=3)  # 80 % (4 * 3) != 0
    with pytest.raises(InvalidSpecError, match="stage_split"):
        launch_args(LLAMA70, TrainingSpec(global_batch_size=1024), bad, 1024, 8)


def test_gpus_that_do_not_fill_nodes_fill_them_in_rank_order() -> None:
    # 100 GPUs on 8-GPU nodes: 12 x 8 + 4 (torchrun on 20 x 5 would split every 8-wide TP group over two nodes).
    launch = launch_args(LLAMA70, TrainingSpec(global_batch_size=100), Layout(tp=4, pp=1, dp=25), 100, 8)
    assert processes_per_node(launch.megatron.command, 13) == [8] * 12 + [4]
    # 96 on 64-GPU nodes: 64 + 32; 12 on 8-GPU nodes: 8 + 4. NeMo (Lightning) needs equal nodes: 2 x 48, 2 x 6.
    big = launch_args(LLAMA70, TrainingSpec(global_batch_size=96 * 32), Layout(tp=8, pp=4, dp=3), 96, 64)
    assert processes_per_node(big.torchtitan.command, 2) == [64, 32]
    assert (big.nemo.config["trainer.num_nodes"], big.nemo.config["trainer.devices"]) == (2, 48)
    small = launch_args(LLAMA70, TrainingSpec(global_batch_size=12), Layout(tp=4, pp=1, dp=3), 12, 8)
    assert processes_per_node(small.megatron.command, 2) == [8, 4]
    assert (small.nemo.config["trainer.num_nodes"], small.nemo.config["trainer.devices"]) == (2, 6)


# --- recipe settings that change memory: dropout and the gradient dtype ---

RECIPE_ROWS = [
    # (precision, grad_reduce_in_fp32, dropout, Megatron gradient flag, NeMo plugin value, TorchTitan reduce dtype)
    (Precision.BF16, None, 0.0, None, None, "float32"),
    (Precision.BF16, False, 0.0, "--grad-reduce-in-bf16", False, "bfloat16"),
    (Precision.FP8, False, 0.1, "--grad-reduce-in-bf16", False, "bfloat16"),
    (Precision.BF16, True, 0.1, None, True, "float32"),  # Megatron's bf16 default already accumulates in fp32
    (Precision.FP16, True, 0.1, "--accumulate-allreduce-grads-in-fp32", True, "float32"),
    (Precision.FP16, False, 0.1, None, False, "bfloat16"),
]


@pytest.mark.parametrize(
    ("precision", "fp32", "dropout", "megatron_flag", "nemo_value", "titan_reduce"),
    RECIPE_ROWS,
    ids=["bf16-default", "bf16-grads", "fp8-bf16-grads", "bf16-fp32", "fp16-fp32", "fp16-grads"],
)
def test_recipe_flags(
    precision: Precision,
    fp32: bool | None,
    dropout: float,
    megatron_flag: str | None,
    nemo_value: bool | None,
    titan_reduce: str,
) -> None:
    layout = Layout(tp=8, pp=1, dp=2, zero_stage=1)
    launch = _launch(
        LLAMA70,
        layout,
        precision=precision,
        grad_reduce_in_fp32=fp32,
        attention_dropout=dropout,
        hidden_dropout=dropout,
    )
    flags = _flags(launch.megatron)
    assert flags["--attention-dropout"] == [str(dropout)] and flags["--hidden-dropout"] == [str(dropout)]
    gradient_flags = {"--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32"} & set(flags)
    assert gradient_flags == ({megatron_flag} if megatron_flag else set())
    nemo = launch.nemo.config
    assert nemo["model.config.attention_dropout"] == dropout and nemo["model.config.hidden_dropout"] == dropout
    assert nemo.get("trainer.plugins.grad_reduce_in_fp32") == nemo_value
    training = launch.torchtitan.config["training"]
    assert isinstance(training, dict) and training["mixed_precision_reduce"] == titan_reduce


@pytest.mark.parametrize("gradients", list(GradientLayout))
def test_gradient_layout_reaches_the_launches(gradients: GradientLayout) -> None:
    # The reduction dtype is what every launch states; the layout changes only what Megatron-LM and NeMo note.
    fsdp = gradients is GradientLayout.PYTORCH_FSDP
    layout = Layout(tp=1, pp=1, dp=16, zero_stage=3)
    launch = _launch(LLAMA70, layout, grad_reduce_in_fp32=False, gradient_layout=gradients)
    default = _launch(LLAMA70, layout, grad_reduce_in_fp32=False)
    assert "--grad-reduce-in-bf16" in _flags(launch.megatron)
    assert launch.nemo.config["trainer.plugins.grad_reduce_in_fp32"] is False
    titan = _launch_args(
        LLAMA70,
        TrainingSpec(global_batch_size=1024, grad_reduce_in_fp32=False, gradient_layout=gradients),
        layout,
        16,
        8,
        versions={"torchtitan": "0.2.2"},
    ).torchtitan.config["training"]
    assert isinstance(titan, dict) and titan["mixed_precision_reduce"] == "bfloat16"
    for name in ("megatron", "nemo"):
        ours, plain = getattr(launch, name), getattr(default, name)
        assert ours.args == plain.args and ours.config == plain.config
        noted = [n for n in ours.notes if "training.gradient_layout is pytorch_fsdp" in n]
        assert len(noted) == int(fsdp) and all("rule megatron_gradient_layout" in n for n in noted)
        assert [n for n in ours.notes if n not in noted] == plain.notes
    assert launch.torchtitan == default.torchtitan


# --- notes: what each launch is ---


def test_every_launch_says_it_is_a_smoke_test_and_names_the_placeholders(case: Any) -> None:
    launch = _case(case)
    placeholders = {
        "megatron": ("DATA_PREFIX", "TOKENIZER"),
        "torchtitan": ("DATA", "TOKENIZER_DIR"),
        "nemo": ("DATA_PREFIX", "TOKENIZER"),
    }
    for name, words in placeholders.items():
        first = getattr(launch, name).notes[0]
        assert first.startswith("Smoke test on") and all(w in first for w in words)
    megatron = launch.megatron
    assert "--mock-data" in megatron.args + megatron.command.split() and "--mock-data" in megatron.notes[0]


def test_deepseek_launches_its_mtp_layer_where_the_framework_has_one() -> None:
    """DeepSeek-V3's multi-token prediction module: Megatron-LM --mtp-num-layers 1 and NeMo's mtp_num_layers;
    TorchTitan has none, and its notes say the launch trains without it."""
    launch = launch_args(DEEPSEEK, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8)
    assert _flags(launch.megatron)["--mtp-num-layers"] == ["1"]
    assert launch.nemo.config["model.config.mtp_num_layers"] == 1
    assert any(n.startswith("model.mtp_num_layers(1): TorchTitan") for n in launch.torchtitan.notes)
    for fl in (launch.megatron, launch.nemo):
        assert not any("Approximation: DeepSeek" in n or "MTP" in n for n in fl.notes)
    plain = launch_args(LLAMA70, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8)
    assert "--mtp-num-layers" not in plain.megatron.args
    assert plain.nemo.config.get("model.config.mtp_num_layers") is None


def test_query_key_norms_are_launched_where_the_model_has_them() -> None:
    """Qwen3's q_norm / k_norm: Megatron-LM --qk-layernorm and NeMo's qk_layernorm; DeepSeek-V3 too, the switch that
    builds MLA's latent norms (Megatron-Core gpt_layer_specs: TENorm if qk_layernorm else IdentityOp); not Llama.
    TorchTitan's notes say which of its models has them."""
    qwen = get_preset("qwen3-30b-a3b").model
    layout = Layout(tp=1, pp=1, dp=8, ep=8)
    launch = launch_args(qwen, TrainingSpec(global_batch_size=64), layout, 8, 8)
    assert "--qk-layernorm" in launch.megatron.args
    assert launch.nemo.config["model.config.qk_layernorm"] is True
    assert any(n.startswith("model.qk_layernorm:") for n in launch.torchtitan.notes)
    deepseek = launch_args(DEEPSEEK, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8)
    assert "--qk-layernorm" in deepseek.megatron.args
    assert not any(n.startswith("model.qk_layernorm:") for n in deepseek.torchtitan.notes)
    llama = launch_args(LLAMA70, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8)
    assert "--qk-layernorm" not in llama.megatron.args
    assert llama.nemo.config["model.config.qk_layernorm"] is False


def test_the_router_is_launched_as_the_model_routes() -> None:
    """DeepSeek-V3's router (sigmoid scores, the auxiliary-loss-free expert bias, 8 experts from 4 of 8 groups,
    weights x 2.5) and Llama 4's (a sigmoid over the one chosen expert, applied to the token before the expert):
    Megatron-LM flags and NeMo fields of Megatron-Core's names, and what TorchTitan's flavor must say. A top-1
    softmax router takes the softmax before the top-k, which Megatron-Core requires ("Please use
    --moe-router-pre-softmax when topk is 1"); Mixtral's top-2 softmax router is Megatron-Core's default."""
    training, layout = TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8, ep=8)
    deepseek = launch_args(DEEPSEEK, training, layout, 64, 8)
    flags = _flags(deepseek.megatron)
    assert flags["--moe-router-score-function"] == ["sigmoid"]
    assert (flags["--moe-router-num-groups"], flags["--moe-router-group-topk"]) == (["8"], ["4"])
    assert flags["--moe-router-topk-scaling-factor"] == ["2.5"]
    assert "--moe-router-enable-expert-bias" in deepseek.megatron.args
    assert "--moe-router-pre-softmax" not in deepseek.megatron.args
    router = {k: v for k, v in deepseek.nemo.config.items() if k.startswith("model.config.moe_router_")}
    assert router == {  # every field, defaults too: the recipe's config class keeps its own otherwise
        "model.config.moe_router_topk": 8,
        "model.config.moe_router_score_function": "sigmoid",
        "model.config.moe_router_pre_softmax": False,
        "model.config.moe_router_enable_expert_bias": True,
        "model.config.moe_router_num_groups": 8,
        "model.config.moe_router_group_topk": 4,
        "model.config.moe_router_topk_scaling_factor": 2.5,
        "model.config.moe_router_load_balancing_type": "seq_aux_loss",
    }
    assert deepseek.nemo.config["model.config.moe_aux_loss_coeff"] == 0.0001
    (note,) = [n for n in deepseek.torchtitan.notes if n.startswith("model.moe router:")]
    assert "score_func='sigmoid'" in note and "num_expert_groups=8, num_limited_groups=4" in note
    assert "route_scale=2.5" in note and "route_norm=True" in note and "load_balance_coeff" in note
    scout = launch_args(get_preset("llama4-scout").model, training, layout, 64, 8)
    assert _flags(scout.megatron)["--moe-router-score-function"] == ["sigmoid"]
    assert "--moe-apply-probs-on-input" in scout.megatron.args
    assert "--moe-router-pre-softmax" not in scout.megatron.args
    assert scout.nemo.config["model.config.moe_apply_probs_on_input"] is True
    mixtral = get_preset("mixtral-8x7b").model
    assert mixtral.moe is not None
    top1 = mixtral.model_copy(update={"moe": mixtral.moe.model_copy(update={"top_k": 1})})
    switch = launch_args(top1, training, layout, 64, 8)
    assert "--moe-router-pre-softmax" in switch.megatron.args
    assert switch.nemo.config["model.config.moe_router_pre_softmax"] is True
    plain = launch_args(mixtral, training, layout, 64, 8)
    assert [f for f in plain.megatron.args if f.startswith(("--moe-router-", "--moe-apply"))] == [
        "--moe-router-topk", "--moe-router-score-function", "--moe-router-load-balancing-type",
    ]  # fmt: skip
    assert _flags(plain.megatron)["--moe-router-score-function"] == ["softmax"]
    for name in ("moe_router_num_groups", "moe_router_group_topk", "moe_router_topk_scaling_factor"):
        assert plain.nemo.config[f"model.config.{name}"] is None  # a DeepSeek recipe's groups do not leak in
    assert plain.nemo.config["model.config.moe_apply_probs_on_input"] is False


def test_the_balancing_loss_is_launched_as_the_model_trains_it() -> None:
    """Mixtral's Switch loss at 0.02, DeepSeek-V3's per-sequence loss at 1e-4 and Qwen3's global-batch loss at 1e-3
    go to Megatron-LM flags and NeMo fields; TorchTitan, which trains no auxiliary loss, says it leaves it out and
    what its expert bias must be. A router nothing balances (Megatron-Core's defaults: aux_loss at 0, no bias) is
    launched as stated with a note in every framework; a stated `none` is not noted."""
    training, layout = TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8, ep=8)
    for preset, kind, weight in (
        ("mixtral-8x7b", "aux_loss", "0.02"),
        ("deepseek-v3", "seq_aux_loss", "0.0001"),
        ("qwen3-30b-a3b", "global_aux_loss", "0.001"),
    ):
        launch = launch_args(get_preset(preset).model, training, layout, 64, 8)
        flags = _flags(launch.megatron)
        assert (flags["--moe-router-load-balancing-type"], flags["--moe-aux-loss-coeff"]) == ([kind], [weight])
        assert launch.nemo.config["model.config.moe_router_load_balancing_type"] == kind
        assert launch.nemo.config["model.config.moe_aux_loss_coeff"] == float(weight)
        assert any(f"router_load_balancing({kind}) at {float(weight)}" in n for n in launch.torchtitan.notes)
        for framework in (launch.megatron, launch.nemo, launch.torchtitan):
            assert not any("nothing balancing" in n for n in framework.notes)
    (mixtral_router,) = [
        n for n in launch_args(get_preset("mixtral-8x7b").model, training, layout, 64, 8).torchtitan.notes
        if n.startswith("model.moe router:")
    ]  # fmt: skip
    assert "load_balance_coeff=None" in mixtral_router
    mixtral = get_preset("mixtral-8x7b").model
    assert mixtral.moe is not None
    bare = mixtral.model_copy(update={"moe": mixtral.moe.model_copy(update={"router_aux_loss_coeff": 0.0})})
    unbalanced = launch_args(bare, training, layout, 64, 8)
    assert _flags(unbalanced.megatron)["--moe-aux-loss-coeff"] == ["0.0"]
    for framework in (unbalanced.megatron, unbalanced.nemo, unbalanced.torchtitan):
        assert sum("nothing balancing the experts' loads" in n for n in framework.notes) == 1
    assert bare.moe is not None
    none = bare.moe.model_copy(update={"router_load_balancing": RouterLoadBalancing.NONE})
    stated = launch_args(bare.model_copy(update={"moe": none}), training, layout, 64, 8)
    assert _flags(stated.megatron)["--moe-router-load-balancing-type"] == ["none"]
    for framework in (stated.megatron, stated.nemo, stated.torchtitan):
        assert not any("nothing balancing" in n for n in framework.notes)


def test_bloom_says_rope_replaces_alibi_and_gpt3_does_not() -> None:
    bloom = launch_args(
        get_preset("bloom-176b").model, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8
    )
    assert any("ALiBi" in n for n in bloom.megatron.notes)
    assert not any(
        "Position" in n
        for n in launch_args(GPT3, TrainingSpec(global_batch_size=64), Layout(tp=8, pp=1, dp=8), 64, 8).megatron.notes
    )


def test_nemo_notes_say_when_its_placement_or_fp16_differ() -> None:
    partial = launch_args(LLAMA70, TrainingSpec(global_batch_size=100), Layout(tp=4, pp=1, dp=25), 100, 8).nemo
    assert any("20 nodes x 5 GPUs instead of 12 full nodes and one with 4" in n for n in partial.notes)
    fp16 = launch_args(
        GPT3, TrainingSpec(global_batch_size=64, precision=Precision.FP16), Layout(tp=8, pp=1, dp=8), 64, 8
    )
    assert any("fp16" in n for n in fp16.nemo.notes)
    assert not any("Placement" in n or "fp16" in n for n in fp16.megatron.notes)


# --- the request's data and tokenizer ---


def test_data_and_tokenizer_replace_the_mock_data() -> None:
    layout = Layout(tp=2, pp=1, dp=4, sequence_parallel=True, zero_stage=1)
    training = TrainingSpec(global_batch_size=64)
    given = LaunchInputs(data_path="/data/my corpus_text_document", tokenizer=TokenizerInputs(model="/tok dir"))
    launch = launch_args(LLAMA3_8B, training, layout, 8, 8, given)
    tokens = shlex.split(launch.megatron.command)
    assert _option(tokens, "--data-path") == "/data/my corpus_text_document"  # quoted: one argument
    assert _option(tokens, "--tokenizer-type") == "HuggingFaceTokenizer"
    assert _option(tokens, "--tokenizer-model") == "/tok dir"
    assert "--mock-data" not in tokens and "--vocab-size" not in tokens
    assert launch.megatron.notes[0].startswith("Trains on --data-path and --tokenizer-model as given")
    titan = launch.torchtitan.config
    assert titan["training"]["dataset_path"] == "/data/my corpus_text_document"  # type: ignore[index]
    assert titan["model"]["hf_assets_path"] == "/tok dir"  # type: ignore[index]
    assert launch.torchtitan.notes[0] == "Trains on training.dataset_path and model.hf_assets_path as given."
    assert "not applied here" in launch.nemo.notes[0]


def test_list_flags_are_lists_in_the_megatron_config_even_with_one_value() -> None:
    """argparse reads --recompute-modules as a list: the structured config says so for one value too (a plan
    recomputing the dense MLP alone: `--recompute-modules mlp`)."""
    layout = Layout(tp=2, pp=1, dp=4, recompute=Recompute.SELECTIVE, sequence_parallel=True, zero_stage=1)
    mlp = dataclasses.replace(layout, recompute_modules=(RecomputeModule.MLP,))
    launch = launch_args(LLAMA3_8B, TrainingSpec(global_batch_size=64), mlp, 8, 8)
    assert _option(shlex.split(launch.megatron.command), "--recompute-modules") == "mlp"
    assert launch.megatron.config["--recompute-modules"] == ["mlp"]


def test_data_without_tokenizer_names_the_placeholder_left() -> None:
    layout = Layout(tp=2, pp=1, dp=4, sequence_parallel=True, zero_stage=1)
    launch = launch_args(LLAMA3_8B, TrainingSpec(global_batch_size=64), layout, 8, 8, LaunchInputs(data_path="/d"))
    tokens = shlex.split(launch.megatron.command)
    assert _option(tokens, "--data-path") == "/d" and _option(tokens, "--tokenizer-type") == "NullTokenizer"
    assert "--tokenizer-model TOKENIZER" in launch.megatron.notes[0]
    assert "--model.hf_assets_path TOKENIZER_DIR" in launch.torchtitan.notes[0]
    plain = launch_args(LLAMA3_8B, TrainingSpec(global_batch_size=64), layout, 8, 8)
    assert plain.megatron.notes[0].startswith("Smoke test on mock data")
    assert "--mock-data" in shlex.split(plain.megatron.command)


def test_bf16_adam_moments_reach_megatron_and_nemo() -> None:
    layout = Layout(tp=8, pp=1, dp=2, zero_stage=1)
    launch = _launch(LLAMA70, layout, adam_moments="bf16")
    flags = _flags(launch.megatron)
    assert "--use-precision-aware-optimizer" in flags
    assert flags["--exp-avg-dtype"] == ["bf16"] and flags["--exp-avg-sq-dtype"] == ["bf16"]
    assert launch.nemo.config["optim.config.use_precision_aware_optimizer"] is True
    assert any("optim.config.exp_avg_dtype" in note for note in launch.nemo.notes)
    default = _launch(LLAMA70, layout)
    assert "--use-precision-aware-optimizer" not in _flags(default.megatron)
    assert "optim.config.use_precision_aware_optimizer" not in default.nemo.config


def test_sliding_window_attention_is_launched_as_priced() -> None:
    """GPT-OSS: Transformer Engine's (left, right) window of 127 keys back and none ahead (the 128 keys a query
    sees, itself included), every 2nd layer full. NeMo 2.5.0rc0's Megatron-Core has no pattern: the key is left out
    and a note names the rule that refuses such plans; TorchTitan's launched models have no window: a note."""
    model = get_preset("gpt-oss-120b").model
    layout, training = Layout(tp=1, pp=4, dp=16, ep=8, zero_stage=1), TrainingSpec(global_batch_size=1280)
    launch = launch_args(model, training, layout, 64, 8)
    flags = _flags(launch.megatron)
    assert (flags["--window-size"], flags["--window-attn-skip-freq"]) == (["127,0"], ["2"])
    assert launch.nemo.config["model.config.window_size"] == [127, 0]
    assert launch.nemo.config["model.config.window_attn_skip_freq"] == 2
    assert "model.config.window_size=[127,0]" in shlex.split(launch.nemo.command)
    old = launch_args(model, training, layout, 64, 8, versions={"nemo": "2.5.0rc0+8cfedd7"}).nemo
    assert old.config["model.config.window_size"] == [127, 0] and "model.config.window_attn_skip_freq" not in old.config
    assert any("rule nemo_no_window_pattern" in n for n in old.notes)
    assert any(
        n.startswith("model.sliding_window(128): the estimate prices windowed attention in 18 layers")
        for n in launch.torchtitan.notes
    )
    everywhere = launch_args(model.model_copy(update={"sliding_window_pattern": None}), training, layout, 64, 8)
    assert "--window-attn-skip-freq" not in _flags(everywhere.megatron)
    assert not any("rule nemo_no_window_pattern" in n for n in everywhere.nemo.notes)
    full = launch_args(
        model.model_copy(update={"sliding_window": None, "sliding_window_pattern": None}), training, layout, 64, 8
    )
    assert "--window-size" not in _flags(full.megatron) and "model.config.window_size" not in full.nemo.config
    assert not any("sliding_window" in n for n in full.torchtitan.notes)
