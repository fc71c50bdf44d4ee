"""Built-in model presets (shape + source), read from `planner/data/model_presets.json` when asked."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from planner.errors import UnknownPresetError
from planner.specs import ModelSpec

__all__ = ["PRESETS_FILE", "Preset", "get_preset", "load_presets"]

PRESETS_FILE = Path(__file__).resolve().parent / "data" / "model_presets.json"


@dataclass(frozen=True, slots=True)
class Preset:
    id: str
    model: ModelSpec
    source: str
    notes: str


@cache
def load_presets(path: Path = PRESETS_FILE) -> Mapping[str, Preset]:
    """Every preset, validated, keyed by id."""
    raw = json.loads(path.read_text())
    return {
        key: Preset(
            id=key, model=ModelSpec.model_validate(entry["model"]), source=entry["source"], notes=entry.get("notes", "")
        )
        for key, entry in raw.items()
    }


def get_preset(name: str) -> Preset:
    presets = load_presets()
    try:
        return presets[name]
    except KeyError:
        raise UnknownPresetError(name, sorted(presets)) from None
