"""Module recompute at the edge and in the launches: rule recompute_modules (a module the model lacks, output-discarding
recompute under delayed FP8 scaling), the all-to-all overlap's refusal of a whole-MoE rerun, TorchTitan's refusal,
Megatron-LM's and NeMo's flags, and a Megatron argument dump read back."""

from dataclasses import replace
from typing import Any

import pytest

from planner.errors import InvalidSpecError
from planner.launch import launch_args
from planner.layout import Layout
from planner.observe.megatron_args import megatron_request
from planner.rules import rule_set
from planner.specs import MLASpec, ModelSpec, MoESpec, Recompute, TrainingSpec
from planner.validate import layout_violations

SHAPE = {"num_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "vocab_size": 1000, "seq_length": 64}
DENSE = ModelSpec(**SHAPE, ffn_hidden_size=1024)
MOE = ModelSpec(**SHAPE, moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=128))
SHARED = MOE.model_copy(update={"moe": MOE.moe.model_copy(update={"num_shared_experts": 1})} if MOE.moe else {})
MLA = DENSE.model_copy(update={"mla": MLASpec(kv_lora_rank=64, qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32)})
SELECTIVE = Layout(tp=1, pp=1, dp=4, ep=2, recompute=Recompute.SELECTIVE, zero_stage=1)
NAMED = "training.runtime.recompute_modules names"


def _training(*modules: str, **changes: Any) -> TrainingSpec:
    runtime = changes.pop("runtime", {}) | {"recompute_modules": list(modules)}
    return TrainingSpec.model_validate({"global_batch_size": 8, "runtime": runtime, **changes})


def _violations(
    model: ModelSpec, training: TrainingSpec, layout: Layout = SELECTIVE, framework: str = "core"
) -> list[tuple[str, str]]:
    rules = rule_set(framework)
    return [(v.rule, v.message) for v in layout_violations(layout, model, training, 4, rules)]


@pytest.mark.parametrize(
    ("model", "module", "why"),
    [
        (DENSE, "moe", "model.moe is unset (no MoE layer)"),
        (DENSE, "moe_act", "model.moe is unset (no MoE layer)"),
        (MOE, "shared_experts", "the model has no shared expert"),
        (MOE, "mlp", "the model has no dense MLP layer"),
        (DENSE, "mla_up_proj", "model.mla is unset (no multi-latent attention)"),
        (
            DENSE,
            "layernorm",
            "every norm of the model is fused into its next linear layer (no MoE layer, no multi-latent attention)",
        ),
    ],
)
def test_a_module_the_model_lacks_is_refused_for_every_layout(model: ModelSpec, module: str, why: str) -> None:
    message = f"{NAMED} {module}, but {why}; name only modules the model has"
    expected = [("recompute_modules", message)]
    layout = SELECTIVE if model.moe else Layout(tp=1, pp=1, dp=4, recompute=Recompute.SELECTIVE)
    assert _violations(model, _training(module), layout) == expected
    assert _violations(model, _training(module), replace(layout, recompute=Recompute.NONE)) == expected


@pytest.mark.parametrize(
    ("model", "modules"),
    [
        (SHARED, ("moe", "layernorm", "core_attn", "moe_act", "shared_experts")),  # Nemotron 3 Nano's, and more
        (MLA, ("mla_up_proj", "mlp", "layernorm")),  # DeepSeek-V3's
        (MOE, ("core_attn",)),
    ],
)
def test_modules_the_model_has_pass(model: ModelSpec, modules: tuple[str, ...]) -> None:
    layout = SELECTIVE if model.moe else Layout(tp=1, pp=1, dp=4, recompute=Recompute.SELECTIVE)
    assert _violations(model, _training(*modules), layout) == []


def test_output_discarding_recompute_needs_current_scaling_under_fp8() -> None:
    """Megatron-Core refuses moe_act and layernorm recompute under delayed scaling (the FP8 default when no recipe
    is named), for selective layouts only."""
    message = (
        "training.runtime.recompute_modules with moe_act or layernorm under FP8 needs current or block scaling:"
        " delayed scaling cannot recompute them; set training.fp8_recipe to tensorwise, mxfp8 or blockwise"
    )
    for recipe in (None, "delayed"):
        fp8 = _training("moe_act", precision="fp8", fp8_recipe=recipe)
        assert _violations(MOE, fp8) == [("recompute_modules", message)]
        assert _violations(MOE, fp8, replace(SELECTIVE, recompute=Recompute.NONE)) == []
    assert _violations(MOE, _training("moe_act", precision="fp8", fp8_recipe="tensorwise")) == []
    assert _violations(MOE, _training("moe", precision="fp8")) == []  # normal checkpointing is fine


