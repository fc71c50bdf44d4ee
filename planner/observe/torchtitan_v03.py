"""What TorchTitan v0.3.0 logs differently from v0.2.2: the release line, the model line, AC, the pipeline line.

Formats (TorchTitan v0.3.0):
- `torchtitan/train.py` `main`: `torchtitan version: V (0.0.0 means __version__ is not defined correctly).`
- `torchtitan/distributed/parallel_dims.py` `ParallelDims.build_mesh`: `Building device mesh with parallelism:
  pp=P, dp_replicate=R, dp_shard=S, cp=C, tp=T, ep=E` (v0.2.2 ends `, etp=X`; v0.3.0 has no expert TP).
- `torchtitan/trainer.py` `Trainer.__init__`: `Building NAME FLAVOR` with no model arguments (v0.2.2:
  `Building NAME FLAVORwith {JSON}`), so the shape is the flavor's in the model registry
  (`torchtitan/models/llama3/__init__.py` `llama3_configs`, resolved by `model_registry`); the trainer line
  (`Trainer is initialized with local batch size b, global batch size B, ...`) is v0.2.2's.
- `torchtitan/distributed/activation_checkpoint.py` `ActivationCheckpointing.apply`: `Applied CLASS activation
  checkpointing to the model` with CLASS `FullAC` or `SelectiveAC` (v0.2.2: the mode); `MemoryBudgetAC.apply`
  logs `Selected X budget option` instead; no line when `activation_checkpoint` is None.
- `torchtitan/distributed/pipeline_parallel.py` `_build_pipeline_schedule`: `Using pipeline schedule S with N
  microbatches and T stages.` when pp > 1 (N = local batch / pipeline_parallel_microbatch_size, T = pp x stages
  per rank).
- `torchtitan/distributed/compile.py` `_maybe_enable_async_tp`: `Async TP is enabled`.
- `torchtitan/components/quantization/float8.py` `Float8LinearConverter.__init__`: `Float8 training active with
  recipe R`; `mx.py` `MXFP8LinearConverter.convert` /
  `nvfp4.py` `NVFP4LinearConverter.convert`: `Converted Linear layers to MXFP8Linear` / `NVFP4Linear`.
- `torchtitan/components/metrics.py` `MetricsProcessor.log`: v0.2.2's step line, with `mfu: N/A` when a
  quantization converter is active; tps = tokens this rank loaded since the last log / (seconds since the last
  log x non_data_parallel_size (cp*tp*pp)), logged at step 1 and every `metrics.log_freq` steps. The seconds run
  from the end of the previous `log` (or `log_validation`, which also resets the token count), so an interval
  holds its steps' checkpoint saves; step 1's run from `MetricsProcessor.__init__`, before the model is
  parallelised and initialised (warm-up). memory is the interval's peak reserved GiB.
- `torchtitan/trainer.py` `Trainer.Config.maybe_log`: `Running with configs: {JSON}` with `debug.print_config`,
  and the same JSON saved to `debug.save_config_file` (the file `--config` takes for v0.3.0; a job's own config
  is a Python function, not a TOML file).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from planner.observe.observation import refuse

__all__ = [
    "LLAMA3_FLAVORS",
    "MODEL",
    "RELEASES",
    "LlamaFlavor",
    "compute_ffn_hidden_dim",
    "llama3_model",
    "pipeline_schedule",
    "torchtitan_release",
]

RELEASES = ("0.3.0", "0.2.2")
"""The TorchTitan releases whose logs are read (newest first)."""
_VERSION = re.compile(r"torchtitan version: (\S+) \(0\.0\.0 means __version__ is not defined correctly\)")
_MESH_V02 = re.compile(r"Building device mesh with parallelism: .*, ep=\d+, etp=\d+")
MODEL = re.compile(r"Building (\S+) (\S+)\s*$")
_PIPELINE = re.compile(r"Using pipeline schedule (\S+) with (\d+) microbatches and (\d+) stages\.")


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaFlavor:
    """One entry of TorchTitan v0.3.0's `llama3_configs`: the arguments its builder passes."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int | None
    vocab_size: int
    multiple_of: int
    ffn_dim_multiplier: float | None


