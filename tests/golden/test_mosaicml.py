"""MosaicML llm-foundry's MPT training benchmarks (PyTorch FSDP FULL_SHARD) as predictions.

Source: mosaicml/llm-foundry scripts/train/benchmarking/README.md at commit 061f2c7, tables "H100 80GB BF16",
"A100 80GB ..." and "A100 40GB with 1600 Gbps node-node interconnect (RoCE)"; shapes from
scripts/train/yamls/pretrain/mpt-<size>.yaml. No row enters a fit (`HOLDOUT_ONLY_SOURCES`). The bars are
regression bars: today's figures plus a small slack, not targets. The attention core runs at FlashAttention v1's
rate (`runtime.attention_kernel` flash1: llm-foundry's Triton port, `attn_impl: triton`); priced like a GEMM
(A100) or at FlashAttention-2's rate (H100) instead, the 16k-64k-token rows were up to 2.1x too fast. Today the
43 rows at 16k-64k tokens are 4.3% off on average, 12.5% at most. Composer's FSDP runs BACKWARD_POST
(`runtime.fsdp.backward_prefetch`, `RuntimeFeatures.zero3_backward_prefetch` post): every backward gather is
waited for; priced as overlapped, the H100 13B rows at 2048 tokens without recompute were +24-27% (now +15-17%).
The recomputed forward reuses each unit's backward gather (PyTorch FSDP, `data_parallel.recompute_gather_passes`).
The largest misses: H100 30B at 8192 tokens (+24%), rows within a few GiB of capacity (A100 40 GB 70B on 64
GPUs +31%, 760M at batch 96 +33%); see the README's accuracy section.
"""

from __future__ import annotations

from functools import cache
from statistics import mean

import pytest

from planner.calibration.fit import FIT_SETS
from planner.calibration.published import FSDP_ERA, PublishedRun, published_runs
from planner.calibration.report import HOLDOUT_ONLY_SOURCES, Report, RunRow, build_report, validation_profile_id
from planner.costmodel.params import total_params
from planner.profiles import load_profiles
from planner.specs import AttentionKernel, BackwardPrefetch, GradientLayout, Recompute

MOSAICML = "MosaicML_llmfoundry_MPT"
GPUS = {"H100": "H100-SXM5-80GB", "A100-80GB": "A100-SXM4-80GB", "A100-40GB": "A100-SXM4-40GB"}
ROWS = {"H100": 52, "A100-80GB": 61, "A100-40GB": 78}
"""Every row of the three BF16 tables at the commit (FP8 table left out: see the README)."""
BARS = {
    # GPU: (mean |error|, max |error|) at most; today's figures in the comment
    "H100": (0.09, 0.29),  # 8.0% / 26.6% (30B, 8192 tokens) at eta 0.6587 (8.4% / 27.4% at 0.665, since NeMo 24.07's
    # fit rows run flash-attn 2 as its launcher set it; 7.1% / 24.3% at eta 0.640; 8.9% / 27.0% before BACKWARD_POST was
    # priced)
    "A100-80GB": (0.065, 0.34),  # 6.1% / 32.6% (760M, 512 tokens, batch 96)
    "A100-40GB": (0.06, 0.32),  # 5.4% / 30.9% (70B on 64 GPUs, batch 2; 37.2% before BACKWARD_POST was priced)
}
LOSO_BARS = {
    # kind: (mean, max) with constants refitted on the kind's other sources; today's in the comment
    "A100": (0.07, 0.37),  # 6.5% / 35.1% (eta 0.755, t0 0; 7.7% / 41.1% before BACKWARD_POST was priced)
    "H100": (0.085, 0.28),  # 7.7% / 26.0% (eta 0.654, t0 20; 8.1% / 26.8% at eta 0.660, 7.1% / 24.4% at eta 0.641, 8.9%
    # / 27.2% before that)
}
SHORT_SEQUENCE_BAR = 0.075
"""Mean |error| of the 107 rows at 512-2048 tokens, all three tables: today 7.3% (8.3% before BACKWARD_POST was
priced: the backward gathers weigh most against short sequences' compute), the H100 rows faster with the H100
eta since FP8 GEMMs run at the measured 1.75x of bf16 (7.4% before; 7.7% before the refit of NeMo 24.07 with
overlapped interleaved sends; 9.1% on README-only H100 fit)."""
LONG_SEQUENCE_BARS = (0.05, 0.135)
"""(mean, max) |error| of the 43 rows at 16k-64k tokens: today 4.3% / 12.5% (125M, 32k tokens, A100 40 GB)."""


@cache
def report() -> Report:
    return build_report(load_profiles())


