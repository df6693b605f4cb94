"""The FinOps ledger: every node removed or replaced, every blocker, every node-hour, in SQL.

SQLite in a local file by default, PostgreSQL (or anything SQLAlchemy speaks) by URL. The schema is
Alembic's: `provisioner/finops/migrations` holds the revisions, and opening a ledger upgrades it to the
newest (`alembic upgrade head` through Alembic's command API), so an old file or database upgrades in
place. A ledger written before Alembic (its own `schema_version` table, steps 1 to 3) is stamped with the
matching revision first, then upgraded; that table is kept, with a row that makes those older programs
refuse the upgraded ledger instead of writing to it.

Reservations have a table of their own (`reservation_usage`, revision 0005): each reservation's
instances, those running and used, per sample. A simulated run's best possible cost has one too
(`best_possible`, revision 0007).

Rows go in and come out as the values of `provisioner.finops.rows`; nothing else in the project touches
these tables. Times are stored in UTC.

Each table has its definition, writer and reader here, beside the migration bridge they share and the
batch path a large run needs (the driver's executemany on SQLite); the row <-> column conversions (each
repeated time, team list and JSON list converted once per batch) are `provisioner.finops.columns`'.

On SQLite every transaction, schema changes included, is SQLite's own (`BEGIN` ... `COMMIT`): Python's
sqlite3 driver would otherwise commit each CREATE and ALTER at once, and a controller killed in the middle
of an upgrade would leave a half-made schema that no later open could upgrade ("table already exists").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection, Engine

from provisioner.finops import columns as col
from provisioner.finops.rows import ActionRow, BestRow, BlockerRow, ReservationRow, UsageRow

Row = TypeVar("Row", UsageRow, ReservationRow)

DEFAULT_PATH = "provisioner-ledger.sqlite"
MIGRATIONS = Path(__file__).with_name("migrations")
"""Alembic's script directory (env.py and versions/)."""

LEGACY_REVISIONS = {1: "0001", 2: "0002", 3: "0003"}
"""The pre-Alembic `schema_version` steps and the revision each one equals."""

LOCK_KEY = 0x70726F76
"""PostgreSQL advisory lock held while migrating, so two replicas starting at once upgrade one at a time."""

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


def url_for(target: str | Path | None) -> str:
    """A SQLAlchemy URL from a URL, a file path, or None (the default SQLite file)."""
    if target is None:
        return f"sqlite:///{DEFAULT_PATH}"
    value = str(target)
    if "://" in value:
        if value.startswith("postgresql://"):
            # psycopg 3 is the driver we ship; SQLAlchemy's bare postgresql:// means psycopg2.
            return "postgresql+psycopg://" + value[len("postgresql://") :]
        return value
    return f"sqlite:///{value}"


class LedgerError(RuntimeError):
    """The ledger cannot be opened, or is newer than this program."""


