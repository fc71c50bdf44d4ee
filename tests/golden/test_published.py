"""The accuracy bars of the cost model against published runs (planner/data/published_runs.json).

A100 constants are fitted on Narayanan 2021 Table 1 only; Table 2, Korthikanti 2022
and the figure findings are predictions. H100 constants are fitted on the
Megatron-LM README's weak-scaling table (July 2024, bf16) and NeMo 24.07's performance summary (FP8);
Nemotron-4 340B and the Megatron-Bridge rows are predictions. MosaicML's MPT (PyTorch FSDP) rows on both are
predictions that enter no fit, not even another source's leave-one-source-out refit
(test_mosaicml.py). GB200 is fitted on Megatron-Bridge's NeMo 26.04.01 rows; B200 predicts its rows with
GB200's constants.
Tolerances are what the model achieves at this commit plus a small margin, stated next to
each; the H100/GB200 bars are loose because the model is weak there (see the README's accuracy section), not to hide it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from statistics import mean

import pytest
from typer.testing import CliRunner

import planner.cli
from planner.calibration.accuracy import Workload, load_bands, workload_of
from planner.calibration.fit import FIT_SETS, TRANSFERS, measured_step_s, predict
from planner.calibration.published import published_runs
from planner.calibration.report import (
    HOLDOUT_ONLY_SOURCES,
    VALIDATION_PROFILES,
    ErrorStats,
    Report,
    RunRow,
    build_report,
    error_stats,
    held_out_error,
    refit,
)
from planner.profiles import load_profiles
from planner.specs import AttentionKernel

TABLE1_ROW_TOLERANCE = 0.07
TABLE1_MEAN_TOLERANCE = 0.04
PTDP_TOLERANCE = 0.10
ZERO3_TOLERANCE = 0.20
ZERO3_COLLAPSE = 2.5
GAIN_POINTS = 5.0

README_H100 = "MegatronLM_README_H100_2024"
NEMO_2407 = "NeMo_PerfSummary_24.07"
BRIDGE = "MegatronBridge_PerfSummary_26.04.01"
BRIDGE_2511 = "MegatronBridge_PerfSummary_25.11"
NEMOTRON = "Nemotron4_340B_2024"
MOE_2604 = "MegatronBridge_PerfSummary_26.04.01_MoE"
"""Megatron-Bridge 26.04.01's MoE rows (Qwen3 30B-A3B / 235B-A22B, DeepSeek-V3) with the release's perf configs:
predictions in no fit (`HOLDOUT_ONLY_SOURCES`), held to regression bars (`MOE_BARS`)."""
GPT_OSS_2604 = "MegatronBridge_PerfSummary_26.04.01_GPT-OSS"
"""The same table's GPT-OSS 120B rows (bf16, 64 GPUs; a 128-token sliding window in every other layer): predictions
in no fit, which the model misses by far (README, "Where the model is weak"), held to `GPT_OSS_BARS`."""
GPT_OSS_BARS = {
    # GPU kind: |error| at most, a regression bar (today's figure in the comment), not a target
    "H100": 0.22,  # +21.0% (pp 4, ep 8, micro-batch 1; +19.0% at the H100 eta of 0.640, +21.6% at 0.665)
    "B200": 0.42,  # +39.8% (ep 8, micro-batch 4; +38.9% at the GB200 constants before 2026-12-07's refit)
    "GB200": 0.77,  # +73.4% (ep 64, micro-batch 4, all-to-all overlap)
}
HYBRID_2604 = "MegatronBridge_PerfSummary_26.04.01_Hybrid"
"""Megatron-Bridge 26.04.01's Nemotron 3 Nano 30B-A3B rows (Mamba-2 / attention / MoE hybrid): predictions in no fit,
held to `HYBRID_BARS`."""
HYBRID_BARS = {
    # GPU kind: signed error bounds (lowest, highest), regression bars (today's figure in the comment), not targets
    "H100": (0.0, 0.09),  # +7.8% (+8.2% at the H100 eta of 0.665; FP8 on 16, the recipe's module recompute: moe,
    # layernorm, core_attn, moe_act; +6.6%
    # at the H100 eta of 0.640, before NeMo 24.07's rows ran flash-attn 2)
    "B200": (0.0, 0.22),  # +20.4% (+18.7% before the GB200 refit of 2026-12-07; MXFP8 on 8: predicted fast, like
    # the other Blackwell MoE rows)
    "GB200": (0.0, 0.28),  # +26.6% (+24.6% before that refit; MXFP8 on 8)
}
MOE_2606 = "MegatronBridge_PerfSummary_26.06_MoE"
"""Megatron-Bridge 26.06's GB200 MoE rows (Qwen3 30B-A3B / 235B-A22B, DeepSeek-V3, MXFP8) with the release's perf
configs, which replay the whole iteration as one CUDA graph, run the experts as one grouped kernel and overlap the
all-to-all: predictions in no fit, held to `MOE_2606_BARS`."""
MOE_2606_BARS = (0.05, 0.09)
"""(mean, max) |error| at most over `MOE_2606`, a regression bar, not a target; today 4.4% / 8.4% (Qwen3 30B-A3B on
8 GPUs +8.4%, 235B-A22B -2.2%, DeepSeek-V3 -2.6%). The same layouts ran 17-56% slower in 26.04.01 with per-module
graphs and per-expert GEMMs (the 26.04.01 rows), and the model moves with them."""
GPT_OSS_2606 = "MegatronBridge_PerfSummary_26.06_GPT-OSS"
"""The same table's GPT-OSS 120B row (MXFP8 on 64 GB200, whole-iteration graph, grouped experts): a prediction in
no fit, held to `GPT_OSS_2606_BAR`."""
GPT_OSS_2606_BAR = 0.40
"""|error| at most, a regression bar (today +37.5%): GPT-OSS stays predicted far too fast with its recipe's graphed,
grouped, overlapped path, where the other three 26.06 MoE rows are within 8.4%; so its gap is not the eager
all-to-all path alone (README, "Where the model is weak")."""
NVFP4_GROUPS = tuple(
    f"MegatronBridge_PerfSummary_{release}_NVFP4" for release in ("26.02", "26.02.01", "26.04.01", "26.06")
)
"""Megatron-Bridge's GB200 NVFP4 rows (Llama 3 70B on 64, Llama 3.1 405B on 256; 26.02, 26.02.01, 26.04.01, 26.06):
predictions in no fit, held to `NVFP4_BARS`."""
NVFP4_BARS = (0.11, 0.23)
"""(mean, max) |error| at most over the NVFP4 rows, a regression bar, not a target; today 9.5% / 21.1% (70B +21.1%,
+18.4%, +11.0%, predicted fast; 405B +3.8%, +2.7%, -5.4%, -3.9%); 8.9% / 17.5% while sequence parallelism's
gathers moved 16-bit data: one NVFP4 kernel rate for every GEMM shape, where TE's profile shows the gain over
MXFP8 growing with the GEMM (1.05x-1.66x)."""
CARD_2026 = "MegatronBridge_Qwen3_30B_Card_2026"
"""Megatron-Bridge's Qwen3 30B-A3B bf16 runs on 16 H100 (model and workflow cards), with and without the all-to-all
overlap: predictions in no fit, held to `CARD_BARS`."""
NEMO_2504 = "NeMo_PerfSummary_25.04"
"""NeMo 25.04's GB200 table (FP8 current scaling; GPT-3 175B, Llama 3 8B / 70B, Llama 3.1 405B, Nemotron-4 15B /
340B with that release's NeMo 2 recipes): predictions in no fit, held to `NEMO_2504_BARS`."""
NEMO_2504_BARS = (0.07, 0.20)
"""(mean, max) |error| at most over `NEMO_2504`, a regression bar, not a target; today 6.0% / 18.6% (Llama 3.1 405B at
tp 4 pp 8 cp 2 vp 8, +18.6%; the other five -1.9% to +8.6%)."""
NEMO_2504_MOE = "NeMo_PerfSummary_25.04_MoE"
"""The same table's Mixtral 8x7B row (ep 8, token drop at capacity 1, CUDA graphs): a prediction in no fit, held to
`NEMO_2504_MOE_BAR`."""
NEMO_2504_MOE_BAR = 0.15
"""Signed error at most (and above 0: predicted fast, like the other MoE rows); today +13.1%."""
LONG_SEQUENCE = "NeMo_LongSequence_24.03.01"
"""NeMo's long-sequence table (Llama 2 7B FP8 on H100, 4K-1M tokens on 4-1,024 GPUs, context parallelism up to 32):
predictions in no fit, held to `LONG_SEQUENCE_BARS`."""
LONG_SEQUENCE_BARS = (0.03, 0.06)
"""(mean, max) |error| at most over `LONG_SEQUENCE`, a regression bar, not a target; today 1.8% / 4.1% (512K tokens,
-4.1%; 4.7% while FP8 sequence-parallel gathers moved two bytes), with attention at flash-attn 2's rate as the launcher
ran it (`NVTE_FUSED_ATTN: 0`); priced at cuDNN's rate
the same rows were +7% (4K) to +51% (1M) fast (`test_long_sequence_rows_need_the_launchers_attention_kernel`)."""
MOSAICML = "MosaicML_llmfoundry_MPT"
"""PyTorch FSDP rows (A100 and H100), predictions that enter no fit: their bars are in test_mosaicml.py."""
FMS = "IBM_fms_fsdp_2024"
"""IBM's fms-fsdp table (eager PyTorch FSDP FULL_SHARD, LLaMA 13B / 34B / 70B on 128 A100 and 96 H100, each on its
cluster's stated network): predictions in no fit, held to `FMS_A100_BAR` and `FMS_H100_BARS`."""
FMS_A100_BAR = 0.10
"""|error| at most on the A100 rows, a regression bar, not a target; today 13B +2.8% (half its layers recomputed),
34B -3.1%, 70B -8.5% (+14.8%, +4.2%, -2.7% while the eager model code was priced at fused kernels' bytes)."""
FMS_H100_BARS = (0.03, 0.20)
"""(min, max) signed error of the H100 rows: predicted fast, as MosaicML's H100 rows are; today 13B +16.5%, 34B +8.9%,
70B +6.9% (+37.4%, +21.8%, +17.7% at fused kernels' bytes). A regression bar that records the gap, not a target."""
H100_FIT_ROW_TOLERANCE = 0.26
"""Today (eta 0.6587): max 23.8% (32B, tp8 pp1: too slow, its data-parallel reduce-scatter/all-gather exposed at four
micro-batches per step; 26.9% before FP8 GEMMs ran at the measured 1.75x of bf16, `gpu.fp8_gemm_speedup`);
1.7B (tp1 pp1) +21.4%, too fast (+14.6% at 2x). The pp = 1 rows carry the error, in both fitted sources
(README-only constants: 23.4% / +22.3%)."""
H100_FIT_LOO_ROW_TOLERANCE = 0.27
"""Today: max 24.3% leave-one-out (1.7B; 25.2% before NeMo 24.07 ran flash-attn 2, 27.4% at the datasheet's 2x FP8
rate)."""
H100_FIT_MEAN_TOLERANCE = 0.11
"""Today: README mean 9.4% in sample, 6.6% leave-one-out over all 21 fit rows (10.3% / 9.1% before NeMo 24.07 ran
flash-attn 2; 12.4% / 11.2% with FP8 GEMMs at the
datasheet's 2x of bf16: one eta then traded the README's bf16 rows, too slow, against NeMo's FP8 rows, too fast;
fitted apart they took eta 0.667 and 0.550). 11.7% before interleaved pipeline sends overlapped compute
(`pipeline.exposed_sends_s`)."""
NEMO_2407_ROW_TOLERANCE = 0.15
"""Today: max 10.1% (GPT-3 20B at tp 2, too fast), then GPT-3 175B on 512 GPUs -6.8% (too slow, without
userbuffers; -9.8% while FP8 sequence-parallel gathers moved two bytes, 12.3% before NeMo 24.07 ran flash-attn 2)
and Nemotron-4 340B -5.0% (-9.3%). At the datasheet's
2x FP8 rate the pp = 1 rows were up to 15.9% too fast and the pipelined ones within 11% (-8.1% / -6.7% for the
two slow ones)."""
NEMO_2407_MEAN_TOLERANCE = 0.09
"""Today: mean 3.9% (4.6% while FP8 sequence-parallel gathers moved two bytes, 7.5% before flash-attn 2; 9.4% at the
datasheet's 2x FP8 rate; 10.0% while interleaved sends blocked; 13.8% predicted
from README-only constants, before it joined the fit)."""
NEMOTRON_TOLERANCE = 0.09
"""Today: +7.8% (eta 0.6587; +8.6% at 0.665, before FP8 sequence-parallel gathers moved one byte; +5.4% before NeMo
24.07's rows ran flash-attn 2 as the launcher set it and the refit raised eta 0.640 -> 0.665), bf16 (+0.2% while FP8
GEMMs ran at the datasheet's 2x of bf16 and the fit's single eta sat lower,
0.6008 against 0.6404 then; -1.4% while interleaved sends blocked, -3.4% before Transformer Engine's dgrad
collectives overlapped the wgrad GEMMs) with the schedule of NVIDIA's training config for this model and batch
(NeMo-Framework-Launcher 24.07 nemotron_340b.yaml: pp 12 with 8 virtual stages, selective recompute, bf16 gradient
reduction); -14.9% while the row assumed no interleaving and no recompute."""
H100_FP8_TOLERANCE = 0.10
"""Today: -6.9% / +0.2% (70B / 405B; -3.8% / +4.9% at the datasheet's 2x FP8 rate, -7.0% / +3.0% while
interleaved sends blocked; FP8 priced as Transformer Engine runs it:
attention and output layer in bf16, casts; FP8 weights gathered at one byte, `fp8_param_gather` as the recipe sets
it); -1.5% / +9.6% on README-only constants."""
H100_FP8_2511_TOLERANCE = 0.14
"""Today: -1.7% (70B, batch 128), -6.6% (8B, Megatron-FSDP, the first 5 of 32 layers recomputed) and +13.2% (405B on
1,024 GPUs, batch 512; -4.3% / -9.1% / +10.1% at eta 0.640, before NeMo 24.07's rows ran flash-attn 2 and the
refit; -1.1% / -6.1% / +15.1% at the datasheet's 2x FP8 rate, +13.1% while interleaved sends blocked, +20.1% on
README-only constants): at a third of
26.04.01's batch the 405B row has 11% less throughput, the model 3%; the container differs too (26.02 -> 26.04.01
alone: +5.5%)."""
GB200_FIT_ROW_TOLERANCE = 0.08
"""Today: +3.1% (70B MXFP8), +5.1% (70B FP8, Megatron-FSDP, 40 layers offloaded; +5.8% before it joined the fit),
-6.0% (405B FP8), -1.7% (405B MXFP8), fitted on these four (eta 0.5043, t0 17.1 us)."""
GB200_PREDICTION_TOLERANCE = 0.11
"""Today: +3.1% / +6.0% (8B FP8 / MXFP8, NeMo 25.11, one tray pair), +3.0% (70B FP8, Megatron-FSDP, 40 layers
offloaded): MXFP8 ran 5.5% slower than FP8 there, the model 2.7% (MXFP8 GEMMs at `profiles.MXFP8_GEMM_RATE`)."""
B200_TOLERANCE = 0.06
"""Today: -2.8 / -2.0% (8B FP8 / MXFP8), +5.2 / +4.9% (405B on 128 GPUs, tp 4 with FP8 sequence-parallel gathers at
one byte: +4.9 / +4.6% at two; pp 8 vp 8 over the network: -1.2 / -1.1% while interleaved sends blocked): predictions on
GB200's constants
(B200's own peaks), no B200 row in any fit."""
LOSO_BARS = {
    # (GPU kind, held-out source): (mean |error|, max |error|) at most; today's values in the comment.
    ("A100", "Narayanan2021_Table1"): (0.04, 0.10),  # 3.7% / 9.0%
    ("A100", "Narayanan2021_Table2"): (0.05, 0.14),  # 4.2% / 13.0%
    ("A100", "Korthikanti2022"): (0.06, 0.09),  # 4.7% / 8.1% (6.8% / 9.5% while its dgrad collectives were paid)
    # H100 today (eta 0.6587, FP8 sequence-parallel gathers at one byte), then before NeMo 24.07's rows ran flash-attn 2
    # as its launcher set it (eta 0.640):
    ("H100", README_H100): (0.11, 0.26),  # 10.0% / 24.4% (11.0% / 25.2%): fitted on the 21 other rows, all FP8
    ("H100", NEMO_2407): (0.06, 0.12),  # 3.9% / 9.7% (8.4% / 14.2%): fitted on the 18 other rows, 9 of them bf16
    ("H100", BRIDGE): (0.05, 0.08),  # 3.9% / 4.8% (3.5% / 7.0%)
    ("H100", NEMOTRON): (0.09, 0.09),  # 7.5% (5.8%)
    ("H100", BRIDGE_2511): (0.09, 0.14),  # 7.5% / 13.3% (7.8% / 10.1%: the 405B row)
    ("H100", LONG_SEQUENCE): (0.03, 0.06),  # 1.8% / 4.1% (33% / 51% at cuDNN's attention rate)
    ("GB200", BRIDGE): (0.07, 0.14),  # 4.2% / 9.9%: fitted on 25.11's two 8B rows and its 70B row
    ("GB200", BRIDGE_2511): (0.07, 0.11),  # 4.0% / 6.0%
}
MOE_BARS = {
    # GPU kind: (mean |error|, max |error|) at most over the kind's MoE rows; regression bars, not targets (today's
    # figures in the comment, then the figures before TE's per-expert GEMMs were priced one after another,
    # `costmodel.host.expert_gemm_concurrency`)
    "H100": (0.29, 0.39),  # 26.9% / 37.2% (36.6% / 56.6%): Qwen3 30B-A3B FP8 without CUDA graphs +37.2% (+56.6%),
    # 235B-A22B +16.6% (a2a overlap, 4 local experts; +16.5%); at the H100 eta of 0.640: 26.1% / 36.2%
    "GB200": (0.06, 0.08),  # 1.1% / 2.2% (5.2% / 8.1%): Qwen3 235B-A22B +2.2% (+8.1%), DeepSeek-V3 -0.1% (-2.4%),
    # both HybridEP inside the NVL72 domain
    "B200": (0.13, 0.16),  # 11.0% / 15.8% (23.8% / 38.5%): DeepSeek-V3 -7.0% (-7.8%; DeepEP across 4 nodes with a2a
    # overlap), Qwen3 235B-A22B +15.8% (+38.5%; 16 local experts, alltoall), 30B-A3B +10.2% (+25.1%; HybridEP); 9.4%
    # / 13.2% at the GB200 constants before 2026-12-07's refit
}
CARD_BARS = (0.06, 0.07)
"""(mean, max) |error| at most over `CARD_2026`; today 4.1% / 5.1% (2.9% / 4.0% at the H100 eta of 0.640, 4.5% / 5.5% at
0.665; 21.0% / 21.7%
while four local experts shared the
SMs). The totals are right partly by cancellation: the overlap's measured gain (3.7 s, 36.55% of the dispatch and
combine hidden, its profile says) puts that communication near 10 s where the model prices 4.7 s, so the model's
compute (19 s) is likely a little slow."""
MEMORY_OVERSHOOT = 1.10
"""Every published layout ran, so it fit; the model may overstate its peak by up to 10% (today: 38.5/40 GiB,
MPT-1B at 2048 tokens on 32 A100 40 GB; Llama 3 70B FP8 on GB200 180.2/186 with 40 of its 80 layers' activations
offloaded, 332.4 without; Llama 3.1 405B FP8 on GB200 176.6/186 with its FP8 weights stored as FP8,
`fp8_param_gather`, 182.5 before)."""


