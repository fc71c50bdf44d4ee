"""The frameworks' own code accepts every emitted launch and derives the planned layout from it.

Runs with the `launch-check` extra (`pip install -e ".[launch-check]"`); skipped without it, unless
PLANNER_REQUIRE_LAUNCH_CHECK=1 (as .ci/run sets), which turns the skip into a failure. The matrix is
tests/launch/plan_matrix.py's; see framework_check.py for which parts are the frameworks' code. TorchTitan is
checked here at 0.2.2 (the extra's release); 0.3.0 in test_torchtitan03_check.py.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import warnings

import pytest

from planner.costmodel.topology import count_crossings, job_domain_gpus
from planner.launch import launch_args
from planner.launch.common import fp8_weight_storage, stage_layers
from planner.rules import rule_set
from planner.rules.core import rank_chunks
from planner.specs import Precision, Recompute
from tests.launch.plan_matrix import Planned, microbatches, planned
from tests.launch.shell import option, processes_per_node, torchrun_argv


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # find_spec("megatron.core") imports megatron first
        return False


_EXTRA = all(_found(m) for m in ("torch", "megatron.core", "torchtitan"))
_EXTRA = _EXTRA and importlib.metadata.version("torchtitan") == "0.2.2"  # 0.3.0: test_torchtitan03_check.py
if not _EXTRA:
    if os.environ.get("PLANNER_REQUIRE_LAUNCH_CHECK") == "1":
        raise RuntimeError("PLANNER_REQUIRE_LAUNCH_CHECK=1 but the launch-check extra is not installed")
    pytest.skip("needs the launch-check extra (torch, megatron-core, torchtitan)", allow_module_level=True)

with warnings.catch_warnings():  # the frameworks' import-time deprecation and missing-TE warnings are theirs
    warnings.simplefilter("ignore")
    from tests.launch import framework_check as fc  # noqa: E402

pytestmark = [
    pytest.mark.launch_check,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


CHECKED_MEGATRON = "core_v0.16.1"
"""The Megatron-LM release whose Megatron-Core the launch-check extra installs (megatron-core 0.16.1: the newest
on Python 3.11). core_v0.19.2, the default, needs Python >= 3.12; its rules and emitted flags equal 0.16.1's
(test_the_default_release_launches_as_the_checked_one), so this check covers it as far as 0.16.1's code can."""


CHECKED_TORCHTITAN = "0.2.2"
"""The TorchTitan release the launch-check extra installs; 0.3.0 (the default) is checked in its own venv by
test_torchtitan03_check.py."""


_MEGATRON = planned("megatron", CHECKED_MEGATRON)
_TORCHTITAN = planned("torchtitan", CHECKED_TORCHTITAN)
_microbatches = microbatches


# --- Megatron-Core ---------------------------------------------------------------------------------