LLAMA3_FLAVORS = {
    "debugmodel": LlamaFlavor(
        dim=256, n_layers=6, n_heads=16, n_kv_heads=None, vocab_size=2048, multiple_of=256, ffn_dim_multiplier=None
    ),
    "1B": LlamaFlavor(
        dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.5
    ),
    "3B": LlamaFlavor(
        dim=3072, n_layers=28, n_heads=24, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.0
    ),
    "8B": LlamaFlavor(
        dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3
    ),
    "70B": LlamaFlavor(
        dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, vocab_size=128256, multiple_of=4096, ffn_dim_multiplier=1.3
    ),
    "405B": LlamaFlavor(
        dim=16384, n_layers=126, n_heads=128, n_kv_heads=8, vocab_size=128256, multiple_of=4096, ffn_dim_multiplier=1.2
    ),
}
"""TorchTitan v0.3.0 torchtitan/models/llama3/__init__.py `_debugmodel` ... `_405b` (registered in `llama3_configs`):
dim, n_layers, n_heads, n_kv_heads (None: n_heads), vocab_size and the `compute_ffn_hidden_dim` arguments."""


def compute_ffn_hidden_dim(dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """The SwiGLU width: int(2*4*dim/3), times the multiplier, rounded up to `multiple_of`.

    Source: TorchTitan v0.3.0 torchtitan/models/common/feed_forward.py `compute_ffn_hidden_dim` (v0.2.2's
    `FeedForward.__init__` arithmetic, moved); Llama 3 405B: 16384, 4096, 1.2 -> 53248.
    """
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * -(-hidden // multiple_of)


def torchtitan_release(lines: Sequence[str]) -> str:
    """The release that wrote the log: its version line, else the mesh line's form (v0.2.2 logs `etp=`)."""
    versions = {m.group(1) for line in lines if (m := _VERSION.search(line))} - {"0.0.0"}
    if len(versions) > 1:
        refuse(f"torchtitan versions {sorted(versions)} in one log: it holds more than one run; split it")
    if versions:
        version = versions.pop()
        if version not in RELEASES:
            refuse(f"torchtitan version {version}: only the logs of TorchTitan {' and '.join(RELEASES)} are read")
        return version
    return "0.2.2" if any(_MESH_V02.search(line) for line in lines) else "0.3.0"


def llama3_model(lines: Sequence[str]) -> dict[str, int | str]:
    """The model a v0.3.0 log names (`Building llama3 8B`), shaped as its registry flavor."""
    named = {(m.group(1), m.group(2)) for line in lines if (m := MODEL.search(line))}
    if not named:
        refuse("no 'Building MODEL FLAVOR' line in the TorchTitan 0.3.0 log: the model cannot be recovered")
    if len(named) > 1:
        refuse(f"{len(named)} different models built in the log: it holds more than one run; split it")
    name, flavor = named.pop()
    if name != "llama3" or flavor not in LLAMA3_FLAVORS:
        refuse(
            f"TorchTitan 0.3.0 model {name} {flavor}: its log names the model but not its shape, and only the"
            f" llama3 flavors ({', '.join(LLAMA3_FLAVORS)}) of torchtitan/models/llama3/__init__.py are known"
        )
    f = LLAMA3_FLAVORS[flavor]
    return {
        "name": f"{name} {flavor}",
        "num_layers": f.n_layers,
        "hidden_size": f.dim,
        "num_attention_heads": f.n_heads,
        "num_query_groups": f.n_kv_heads or f.n_heads,
        "ffn_hidden_size": compute_ffn_hidden_dim(f.dim, f.multiple_of, f.ffn_dim_multiplier),
        "vocab_size": f.vocab_size,
    }


def pipeline_schedule(lines: Sequence[str], local_batch: int, pp: int) -> tuple[int, int]:
    """(stages per rank, micro-batch size) from the v0.3.0 schedule line; refused when pp > 1 and it is absent."""
    found = {(int(m.group(2)), int(m.group(3))) for line in lines if (m := _PIPELINE.search(line))}
    if not found:
        refuse(
            f"pp({pp}) > 1 but no 'Using pipeline schedule ... with N microbatches and T stages.' line in the"
            " log: the stages per rank and the micro-batch size cannot be recovered"
        )
    if len(found) > 1:
        refuse(f"{len(found)} different pipeline schedules in the log: it holds more than one run; split it")
    microbatches, stages = found.pop()
    if stages % pp != 0 or local_batch % microbatches != 0:
        refuse(
            f"the pipeline line's {stages} stages over pp({pp}) or {microbatches} microbatches over local batch"
            f" {local_batch} do not divide"
        )
    return stages // pp, local_batch // microbatches
