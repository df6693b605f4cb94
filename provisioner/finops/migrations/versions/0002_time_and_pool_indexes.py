"""Indexes on time and pool: reports read by time window and pool.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

INDEXES = (
    ("ix_actions_time", "disruption_actions", "time"),
    ("ix_actions_pool", "disruption_actions", "nodepool"),
    ("ix_blockers_time", "disruption_blockers", "time"),
    ("ix_usage_time", "node_usage", "time"),
)


def upgrade() -> None:
    for name, table, column in INDEXES:
        op.create_index(name, table, [column])


def downgrade() -> None:
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