def test_the_all_to_all_overlap_cannot_rerun_the_whole_moe_layer() -> None:
    overlap = {"moe_a2a_overlap": True}
    message = (
        "training.runtime.moe_a2a_overlap cannot recompute the whole MoE layer; drop moe from"
        " training.runtime.recompute_modules"
    )
    assert _violations(MOE, _training("moe", runtime=overlap)) == [("moe_a2a_overlap", message)]
    assert _violations(MOE, _training("moe_act", runtime=overlap)) == []


def test_torchtitan_has_no_module_list() -> None:
    refused = [v for v in _violations(MOE, _training("moe_act"), framework="torchtitan") if v[0] != "recompute_modules"]
    assert [rule for rule, _ in refused] == ["torchtitan_no_recompute_modules"]
    assert _violations(MOE, TrainingSpec(global_batch_size=8), framework="torchtitan") == []


def test_megatron_and_nemo_launch_the_modules() -> None:
    """Megatron-LM gets --recompute-modules in RecomputeModule's order, NeMo the TransformerConfig list; the default
    core_attn alone is Megatron-Core's own default and is left out."""
    launch = launch_args(SHARED, _training("moe_act", "layernorm", "shared_experts"), SELECTIVE, 4, 4)
    args = launch.megatron.args
    start = args.index("--recompute-modules")
    assert args[start - 2 : start + 4] == [
        "--recompute-granularity", "selective", "--recompute-modules", "layernorm", "moe_act", "shared_experts",
    ]  # fmt: skip
    assert launch.nemo.config["model.config.recompute_modules"] == ["layernorm", "moe_act", "shared_experts"]
    plain = launch_args(SHARED, TrainingSpec(global_batch_size=8), SELECTIVE, 4, 4)
    assert "--recompute-modules" not in plain.megatron.args
    assert "model.config.recompute_modules" not in plain.nemo.config


def _dump(**changes: Any) -> dict[str, Any]:
    return {
        "num_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "seq_length": 64,
        "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1, "micro_batch_size": 1,
        "global_batch_size": 8, "bf16": True, "num_experts": 8, "moe_router_topk": 2, "moe_ffn_hidden_size": 128,
        "expert_model_parallel_size": 2,
    } | changes  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"recompute_granularity": "selective", "recompute_modules": ["moe_act", "layernorm"]},
            ["moe_act", "layernorm"],
        ),
        ({"recompute_granularity": "selective"}, None),  # core_attn, the planner's default here
        ({"recompute_granularity": "full", "recompute_modules": ["moe"]}, None),  # ignored outside selective
    ],
)
def test_a_megatron_dump_reads_the_modules_back(changes: dict[str, Any], expected: list[str] | None) -> None:
    request, _ = megatron_request(
        _dump(**changes), where="argument dump", world_size=4, vocab_size=1024, framework="megatron"
    )
    assert request["training"]["runtime"].get("recompute_modules") == expected


def test_a_megatron_dump_under_mla_states_megatrons_default() -> None:
    """Megatron-Core's default is core_attn alone, the planner's under MLA adds mla_up_proj: the dump says so."""
    mla = {"multi_latent_attention": True, "kv_lora_rank": 64, "v_head_dim": 32, "recompute_granularity": "selective"}
    request, _ = megatron_request(
        _dump(**mla), where="argument dump", world_size=4, vocab_size=1024, framework="megatron"
    )
    assert request["training"]["runtime"]["recompute_modules"] == ["core_attn"]


def test_an_unmodelled_module_in_a_dump_is_refused() -> None:
    dump = _dump(recompute_granularity="selective", recompute_modules=["core_attn", "gdn_norm_out"])
    with pytest.raises(InvalidSpecError, match="--recompute-modules gdn_norm_out in the argument dump"):
        megatron_request(dump, where="argument dump", world_size=4, vocab_size=1024, framework="megatron")
