"""Site calibrations: fit a profile on its stored observations (write token), read the stored result."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from starlette.exceptions import HTTPException

from api.auth import WriterDep
from api.body import JsonBodyRoute
from api.calibrate import calibrate_stored, calibration_out
from api.calibration_schemas import CalibrateRequest, CalibrationOut
from api.deps import ProfilesDep, StoreDep
from planner.store import get_profile_version

router = APIRouter(prefix="/v1", tags=["calibration"], route_class=JsonBodyRoute)

_MAX_ID = 129
"""base@site: 64 + 1 + 64 characters."""


@router.post(
    "/hardware-profiles/{profile_id}/calibrate",
    status_code=201,
    summary="Calibrate a profile on its stored observations; stored as base@site (write token required)",
)
def calibrate(
    profile_id: str, body: CalibrateRequest, owner: WriterDep, profiles: ProfilesDep, store: StoreDep
) -> CalibrationOut:
    if len(profile_id) > _MAX_ID:
        raise HTTPException(404, f"no hardware profile has an id of {len(profile_id)} characters")
    fitted_by = f"POST /v1/hardware-profiles/{profile_id}/calibrate by {owner}"
    version = calibrate_stored(store, profiles, profile_id, body.site, owner=owner, fitted_by=fitted_by)
    return calibration_out(version)


@router.get("/hardware-profiles/{profile_id}/calibration", summary="A site profile's stored calibration")
def calibration(
    profile_id: str,
    store: StoreDep,
    version: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="A stored version; default the newest.")
    ] = None,
) -> CalibrationOut:
    found = (
        get_profile_version(store, profile_id, version) if "@" in profile_id and len(profile_id) <= _MAX_ID else None
    )
    if found is None or found.report is None:
        which = f"version {version} of " if version is not None else ""
        raise HTTPException(
            404,
            f"no stored calibration for {which}{profile_id[:_MAX_ID]!r}: POST /v1/hardware-profiles/{{base}}/calibrate"
            " stores one as base@site",
        )
    return calibration_out(found)
