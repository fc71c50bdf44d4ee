"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST

from api.deps import MetricsDep

router = APIRouter(tags=["operations"])


@router.get("/livez", summary="The process is up")
def livez() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Profiles are loaded and the service can plan")
def readyz(request: Request) -> Response:
    ready = bool(getattr(request.app.state, "profiles", None))
    status = 200 if ready else 503
    return Response(b'{"status":"ready"}' if ready else b'{"status":"loading"}', status, media_type="application/json")


@router.get("/metrics", summary="Prometheus text format", response_class=PlainTextResponse)
def metrics(m: MetricsDep) -> Response:
    return Response(m.render(), media_type=CONTENT_TYPE_LATEST)
