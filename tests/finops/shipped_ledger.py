# ruff: noqa
"""FROZEN: `provisioner/finops/ledger.py` as it shipped before Alembic (its own `schema_version` steps 1
to 3), kept verbatim below this docstring so the tests write a ledger exactly as that release did and
upgrade it. Do not edit."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

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
    create_engine,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine

from provisioner.finops.rows import ActionRow, BlockerRow, UsageRow

DEFAULT_PATH = "provisioner-ledger.sqlite"

_BIG = Integer().with_variant(BigInteger(), "postgresql")
"""Bytes of memory overflow 32-bit INTEGER on PostgreSQL; SQLite's INTEGER is 64-bit already."""

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("description", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

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
)


def _v1(conn: Connection) -> None:
    # The tables as version 1 shipped them: later steps add to them, so step 1 must not use the
    # current Table objects (they already have the later columns).
    v1 = MetaData()
    Table(
        "disruption_actions",
        v1,
        *(c._copy() for c in actions.columns if c.name not in _ADDED_LATER["disruption_actions"]),
        UniqueConstraint("command_id", "node", name="uq_action_command_node"),
    )
    Table("disruption_blockers", v1, *(c._copy() for c in blockers.columns))
    Table("node_usage", v1, *(c._copy() for c in usage.columns))
    v1.create_all(conn, checkfirst=True)


def _v2(conn: Connection) -> None:
    # Reports read by time window and pool. Plain DDL (both SQLite and PostgreSQL know IF NOT EXISTS):
    # an `Index` object would attach itself to the Table and be created again by step 1 on a new ledger.
    for name, table, column in (
        ("ix_actions_time", "disruption_actions", "time"),
        ("ix_actions_pool", "disruption_actions", "nodepool"),
        ("ix_blockers_time", "disruption_blockers", "time"),
        ("ix_usage_time", "node_usage", "time"),
    ):
        conn.execute(text(f"CREATE INDEX IF NOT EXISTS {name} ON {table} ({column})"))


def _v3(conn: Connection) -> None:
    conn.execute(
        text("ALTER TABLE disruption_actions ADD COLUMN replacement_nodes VARCHAR(2000) NOT NULL DEFAULT ''")
    )


_ADDED_LATER = {"disruption_actions": {"replacement_nodes"}}
"""Columns added by steps after 1, per table."""

MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "actions, blockers and node usage", _v1),
    (2, "indexes on time and pool", _v2),
    (3, "replacement node names on actions", _v3),
]
"""Schema steps in order. Append; never edit a step that has shipped."""

SCHEMA_VERSION = MIGRATIONS[-1][0]


def url_for(target: str | Path | None) -> str:
    """A SQLAlchemy URL from a URL, a file path, or None (the default SQLite file)."""
    if target is None:
        return f"sqlite:///{DEFAULT_PATH}"
    text = str(target)
    if "://" in text:
        if text.startswith("postgresql://"):
            # psycopg 3 is the driver we ship; SQLAlchemy's bare postgresql:// means psycopg2.
            return "postgresql+psycopg://" + text[len("postgresql://") :]
        return text
    return f"sqlite:///{text}"


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


class LedgerError(RuntimeError):
    """The ledger cannot be opened or is newer than this program."""


