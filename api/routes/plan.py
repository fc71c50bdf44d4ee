"""POST /v1/plan and POST /v1/estimate: convert, call the planner, convert back."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.convert import cluster_spec, estimate_response, layout_from, model_spec, plan_response
from api.deps import CacheDep, MetricsDep, ProfilesDep
from api.schemas import EstimateRequest, EstimateResponse, PlanRequest, PlanResponse
from planner.estimate import estimate
from planner.search.plan import plan

router = APIRouter(prefix="/v1", tags=["planning"])
JSON = "application/json"


def _cached(raw: bytes) -> Response:
    return Response(raw.replace(b'"cached":false', b'"cached":true', 1), media_type=JSON)


@router.post("/plan", response_model=PlanResponse, summary="Ranked layouts for a model on a cluster")
def post_plan(request: PlanRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    key = cache.key("plan", request)
    if (hit := cache.get(key)) is not None:
        metrics.cache_hits.inc()
        return _cached(hit)
    model, cluster = model_spec(request.model), cluster_spec(request.cluster, profiles)
    result = plan(model, cluster, request.training, request.constraints, request.top_k, request.objective)
    metrics.search_seconds.observe(result.search.elapsed_ms / 1e3)
    metrics.candidates.inc(result.search.candidates)
    raw = plan_response(result, model, request.training, cluster).model_dump_json().encode()
    cache.put(key, raw)
    return Response(raw, media_type=JSON)


@router.post("/estimate", response_model=EstimateResponse, summary="Step time, memory and rule checks of one layout")
def post_estimate(request: EstimateRequest, profiles: ProfilesDep, cache: CacheDep, metrics: MetricsDep) -> Response:
    key = cache.key("estimate", request)
    if (hit := cache.get(key)) is not None:
        metrics.cache_hits.inc()
        return _cached(hit)
    model, cluster = model_spec(request.model), cluster_spec(request.cluster, profiles)
    layout = layout_from(request.layout)
    raw = estimate_response(layout, request.layout, estimate(model, cluster, request.training, layout))
    body = raw.model_dump_json().encode()
    cache.put(key, body)
    return Response(body, media_type=JSON)