@cache
def report() -> Report:
    return build_report(load_profiles())


def _rows(group: str, variant: str | None = None, gpu_kind: str | None = None) -> list[RunRow]:
    return [
        r
        for r in report().runs
        if r.group == group and (variant is None or r.variant == variant) and (gpu_kind in (None, r.gpu_kind))
    ]


def test_every_published_row_is_reported() -> None:
    assert len(_rows("Narayanan2021_Table1")) == 10
    assert len(_rows("Narayanan2021_Table2", "ptd-p")) == 6
    assert len(_rows("Narayanan2021_Table2", "zero-3")) == 6
    assert len(report().gains) == 4
    assert len(_rows(README_H100)) == 9
    assert len(_rows(NEMO_2407)) == 12
    assert len(_rows(BRIDGE, gpu_kind="H100")) == 2
    assert len(_rows(NEMOTRON)) == 1
    assert len(_rows(BRIDGE, gpu_kind="GB200")) == 4 and len(_rows(BRIDGE_2511, gpu_kind="GB200")) == 3
    assert len(_rows(BRIDGE_2511, gpu_kind="H100")) == 3 and len(_rows(BRIDGE_2511, gpu_kind="B200")) == 4
    assert len(_rows(MOSAICML, gpu_kind="A100")) == 61 + 78 and len(_rows(MOSAICML, gpu_kind="H100")) == 52
    assert [len(_rows(MOE_2604, gpu_kind=k)) for k in ("H100", "GB200", "B200")] == [2, 2, 3]
    assert [len(_rows(GPT_OSS_2604, gpu_kind=k)) for k in ("H100", "GB200", "B200")] == [1, 1, 1]
    assert [len(_rows(HYBRID_2604, gpu_kind=k)) for k in ("H100", "GB200", "B200")] == [1, 1, 1]
    assert len(_rows(MOE_2606)) == len(_rows(MOE_2606, gpu_kind="GB200")) == 3
    assert len(_rows(GPT_OSS_2606)) == len(_rows(GPT_OSS_2606, gpu_kind="GB200")) == 1
    assert [k.gpu_kind for k in report().kinds] == ["A100", "H100", "GB200", "B200"]


