"""Plans the launch tests run over: dense with biases, Llama-style GQA + SwiGLU, MoE, cp > 1, vp > 1,
uneven splits, ZeRO 0-3, fp16, fp8 and nvfp4. Any test that takes a `case` argument runs on each."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from planner.launch import LaunchArgs, launch_args
from planner.layout import Layout
from planner.presets import get_preset
from planner.specs import Fp8Recipe, ModelSpec, MoESpec, Precision, Recompute, RuntimeFeatures, TrainingSpec


@dataclass(frozen=True)
class Case:
    id: str
    model: ModelSpec
    training: TrainingSpec
    layout: Layout
    num_gpus: int
    gpus_per_node: int = 8

    def launch(self) -> LaunchArgs:
        return launch_args(self.model, self.training, self.layout, self.num_gpus, self.gpus_per_node)


def _model(preset: str) -> ModelSpec:
    return get_preset(preset).model


def _train(batch: int, precision: Precision = Precision.BF16, **runtime: bool | str) -> TrainingSpec:
    return TrainingSpec(global_batch_size=batch, precision=precision, runtime=RuntimeFeatures(**runtime))


SEL, FULL, NONE = Recompute.SELECTIVE, Recompute.FULL, Recompute.NONE

# A made-up MoE shape no framework ships: every other layer MoE after one dense layer.
CUSTOM_MOE = ModelSpec(
    name="custom moe",
    num_layers=12,
    hidden_size=1024,
    num_attention_heads=16,
    num_query_groups=4,
    ffn_hidden_size=4096,
    gated_mlp=True,
    vocab_size=32000,
    seq_length=4096,
    moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=1024, moe_layer_freq=2, first_k_dense_layers=1),
)

CASES = [
    Case(
        "gpt3-175b-fp16-full-zero0",
        _model("gpt3-175b"),
        _train(1536, Precision.FP16),
        Layout(tp=8, pp=8, dp=16, micro_batch_size=2, recompute=FULL),
        1024,
    ),
    Case(
        "gpt3-175b-vp8-sp-zero1",
        _model("gpt3-175b"),
        _train(1536),
        Layout(tp=8, pp=4, dp=32, vp=8, micro_batch_size=4, sequence_parallel=True, zero_stage=1),
        1024,
    ),
    Case(
        "llama3-8b-tp2-zero1",
        _model("llama3-8b"),
        _train(512),
        Layout(tp=2, pp=1, dp=32, micro_batch_size=2, sequence_parallel=True, zero_stage=1),
        64,
    ),
    Case(
        "llama3-70b-cp2-vp5-selective",
        _model("llama3-70b"),
        _train(1024),
        Layout(tp=4, pp=4, dp=32, cp=2, vp=5, recompute=SEL, sequence_parallel=True, zero_stage=1),
        1024,
    ),
    Case(
        "llama3-70b-pp8-vp5-zero0",
        _model("llama3-70b"),
        _train(1024),
        Layout(tp=4, pp=8, dp=32, vp=5, sequence_parallel=True),
        1024,
    ),
    Case(
        "llama3-405b-uneven-zero2",
        _model("llama3-405b"),
        _train(2048),
        Layout(tp=8, pp=16, dp=8, sequence_parallel=True, zero_stage=2, layers_per_stage=(7,) + (8,) * 14 + (7,)),
        1024,
    ),
    Case(
        "llama3-405b-uneven-vp2-zero3",
        _model("llama3-405b"),
        _train(2048),
        Layout(tp=8, pp=16, dp=8, vp=2, sequence_parallel=True, zero_stage=3, layers_per_stage=(6,) + (8,) * 14 + (8,)),
        1024,
    ),
    Case(
        "mixtral-cp8-ep8-zero1",
        _model("mixtral-8x7b"),
        _train(512),
        Layout(tp=1, pp=1, dp=32, cp=8, ep=8, zero_stage=1),
        256,
    ),
    Case(
        "mixtral-pp4-ep4-zero0",
        _model("mixtral-8x7b"),
        _train(512),
        Layout(tp=2, pp=4, dp=8, ep=4, micro_batch_size=1, recompute=FULL, sequence_parallel=True),
        64,
    ),
    Case(
        "deepseek-v3-ep8-fp8-zero3",
        _model("deepseek-v3"),
        _train(2048, Precision.FP8),
        Layout(tp=2, pp=8, dp=64, ep=8, recompute=FULL, sequence_parallel=True, zero_stage=3),
        1024,
    ),
    Case(
        "mixtral-deepep-a2a-overlap-fp8",
        _model("mixtral-8x7b"),
        _train(512, Precision.FP8, moe_dispatcher="deepep", moe_a2a_overlap=True),
        Layout(tp=1, pp=4, dp=16, ep=8, vp=2, recompute=SEL, zero_stage=1),
        64,
    ),
    Case(
        "qwen3-30b-hybridep-fp8",
        _model("qwen3-30b-a3b"),
        _train(1024, Precision.FP8, moe_dispatcher="hybridep"),
        Layout(tp=1, pp=1, dp=16, ep=16, zero_stage=1),
        16,
    ),
    Case(
        # Megatron-Bridge's H100 DeepSeek-V3 FP8-SC recipe scales: --fp8-recipe blockwise, 16-bit weights.
        "deepseek-v3-fp8-blockwise",
        _model("deepseek-v3"),
        TrainingSpec(global_batch_size=2048, precision=Precision.FP8, fp8_recipe=Fp8Recipe.BLOCKWISE),
        Layout(tp=2, pp=8, dp=64, ep=64, recompute=SEL, sequence_parallel=True, zero_stage=1),
        1024,
    ),
    Case(
        # Megatron-Bridge's H100 GPT-OSS 120B recipe: a 128-token window in every other layer, experts over 8.
        "gpt-oss-120b-windowed",
        _model("gpt-oss-120b"),
        _train(1280),
        Layout(tp=1, pp=4, dp=16, ep=8, zero_stage=1),
        64,
    ),
    Case(
        # Megatron-Bridge's GB200 Llama 3 70B NVFP4 recipe (26.04.01): tp 2, pp 4, vp 5, NVFP4 weights gathered.
        "llama3-70b-nvfp4-interleaved",
        _model("llama3-70b"),
        _train(256, Precision.NVFP4),
        Layout(tp=2, pp=4, dp=8, vp=5, sequence_parallel=True, zero_stage=1),
        64,
        4,
    ),
    Case(
        # Block recompute under interleaving: the first layer of each of the five 4-layer chunks of a stage (as
        # Megatron-Bridge's GB200 Llama 3.1 405B NVFP4 V1 recipe recomputes the first layer of each chunk).
        "llama3-70b-nvfp4-block-recompute-interleaved",
        _model("llama3-70b"),
        TrainingSpec(global_batch_size=256, precision=Precision.NVFP4, recompute_num_layers=1),
        Layout(tp=2, pp=4, dp=8, vp=5, recompute=FULL, sequence_parallel=True, zero_stage=1),
        64,
        4,
    ),
    Case(
        "llama3-8b-fp8-tp-overlap-zero2",
        _model("llama3-8b"),
        _train(256, Precision.FP8, tp_comm_overlap=True),
        Layout(tp=4, pp=2, dp=8, micro_batch_size=2, sequence_parallel=True, zero_stage=2),
        64,
    ),
    Case(
        "nemotron4-15b-no-flash-no-overlap",
        _model("nemotron4-15b"),
        _train(256, flash_attention=False, overlap_grad_reduce=False, overlap_param_gather=False),
        Layout(tp=4, pp=2, dp=8, recompute=SEL, sequence_parallel=False, zero_stage=1),
        64,
    ),
    Case(
        "gpt-neox-20b-uneven-pp2",
        _model("gpt-neox-20b"),
        _train(512),
        Layout(tp=2, pp=2, dp=4, micro_batch_size=4, sequence_parallel=True, zero_stage=1, layers_per_stage=(23, 21)),
        16,
    ),
    Case(
        "llama3-8b-half-node",
        _model("llama3-8b"),
        _train(64),
        Layout(tp=4, pp=1, dp=1, micro_batch_size=1, sequence_parallel=True),
        4,
    ),
    Case(
        "llama3-8b-partial-node-100",
        _model("llama3-8b"),
        _train(200),
        Layout(tp=4, pp=1, dp=25, micro_batch_size=1, sequence_parallel=True, zero_stage=1),
        100,
    ),
    Case(
        # Megatron-Bridge's GB200 Llama 3 70B recipe: Megatron-FSDP at tp = pp = 1, 20 of 80 layers offloaded.
        "llama3-70b-fsdp-offload-20",
        _model("llama3-70b"),
        TrainingSpec(global_batch_size=256, activation_offload_layers=20),
        Layout(tp=1, pp=1, dp=64, micro_batch_size=1, zero_stage=3),
        64,
        gpus_per_node=4,
    ),
    Case(
        # Megatron-Bridge's H100 Llama 3 8B FP8 recipe: Megatron-FSDP, full recompute of the first 5 of 32 layers.
        "llama3-8b-fsdp-block-recompute-5",
        _model("llama3-8b"),
        TrainingSpec(global_batch_size=128, recompute_num_layers=5),
        Layout(tp=1, pp=1, dp=8, micro_batch_size=1, recompute=Recompute.FULL, zero_stage=3),
        8,
    ),
    Case(
        # Module recompute as NVIDIA's MoE recipes name it (GPT-OSS: layernorm, moe_act), with the dense layers' MLP.
        "custom-moe-recompute-modules",
        CUSTOM_MOE,
        TrainingSpec(
            global_batch_size=64,
            runtime=RuntimeFeatures.model_validate({"recompute_modules": ["layernorm", "moe_act", "mlp"]}),
        ),
        Layout(tp=2, pp=2, dp=4, ep=2, micro_batch_size=2, sequence_parallel=True, zero_stage=1, recompute=SEL),
        16,
        gpus_per_node=4,
    ),
    Case(
        "custom-moe-freq2-first1",
        CUSTOM_MOE,
        _train(64),
        Layout(tp=2, pp=2, dp=4, ep=2, micro_batch_size=2, sequence_parallel=True, zero_stage=1),
        16,
        gpus_per_node=4,
    ),
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", CASES, ids=[c.id for c in CASES])
