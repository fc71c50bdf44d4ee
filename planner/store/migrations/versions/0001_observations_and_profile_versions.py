"""observations and profile_versions

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from planner.store.models import UtcDateTime

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "observations",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("profile_id", sa.String(129), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("measured", sa.JSON(), nullable=False),
        sa.Column("predicted", sa.JSON(), nullable=False),
        sa.Column("source", sa.JSON(), nullable=True),
        sa.Column("planner_version", sa.String(32), nullable=False),
    )
    op.create_index("ix_observations_owner", "observations", ["owner"])
    op.create_index("ix_observations_created_at", "observations", ["created_at"])
    op.create_index("ix_observations_profile_created", "observations", ["profile_id", "created_at"])
    op.create_table(
        "profile_versions",
        sa.Column("id", sa.String(129), nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("base_id", sa.String(64), nullable=False),
        sa.Column("site", sa.String(64), nullable=False),
        sa.Column("profile", sa.JSON(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("owner", sa.String(64), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", "version"),
    )
    op.create_index("ix_profile_versions_created_at", "profile_versions", ["created_at"])


def downgrade() -> None:
    op.drop_table("profile_versions")
    op.drop_table("observations")