@pytest.mark.parametrize("row", _rows("Narayanan2021_Table1"), ids=lambda r: r.id)
def test_table1_row_within_7_percent(row: RunRow) -> None:
    assert row.in_fit
    assert abs(row.error) <= TABLE1_ROW_TOLERANCE


def test_table1_mean_error_at_most_4_percent() -> None:
    assert mean(abs(r.error) for r in _rows("Narayanan2021_Table1")) <= TABLE1_MEAN_TOLERANCE


def test_table1_leave_one_out_mean_error_at_most_4_percent() -> None:
    loo = [r.loo_error for r in _rows("Narayanan2021_Table1")]
    assert all(e is not None for e in loo)
    a100 = report().kind("A100")
    assert a100.loo_mean_abs_error is not None and a100.loo_mean_abs_error <= TABLE1_MEAN_TOLERANCE


@pytest.mark.parametrize("row", _rows("Narayanan2021_Table2", "ptd-p"), ids=lambda r: r.id)
def test_table2_ptdp_within_10_percent(row: RunRow) -> None:
    assert not row.in_fit
    assert abs(row.error) <= PTDP_TOLERANCE


@pytest.mark.parametrize("row", _rows("Narayanan2021_Table2", "zero-3"), ids=lambda r: r.id)
def test_table2_zero3_within_20_percent(row: RunRow) -> None:
    assert abs(row.error) <= ZERO3_TOLERANCE