def _runs(gpu: str) -> list[PublishedRun]:
    return [r for r in published_runs() if r.group == MOSAICML and r.gpu == GPUS[gpu]]


def _rows(gpu: str) -> list[RunRow]:
    ids = {r.id for r in _runs(gpu)}
    return [r for r in report().runs if r.id in ids]


@pytest.mark.parametrize("gpu", list(GPUS))
def test_every_row_is_a_prediction(gpu: str) -> None:
    rows = _rows(gpu)
    assert len(rows) == ROWS[gpu]
    assert not any(r.in_fit for r in rows)
    assert MOSAICML in HOLDOUT_ONLY_SOURCES and all(MOSAICML not in groups for groups in FIT_SETS.values())


@pytest.mark.parametrize("gpu", list(GPUS))
def test_mean_and_max_error_regression_bar(gpu: str) -> None:
    errors = [abs(r.error) for r in _rows(gpu)]
    mean_bar, max_bar = BARS[gpu]
    assert mean(errors) <= mean_bar
    assert max(errors) <= max_bar


@pytest.mark.parametrize("kind", list(LOSO_BARS))
def test_leave_one_source_out_regression_bar(kind: str) -> None:
    holdout = next(h for h in report().kind(kind).holdouts if h.source == MOSAICML)
    assert MOSAICML not in holdout.fitted_on_sources
    assert holdout.mean_abs_error <= LOSO_BARS[kind][0]
    assert holdout.max_abs_error <= LOSO_BARS[kind][1]


def test_other_sources_never_fit_on_these_rows() -> None:
    for kind in report().kinds:
        assert all(MOSAICML not in h.fitted_on_sources for h in kind.holdouts)


def test_short_sequences_carry_less_error() -> None:
    seq = {r.id: r.model.seq_length for r in published_runs()}
    short = [r for gpu in GPUS for r in _rows(gpu) if seq[r.id] <= 2048]
    assert len(short) == 107
    assert mean(abs(r.error) for r in short) <= SHORT_SEQUENCE_BAR


def test_long_sequences_follow_the_attention_kernel_rate() -> None:
    # At 16k-64k tokens the attention core is most of the step: these rows test its rate
    seq = {r.id: r.model.seq_length for r in published_runs()}
    long = [r for gpu in GPUS for r in _rows(gpu) if seq[r.id] >= 16384]
    assert len(long) == 43
    assert mean(abs(r.error) for r in long) <= LONG_SEQUENCE_BARS[0]
    assert max(abs(r.error) for r in long) <= LONG_SEQUENCE_BARS[1]


@pytest.mark.parametrize("gpu", list(GPUS))
def test_layout_and_runtime_as_the_benchmark_ran(gpu: str) -> None:
    for run in _runs(gpu):
        x = run.layout
        assert (x.tp, x.pp, x.cp, x.vp, x.zero_stage, x.dp) == (1, 1, 1, 1, 3, run.num_gpus)
        assert run.training.global_batch_size % (x.micro_batch_size * x.dp) == 0
        rt = run.training.runtime
        assert rt.overlap_param_gather and rt.overlap_grad_reduce and rt.flash_attention
        assert rt.attention_kernel is AttentionKernel.FLASH1  # attn_impl: triton
        assert not (rt.fused_kernels or rt.cuda_graphs or rt.tp_comm_overlap)
        assert run.layout.recompute in (Recompute.FULL, Recompute.NONE)
        assert run.training.gradient_layout is GradientLayout.PYTORCH_FSDP
        assert rt.zero3_backward_prefetch is BackwardPrefetch.POST  # Composer's default, stated per row


def test_a100_40gb_rows_run_on_the_40gb_profile() -> None:
    assert {validation_profile_id(r) for r in _runs("A100-40GB")} == {"dgx-a100-40gb"}
    assert {r.capacity_gib for r in _rows("A100-40GB")} == {40}
    assert {validation_profile_id(r) for r in _runs("A100-80GB")} == {"dgx-a100-80gb"}


def test_era_names_the_fsdp_rows() -> None:
    import json

    from planner.calibration.published import DATA_FILE

    rows = [r for r in json.loads(DATA_FILE.read_text())["runs"] if r["group"] == MOSAICML]
    assert len(rows) == sum(ROWS.values()) and {r["runtime"]["era"] for r in rows} == {FSDP_ERA}
    # NumParams as published = the planner's count with learned positions (max_seq_len x d_model) and biases
    by_id = {r.id: r for r in published_runs()}
    for row in rows:
        assert total_params(by_id[row["id"]].model) == row["measured"]["num_params"], row["id"]
