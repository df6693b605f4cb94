"""Actions, blockers and node usage: the tables as the first ledger shipped them.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_BIG = sa.Integer().with_variant(sa.BigInteger(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "disruption_actions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("command_id", sa.String(128), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("teams", sa.String(1000), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("capacity_type", sa.String(32), nullable=False),
        sa.Column("zone", sa.String(128), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("price_per_hour", sa.Float, nullable=False),
        sa.Column("replacement_type", sa.String(512)),
        sa.Column("replacement_capacity_type", sa.String(32)),
        sa.Column("replacement_price_per_hour", sa.Float, nullable=False),
        sa.Column("savings_per_hour", sa.Float, nullable=False),
        sa.Column("estimated_monthly_savings", sa.Float, nullable=False),
        sa.Column("pods_moved", sa.Integer, nullable=False),
        sa.Column("pods", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.UniqueConstraint("command_id", "node", name="uq_action_command_node"),
    )
    op.create_table(
        "disruption_blockers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evaluation_id", sa.String(128), nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_table(
        "node_usage",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hours", sa.Float, nullable=False),
        sa.Column("node", sa.String(253), nullable=False),
        sa.Column("nodepool", sa.String(253), nullable=False),
        sa.Column("teams", sa.String(1000), nullable=False),
        sa.Column("instance_type", sa.String(128), nullable=False),
        sa.Column("capacity_type", sa.String(32), nullable=False),
        sa.Column("price_per_hour", sa.Float, nullable=False),
        sa.Column("cpu_capacity", _BIG, nullable=False),
        sa.Column("cpu_allocated", _BIG, nullable=False),
        sa.Column("memory_capacity", _BIG, nullable=False),
        sa.Column("memory_allocated", _BIG, nullable=False),
        sa.Column("gpu_capacity", sa.Integer, nullable=False),
        sa.Column("gpu_allocated", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    for table in ("node_usage", "disruption_blockers", "disruption_actions"):
        op.drop_table(table)