def test_zero3_collapse_at_1536_gpus() -> None:
    zero3 = next(r for r in report().runs if r.id == "narayanan2021_t2_ZeRO-3_174.6B_1536")
    ptdp = next(r for r in report().runs if r.id == "narayanan2021_t2_PTD-P_174.6B_1536")
    assert ptdp.predicted_tflops >= ZERO3_COLLAPSE * zero3.predicted_tflops


GAIN_KNOWN_MISS: dict[str, str] = {}
"""Rows whose gain misses the bar today, each with the figure; strict, so a fix shows up as XPASS. None today:
22B's was +34.5% predicted against +29.1% published until the 2022 runtime overlapped the column-parallel dgrad
collectives (`RUNTIME_2022`); it is +32.6% now (+3.5 points)."""


@pytest.mark.parametrize(
    "gain",
    [
        pytest.param(g, marks=pytest.mark.xfail(strict=True, reason=GAIN_KNOWN_MISS[g.id]))
        if g.id in GAIN_KNOWN_MISS
        else g
        for g in report().gains
    ],
    ids=lambda g: g.id,
)
def test_korthikanti_gain_within_5_points(gain) -> None:
    assert 28 <= gain.published_pct <= 33
    assert abs(gain.predicted_pct - gain.published_pct) <= GAIN_POINTS


