"""Errors the planner raises for users. Bugs are `assert`s, never these.

PlannerError
  InvalidSpecError        bad model / cluster / training / layout input (HTTP 422)
  InfeasibleError         no layout satisfies the constraints (HTTP 422, with reasons)
  SolverTimeoutError      CP-SAT hit its time limit without a feasible answer
  UnknownHardwareError    hardware profile id not found (HTTP 404)
  UnknownPresetError      model preset id not found (HTTP 404)
"""

from __future__ import annotations

__all__ = [
    "InfeasibleError",
    "InvalidSpecError",
    "PlannerError",
    "SolverTimeoutError",
    "UnknownHardwareError",
    "UnknownPresetError",
    "validator_message",
]

_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
"""What pydantic puts before a validator's own message (`ValueError` / `AssertionError` raised in one)."""


def validator_message(msg: str) -> str:
    """A pydantic error message in the validator's own words: the rule and its arithmetic, without pydantic's
    "Value error, " prefix. The API's 422s, the CLI's errors and the Hugging Face import all report through it."""
    for prefix in _PYDANTIC_PREFIXES:
        msg = msg.removeprefix(prefix)
    return msg


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""


class InvalidSpecError(PlannerError):
    """An input breaks a rule; `field` names it and the message shows the arithmetic."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InfeasibleError(PlannerError):
    """No layout satisfies the request; `reasons` says why, most common first."""

    def __init__(self, message: str, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.reasons = reasons or []


class SolverTimeoutError(PlannerError):
    """CP-SAT reached its time limit without a feasible solution."""


class UnknownHardwareError(PlannerError):
    """No hardware profile has this id."""

    def __init__(self, profile_id: str, known: list[str]) -> None:
        super().__init__(f"unknown hardware profile {profile_id!r}; known: {', '.join(known)}")
        self.profile_id = profile_id


class UnknownPresetError(PlannerError):
    """No model preset has this name."""

    def __init__(self, preset: str, known: list[str]) -> None:
        super().__init__(f"unknown model preset {preset!r}; known: {', '.join(known)}")
        self.preset = preset
