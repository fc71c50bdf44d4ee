"""Request and response models of the site-calibration routes (the contract in docs/api.md). No math.

The report is the calibration's own frozen dataclasses (`planner.calibration.site_report`), served as they are:
one home for its fields."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from planner.calibration.site import SITE_PATTERN
from planner.calibration.site_report import SiteCalibration

__all__ = ["CalibrateRequest", "CalibrationOut", "SkippedOut"]


class CalibrateRequest(BaseModel):
    """What to calibrate: the profile id in the path names the base; `site` names the result `base@site`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    site: str | None = Field(
        default=None,
        pattern=f"^{SITE_PATTERN}$",
        description="Site name; the calibrated profile is `base@site`. Implied when the path's id is `base@site`.",
    )


class SkippedOut(BaseModel):
    id: str
    reason: str


class CalibrationOut(BaseModel):
    """A stored calibration: the profile version it made and the report (errors before, after, leave-one-out)."""

    profile_id: str = Field(description="`base@site`: name it in `cluster.profile` to plan with the calibration.")
    version: int = Field(description="The stored version of `profile_id` (1 for the first).")
    owner: str
    created_at: datetime
    observations: list[str] | None = Field(
        description="Ids of the observations fitted on, in the order of the report's rows (null: not recorded)."
    )
    skipped: list[SkippedOut] = Field(description="Stored observations of the profile not fitted on, with why.")
    report: SiteCalibration
