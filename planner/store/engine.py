"""The database connection: engine set-up per backend, migrations on first use, sessions for reads and writes.

SQLite (the embedded default) runs in WAL mode with a busy timeout, so several uvicorn worker processes
write one file safely: readers never block, writers queue for up to `SQLITE_BUSY_TIMEOUT_S`. Every write
transaction starts `BEGIN IMMEDIATE` (it takes the write lock first), so a read-then-write (the next
version number) cannot be overtaken by another process. Source: SQLite's "Write-Ahead Logging" and
"BEGIN TRANSACTION" pages, and SQLAlchemy 2's pysqlite notes ("Serializable isolation / Savepoints /
Transactional DDL"), which take over BEGIN from the driver the same way.

PostgreSQL: migrations hold a transaction-scoped advisory lock, so replicas starting together upgrade once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

from planner.store.config import database_url

__all__ = ["MIGRATIONS_DIR", "Store", "migrate", "open_store"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
SQLITE_BUSY_TIMEOUT_S = 30.0
"""How long a SQLite writer waits for another process's write to finish before failing."""
_MIGRATION_LOCK = 0x706C616E6E6572
"""PostgreSQL advisory-lock key held while migrating ("planner" in ASCII)."""
_IMMEDIATE = "planner_sqlite_immediate"


def _sqlite_engine(url: URL) -> Engine:
    if _in_memory(url):  # one database per connection: keep a single connection, shared by every thread
        engine = create_engine(url, connect_args={"check_same_thread": False}, poolclass=StaticPool)
    else:
        Path(str(url.database)).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver issues no BEGIN of its own; `_begin` does
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")  # durable at each checkpoint; WAL keeps the file consistent
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        immediate = connection.get_execution_options().get(_IMMEDIATE, False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _in_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def _engine(url: URL) -> Engine:
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision in `migrations/` (Alembic), in one transaction, once."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.connect().execution_options(**{_IMMEDIATE: True}) as connection, connection.begin():
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


class Store:
    """An open database: `read()` and `write()` sessions. Store functions live in `observations` and
    `profile_versions`; each takes a Store."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._reads = sessionmaker(engine, expire_on_commit=False)
        self._writes = sessionmaker(engine.execution_options(**{_IMMEDIATE: True}), expire_on_commit=False)

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reads() as session, session.begin():
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session whose transaction commits on leaving the block (rolls back on an exception)."""
        with self._writes() as session, session.begin():
            yield session

    def close(self) -> None:
        self.engine.dispose()


_MIGRATED: set[str] = set()
_MIGRATED_LOCK = threading.Lock()


def open_store(url: URL | str | None = None) -> Store:
    """The database at `url` (default: `config.database_url()` from the environment), migrated to the newest
    schema on the first open in this process."""
    engine = _engine(database_url() if url is None else make_url(url))
    key = engine.url.render_as_string(hide_password=False)
    with _MIGRATED_LOCK:
        if key not in _MIGRATED:
            migrate(engine)
            if not _in_memory(engine.url):
                _MIGRATED.add(key)
    return Store(engine)
