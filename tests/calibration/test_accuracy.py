"""The accuracy bands an answer quotes: which workload a request is, the band's sentence, and the stored file."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.calibration import accuracy
from planner.calibration.accuracy import (
    LONG_SEQUENCE_TOKENS,
    AccuracyBand,
    Workload,
    band_for,
    load_bands,
    workload_of,
    write_bands,
)
from planner.presets import get_preset
from planner.specs import GradientLayout, RuntimeFeatures, TrainingSpec

EAGER = TrainingSpec(global_batch_size=64)
GRAPHED = TrainingSpec(global_batch_size=64, runtime=RuntimeFeatures(cuda_graphs=True))
FSDP = TrainingSpec(global_batch_size=64, gradient_layout=GradientLayout.PYTORCH_FSDP)


@pytest.mark.parametrize(
    ("preset", "training", "expected"),
    [
        ("llama3-8b", EAGER, Workload.DENSE),
        ("llama3-8b", GRAPHED, Workload.DENSE),  # graphs do not change a dense model's band
        ("llama3-8b", FSDP, Workload.DENSE_FSDP),
        ("mixtral-8x7b", FSDP, Workload.MOE_EAGER),  # experts decide first
        ("mixtral-8x7b", EAGER, Workload.MOE_EAGER),
        ("deepseek-v3", GRAPHED, Workload.MOE),
        ("nemotron-h-8b", EAGER, Workload.HYBRID),  # Mamba-2 mixers, no experts
        ("nemotron-3-nano-30b-a3b", GRAPHED, Workload.HYBRID),  # Mamba-2 mixers and experts: hybrid first
    ],
)
def test_workload_of_a_preset(preset: str, training: TrainingSpec, expected: Workload) -> None:
    assert workload_of(get_preset(preset).model, training) is expected


@pytest.mark.parametrize(
    ("seq_length", "training", "expected"),
    [
        (LONG_SEQUENCE_TOKENS, EAGER, Workload.DENSE),  # 8,192 tokens: still the short-context band
        (LONG_SEQUENCE_TOKENS + 1, EAGER, Workload.DENSE_LONG),
        (131_072, GRAPHED, Workload.DENSE_LONG),
        (131_072, FSDP, Workload.DENSE_FSDP),  # FSDP's band holds its long-sequence runs (MPT to 65,536)
    ],
)
def test_long_sequences_have_their_own_dense_band(seq_length: int, training: TrainingSpec, expected: Workload) -> None:
    model = get_preset("llama3-8b").model.model_copy(update={"seq_length": seq_length})
    assert workload_of(model, training) is expected


def _band(rows: int, low: float, high: float) -> AccuracyBand:
    return AccuracyBand(
        gpu_kind="H100",
        workload=Workload.MOE_EAGER,
        rows=rows,
        sources=("S1", "S2"),
        mean_error=0.2371,
        mean_abs_error=0.2371,
        p90_abs_error=0.3276,
        min_error=low,
        max_error=high,
    )


def test_a_band_says_what_was_checked_and_how_far_off_it_was() -> None:
    assert _band(3, 0.1593, 0.362).text == (
        "H100, mixture of experts without CUDA graphs: 3 published runs measured +16% to +36% against the predicted"
        " step time (mean +23.7%, mean |error| 23.7%)"
    )
    assert _band(10, 0.1593, 0.362).text.endswith("(mean +23.7%, mean |error| 23.7%, 90th percentile 32.8%)")
    assert _band(1, -0.05, -0.05).text == (
        "H100, mixture of experts without CUDA graphs: 1 published run measured -5% against the predicted step time"
    )


def test_bands_round_trip_through_their_file(tmp_path: Path) -> None:
    bands = [_band(3, 0.1593, 0.362), _band(1, -0.05, -0.05)]
    path = tmp_path / "bands.json"
    write_bands(bands, path)
    assert load_bands(path) == tuple(bands)


def test_a_kind_or_workload_without_published_runs_has_no_band(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "bands.json"
    write_bands([_band(3, 0.1593, 0.362)], path)
    monkeypatch.setattr(accuracy, "BANDS_FILE", path)
    load_bands.cache_clear()
    try:
        qwen = get_preset("qwen3-30b-a3b").model
        assert band_for("H100", qwen, EAGER) == _band(3, 0.1593, 0.362)
        assert band_for("H100", qwen, GRAPHED) is None  # no graphed MoE band in this file
        assert band_for("MI300X", qwen, EAGER) is None
    finally:
        load_bands.cache_clear()