@pytest.mark.parametrize("row", _rows(README_H100), ids=lambda r: r.id)
def test_h100_readme_row_within_26_percent(row: RunRow) -> None:
    assert row.in_fit
    assert abs(row.error) <= H100_FIT_ROW_TOLERANCE
    assert row.loo_error is not None and abs(row.loo_error) <= H100_FIT_LOO_ROW_TOLERANCE


def test_h100_readme_mean_error_at_most_11_percent() -> None:
    h100 = report().kind("H100")
    assert mean(abs(r.error) for r in _rows(README_H100)) <= H100_FIT_MEAN_TOLERANCE
    assert h100.loo_mean_abs_error is not None and h100.loo_mean_abs_error <= H100_FIT_MEAN_TOLERANCE


@pytest.mark.parametrize("row", _rows(NEMO_2407), ids=lambda r: r.id)
def test_h100_nemo_24_07_row_within_15_percent(row: RunRow) -> None:
    assert row.in_fit and row.variant == "fp8"
    assert abs(row.error) <= NEMO_2407_ROW_TOLERANCE
    assert row.loo_error is not None and abs(row.loo_error) <= NEMO_2407_ROW_TOLERANCE


def test_h100_nemo_24_07_mean_error_at_most_9_percent() -> None:
    assert mean(abs(r.error) for r in _rows(NEMO_2407)) <= NEMO_2407_MEAN_TOLERANCE


def test_nemotron_340b_predicted_within_6_percent() -> None:
    (row,) = _rows(NEMOTRON)
    assert not row.in_fit
    assert abs(row.error) <= NEMOTRON_TOLERANCE


@pytest.mark.parametrize("row", _rows(BRIDGE, gpu_kind="H100"), ids=lambda r: r.id)
def test_h100_fp8_rows_within_10_percent(row: RunRow) -> None:
    assert not row.in_fit and row.variant == "fp8"
    assert abs(row.error) <= H100_FP8_TOLERANCE


@pytest.mark.parametrize("row", _rows(BRIDGE_2511, gpu_kind="H100"), ids=lambda r: r.id)
def test_h100_fp8_nemo_25_11_rows_within_12_percent(row: RunRow) -> None:
    assert not row.in_fit and row.variant == "fp8"
    assert abs(row.error) <= H100_FP8_2511_TOLERANCE


@pytest.mark.parametrize("row", _rows(BRIDGE, gpu_kind="GB200"), ids=lambda r: r.id)
def test_gb200_fit_rows_within_8_percent(row: RunRow) -> None:
    gb200 = report().kind("GB200")
    assert row.in_fit and gb200.calibration.transferred_from is None
    assert abs(row.error) <= GB200_FIT_ROW_TOLERANCE


@pytest.mark.parametrize("row", _rows(BRIDGE_2511, gpu_kind="GB200"), ids=lambda r: r.id)
def test_gb200_predictions_within_11_percent(row: RunRow) -> None:
    assert not row.in_fit
    assert abs(row.error) <= GB200_PREDICTION_TOLERANCE


@pytest.mark.parametrize("row", _rows(BRIDGE_2511, gpu_kind="B200"), ids=lambda r: r.id)
def test_b200_rows_on_gb200_constants_within_6_percent(row: RunRow) -> None:
    b200, gb200 = report().kind("B200"), report().kind("GB200")
    assert b200.calibration.transferred_from is not None and b200.calibration.transferred_from.startswith("GB200")
    assert b200.calibration.gemm_peak_efficiency == gb200.calibration.gemm_peak_efficiency
    assert not row.in_fit and {h.source for h in b200.holdouts} == {MOE_2604, GPT_OSS_2604, HYBRID_2604}  # dense: never
    assert abs(row.error) <= B200_TOLERANCE


@pytest.mark.parametrize("kind", list(MOE_BARS))
def test_moe_rows_within_their_regression_bars(kind: str) -> None:
    rows = _rows(MOE_2604, gpu_kind=kind)
    mean_bar, max_bar = MOE_BARS[kind]
    assert rows and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= mean_bar
    assert max(abs(r.error) for r in rows) <= max_bar


@pytest.mark.parametrize("kind", list(GPT_OSS_BARS))
def test_gpt_oss_rows_within_their_regression_bars(kind: str) -> None:
    """Predicted too fast on every GPU (the sign is part of the finding)."""
    (row,) = _rows(GPT_OSS_2604, gpu_kind=kind)
    assert not row.in_fit and 0 < row.error <= GPT_OSS_BARS[kind]


def test_moe_26_06_rows_within_their_regression_bars() -> None:
    """Whole-iteration graphs and grouped experts (`CudaGraphScope.FULL_ITERATION`, `ExpertGemm.GROUPED`)."""
    rows = _rows(MOE_2606)
    mean_bar, max_bar = MOE_2606_BARS
    assert rows and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= mean_bar
    assert max(abs(r.error) for r in rows) <= max_bar


def test_moe_26_06_rows_are_faster_than_26_04_01_as_published_and_predicted() -> None:
    """The 26.06 recipes of the same GB200 layouts (graphed, grouped, overlapped) published more throughput than
    26.04.01's (per-module graphs, per-expert GEMMs); the model predicts the same direction for each pair."""

    def workload(row: RunRow) -> str:  # the id after the system: qwen3_235b_a22b_mxfp8, deepseek_v3_mxfp8, ...
        return row.id.split("_gb200_")[1]

    old = {workload(r): r for r in _rows(MOE_2604, gpu_kind="GB200")}
    pairs = [(old[workload(r)], r) for r in _rows(MOE_2606) if workload(r) in old]
    assert len(pairs) == 2  # Qwen3 235B-A22B, DeepSeek-V3 (26.04.01 has no GB200 Qwen3 30B-A3B row)
    for before, after in pairs:
        assert after.published_step_s < before.published_step_s
        assert after.predicted_step_s < before.predicted_step_s


def test_nvfp4_rows_within_their_regression_bars() -> None:
    rows = [r for group in NVFP4_GROUPS for r in _rows(group)]
    mean_bar, max_bar = NVFP4_BARS
    assert len(rows) == 7 and {r.gpu_kind for r in rows} == {"GB200"} and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= mean_bar
    assert max(abs(r.error) for r in rows) <= max_bar


