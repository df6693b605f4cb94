"""Honest money and showback: evicted bare pods and moved workloads on actions; the instance, zone,
region, pool owner, workloads and per-team allocations on usage samples.

It also leaves a row in the pre-Alembic `schema_version` table (creating it when missing) so that a
provisioner older than Alembic refuses this ledger ("newer than this program") instead of altering it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

LEGACY_MARKER = 4


def upgrade() -> None:
    with op.batch_alter_table("disruption_actions") as batch:
        batch.add_column(sa.Column("evicted_pods", sa.Text, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("evicted_per_hour", sa.Float, nullable=False, server_default="0"))
        batch.add_column(sa.Column("workloads", sa.Text, nullable=False, server_default="[]"))
    with op.batch_alter_table("node_usage") as batch:
        batch.add_column(sa.Column("provider_id", sa.String(512), nullable=False, server_default=""))
        batch.add_column(sa.Column("zone", sa.String(128), nullable=False, server_default=""))
        batch.add_column(sa.Column("region", sa.String(128), nullable=False, server_default=""))
        batch.add_column(sa.Column("pool_owner", sa.String(253), nullable=False, server_default=""))
        batch.add_column(sa.Column("workloads", sa.Text, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("allocations", sa.Text, nullable=False, server_default="[]"))
    bind = op.get_bind()
    legacy = sa.table(
        "schema_version",
        sa.column("version", sa.Integer),
        sa.column("description", sa.String),
        sa.column("applied_at", sa.DateTime(timezone=True)),
    )
    if not sa.inspect(bind).has_table("schema_version"):
        op.create_table(
            "schema_version",
            sa.Column("version", sa.Integer, primary_key=True),
            sa.Column("description", sa.String(200), nullable=False),
            sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
        )
    op.execute(
        legacy.insert().values(
            version=LEGACY_MARKER,
            description="managed by Alembic from here on",
            applied_at=datetime.now(UTC),
        )
    )


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM schema_version WHERE version = 4"))
    with op.batch_alter_table("node_usage") as batch:
        for column in ("allocations", "workloads", "pool_owner", "region", "zone", "provider_id"):
            batch.drop_column(column)
    with op.batch_alter_table("disruption_actions") as batch:
        for column in ("workloads", "evicted_per_hour", "evicted_pods"):
            batch.drop_column(column)
