"""Alembic migrations of the planner database (`engine.migrate` runs them)."""
