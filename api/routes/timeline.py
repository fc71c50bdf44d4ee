"""GET /v1/timeline.svg: a plan's pipeline schedule, drawn by `planner.timeline` (as the CLI and page do)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from planner.errors import InvalidSpecError
from planner.rules import interleave_problem
from planner.specs import MAX_LAYERS
from planner.timeline import schedule_svg

router = APIRouter(prefix="/v1", tags=["planning"])


@router.get("/timeline.svg", summary="The pipeline schedule of one step as SVG", response_class=Response)
def timeline_svg(
    pp: Annotated[int, Query(ge=1, le=256, description="Pipeline ranks.")],
    num_microbatches: Annotated[int, Query(ge=1, le=1_048_576, description="Micro-batches per step.")],
    vp: Annotated[int, Query(ge=1, le=MAX_LAYERS, description="Model chunks per rank.")] = 1,
    forward_s: Annotated[float, Query(gt=0, le=1e6, description="One micro-batch's forward on a stage.")] = 1.0,
    backward_s: Annotated[float, Query(gt=0, le=1e6, description="One micro-batch's backward on a stage.")] = 2.0,
) -> Response:
    if (problem := interleave_problem(num_microbatches, pp, vp)) is not None:
        raise InvalidSpecError("num_microbatches", problem)
    try:
        svg = schedule_svg(pp, vp, num_microbatches, forward_s, backward_s)
    except ValueError as exc:
        raise InvalidSpecError("pp", f"too large to draw: {exc}") from None
    return Response(svg, media_type="image/svg+xml")
