"""Where the database is: `DATABASE_URL` when it names one, else a SQLite file at `PLANNER_DB_PATH`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from planner.errors import InvalidSpecError

__all__ = ["DATABASE_URL_ENV", "DB_PATH_ENV", "database_url", "default_db_path"]

DATABASE_URL_ENV = "DATABASE_URL"
"""A SQLAlchemy URL; PostgreSQL (`postgresql+psycopg://user:pass@host/db`) for several replicas, or SQLite."""
DB_PATH_ENV = "PLANNER_DB_PATH"
"""The SQLite file used when DATABASE_URL is not set."""
_BACKENDS = ("sqlite", "postgresql")


def default_db_path(env: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/layout-planner/planner.db`, else `~/.local/share/layout-planner/planner.db` (XDG base dirs)."""
    data_home = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "layout-planner" / "planner.db"


def database_url(env: Mapping[str, str] | None = None) -> URL:
    """The database the service and the command line use, from the environment (`os.environ` by default)."""
    env = os.environ if env is None else env
    if raw := env.get(DATABASE_URL_ENV, "").strip():
        try:
            url = make_url(raw)
        except ArgumentError:
            example = "postgresql+psycopg://user:password@host/db"
            raise InvalidSpecError(DATABASE_URL_ENV, f"not a database URL (e.g. {example})") from None
        if url.get_backend_name() not in _BACKENDS:
            raise InvalidSpecError(DATABASE_URL_ENV, f"backend {url.get_backend_name()!r}; use postgresql or sqlite")
        if url.get_backend_name() == "postgresql":
            url = url.set(drivername="postgresql+psycopg")  # psycopg 3: the (synchronous) driver installed with us
        return url
    path = Path(env.get(DB_PATH_ENV) or default_db_path(env)).expanduser()
    return URL.create("sqlite", database=str(path))
