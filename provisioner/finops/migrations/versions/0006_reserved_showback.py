"""Reserved showback: each usage row names the reservation its node runs in (`reservation_id`), and each
reservation sample names who owns its idle part (`owner`), so `report costs` charges reserved capacity
to the teams that used it and its idle part to its owner.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node_usage") as batch:
        batch.add_column(sa.Column("reservation_id", sa.String(253), nullable=False, server_default=""))
    with op.batch_alter_table("reservation_usage") as batch:
        batch.add_column(sa.Column("owner", sa.String(253), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("reservation_usage") as batch:
        batch.drop_column("owner")
    with op.batch_alter_table("node_usage") as batch:
        batch.drop_column("reservation_id")
