"""NeMo 2 / Megatron-Bridge logs: the task configuration (YAML of ConfigContainer) and the iteration lines.

Formats (Megatron-Bridge v0.3.0):
- `src/megatron/bridge/training/setup.py` `maybe_log_and_save_config`: `------- Task Configuration -------`, then
  `ConfigContainer.print_yaml()` (`src/megatron/bridge/training/utils/config_utils.py`: `yaml.safe_dump` of
  `to_dict()`, sections model, train, ddp, optimizer, ...), then a line of dashes. Later releases (v0.4+) log only
  non-default values there, but still write the full YAML to `logger.save_config_filepath`: pass that file as
  `config_text`.
- `src/megatron/bridge/training/utils/train_utils.py` `training_log`: the Megatron-LM iteration line
  (` [date] iteration N/ M | ... | elapsed time per iteration (ms): X | ...`).

The configuration names Megatron-Core's fields (TransformerConfig, DistributedDataParallelConfig); `_RENAMED`
maps the few that Megatron-LM's arguments spell differently, so one table (`planner.observe.megatron_args`)
reads both. The world size is not in the configuration: give `num_gpus`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml  # type: ignore[import-untyped]

from planner.observe.megatron import iteration_intervals, peak_reserved_gib
from planner.observe.megatron_args import megatron_request, padded_vocab_size
from planner.observe.observation import LogFormat, Observation, refuse
from planner.observe.timing import steady_state

__all__ = ["CONFIG_START", "bridge_settings", "parse_bridge", "task_configuration"]

CONFIG_START = "------- Task Configuration -------"
_WHERE = "task configuration"
_RENAMED = {
    "swiglu": ("model", "gated_linear_unit"),
    "num_experts": ("model", "num_moe_experts"),
    "decoder_first_pipeline_num_layers": ("model", "num_layers_in_first_pipeline_stage"),
    "decoder_last_pipeline_num_layers": ("model", "num_layers_in_last_pipeline_stage"),
    "micro_batch_size": ("train", "micro_batch_size"),
    "global_batch_size": ("train", "global_batch_size"),
    "overlap_grad_reduce": ("ddp", "overlap_grad_reduce"),
    "overlap_param_gather": ("ddp", "overlap_param_gather"),
    "grad_reduce_in_fp32": ("ddp", "grad_reduce_in_fp32"),
    "fp8_param_gather": ("ddp", "fp8_param_gather"),
    "use_megatron_fsdp": ("ddp", "use_megatron_fsdp"),
    "data_parallel_sharding_strategy": ("ddp", "data_parallel_sharding_strategy"),
}
"""Megatron-LM argument name -> (section, key) in ConfigContainer; every other name is read from `model`."""


def task_configuration(lines: Sequence[str]) -> dict[str, Any]:
    """The YAML between `------- Task Configuration -------` and the closing dashes, parsed."""
    starts = [i for i, line in enumerate(lines) if line.strip() == CONFIG_START]
    if not starts:
        refuse(
            "no Megatron-Bridge task configuration ('------- Task Configuration -------') in the log; pass the"
            " saved config YAML (logger.save_config_filepath) with --config"
        )
    if len(starts) > 1:
        refuse(f"{len(starts)} task configurations in the log: it holds more than one run; split it and import each")
    block: list[str] = []
    for line in lines[starts[0] + 1 :]:
        if line.strip().startswith("-----") and set(line.strip()) == {"-"}:
            return parse_yaml("\n".join(block))
        block.append(line)
    return refuse("the task configuration has no closing line of dashes (a truncated log?)")


def parse_yaml(text: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return refuse(f"the task configuration is not valid YAML ({exc})")
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        refuse("the task configuration has no model section")
    return config


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    section = config.get(name)
    return section if isinstance(section, dict) else {}


def bridge_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration under Megatron-LM's argument names (for `megatron_request`)."""
    model = _section(config, "model")
    settings = {k: v for k, v in model.items() if not isinstance(v, dict)}
    for name, (section, key) in _RENAMED.items():
        settings.pop(key, None)
        value = _section(config, section).get(key)
        if value is not None:
            settings[name] = value
    shared = model.get("share_embeddings_and_output_weights", True)
    settings["untie_embeddings_and_output_weights"] = shared is False
    settings["use_distributed_optimizer"] = any(
        _section(config, s).get("use_distributed_optimizer") is True for s in ("ddp", "optimizer")
    )
    settings |= _precision(config, model)
    if settings.get("attention_backend") is not None:
        settings["attention_backend"] = str(settings["attention_backend"])
    return settings


def _precision(config: Mapping[str, Any], model: Mapping[str, Any]) -> dict[str, Any]:
    """bf16/fp16/fp8 from the model (set by the mixed-precision recipe), else from `mixed_precision` itself."""
    if any(model.get(k) not in (None, False) for k in ("bf16", "fp16", "fp8")):
        return {k: model.get(k) for k in ("bf16", "fp16", "fp8")}
    recipe = config.get("mixed_precision")
    if isinstance(recipe, dict):
        return {k: recipe.get(k) for k in ("bf16", "fp16", "fp8")}
    name = recipe if isinstance(recipe, str) else ""
    return {"bf16": "bf16" in name, "fp16": "fp16" in name, "fp8": "fp8" if "fp8" in name else None}


def _vocab(model: Mapping[str, Any]) -> int:
    vocab, tp = model.get("vocab_size"), model.get("tensor_model_parallel_size", 1)
    if not isinstance(vocab, int) or not isinstance(tp, int):
        return refuse("vocab_size not in the task configuration's model section")
    if model.get("should_pad_vocab") is True:
        return padded_vocab_size(vocab, int(model.get("make_vocab_size_divisible_by", 128)), tp)
    return vocab


def parse_bridge(
    lines: Sequence[str], *, num_gpus: int | None, skip: int | None, file: str, config_text: str | None = None
) -> Observation:
    """The run a Megatron-Bridge log records; `config_text` is the saved config YAML when the log lacks it."""
    config = parse_yaml(config_text) if config_text is not None else task_configuration(lines)
    if num_gpus is None:
        refuse("world size not in a Megatron-Bridge log or configuration: give --num-gpus")
    timing = steady_state(iteration_intervals(lines), skip)
    request, notes = megatron_request(
        bridge_settings(config),
        where=_WHERE,
        world_size=num_gpus,
        vocab_size=_vocab(_section(config, "model")),
        framework="nemo",
    )
    return Observation(
        log_format=LogFormat.NEMO,
        request=request,
        timing=timing,
        peak_memory_gib=peak_reserved_gib(lines),
        file=file,
        notes=notes,
    )
