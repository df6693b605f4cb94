"""The ledger's tables as the newest Alembic revision leaves them: `disruption_actions`,
`disruption_blockers`, `node_usage`, `reservation_usage` (revision 0005) and `best_possible` (revision
0007), on one `metadata`. The ledger reads and writes through these; Alembic's environment compares
against them; the revisions under `provisioner/finops/migrations` are written by hand and never import them.
A new column is a revision there and a `Column` here.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

_BIG = Integer().with_variant(BigInteger(), "postgresql")
"""Bytes of memory overflow 32-bit INTEGER on PostgreSQL; SQLite's INTEGER is 64-bit already."""

metadata = MetaData()
"""The tables as the newest revision leaves them (reading and writing use these; migrations do not)."""

actions = Table(
    "disruption_actions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("command_id", String(128), nullable=False),
    Column("action", String(16), nullable=False),
    Column("nodepool", String(253), nullable=False),
    Column("teams", String(1000), nullable=False, default=""),
    Column("node", String(253), nullable=False),
    Column("instance_type", String(128), nullable=False),
    Column("capacity_type", String(32), nullable=False),
    Column("zone", String(128), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("method", String(64), nullable=False),
    Column("price_per_hour", Float, nullable=False),
    Column("replacement_type", String(512)),
    Column("replacement_capacity_type", String(32)),
    Column("replacement_price_per_hour", Float, nullable=False, default=0.0),
    Column("savings_per_hour", Float, nullable=False),
    Column("estimated_monthly_savings", Float, nullable=False),
    Column("pods_moved", Integer, nullable=False),
    Column("pods", Text, nullable=False, default="[]"),
    Column("detail", Text, nullable=False, default=""),
    Column("replacement_nodes", String(2000), nullable=False, default=""),
    Column("evicted_pods", Text, nullable=False, default="[]"),
    Column("evicted_per_hour", Float, nullable=False, default=0.0),
    Column("workloads", Text, nullable=False, default="[]"),
    UniqueConstraint("command_id", "node", name="uq_action_command_node"),
)

blockers = Table(
    "disruption_blockers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("evaluation_id", String(128), nullable=False),
    Column("node", String(253), nullable=False),
    Column("nodepool", String(253), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("method", String(64), nullable=False),
    Column("detail", Text, nullable=False),
)

usage = Table(
    "node_usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("hours", Float, nullable=False),
    Column("node", String(253), nullable=False),
    Column("nodepool", String(253), nullable=False),
    Column("teams", String(1000), nullable=False, default=""),
    Column("instance_type", String(128), nullable=False),
    Column("capacity_type", String(32), nullable=False),
    Column("price_per_hour", Float, nullable=False),
    Column("cpu_capacity", _BIG, nullable=False),
    Column("cpu_allocated", _BIG, nullable=False),
    Column("memory_capacity", _BIG, nullable=False),
    Column("memory_allocated", _BIG, nullable=False),
    Column("gpu_capacity", Integer, nullable=False, default=0),
    Column("gpu_allocated", Integer, nullable=False, default=0),
    Column("provider_id", String(512), nullable=False, default=""),
    Column("zone", String(128), nullable=False, default=""),
    Column("region", String(128), nullable=False, default=""),
    Column("pool_owner", String(253), nullable=False, default=""),
    Column("workloads", Text, nullable=False, default="[]"),
    Column("allocations", Text, nullable=False, default="[]"),
    Column("reservation_id", String(253), nullable=False, default=""),
)

reservation_usage = Table(
    "reservation_usage",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("hours", Float, nullable=False),
    Column("reservation_id", String(253), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("instance_type", String(128), nullable=False),
    Column("zone", String(128), nullable=False),
    Column("price_per_hour", Float, nullable=False),
    Column("instances", Integer, nullable=False),
    Column("running", Integer, nullable=False),
    Column("used", Float, nullable=False),
    Column("gpus_per_instance", Integer, nullable=False, default=0),
    Column("gpu_allocated", Integer, nullable=False, default=0),
    Column("nodepools", String(2000), nullable=False, default=""),
    Column("ends_at", DateTime(timezone=True), nullable=True),
    Column("owner", String(253), nullable=False, default=""),
)


best_possible = Table(
    "best_possible",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("time", DateTime(timezone=True), nullable=False),
    Column("hours", Float, nullable=False),
    Column("cost_per_hour", Float, nullable=True),
    Column("status", String(253), nullable=False),
    Column("pods", Integer, nullable=False),
)
