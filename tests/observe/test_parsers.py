"""planner.observe: one realistic log per format (tests/observe/data, each citing the framework source that prints
its lines), the exact recovered request and the hand-computed median step time; warm-up; refusals."""

from __future__ import annotations

import json
import re
from pathlib import Path
from statistics import median
from typing import Any

import pytest

from api.convert import answer_estimate
from api.schemas import EstimateRequest
from planner.errors import InvalidSpecError
from planner.launch import launch_args
from planner.launch.pipeline_layout import pipeline_layout
from planner.layout import Layout
from planner.observe import Interval, LogFormat, Observation, detect_format, observe_log, steady_state
from planner.observe.bridge import CONFIG_START
from planner.observe.megatron_args import megatron_request, padded_vocab_size
from planner.observe.observation import log_lines
from planner.observe.torchtitan import llama_ffn_hidden_size
from planner.observe.torchtitan_v03 import LLAMA3_FLAVORS, compute_ffn_hidden_dim
from planner.presets import get_preset
from planner.profiles import load_profiles
from planner.specs import ModelSpec, TrainingSpec

DATA = Path(__file__).parent / "data"
LLAMA8B = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_query_groups": 8,
    "ffn_hidden_size": 14336,
    "seq_length": 8192,
    "gated_mlp": True,
    "tied_embeddings": False,
    "linear_bias": False,
}


def _log(name: str) -> str:
    return (DATA / name).read_text()


def _estimate_violations(observation: Observation) -> list[Any]:
    """The body, less measured and source, answered as POST /v1/estimate would; its rule violations."""
    request = EstimateRequest.model_validate_json(EstimateRequest(**observation.request).model_dump_json())
    return list(answer_estimate(request, load_profiles()).violations)


def test_megatron_log() -> None:
    obs = observe_log(_log("megatron_llama8b.log"), profile="dgx-h100", file="megatron_llama8b.log")
    assert obs.log_format is LogFormat.MEGATRON
    assert obs.request["model"] == LLAMA8B | {"vocab_size": 128512, "learned_position_embeddings": False}
    assert obs.request["cluster"] == {"profile": "dgx-h100", "num_gpus": 16}
    assert obs.request["layout"] == {
        "tp": 2, "pp": 2, "dp": 4, "cp": 1, "ep": 1, "vp": 2, "micro_batch_size": 1,
        "recompute": "selective", "sequence_parallel": True, "zero_stage": 1,
    }  # fmt: skip
    training = obs.request["training"]
    assert training["global_batch_size"] == 128 and training["precision"] == "bf16"
    assert training["runtime"] == {
        "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": True,
        "moe_a2a_overlap": False, "flash_attention": True, "fused_kernels": True, "cuda_graphs": False,
        "overlap_p2p_comm": True, "moe_dispatcher": "alltoall", "cuda_graph_scope": "modules",
        "expert_gemm": "multi_stream", "attention_kernel": "flash2",  # AttnBackend.flash: the flash-attn package
    }  # fmt: skip
    # Iteration 10 (<= max(10% of 100, first interval)) is warm-up; the median of the other nine ms values.
    used = [9876.5, 9901.2, 9850.3, 9893.0, 9912.4, 9866.1, 9880.8, 12011.9, 9874.2]
    assert obs.timing.step_time_s == pytest.approx(9.8808, rel=1e-12)
    assert obs.timing.step_time_s == pytest.approx(median(used) / 1000, rel=1e-12)
    assert obs.timing.spread == pytest.approx((9901.2 - 9874.2) / 9880.8, rel=1e-9)  # sorted[6] - sorted[2]
    assert (obs.timing.intervals_used, obs.timing.intervals_skipped) == (9, 1)
    assert (obs.timing.first_iteration, obs.timing.last_iteration) == (11, 100)
    assert obs.peak_memory_gib == 61440.0 / 1024  # the larger rank's max reserved, MB = 2**20 bytes
    body = obs.body()
    assert body["measured"] == {"step_time_s": obs.timing.step_time_s, "peak_memory_gib": 60.0}
    assert body["source"]["kind"] == "log" and body["source"]["file"] == "megatron_llama8b.log"
    assert _estimate_violations(obs) == []


def test_bridge_log() -> None:
    obs = observe_log(_log("bridge_llama8b.log"), profile="dgx-h100", num_gpus=8)
    assert obs.log_format is LogFormat.NEMO and obs.request["framework"] == "nemo"
    # The Bridge config names kv_channels (128 = 4096 / 32): the observation keeps what the log says.
    assert obs.request["model"] == LLAMA8B | {
        "vocab_size": 128256, "learned_position_embeddings": False, "head_dim": 128,
    }  # fmt: skip
    assert obs.request["layout"] == {
        "tp": 2, "pp": 1, "dp": 4, "cp": 1, "ep": 1, "vp": 1, "micro_batch_size": 1,
        "recompute": "none", "sequence_parallel": True, "zero_stage": 1,
    }  # fmt: skip
    assert obs.request["training"]["grad_reduce_in_fp32"] is True
    assert obs.request["training"]["runtime"]["tp_comm_overlap"] is False
    # log_interval 1, 12 iterations: iterations <= max(ceil(1.2), 1) = 2 are warm-up; median of ten.
    assert obs.timing.step_time_s == pytest.approx((10975.1 + 10980.3) / 2 / 1000, rel=1e-12)
    assert obs.timing.intervals_used == 10
    assert _estimate_violations(obs) == []


