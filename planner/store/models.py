"""The tables, as SQLAlchemy 2 typed ORM classes; `migrations/` creates them (keep the two in step)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, Index, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

__all__ = ["Base", "ObservationRow", "ProfileVersionRow", "UtcDateTime"]

ID_LENGTH = 36
"""A UUID in its text form."""
OWNER_LENGTH = 64
PROFILE_ID_LENGTH = 129
"""`base@site`: 64 + 1 + 64 (planner.profiles.PROFILE_ID_PATTERN)."""


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every backend (SQLite keeps no zone: it stores UTC and reads it back as UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("a stored time must carry its zone")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    pass


class ObservationRow(Base):
    """One measured run: the request as given, what was measured, the prediction when it arrived."""

    __tablename__ = "observations"
    __table_args__ = (Index("ix_observations_profile_created", "profile_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    owner: Mapped[str] = mapped_column(String(OWNER_LENGTH), index=True)
    profile_id: Mapped[str] = mapped_column(String(PROFILE_ID_LENGTH))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    measured: Mapped[dict[str, Any]] = mapped_column(JSON)
    predicted: Mapped[dict[str, Any]] = mapped_column(JSON)
    source: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    planner_version: Mapped[str] = mapped_column(String(32))


class ProfileVersionRow(Base):
    """One version of a site profile (`base@site`); versions count 1, 2, ... per id."""

    __tablename__ = "profile_versions"

    id: Mapped[str] = mapped_column(String(PROFILE_ID_LENGTH), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    base_id: Mapped[str] = mapped_column(String(64))
    site: Mapped[str] = mapped_column(String(64))
    profile: Mapped[dict[str, Any]] = mapped_column(JSON)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    owner: Mapped[str] = mapped_column(String(OWNER_LENGTH))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
