"""Build the frameworks' own config objects from an emitted launch and read back the layout they derive.

Needs the `launch-check` extra (torch CPU, megatron-core, torchtitan); imported only by
test_framework_check.py, which skips without it. What is the frameworks' code and what is ours:

- Megatron-Core (real): TransformerConfig, DistributedDataParallelConfig and OptimizerConfig run their
  own `__post_init__` checks; `RankGenerator` numbers the groups; `get_num_layers_to_build` splits the
  layers per stage. Ours: turning Megatron-LM flags into those objects' arguments, as Megatron-LM's
  `megatron/training/arguments.py` (core_transformer_config_from_args, validate_args) does; that file
  is not on the registry, so this translation follows its source at the pinned tag.
- TorchTitan (real): ConfigManager parses the emitted TOML and CLI, ParallelDims validates the degrees
  against the world size, get_schedule_class and generate_llm_fqn_per_model_part split the layers.
  Ours: the stage count of pipeline_llm (torchtitan/distributed/pipeline_parallel.py), which needs a
  model and a device mesh to run.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.optimizer import OptimizerConfig
from megatron.core.parallel_state import RankGenerator
from megatron.core.transformer.enums import AttnBackend, LayerType
from megatron.core.transformer.transformer_block import get_num_layers_to_build
from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig
from megatron.core.transformer.utils import is_layer_window_attention
from packaging.version import Version as PkgVersion
from torch.distributed.pipelining.schedules import PipelineScheduleSingle
from torchtitan.config import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims
from torchtitan.distributed.pipeline_parallel import generate_llm_fqn_per_model_part, get_schedule_class

from planner.launch import FrameworkLaunch

# --- Megatron-Core ---------------------------------------------------------------------------------

TE_VERSION = PkgVersion("2.11.0")
"""Transformer Engine as Megatron-Core would see it on a GPU machine: megatron-core 0.16.1's `dev` extra pins
transformer-engine >= 2.9.0a0, < 2.12.0."""


def megatron_args(launch: FrameworkLaunch) -> dict[str, Any]:
    """argparse's namespace: `--foo-bar` -> foo_bar, numbers parsed, switches True."""
    args: dict[str, Any] = {}
    for flag, value in launch.config.items():
        name = flag.removeprefix("--").replace("-", "_")
        if isinstance(value, list):  # nargs='+' / '*' (--recompute-modules): argparse's list
            args[name] = [_number(str(v)) for v in value]
        else:
            args[name] = value if value is True else _number(str(value))
    return args


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _virtual_size(a: dict[str, Any]) -> int | None:
    """validate_args: vp from --num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank."""
    if "num_layers_per_virtual_pipeline_stage" in a:
        return int(a["num_layers"] // a["pipeline_model_parallel_size"] // a["num_layers_per_virtual_pipeline_stage"])
    vp = a.get("num_virtual_stages_per_pipeline_rank")
    return None if vp is None else int(vp)


def transformer_config(a: dict[str, Any]) -> TransformerConfig:
    """core_transformer_config_from_args: same-named args, then the renamed and derived ones; an
    MLATransformerConfig under --multi-latent-attention, as Megatron-LM builds it."""
    config_class = MLATransformerConfig if a.get("multi_latent_attention") else TransformerConfig
    names = {f.name for f in dataclasses.fields(config_class)}
    kw: dict[str, Any] = {k: v for k, v in a.items() if k in names}
    dtype = torch.bfloat16 if a.get("bf16") else torch.half if a.get("fp16") else torch.float32
    kw |= {
        "params_dtype": dtype,
        "pipeline_dtype": dtype,
        "bf16": bool(a.get("bf16")),
        "fp16": bool(a.get("fp16")),
        "fp8": a.get("fp8_format"),
        "fp4": a.get("fp4_format"),  # --fp4-format's dest is fp4, --fp4-param-gather's fp4_param
        "fp4_param": bool(a.get("fp4_param_gather")),
        "add_bias_linear": not a.get("disable_bias_linear", False),
        "gated_linear_unit": bool(a.get("swiglu")),
        "num_query_groups": a["num_query_groups"] if a.get("group_query_attention") else None,
        "num_moe_experts": a.get("num_experts"),
        "num_layers_in_first_pipeline_stage": a.get("decoder_first_pipeline_num_layers"),
        "num_layers_in_last_pipeline_stage": a.get("decoder_last_pipeline_num_layers"),
        "virtual_pipeline_model_parallel_size": _virtual_size(a),
        "attention_backend": AttnBackend[a.get("attention_backend", "auto")],
        "sequence_parallel": bool(a.get("sequence_parallel")),
        "deallocate_pipeline_outputs": True,
        # validate_args: --cpu-offloading-num-layers > 0 turns cpu_offloading on.
        "cpu_offloading": int(a.get("cpu_offloading_num_layers", 0)) > 0,
    }
    if a.get("swiglu"):
        kw["activation_func"] = F.silu
    if isinstance(a.get("moe_layer_freq"), str):  # moe_freq_type: a Python list expression
        kw["moe_layer_freq"] = eval(a["moe_layer_freq"])
    if "window_size" in a:  # tuple_type: "127,0" -> (127, 0)
        kw["window_size"] = tuple(int(i) for i in str(a["window_size"]).strip("()").split(","))
    return config_class(**kw)


def window_layers(config: TransformerConfig) -> int:
    """Layers Megatron-Core builds with sliding-window attention (`is_layer_window_attention`, layers from 1)."""
    return sum(
        is_layer_window_attention(config.window_size, config.window_attn_skip_freq, n)
        for n in range(1, config.num_layers + 1)
    )


def ddp_config(a: dict[str, Any]) -> DistributedDataParallelConfig:
    return DistributedDataParallelConfig(
        overlap_grad_reduce=bool(a.get("overlap_grad_reduce")),
        overlap_param_gather=bool(a.get("overlap_param_gather")),
        use_distributed_optimizer=bool(a.get("use_distributed_optimizer")),
        use_megatron_fsdp=bool(a.get("use_megatron_fsdp")),
        data_parallel_sharding_strategy=a.get("data_parallel_sharding_strategy", "no_shard"),
    )


def optimizer_config(a: dict[str, Any]) -> OptimizerConfig:
    return OptimizerConfig(
        lr=float(a.get("lr", 1e-4)),
        bf16=bool(a.get("bf16")),
        fp16=bool(a.get("fp16")),
        params_dtype=torch.bfloat16 if a.get("bf16") else torch.half,
        use_distributed_optimizer=bool(a.get("use_distributed_optimizer")),
    )


def megatron_order(a: dict[str, Any]) -> str:
    """Megatron-LM initialize_megatron -> initialize_model_parallel(order=...)."""
    return "tp-cp-ep-pp-dp" if a.get("use_tp_pp_dp_mapping") else "tp-cp-ep-dp-pp"


def rank_groups(a: dict[str, Any], world: int) -> dict[str, list[list[int]]]:
    """The groups (tp, cp, pp, dp; ep from the expert grid) from Megatron-Core's RankGenerator, as
    initialize_model_parallel makes them."""
    tp, pp = int(a["tensor_model_parallel_size"]), int(a["pipeline_model_parallel_size"])
    cp = int(a.get("context_parallel_size", 1))
    dp = world // (tp * pp * cp)
    gen = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=megatron_order(a))
    groups = {name: gen.get_ranks(name) for name in ("tp", "cp", "pp", "dp")}
    # The expert grid: expert TP = --expert-tensor-parallel-size (default TP), cp folded into expert dp.
    ep = int(a.get("expert_model_parallel_size", 1))
    etp = int(a.get("expert_tensor_parallel_size") or tp)
    experts = RankGenerator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order=megatron_order(a))
    return groups | {"ep": experts.get_ranks("ep"), "etp": experts.get_ranks("tp")}


