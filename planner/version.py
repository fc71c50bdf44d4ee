"""The planner's version, stamped on stored observations (which model predicted them)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["PLANNER_VERSION"]


def _version() -> str:
    try:
        return version("layout-planner")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0.1.0+source"


PLANNER_VERSION = _version()
