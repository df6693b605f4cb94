"""Replacement node names on actions (churn reads them).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("disruption_actions") as batch:
        batch.add_column(sa.Column("replacement_nodes", sa.String(2000), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("disruption_actions") as batch:
        batch.drop_column("replacement_nodes")
