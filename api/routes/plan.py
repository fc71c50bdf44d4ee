"""POST /v1/plan and POST /v1/estimate: convert, call the planner, convert back; identical requests from cache."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Response
from pydantic import BaseModel

from api.body import JsonBodyRoute
from api.cache import ResponseCache
from api.convert import answer_estimate, answer_plan
from api.deps import CacheDep, MetricsDep, ProfilesDep
from api.metrics import Metrics
from api.schemas import EstimateRequest, EstimateResponse, PlanRequest, PlanResponse

router = APIRouter(prefix="/v1", tags=["planning"], route_class=JsonBodyRoute)
JSON = "application/json"


def _answer(cache: ResponseCache, metrics: Metrics, key: str, produce: Callable[[], BaseModel]) -> Response:
    """The cached response for `key` (marked cached), or a fresh one, stored unless its search is incomplete."""
    if (hit := cache.get(key)) is not None:
        metrics.cache_hits.inc()
        return Response(hit.replace(b'"cached":false', b'"cached":true', 1), media_type=JSON)
    response = produce()
    raw = response.model_dump_json().encode()
    if _cacheable(response):
        cache.put(key, raw)
    return Response(raw, media_type=JSON)


def _cacheable(response: BaseModel) -> bool:
    """Only complete answers are kept: a truncated search is deterministic but not the answer to cache."""
    return not isinstance(response, PlanResponse) or response.search.complete


@router.post("/plan", response_model=PlanResponse, summary="Ranked layouts for a model on a cluster")
def post_plan(request: PlanRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    def produce() -> PlanResponse:
        response = answer_plan(request, profiles)
        metrics.search_seconds.observe(response.search.elapsed_ms / 1e3)
        metrics.candidates.inc(response.search.evaluated)
        return response

    key = cache.key("plan", request, profiles.fingerprint(request.cluster.profile))
    return _answer(cache, metrics, key, produce)


@router.post("/estimate", response_model=EstimateResponse, summary="Step time, memory and rule checks of one layout")
def post_estimate(request: EstimateRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    key = cache.key("estimate", request, profiles.fingerprint(request.cluster.profile))
    return _answer(cache, metrics, key, lambda: answer_estimate(request, profiles))
