"""TorchTitan v0.3.0 launch: `--module M --config F` (a config_registry function returning `Trainer.Config`) with
tyro `--section.key` overrides on top, as `torchtitan/config/manager.py` `ConfigManager.parse_args` reads them.

Every flag is checked against `tests/data/torchtitan_flags.v0.3.0.txt`, the option strings of the parser
ConfigManager builds. What differs from v0.2.2 (planner/launch/torchtitan.py):

- no TOML: the model shape comes from the config function (`Trainer.Config.model_spec` is no CLI key), and
  so does float8 (a `Float8LinearConverter` in the model spec). A shape or precision no shipped function
  has gets the placeholders `--module MODULE --config CONFIG` and a note.
- every split is on the CLI: `module_fqns_per_model_part` takes one comma-separated list per stage.
- ZeRO 0 is `fully_shard` over dp_replicate with dp_shard 1 (HSDP replicating everything): v0.3.0's models
  always apply FSDP2, so there is no plain DDP and no > 1-D restriction.
- activation checkpointing is a tyro subcommand (`activation-checkpoint:{selective,full,none}`), last on
  the line; selective is SelectiveAC, per-op.
- sequence parallelism is a switch (`enable_sequence_parallel`), set as planned; the gradient reduce dtype
  is float32 only; CUDA graphs (on by default) refuse pp > 1 and the default expert dispatcher, so they are
  turned off there (`Trainer.Config._validate_cuda_graphs`).
- experts: no expert tensor parallelism (rule torchtitan_no_expert_tensor_parallel).

Booleans are spelled both ways (`--compile.enable` / `--compile.no-enable`) because the config function,
not a fixed default, decides the value otherwise.
"""

from __future__ import annotations

import shlex

from planner.launch.common import (
    FrameworkLaunch,
    Nodes,
    backward_prefetch_notes,
    expert_gemm_notes,
    known_model,
    model_notes,
    sequence_parallel_on,
    torchrun_command,
    torchtitan_async_tp,
    torchtitan_block_recompute_notes,
    torchtitan_compile_notes,
    torchtitan_compiles,
    torchtitan_fp8_notes,
    torchtitan_hybrid_notes,
    torchtitan_moe_dispatch_notes,
    torchtitan_mtp_notes,
    torchtitan_offload_notes,
    torchtitan_qk_norm_notes,
    torchtitan_router_notes,
    torchtitan_window_notes,
)
from planner.launch.inputs import LaunchInputs
from planner.launch.torchtitan_layout import DataKeys, data_notes, dp_degrees, local_batch_size, pipeline_keys
from planner.layout import Layout
from planner.specs import ExpertGemm, ModelSpec, Precision, Recompute, TrainingSpec

__all__ = ["TORCHTITAN_V03", "config_function", "flag", "overrides", "torchtitan_v03_launch", "v03_config"]

TORCHTITAN_V03 = "TorchTitan v0.3.0 (torchtitan-0.3.0-py3-none-any.whl sha256 5563ccf9a295)"
"""The registry's newest release: Python config (`--module`/`--config`), tyro overrides, no TOML."""

_CONFIG_FUNCTIONS: dict[tuple[str, str], dict[bool, str]] = {
    ("llama3", "8B"): {False: "llama3_8b"},
    ("llama3", "70B"): {False: "llama3_70b"},
    ("llama3", "405B"): {True: "llama3_405b"},
    ("deepseek_v3", "671B"): {False: "deepseek_v3_671b", True: "deepseek_v3_671b_float8"},
}
"""(model, flavor) -> {float8: config function}: torchtitan/models/*/config_registry.py of v0.3.0. llama3_405b
converts its Linear layers to float8, so it serves fp8 plans only; no 8B or 70B function has float8."""

_SAMPLE_DATA = (
    "Smoke test on TorchTitan's sample data: --dataloader.dataset c4_test and the test tokenizer"
    " --hf-assets-path ./tests/assets/tokenizer (run from a torchtitan checkout). For training, set"
    " --dataloader.dataset-path DATA and --hf-assets-path TOKENIZER_DIR."
)
_DATA_KEYS = DataKeys("dataloader.dataset_path", "--dataloader.dataset-path", "hf_assets_path", "--hf-assets-path")

_CHECKPOINTING = {Recompute.NONE: "none", Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}


def config_function(model: ModelSpec, training: TrainingSpec) -> tuple[str, str] | None:
    """(module, config function) shipped for the model's shape and precision, if any."""
    known = known_model(model)
    if known is None or known.torchtitan is None:
        return None
    function = _CONFIG_FUNCTIONS.get(known.torchtitan, {}).get(training.precision is Precision.FP8)
    return None if function is None else (known.torchtitan[0], function)


def _parallelism(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, object]:
    replicate, shard = dp_degrees(layout)
    section: dict[str, object] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "always" if layout.zero_stage == 3 else "never",
        "tensor_parallel_degree": layout.tp,
        "pipeline_parallel_degree": layout.pp,
        "context_parallel_degree": layout.cp,
        "expert_parallel_degree": layout.ep,
    }
    if layout.tp > 1:
        section["enable_sequence_parallel"] = sequence_parallel_on(model, training, layout)
    return section | pipeline_keys(model, layout, "lm_head")


def _training(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, object]:
    """With pp > 1 a step is one pipeline pass over local_batch_size / microbatch micro-batches; else accumulation."""
    section: dict[str, object] = {
        "local_batch_size": local_batch_size(training, layout),
        "global_batch_size": training.global_batch_size,
        "seq_len": model.seq_length,
        "mixed_precision_param": "bfloat16",
    }
    if layout.pp > 1 or layout.ep > 1:
        section["disable_cuda_graphs"] = True
    return section


