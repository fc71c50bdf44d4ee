"""GET the built-in hardware profiles and model presets."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.deps import ProfilesDep
from planner.errors import UnknownHardwareError
from planner.presets import get_preset, load_presets
from planner.profiles import HardwareProfile, get_profile
from planner.specs import ModelSpec

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get("/hardware-profiles", summary="Hardware profiles: built-in, and the newest version of each site profile")
def list_profiles(profiles: ProfilesDep) -> list[HardwareProfile]:
    return list(profiles.values())


@router.get("/hardware-profiles/{profile_id}", summary="One hardware profile, every number with its source")
def one_profile(profile_id: str, profiles: ProfilesDep) -> HardwareProfile:
    if len(profile_id) > 129:  # base@site: 64 + 1 + 64
        raise UnknownHardwareError(profile_id[:129], sorted(profiles))
    return get_profile(profiles, profile_id)


@router.get("/models", summary="Built-in model presets")
def list_models() -> list[dict[str, Any]]:
    return [{"id": p.id, "model": p.model, "source": p.source, "notes": p.notes} for p in load_presets().values()]


@router.get("/models/{preset}", summary="One model preset with its source")
def one_model(preset: str) -> dict[str, Any]:
    p = get_preset(preset[:64])
    model: ModelSpec = p.model
    return {"id": p.id, "model": model, "source": p.source, "notes": p.notes}
