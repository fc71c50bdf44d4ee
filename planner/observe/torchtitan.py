"""TorchTitan logs: the device mesh, the model arguments, the trainer's batch line and the per-step metric lines.

Reads the logs of TorchTitan v0.2.2 and v0.3.0 (`torchtitan_release` tells them apart; what v0.3.0 logs
differently is in `planner.observe.torchtitan_v03`). Formats (TorchTitan v0.2.2):
- `torchtitan/distributed/parallel_dims.py` `ParallelDims.build_mesh`: `Building device mesh with parallelism:
  pp=P, dp_replicate=R, dp_shard=S, cp=C, tp=T, ep=E, etp=X`.
- `torchtitan/train.py` `Trainer.__init__`: `Building NAME FLAVORwith {model args as JSON}`; `Trainer is
  initialized with local batch size b, global batch size B, gradient accumulation steps g, sequence length s,
  total steps n (warmup w)`.
- `torchtitan/distributed/activation_checkpoint.py` `apply_ac`: `Applied MODE activation checkpointing to the
  model` (absent when the mode is none); `torchtitan/components/quantization/float8.py`: `Float8 training active`.
- `torchtitan/components/metrics.py` `MetricsProcessor.log`: `step: N  loss: ...  grad_norm: ...  memory: X GiB
  (Y%)  tps: T  tflops: ...  mfu: ...%` at step 1 and every `metrics.log_freq` steps, where tps is the tokens this
  rank loaded since the last log over (elapsed seconds x tp*pp*cp), and memory is the peak reserved.
- `torchtitan/config/job_config.py` `JobConfig.maybe_log`: `Running with configs: {JSON}` with
  `job.print_config`; else the job's TOML (`--job.config_file`) gives the settings the lines above lack.
Settings neither release logs (FSDP resharding policy, v0.2.2's pipeline schedule, v0.3.0's
`enable_sequence_parallel`) come from those configs, else the release's defaults.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any

from planner.observe.observation import LogFormat, Observation, refuse
from planner.observe.timing import Interval, steady_state
from planner.observe.torchtitan_v03 import llama3_model, pipeline_schedule, torchtitan_release

__all__ = ["MESH", "llama_ffn_hidden_size", "parse_torchtitan", "step_time_s"]

MESH = re.compile(
    r"Building device mesh with parallelism: pp=(\d+), dp_replicate=(\d+), dp_shard=(\d+), cp=(\d+),"
    r" tp=(\d+), ep=(\d+)"
)
_MODEL = re.compile(r"Building (\S+) (\S+?)with (\{)")
_TRAINER = re.compile(
    r"Trainer is initialized with local batch size (\d+), global batch size (\d+), .*sequence"
    r" length (\d+)"
)
_AC = re.compile(r"Applied (\w+) activation checkpointing to the model")
_STEP = re.compile(r"(?<!validate )step:\s*(\d+)\s+loss:.*?memory:\s*([0-9.]+)\s*GiB.*?tps:\s*([0-9,]+)")
_CONFIGS = re.compile(r"Running with configs: (\{)")
_COMPILED = "Compiling each TransformerBlock with torch.compile"
"""Logged where the model is compiled (v0.2.2 torchtitan/models/llama3/infra/parallelize.py `apply_compile`, v0.3.0
torchtitan/distributed/compile.py), only when `compile.enable` with "model" in `compile.components`."""
_EAGER_NOTE = (
    "torch.compile was off (no '" + _COMPILED + "' line): the run's RoPE and SwiGLU ran as eager PyTorch ops, one"
    " kernel each, which an estimate prices as fused kernels unless runtime.eager_elementwise is set; that flag"
    " prices IBM fms's eager code, which moves more than TorchTitan's (PyTorch's RMSNorm is fused), so the measured"
    " step is expected between the two estimates."
)
_SINGLE_STAGE = {"1F1B", "GPipe"}
"""Schedules with one stage per rank (torchtitan/distributed/pipeline_parallel.py: PipelineScheduleSingle)."""
_LLAMA_TRAITS = {"gated_mlp": True, "tied_embeddings": False, "linear_bias": False}
"""v0.2.2 torchtitan/models/llama3/model/model.py, v0.3.0 torchtitan/models/llama3/__init__.py: SwiGLU, RMSNorm,
no biases, RoPE, a separate output layer (lm_head)."""
_RECOMPUTE = {"none": "none", "selective": "selective", "full": "full", "SelectiveAC": "selective", "FullAC": "full"}
"""v0.2.2 logs the mode, v0.3.0 the policy class (torchtitan/distributed/activation_checkpoint.py)."""
_UNMODELLED = {
    re.compile(r"Selected \S+ budget option"): "memory-budget activation checkpointing is not modelled",
    re.compile(r"Converted Linear layers to MXFP8Linear"): "MXFP8 training is not modelled",
    re.compile(r"Converted Linear layers to NVFP4Linear"): "NVFP4 training is not modelled",
}
"""v0.3.0 lines naming a setting the planner cannot express (see planner.observe.torchtitan_v03)."""


def llama_ffn_hidden_size(dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """The SwiGLU width of a Llama layer: 2/3 of 4*dim, times the multiplier, rounded up to `multiple_of`.

    Source: TorchTitan v0.2.2 torchtitan/models/llama3/model/model.py `FeedForward.__init__` (hidden_dim=4*dim
    from `TransformerBlock.__init__`); Llama 3 8B: dim 4096, multiplier 1.3, multiple_of 1024 -> 14336.
    """
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * -(-hidden // multiple_of)


def step_time_s(tps: float, global_batch_size: int, seq_len: int, world_size: int) -> float:
    """Seconds per step from TorchTitan's tps: a step loads B*s/dp tokens per rank, and tps divides by tp*pp*cp.

    Source: TorchTitan v0.2.2 torchtitan/components/metrics.py `MetricsProcessor.log` (tps = ntokens_since_last_log
    / (time_delta * non_data_parallel_size)), unchanged in v0.3.0; so step time = B * s / (tps * world_size).
    """
    return global_batch_size * seq_len / (tps * world_size)


def _json_after(text: str, pattern: re.Pattern[str], what: str) -> tuple[re.Match[str], Any] | None:
    match = pattern.search(text)
    if match is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, match.end() - 1)
    except json.JSONDecodeError as exc:
        return refuse(f"the {what} JSON in the log does not parse ({exc})")
    return match, value


def _config(text: str, config_text: str | None) -> dict[str, Any]:
    if config_text is not None and config_text.lstrip().startswith("{"):
        try:
            parsed = json.loads(config_text)
        except json.JSONDecodeError as exc:
            return refuse(f"--config is not valid JSON ({exc})")
        return parsed if isinstance(parsed, dict) else refuse("--config JSON is not an object")
    if config_text is not None:
        try:
            return tomllib.loads(config_text)
        except tomllib.TOMLDecodeError as exc:
            return refuse(f"--config is not valid TOML ({exc})")
    found = _json_after(text, _CONFIGS, "'Running with configs'")
    return found[1] if found is not None and isinstance(found[1], dict) else {}


def _get(config: Mapping[str, Any], section: str, key: str, default: Any) -> Any:
    part = config.get(section)
    return part.get(key, default) if isinstance(part, dict) else default


def _mesh(lines: Sequence[str]) -> tuple[int, ...]:
    meshes = {tuple(int(g) for g in m.groups()) for line in lines if (m := MESH.search(line))}
    if not meshes:
        refuse("no 'Building device mesh with parallelism' line in the log: the layout cannot be recovered")
    if len(meshes) > 1:
        refuse(f"{len(meshes)} different device meshes in the log: it holds more than one run; split it")
    return meshes.pop()


_MESH_ETP = re.compile(r"Building device mesh with parallelism: .*, ep=\d+, etp=(\d+)")


def _expert_tp(lines: Sequence[str], config: Mapping[str, Any], release: str, tp: int, ep: int) -> int:
    """The experts' tensor-parallel size: tp without expert parallelism; with it, v0.3.0 keeps each expert whole
    (no expert TP) and v0.2.2 logs `etp=` on its mesh line (`parallelism.expert_tensor_parallel_degree`,
    default 1)."""
    if ep == 1:
        return tp
    if release == "0.3.0":
        return 1
    found = {int(m.group(1)) for line in lines if (m := _MESH_ETP.search(line))}
    if found:
        return found.pop()
    return int(_get(config, "parallelism", "expert_tensor_parallel_degree", 1))


def _model(lines: Sequence[str], text: str, seq_len: int, release: str) -> dict[str, Any]:
    if release == "0.3.0":
        return llama3_model(lines) | _LLAMA_TRAITS | {"seq_length": seq_len}
    found = _json_after(text, _MODEL, "model arguments")
    if found is None:
        refuse("no 'Building MODEL FLAVORwith {...}' line in the log: the model shape cannot be recovered")
    match, args = found
    if match.group(1) not in ("llama3", "llama2") or not isinstance(args, dict):
        refuse(f"TorchTitan model {match.group(1)!r}: only the Llama model arguments (llama3, llama2) are read")
    try:
        dim, heads = int(args["dim"]), int(args["n_heads"])
        model: dict[str, Any] = {
            "name": f"{match.group(1)} {match.group(2)}",
            "num_layers": int(args["n_layers"]),
            "hidden_size": dim,
            "num_attention_heads": heads,
            "num_query_groups": int(args.get("n_kv_heads") or heads),
            "ffn_hidden_size": llama_ffn_hidden_size(dim, int(args["multiple_of"]), args.get("ffn_dim_multiplier")),
            "vocab_size": int(args["vocab_size"]),
        }
    except (KeyError, TypeError, ValueError) as exc:
        return refuse(f"the model arguments lack or garble {exc}")
    return model | {"seq_length": seq_len} | _LLAMA_TRAITS


def _virtual_stages(config: Mapping[str, Any], num_layers: int, pp: int) -> int:
    """Stages per pipeline rank. Source: torchtitan/distributed/pipeline_parallel.py `pipeline_llm`."""
    if pp == 1 or _get(config, "parallelism", "pipeline_parallel_schedule", "1F1B") in _SINGLE_STAGE:
        return 1
    per_stage = _get(config, "parallelism", "pipeline_parallel_layers_per_stage", None)
    if per_stage is None:
        return 2
    first = _get(config, "parallelism", "pipeline_parallel_first_stage_less_layers", 1)
    last = _get(config, "parallelism", "pipeline_parallel_last_stage_less_layers", 1)
    return int(math.ceil((num_layers + first + last) / per_stage)) // pp


def _zero_stage(config: Mapping[str, Any], dp_shard: int, pp: int) -> int:
    """FSDP2 over dp_shard: `fsdp_reshard_after_forward` always -> ZeRO 3, never -> 2, default -> 3 unless pp > 1.

    Source: v0.2.2 torchtitan/models/llama3/infra/parallelize.py `apply_fsdp`, v0.3.0 torchtitan/distributed/fsdp.py
    `get_fsdp_reshard_after_forward_policy` (both: default reshard_after_forward = not pp).
    """
    if dp_shard == 1:
        return 0
    policy = _get(config, "parallelism", "fsdp_reshard_after_forward", "default")
    return 3 if policy == "always" or (policy == "default" and pp == 1) else 2


def _recompute(lines: Sequence[str], config: Mapping[str, Any]) -> str:
    """v0.2.2: the config's mode, else the logged one; v0.3.0's config holds the policy's fields, not its name."""
    modes = {m.group(1) for line in lines if (m := _AC.search(line))}
    mode = _get(config, "activation_checkpoint", "mode", modes.pop() if len(modes) == 1 else "none")
    if mode not in _RECOMPUTE:
        refuse(f"activation checkpointing mode {mode!r} is not one the planner models (none, selective, full)")
    return _RECOMPUTE[mode]


