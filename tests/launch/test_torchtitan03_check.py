"""TorchTitan v0.3.0's own code accepts every emitted 0.3.0 launch and derives the planned layout from it.

Needs torchtitan 0.3.0, which conflicts with the launch-check extra's 0.2.2, so it runs in a venv of its own
(requirements/torchtitan03.lock; .ci/run builds it). Skipped elsewhere, unless PLANNER_REQUIRE_TORCHTITAN03=1,
which turns the skip into a failure. The matrix is tests/launch/plan_matrix.py's under the 0.3.0 rules, plus
its hand-made cases that those rules keep; see torchtitan03_check.py for which parts are TorchTitan's code.
"""

from __future__ import annotations

import importlib.metadata
import os
import warnings

import pytest

from planner.launch.common import stage_layers
from planner.launch.torchtitan_v03 import config_function
from planner.rules import rule_set
from planner.specs import Precision, Recompute
from planner.validate import layout_violations
from tests.launch.plan_matrix import SEARCHES, Planned, microbatches, planned
from tests.launch.shell import torchrun_argv


def _installed() -> str | None:
    try:
        return importlib.metadata.version("torchtitan")
    except importlib.metadata.PackageNotFoundError:
        return None


if _installed() != "0.3.0":
    if os.environ.get("PLANNER_REQUIRE_TORCHTITAN03") == "1":
        raise RuntimeError(f"PLANNER_REQUIRE_TORCHTITAN03=1 but torchtitan {_installed()} is installed, not 0.3.0")
    pytest.skip("needs torchtitan 0.3.0 (requirements/torchtitan03.lock)", allow_module_level=True)

with warnings.catch_warnings():  # TorchTitan's import-time warnings are its own
    warnings.simplefilter("ignore")
    from tests.launch import torchtitan03_check as tc  # noqa: E402

