"""TorchTitan logs: the device mesh, the model arguments, the trainer's batch line and the per-step metric lines.

Formats (TorchTitan v0.2.2):
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
_SINGLE_STAGE = {"1F1B", "GPipe"}
"""Schedules with one stage per rank (torchtitan/distributed/pipeline_parallel.py: PipelineScheduleSingle)."""
_RECOMPUTE = {"none": "none", "selective": "selective", "full": "full"}


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
    / (time_delta * non_data_parallel_size)); so step time = B * s / (tps * world_size).
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


def _model(text: str, seq_len: int) -> dict[str, Any]:
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
    # torchtitan/models/llama3/model/model.py: SwiGLU, RMSNorm, no biases, RoPE, a separate output layer.
    return model | {"seq_length": seq_len, "gated_mlp": True, "tied_embeddings": False, "linear_bias": False}


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

    Source: torchtitan/models/llama3/infra/parallelize.py `apply_fsdp` (default: reshard_after_forward = not pp).
    """
    if dp_shard == 1:
        return 0
    policy = _get(config, "parallelism", "fsdp_reshard_after_forward", "default")
    return 3 if policy == "always" or (policy == "default" and pp == 1) else 2


def _recompute(lines: Sequence[str], config: Mapping[str, Any]) -> str:
    modes = {m.group(1) for line in lines if (m := _AC.search(line))}
    mode = _get(config, "activation_checkpoint", "mode", modes.pop() if len(modes) == 1 else "none")
    if mode not in _RECOMPUTE:
        refuse(f"activation checkpointing mode {mode!r} is not one the planner models (none, selective, full)")
    return _RECOMPUTE[mode]


def _training(text: str, config: Mapping[str, Any], global_batch: int, tp: int) -> dict[str, Any]:
    converters = _get(config, "model", "converters", [])
    fp8 = "Float8 training active" in text or any("float8" in str(c) for c in converters)
    if _get(config, "training", "mixed_precision_param", "bfloat16") != "bfloat16":
        refuse("training.mixed_precision_param is not bfloat16: fp32 training is not modelled")
    training: dict[str, Any] = {
        "global_batch_size": global_batch,
        "precision": "fp8" if fp8 else "bf16",
        "runtime": {"tp_comm_overlap": tp > 1 and _get(config, "parallelism", "enable_async_tensor_parallel", False)},
    }
    reduce = _get(config, "training", "mixed_precision_reduce", None)
    if reduce is not None:
        training["grad_reduce_in_fp32"] = reduce == "float32"
    return training


def parse_torchtitan(
    lines: Sequence[str], *, num_gpus: int | None, skip: int | None, file: str, config_text: str | None = None
) -> Observation:
    """The run a TorchTitan log records; `config_text` is the job's TOML (else the logged configs, else defaults)."""
    text = "\n".join(lines)
    pp, dp_replicate, dp_shard, cp, tp, ep = _mesh(lines)
    world_size = pp * dp_replicate * dp_shard * cp * tp
    if num_gpus is not None and num_gpus != world_size:
        refuse(f"the device mesh multiplies to {world_size} GPUs; --num-gpus says {num_gpus}")
    trainer = _TRAINER.search(text)
    if trainer is None:
        refuse("no 'Trainer is initialized with local batch size ...' line: the batch cannot be recovered")
    local_batch, global_batch, seq_len = (int(g) for g in trainer.groups())
    config = _config(text, config_text)
    model = _model(text, seq_len)
    layout = {
        "tp": tp,
        "pp": pp,
        "dp": dp_replicate * dp_shard,
        "cp": cp,
        "ep": ep,
        "vp": _virtual_stages(config, model["num_layers"], pp),
        "micro_batch_size": _get(config, "parallelism", "pipeline_parallel_microbatch_size", 1)
        if pp > 1
        else local_batch,
        "recompute": _recompute(lines, config),
        "sequence_parallel": tp > 1,
        "zero_stage": _zero_stage(config, dp_shard, pp),
    }
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
        "layout": layout,
        "framework": "torchtitan",
    }
    return Observation(
        log_format=LogFormat.TORCHTITAN,
        request=request,
        timing=steady_state(intervals, skip),
        peak_memory_gib=max(float(m.group(2)) for m in steps) if steps else None,
        file=file,
    )
