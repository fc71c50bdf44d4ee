"""Record the regression corpus's responses: `python tests/regression/record.py`.

Run it only for a deliberate behaviour change, and commit the new
`responses.json` with that change so its diff shows what moved.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import estimate_requests, plan_requests  # noqa: E402

from api.main import create_app  # noqa: E402

RESPONSES = Path(__file__).resolve().parent / "responses.json"
VOLATILE = (("search", "elapsed_ms"), ("cached",))
"""Fields that legitimately differ between runs (wall-clock time, cache state)."""


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    """The response without its volatile fields."""
    for path in VOLATILE:
        node: Any = body
        for key in path[:-1]:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return body


def replay(client: TestClient) -> dict[str, list[dict[str, Any]]]:
    """Every corpus request's status and normalised body, in corpus order."""
    out: dict[str, list[dict[str, Any]]] = {"plan": [], "estimate": []}
    for route, requests in (("plan", plan_requests()), ("estimate", estimate_requests())):
        for request in requests:
            response = client.post(f"/v1/{route}", json=request, headers={"cache-control": "no-cache"})
            out[route].append({"status": response.status_code, "body": normalise(response.json())})
    return out


def main() -> None:
    with TestClient(create_app()) as client:
        recorded = replay(client)
    RESPONSES.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    statuses = {route: [r["status"] for r in rows] for route, rows in recorded.items()}
    print({route: {s: codes.count(s) for s in set(codes)} for route, codes in statuses.items()})


if __name__ == "__main__":
    main()
