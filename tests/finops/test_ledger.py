"""The ledger: Alembic migrations (a new ledger, and one written by the release before Alembic), and
rows in and out, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from provisioner.finops.database import LedgerError, head_revision, url_for
from provisioner.finops.ledger import Ledger
from provisioner.finops.rows import BlockerRow, TeamAllocation
from testkit.builders import NOW as T0
from testkit.builders import action_row as action
from testkit.builders import reservation_row, usage_row
from tests.finops import shipped_ledger


def test_a_new_ledger_is_created_at_the_newest_revision(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        assert ledger.revision() == head_revision() == "0007"
        tables = set(inspect(ledger.engine).get_table_names())
    assert {
        "alembic_version",
        "disruption_actions",
        "disruption_blockers",
        "node_usage",
        "reservation_usage",
    } <= tables


def test_opening_a_ledger_again_changes_nothing(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.record_actions([action()])
    with Ledger(ledger_url) as ledger:
        assert ledger.revision() == head_revision()
        assert len(ledger.actions()) == 1


def test_a_ledger_of_the_release_before_alembic_is_upgraded_in_place_and_keeps_its_rows(
    ledger_url: str,
) -> None:
    old_action = action(replacement_nodes=("gpu-x1",))
    old_usage = usage_row()
    with shipped_ledger.Ledger(ledger_url, now=T0) as old:
        assert old.schema_version() == 3
        old.record_actions([old_action])
        old.record_usage([old_usage])
    with Ledger(ledger_url) as ledger:
        assert ledger.revision() == head_revision()
        (back,) = ledger.actions()
        assert back == old_action, "every field the old release stored reads back the same"
        assert back.evicted_pods == () and back.evicted_per_hour == 0.0
        (sample,) = ledger.usage()
        assert sample == old_usage
        ledger.record_actions(
            [action("n2", command_id="c2", evicted_pods=("ml/bare",), evicted_per_hour=0.5)]
        )
        assert [a.evicted_pods for a in ledger.actions()] == [(), ("ml/bare",)]
        index_names = {i["name"] for i in inspect(ledger.engine).get_indexes("disruption_actions")}
    assert {"ix_actions_time", "ix_actions_pool"} <= index_names
    with pytest.raises(Exception, match="newer than this program"):
        shipped_ledger.Ledger(ledger_url)


@pytest.mark.parametrize("step", [1, 2], ids=["v1", "v2"])
def test_a_ledger_stopped_at_an_early_pre_alembic_step_upgrades_too(ledger_url: str, step: int) -> None:
    engine = create_engine(url_for(ledger_url))
    with engine.begin() as conn:
        shipped_ledger.schema_version.create(conn)
        for version, description, apply in shipped_ledger.MIGRATIONS[:step]:
            apply(conn)
            conn.execute(
                shipped_ledger.schema_version.insert().values(
                    version=version, description=description, applied_at=T0
                )
            )
    engine.dispose()
    with Ledger(ledger_url) as ledger:
        assert ledger.revision() == head_revision()
        ledger.record_actions([action(replacement_nodes=("r1",))])
        assert ledger.actions()[0].replacement_nodes == ("r1",)


def test_a_ledger_newer_than_the_program_is_refused(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger, ledger.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(LedgerError, match="newer than this program"):
        Ledger(ledger_url)


def test_action_rows_round_trip_with_every_field(ledger_url: str) -> None:
    row = action(
        detail="GPU node held only by CPU pods",
        replacement_nodes=("gpu-pool-x1",),
        evicted_pods=("ml/bare",),
        evicted_per_hour=0.25,
        workloads=("ReplicaSet/ml/web-1",),
    )
    with Ledger(ledger_url) as ledger:
        assert ledger.record_actions([row]) == 1
        (back,) = ledger.actions()
    assert back == row
    assert back.estimated_monthly_savings == pytest.approx(1.5 * 730)


def test_an_action_recorded_twice_is_stored_once(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.record_actions([action()])
        assert ledger.record_actions([action(), action("n2")]) == 1
        assert [a.node for a in ledger.actions()] == ["n1", "n2"]


def test_actions_are_read_by_window_and_pool(ledger_url: str) -> None:
    rows = [
        action("old", command_id="a", time=T0 - timedelta(days=8)),
        action("cpu", command_id="b", pool="cpu"),
        action("gpu", command_id="c", time=T0 + timedelta(hours=1)),
    ]
    with Ledger(ledger_url) as ledger:
        ledger.record_actions(rows)
        assert [a.node for a in ledger.actions(since=T0 - timedelta(days=7))] == ["cpu", "gpu"]
        assert [a.node for a in ledger.actions(since=T0 - timedelta(days=7), pool="gpu")] == ["gpu"]
        assert [a.node for a in ledger.actions(until=T0)] == ["old"]


def test_blockers_and_usage_round_trip(ledger_url: str) -> None:
    blocker = BlockerRow(
        time=T0,
        evaluation_id="e1",
        node="n9",
        nodepool="gpu",
        kind="PDB",
        method="single-node",
        detail="PDB ml/web",
    )
    sample = usage_row(
        provider_id="aws:///us-east-1a/i-1",
        zone="us-east-1a",
        region="us-east-1",
        pool_owner="research",
        workloads=("Job/ml/train",),
        allocations=(TeamAllocation("research", 8000, 64 * 2**30, 2),),
    )
    with Ledger(ledger_url) as ledger:
        ledger.record_blockers([blocker])
        ledger.record_usage([sample])
        assert ledger.blockers() == [blocker]
        (back,) = ledger.usage()
    assert back == sample
    assert back.memory_capacity == 1152 * 2**30
    assert back.gpu_idle_hours == 6.0


def test_a_batch_of_rows_repeating_and_differing_in_times_and_lists_reads_back_row_for_row(
    ledger_url: str,
) -> None:
    # Each distinct time, team list and workload/allocation list of a batch is converted once, in and
    # out: rows that share some of them and differ in others must still come back each as written.
    later = T0 + timedelta(minutes=5)
    web, train = ("ReplicaSet/ml/web",), ("Job/ml/train",)
    research = (TeamAllocation("research", 8000, 64 * 2**30, 2),)
    samples = [
        usage_row("n1", time=T0, teams=("research",), workloads=web, allocations=research),
        usage_row("n2", time=T0, teams=("research",), workloads=train, allocations=research),
        usage_row("n3", time=T0, teams=(), workloads=(), allocations=()),
        usage_row("n1", time=later, teams=("research", "vision"), workloads=web + train),
        usage_row("n2", time=later, teams=("research",), workloads=train, allocations=research),
        usage_row("n3", time=later.replace(tzinfo=None), teams=(), workloads=web),
    ]
    kept = [
        BlockerRow(
            time=t, evaluation_id=e, node=n, nodepool="gpu", kind="PDB", method="single-node", detail="x"
        )
        for t, e, n in ((T0, "e1", "n1"), (T0, "e1", "n2"), (later, "e2", "n1"))
    ]
    with Ledger(ledger_url) as ledger:
        ledger.record_usage(samples)
        ledger.record_blockers(kept)
        back, blocked = ledger.usage(), ledger.blockers()
    assert back == [*samples[:5], dataclasses.replace(samples[5], time=later)]
    assert blocked == kept


def test_a_naive_time_is_taken_as_utc(ledger_url: str) -> None:
    with Ledger(ledger_url) as ledger:
        ledger.record_actions([action(time=T0.replace(tzinfo=None))])
        assert ledger.actions()[0].time == T0


def test_a_path_is_a_sqlite_file_and_postgresql_urls_use_psycopg(tmp_path: Path) -> None:
    assert url_for(tmp_path / "x.db") == f"sqlite:///{tmp_path / 'x.db'}"
    assert url_for("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert url_for(None).startswith("sqlite:///")


def test_a_ledger_of_the_release_before_reservations_upgrades_and_keeps_its_rows(ledger_url: str) -> None:
    """Revision 0004 is what the previous release shipped: its rows stay, and reservations can be added."""
    from alembic import command
    from sqlalchemy import column, insert, table

    from provisioner.finops.columns import UsageValues
    from provisioner.finops.database import alembic_config

    engine = create_engine(url_for(ledger_url))
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0004")
    engine.dispose()
    old = Ledger(ledger_url, migrate=False)
    assert old.revision() == "0004"
    old.record_actions([action()])
    # The columns that release wrote (later revisions add `reservation_id`).
    values = {k: v for k, v in UsageValues()(usage_row()).items() if k != "reservation_id"}
    with old.engine.begin() as conn:
        conn.execute(insert(table("node_usage", *map(column, values))), [values])
    old.close()
    with Ledger(ledger_url) as ledger:
        assert ledger.revision() == "0007"
        assert [a.node for a in ledger.actions()] == ["n1"] and len(ledger.usage()) == 1
        assert ledger.usage()[0].reservation_id == "", "an old row runs in no reservation"
        assert ledger.reservations() == []
        ledger.record_reservations([reservation_row()])
        assert [r.reservation_id for r in ledger.reservations()] == ["cr-1"]


def test_reservation_rows_round_trip_and_are_read_by_window_and_pool(ledger_url: str) -> None:
    block = reservation_row(
        "cb-1",
        time=T0 + timedelta(hours=1),
        kind="capacity-block",
        ends_at=T0 + timedelta(hours=6),
        nodepools=("h100", "h100-spare"),
    )
    rows = [reservation_row(time=T0 - timedelta(days=8)), reservation_row(), block]
    with Ledger(ledger_url) as ledger:
        assert ledger.record_reservations(rows) == 3
        assert ledger.reservations() == rows
        assert ledger.reservations(since=T0 - timedelta(days=7)) == rows[1:]
        assert ledger.reservations(pool="h100-spare") == [block]