class Ledger:
    """A ledger on one database. `Ledger(url)` opens it and applies missing schema steps."""

    def __init__(self, target: str | Path | None = None, *, now: datetime | None = None) -> None:
        self.url = url_for(target)
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except Exception as err:  # bad URL or missing driver: say which
            raise LedgerError(f"cannot open ledger {self.url!r}: {err}") from err
        self.migrate(now=now)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- schema ------------------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            schema_version.create(conn, checkfirst=True)
            conn.commit()
            rows = conn.execute(select(schema_version.c.version)).scalars().all()
        return max(rows, default=0)

    def migrate(self, *, now: datetime | None = None) -> list[int]:
        """Apply the schema steps not yet applied; return their numbers."""
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise LedgerError(
                f"ledger {self.url} has schema version {current}, newer than this program's "
                f"{SCHEMA_VERSION}; upgrade the provisioner"
            )
        applied = []
        for version, description, step in MIGRATIONS:
            if version <= current:
                continue
            with self.engine.begin() as conn:
                step(conn)
                conn.execute(
                    insert(schema_version).values(
                        version=version, description=description, applied_at=_utc(now or datetime.now(UTC))
                    )
                )
            applied.append(version)
        return applied

    # ---- writing -----------------------------------------------------------------------------------

    def record_actions(self, rows: Iterable[ActionRow]) -> int:
        """Store action rows; a row already stored (same command and node) is not stored twice."""
        rows = list(rows)
        if not rows:
            return 0
        with self.engine.begin() as conn:
            ids = {r.command_id for r in rows}
            seen = {
                (c, n)
                for c, n in conn.execute(
                    select(actions.c.command_id, actions.c.node).where(actions.c.command_id.in_(ids))
                )
            }
            fresh = [r for r in rows if (r.command_id, r.node) not in seen]
            if fresh:
                conn.execute(
                    insert(actions),
                    [
                        {
                            "time": _utc(r.time),
                            "command_id": r.command_id,
                            "action": r.action,
                            "nodepool": r.nodepool,
                            "teams": ",".join(r.teams),
                            "node": r.node,
                            "instance_type": r.instance_type,
                            "capacity_type": r.capacity_type,
                            "zone": r.zone,
                            "reason": r.reason,
                            "method": r.method,
                            "price_per_hour": r.price_per_hour,
                            "replacement_type": r.replacement_type,
                            "replacement_capacity_type": r.replacement_capacity_type,
                            "replacement_price_per_hour": r.replacement_price_per_hour,
                            "savings_per_hour": r.savings_per_hour,
                            "estimated_monthly_savings": r.estimated_monthly_savings,
                            "pods_moved": r.pods_moved,
                            "pods": json.dumps(list(r.pods)),
                            "detail": r.detail,
                            "replacement_nodes": ",".join(r.replacement_nodes),
                        }
                        for r in fresh
                    ],
                )
        return len(fresh)

    def record_blockers(self, rows: Iterable[BlockerRow]) -> int:
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(blockers),
                    [
                        {
                            "time": _utc(r.time),
                            "evaluation_id": r.evaluation_id,
                            "node": r.node,
                            "nodepool": r.nodepool,
                            "kind": r.kind,
                            "method": r.method,
                            "detail": r.detail,
                        }
                        for r in rows
                    ],
                )
        return len(rows)

    def record_usage(self, rows: Iterable[UsageRow]) -> int:
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(usage),
                    [
                        {
                            "time": _utc(r.time),
                            "hours": r.hours,
                            "node": r.node,
                            "nodepool": r.nodepool,
                            "teams": ",".join(r.teams),
                            "instance_type": r.instance_type,
                            "capacity_type": r.capacity_type,
                            "price_per_hour": r.price_per_hour,
                            "cpu_capacity": r.cpu_capacity,
                            "cpu_allocated": r.cpu_allocated,
                            "memory_capacity": r.memory_capacity,
                            "memory_allocated": r.memory_allocated,
                            "gpu_capacity": r.gpu_capacity,
                            "gpu_allocated": r.gpu_allocated,
                        }
                        for r in rows
                    ],
                )
        return len(rows)

    # ---- reading -----------------------------------------------------------------------------------

    @staticmethod
    def _window(table: Table, since: datetime | None, until: datetime | None, pool: str | None):
        query = select(table).order_by(table.c.time, table.c.id)
        if since is not None:
            query = query.where(table.c.time >= _utc(since))
        if until is not None:
            query = query.where(table.c.time < _utc(until))
        if pool is not None:
            query = query.where(table.c.nodepool == pool)
        return query

    def actions(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[ActionRow]:
        with self.engine.connect() as conn:
            result = conn.execute(self._window(actions, since, until, pool)).mappings().all()
        return [
            ActionRow(
                time=_utc(m["time"]),
                command_id=m["command_id"],
                action=m["action"],
                nodepool=m["nodepool"],
                teams=_split(m["teams"]),
                node=m["node"],
                instance_type=m["instance_type"],
                capacity_type=m["capacity_type"],
                zone=m["zone"],
                reason=m["reason"],
                method=m["method"],
                price_per_hour=m["price_per_hour"],
                replacement_type=m["replacement_type"],
                replacement_capacity_type=m["replacement_capacity_type"],
                replacement_price_per_hour=m["replacement_price_per_hour"],
                savings_per_hour=m["savings_per_hour"],
                pods_moved=m["pods_moved"],
                pods=tuple(json.loads(m["pods"] or "[]")),
                detail=m["detail"],
                replacement_nodes=_split(m["replacement_nodes"]),
            )
            for m in result
        ]

    def blockers(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[BlockerRow]:
        with self.engine.connect() as conn:
            result = conn.execute(self._window(blockers, since, until, pool)).mappings().all()
        return [
            BlockerRow(
                time=_utc(m["time"]),
                evaluation_id=m["evaluation_id"],
                node=m["node"],
                nodepool=m["nodepool"],
                kind=m["kind"],
                method=m["method"],
                detail=m["detail"],
            )
            for m in result
        ]

    def usage(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[UsageRow]:
        with self.engine.connect() as conn:
            result = conn.execute(self._window(usage, since, until, pool)).mappings().all()
        return [
            UsageRow(
                time=_utc(m["time"]),
                hours=m["hours"],
                node=m["node"],
                nodepool=m["nodepool"],
                teams=_split(m["teams"]),
                instance_type=m["instance_type"],
                capacity_type=m["capacity_type"],
                price_per_hour=m["price_per_hour"],
                cpu_capacity=m["cpu_capacity"],
                cpu_allocated=m["cpu_allocated"],
                memory_capacity=m["memory_capacity"],
                memory_allocated=m["memory_allocated"],
                gpu_capacity=m["gpu_capacity"],
                gpu_allocated=m["gpu_allocated"],
            )
            for m in result
        ]


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(t for t in (text or "").split(",") if t)


def record_plan(ledger: Ledger, plan, *, evaluation_id: str) -> tuple[int, int]:
    """Store a plan's action and blocker rows; returns how many of each were stored."""
    from provisioner.finops.rows import plan_rows

    action_list, blocker_list = plan_rows(plan, evaluation_id=evaluation_id)
    return ledger.record_actions(action_list), ledger.record_blockers(blocker_list)


__all__: Sequence[str] = ("MIGRATIONS", "SCHEMA_VERSION", "Ledger", "LedgerError", "record_plan", "url_for")