def test_bridge_saved_config_file() -> None:
    """Bridge v0.4+ logs only non-default values; the saved YAML (logger.save_config_filepath) is read instead."""
    lines = _log("bridge_llama8b.log").splitlines()
    start = lines.index(CONFIG_START)
    end = next(i for i in range(start + 1, len(lines)) if set(lines[i]) == {"-"})
    config, log = "\n".join(lines[start + 1 : end]), "\n".join(lines[:start] + lines[end + 1 :])
    obs = observe_log(log, profile="dgx-h100", num_gpus=8, log_format=LogFormat.NEMO, config_text=config)
    assert obs.request == observe_log(_log("bridge_llama8b.log"), profile="dgx-h100", num_gpus=8).request


def test_bridge_config_reads_the_recompute_modules_back() -> None:
    """A Bridge config's `recompute_modules` list (selective granularity) is the run's training.runtime list, and the
    recovered request answers without a violation; the core_attn default of a transformer is left unstated."""
    log = _log("bridge_llama8b.log")
    selective = "  recompute_granularity: selective\n  recompute_modules:\n  - core_attn\n  - mlp\n"
    modules = log.replace("  recompute_granularity: null\n", selective, 1)
    obs = observe_log(modules, profile="dgx-h100", num_gpus=8)
    assert obs.request["layout"]["recompute"] == "selective"
    assert obs.request["training"]["runtime"]["recompute_modules"] == ["core_attn", "mlp"]
    assert _estimate_violations(obs) == []
    default = log.replace("  recompute_granularity: null\n", "  recompute_granularity: selective\n", 1)
    plain = observe_log(default, profile="dgx-h100", num_gpus=8)
    assert "recompute_modules" not in plain.request["training"]["runtime"]


def test_torchtitan_log() -> None:
    obs = observe_log(_log("torchtitan_llama8b.log"), profile="dgx-h100")
    assert obs.log_format is LogFormat.TORCHTITAN
    assert obs.request["model"] == LLAMA8B | {"name": "llama3 8B", "vocab_size": 128256}
    assert obs.request["layout"] == {
        "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "vp": 1, "micro_batch_size": 1,
        "recompute": "selective", "sequence_parallel": False, "zero_stage": 3,
    }  # fmt: skip
    assert obs.request["training"]["global_batch_size"] == 8
    # Step time = B * s / (tps * world) = 8 * 8192 / (8 tps); step 1 is warm-up; six intervals, median of the
    # middle two (tps 6,095 and 6,102).
    assert obs.timing.step_time_s == pytest.approx((8192 / 6095 + 8192 / 6102) / 2, rel=1e-12)
    assert obs.peak_memory_gib == 61.31
    assert _estimate_violations(obs) == []


def test_llama_ffn_and_padded_vocab() -> None:
    assert llama_ffn_hidden_size(4096, 1024, 1.3) == 14336  # Llama 3 8B
    assert llama_ffn_hidden_size(8192, 4096, 1.3) == 28672  # Llama 3 70B
    assert llama_ffn_hidden_size(4096, 256, None) == 11008  # Llama 2 7B
    assert padded_vocab_size(128257, 128, 2) == 128512 and padded_vocab_size(128256, 128, 8) == 129024


def test_skip_overrides_warmup() -> None:
    obs = observe_log(_log("megatron_llama8b.log"), profile="dgx-h100", skip=0)
    # All ten intervals: the median of 9880.8 and 9893.0.
    assert obs.timing.step_time_s == pytest.approx((9880.8 + 9893.0) / 2000, rel=1e-12)
    assert obs.timing.intervals_skipped == 0


def test_default_warmup_is_ten_percent_or_the_first_interval() -> None:
    intervals = [Interval(i, 2.0 if i <= 10 else 1.0) for i in range(1, 101)]
    timing = steady_state(intervals)
    assert timing.intervals_skipped == 10 and timing.step_time_s == 1.0 and timing.spread == 0.0
    assert steady_state([Interval(i, 1.0) for i in (5, 10, 15, 20)]).intervals_skipped == 1


def _refused(text: str, **kwargs: Any) -> str:
    with pytest.raises(InvalidSpecError) as info:
        observe_log(text, profile=kwargs.pop("profile", "dgx-h100"), **kwargs)
    assert info.value.field in ("log", "profile")
    return info.value.message


def test_refusals() -> None:
    text = _log("megatron_llama8b.log")
    missing = re.sub(r"(?m)^  tensor_model_parallel_size .*\n", "", text)
    assert _refused(missing) == "tensor_model_parallel_size not in the argument dump"
    assert "2 argument dumps in the log: it holds more than one run" in _refused(_log("megatron_two_runs.log"))
    assert _refused(_log("megatron_short.log")).startswith("2 logged intervals after warm-up (iterations <= 10")
    assert "at least 3 are needed" in _refused(_log("megatron_short.log"))
    assert "world size not in a Megatron-Bridge log" in _refused(_log("bridge_llama8b.log"))
    assert "none of their start-up lines" in _refused("hello\nworld\n")
    assert "does not match" in _refused(text, profile="Not A Profile")
    steps = [line for line in _log("torchtitan_llama8b.log").splitlines() if "step:" in line]
    restarted = _log("torchtitan_llama8b.log") + "\n".join(steps) + "\n"
    assert "iteration 1 follows iteration 30: the log holds more than one run" in _refused(restarted)
    stalled = _log("torchtitan_llama8b.log").replace("tps: 6,110", "tps: 0")
    assert "tps 0" in _refused(stalled)