def _training(text: str, config: Mapping[str, Any], global_batch: int, tp: int) -> dict[str, Any]:
    for pattern, why in _UNMODELLED.items():
        if pattern.search(text):
            refuse(why)
    converters = _get(config, "model", "converters", [])
    fp8 = "Float8 training active" in text or any("float8" in str(c) for c in converters)
    if _get(config, "training", "mixed_precision_param", "bfloat16") != "bfloat16":
        refuse("training.mixed_precision_param is not bfloat16: fp32 training is not modelled")
    training: dict[str, Any] = {
        "global_batch_size": global_batch,
        "precision": "fp8" if fp8 else "bf16",
        "runtime": {
            "tp_comm_overlap": tp > 1
            and ("Async TP is enabled" in text or _get(config, "parallelism", "enable_async_tensor_parallel", False))
        },
    }
    # FSDP2 holds the fp32 sharded gradient and reduces in mixed_precision_reduce (rule torchtitan_gradient_layout).
    training["gradient_layout"] = "pytorch_fsdp"
    reduce = _get(config, "training", "mixed_precision_reduce", None)
    if reduce is not None:
        training["grad_reduce_in_fp32"] = reduce == "float32"
    return training


_SPLIT_NOTE = (
    "stage split: TorchTitan 0.3.0 gives each virtual stage (layers + first/last_stage_less_layers) / stages layers,"
    " the embedding and the loss counting as one layer each by default (pipeline_parallel.py"
    " _generate_llm_fqn_per_model_part); the layout records an even split of the transformer layers"
)


