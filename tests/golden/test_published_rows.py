"""How published rows become planner inputs: hand-computed conversions of the newer sources' figures."""

from __future__ import annotations

import pytest

from planner.calibration.published import gpu_kind_of, megatron_model_flop, published_runs
from planner.specs import ModelSpec, Precision, Recompute


def _run(run_id: str):
    return next(r for r in published_runs() if r.id == run_id)


def test_gpu_kind_of_names() -> None:
    assert gpu_kind_of("A100-SXM4-80GB") == "A100"
    assert gpu_kind_of("H100-SXM5-80GB") == "H100"
    assert gpu_kind_of("GB200 Blackwell GPU (186GB)") == "GB200"


def test_megatron_model_flop_small_case() -> None:
    # 12 * B s l h^2 * [(1 + g/a + s/h) + (f/h) * 1.5 + V/(2 l h)]
    # B=2, s=8, l=2, h=4, a=2, g=1, f=8, V=16, gated:
    # 12*2*8*2*16 = 6144; (1 + 0.5 + 2) + 2*1.5 + 16/16 = 7.5; 6144 * 7.5 = 46080
    model = ModelSpec(
        num_layers=2,
        hidden_size=4,
        num_attention_heads=2,
        num_query_groups=1,
        ffn_hidden_size=8,
        gated_mlp=True,
        vocab_size=16,
        seq_length=8,
    )
    assert megatron_model_flop(model, 2) == 46080.0


def test_readme_row_step_time_from_its_tflops() -> None:
    # 1.7B row: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) with B=192, s=4096, l=24, h=2048, V=131072,
    # over 408.8 TFLOP/s x 48 GPUs.
    b, s, layers, h, v = 192, 4096, 24, 2048, 131072
    flop = 72 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))
    run = _run("megatron_readme_h100_1.7B")
    assert run.step_time_s == pytest.approx(flop / (408.8e12 * 48), rel=1e-12)
    assert run.gpu_kind == "H100" and run.training.precision == Precision.BF16
    assert run.model.tied_embeddings is False and run.layout.recompute == Recompute.NONE
    assert run.training.runtime.tp_comm_overlap and run.training.runtime.overlap_grad_reduce


def test_bridge_row_step_time_from_tokens_per_second() -> None:
    # Llama3.1 405B on 1024 H100: 1536 sequences x 8192 tokens / (328 tokens/s/GPU x 1024 GPUs).
    run = _run("bridge_26.04.01_h100_llama31_405b_fp8")
    assert run.step_time_s == pytest.approx(1536 * 8192 / (328 * 1024), rel=1e-12)
    assert (run.layout.tp, run.layout.pp, run.layout.cp, run.layout.dp, run.layout.vp) == (8, 8, 2, 8, 8)
    assert run.training.precision == Precision.FP8 and run.model.gated_mlp


def test_mosaicml_row_step_time_from_tokens_per_second() -> None:
    # MPT-70B on 64 H100: GlobalBatchSize (T) 4194304 = 2048 x 2048 over Throughput (T/s) 66523; micro 8 x accum 4 x 64.
    run = _run("mosaicml_mpt_h100_70b_s2048_g64_b8")
    assert run.step_time_s == pytest.approx(4194304 / 66523, rel=1e-12)
    assert run.training.global_batch_size == 8 * 4 * 64 and run.layout.zero_stage == 3
    # MP mode DEFAULT in Composer 0.15.1-0.16.3 leaves reduce_dtype unset: FSDP reduces in the bf16 param dtype
    assert run.layout.recompute == Recompute.FULL and run.training.grad_reduce_in_fp32 is False
    pure = _run("mosaicml_mpt_a100-80gb_70b_s2048_g64_b8")  # precision bf16, MP mode PURE: bf16 reduce
    assert pure.training.grad_reduce_in_fp32 is False and pure.gpu == "A100-SXM4-80GB"
    assert (run.model.hidden_size, run.model.num_layers, run.model.vocab_size) == (8192, 80, 50368)
    assert run.model.learned_position_embeddings and run.model.linear_bias and run.model.tied_embeddings


def test_mxfp8_runs_at_the_fp8_peak_and_stated_step_time_is_kept() -> None:
    assert _run("bridge_26.04.01_gb200_llama3_70b_mxfp8").training.precision == Precision.FP8
    nemotron = _run("nemotron4_340b_6144")
    assert nemotron.step_time_s == 8.0 and nemotron.layout.world_size == 6144


def test_every_run_has_a_source_and_a_kind() -> None:
    for run in published_runs():
        assert run.source and run.gpu_kind in {"A100", "H100", "B200", "GB200"} and run.gpu
