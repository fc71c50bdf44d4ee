"""TorchTitan launches: v0.2.2's JobConfig overrides (TOML sections and `--section.key` CLI flags) here, v0.3.0's
Python config in planner/launch/torchtitan_v03.py; `torchtitan_launch` picks by release.

Every key is checked against `tests/data/torchtitan_config_keys.txt`, the dotted keys of
`torchtitan/config/job_config.py` at v0.2.2. Not expressible exactly in TorchTitan:

- rank order: its device mesh is (pp, dp, cp, tp), pp outermost; the planner places tp, cp, pp, dp.
- ZeRO stages: TorchTitan shards with FSDP2 over dp_shard * cp. ZeRO 1 and 2 map to FSDP keeping
  parameters gathered after forward (`fsdp_reshard_after_forward = "never"`), ZeRO 3 to resharding
  them (`"always"`); ZeRO 0 to replication (DDP), except that cp > 1 and ep > 1 still need FSDP
  (experts are sharded out of dp_shard * cp), so the smallest such shard degree is used. Plain DDP
  refuses > 1-D parallelism (rule ddp_one_dimensional in `planner.rules`, torchtitan 0.2.2).
- selective recomputation: TorchTitan's per-op SAC (`selective_ac_option = "op"`) is the closest to
  Megatron's attention-core recompute.
- fp16: no fp16 mixed precision; bfloat16 is used. fp8: the float8 Linear converter (torchao).
- sequence parallelism is always on with tp > 1; flash attention and DP overlap are not options.
- its models have no dropout, so the dropout rates have no key; the gradient dtype is
  `training.mixed_precision_reduce` (float32 unless `grad_reduce_in_fp32` is false).

Booleans that are False are left out of the CLI overrides (JobConfig's defaults are False; tyro
spells the negation `--section.no-key`); the TOML form in `config` keeps them.
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
from planner.launch.torchtitan_v03 import TORCHTITAN_V03, torchtitan_v03_launch
from planner.layout import Layout
from planner.rules import default_version
from planner.specs import ExpertGemm, ModelSpec, Precision, Recompute, TrainingSpec

__all__ = ["TORCHTITAN_VERSION", "TORCHTITAN_VERSIONS", "torchtitan_launch"]

TORCHTITAN_VERSIONS = {
    "0.3.0": TORCHTITAN_V03,
    "0.2.2": "TorchTitan v0.2.2 (commit 73a0e6979dd1, 2026-02-20)",
}
"""Release id (`planner.rules.VERSIONS["torchtitan"]`) -> version stamp. v0.2.2 is the last release with the TOML
JobConfig and `--job.config_file`; v0.3.0 configures in Python (planner/launch/torchtitan_v03.py)."""
TORCHTITAN_VERSION = TORCHTITAN_VERSIONS[default_version("torchtitan")]

_CHECKPOINTING = {Recompute.NONE: "none", Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}


def _parallelism(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, object]:
    replicate, shard = dp_degrees(layout)
    section: dict[str, object] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "always" if layout.zero_stage == 3 else "never",
        "tensor_parallel_degree": layout.tp,
        "enable_async_tensor_parallel": torchtitan_async_tp(training, layout),
        "pipeline_parallel_degree": layout.pp,
        "context_parallel_degree": layout.cp,
        "expert_parallel_degree": layout.ep,
        "expert_tensor_parallel_degree": layout.etp if layout.ep > 1 else 1,  # v0.2.2 reads it only with ep > 1
    }
    return section | pipeline_keys(model, layout, "output")


def _training(model: ModelSpec, training: TrainingSpec, layout: Layout) -> dict[str, object]:
    """With pp > 1 a step is one pipeline pass over local_batch_size / microbatch micro-batches; else accumulation."""
    return {
        "local_batch_size": local_batch_size(training, layout),
        "global_batch_size": training.global_batch_size,
        "seq_len": model.seq_length,
        "mixed_precision_param": "bfloat16",
        "mixed_precision_reduce": "bfloat16" if training.grad_reduce_in_fp32 is False else "float32",
    }


def _data(inputs: LaunchInputs) -> tuple[dict[str, object], dict[str, object]]:
    """(training, model) keys for the request's data and tokenizer (JobConfig training.dataset_path and
    model.hf_assets_path, the folder holding the tokenizer files)."""
    data: dict[str, object] = {"dataset_path": inputs.data_path} if inputs.data_path else {}
    tokenizer: dict[str, object] = {"hf_assets_path": inputs.tokenizer_model} if inputs.tokenizer_model else {}
    return data, tokenizer


def _config(model: ModelSpec, training: TrainingSpec, layout: Layout, inputs: LaunchInputs) -> dict[str, object]:
    checkpointing: dict[str, object] = {"mode": _CHECKPOINTING[layout.recompute]}
    if layout.recompute is Recompute.SELECTIVE:
        checkpointing["selective_ac_option"] = "op"
    config: dict[str, object] = {
        "parallelism": _parallelism(model, training, layout),
        "activation_checkpoint": checkpointing,
        "training": _training(model, training, layout) | _data(inputs)[0],
    }
    known = known_model(model)
    model_section: dict[str, object] = dict(_data(inputs)[1])
    if known is not None and known.torchtitan is not None:
        model_section |= {"name": known.torchtitan[0], "flavor": known.torchtitan[1]}
    if training.precision is Precision.FP8:
        model_section["converters"] = ["quantize.linear.float8"]
    if model_section:
        config["model"] = model_section
    config["compile"] = {"enable": torchtitan_compiles(training, layout)}
    return config


_SAMPLE_DATA = (
    "Smoke test on TorchTitan's sample data: JobConfig's defaults (training.dataset c4_test and the test tokenizer"
    " under ./tests/assets, run from a torchtitan checkout). For training, set --training.dataset_path DATA and"
    " --model.hf_assets_path TOKENIZER_DIR."
)


def _overrides(config: dict[str, object], prefix: str = "") -> list[str]:
    """`--section.key value` pairs; True is a bare flag, False is left to the default; nested lists stay in TOML."""
    args: list[str] = []
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            args += _overrides(value, f"{name}.")
        elif value is True:
            args.append(f"--{name}")
        elif value is False or (isinstance(value, list) and any(isinstance(v, list) for v in value)):
            continue
        elif isinstance(value, list):
            args += [f"--{name}", ",".join(str(v) for v in value)]
        else:
            args += [f"--{name}", str(value)]
    return args


def _data_notes(inputs: LaunchInputs) -> list[str]:
    keys = DataKeys(
        "training.dataset_path", "--training.dataset_path", "model.hf_assets_path", "--model.hf_assets_path"
    )
    return data_notes(inputs, _SAMPLE_DATA, keys)


def torchtitan_launch(
    model: ModelSpec,
    training: TrainingSpec,
    layout: Layout,
    nodes: Nodes,
    inputs: LaunchInputs | None = None,
    version: str | None = None,
) -> FrameworkLaunch:
    """The launch for TorchTitan at `version` (a TORCHTITAN_VERSIONS id; default the newest targeted)."""
    inputs = inputs or LaunchInputs()
    if (version or default_version("torchtitan")) == "0.3.0":
        return torchtitan_v03_launch(model, training, layout, nodes, inputs)
    return _v02_launch(model, training, layout, nodes, inputs)


def _v02_launch(
    model: ModelSpec, training: TrainingSpec, layout: Layout, nodes: Nodes, inputs: LaunchInputs
) -> FrameworkLaunch:
    """v0.2.2: for a model TorchTitan ships, the overrides name its flavor and start from JobConfig's defaults

    (no train config file: the shipped ones turn on features, e.g. float8 for 405B, that the CLI
    cannot turn off). Otherwise, or when the stage split names every stage's modules (uneven and
    interleaved, or a heavier end stage; the CLI cannot spell that list of lists), the command reads
    CONFIG.toml, which must hold `config` (and, for a shape TorchTitan does not ship, a [model]
    section naming a flavor registered for it).
    """
    config = _config(model, training, layout, inputs)
    args = _overrides(config)
    known = known_model(model)
    shipped = known is not None and known.torchtitan is not None
    # A split naming every stage's modules is a list of lists, which the CLI cannot carry: TOML only.
    toml_only = "module_fqns_per_model_part" in config["parallelism"]  # type: ignore[operator]
    config_file = [] if shipped and not toml_only else ["--job.config_file", "CONFIG.toml"]
    command = torchrun_command(nodes, ["-m", "torchtitan.train", *config_file, *args])
    return FrameworkLaunch(
        framework_version=TORCHTITAN_VERSIONS["0.2.2"],
        args=args,
        command=f"PYTORCH_ALLOC_CONF={shlex.quote('expandable_segments:True')} {command}",
        config=config,
        notes=[
            *_data_notes(inputs),
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