def _pipeline(
    lines: Sequence[str], config: Mapping[str, Any], release: str, batch: tuple[int, int, int]
) -> tuple[int, int]:
    """(vp, micro_batch_size): v0.3.0's schedule line, else v0.2.2's configs; `batch` is (local, layers, pp)."""
    local_batch, num_layers, pp = batch
    if pp == 1:
        return 1, local_batch
    if release == "0.3.0":
        return pipeline_schedule(lines, local_batch, pp)
    microbatch = int(_get(config, "parallelism", "pipeline_parallel_microbatch_size", 1))
    return _virtual_stages(config, num_layers, pp), microbatch


def _layout(
    lines: Sequence[str], config: Mapping[str, Any], release: str, local_batch: int, layers: int
) -> dict[str, Any]:
    pp, dp_replicate, dp_shard, cp, tp, ep = _mesh(lines)
    etp = _expert_tp(lines, config, release, tp, ep)
    vp, microbatch = _pipeline(lines, config, release, (local_batch, layers, pp))
    # v0.3.0 torchtitan/config/configs.py ParallelismConfig.enable_sequence_parallel (default True); v0.2.2: always.
    sequence_parallel = release != "0.3.0" or _get(config, "parallelism", "enable_sequence_parallel", True) is True
    return {
        "tp": tp,
        "pp": pp,
        "dp": dp_replicate * dp_shard,
        "cp": cp,
        "ep": ep,
        "vp": vp,
        "micro_batch_size": microbatch,
        "recompute": _recompute(lines, config),
        "sequence_parallel": tp > 1 and sequence_parallel,
        "zero_stage": _zero_stage(config, dp_shard, pp),
    } | ({"etp": etp} if etp != tp else {})