def _compile(training: TrainingSpec, layout: Layout) -> dict[str, object]:
    """torch.compile of the model and loss where the plan was priced fused or async TP needs it
    (`common.torchtitan_compiles`; async TP runs only compiled, CompileConfig.__post_init__)."""
    async_tp = torchtitan_async_tp(training, layout)
    if torchtitan_compiles(training, layout):
        return {"enable": True, "components": ["model", "loss"], "enable_async_tensor_parallel": async_tp}
    return {"enable": False, "enable_async_tensor_parallel": False}


def _data(inputs: LaunchInputs) -> dict[str, object]:
    """The request's data (dataloader.dataset_path) and tokenizer folder (hf_assets_path), else the sample ones."""
    config: dict[str, object] = {}
    config["dataloader"] = {"dataset_path": inputs.data_path} if inputs.data_path else {"dataset": "c4_test"}
    config["hf_assets_path"] = inputs.tokenizer_model or "./tests/assets/tokenizer"
    return config


def v03_config(model: ModelSpec, training: TrainingSpec, layout: Layout, inputs: LaunchInputs) -> dict[str, object]:
    """The overrides by section (`Trainer.Config` field names); `activation_checkpoint` names the subcommand."""
    return {
        "parallelism": _parallelism(model, training, layout),
        "training": _training(model, training, layout),
        "compile": _compile(training, layout),
        **_data(inputs),
        "activation_checkpoint": _CHECKPOINTING[layout.recompute],
    }


def flag(dotted: str) -> str:
    """tyro's spelling of a dotted key: `training.seq_len` -> `--training.seq-len`."""
    return "--" + dotted.replace("_", "-")


def _value_args(name: str, value: object) -> list[str]:
    if value is True or value is False:
        section, _, key = name.rpartition(".")
        return [flag(name if value else f"{section}.no_{key}")]
    if isinstance(value, list) and value and isinstance(value[0], list):
        return [flag(name), *(",".join(part) for part in value)]
    if isinstance(value, list):
        return [flag(name), ",".join(str(v) for v in value)]
    return [flag(name), str(value)]


def overrides(config: dict[str, object]) -> list[str]:
    """The CLI overrides: `--section.key value` per key, the activation-checkpoint subcommand last (tyro reads
    the options after a subcommand as that subcommand's)."""
    args: list[str] = []
    for key, value in config.items():
        if key == "activation_checkpoint":
            continue
        if isinstance(value, dict):
            for inner, item in value.items():
                args += _value_args(f"{key}.{inner}", item)
        else:
            args += _value_args(key, value)
    return [*args, f"activation-checkpoint:{config['activation_checkpoint']}"]


def _notes(training: TrainingSpec, inputs: LaunchInputs, shipped: tuple[str, str] | None) -> list[str]:
    notes: list[str] = []
    if shipped is not None:
        notes.append(
            f"Starts from TorchTitan's {shipped[0]} config function {shipped[1]}: its optimizer, LR schedule, steps,"
            " checkpointing, profiler and metrics settings stay; the overrides set the planned layout, batches,"
            " sequence length, precision and recomputation."
        )
    else:
        fp8 = " with a Float8LinearConverter in its model spec" if training.precision is Precision.FP8 else ""
        notes.append(
            "--module MODULE --config CONFIG are placeholders: no TorchTitan v0.3.0 config_registry function ships"
            f" this shape in this precision. Write one returning Trainer.Config whose model_spec has the planned"
            f" shape{fp8} (the model shape and float8 are not CLI keys), e.g. from llama3_8b in"
            " torchtitan/models/llama3/config_registry.py; the overrides set the rest."
        )
    if training.precision is Precision.FP16:
        notes.append("fp16: TorchTitan has no fp16 mixed precision; bfloat16 is used.")
    if training.grad_reduce_in_fp32 is False:
        notes.append("Gradient reduce stays float32: v0.3.0's training.mixed_precision_reduce accepts only float32.")
    return [*notes, *data_notes(inputs, _SAMPLE_DATA, _DATA_KEYS)]


def torchtitan_v03_launch(
    model: ModelSpec, training: TrainingSpec, layout: Layout, nodes: Nodes, inputs: LaunchInputs
) -> FrameworkLaunch:
    """The shipped config function for the model and precision (placeholders otherwise), then the overrides."""
    config = v03_config(model, training, layout, inputs)
    args = overrides(config)
    shipped = config_function(model, training)
    module, function = shipped or ("MODULE", "CONFIG")
    command = torchrun_command(nodes, ["-m", "torchtitan.train", "--module", module, "--config", function, *args])
    return FrameworkLaunch(
        framework_version=TORCHTITAN_V03,
        args=args,
        command=f"PYTORCH_ALLOC_CONF={shlex.quote('expandable_segments:True')} {command}",
        config={"module": module, "config": function, **config},
        notes=[
            *_notes(training, inputs, shipped),
            *model_notes(model),
            *torchtitan_hybrid_notes(model),
            *torchtitan_compile_notes(training, layout),
            *torchtitan_fp8_notes(training),
            *torchtitan_offload_notes(training),
            *torchtitan_mtp_notes(model),
            *torchtitan_qk_norm_notes(model),
            *torchtitan_window_notes(model),
            *torchtitan_router_notes(model),
            *torchtitan_moe_dispatch_notes(training, layout),
            *expert_gemm_notes(model, training, ExpertGemm.GROUPED),
            *backward_prefetch_notes(training, layout, "FSDP2"),
            *torchtitan_block_recompute_notes(training, layout),
        ],
    )
