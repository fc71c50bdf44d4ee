"""Stored versions of site profiles (`base@site`): save the next version, read the newest or a given one.

Persistence only: a profile arrives validated (`HardwareProfile`) and leaves as the JSON it was saved as.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError

from planner.errors import InvalidSpecError
from planner.profiles import HardwareProfile
from planner.store.engine import Store
from planner.store.models import ProfileVersionRow

__all__ = [
    "ProfileVersion",
    "get_profile_version",
    "list_profile_versions",
    "newest_profile_versions",
    "profile_versions_state",
    "save_profile_version",
]

_STATE = select(func.count(), func.max(ProfileVersionRow.created_at)).select_from(ProfileVersionRow)
_SAVE_TRIES = 20
"""Attempts at the next version number when another writer takes it first. Neither backend should need a second:
SQLite's write transactions serialise (`BEGIN IMMEDIATE`), and on PostgreSQL savers of one id queue on
`_VERSION_LOCK`; the retry stays as a guard."""
_VERSION_LOCK = text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:id))")
"""PostgreSQL: a transaction-scoped advisory lock per profile id, taken before reading the newest version, so
concurrent savers of one id queue instead of racing for the same number and retrying. Without it eight replicas
saving at once could each lose the race twenty times in a row (optimistic retries alone do not guarantee progress).
The two-key form keeps it apart from the migration lock (`engine._MIGRATION_LOCK`, one 64-bit key); PostgreSQL docs,
"Advisory Lock Functions": `pg_advisory_xact_lock(key1 int, key2 int)`, released at the transaction's end."""
_VERSION_LOCK_NAMESPACE = 0x706C6E72
"""First key of `_VERSION_LOCK` ("plnr" in ASCII)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileVersion:
    id: str
    version: int
    base_id: str
    site: str
    profile: dict[str, Any]
    report: dict[str, Any] | None
    owner: str
    created_at: datetime


def _record(row: ProfileVersionRow) -> ProfileVersion:
    return ProfileVersion(
        id=row.id,
        version=row.version,
        base_id=row.base_id,
        site=row.site,
        profile=row.profile,
        report=row.report,
        owner=row.owner,
        created_at=row.created_at,
    )


def _split(profile_id: str) -> tuple[str, str]:
    base, at, site = profile_id.partition("@")
    if not at:
        raise InvalidSpecError("profile.id", f"a stored profile is named base@site, not {profile_id!r}")
    return base, site


def save_profile_version(
    store: Store, profile: HardwareProfile, *, owner: str, report: Mapping[str, Any] | None = None
) -> ProfileVersion:
    """Store `profile` as the next version of its id (1 for the first); atomic against concurrent savers."""
    base, site = _split(profile.id)
    body = profile.model_dump(mode="json")
    for _ in range(_SAVE_TRIES):
        try:
            with store.write() as session:
                if store.backend == "postgresql":
                    session.execute(_VERSION_LOCK, {"namespace": _VERSION_LOCK_NAMESPACE, "id": profile.id})
                query = select(func.max(ProfileVersionRow.version)).where(ProfileVersionRow.id == profile.id)
                newest = session.scalar(query)
                row = ProfileVersionRow(
                    id=profile.id,
                    version=(newest or 0) + 1,
                    base_id=base,
                    site=site,
                    profile=body,
                    report=dict(report) if report is not None else None,
                    owner=owner,
                    created_at=datetime.now(UTC),
                )
                session.add(row)
            return _record(row)
        except IntegrityError:
            continue  # another writer saved the same version number first: read the newest again
    raise RuntimeError(f"could not save a version of {profile.id} after {_SAVE_TRIES} tries")


def get_profile_version(store: Store, profile_id: str, version: int | None = None) -> ProfileVersion | None:
    """The newest version of `profile_id`, or the given one; None when there is none."""
    with store.read() as session:
        query = select(ProfileVersionRow).where(ProfileVersionRow.id == profile_id)
        if version is not None:
            query = query.where(ProfileVersionRow.version == version)
        row = session.scalars(query.order_by(ProfileVersionRow.version.desc()).limit(1)).first()
        return _record(row) if row is not None else None


def list_profile_versions(store: Store, profile_id: str | None = None) -> list[ProfileVersion]:
    """Every stored version (of one id when given), by id then version."""
    with store.read() as session:
        query = select(ProfileVersionRow)
        if profile_id is not None:
            query = query.where(ProfileVersionRow.id == profile_id)
        rows = session.scalars(query.order_by(ProfileVersionRow.id, ProfileVersionRow.version)).all()
        return [_record(r) for r in rows]


def newest_profile_versions(store: Store) -> list[ProfileVersion]:
    """The newest version of each stored id, by id."""
    with store.read() as session:
        newest = (
            select(ProfileVersionRow.id, func.max(ProfileVersionRow.version).label("version"))
            .group_by(ProfileVersionRow.id)
            .subquery()
        )
        query = select(ProfileVersionRow).join(
            newest, (ProfileVersionRow.id == newest.c.id) & (ProfileVersionRow.version == newest.c.version)
        )
        return [_record(r) for r in session.scalars(query.order_by(ProfileVersionRow.id)).all()]


def profile_versions_state(store: Store) -> tuple[int, datetime | None]:
    """(count, newest created_at) of all versions: changes whenever a version is saved (none is ever deleted).

    One indexed aggregate on a plain connection (no ORM session: a third of the cost on SQLite), cheap
    enough for every request to ask whether its cached registry is current."""
    with store.engine.connect() as connection:
        count, newest = connection.execute(_STATE).one()
        return int(count), newest
