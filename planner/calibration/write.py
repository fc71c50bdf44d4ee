"""Write fitted constants into the hardware profile files (`planner calibrate --write`)."""

from __future__ import annotations

import json
from pathlib import Path

from planner.profiles import DEFAULT_PROFILES_DIR, Calibration, HardwareProfile

__all__ = ["gpu_kind", "write_calibration"]


def gpu_kind(profile: HardwareProfile) -> str:
    """GPU family a fit applies to: the first word of the GPU name (A100, H100, ...)."""
    return profile.gpu.name.split("-")[0].split(" ")[0]


def write_calibration(
    fitted: Calibration, fitted_kind: str, profiles: dict[str, HardwareProfile], directory: Path = DEFAULT_PROFILES_DIR
) -> list[str]:
    """Store the fit in every profile of `fitted_kind`; others get it as a stated transfer. Returns ids written."""
    written = []
    for profile_id, profile in sorted(profiles.items()):
        path = directory / f"{profile_id}.json"
        raw = json.loads(path.read_text())
        cal = fitted
        if gpu_kind(profile) != fitted_kind:
            cal = fitted.model_copy(
                update={
                    "fitted_on": [],
                    "transferred_from": f"{fitted_kind}: no published run on {gpu_kind(profile)} in the data file yet",
                }
            )
        raw["calibration"] = cal.model_dump(mode="json")
        raw.setdefault("sources", {})["calibration"] = (
            "fitted by `planner calibrate --write` (planner/calibration/fit.py) on the rows in calibration.fitted_on"
        )
        path.write_text(json.dumps(raw, indent=2) + "\n")
        written.append(profile_id)
    return written
