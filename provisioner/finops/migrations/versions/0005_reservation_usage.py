"""Reservation usage: one row per reservation and sample (instances held, running, used, $/h per instance,
GPUs), so the reports can say what reserved capacity cost and how much of it sat idle.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservation_usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hours", sa.Float, nullable=False),
        sa.Column("reservation_id", sa.String(253), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("zone", sa.String(128), nullable=False),
        sa.Column("price_per_hour", sa.Float, nullable=False),
        sa.Column("instances", sa.Integer, nullable=False),
        sa.Column("running", sa.Integer, nullable=False),
        sa.Column("used", sa.Float, nullable=False),
        sa.Column("gpus_per_instance", sa.Integer, nullable=False, server_default="0"),
        sa.Column("gpu_allocated", sa.Integer, nullable=False, server_default="0"),
        sa.Column("nodepools", sa.String(2000), nullable=False, server_default=""),
        sa.Column("ends_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_reservation_usage_time", "reservation_usage", ["time"])


def downgrade() -> None:
    op.drop_index("ix_reservation_usage_time", table_name="reservation_usage")
    op.drop_table("reservation_usage")