def test_nvfp4_rows_are_faster_than_their_mxfp8_twins_as_published_and_predicted() -> None:
    """26.04.01's GB200 Llama 3 70B and 3.1 405B ran the same layout in MXFP8 and NVFP4: NVFP4 published 1.31x and
    1.48x the throughput; the model predicts NVFP4 faster for both, by less than its 2x peak ratio."""
    twins = {r.id: r for r in _rows("MegatronBridge_PerfSummary_26.04.01", gpu_kind="GB200")}
    for nvfp4 in _rows("MegatronBridge_PerfSummary_26.04.01_NVFP4"):
        mxfp8 = twins[nvfp4.id.replace("_nvfp4", "_mxfp8")]
        assert nvfp4.published_step_s < mxfp8.published_step_s
        assert 1 < mxfp8.predicted_step_s / nvfp4.predicted_step_s < 2


def test_nemo_25_04_gb200_rows_within_their_regression_bars() -> None:
    rows = _rows(NEMO_2504)
    mean_bar, max_bar = NEMO_2504_BARS
    assert len(rows) == 6 and {r.gpu_kind for r in rows} == {"GB200"} and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= mean_bar
    assert max(abs(r.error) for r in rows) <= max_bar
    (moe,) = _rows(NEMO_2504_MOE)
    assert moe.gpu_kind == "GB200" and not moe.in_fit and 0 < moe.error <= NEMO_2504_MOE_BAR


def test_fms_fsdp_rows_within_their_regression_bars() -> None:
    rows = _rows(FMS)
    assert len(rows) == 6 and not any(r.in_fit for r in rows)
    a100 = [r for r in rows if r.gpu_kind == "A100"]
    h100 = [r for r in rows if r.gpu_kind == "H100"]
    assert len(a100) == len(h100) == 3
    assert max(abs(r.error) for r in a100) <= FMS_A100_BAR
    low, high = FMS_H100_BARS
    assert all(low < r.error <= high for r in h100)


def test_fms_fsdp_rows_need_their_eager_model_code() -> None:
    """What moved these rows is the model code's eager element-wise ops (`costmodel.elementwise.EAGER`: fp32 norms and
    RoPE, SwiGLU in two kernels, grouped K and V copied out). Priced at fused kernels' bytes instead, every row is
    predicted faster, H100 the more so at each size (its GEMMs gain 3.2x over A100, its HBM 1.6x): over the six rows
    the mean |error| is more than twice what the eager code gives."""
    profiles = load_profiles()
    eager, fused = {}, {}
    for run in (r for r in published_runs() if r.group == FMS):
        assert run.training.runtime.eager_elementwise
        profile = profiles[VALIDATION_PROFILES[run.gpu_kind]]
        runtime = run.training.runtime.model_copy(update={"eager_elementwise": False})
        priced = replace(run, training=run.training.model_copy(update={"runtime": runtime}))
        eager[run.id] = measured_step_s(run) / predict(run, profile)[1] - 1
        fused[run.id] = measured_step_s(run) / predict(priced, profile)[1] - 1
    assert len(eager) == 6 and all(fused[k] > eager[k] for k in eager)
    gain = {k: fused[k] - eager[k] for k in eager}
    for size in ("13b", "34b", "70b"):
        assert gain[f"ibm_fms_fsdp_h100_llama_{size}"] > gain[f"ibm_fms_fsdp_a100_llama_{size}"]
    assert mean(abs(e) for e in fused.values()) > 2 * mean(abs(e) for e in eager.values())


def test_fms_fsdp_rows_run_on_their_clusters_networks() -> None:
    """The README gives one network figure per cluster (400 Gbit/s per A100 node, 800 per H100 node): each row is
    priced on it, not on its kind's DGX profile (8 x 200 / 8 x 400 Gbit/s per node). Per GPU that is 400e9 / 8 bits
    / 8 GPUs = 6.25 GB/s on A100 and 12.5 GB/s on H100, times the profile's network efficiency; on the slower
    network FSDP's gathers and reduce-scatters hide less, so the step is longer than on the DGX profile."""
    profiles = load_profiles()
    for run in (r for r in published_runs() if r.group == FMS):
        profile = profiles[VALIDATION_PROFILES[run.gpu_kind]]
        per_gpu = {"A100": 6.25e9, "H100": 12.5e9}[run.gpu_kind] * profile.efficiency.network
        assert run.hardware(profile).nic_bytes_per_s_per_gpu == pytest.approx(per_gpu, rel=1e-12)
        assert predict(run, profile)[1] > predict(run, profile, profile.training_hardware(run.training))[1]


def test_long_sequence_rows_within_their_regression_bars() -> None:
    rows = _rows(LONG_SEQUENCE)
    mean_bar, max_bar = LONG_SEQUENCE_BARS
    assert len(rows) == 9 and {r.gpu_kind for r in rows} == {"H100"} and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= mean_bar
    assert max(abs(r.error) for r in rows) <= max_bar


def test_long_sequence_rows_need_the_launchers_attention_kernel() -> None:
    """What carries these rows is the attention kernel NeMo's launcher ran (flash-attn 2: its config turned cuDNN's
    fused attention off). Priced with cuDNN's faster rate instead, the model is fast at every length, and the more
    so the more of the step the attention core takes: 32K-1M tokens at least 30% fast, 4K-16K less."""
    profile = load_profiles()[VALIDATION_PROFILES["H100"]]
    runs = [r for r in published_runs() if r.group == LONG_SEQUENCE]
    assert len(runs) == 9 and all(r.training.runtime.attention_kernel is AttentionKernel.FLASH2 for r in runs)
    cudnn = {}
    for run in runs:
        runtime = run.training.runtime.model_copy(update={"attention_kernel": AttentionKernel.CUDNN})
        priced = replace(run, training=run.training.model_copy(update={"runtime": runtime}))
        cudnn[run.model.seq_length] = measured_step_s(run) / predict(priced, profile)[1] - 1
    short = [e for seq, e in cudnn.items() if seq <= 16384]
    long = [e for seq, e in cudnn.items() if seq > 16384]
    assert len(short) == 3 and all(e > 0 for e in short)
    assert min(long) > 0.30 and max(short) < min(long)


def test_gpt_oss_26_06_row_within_its_regression_bar() -> None:
    """Predicted too fast on the graphed, grouped path too (the sign is part of the finding)."""
    (row,) = _rows(GPT_OSS_2606)
    assert not row.in_fit and 0 < row.error <= GPT_OSS_2606_BAR