@pytest.mark.parametrize("p", _MEGATRON, ids=[p.id for p in _MEGATRON])
def test_megatron_core_accepts_the_launch_and_derives_the_plan(p: Planned, monkeypatch: pytest.MonkeyPatch) -> None:
    # Megatron-Core checks fp8 and MoE features against the Transformer Engine version, which has no CPU
    # build: report the newest that megatron-core 0.16.1's `dev` extra allows (transformer-engine < 2.12.0).
    monkeypatch.setattr("megatron.core.utils.get_te_version", lambda: fc.TE_VERSION)
    x, a = p.layout, fc.megatron_args(p.launch.megatron)
    config = fc.transformer_config(a)  # __post_init__ raises on what Megatron-Core refuses
    ddp, optimizer = fc.ddp_config(a), fc.optimizer_config(a)
    assert (config.tensor_model_parallel_size, config.pipeline_model_parallel_size) == (x.tp, x.pp)
    assert (config.context_parallel_size, config.expert_model_parallel_size) == (x.cp, x.ep)
    assert (config.virtual_pipeline_model_parallel_size or 1) == x.vp
    assert config.sequence_parallel == (x.sequence_parallel and x.tp > 1)
    assert fc.layers_per_rank(config) == list(stage_layers(p.model, x))
    chunks = fc.layout_chunks(config)  # Megatron-Core's reading of a pipeline layout: the planner's chunks
    assert chunks is None or chunks == rank_chunks(stage_layers(p.model, x), x.vp)
    granularity = {Recompute.NONE: None, Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}
    assert config.recompute_granularity == granularity[x.recompute]
    if x.recompute is Recompute.FULL:  # every layer (uniform, 1) or the first k of each stage's chunks (block)
        block = p.training.recompute_num_layers
        expected = ("uniform", 1) if block is None else ("block", block)
        assert (config.recompute_method, config.recompute_num_layers) == expected
    assert ddp.use_distributed_optimizer == optimizer.use_distributed_optimizer == (x.zero_stage >= 1)
    sharding = {0: "no_shard", 1: "no_shard", 2: "optim_grads", 3: "optim_grads_params"}
    assert ddp.data_parallel_sharding_strategy == sharding[x.zero_stage]
    assert ddp.use_megatron_fsdp == (x.zero_stage >= 2)
    assert a["global_batch_size"] // (a["micro_batch_size"] * x.dp) == _microbatches(p)
    assert a["global_batch_size"] % (a["micro_batch_size"] * x.dp) == 0
    assert config.fp16 == (p.training.precision is Precision.FP16)
    assert (config.fp8 is not None) == (p.training.precision is Precision.FP8)
    assert (config.fp4, config.fp4_recipe) == (
        ("e2m1", "nvfp4") if p.training.precision is Precision.NVFP4 else (None, "nvfp4")
    )
    assert config.fp4_param == (p.training.precision is Precision.NVFP4 and fp8_weight_storage(p.training, x)[0])
    offloaded = p.training.activation_offload_layers
    assert (config.cpu_offloading, config.cpu_offloading_num_layers) == (offloaded > 0, offloaded)
    assert config.cpu_offloading_activations and not config.cpu_offloading_weights
    assert fc.window_layers(config) == p.model.num_window_layers
    if p.model.sliding_window is not None:  # Transformer Engine's (left, right): the window less the query itself
        assert config.window_size == (p.model.sliding_window - 1, 0)


def _node_of_rank(command: str) -> list[int]:
    nnodes = int(option(torchrun_argv(command, 0), "--nnodes"))
    return [node for node, count in enumerate(processes_per_node(command, nnodes)) for _ in range(count)]


