"""POST /v1/plan for a recipe's request with some of its layout pinned: what the recipe tests share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi.testclient import TestClient


def post_pinned_plan(client: TestClient, request: dict[str, Any], pinned: Sequence[str]) -> tuple[dict[str, Any], Any]:
    """(the pins, the 200 response's body) of a NeMo plan for `request`'s model, cluster and training, with the
    `pinned` layout keys constrained to the request's values and one plan asked for."""
    pins = {k: request["layout"][k] for k in pinned}
    plan = {k: request[k] for k in ("model", "cluster", "training")} | {"constraints": pins, "top_k": 1}
    r = client.post("/v1/plan", json=plan | {"framework": "nemo"})
    assert r.status_code == 200, r.text
    return pins, r.json()