def _alembic_config(conn: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def _bridge_legacy(conn: Connection) -> None:
    """Stamp a pre-Alembic ledger with the revision its `schema_version` says it reached."""
    tables = set(inspect(conn).get_table_names())
    if "alembic_version" in tables or "schema_version" not in tables:
        return
    version = conn.execute(text("SELECT MAX(version) FROM schema_version")).scalar() or 0
    if version not in LEGACY_REVISIONS:
        raise LedgerError(f"ledger schema_version {version} is not one this program knows (1 to 3)")
    from alembic import command

    command.stamp(_alembic_config(conn), LEGACY_REVISIONS[version])


def head_revision() -> str:
    """The newest revision this program ships."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def _transactional_sqlite(engine: Engine) -> None:
    """SQLAlchemy's recipe for SQLite transactions that hold DDL too: the driver begins nothing itself,
    and every SQLAlchemy transaction starts with an explicit BEGIN."""

    @event.listens_for(engine, "connect")
    def _driver_begins_nothing(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN")


class Ledger:
    """A ledger on one database. `Ledger(url)` opens it and upgrades its schema to the newest."""

    def __init__(self, target: str | Path | None = None, *, migrate: bool = True) -> None:
        self.url = url_for(target)
        try:
            self.engine: Engine = create_engine(self.url)
        except Exception as err:  # bad URL or missing driver: say which
            raise LedgerError(f"cannot open ledger {self.url!r}: {err}") from err
        if self.engine.dialect.name == "sqlite":
            _transactional_sqlite(self.engine)
        if migrate:
            self.migrate()

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- schema ------------------------------------------------------------------------------------

    def revision(self) -> str | None:
        """The Alembic revision the database is at (None: not created yet)."""
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()

    def migrate(self) -> None:
        """Upgrade the schema to the newest revision (a new database gets every table)."""
        from alembic import command
        from alembic.util import CommandError

        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": LOCK_KEY})
            _bridge_legacy(conn)
            try:
                command.upgrade(_alembic_config(conn), "head")
            except CommandError as err:
                # Alembic cannot find the database's revision among ours: a newer program wrote it.
                raise LedgerError(
                    f"ledger {self.engine.url.render_as_string(hide_password=True)} is at a schema "
                    f"revision this program does not know ({err}); it is newer than this program: "
                    "upgrade the provisioner"
                ) from None

    # ---- writing -----------------------------------------------------------------------------------

    def record_actions(self, rows: Iterable[ActionRow]) -> int:
        """Store action rows; a row already stored (same command and node) is not stored twice, so a
        retried write is harmless."""
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
                _insert(conn, actions, [col.action_values(r) for r in fresh])
        return len(fresh)

    def record_blockers(self, rows: Iterable[BlockerRow]) -> int:
        rows = list(rows)
        if rows:
            utc = col.memo(col.utc)
            with self.engine.begin() as conn:
                _insert(
                    conn,
                    blockers,
                    [
                        {
                            "time": utc(r.time),
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
            values = col.UsageValues()
            with self.engine.begin() as conn:
                _insert(conn, usage, [values(r) for r in rows])
        return len(rows)

    def record_reservations(self, rows: Iterable[ReservationRow]) -> int:
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                _insert(conn, reservation_usage, [col.reservation_values(r) for r in rows])
        return len(rows)

    def record_best(self, rows: Iterable[BestRow]) -> int:
        """Store a simulated run's best possible cost, interval by interval."""
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                _insert(
                    conn,
                    best_possible,
                    [
                        {
                            "time": col.utc(r.time),
                            "hours": r.hours,
                            "cost_per_hour": r.cost_per_hour,
                            "status": r.status,
                            "pods": r.pods,
                        }
                        for r in rows
                    ],
                )
        return len(rows)

    # ---- reading -----------------------------------------------------------------------------------

    def best(self) -> list[BestRow]:
        """The best possible cost rows of a simulated run (none for a controller's ledger)."""
        with self.engine.connect() as conn:
            result = conn.execute(select(best_possible).order_by(best_possible.c.time)).all()
        return [BestRow(col.utc(m.time), m.hours, m.cost_per_hour, m.status, m.pods) for m in result]

    @staticmethod
    def _window(
        table: Table,
        since: datetime | None,
        until: datetime | None,
        pool: str | None,
        conn: Connection | None = None,
    ) -> Select:
        """Rows that start in [since, until); with `conn`, on a table of rows that span `hours`, every row
        that overlaps the window (starting up to the longest row's hours before `since`)."""
        query = select(table).order_by(table.c.time, table.c.id)
        if since is not None and conn is not None:
            longest = conn.execute(select(func.max(table.c.hours))).scalar() or 0.0
            query = query.where(table.c.time >= col.utc(since) - timedelta(hours=float(longest)))
        elif since is not None:
            query = query.where(table.c.time >= col.utc(since))
        if until is not None:
            query = query.where(table.c.time < col.utc(until))
        if pool is not None:
            query = query.where(table.c.nodepool == pool)
        return query

    def pools(self) -> set[str]:
        """Every pool named by a row of any table, a reservation's pools included (to tell a pool without
        rows from a pool never seen)."""
        with self.engine.connect() as conn:
            names: set[str] = set()
            for table in (actions, blockers, usage):
                found: list[str] = list(conn.execute(select(table.c.nodepool).distinct()).scalars())
                names.update(found)
            lists: list[str] = list(conn.execute(select(reservation_usage.c.nodepools).distinct()).scalars())
            names.update(p for value in lists for p in col.split(value))
        return names

    def actions(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[ActionRow]:
        with self.engine.connect() as conn:
            result = conn.execute(self._window(actions, since, until, pool)).all()
        return [
            ActionRow(
                time=col.utc(m.time),
                command_id=m.command_id,
                action=m.action,
                nodepool=m.nodepool,
                teams=col.split(m.teams),
                node=m.node,
                instance_type=m.instance_type,
                capacity_type=m.capacity_type,
                zone=m.zone,
                reason=m.reason,
                method=m.method,
                price_per_hour=m.price_per_hour,
                replacement_type=m.replacement_type,
                replacement_capacity_type=m.replacement_capacity_type,
                replacement_price_per_hour=m.replacement_price_per_hour,
                savings_per_hour=m.savings_per_hour,
                pods_moved=m.pods_moved,
                pods=tuple(json.loads(m.pods or "[]")),
                detail=m.detail,
                replacement_nodes=col.split(m.replacement_nodes),
                evicted_pods=tuple(json.loads(m.evicted_pods or "[]")),
                evicted_per_hour=m.evicted_per_hour,
                workloads=tuple(json.loads(m.workloads or "[]")),
            )
            for m in result
        ]

    def blockers(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[BlockerRow]:
        utc = col.memo(col.utc)
        with self.engine.connect() as conn:
            result = conn.execute(self._window(blockers, since, until, pool)).all()
        return [
            BlockerRow(
                time=utc(m.time),
                evaluation_id=m.evaluation_id,
                node=m.node,
                nodepool=m.nodepool,
                kind=m.kind,
                method=m.method,
                detail=m.detail,
            )
            for m in result
        ]

    def usage(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[UsageRow]:
        """Usage rows that overlap [since, until), whole (the reports keep the part inside the window)."""
        utc, teams = col.memo(col.utc), col.memo(col.split)
        workloads, allocations = col.memo(col.strings), col.memo(col.allocations)
        with self.engine.connect() as conn:
            result = conn.execute(self._window(usage, since, until, pool, conn)).all()
        rows = [
            UsageRow(
                time=utc(m.time),
                hours=m.hours,
                node=m.node,
                nodepool=m.nodepool,
                teams=teams(m.teams),
                instance_type=m.instance_type,
                capacity_type=m.capacity_type,
                price_per_hour=m.price_per_hour,
                cpu_capacity=m.cpu_capacity,
                cpu_allocated=m.cpu_allocated,
                memory_capacity=m.memory_capacity,
                memory_allocated=m.memory_allocated,
                gpu_capacity=m.gpu_capacity,
                gpu_allocated=m.gpu_allocated,
                provider_id=m.provider_id,
                zone=m.zone,
                region=m.region,
                pool_owner=m.pool_owner,
                workloads=workloads(m.workloads),
                allocations=allocations(m.allocations),
                reservation_id=m.reservation_id,
            )
            for m in result
        ]
        return _overlapping(rows, since)

    def reservations(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[ReservationRow]:
        """Reservation samples in the window; with `pool`, those of reservations the pool may launch into."""
        with self.engine.connect() as conn:
            result = conn.execute(self._window(reservation_usage, since, until, None, conn)).all()
        rows = [
            ReservationRow(
                time=col.utc(m.time),
                hours=m.hours,
                reservation_id=m.reservation_id,
                kind=m.kind,
                instance_type=m.instance_type,
                zone=m.zone,
                price_per_hour=m.price_per_hour,
                instances=m.instances,
                running=m.running,
                used=m.used,
                gpus_per_instance=m.gpus_per_instance,
                gpu_allocated=m.gpu_allocated,
                nodepools=col.split(m.nodepools),
                ends_at=col.utc(m.ends_at) if m.ends_at is not None else None,
                owner=m.owner,
            )
            for m in result
        ]
        return [r for r in _overlapping(rows, since) if pool is None or pool in r.nodepools]


def _overlapping(rows: list[Row], since: datetime | None) -> list[Row]:
    """The rows whose span reaches past `since` (a row of no hours: that starts at or after it)."""
    if since is None:
        return rows
    start = col.utc(since)
    return [r for r in rows if r.time >= start or r.time + timedelta(hours=r.hours) > start]


def _insert(conn: Connection, table: Table, values: list[dict[str, Any]]) -> None:
    """INSERT rows given as column -> value, every row with the same columns.

    On SQLite straight through the driver's executemany, each value through its column type's own
    conversion (what SQLAlchemy would send, so the stored rows are the same): SQLAlchemy's processing of
    every row's parameters is most of the cost of a large batch, and a large run writes a row per node
    kept per evaluation. Other databases take SQLAlchemy's own path (multi-row INSERTs on PostgreSQL).
    """
    dialect = conn.dialect
    if dialect.name != "sqlite":
        conn.execute(insert(table), values)
        return
    compiled = insert(table).compile(dialect=dialect, column_keys=list(values[0]))
    assert compiled.positiontup is not None  # SQLite's parameters are positional
    columns = [
        (name, table.c[name].type.dialect_impl(dialect).bind_processor(dialect))
        for name in compiled.positiontup
    ]
    conn.exec_driver_sql(
        str(compiled),
        [
            tuple(v[name] if convert is None else convert(v[name]) for name, convert in columns)
            for v in values
        ],
    )


__all__: Sequence[str] = ("DEFAULT_PATH", "Ledger", "LedgerError", "head_revision", "url_for")
