"""/v1/observations: measured runs in (with the prediction at arrival), listed, read, deleted by their owner."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from starlette.exceptions import HTTPException

from api.auth import OWNER_PATTERN, WriterDep
from api.body import JsonBodyRoute
from api.convert import observation_out, observation_prediction
from api.deps import ProfilesDep, StoreDep
from api.observation_schemas import (
    DEFAULT_PAGE,
    MAX_OFFSET,
    MAX_PAGE,
    ObservationOut,
    ObservationPageOut,
    ObservationRequest,
)
from planner.profiles import PROFILE_ID_PATTERN
from planner.store import add_observation, delete_observation, get_observation, list_observations
from planner.version import PLANNER_VERSION

router = APIRouter(prefix="/v1", tags=["observations"], route_class=JsonBodyRoute)


def _unknown(observation_id: str) -> HTTPException:
    return HTTPException(404, f"no observation has id {observation_id[:64]!r}")


@router.post("/observations", status_code=201, summary="Store a measured run (write token required)")
def post_observation(
    body: ObservationRequest, owner: WriterDep, profiles: ProfilesDep, store: StoreDep, response: Response
) -> ObservationOut:
    predicted = observation_prediction(body, profiles)
    stored = add_observation(
        store,
        owner=owner,
        profile_id=body.cluster.profile or "",
        request=body.model_dump(mode="json", exclude_unset=True, exclude={"measured", "source"}),
        measured=body.measured.model_dump(mode="json", exclude_none=True),
        predicted=predicted.model_dump(mode="json"),
        source=body.source.model_dump(mode="json", exclude_none=True),
        planner_version=PLANNER_VERSION,
    )
    response.headers["Location"] = f"/v1/observations/{stored.id}"
    return observation_out(stored)


@router.get("/observations", summary="Stored observations, oldest first, filtered and paged")
def list_all(
    store: StoreDep,
    profile: Annotated[str | None, Query(max_length=129, pattern=PROFILE_ID_PATTERN)] = None,
    owner: Annotated[str | None, Query(max_length=64, pattern=OWNER_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"At most {MAX_PAGE}.")] = DEFAULT_PAGE,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> ObservationPageOut:
    page = list_observations(store, profile=profile, owner=owner, limit=limit, offset=offset)
    return ObservationPageOut(
        items=[observation_out(o) for o in page.items], total=page.total, limit=limit, offset=offset
    )


@router.get("/observations/{observation_id}", summary="One stored observation")
def one(observation_id: str, store: StoreDep) -> ObservationOut:
    found = get_observation(store, observation_id)
    if found is None:
        raise _unknown(observation_id)
    return observation_out(found)


@router.delete(
    "/observations/{observation_id}",
    status_code=204,
    response_class=Response,
    summary="Delete an observation (its owner's write token required)",
)
def delete(observation_id: str, owner: WriterDep, store: StoreDep) -> Response:
    found = get_observation(store, observation_id)
    if found is None:
        raise _unknown(observation_id)
    if found.owner != owner:
        raise HTTPException(403, f"observation {observation_id} belongs to another owner; only its owner deletes it")
    if not delete_observation(store, observation_id):
        raise _unknown(observation_id)
    return Response(status_code=204)
