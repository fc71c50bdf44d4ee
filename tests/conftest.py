"""Every test process (and every service it starts) uses a database of its own, never the user's.

PLANNER_DB_PATH points at a file in a temporary directory made for this session; DATABASE_URL and
PLANNER_WRITE_TOKENS are cleared, so a developer's environment cannot change what the tests see
(tests that need tokens or PostgreSQL pass them explicitly: tests/store, tests/api/test_observations.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from planner.store import open_store

_DB_DIR = tempfile.mkdtemp(prefix="planner-tests-")
os.environ["PLANNER_DB_PATH"] = os.path.join(_DB_DIR, "planner.db")
os.environ.pop("DATABASE_URL", None)
os.environ.pop("PLANNER_WRITE_TOKENS", None)


def pytest_unconfigure() -> None:
    shutil.rmtree(_DB_DIR, ignore_errors=True)


TEST_DATABASE_URL_ENV = "PLANNER_TEST_DATABASE_URL"
"""A PostgreSQL database the storage tests may empty and fill (.ci/run starts one: tools/pg_throwaway.sh)."""
REQUIRE_POSTGRES_ENV = "PLANNER_REQUIRE_POSTGRES"
"""Set to 1 (as .ci/run does) to fail, not skip, the PostgreSQL half of the storage tests without a server."""
BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty, migrated database of each backend: a new SQLite file; the test PostgreSQL database, emptied."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'planner.db'}"
        return
    url = os.environ.get(TEST_DATABASE_URL_ENV, "")
    if not url:
        if os.environ.get(REQUIRE_POSTGRES_ENV) == "1":
            pytest.fail(f"{REQUIRE_POSTGRES_ENV}=1 but {TEST_DATABASE_URL_ENV} names no PostgreSQL database")
        pytest.skip(f"no PostgreSQL: set {TEST_DATABASE_URL_ENV} (tools/pg_throwaway.sh starts one)")
    store = open_store(url)
    with store.write() as session:
        session.execute(text("TRUNCATE observations, profile_versions"))
    store.close()
    yield url
