"""The FinOps ledger: every node removed or replaced, every blocker, every node-hour, in SQL.

SQLite in a local file by default, PostgreSQL (or anything SQLAlchemy speaks) by URL; opening a ledger
upgrades its schema to the newest revision (`provisioner.finops.database` owns the database, its URL and
its Alembic upgrades; `provisioner.finops.tables` the tables). Reservations have a table of their own:
each reservation's instances, those running and used, per sample. A simulated run's best possible cost
has one too.

Rows go in and come out as the values of `provisioner.finops.rows`; nothing else in the project reads or
writes these tables. Times are stored in UTC.

Each table's writer and reader are here, beside the batch path a large run needs (the driver's
executemany on SQLite); the row <-> column conversions (each repeated time, team list and JSON list
converted once per batch) are `provisioner.finops.columns`'.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import DateTime, Select, Table, func, insert, select
from sqlalchemy.engine import Connection, Engine

from provisioner.finops import columns as col
from provisioner.finops import database, tables
from provisioner.finops.rows import ActionRow, BestRow, BlockerRow, ReservationRow, UsageRow

Row = TypeVar("Row", UsageRow, ReservationRow)


class Ledger:
    """A ledger on one database. `Ledger(url)` opens it and upgrades its schema to the newest."""

    def __init__(self, target: str | Path | None = None, *, migrate: bool = True) -> None:
        self.url = database.url_for(target)
        self.engine: Engine = database.engine_for(self.url)
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
        return database.revision(self.engine)

    def migrate(self) -> None:
        """Upgrade the schema to the newest revision (a new database gets every table)."""
        database.upgrade(self.engine)

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
                    select(tables.actions.c.command_id, tables.actions.c.node).where(
                        tables.actions.c.command_id.in_(ids)
                    )
                )
            }
            fresh = [r for r in rows if (r.command_id, r.node) not in seen]
            if fresh:
                _insert(conn, tables.actions, [col.action_values(r) for r in fresh])
        return len(fresh)

    def record_blockers(self, rows: Iterable[BlockerRow]) -> int:
        rows = list(rows)
        if rows:
            utc = col.memo(col.utc)
            with self.engine.begin() as conn:
                _insert(
                    conn,
                    tables.blockers,
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
                _insert(conn, tables.usage, [values(r) for r in rows])
        return len(rows)

    def record_reservations(self, rows: Iterable[ReservationRow]) -> int:
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                _insert(conn, tables.reservation_usage, [col.reservation_values(r) for r in rows])
        return len(rows)

    def record_best(self, rows: Iterable[BestRow]) -> int:
        """Store a simulated run's best possible cost, interval by interval."""
        rows = list(rows)
        if rows:
            with self.engine.begin() as conn:
                _insert(
                    conn,
                    tables.best_possible,
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
            result = conn.execute(select(tables.best_possible).order_by(tables.best_possible.c.time)).all()
        return [BestRow(col.utc(m.time), m.hours, m.cost_per_hour, m.status, m.pods) for m in result]

    @staticmethod
    def _window(
        table: Table,
        since: datetime | None,
        until: datetime | None,
        pool: str | None,
        conn: Connection | None = None,
        *,
        columns: Sequence[str] | None = None,
    ) -> Select[Any]:
        """Rows that start in [since, until); with `conn`, on a table of rows that span `hours`, every row
        that overlaps the window (starting up to the longest row's hours before `since`). `columns`: these
        columns in this order (default: every column of the table)."""
        query = select(table) if columns is None else select(*(table.c[name] for name in columns))
        query = query.order_by(table.c.time, table.c.id)
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
            for table in (tables.actions, tables.blockers, tables.usage):
                found: list[str] = list(conn.execute(select(table.c.nodepool).distinct()).scalars())
                names.update(found)
            lists: list[str] = list(
                conn.execute(select(tables.reservation_usage.c.nodepools).distinct()).scalars()
            )
            names.update(p for value in lists for p in col.split(value))
        return names

    def actions(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[ActionRow]:
        with self.engine.connect() as conn:
            result = conn.execute(self._window(tables.actions, since, until, pool)).all()
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
            result = conn.execute(self._window(tables.blockers, since, until, pool)).all()
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
            result = cast(
                Iterable[tuple[Any, ...]],
                conn.execute(self._window(tables.usage, since, until, pool, conn, columns=_USAGE)),
            )
            # Unpacked by position (the columns selected, `_USAGE`): a large run reads hundreds of
            # thousands of rows, and a Row's attribute lookup costs more than the rest of the row.
            rows = [
                UsageRow(
                    time=utc(time),
                    hours=hours,
                    node=node,
                    nodepool=nodepool,
                    teams=teams(team_names),
                    instance_type=instance_type,
                    capacity_type=capacity_type,
                    price_per_hour=price_per_hour,
                    cpu_capacity=cpu_capacity,
                    cpu_allocated=cpu_allocated,
                    memory_capacity=memory_capacity,
                    memory_allocated=memory_allocated,
                    gpu_capacity=gpu_capacity,
                    gpu_allocated=gpu_allocated,
                    provider_id=provider_id,
                    zone=zone,
                    region=region,
                    pool_owner=pool_owner,
                    workloads=workloads(workload_names),
                    allocations=allocations(team_allocations),
                    reservation_id=reservation_id,
                )
                for (
                    time,
                    hours,
                    node,
                    nodepool,
                    team_names,
                    instance_type,
                    capacity_type,
                    price_per_hour,
                    cpu_capacity,
                    cpu_allocated,
                    memory_capacity,
                    memory_allocated,
                    gpu_capacity,
                    gpu_allocated,
                    provider_id,
                    zone,
                    region,
                    pool_owner,
                    workload_names,
                    team_allocations,
                    reservation_id,
                ) in result
            ]
        return _overlapping(rows, since)

    def reservations(
        self, *, since: datetime | None = None, until: datetime | None = None, pool: str | None = None
    ) -> list[ReservationRow]:
        """Reservation samples in the window; with `pool`, those of reservations the pool may launch into."""
        with self.engine.connect() as conn:
            result = conn.execute(self._window(tables.reservation_usage, since, until, None, conn)).all()
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


_USAGE = (
    "time",
    "hours",
    "node",
    "nodepool",
    "teams",
    "instance_type",
    "capacity_type",
    "price_per_hour",
    "cpu_capacity",
    "cpu_allocated",
    "memory_capacity",
    "memory_allocated",
    "gpu_capacity",
    "gpu_allocated",
    "provider_id",
    "zone",
    "region",
    "pool_owner",
    "workloads",
    "allocations",
    "reservation_id",
)
"""The usage columns `Ledger.usage` reads, in the order it unpacks them."""


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
    names = list(compiled.positiontup)
    converts: list[tuple[int, Callable[[Any], Any]]] = []
    for index, name in enumerate(names):
        processor = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None:
            # A batch's times repeat (an evaluation's blockers, a sample's nodes): each converted once.
            converts.append(
                (index, col.memo(processor) if isinstance(table.c[name].type, DateTime) else processor)
            )
    params: list[tuple[Any, ...]] = []
    for v in values:
        row = [v[name] for name in names]
        for index, convert in converts:
            row[index] = convert(row[index])
        params.append(tuple(row))
    conn.exec_driver_sql(str(compiled), params)


__all__: Sequence[str] = ("Ledger",)
