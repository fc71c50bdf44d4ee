"""Behaviour pinned: the corpus's responses equal the recorded ones (numbers to 1e-12 relative).

A refactor must leave every response identical. A deliberate change to the
cost model or the rules re-records `responses.json` (tests/regression/record.py)
in the same commit, so review sees every number it moved.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import estimate_requests, plan_requests  # noqa: E402
from record import RESPONSES, replay  # noqa: E402

from api.main import create_app  # noqa: E402

RTOL = 1e-12


def differences(expected: Any, actual: Any, path: str = "") -> Iterator[str]:
    """Where two JSON values differ: numbers beyond RTOL, anything else not equal."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            if key not in actual or key not in expected:
                yield f"{path}.{key}: present in only one"
            else:
                yield from differences(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: {len(expected)} items != {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            yield from differences(e, a, f"{path}[{i}]")
    elif isinstance(expected, float | int) and isinstance(actual, float | int) and not isinstance(expected, bool):
        if not math.isclose(expected, actual, rel_tol=RTOL, abs_tol=1e-300):
            yield f"{path}: {expected!r} != {actual!r}"
    elif expected != actual:
        yield f"{path}: {expected!r} != {actual!r}"


@pytest.fixture(scope="module")
def replayed() -> dict[str, list[dict[str, Any]]]:
    with TestClient(create_app()) as client:
        return replay(client)


@pytest.fixture(scope="module")
def recorded() -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads(RESPONSES.read_text())
    return data


def test_the_corpus_is_as_large_as_promised() -> None:
    plans, estimates = plan_requests(), estimate_requests()
    assert len(plans) >= 50 and len(estimates) >= 200
    assert {r["objective"] for r in plans if "objective" in r} == {"gpu_efficiency"}
    assert sum("constraints" in r for r in plans) >= 20


@pytest.mark.parametrize("route", ["plan", "estimate"])
def test_responses_equal_the_recorded_ones(route: str, replayed: dict[str, Any], recorded: dict[str, Any]) -> None:
    assert len(replayed[route]) == len(recorded[route])
    failures = [
        f"{route}[{i}]{d}"
        for i, (e, a) in enumerate(zip(recorded[route], replayed[route], strict=True))
        for d in differences(e, a)
    ]
    assert not failures, "\n".join(failures[:40])


def test_the_comparison_catches_a_moved_number() -> None:
    assert list(differences({"a": [1.0, 2.0]}, {"a": [1.0, 2.0 * (1 + 1e-10)]})) == [".a[1]: 2.0 != 2.0000000002"]
    assert not list(differences({"a": 1.0}, {"a": 1.0 * (1 + 1e-14)}))
    assert list(differences({"a": "x"}, {"a": "y"}))


def test_every_recorded_search_completed(recorded: dict[str, Any]) -> None:
    """A truncated search depends on the clock; the corpus must pin complete searches only."""
    assert all(r["body"]["search"]["complete"] for r in recorded["plan"] if r["status"] == 200)
    assert all(r["status"] == 200 for route in ("plan", "estimate") for r in recorded[route])