@pytest.mark.parametrize("p", _MEGATRON, ids=[p.id for p in _MEGATRON])
def test_megatron_groups_on_the_launched_nodes_cross_as_the_estimate_says(p: Planned) -> None:
    """RankGenerator's groups, placed on the nodes torchrun starts, cross NVLink domains as count_crossings says."""
    x, a = p.layout, fc.megatron_args(p.launch.megatron)
    node = _node_of_rank(p.launch.megatron.command)
    assert len(node) == p.num_gpus == x.world_size
    per_domain = job_domain_gpus(p.num_gpus, p.gpus_per_node, p.nvlink_domain_gpus) // p.gpus_per_node
    domain = [n // per_domain for n in node]
    groups = fc.rank_groups(a, p.num_gpus)
    for name, size in (("tp", x.tp), ("cp", x.cp), ("pp", x.pp), ("dp", x.dp)):
        assert all(len(g) == size for g in groups[name]) and len(groups[name]) * size == p.num_gpus

    def crossing(name: str) -> int:
        return sum(len({domain[r] for r in g}) > 1 for g in groups[name])

    expected = count_crossings(x.tp, x.cp, x.pp, x.dp, x.ep, x.etp, p.nvlink_domain_gpus, p.gpus_per_node)
    assert crossing("tp") == expected.tp_groups_over_network
    assert crossing("cp") == expected.cp_groups_over_network
    assert crossing("dp") == expected.dp_groups_over_network
    assert all(len(g) == x.ep for g in groups["ep"])
    assert all(len(g) == x.etp for g in groups["etp"])
    if x.ep > 1 and (x.tp * x.cp * x.dp) % (x.etp * x.ep) == 0:  # count_crossings counts expert groups only then
        assert crossing("ep") == expected.ep_groups_over_network
    hops = sum(domain[g[i]] != domain[g[i + 1]] for g in groups["pp"] for i in range(len(g) - 1))
    assert hops == expected.pp_hops_over_network


# --- TorchTitan ------------------------------------------------------------------------------------

_PLACEHOLDER = {"name": "llama3", "flavor": "debugmodel"}


@pytest.mark.parametrize("p", _TORCHTITAN, ids=[p.id for p in _TORCHTITAN])
def test_torchtitan_accepts_the_launch_and_derives_the_plan(p: Planned) -> None:
    x, launch = p.layout, p.launch.torchtitan
    argv = torchrun_argv(launch.command, 0)
    job = fc.torchtitan_job(launch, argv, _PLACEHOLDER)
    dims = fc.parallel_dims(job, p.num_gpus)  # __post_init__ validates the degrees against the world size
    assert (dims.tp, dims.pp, dims.cp, dims.ep, dims.dp_replicate * dims.dp_shard) == (x.tp, x.pp, x.cp, x.ep, x.dp)
    assert fc.torchtitan_layers_per_rank(job, p.model.num_layers) == list(stage_layers(p.model, x))
    t, par = job.training, job.parallelism
    per_step = t.local_batch_size // (par.pipeline_parallel_microbatch_size if x.pp > 1 else t.local_batch_size)
    accumulation = t.global_batch_size // (t.local_batch_size * x.dp)
    assert t.global_batch_size % (t.local_batch_size * x.dp) == 0
    assert per_step * accumulation == _microbatches(p)
    mode = {Recompute.NONE: "none", Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}
    assert job.activation_checkpoint.mode == mode[x.recompute]
    reshard = {0: "never", 1: "never", 2: "never", 3: "always"}
    assert par.fsdp_reshard_after_forward == reshard[x.zero_stage]


def test_the_default_release_launches_as_the_checked_one() -> None:
    """The newest targeted release (core_v0.19.2) has 0.16.1's rules and flags for every plan checked here. It drops
    the two rules of 0.16.1's MambaStack (hybrid models only: core_v0.19's HybridStack interleaves and recomputes).
    A hybrid model's launch differs by design (core_v0.19's pretrain_hybrid.py and --hybrid-layer-pattern;
    tests/launch/test_launch_hybrid.py), so its plans here (Nemotron-H 8B) check 0.16.1's launch only."""
    hybrid_only = {"hybrid_no_interleaving", "hybrid_no_full_recompute"}
    checked = tuple(name for name in rule_set("megatron", CHECKED_MEGATRON).names if name not in hybrid_only)
    assert rule_set("megatron").names == checked
    transformers = [p for p in _MEGATRON if p.model.hybrid_pattern is None]
    assert 0 < len(transformers) < len(_MEGATRON)
    for p in transformers:
        newest = launch_args(p.model, p.training, p.layout, p.num_gpus, p.gpus_per_node).megatron
        assert newest.command == p.launch.megatron.command


def test_the_matrix_is_broad() -> None:
    """>= 150 distinct Megatron-LM commands, covering every feature the brief names."""
    commands = {p.launch.megatron.command for p in _MEGATRON} | {p.launch.torchtitan.command for p in _TORCHTITAN}
    assert len({p.launch.megatron.command for p in _MEGATRON}) >= 150, len(commands)
    layouts = [p.layout for p in _MEGATRON + _TORCHTITAN]
    assert {x.zero_stage for x in layouts} == {0, 1, 2, 3}
    assert {x.recompute for x in layouts} == set(Recompute)
    assert any(x.cp > 1 for x in layouts) and any(x.ep > 1 for x in layouts) and any(x.vp > 1 for x in layouts)
    assert any(x.pp > 1 and len(set(stage_layers(p.model, x))) > 1 for p in _MEGATRON for x in [p.layout])
    assert {p.training.precision for p in _MEGATRON} == set(Precision)
    assert any(p.num_gpus % p.gpus_per_node for p in _MEGATRON)
    assert any(p.nvlink_domain_gpus > p.gpus_per_node for p in _MEGATRON)