def parse_torchtitan(
    lines: Sequence[str], *, num_gpus: int | None, skip: int | None, file: str, config_text: str | None = None
) -> Observation:
    """The run a TorchTitan 0.2.2 or 0.3.0 log records; `config_text` is the job's TOML (0.2.2) or saved config
    JSON (`debug.save_config_file`), else the logged configs, else the release's defaults."""
    text = "\n".join(lines)
    release = torchtitan_release(lines)
    mesh = _mesh(lines)
    world_size, tp = math.prod(mesh[:5]), mesh[4]
    if num_gpus is not None and num_gpus != world_size:
        refuse(f"the device mesh multiplies to {world_size} GPUs; --num-gpus says {num_gpus}")
    trainer = _TRAINER.search(text)
    if trainer is None:
        refuse("no 'Trainer is initialized with local batch size ...' line: the batch cannot be recovered")
    local_batch, global_batch, seq_len = (int(g) for g in trainer.groups())
    config = _config(text, config_text)
    model = _model(lines, text, seq_len, release)
    steps = [m for line in lines if (m := _STEP.search(line))]
    if any(float(m.group(3).replace(",", "")) <= 0 for m in steps):
        refuse("a step line reports tps 0: no step time can be derived from it")
    intervals = [
        Interval(int(m.group(1)), step_time_s(float(m.group(3).replace(",", "")), global_batch, seq_len, world_size))
        for m in steps
    ]
    request = {
        "model": model,
        "cluster": {"num_gpus": world_size},
        "training": _training(text, config, global_batch, tp),
        "layout": _layout(lines, config, release, local_batch, model["num_layers"]),
        "framework": "torchtitan",
        "framework_version": release,
    }
    return Observation(
        log_format=LogFormat.TORCHTITAN,
        request=request,
        timing=steady_state(intervals, skip),
        peak_memory_gib=max(float(m.group(2)) for m in steps) if steps else None,
        file=file,
        notes=[
            *([_SPLIT_NOTE] if release == "0.3.0" and mesh[0] > 1 else []),
            *([] if _compiled(text, config) else [_EAGER_NOTE]),
            *_hybrid_sharding_notes(mesh[1], mesh[2]),
        ],
    )


def _hybrid_sharding_notes(dp_replicate: int, dp_shard: int) -> list[str]:
    """HSDP (FSDP2 sharding over dp_shard, replicated over dp_replicate) has no layout of its own here: the layout
    records dp = dp_replicate x dp_shard, which the estimate shards over."""
    if dp_replicate == 1 or dp_shard == 1:
        return []
    return [
        f"hybrid sharding (dp_replicate={dp_replicate} x dp_shard={dp_shard}): the layout records dp"
        f" {dp_replicate * dp_shard} and the estimate shards the model states over all of those ranks, not over"
        f" dp_shard's {dp_shard} with each shard's gradients all-reduced over {dp_replicate} replicas as the run"
        " did: it predicts less memory than the run held and per-layer gathers over the whole data-parallel group."
    ]


def _compiled(text: str, config: Mapping[str, Any]) -> bool:
    """Whether the run compiled its model: the log line, else the config's `compile` section."""
    if _COMPILED in text:
        return True
    return bool(_get(config, "compile", "enable", False)) and "model" in _get(
        config, "compile", "components", ["model", "loss"]
    )
