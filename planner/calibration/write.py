"""Write fitted constants into the hardware profile files (`planner calibrate --write`)."""

from __future__ import annotations

import json
from pathlib import Path

from planner.calibration.fit import TRANSFERS
from planner.calibration.published import gpu_kind_of
from planner.profiles import DEFAULT_PROFILES_DIR, Calibration, HardwareProfile

__all__ = ["gpu_kind", "write_calibration"]


def gpu_kind(profile: HardwareProfile) -> str:
    """GPU family a fit applies to: the first word of the GPU name (A100, H100, ...)."""
    return gpu_kind_of(profile.gpu.name)


def _for_profile(kind: str, fits: dict[str, Calibration]) -> Calibration:
    """The kind's own fit, or the fit of the kind TRANSFERS names for it, marked as transferred."""
    if kind in fits:
        return fits[kind]
    source = TRANSFERS[kind]
    return fits[source].model_copy(
        update={"fitted_on": [], "transferred_from": f"{source}: no fit set for {kind} in planner/calibration/fit.py"}
    )


def write_calibration(
    fits: dict[str, Calibration], profiles: dict[str, HardwareProfile], directory: Path = DEFAULT_PROFILES_DIR
) -> list[str]:
    """Store each GPU kind's fit in its profiles; other kinds get a stated transfer. Returns ids written."""
    written = []
    for profile_id, profile in sorted(profiles.items()):
        path = directory / f"{profile_id}.json"
        raw = json.loads(path.read_text())
        raw["calibration"] = _for_profile(gpu_kind(profile), fits).model_dump(mode="json")
        raw.setdefault("sources", {})["calibration"] = (
            "fitted by `planner calibrate --write` (planner/calibration/fit.py) on the rows in calibration.fitted_on"
        )
        path.write_text(json.dumps(raw, indent=2) + "\n")
        written.append(profile_id)
    return written