def layers_per_rank(config: TransformerConfig) -> list[int]:
    """Transformer layers each pipeline rank builds, over its virtual stages. With a pipeline layout, the decoder
    layers of Megatron-Core's own 2-D reading of it (`PipelineParallelLayerLayout.layout[rank][chunk]`: its
    `get_num_layers_to_build` asks the uninitialised parallel state for the rank)."""
    pp = config.pipeline_model_parallel_size
    vps = config.virtual_pipeline_model_parallel_size or 1
    if pp == 1:
        return [config.num_layers]
    if config.pipeline_model_parallel_layout is not None:
        return [sum(chunks) for chunks in layout_chunks(config)]
    return [
        sum(get_num_layers_to_build(config, vp_stage=v if vps > 1 else None, pp_rank=r) for v in range(vps))
        for r in range(pp)
    ]


def layout_chunks(config: TransformerConfig) -> list[list[int]] | None:
    """Decoder layers of each rank's model chunks as Megatron-Core reads a pipeline layout, or None without one."""
    if config.pipeline_model_parallel_layout is None:
        return None
    return [[chunk.count(LayerType.decoder) for chunk in rank] for rank in config.pipeline_model_parallel_layout.layout]


# --- TorchTitan ------------------------------------------------------------------------------------


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return str(value)


