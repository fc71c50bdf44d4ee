"""Where the database is: DATABASE_URL, else PLANNER_DB_PATH, else the per-user data path."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import InvalidSpecError
from planner.store import database_url, default_db_path


def test_sqlite_file_by_default() -> None:
    url = database_url({"HOME": "/home/u", "XDG_DATA_HOME": "/data"})
    assert url.get_backend_name() == "sqlite" and url.database == "/data/layout-planner/planner.db"
    assert default_db_path({}) == Path.home() / ".local" / "share" / "layout-planner" / "planner.db"


def test_db_path_names_the_file() -> None:
    assert database_url({"PLANNER_DB_PATH": "/tmp/x/p.db"}).database == "/tmp/x/p.db"


def test_database_url_wins_and_uses_psycopg() -> None:
    url = database_url({"DATABASE_URL": "postgresql://u:p@db:5432/planner", "PLANNER_DB_PATH": "/tmp/x.db"})
    assert (url.drivername, url.host, url.port, url.database) == ("postgresql+psycopg", "db", 5432, "planner")
    assert database_url({"DATABASE_URL": "postgresql+psycopg://h/d"}).drivername == "postgresql+psycopg"


@pytest.mark.parametrize("raw", ["not a url", "mysql://h/d", "oracle://h/d"])
def test_other_urls_are_refused_naming_the_variable(raw: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        database_url({"DATABASE_URL": raw})
    assert caught.value.field == "DATABASE_URL"