pytestmark = [
    pytest.mark.launch_check,
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

RELEASE = "0.3.0"
_RULES = rule_set("torchtitan", RELEASE)


def _kept(p: Planned) -> bool:
    return not layout_violations(p.layout, p.model, p.training, p.num_gpus, _RULES)


_V03_SEARCHES = [
    # the shipped float8 functions (llama3_405b, deepseek_v3_671b_float8) and ZeRO 0 with tp/pp (no plain DDP now)
    ("llama3-405b", "dgx-h100", 1024, 2048, Precision.FP8, {}),
    ("deepseek-v3", "dgx-h100", 1024, 2048, Precision.FP8, {"ep": [8, 16]}),
    ("llama3-8b", "dgx-h100", 64, 512, Precision.BF16, {"zero_stage": [0]}),
]
_ALL = planned("torchtitan", RELEASE, SEARCHES + _V03_SEARCHES)
_PLANS = [p for p in _ALL if _kept(p)]
_REFUSED = [p for p in _ALL if not _kept(p)]
"""Hand-made cases the 0.3.0 rules refuse (the searches only return kept plans)."""


@pytest.mark.parametrize("p", _PLANS, ids=[p.id for p in _PLANS])
def test_torchtitan03_accepts_the_launch_and_derives_the_plan(p: Planned) -> None:
    x, launch = p.layout, p.launch.torchtitan
    assert launch.framework_version.startswith("TorchTitan v0.3.0")
    config, placeholder = tc.trainer_config(torchrun_argv(launch.command, 0))  # tyro + __post_init__ checks
    sizes = tc.mesh_sizes(config, p.num_gpus)  # ParallelDims + build_mesh on the fake backend
    assert [sizes.get(axis, 1) for axis in ("tp", "pp", "cp", "ep", "batch")] == [x.tp, x.pp, x.cp, x.ep, x.dp]
    replicate, shard = sizes["dp_replicate_degree"], sizes["dp_shard_degree"]
    assert (replicate, shard) == ((1, x.dp) if x.zero_stage >= 1 else (x.dp // shard, shard))
    model = tc.model_config(config, placeholder, p.model.num_layers)
    assert len(model.layers) == p.model.num_layers
    assert tc.layers_per_rank(config, model, p.num_gpus) == list(stage_layers(p.model, x))
    t, par = config.training, config.parallelism
    per_step = t.local_batch_size // par.pipeline_parallel_microbatch_size if x.pp > 1 else 1
    assert t.global_batch_size % (t.local_batch_size * x.dp) == 0
    accumulation = t.global_batch_size // (t.local_batch_size * x.dp)
    micro = par.pipeline_parallel_microbatch_size if x.pp > 1 else t.local_batch_size
    assert (per_step * accumulation, micro) == (microbatches(p), x.micro_batch_size)
    assert t.seq_len == p.model.seq_length
    mode = {Recompute.NONE: "none", Recompute.SELECTIVE: "selective", Recompute.FULL: "full"}
    assert tc.recompute_mode(config) == mode[x.recompute]
    assert par.fsdp_reshard_after_forward == ("always" if x.zero_stage == 3 else "never")
    assert par.pipeline_parallel_schedule == ("Interleaved1F1B" if x.vp > 1 else "1F1B") or x.pp == 1
    if x.tp > 1:
        assert par.enable_sequence_parallel == x.sequence_parallel
    if not placeholder:  # the shipped function's model is the planned shape
        assert (model.dim, model.vocab_size) == (p.model.hidden_size, p.model.vocab_size)
        assert tc.has_float8(config) == (p.training.precision is Precision.FP8)
        assert tc.has_flex_attention(config)  # CP needs FlexAttention under the spmd_types backend


@pytest.mark.parametrize("p", _REFUSED, ids=[p.id for p in _REFUSED])
def test_the_refused_cases_are_refused_for_a_torchtitan_rule(p: Planned) -> None:
    rules = {v.rule for v in layout_violations(p.layout, p.model, p.training, p.num_gpus, _RULES)}
    expected = {
        "torchtitan_no_expert_tensor_parallel",
        "torchtitan_seq_len_divisible",
        "torchtitan_no_activation_offload",
        "torchtitan_no_block_recompute",
        "torchtitan_no_recompute_modules",
        "torchtitan_moe_dispatch",
        "torchtitan_fp8",  # an FP8 recipe other than the float8 converter's tensorwise (the blockwise case)
    }
    assert rules <= expected, rules


def test_the_matrix_is_broad() -> None:
    """>= 100 distinct 0.3.0 commands, covering every feature the brief names."""
    commands = {p.launch.torchtitan.command for p in _PLANS}
    assert len(commands) >= 100, len(commands)
    layouts = [p.layout for p in _PLANS]
    assert {x.zero_stage for x in layouts} == {0, 1, 2, 3}
    assert {x.recompute for x in layouts} == set(Recompute)
    assert any(x.cp > 1 for x in layouts) and any(x.ep > 1 for x in layouts) and any(x.vp > 1 for x in layouts)
    assert any(p.model.num_query_groups < p.model.num_attention_heads for p in _PLANS)
    uneven = [p for p in _PLANS if p.layout.pp > 1 and len(set(stage_layers(p.model, p.layout))) > 1]
    assert any(p.layout.vp > 1 for p in uneven) and any(p.layout.vp == 1 for p in uneven)
    # every precision but nvfp4, which the launch cannot run (rule torchtitan_fp8 refuses the nvfp4 cases)
    assert {p.training.precision for p in _PLANS} == set(Precision) - {Precision.NVFP4}
    assert all(
        p.training.precision is Precision.NVFP4
        for p in _ALL
        if p.training.precision not in {q.training.precision for q in _PLANS}
    )
    assert any(p.num_gpus % p.gpus_per_node for p in _PLANS)
    assert any(config_function(p.model, p.training) is None for p in _PLANS)  # placeholders
    shipped = {config_function(p.model, p.training) for p in _PLANS} - {None}
    assert {f for _, f in shipped} == {
        "llama3_8b",
        "llama3_70b",
        "llama3_405b",
        "deepseek_v3_671b",
        "deepseek_v3_671b_float8",
    }
    assert any(x.zero_stage == 0 and x.tp * x.pp > 1 for x in layouts)


def test_the_mesh_refuses_experts_that_do_not_fit_the_shard_dimension() -> None:
    """Why ZeRO 0 with ep keeps a shard degree (planner/launch/torchtitan_layout.py dp_degrees): TorchTitan's
    sparse mesh needs ep to divide dp_shard * cp * tp, which pure replication (dp_shard 1) breaks."""
    from torchtitan.distributed.parallel_dims import ParallelDims

    with tc.fake_world(32), pytest.raises(ValueError, match="product of mesh_sizes"):  # efsdp = 1 // 4 = 0
        ParallelDims(dp_replicate=32, dp_shard=1, cp=1, tp=1, pp=1, ep=4, world_size=32).build_mesh()
    with tc.fake_world(32):
        ParallelDims(dp_replicate=8, dp_shard=4, cp=1, tp=1, pp=1, ep=4, world_size=32).build_mesh()
