"""Stored observations (measured runs): add, get, list (filtered, paged), delete. Persistence only."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, func, select

from planner.store.engine import Store
from planner.store.models import ObservationRow

__all__ = [
    "Observation",
    "ObservationPage",
    "add_observation",
    "delete_observation",
    "get_observation",
    "list_observations",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    id: str
    owner: str
    profile_id: str
    created_at: datetime
    request: dict[str, Any]
    measured: dict[str, Any]
    predicted: dict[str, Any]
    source: dict[str, Any] | None
    planner_version: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservationPage:
    items: list[Observation]
    total: int
    """Observations matching the filters, all pages together."""


def _record(row: ObservationRow) -> Observation:
    return Observation(
        id=row.id,
        owner=row.owner,
        profile_id=row.profile_id,
        created_at=row.created_at,
        request=row.request,
        measured=row.measured,
        predicted=row.predicted,
        source=row.source,
        planner_version=row.planner_version,
    )


def add_observation(
    store: Store,
    *,
    owner: str,
    profile_id: str,
    request: Mapping[str, Any],
    measured: Mapping[str, Any],
    predicted: Mapping[str, Any],
    planner_version: str,
    source: Mapping[str, Any] | None = None,
) -> Observation:
    """Store one observation under a new random id, stamped now (UTC)."""
    row = ObservationRow(
        id=str(uuid.uuid4()),
        owner=owner,
        profile_id=profile_id,
        created_at=datetime.now(UTC),
        request=dict(request),
        measured=dict(measured),
        predicted=dict(predicted),
        source=dict(source) if source is not None else None,
        planner_version=planner_version,
    )
    with store.write() as session:
        session.add(row)
    return _record(row)


def _is_id(text: str) -> bool:
    """Whether `text` is a UUID as ids are written; anything else names no observation (and never reaches SQL)."""
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def get_observation(store: Store, observation_id: str) -> Observation | None:
    if not _is_id(observation_id):
        return None
    with store.read() as session:
        row = session.get(ObservationRow, observation_id)
        return _record(row) if row is not None else None


def _filtered(query: Select[Any], profile: str | None, owner: str | None) -> Select[Any]:
    if profile is not None:
        query = query.where(ObservationRow.profile_id == profile)
    if owner is not None:
        query = query.where(ObservationRow.owner == owner)
    return query


def list_observations(
    store: Store, *, profile: str | None = None, owner: str | None = None, limit: int = 50, offset: int = 0
) -> ObservationPage:
    """One page of the observations matching the filters, oldest first (ties by id), and their total."""
    if limit < 0 or offset < 0:
        raise ValueError("limit and offset must be >= 0")
    with store.read() as session:
        total = session.scalar(_filtered(select(func.count()).select_from(ObservationRow), profile, owner)) or 0
        query = _filtered(select(ObservationRow), profile, owner)
        rows = session.scalars(
            query.order_by(ObservationRow.created_at, ObservationRow.id).limit(limit).offset(offset)
        ).all()
        return ObservationPage(items=[_record(r) for r in rows], total=total)


def delete_observation(store: Store, observation_id: str) -> bool:
    """Remove one observation; False when there was none with that id."""
    if not _is_id(observation_id):
        return False
    with store.write() as session:
        row = session.get(ObservationRow, observation_id)
        if row is None:
            return False
        session.delete(row)
        return True
