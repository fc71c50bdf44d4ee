"""The request's `constraints`: a number pins a dimension, a list restricts it. Checked once, here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner.constraints.space import AXES, Allowed, AllowedValue
from planner.errors import InvalidSpecError
from planner.specs import Recompute

__all__ = ["parse_constraints"]

MAX_VALUES_PER_KEY = 64


def _check_value(key: str, value: Any) -> AllowedValue:
    field = f"constraints.{key}"
    if key == "recompute":
        if value not in {r.value for r in Recompute}:
            raise InvalidSpecError(field, f"{value!r} is not one of none, selective, full")
        return str(value)
    if key == "sequence_parallel":
        if not isinstance(value, bool):
            raise InvalidSpecError(field, f"{value!r} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpecError(field, f"{value!r} must be an integer")
    if key == "zero_stage" and value not in (0, 1, 2, 3):
        raise InvalidSpecError(field, f"{value} must be 0, 1, 2 or 3")
    if key != "zero_stage" and not 1 <= value <= 1_048_576:
        raise InvalidSpecError(field, f"{value} must be between 1 and 1048576")
    return value


def parse_constraints(raw: Mapping[str, Any] | None) -> Allowed:
    """Normalise to key -> allowed values; unknown keys and bad values raise InvalidSpecError."""
    allowed: dict[str, Sequence[AllowedValue]] = {}
    for key, value in (raw or {}).items():
        if key not in AXES:
            raise InvalidSpecError(f"constraints.{key}", f"unknown key; allowed: {', '.join(AXES)}")
        values = value if isinstance(value, list | tuple) else [value]
        if not values:
            raise InvalidSpecError(f"constraints.{key}", "an empty list allows nothing")
        if len(values) > MAX_VALUES_PER_KEY:
            raise InvalidSpecError(f"constraints.{key}", f"{len(values)} values > {MAX_VALUES_PER_KEY}")
        allowed[key] = [_check_value(key, v) for v in values]
    return allowed
