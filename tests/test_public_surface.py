"""The package's public names are exported, and the API layer holds no cost-model math."""

from __future__ import annotations

import pathlib

import planner


def test_all_imports_are_exported() -> None:
    for name in planner.__all__:
        assert hasattr(planner, name), name
    public = {n for n in vars(planner) if not n.startswith("_")}
    modules = {n for n in public if isinstance(getattr(planner, n), type(planner))}
    assert public - modules == set(planner.__all__)


def test_api_does_not_reach_into_the_cost_model() -> None:
    api = pathlib.Path(__file__).resolve().parent.parent / "api"
    for path in api.rglob("*.py"):
        assert "costmodel" not in path.read_text(), path
