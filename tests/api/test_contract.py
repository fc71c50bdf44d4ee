"""The contract in docs/api.md names every route and every field the live OpenAPI schema has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture(scope="module")
def openapi(client: TestClient) -> dict[str, Any]:
    schema: dict[str, Any] = client.get("/openapi.json").json()
    return schema


@pytest.fixture(scope="module")
def contract() -> str:
    return CONTRACT.read_text()


def test_every_route_is_in_the_contract(openapi: dict[str, Any], contract: str) -> None:
    routes = [f"{method.upper()} {path}" for path, methods in openapi["paths"].items() for method in methods]
    assert len(routes) >= 10
    missing = [r for r in routes if f"`{r}`" not in contract and f"## {r}" not in contract]
    assert not missing, f"routes missing from docs/api.md: {missing}"


def test_every_field_is_in_the_contract(openapi: dict[str, Any], contract: str) -> None:
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", contract))
    fields = {
        (schema_name, field)
        for schema_name, schema in openapi["components"]["schemas"].items()
        for field in schema.get("properties", {})
    }
    assert len(fields) > 100
    missing = sorted(f"{s}.{f}" for s, f in fields if f not in named)
    assert not missing, f"fields missing from docs/api.md: {missing}"


def test_the_readme_points_at_the_contract_in_the_repo() -> None:
    readme = (CONTRACT.parents[1] / "README.md").read_text()
    assert "docs/api.md" in readme and "shared/API.md" not in readme
