"""The best possible cost of a simulated run: per interval between changes of the pods wanting
capacity, the $/h of an exact optimum packing (None where HiGHS did not prove one), so `report costs`
can put it beside what the run paid.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "best_possible",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hours", sa.Float, nullable=False),
        sa.Column("cost_per_hour", sa.Float, nullable=True),
        sa.Column("status", sa.String(253), nullable=False),
        sa.Column("pods", sa.Integer, nullable=False),
    )
    op.create_index("ix_best_possible_time", "best_possible", ["time"])


def downgrade() -> None:
    op.drop_index("ix_best_possible_time", table_name="best_possible")
    op.drop_table("best_possible")
