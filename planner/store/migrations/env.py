"""Alembic's entry for `planner.store.engine.migrate`: runs on the connection (and transaction) it is given."""

from __future__ import annotations

from alembic import context

from planner.store.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