def test_concatenated_iteration_lines_refused() -> None:
    with pytest.raises(InvalidSpecError, match="iteration 10 follows iteration 100"):
        steady_state([Interval(i, 1.0) for i in (10, 50, 100, 10, 50)])


def _args(**changes: Any) -> dict[str, Any]:
    base = {
        "num_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "seq_length": 1024,
        "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 4, "micro_batch_size": 2,
        "global_batch_size": 64, "bf16": True,
    }  # fmt: skip
    return base | changes


def test_uneven_split_and_moe_pattern() -> None:
    request, _ = megatron_request(
        _args(decoder_first_pipeline_num_layers=2, decoder_last_pipeline_num_layers=4),
        where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
    )  # fmt: skip
    assert request["layout"]["layers_per_stage"] == [2, 3, 3, 4] and request["layout"]["dp"] == 2
    moe = _args(num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=1024, moe_layer_freq=[0, 0] + [1, 0] * 5)
    request, _ = megatron_request(moe, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert request["model"]["moe"] == {
        "num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 1024, "first_k_dense_layers": 2, "moe_layer_freq": 2,
    }  # fmt: skip
    with pytest.raises(InvalidSpecError, match="not a multiple of tp"):
        megatron_request(_args(), where="argument dump", world_size=6, vocab_size=50304, framework="megatron")
    with pytest.raises(InvalidSpecError, match="fp32 training is not modelled"):
        megatron_request(_args(bf16=False), where="argument dump", world_size=8, vocab_size=50304, framework="core")


@pytest.mark.parametrize("spelling", ["hybrid_layer_pattern", "hybrid_override_pattern"])
def test_hybrid_pattern_and_mamba_read_back(spelling: str) -> None:
    """Megatron-LM's hybrid pattern (either spelling) and Mamba dims become the model's; num_layers follows the
    pattern as Megatron's validate_args makes it; the request is a valid ModelSpec."""
    args = _args(**{spelling: "M*M-" * 3}, mamba_num_heads=24, mamba_num_groups=4, num_layers=99)
    request, _ = megatron_request(args, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    model = request["model"]
    assert model["hybrid_pattern"] == "M*M-" * 3 and model["num_layers"] == 12
    assert model["mamba"] == {"state_dim": 128, "head_dim": 64, "num_groups": 4, "num_heads": 24}
    assert ModelSpec.model_validate(model).num_mamba_layers == 6


def test_a_piped_hybrid_pattern_reads_back_as_the_planned_split() -> None:
    """core_v0.19's launch cuts the pattern into pp x vp virtual stages with "|" (`hybrid_layer_pattern`): read back,
    it gives the plan's model, layers per stage and vp."""
    model = get_preset("nemotron-h-8b").model
    layout = Layout(tp=1, pp=2, dp=4, vp=2, zero_stage=1)
    training = TrainingSpec(global_batch_size=64)
    launch = launch_args(model, training, layout, 8, 8, versions={"megatron": "core_v0.19.2"}).megatron.args
    piped = launch[launch.index("--hybrid-layer-pattern") + 1]
    assert piped.count("|") == 3
    mamba = {"mamba_num_heads": model.mamba.num_heads} if model.mamba and model.mamba.num_heads else {}
    args = _args(hybrid_layer_pattern=piped, pipeline_model_parallel_size=2, **mamba)
    request, _ = megatron_request(args, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert request["model"]["hybrid_pattern"] == model.hybrid_pattern
    assert request["layout"]["vp"] == 2 and request["layout"]["layers_per_stage"] == [26, 26]


@pytest.mark.parametrize(
    ("pattern", "pp", "words"),
    [
        ("M*|M-|M*", 2, "3 pipeline segments, not a multiple of pipeline_model_parallel_size 2"),
        ("M*|M-", 1, "2 pipeline segments, not a multiple of pipeline_model_parallel_size 1"),
        ("M*M|-|M|*", 2, "gives the ranks model chunks [[3, 1], [1, 1]]"),
    ],
)
def test_piped_hybrid_patterns_the_planner_cannot_hold_are_refused(pattern: str, pp: int, words: str) -> None:
    with pytest.raises(InvalidSpecError, match=re.escape(words)):
        megatron_request(
            _args(hybrid_layer_pattern=pattern, pipeline_model_parallel_size=pp),
            where="argument dump", world_size=8, vocab_size=50304, framework="core",
        )  # fmt: skip


@pytest.mark.parametrize("pattern", ["M*M-/*", "MG*-"])
def test_unmodelled_hybrid_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidSpecError, match="hybrid layer pattern .* is not modelled"):
        megatron_request(
            _args(hybrid_layer_pattern=pattern), where="argument dump", world_size=8, vocab_size=50304, framework="core"
        )


@pytest.mark.parametrize(
    ("flags", "dispatcher"),
    [
        ({}, "alltoall"),
        ({"moe_token_dispatcher_type": "alltoall"}, "alltoall"),
        ({"moe_token_dispatcher_type": "flex"}, "deepep"),  # the backend's default
        ({"moe_token_dispatcher_type": "flex", "moe_enable_deepep": True}, "deepep"),  # core_v0.15.0's switch
        ({"moe_token_dispatcher_type": "flex", "moe_flex_dispatcher_backend": "hybridep"}, "hybridep"),
    ],
)
def test_moe_dispatcher_and_overlap_read_back(flags: dict[str, Any], dispatcher: str) -> None:
    moe = {"num_experts": 8, "moe_router_topk": 2, "moe_ffn_hidden_size": 1024, "expert_model_parallel_size": 2}
    args = _args(**moe, **flags, overlap_moe_expert_parallel_comm=True)
    request, _ = megatron_request(args, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    runtime = request["training"]["runtime"]
    assert runtime["moe_dispatcher"] == dispatcher and runtime["moe_a2a_overlap"] is True


@pytest.mark.parametrize(
    ("flags", "graphs", "scope", "expert_gemm"),
    [
        ({}, False, "modules", "multi_stream"),
        ({"enable_cuda_graph": True}, True, "modules", "multi_stream"),  # before core_v0.14
        (
            {"cuda_graph_impl": "transformer_engine", "cuda_graph_scope": ["attn", "moe_router"]},
            True,
            "modules",
            "multi_stream",
        ),
        ({"cuda_graph_impl": "local", "cuda_graph_scope": "full_iteration"}, True, "full_iteration", "multi_stream"),
        ({"cuda_graph_impl": "full_iteration", "cuda_graph_scope": []}, True, "full_iteration", "multi_stream"),
        ({"cuda_graph_impl": "none", "moe_use_legacy_grouped_gemm": True}, False, "modules", "grouped"),
    ],
)
def test_cuda_graph_scope_and_expert_gemm_read_back(
    flags: dict[str, Any], graphs: bool, scope: str, expert_gemm: str
) -> None:
    moe = {"num_experts": 8, "moe_router_topk": 2, "moe_ffn_hidden_size": 1024, "expert_model_parallel_size": 2}
    request, _ = megatron_request(
        _args(**moe, **flags), where="argument dump", world_size=8, vocab_size=50304, framework="megatron"
    )
    runtime = request["training"]["runtime"]
    assert (runtime["cuda_graphs"], runtime["cuda_graph_scope"], runtime["expert_gemm"]) == (graphs, scope, expert_gemm)


@pytest.mark.parametrize(
    ("flags", "flash", "kernel"),
    [
        ({}, True, "cudnn"),  # before --attention-backend: Transformer Engine's choice, cuDNN on Hopper
        ({"attention_backend": "AttnBackend.auto"}, True, "cudnn"),
        ({"attention_backend": "AttnBackend.fused"}, True, "cudnn"),
        ({"attention_backend": "AttnBackend.flash"}, True, "flash2"),
        ({"attention_backend": "AttnBackend.unfused"}, False, "cudnn"),
        ({"attention_backend": "AttnBackend.local"}, False, "cudnn"),
    ],
)
def test_attention_backend_reads_back_as_the_kernel_run(flags: dict[str, Any], flash: bool, kernel: str) -> None:
    """An observation prices the attention kernel its run used: the launch's --attention-backend read back."""
    request, _ = megatron_request(
        _args(**flags), where="argument dump", world_size=8, vocab_size=50304, framework="megatron"
    )
    runtime = request["training"]["runtime"]
    assert (runtime["flash_attention"], runtime["attention_kernel"]) == (flash, kernel)


def test_unmodelled_flex_backend_is_refused() -> None:
    args = _args(
        num_experts=8,
        moe_router_topk=2,
        moe_ffn_hidden_size=1024,
        moe_token_dispatcher_type="flex",
        moe_flex_dispatcher_backend="ncclep",
    )
    with pytest.raises(InvalidSpecError, match="moe_flex_dispatcher_backend = 'ncclep' in the argument dump"):
        megatron_request(args, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")


def test_multi_latent_attention_reads_back_as_mla() -> None:
    """--multi-latent-attention with its widths becomes ModelSpec.mla (Megatron-LM's defaults for those left out);
    the --kv-channels validate_args fills in (hidden / heads) is MLA's to ignore."""
    args = _args(multi_latent_attention=True, q_lora_rank=48, kv_lora_rank=16, v_head_dim=64, kv_channels=64)
    request, _ = megatron_request(args, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    model = request["model"]
    assert model["mla"] == {
        "q_lora_rank": 48, "kv_lora_rank": 16, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 64,
    }  # fmt: skip
    assert "head_dim" not in model
    assert ModelSpec.model_validate(model).head_dim == 64
    plain, _ = megatron_request(_args(), where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert "mla" not in plain["model"]


def test_qk_layernorm_reads_back_outside_mla() -> None:
    """--qk-layernorm is Qwen3's query/key norms; under MLA it builds the latent norms, which the model always has."""
    request, _ = megatron_request(
        _args(qk_layernorm=True), where="argument dump", world_size=8, vocab_size=50304, framework="megatron"
    )
    assert request["model"]["qk_layernorm"] is True
    plain, _ = megatron_request(_args(), where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert "qk_layernorm" not in plain["model"]
    mla, _ = megatron_request(
        _args(qk_layernorm=True, multi_latent_attention=True),
        where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
    )  # fmt: skip
    assert "qk_layernorm" not in mla["model"] and "mla" in mla["model"]


def test_the_router_reads_back() -> None:
    """DeepSeek-V3's router flags read back as MoESpec's router fields; a softmax top-1 router's pre-softmax reads
    back as stated (MoESpec.router_softmax_before_topk holds either way); an unmodelled score function is refused."""
    moe = {"num_experts": 256, "moe_router_topk": 8, "moe_ffn_hidden_size": 256}
    deepseek = _args(
        **moe, moe_router_score_function="sigmoid", moe_router_enable_expert_bias=True, moe_router_num_groups=8,
        moe_router_group_topk=4, moe_router_topk_scaling_factor=2.5,
    )  # fmt: skip
    request, _ = megatron_request(deepseek, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    spec = ModelSpec.model_validate(request["model"]).moe
    assert spec is not None
    assert (spec.router_score_function.value, spec.router_expert_bias, spec.router_topk_scaling_factor) == (
        "sigmoid", True, 2.5,
    )  # fmt: skip
    assert (spec.router_num_groups, spec.router_group_topk, spec.router_pre_softmax) == (8, 4, False)
    top1 = _args(**moe | {"moe_router_topk": 1}, moe_router_pre_softmax=True)
    request, _ = megatron_request(top1, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert request["model"]["moe"]["router_pre_softmax"] is True
    assert ModelSpec.model_validate(request["model"]).moe.router_softmax_before_topk  # type: ignore[union-attr]
    with pytest.raises(InvalidSpecError, match="moe_router_score_function = 'sqrtsoftplus' in the argument dump"):
        megatron_request(
            _args(**moe, moe_router_score_function="sqrtsoftplus"),
            where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
        )  # fmt: skip


def test_the_balancing_loss_reads_back() -> None:
    """moe_router_load_balancing_type and moe_aux_loss_coeff read back as MoESpec's loss (a one-item list as its item);
    Megatron-Core's defaults read back as MoESpec's; sinkhorn, several losses at once and a weight outside [0, 1] are
    refused naming the argument."""
    moe = {"num_experts": 8, "moe_router_topk": 2, "moe_ffn_hidden_size": 256}

    def balancing(**args: object) -> tuple[str, float]:
        request, _ = megatron_request(
            _args(**moe, **args), where="argument dump", world_size=8, vocab_size=50304, framework="megatron"
        )
        spec = ModelSpec.model_validate(request["model"]).moe
        assert spec is not None
        return spec.router_load_balancing.value, spec.router_aux_loss_coeff

    assert balancing() == ("aux_loss", 0.0)
    assert balancing(moe_router_load_balancing_type="seq_aux_loss", moe_aux_loss_coeff=1e-4) == ("seq_aux_loss", 1e-4)
    assert balancing(moe_router_load_balancing_type=["global_aux_loss"], moe_aux_loss_coeff=[1e-3]) == (
        "global_aux_loss", 1e-3,
    )  # fmt: skip
    assert balancing(moe_router_load_balancing_type="none", moe_aux_loss_coeff=0.01) == ("none", 0.0)
    for args, message in (
        ({"moe_router_load_balancing_type": "sinkhorn"}, "moe_router_load_balancing_type = 'sinkhorn'"),
        (
            {"moe_router_load_balancing_type": ["aux_loss", "seq_aux_loss"], "moe_aux_loss_coeff": [0.01, 0.001]},
            "moe_router_load_balancing_type = \\['aux_loss', 'seq_aux_loss'\\]",
        ),
        ({"moe_aux_loss_coeff": 2.0}, "moe_aux_loss_coeff = 2.0 in the argument dump is not a number in \\[0, 1\\]"),
    ):
        with pytest.raises(InvalidSpecError, match=message):
            balancing(**args)


def test_pipeline_layout_reads_back_as_the_launch_wrote_it() -> None:
    """A split with a short first and last chunk (14 layers, pp 4, vp 2: [3, 4, 4, 3], chunks [1, 2] ... [2, 1])
    launches as a --pipeline-model-parallel-layout, and that argument reads back as the same split and vp;
    a layout whose chunks the planner does not hold that way is refused, naming both."""
    model = ModelSpec(num_layers=14, hidden_size=768, num_attention_heads=12, vocab_size=50304, seq_length=1024)
    layout = Layout(tp=1, pp=4, dp=2, vp=2, micro_batch_size=2, layers_per_stage=(3, 4, 4, 3))
    text = pipeline_layout(model, layout)
    assert text == "Et|t*2|t*2|t*2|t*2|t*2|t*2|tL"
    request, _ = megatron_request(
        _args(num_layers=14, pipeline_model_parallel_layout=text, virtual_pipeline_model_parallel_size=2),
        where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
    )  # fmt: skip
    assert request["layout"]["layers_per_stage"] == [3, 4, 4, 3] and request["layout"]["vp"] == 2
    mtp = _args(num_layers=14, pipeline_model_parallel_layout=text.replace("tL", "tmL"), mtp_num_layers=1)
    request, notes = megatron_request(mtp, where="argument dump", world_size=8, vocab_size=50304, framework="megatron")
    assert request["layout"]["layers_per_stage"] == [3, 4, 4, 3]  # the MTP layer beside the loss: not a decoder layer
    assert request["model"]["mtp_num_layers"] == 1 and notes == []
    with pytest.raises(InvalidSpecError, match=r"model chunks \[\[1, 2\], \[3, 2\], \[2, 2\], \[2, 0\]\]"):
        megatron_request(
            _args(num_layers=14, pipeline_model_parallel_layout="Et|t*3|t*2|t*2|t*2|t*2|t*2|L"),
            where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
        )  # fmt: skip
    with pytest.raises(InvalidSpecError, match=r"3 layout stages do not divide over pp\(4\)"):
        megatron_request(
            _args(pipeline_model_parallel_layout="Et*4|t*4|t*4L"),
            where="argument dump", world_size=8, vocab_size=50304, framework="megatron",
        )  # fmt: skip


V03 = "torchtitan_v03_llama8b_pp2.log"


def test_torchtitan_v03_log() -> None:
    """TorchTitan 0.3.0: the shape is the llama3 8B registry flavor, vp and the micro-batch come from the pipeline
    schedule line (8 microbatches, 4 stages over pp 2), full AC from 'Applied FullAC'."""
    obs = observe_log(_log(V03), profile="dgx-h100", file=V03)
    assert obs.log_format is LogFormat.TORCHTITAN and obs.request["framework_version"] == "0.3.0"
    assert obs.request["model"] == LLAMA8B | {"name": "llama3 8B", "vocab_size": 128256}
    assert obs.request["cluster"] == {"profile": "dgx-h100", "num_gpus": 16}
    assert obs.request["layout"] == {
        "tp": 2, "pp": 2, "dp": 4, "cp": 1, "ep": 1, "vp": 2, "micro_batch_size": 1,
        "recompute": "full", "sequence_parallel": True, "zero_stage": 2,
    }  # fmt: skip
    assert obs.request["training"] == {
        "global_batch_size": 32, "precision": "bf16", "runtime": {"tp_comm_overlap": False},
        "gradient_layout": "pytorch_fsdp",
    }  # fmt: skip
    # Step time = B * s / (tps * world) = 32 * 8192 / (16 tps) = 16384 / tps. Steps 1 and 10 are warm-up
    # (<= max(ceil(10% of 100), 1)); the nine tps left sorted: 3871 4955 4990 4997 5003 5008 5012 5015 5020.
    assert obs.timing.step_time_s == pytest.approx(16384 / 5003, rel=1e-12)
    # Step times sorted ascending are 16384 / (5020, 5015, 5012, ...): q1 is 16384 / 5012, q3 16384 / 4990.
    assert obs.timing.spread == pytest.approx(5003 * (1 / 4990 - 1 / 5012), rel=1e-9)
    assert (obs.timing.intervals_used, obs.timing.intervals_skipped) == (9, 2)
    assert (obs.timing.first_iteration, obs.timing.last_iteration) == (11, 100)
    assert obs.peak_memory_gib == 52.41
    assert obs.notes[0].startswith("stage split: TorchTitan 0.3.0 gives each virtual stage")
    assert _estimate_violations(obs) == []


def test_torchtitan_release_detection() -> None:
    assert detect_format(log_lines(_log(V03))) is LogFormat.TORCHTITAN
    named = observe_log(_log(V03), profile="dgx-h100", log_format=LogFormat.TORCHTITAN)
    assert named.request == observe_log(_log(V03), profile="dgx-h100").request
    assert observe_log(_log("torchtitan_llama8b.log"), profile="dgx-h100").request["framework_version"] == "0.2.2"
    # Without the version line the mesh line tells: v0.2.2 ends with etp=, v0.3.0 does not.
    unversioned = re.sub(r"(?m)^.*torchtitan version: .*\n", "", _log(V03))
    assert observe_log(unversioned, profile="dgx-h100").request["framework_version"] == "0.3.0"
    dev = _log(V03).replace("version: 0.3.0 (", "version: 0.0.0 (")
    assert observe_log(dev, profile="dgx-h100").request["framework_version"] == "0.3.0"
    newer = _log(V03).replace("version: 0.3.0 (", "version: 0.4.0 (")
    assert _refused(newer) == "torchtitan version 0.4.0: only the logs of TorchTitan 0.3.0 and 0.2.2 are read"


def test_torchtitan_v03_settings() -> None:
    selective = _log(V03).replace("Applied FullAC", "Applied SelectiveAC")
    assert observe_log(selective, profile="dgx-h100").request["layout"]["recompute"] == "selective"
    no_ac = re.sub(r"(?m)^.*Applied FullAC.*\n", "", _log(V03))
    assert observe_log(no_ac, profile="dgx-h100").request["layout"]["recompute"] == "none"
    saved = json.dumps({"parallelism": {"enable_sequence_parallel": False, "fsdp_reshard_after_forward": "always"}})
    obs = observe_log(_log(V03), profile="dgx-h100", config_text=saved)
    assert obs.request["layout"]["sequence_parallel"] is False and obs.request["layout"]["zero_stage"] == 3
    async_tp = _log(V03).replace("Applied FSDP to the model", "Async TP is enabled", 1)
    assert observe_log(async_tp, profile="dgx-h100").request["training"]["runtime"]["tp_comm_overlap"] is True
    fp8 = _log(V03).replace("Building llama3 8B", "Float8 training active with recipe rowwise\n" + "Building llama3 8B")
    assert observe_log(fp8, profile="dgx-h100").request["training"]["precision"] == "fp8"


def test_torchtitan_v03_refusals() -> None:
    no_schedule = re.sub(r"(?m)^.*Using pipeline schedule.*\n", "", _log(V03))
    assert _refused(no_schedule).startswith("pp(2) > 1 but no 'Using pipeline schedule ... with N microbatches")
    no_model = re.sub(r"(?m)^.*Building llama3 8B\n", "", _log(V03))
    assert _refused(no_model).startswith("no 'Building MODEL FLAVOR' line in the TorchTitan 0.3.0 log")
    qwen = _log(V03).replace("Building llama3 8B", "Building qwen3 8B")
    assert "TorchTitan 0.3.0 model qwen3 8B: its log names the model but not its shape" in _refused(qwen)
    budget = _log(V03).replace("Applied FullAC activation checkpointing to the model", "Selected 0.5 budget option")
    assert _refused(budget) == "memory-budget activation checkpointing is not modelled"
    mx = _log(V03).replace("Building llama3 8B", "Converted Linear layers to MXFP8Linear\nBuilding llama3 8B")
    assert _refused(mx) == "MXFP8 training is not modelled"
    assert "--num-gpus says 8" in _refused(_log(V03), num_gpus=8)


def test_registry_ffn_widths() -> None:
    """TorchTitan v0.3.0 llama3_configs: compute_ffn_hidden_dim of each flavor."""
    widths = {k: compute_ffn_hidden_dim(f.dim, f.multiple_of, f.ffn_dim_multiplier) for k, f in LLAMA3_FLAVORS.items()}
    assert widths == {"debugmodel": 768, "1B": 8192, "3B": 8192, "8B": 14336, "70B": 28672, "405B": 53248}


def test_megatron_fp8_log_states_its_recipe_and_weight_storage() -> None:
    # Megatron-LM prints --fp8-recipe (an Fp8Recipe enum) and --fp8-param-gather whether on or off.
    text = _log("megatron_llama8b.log").replace(
        "  fp8 ............................................. None",
        "  fp8 ............................................. hybrid\n"
        "  fp8_recipe ...................................... Fp8Recipe.tensorwise\n"
        "  fp8_param_gather ................................ False",
    )
    training = observe_log(text, profile="dgx-h100").request["training"]
    assert (training["precision"], training["fp8_recipe"], training["fp8_param_gather"]) == ("fp8", "tensorwise", False)
    blockwise = text.replace("Fp8Recipe.tensorwise", "Fp8Recipe.blockwise")
    assert observe_log(blockwise, profile="dgx-h100").request["training"]["fp8_recipe"] == "blockwise"
    custom = text.replace("Fp8Recipe.tensorwise", "Fp8Recipe.custom")  # a user's quantizer factory
    refused = r"fp8_recipe custom in the .* is not modelled \(delayed, .*blockwise are\)"
    with pytest.raises(InvalidSpecError, match=refused):
        observe_log(custom, profile="dgx-h100")


def test_megatron_nvfp4_log() -> None:
    # --fp4-format e2m1 (dest fp4), --fp4-recipe (an Fp4Recipe enum), --fp4-param-gather (dest fp4_param).
    text = _log("megatron_llama8b.log").replace(
        "  fp8 ............................................. None",
        "  fp8 ............................................. None\n"
        "  fp4 ............................................. e2m1\n"
        "  fp4_recipe ...................................... Fp4Recipe.nvfp4\n"
        "  fp4_param ....................................... True",
    )
    training = observe_log(text, profile="gb200-nvl72").request["training"]
    assert (training["precision"], training["fp8_param_gather"]) == ("nvfp4", True)
    custom = text.replace("Fp4Recipe.nvfp4", "Fp4Recipe.custom")
    with pytest.raises(InvalidSpecError, match=r"fp4_recipe custom in the .* is not modelled \(nvfp4 is\)"):
        observe_log(custom, profile="gb200-nvl72")
    # Layers kept in BF16 (`--first-last-layers-bf16`): the dump prints both counts, Megatron-Core's 1 unless set.
    bf16_ends = (
        "  first_last_layers_bf16 .......................... True\n"
        "  num_layers_at_start_in_bf16 ..................... 2\n"
        "  num_layers_at_end_in_bf16 ....................... 1\n"
    )
    ends = text.replace("  fp4_param ....", bf16_ends + "  fp4_param ....")
    training = observe_log(ends, profile="gb200-nvl72").request["training"]
    assert (training["bf16_layers_at_start"], training["bf16_layers_at_end"]) == (2, 1)
    switch_only = text.replace("  fp4_param ....", bf16_ends.splitlines(keepends=True)[0] + "  fp4_param ....")
    training = observe_log(switch_only, profile="gb200-nvl72").request["training"]
    assert (training["bf16_layers_at_start"], training["bf16_layers_at_end"]) == (1, 1)
    negative = ends.replace(
        "num_layers_at_end_in_bf16 ....................... 1", "num_layers_at_end_in_bf16 ....................... -1"
    )
    with pytest.raises(InvalidSpecError, match=r"num_layers_at_end_in_bf16 = -1 in the .* is not a count of layers"):
        observe_log(negative, profile="gb200-nvl72")
    off = ends.replace(
        "first_last_layers_bf16 .......................... True",
        "first_last_layers_bf16 .......................... False",
    )
    assert "bf16_layers_at_start" not in observe_log(off, profile="gb200-nvl72").request["training"]


def test_megatron_log_states_its_activation_offloading() -> None:
    # validate_args turns cpu_offloading on when --cpu-offloading-num-layers > 0; the dump prints both.
    text = _log("megatron_llama8b.log").replace(
        "  fp8 ............................................. None",
        "  fp8 ............................................. None\n"
        "  cpu_offloading .................................. True\n"
        "  cpu_offloading_num_layers ....................... 5",
    )
    # The fixture runs pp 2 with selective recompute, which Megatron-Core refuses with offloading: the rule says so.
    with pytest.raises(InvalidSpecError, match=r"activation_offload_layers\(5\) > 0 needs pp = 1; got pp\(2\)"):
        observe_log(text, profile="dgx-h100")
    assert (
        "activation_offload_layers"
        not in observe_log(_log("megatron_llama8b.log"), profile="dgx-h100").request["training"]
    )
    weights = text.replace(
        "cpu_offloading_num_layers ....................... 5",
        "cpu_offloading_num_layers ....................... 5\n  cpu_offloading_weights .......................... True",
    )
    with pytest.raises(InvalidSpecError, match="cpu_offloading_weights in the .* is not modelled"):
        observe_log(weights, profile="dgx-h100")


def test_megatron_log_states_its_block_recompute() -> None:
    """recompute_method block with recompute_num_layers k: full recompute of the first k layers of each stage
    (`training.recompute_num_layers`); the uniform method recomputes every layer and states nothing more."""
    text = _log("megatron_llama8b.log")
    block = text.replace(
        "  recompute_granularity ........................... selective\n"
        "  recompute_method ................................ None\n"
        "  recompute_num_layers ............................ None",
        "  recompute_granularity ........................... full\n"
        "  recompute_method ................................ block\n"
        "  recompute_num_layers ............................ 3",
    )
    # The fixture interleaves (vp 2): the first 3 layers of each model chunk.
    interleaved = observe_log(block, profile="dgx-h100").request
    assert (interleaved["layout"]["vp"], interleaved["training"]["recompute_num_layers"]) == (2, 3)
    block = block.replace(
        "  num_layers_per_virtual_pipeline_stage ........... 8",
        "  num_layers_per_virtual_pipeline_stage ........... None",
    ).replace(
        "  virtual_pipeline_model_parallel_size ............ 2",
        "  virtual_pipeline_model_parallel_size ............ None",
    )
    request = observe_log(block, profile="dgx-h100").request
    assert request["layout"]["recompute"] == "full"
    assert request["training"]["recompute_num_layers"] == 3
    uniform = block.replace(
        "recompute_method ................................ block",
        "recompute_method ................................ uniform",
    )
    request = observe_log(uniform, profile="dgx-h100").request
    assert request["layout"]["recompute"] == "full" and "recompute_num_layers" not in request["training"]


def test_torchtitan_runs_without_compile_are_noted_eager() -> None:
    """A TorchTitan run that did not compile its model ran RoPE and SwiGLU eagerly, which the default estimate prices
    fused: its observation says so. The compile line in the log, or compile.enable in the config, clears it."""

    def eager_noted(text: str, config_text: str | None = None) -> bool:
        obs = observe_log(text, profile="dgx-h100", config_text=config_text)
        return any(n.startswith("torch.compile was off") for n in obs.notes)

    v02, v03 = _log("torchtitan_llama8b.log"), _log(V03)
    assert eager_noted(v02) and eager_noted(v03)
    assert observe_log(v03, profile="dgx-h100").notes[0].startswith("stage split")  # the split note stays first
    line = "[rank0]:[titan] 2025-11-05 09:00:03,010 - root - INFO - Compiling each TransformerBlock with torch.compile"
    compiled = v02.replace(
        "[rank0]:[titan] 2025-11-05 09:00:03,020", line + "\n[rank0]:[titan] 2025-11-05 09:00:03,020"
    )
    assert compiled != v02 and not eager_noted(compiled)
    assert not eager_noted(v02, "[compile]\nenable = true\n")
    assert eager_noted(v02, '[compile]\nenable = true\ncomponents = ["loss"]\n')  # the loss alone: the model is eager


def test_torchtitan_hybrid_sharding_is_noted() -> None:
    """HSDP (dp_replicate > 1 and dp_shard > 1) is recorded as ZeRO over dp = replicate x shard, and said so; plain
    FSDP (dp_replicate 1) and DDP (dp_shard 1) are what they record."""
    text = _log("torchtitan_llama8b.log")

    def mesh(replicate: int, shard: int) -> Any:
        line = f"pp=1, dp_replicate={replicate}, dp_shard={shard}, cp=1"
        return observe_log(text.replace("pp=1, dp_replicate=1, dp_shard=8, cp=1", line), profile="dgx-h100")

    hybrid = mesh(2, 4)
    assert hybrid.request["layout"]["dp"] == 8 and hybrid.request["layout"]["zero_stage"] == 3
    assert [n for n in hybrid.notes if n.startswith("hybrid sharding (dp_replicate=2 x dp_shard=4)")]
    for plain in (mesh(1, 8), mesh(8, 1)):
        assert not [n for n in plain.notes if n.startswith("hybrid sharding")]
    assert mesh(8, 1).request["layout"]["zero_stage"] == 0