@pytest.mark.parametrize("kind", list(HYBRID_BARS))
def test_hybrid_rows_within_their_regression_bars(kind: str) -> None:
    """Nemotron 3 Nano: its Mamba layers priced by `costmodel.mamba`, nothing fitted to them."""
    (row,) = _rows(HYBRID_2604, gpu_kind=kind)
    low, high = HYBRID_BARS[kind]
    assert not row.in_fit and low <= row.error <= high


def test_card_rows_within_their_regression_bars() -> None:
    rows = _rows(CARD_2026, gpu_kind="H100")
    assert len(rows) == 2 and not any(r.in_fit for r in rows)
    assert mean(abs(r.error) for r in rows) <= CARD_BARS[0]
    assert max(abs(r.error) for r in rows) <= CARD_BARS[1]


def test_card_overlap_gain_has_the_published_sign_and_size() -> None:
    """The all-to-all overlap's gain on the same layout: published 24.71 s -> 20.15 s (x1.227, the tuned recipe); the
    prediction must show a gain, within 5 points of that one."""
    base, overlap = sorted(_rows(CARD_2026, gpu_kind="H100"), key=lambda r: r.id, reverse=True)
    assert "no_a2a_overlap" in base.id and "no_a2a_overlap" not in overlap.id
    published = base.published_step_s / overlap.published_step_s
    predicted = base.predicted_step_s / overlap.predicted_step_s
    assert predicted > 1.0
    assert abs(predicted - published) * 100 <= GAIN_POINTS


@pytest.mark.parametrize(("kind", "source"), list(LOSO_BARS), ids=lambda x: x)
def test_leave_one_source_out(kind: str, source: str) -> None:
    holdout = next(h for h in report().kind(kind).holdouts if h.source == source)
    mean_bar, max_bar = LOSO_BARS[(kind, source)]
    assert source not in holdout.fitted_on_sources and holdout.fitted_on_sources
    assert holdout.mean_abs_error <= mean_bar
    assert holdout.max_abs_error <= max_bar
    held = [r.loso_error for r in report().runs if r.gpu_kind == kind and r.group == source]
    assert len(held) == holdout.rows and all(e is not None for e in held)
    assert holdout.mean_abs_error == pytest.approx(mean(abs(e) for e in held if e is not None))


def test_every_source_of_a_kind_with_two_sources_is_held_out() -> None:
    """Each source is held out where the kind has another source that can be fitted (not `HOLDOUT_ONLY_SOURCES`):
    B200's NeMo 25.11 rows are not, its only other source being the MoE rows."""
    for kind in report().kinds:
        sources = {r.group for r in report().runs if r.gpu_kind == kind.gpu_kind}
        fittable = sources - HOLDOUT_ONLY_SOURCES
        held = {s for s in sources if fittable - {s}} if len(sources) > 1 else set()
        assert {h.source for h in kind.holdouts} == held
    assert BRIDGE_2511 not in {h.source for h in report().kind("B200").holdouts}


def test_per_source_summary_matches_the_rows() -> None:
    for g in report().groups:
        rows = _rows(g.group, g.variant, g.gpu_kind)
        assert g.rows == len(rows)
        assert g.max_abs_error == max(abs(r.error) for r in rows)
        assert min(abs(r.error) for r in rows) <= g.p90_abs_error <= g.max_abs_error
        assert g.in_fit == (g.group in FIT_SETS.get(g.gpu_kind, ()))


def test_error_stats_by_hand() -> None:
    """|errors| 1%..10% and 100%: mean 14.09%; the 90th percentile at rank 1 + 0.9 x 10 = 10, the 10%; max 100%.
    Of ten values 1%..10%: rank 1 + 0.9 x 9 = 9.1, 9.1%. One value is all three."""
    stats = error_stats([-0.01 * i for i in range(1, 11)] + [1.0])
    assert (stats.mean, stats.p90, stats.max) == pytest.approx((1.55 / 11, 0.10, 1.0))
    assert error_stats([0.01 * i for i in range(1, 11)]).p90 == pytest.approx(0.091)
    assert error_stats([-0.2]) == ErrorStats(0.2, 0.2, 0.2)


def test_held_out_summary_counts_each_row_once_as_no_fit_saw_it() -> None:
    """Prediction rows at their error, fit rows at their leave-one-source-out error; per kind, then all kinds."""
    runs = report().runs
    kinds = {r.gpu_kind for r in runs}
    by_kind = {h.gpu_kind: h for h in report().held_out}
    assert set(by_kind) == kinds | {"all"}
    for kind in kinds:
        rows = [r for r in runs if r.gpu_kind == kind and (not r.in_fit or r.loso_error is not None)]
        errors = [r.loso_error if r.in_fit else r.error for r in rows]
        expected = error_stats([e for e in errors if e is not None])
        got = by_kind[kind]
        assert (got.rows, got.mean_abs_error, got.p90_abs_error, got.max_abs_error) == (
            len(rows),
            pytest.approx(expected.mean),
            pytest.approx(expected.p90),
            pytest.approx(expected.max),
        )
    assert by_kind["all"].rows == sum(by_kind[k].rows for k in kinds)
    # H100 2 + 2 cards, GB200 2 + 3 of 26.06 + NeMo 25.04's Mixtral, B200 3, GPT-OSS (GB200 twice) and Nemotron 3
    # Nano on each
    assert by_kind["all"].moe_rows == 20


