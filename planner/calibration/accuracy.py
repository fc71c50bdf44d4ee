"""How far the model was from published runs like a request: the accuracy band an answer carries.

A scheduler that reads a predicted step time also needs to know how much to trust it. `planner validate` measures
that per published run; this module groups the runs by what decides the model's accuracy today, the GPU kind and
the kind of work (`Workload`), and hands an estimate or a plan the band of its group: how many published runs of
that kind the model was checked on, and the spread of its errors there.

Each run's error is its held-out one, as `planner validate` reports it (`report.held_out_error`): a prediction row's
error, a fitted row's leave-one-source-out error, so no band is the fit's own residual. Errors are predicted over
published throughput, minus one: +0.2 means the published run took 20% longer per step than predicted.

The bands are a summary of the whole validation (about ten seconds of work), so they are computed by
`planner validate --write-bands` into `BANDS_FILE`, read once here, and a test recomputes them against the file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from planner.specs import GradientLayout, ModelSpec, TrainingSpec

__all__ = [
    "BANDS_FILE",
    "DECIMALS",
    "LONG_SEQUENCE_TOKENS",
    "AccuracyBand",
    "Workload",
    "band_for",
    "load_bands",
    "workload_of",
    "write_bands",
]

BANDS_FILE = Path(__file__).resolve().parent.parent / "data" / "accuracy_bands.json"
PERCENTILE_FROM = 10
"""Runs a band needs before its sentence quotes the 90th percentile."""
DECIMALS = 4
"""Errors are kept to 0.01% (`report.accuracy_bands` rounds them), so the stored file compares exactly."""
LONG_SEQUENCE_TOKENS = 8192
"""Sequences longer than this make a dense Megatron-Core run `Workload.DENSE_LONG`: 8,192 is the longest sequence of
the dense sources' other rows (NeMo 24.07's Llama 3), so only NeMo's long-sequence table (16K-1M tokens on H100, where
the attention core and context parallelism's ring carry the step) speaks for longer ones."""


class Workload(StrEnum):
    """What kind of work a run is, as far as the model's accuracy goes (README, "Where the model is weak")."""

    DENSE = "dense"
    """A transformer without experts, on Megatron-Core's gradient buffers (`GradientLayout.MEGATRON`)."""
    DENSE_LONG = "dense_long"
    """A transformer without experts on Megatron-Core's buffers at sequences over `LONG_SEQUENCE_TOKENS`, where the
    attention core (and context parallelism's ring) outweighs the GEMMs."""
    DENSE_FSDP = "dense_fsdp"
    """A transformer without experts under PyTorch FSDP (`GradientLayout.PYTORCH_FSDP`: Composer, TorchTitan)."""
    MOE = "moe"
    """Mixture-of-experts layers with CUDA graphs (`RuntimeFeatures.cuda_graphs`)."""
    MOE_EAGER = "moe_eager"
    """Mixture-of-experts layers with every kernel launched from Python: the runs the model misses most."""
    HYBRID = "hybrid"
    """Mamba-2 mixers among the layers (`ModelSpec.mamba`), with or without experts."""


WORKLOAD_TEXT: dict[Workload, str] = {
    Workload.DENSE: "dense transformer",
    Workload.DENSE_LONG: f"dense transformer at sequences over {LONG_SEQUENCE_TOKENS:,} tokens",
    Workload.DENSE_FSDP: "dense transformer under PyTorch FSDP",
    Workload.MOE: "mixture of experts with CUDA graphs",
    Workload.MOE_EAGER: "mixture of experts without CUDA graphs",
    Workload.HYBRID: "hybrid Mamba-2 / attention",
}


def workload_of(model: ModelSpec, training: TrainingSpec) -> Workload:
    """The `Workload` of a model trained with these settings: hybrid if it has Mamba mixers, else mixture of
    experts (eager without CUDA graphs) if it has experts, else dense, on Megatron-Core (long-context past
    `LONG_SEQUENCE_TOKENS`) or PyTorch FSDP (`TrainingSpec.gradient_layout`)."""
    if model.mamba is not None:
        return Workload.HYBRID
    if model.moe is not None:
        return Workload.MOE if training.runtime.cuda_graphs else Workload.MOE_EAGER
    if training.gradient_layout is GradientLayout.PYTORCH_FSDP:
        return Workload.DENSE_FSDP
    return Workload.DENSE_LONG if model.seq_length > LONG_SEQUENCE_TOKENS else Workload.DENSE


@dataclass(frozen=True, slots=True)
class AccuracyBand:
    """The held-out errors of the published runs of one GPU kind and workload (module docstring)."""

    gpu_kind: str
    workload: Workload
    rows: int
    sources: tuple[str, ...]
    """The published sources (`planner validate`'s groups) the rows come from."""
    mean_error: float
    """Mean signed error: above zero, the runs took longer than predicted on average."""
    mean_abs_error: float
    p90_abs_error: float
    """Nine runs in ten were at most this far off (`report.error_stats`)."""
    min_error: float
    max_error: float

    @property
    def text(self) -> str:
        """One sentence for a person: what the model was checked on and how far off it was (the mean from two runs
        on, the 90th percentile from `PERCENTILE_FROM` runs on)."""
        head = f"{self.gpu_kind}, {WORKLOAD_TEXT[self.workload]}:"
        if self.rows == 1:
            return f"{head} 1 published run measured {self.min_error:+.0%} against the predicted step time"
        p90 = f", 90th percentile {self.p90_abs_error:.1%}" if self.rows >= PERCENTILE_FROM else ""
        return (
            f"{head} {self.rows} published runs measured {self.min_error:+.0%} to {self.max_error:+.0%} against the"
            f" predicted step time (mean {self.mean_error:+.1%}, mean |error| {self.mean_abs_error:.1%}{p90})"
        )


def write_bands(bands: list[AccuracyBand], path: Path | None = None) -> None:
    """Store the bands (`planner validate --write-bands`) in `path`, by default `BANDS_FILE`."""
    body = {
        "generated_by": "planner validate --write-bands",
        "bands": [{**asdict(b), "sources": list(b.sources)} for b in bands],
    }
    (path or BANDS_FILE).write_text(json.dumps(body, indent=1) + "\n")
    load_bands.cache_clear()


def _band(row: dict[str, Any]) -> AccuracyBand:
    return AccuracyBand(**{**row, "workload": Workload(row["workload"]), "sources": tuple(row["sources"])})


@cache
def load_bands(path: Path | None = None) -> tuple[AccuracyBand, ...]:
    """The bands stored in `path`, by default `BANDS_FILE`; read once."""
    return tuple(_band(row) for row in json.loads((path or BANDS_FILE).read_text())["bands"])


def band_for(gpu_kind: str, model: ModelSpec, training: TrainingSpec) -> AccuracyBand | None:
    """The band of published runs like this request (`workload_of`) on this GPU kind; None where the model was
    checked on none (a GPU kind without published runs, or a workload none of its runs had)."""
    workload = workload_of(model, training)
    return next((b for b in load_bands() if b.gpu_kind == gpu_kind and b.workload is workload), None)
