"""What a site calibration returns (`planner.calibration.site.calibrate_site`): frozen, and JSON both ways.

Errors follow `planner validate`: error = published (measured) step time / predicted step time - 1,
i.e. predicted throughput / measured throughput - 1 (positive: the model is too fast).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from planner.profiles import HardwareProfile

__all__ = ["ConstantFit", "ErrorSummary", "SiteCalibration", "SiteRow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstantFit:
    """One constant before and after, its bounds, and whether the data identified it."""

    name: str
    unit: str
    before: float
    after: float
    lower: float
    upper: float
    fitted: bool
    at_bound: str | None
    """'lower' or 'upper' when the fitted value sits at that bound (within the final grid step), else None."""
    sensitivity: float
    """RMS change of log predicted step time over the runs when the constant moves across its whole range,
    beyond what the constants fitted before it can absorb (`site.IDENTIFIED_SENSITIVITY`)."""
    reason: str
    """Why it was fitted, or why it was kept at the base profile's value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteRow:
    """One observation: measured step time, predicted before, after and leave-one-out, and the errors."""

    id: str
    layout: str
    crosses_network: bool
    """Whether any of its groups leaves the NVLink domain (its prediction moves with the network constant)."""
    measured_step_s: float
    predicted_before_s: float
    predicted_after_s: float
    predicted_loo_s: float
    """Predicted with the constants fitted on every other run."""
    error_before: float
    error_after: float
    error_loo: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    mean_abs: float
    max_abs: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteCalibration:
    """A calibrated profile, the constants, every run's errors, and what the fit could not identify."""

    base_id: str
    site: str
    profile: HardwareProfile
    """The calibrated profile, id `base@site`; loadable like a `hardware_profiles/` file."""
    constants: tuple[ConstantFit, ...]
    unidentified: tuple[str, ...]
    """Names of the constants kept at the base profile's value (each `ConstantFit.reason` says why)."""
    rows: tuple[SiteRow, ...]
    before: ErrorSummary
    after: ErrorSummary
    loo: ErrorSummary
    rms_log_error_before: float
    rms_log_error_after: float
    notes: tuple[str, ...]

    def constant(self, name: str) -> ConstantFit:
        return next(c for c in self.constants if c.name == name)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (the profile in its file form); `from_json` reads it back equal."""
        return {
            "base_id": self.base_id,
            "site": self.site,
            "profile": self.profile.model_dump(mode="json"),
            "constants": [asdict(c) for c in self.constants],
            "unidentified": list(self.unidentified),
            "rows": [asdict(r) for r in self.rows],
            "before": asdict(self.before),
            "after": asdict(self.after),
            "loo": asdict(self.loo),
            "rms_log_error_before": self.rms_log_error_before,
            "rms_log_error_after": self.rms_log_error_after,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> SiteCalibration:
        return cls(
            base_id=body["base_id"],
            site=body["site"],
            profile=HardwareProfile.model_validate(body["profile"]),
            constants=tuple(ConstantFit(**c) for c in body["constants"]),
            unidentified=tuple(body["unidentified"]),
            rows=tuple(SiteRow(**r) for r in body["rows"]),
            before=ErrorSummary(**body["before"]),
            after=ErrorSummary(**body["after"]),
            loo=ErrorSummary(**body["loo"]),
            rms_log_error_before=body["rms_log_error_before"],
            rms_log_error_after=body["rms_log_error_after"],
            notes=tuple(body["notes"]),
        )
