"""The planner's database: observations (measured runs) and stored versions of site profiles.

Persistence only, no math: SQLAlchemy 2 typed ORM (`models`), Alembic migrations kept in `migrations/`
and run by `open_store` on first use (service start-up, first CLI use). SQLite by default, in the file
`PLANNER_DB_PATH` (default `~/.local/share/layout-planner/planner.db`); PostgreSQL when `DATABASE_URL`
names one (`postgresql+psycopg://...`). Nothing else in `planner` imports this package.

To add a revision: write `migrations/versions/NNNN_<what>.py` by hand (Alembic's `op` calls, see 0001) with
`down_revision` set to the previous one, change `models.py` to match, and run tests/store (they compare
the migrated schema with the models).
"""

from planner.store.config import DATABASE_URL_ENV, DB_PATH_ENV, database_url, default_db_path
from planner.store.engine import Store, migrate, open_store
from planner.store.observations import (
    Observation,
    ObservationPage,
    add_observation,
    delete_observation,
    get_observation,
    list_observations,
)
from planner.store.profile_versions import (
    ProfileVersion,
    get_profile_version,
    list_profile_versions,
    newest_profile_versions,
    profile_versions_state,
    save_profile_version,
)
from planner.store.registry import LiveProfiles, ProfileRegistry

__all__ = [
    "DATABASE_URL_ENV",
    "DB_PATH_ENV",
    "LiveProfiles",
    "Observation",
    "ObservationPage",
    "ProfileRegistry",
    "ProfileVersion",
    "Store",
    "add_observation",
    "database_url",
    "default_db_path",
    "delete_observation",
    "get_observation",
    "get_profile_version",
    "list_observations",
    "list_profile_versions",
    "migrate",
    "newest_profile_versions",
    "open_store",
    "profile_versions_state",
    "save_profile_version",
]
