"""Request and response models of /v1/observations (the contract in docs/api.md). No math."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.schemas import EstimateRequest

__all__ = [
    "MeasuredIn",
    "ObservationOut",
    "ObservationPageOut",
    "ObservationRequest",
    "PredictedOut",
    "SourceIn",
    "SourceKind",
]

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
MAX_PAGE = 200
DEFAULT_PAGE = 50
MAX_OFFSET = 1_000_000_000
MIN_MEMORY_GIB = 1 / 1024
"""1 MiB: less than any training process holds (the CUDA context alone is hundreds of MiB); it also keeps
predicted / measured - 1 finite (a 5e-324 GiB measurement would make the error overflow)."""


class MeasuredIn(BaseModel):
    """What the run measured (per optimizer step, per GPU)."""

    model_config = _STRICT

    step_time_s: float = Field(gt=0, le=1e6, description="Seconds per optimizer step (a steady-state average).")
    peak_memory_gib: float | None = Field(
        default=None,
        ge=MIN_MEMORY_GIB,
        le=1e6,
        description="Peak memory allocated on the busiest GPU, GiB: at least 1 MiB, at most the GPU's memory.",
    )
    tokens_per_s: float | None = Field(
        default=None,
        gt=0,
        le=1e15,
        description="Tokens per second of the whole job; within 5% of global_batch_size x seq_length / step_time_s.",
    )


class SourceKind(StrEnum):
    MANUAL = "manual"
    """Typed in or posted by a tool."""
    LOG = "log"
    """Read from a training log (`planner observe`)."""


class SourceIn(BaseModel):
    """Where the measurement came from (kept with it, not checked)."""

    model_config = _STRICT

    kind: SourceKind = Field(default=SourceKind.MANUAL, strict=False)
    framework: str | None = Field(default=None, max_length=64, description="The framework that logged the run.")
    file: str | None = Field(default=None, max_length=1024, description="The log file's name or path.")
    note: str | None = Field(default=None, max_length=2000)


class ObservationRequest(EstimateRequest):
    """An estimate request (the run's model, cluster, training and layout) plus what was measured."""

    model_config = _STRICT | ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model": {"preset": "gpt3-175b"},
                    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
                    "training": {"global_batch_size": 1536},
                    "layout": {"tp": 8, "pp": 16, "dp": 8, "recompute": "full"},
                    "measured": {"step_time_s": 27.5},
                    "source": {"kind": "manual", "note": "from the job's log"},
                }
            ]
        },
    )

    measured: MeasuredIn
    source: SourceIn = Field(default_factory=SourceIn)


class PredictedOut(BaseModel):
    """The planner's prediction for the run when the observation arrived (the /v1/estimate code path)."""

    step_time_s: float
    tokens_per_s: float
    mfu: float
    peak_memory_gib: float
    hardware_tflops_per_gpu: float


class ObservationOut(BaseModel):
    id: str
    owner: str
    created_at: datetime
    profile: str = Field(description="The profile id the run names (cluster.profile).")
    request: dict[str, Any] = Field(description="The request as given (model, cluster, training, layout, framework).")
    measured: dict[str, float]
    source: dict[str, Any] | None
    predicted: PredictedOut
    planner_version: str
    error: dict[str, float] = Field(
        description="predicted / measured - 1 for each measured quantity (positive: the planner predicts more)."
    )


class ObservationPageOut(BaseModel):
    items: list[ObservationOut]
    total: int = Field(description="Observations matching the filters, all pages together.")
    limit: int
    offset: int
