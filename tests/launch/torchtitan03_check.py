"""Build TorchTitan v0.3.0's own config and device mesh from an emitted launch and read back the layout.

Needs torchtitan 0.3.0 (requirements/torchtitan03.lock); imported only by test_torchtitan03_check.py, which
skips without it. What is TorchTitan's code and what is ours:

- TorchTitan (real): ConfigManager loads the `--module/--config` function and parses the overrides with tyro
  (ParallelismConfig, CompileConfig and Trainer.Config run their `__post_init__` checks); ParallelDims
  validates the degrees against the world size and, on the fake process-group backend TorchTitan's own dry
  run uses (`init_fake_mode`), builds every mesh (`build_mesh`, `_validate_meshes`); `_get_pipeline_metadata`
  counts and validates the virtual stages; `_generate_llm_fqn_per_model_part` splits the layers;
  `_get_pp_rank_to_stage_indices_mapping` puts stages on ranks; `get_schedule_class` names the schedule.
- Ours: a stand-in model config (just `layers`, of the plan's length) where the command has the
  MODULE/CONFIG placeholders, and reporting a GPU (compute capability >= 8.9) to the float8 converter, which
  the shipped float8 config functions build when they are called.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import torch.distributed as dist
import torchtitan.components.quantization.float8 as float8
from torchtitan.components.quantization.float8 import Float8Linear
from torchtitan.config import ConfigManager
from torchtitan.distributed import utils as dist_utils
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.distributed.parallel_dims import ParallelDims
from torchtitan.distributed.pipeline_parallel import (
    _generate_llm_fqn_per_model_part,
    _get_pipeline_metadata,
    _get_pp_rank_to_stage_indices_mapping,
)
from torchtitan.models.common.attention import FlexAttention
from torchtitan.trainer import Trainer

STAND_IN = ("llama3", "llama3_debugmodel")
"""--module/--config for a command with the MODULE/CONFIG placeholders (a shape TorchTitan does not ship)."""


@contextlib.contextmanager
def gpu_for_float8() -> Iterator[None]:
    """Float8LinearConverter refuses to build below SM 8.9; the check runs where the launch would (an H100)."""
    original = float8.has_cuda_capability
    float8.has_cuda_capability = lambda major, minor: True
    try:
        yield
    finally:
        float8.has_cuda_capability = original


def program(argv: list[str]) -> tuple[list[str], bool]:
    """The arguments after `-m torchtitan.train`, placeholders replaced by STAND_IN; whether they were."""
    args = argv[argv.index("torchtitan.train") + 1 :]
    placeholder = args[:4] == ["--module", "MODULE", "--config", "CONFIG"]
    if placeholder:
        args = ["--module", STAND_IN[0], "--config", STAND_IN[1], *args[4:]]
    return args, placeholder


def trainer_config(argv: list[str]) -> tuple[Trainer.Config, bool]:
    """ConfigManager on the command's arguments (its `__post_init__` checks run); whether it used STAND_IN."""
    args, placeholder = program(argv)
    with gpu_for_float8():
        config = ConfigManager().parse_args(args)
    assert isinstance(config, Trainer.Config)
    return config, placeholder


@contextlib.contextmanager
def fake_world(world_size: int) -> Iterator[None]:
    """TorchTitan's dry-run backend: one process that sees `world_size` ranks (`init_fake_mode`)."""
    dist_utils.init_fake_mode(world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()


def mesh_sizes(config: Trainer.Config, world_size: int) -> dict[str, int]:
    """ParallelDims.from_config (validates the degrees), then build_mesh on the fake backend: axis -> size."""
    dims = ParallelDims.from_config(config.parallelism, world_size)
    with fake_world(world_size):
        dims.build_mesh()  # _validate_meshes checks every axis, efsdp = dp_shard * cp * tp / ep included
        meshes = dims.get_all_one_dimensional_meshes()
        sizes = {name: mesh.size() for name, mesh in meshes.items()}
    return sizes | {"dp_replicate_degree": dims.dp_replicate, "dp_shard_degree": dims.dp_shard}


def model_config(config: Trainer.Config, placeholder: bool, num_layers: int) -> Any:
    """The config function's model config, or a stand-in holding only `layers` (the one field the split reads)."""
    if placeholder:
        return SimpleNamespace(layers=[None] * num_layers)
    assert config.model_spec is not None
    return config.model_spec.model


def layers_per_rank(config: Trainer.Config, model: Any, world_size: int) -> list[int]:
    """Transformer layers per pipeline rank, as pipeline_llm splits them: stages, their modules, their ranks."""
    p = config.parallelism
    if p.pipeline_parallel_degree == 1:
        return [len(model.layers)]
    dims = ParallelDims.from_config(p, world_size)
    stages, num_layers, first, last = _get_pipeline_metadata(dims, p, model)
    parts = p.module_fqns_per_model_part or _generate_llm_fqn_per_model_part(stages, num_layers, first, last)
    schedule = p.pipeline_parallel_schedule
    return [
        sum(
            sum(m.startswith("layers.") for m in parts[s])
            for s in _get_pp_rank_to_stage_indices_mapping(rank, p.pipeline_parallel_degree, schedule, len(parts))
        )
        for rank in range(p.pipeline_parallel_degree)
    ]


def recompute_mode(config: Trainer.Config) -> str:
    """The activation-checkpoint subcommand the config holds."""
    ac = config.activation_checkpoint
    if ac is None:
        return "none"
    return {FullAC.Config: "full", SelectiveAC.Config: "selective"}[type(ac)]


def has_float8(config: Trainer.Config) -> bool:
    assert config.model_spec is not None
    return any(True for _ in config.model_spec.model.traverse(Float8Linear.Config))


def has_flex_attention(config: Trainer.Config) -> bool:
    assert config.model_spec is not None
    return any(True for _ in config.model_spec.model.traverse(FlexAttention.Config))