def toml(config: dict[str, object]) -> str:
    lines: list[str] = []
    for section, body in config.items():
        assert isinstance(body, dict)
        lines.append(f"[{section}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in body.items()]
    return "\n".join(lines) + "\n"


def _program_args(argv: list[str]) -> Iterator[str]:
    """The arguments after `-m torchtitan.train`, with CONFIG.toml kept as the placeholder name."""
    yield from argv[argv.index("torchtitan.train") + 1 :]


def torchtitan_job(launch: FrameworkLaunch, argv: list[str], placeholder_model: dict[str, str]) -> Any:
    """ConfigManager on the command's arguments. CONFIG.toml, when the command reads it, is `config` written as
    TOML, with a placeholder [model] for a shape TorchTitan does not ship (the user names a flavor there)."""
    args = list(_program_args(argv))
    with tempfile.TemporaryDirectory() as folder:
        if "--job.config_file" in args:
            config = dict(launch.config)
            config["model"] = placeholder_model | dict(config.get("model", {}))  # type: ignore[arg-type]
            path = Path(folder) / "CONFIG.toml"
            path.write_text(toml(config))
            args[args.index("--job.config_file") + 1] = str(path)
        return ConfigManager().parse_args(args)


def parallel_dims(job: Any, world: int) -> ParallelDims:
    p = job.parallelism
    return ParallelDims(
        dp_replicate=p.data_parallel_replicate_degree,
        dp_shard=p.data_parallel_shard_degree,
        cp=p.context_parallel_degree,
        tp=p.tensor_parallel_degree,
        pp=p.pipeline_parallel_degree,
        ep=p.expert_parallel_degree,
        etp=p.expert_tensor_parallel_degree,
        world_size=world,
    )


def torchtitan_layers_per_rank(job: Any, num_layers: int) -> list[int]:
    """Layers per pipeline rank: pipeline_llm's virtual-stage count, then the real split; stage s on rank s % pp."""
    p = job.parallelism
    pp = p.pipeline_parallel_degree
    if pp == 1:
        return [num_layers]
    first, last = p.pipeline_parallel_first_stage_less_layers, p.pipeline_parallel_last_stage_less_layers
    single = issubclass(get_schedule_class(p.pipeline_parallel_schedule), PipelineScheduleSingle)
    if p.pipeline_parallel_layers_per_stage is not None:
        stages = math.ceil((num_layers + first + last) / p.pipeline_parallel_layers_per_stage)
    else:
        stages = pp * (1 if single else 2)
    assert stages % pp == 0 and (stages // pp == 1) == single, (stages, pp, p.pipeline_parallel_schedule)
    parts = p.module_fqns_per_model_part or generate_llm_fqn_per_model_part(stages, num_layers, first, last)
    counts = [0] * pp
    for s, modules in enumerate(parts):
        counts[s % pp] += sum(m.startswith("layers.") for m in modules)
    return counts