def test_accuracy_bands_split_the_held_out_rows_by_kind_and_workload() -> None:
    """Every held-out row is in exactly one band, that of its GPU kind and workload (`accuracy.workload_of`, from
    the run's own model and runtime), with the held-out summary's error; the bands of a kind hold its rows."""
    runs = {r.id: r for r in published_runs()}
    bands = {(b.gpu_kind, b.workload): b for b in report().bands}
    assert len(bands) == len(report().bands)  # one band per kind and workload
    held = [(r, e) for r in report().runs if (e := held_out_error(r)) is not None]
    for (kind, workload), band in bands.items():
        errors = [
            e for r, e in held if r.gpu_kind == kind and workload_of(runs[r.id].model, runs[r.id].training) is workload
        ]
        stats = error_stats(errors)
        assert band.rows == len(errors) > 0
        assert (band.mean_error, band.mean_abs_error, band.p90_abs_error) == pytest.approx(
            (mean(errors), stats.mean, stats.p90), abs=5e-5
        )
        assert (band.min_error, band.max_error) == pytest.approx((min(errors), max(errors)), abs=5e-5)
    by_kind = {h.gpu_kind: h.rows for h in report().held_out}
    for kind in {k for k, _ in bands}:
        assert sum(b.rows for (k, _), b in bands.items() if k == kind) == by_kind[kind]
    # PyTorch FSDP's rows (MosaicML's, `gradient_layout` pytorch_fsdp) are a band of their own beside Megatron's.
    for kind in ("A100", "H100"):
        assert set(bands[(kind, Workload.DENSE_FSDP)].sources) == {MOSAICML, FMS}
        assert MOSAICML not in bands[(kind, Workload.DENSE)].sources
    # The split the README states: eager MoE runs (no CUDA graphs) are predicted too fast on every kind.
    eager = [b for (_, w), b in bands.items() if w is Workload.MOE_EAGER]
    assert {b.gpu_kind for b in eager} == {"H100", "B200", "GB200"} and all(b.min_error > 0.1 for b in eager)


def test_the_stored_accuracy_bands_are_this_commit_s() -> None:
    """`planner/data/accuracy_bands.json`, which answers quote, is what `planner validate --write-bands` writes now:
    a change to the cost model or the data that moves a band must rewrite the file."""
    assert load_bands() == tuple(report().bands), "run: planner validate --write-bands"


MEMORY_KNOWN_MISS: dict[str, str] = {}
"""Rows the memory model refuses although they ran, each with the figure; strict, so a fix shows as XPASS.
None today. (NeMo 24.07's Nemotron-4 340B on 128 H100s was 88.1 GiB of 80 with fp32 Adam moments at dp 2; with
its launcher config's bf16 optimizer states, `adam_moments` bf16, it is judged to fit. MosaicML's MPT-30B at
8,192 tokens on 8 A100 80 GB, 82.3 GiB while FSDP's gradients were priced as Megatron's 16-bit buffer plus an
fp32 copy, is 75.3 GiB with `gradient_layout` pytorch_fsdp.)"""


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=MEMORY_KNOWN_MISS[r.id]))
        if r.id in MEMORY_KNOWN_MISS
        else r
        for r in report().runs
    ],
    ids=lambda r: f"{r.id}-{r.variant}",
)
def test_published_layout_is_judged_to_fit(row: RunRow) -> None:
    bar = 1.0 if row.gpu_kind == "A100" else MEMORY_OVERSHOOT
    assert row.peak_memory_gib <= row.capacity_gib * bar


@pytest.mark.parametrize("check", report().figures, ids=lambda f: f.figure)
def test_figure_finding_holds(check) -> None:
    assert check.holds, check.detail


@pytest.mark.parametrize("kind", list(FIT_SETS))
def test_stored_constants_are_the_scripts_fit(kind: str) -> None:
    profile = load_profiles()[VALIDATION_PROFILES[kind]]
    stored = profile.calibration
    assert stored is not None and stored.transferred_from is None
    fitted = refit(profile)
    assert fitted.gemm_peak_efficiency == pytest.approx(stored.gemm_peak_efficiency, abs=2e-3)
    assert fitted.gemm_overhead_us == pytest.approx(stored.gemm_overhead_us, rel=0.02, abs=0.5)
    assert stored.fitted_on == [r.id for r in report().runs if r.gpu_kind == kind and r.in_fit]


def test_kinds_without_a_fit_set_carry_a_stated_transfer() -> None:
    from planner.calibration.write import gpu_kind

    for profile in load_profiles().values():
        kind = gpu_kind(profile)
        if kind in FIT_SETS:
            continue
        source = load_profiles()[VALIDATION_PROFILES[TRANSFERS[kind]]].calibration
        assert profile.calibration is not None and source is not None
        assert profile.calibration.fitted_on == []
        assert profile.calibration.transferred_from is not None
        assert profile.calibration.transferred_from.startswith(TRANSFERS[kind])
        assert profile.calibration.gemm_peak_efficiency == source.gemm_peak_efficiency


def test_validate_json_carries_the_report() -> None:
    result = CliRunner().invoke(planner.cli.app, ["validate", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert [k["gpu_kind"] for k in body["kinds"]] == ["A100", "H100", "GB200", "B200"]
    assert len(body["runs"]) == len(report().runs)
    first = body["runs"][0]
    assert {"source", "group", "error", "loo_error", "loso_error"} <= set(first)
    h100 = body["kinds"][1]
    assert {h["source"] for h in h100["holdouts"]} == {
        README_H100,
        NEMO_2407,
        BRIDGE,
        BRIDGE_2511,
        NEMOTRON,
        MOSAICML,
        MOE_2604,
        GPT_OSS_2604,
        HYBRID_2604,
        CARD_2026,
        LONG_SEQUENCE,
        FMS,
    }


BUS_BANDWIDTH_ROW_TOLERANCE = 0.25
BUS_BANDWIDTH_MEAN_TOLERANCE = 0.15


def test_every_bus_bandwidth_row_is_reported() -> None:
    rows = report().bus_bandwidth
    assert len(rows) == 6  # 8 x H100 all-reduce with NVLS: published 480 GB/s, predicted 475
    assert {r.collective for r in rows} == {"all_reduce", "reduce_scatter"}
    assert {r.nodes for r in rows} == {1, 2, 4}


@pytest.mark.parametrize("row", report().bus_bandwidth, ids=lambda r: r.id)
def test_bus_bandwidth_row_within_25_percent(row) -> None:
    assert abs(row.error) <= BUS_BANDWIDTH_ROW_TOLERANCE


def test_bus_bandwidth_mean_error_at_most_15_percent() -> None:
    assert mean(abs(r.error) for r in report().bus_bandwidth) <= BUS_BANDWIDTH_MEAN_TOLERANCE


@pytest.mark.parametrize("row", [r for r in report().bus_bandwidth if r.nodes > 1], ids=lambda r: r.id)
def test_multi_node_rings_need_the_rails(row) -> None:
    # One NIC share per ring (the pre-rails rule) misses the published figure by more than 5x.
    assert row.published_gb_per_s >= 5 * row.one_nic_gb_per_s
