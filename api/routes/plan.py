"""POST /v1/plan and POST /v1/estimate: convert, call the planner, convert back; identical requests from cache."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Response
from pydantic import BaseModel

from api.cache import ResponseCache
from api.convert import cluster_spec, estimate_response, layout_from, plan_response, resolve_model
from api.deps import CacheDep, MetricsDep, ProfilesDep
from api.metrics import Metrics
from api.schemas import EstimateRequest, EstimateResponse, PlanRequest, PlanResponse
from planner.estimate import estimate
from planner.search.plan import plan

router = APIRouter(prefix="/v1", tags=["planning"])
JSON = "application/json"


def _answer(cache: ResponseCache, metrics: Metrics, key: str, produce: Callable[[], BaseModel]) -> Response:
    """The cached response for `key` (marked cached), or a fresh one, stored."""
    if (hit := cache.get(key)) is not None:
        metrics.cache_hits.inc()
        return Response(hit.replace(b'"cached":false', b'"cached":true', 1), media_type=JSON)
    raw = produce().model_dump_json().encode()
    cache.put(key, raw)
    return Response(raw, media_type=JSON)


@router.post("/plan", response_model=PlanResponse, summary="Ranked layouts for a model on a cluster")
def post_plan(request: PlanRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    def produce() -> PlanResponse:
        resolved, cluster = resolve_model(request.model), cluster_spec(request.cluster, profiles)
        result = plan(resolved.model, cluster, request.training, request.constraints, request.top_k, request.objective)
        metrics.search_seconds.observe(result.search.elapsed_ms / 1e3)
        metrics.candidates.inc(result.search.evaluated)
        return plan_response(result, resolved, request.training, cluster)

    return _answer(cache, metrics, cache.key("plan", request), produce)


@router.post("/estimate", response_model=EstimateResponse, summary="Step time, memory and rule checks of one layout")
def post_estimate(request: EstimateRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    def produce() -> EstimateResponse:
        resolved, cluster = resolve_model(request.model), cluster_spec(request.cluster, profiles)
        layout = layout_from(request.layout)
        e = estimate(resolved.model, cluster, request.training, layout)
        return estimate_response(layout, request.layout, e, resolved)

    return _answer(cache, metrics, cache.key("estimate", request), produce)
