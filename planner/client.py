"""A small typed client for the planner service, for schedulers and scripts.

    from planner.client import PlannerClient
    with PlannerClient("http://planner:8000") as client:
        best = client.plan({"model": {"preset": "gpt3-175b"},
                            "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
                            "training": {"global_batch_size": 1536}}).plans[0]

Responses are parsed into the API's response models; an error response
raises `PlannerServiceError` carrying the problem+json body.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

import httpx

from api.schemas import EstimateResponse, PlanResponse

__all__ = ["PlannerClient", "PlannerServiceError"]


class PlannerServiceError(Exception):
    """The service answered with an error; `problem` is its RFC 9457 body."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        super().__init__(f"{status}: {problem.get('detail', problem)}")
        self.status = status
        self.problem = problem


class PlannerClient:
    def __init__(self, base_url: str, timeout_s: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s, transport=transport)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else None
        response = self._http.request(method, path, json=body, headers=headers)
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.text[:500]}
            raise PlannerServiceError(response.status_code, problem)
        return response.json()

    def plan(self, request: dict[str, Any]) -> PlanResponse:
        return PlanResponse.model_validate(self._call("POST", "/v1/plan", request))

    def estimate(self, request: dict[str, Any]) -> EstimateResponse:
        return EstimateResponse.model_validate(self._call("POST", "/v1/estimate", request))

    def create_observation(self, observation: dict[str, Any], token: str) -> dict[str, Any]:
        """POST /v1/observations (a write: needs a bearer token); returns the stored observation, with its id."""
        result: dict[str, Any] = self._call("POST", "/v1/observations", observation, token=token)
        return result

    def hardware_profiles(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/v1/hardware-profiles")
        return result

    def models(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call("GET", "/v1/models")
        return result

    def live(self) -> bool:
        return bool(self._call("GET", "/livez").get("status") == "ok")
