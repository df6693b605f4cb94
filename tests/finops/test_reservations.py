"""Reservation utilization, one rule per test: a reservation is paid whether used or not, used counts each
running node by what its pods request (GPUs on a GPU type), idle is the rest (empty slots and idle GPUs on
running nodes), per reservation and per clock hour; the scale-down report carries it in its headline and
every format; and the meter samples it from the pools' offerings and our nodes in it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.api.nodepool import DisruptionReason
from provisioner.cloudprovider.types import Offering, Reservation
from provisioner.disruption.model import Command, NodeRecord, PodMove
from provisioner.finops.action_rows import Launched, action_rows
from provisioner.finops.meter import UsageMeter
from provisioner.finops.reports import reservations, scale_down, scale_down_formats
from provisioner.finops.rows import ReservationRow, UsageRow
from provisioner.finops.samples import offered_reservations, reservation_rows
from provisioner.state.cluster import StateNode
from testkit.builders import NOW as T0
from testkit.builders import aws_node_class, reservation_row, usage_row
from tests.unit.disruption.builders import instance_type, node_pool, pod, snapshot, state_node

NOW = T0 + timedelta(hours=10)
SINCE = T0 - timedelta(days=1)


def build(rows: Sequence[ReservationRow], **kw: Any) -> reservations.ReservationReport:
    return reservations.build(rows, since=SINCE, now=NOW, **kw)


def test_a_half_empty_reservation_is_half_idle_and_its_idle_half_costs_the_reservation_price() -> None:
    (u,) = build([reservation_row(hours=2.0)]).reservations
    assert u.instance_hours == pytest.approx(4.0)
    assert (u.used_hours, u.idle_hours, u.utilization) == pytest.approx((2.0, 2.0, 0.5))
    assert u.cost == pytest.approx(4 * 55.04), "both instances, every hour, used or not"
    assert u.idle_cost == pytest.approx(2 * 55.04)
    assert (u.gpu_hours, u.gpu_idle_hours) == pytest.approx((32.0, 16.0))


def test_idle_gpus_on_a_running_reserved_node_count_as_idle_reserved_gpu_hours() -> None:
    row = reservation_row(instances=1, running=1, used=0.25, gpu_allocated=2)
    (u,) = build([row]).reservations
    assert u.gpu_idle_hours == pytest.approx(6.0)
    assert u.idle_cost == pytest.approx(0.75 * 55.04)


def test_instances_another_cluster_runs_in_the_reservation_count_as_used() -> None:
    """The cloud says both slots are taken, one by us (half its GPUs): the other is not ours to see into."""
    it = instance_type("p5", cpu=192, memory_gib=2048, price=55.04, gpus=8, gpu_name="h100")
    reservation = Reservation(id="cr-1", total=2, free=0, hourly_price=55.04)
    offer = Offering("zone-a", wk.CAPACITY_TYPE_RESERVED, 0.0, available=False, reservation=reservation)
    it = replace(it, offerings=(*it.offerings, offer))
    ours = state_node(
        "r1",
        it=it,
        capacity_type=wk.CAPACITY_TYPE_RESERVED,
        pods=[pod("train", gpus=4)],
        labels={wk.CAPACITY_RESERVATION_ID: "cr-1"},
    )
    other_pool = node_pool("on-demand-only")
    pools = [node_pool("h100", capacity_types=("reserved", "on-demand")), other_pool]
    snap = snapshot([ours], pools=pools)
    offered = offered_reservations(snap, {"h100": [it], "on-demand-only": [it]})
    (row,) = reservation_rows(snap, offered, time=T0, hours=1.0)
    expected: tuple[int, int, object] = (2, 2, pytest.approx(1.5))
    assert (row.instances, row.running, row.used) == expected
    assert (row.gpus_per_instance, row.gpu_allocated) == (8, 4 + 8)
    assert row.nodepools == ("h100",), "only the pools whose capacity-type requirement allows reserved"
    assert row.price_per_hour == 55.04


def test_a_sample_across_clock_hours_is_split_by_the_hours_it_covers() -> None:
    row = reservation_row(time=T0 + timedelta(minutes=30), hours=1.0, used=2.0, gpu_allocated=16)
    report = build([row])
    expected: list[tuple[datetime, object]] = [
        (T0, pytest.approx(1.0)),
        (T0 + timedelta(hours=1), pytest.approx(1.0)),
    ]
    assert [(h.hour, h.usage.instance_hours) for h in report.hours] == expected
    assert sum(h.usage.idle_cost for h in report.hours) == pytest.approx(0.0)


def test_one_pool_sees_only_the_reservations_it_may_launch_into() -> None:
    rows = [reservation_row("cr-a", nodepools=("a",)), reservation_row("cr-b", nodepools=("a", "b"))]
    assert [u.name for u in build(rows, pool="b").reservations] == ["cr-b"]
    assert build(rows).total.instances == 4


def test_the_scale_down_report_shows_idle_reserved_gpu_hours_and_cost_in_its_headline_and_every_format() -> (
    None
):
    report = scale_down.build(
        [], [], [usage_row()], since=SINCE, now=NOW, reservations=[reservation_row(hours=2.0)]
    )
    figures = dict(scale_down_formats.headline(report))
    assert figures["Idle reserved GPUs"] == "16.0 GPU-hours of 32.0"
    assert figures["Idle reserved"] == "$110.08"
    assert figures["Reserved paid"] == "$220.16 (50% used)"
    assert "Reservations (paid whether used or not)" in scale_down_formats.to_table(report)
    doc = json.loads(scale_down_formats.to_json(report))
    assert doc["reservations"]["total"]["gpuIdleHours"] == 16.0
    assert doc["reservations"]["reservations"][0]["id"] == "cr-1"
    (line,) = [
        r
        for r in csv.DictReader(io.StringIO(scale_down_formats.to_csv(report)))
        if r["section"] == "reservation"
    ]
    assert (line["name"], float(line["idle_cost"]), float(line["gpu_idle_hours"])) == ("cr-1", 110.08, 16.0)
    page = scale_down_formats.to_html(report)
    assert (
        "Reserved capacity" in page
        and "Idle reserved GPUs" in page
        and "Reserved instance-hours per hour" in page
    )


def test_without_reservations_the_scale_down_report_says_nothing_of_them() -> None:
    report = scale_down.build([], [], [usage_row()], since=SINCE, now=NOW)
    assert report.reservations is None
    assert "Idle reserved" not in dict(scale_down_formats.headline(report))
    assert json.loads(scale_down_formats.to_json(report))["reservations"] is None
    assert "Reserved capacity" not in scale_down_formats.to_html(report)


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_the_reservations_report_renders_per_reservation_and_per_hour(fmt: str) -> None:
    report = build([reservation_row(hours=2.0), reservation_row("cb-1", kind="capacity-block")])
    text = reservations.RENDERERS[fmt](report)
    assert "cr-1" in text and "cb-1" in text
    if fmt == "json":
        doc = json.loads(text)
        assert [r["id"] for r in doc["reservations"]] == ["cr-1", "cb-1"], "most idle money first"
        assert len(doc["hours"]) == 3


def test_a_node_moved_from_on_demand_into_a_reservation_saves_the_whole_on_demand_price() -> None:
    node = state_node("od", it=instance_type("p5", price=55.04))
    record = NodeRecord(
        node="od",
        nodepool="h100",
        reason=DisruptionReason.RETURN_TO_PREFERRED,
        instance_type="p5",
        capacity_type="on-demand",
        zone="zone-a",
        price_per_hour=55.04,
        pods=(PodMove(pod="ml/train", destination="new:p5"),),
        replacement_type="p5",
        replacement_capacity_type="reserved",
        replacement_price_per_hour=0.0,
    )
    command = Command(
        reason=DisruptionReason.RETURN_TO_PREFERRED,
        method="return-to-preferred",
        nodes=(node,),
        records=(record,),
    )
    launched = [Launched("r1", "p5", "reserved", price_per_hour=0.0)]
    (row,) = action_rows(command, time=T0, command_id="c", launched=launched)
    assert row.savings_per_hour == pytest.approx(55.04)


def test_a_reserved_node_moved_onto_on_demand_is_not_a_saving_and_shows_what_it_costs() -> None:
    """A Capacity Block ending: its $0 node is replaced by an on-demand one, really launched at $55.04/h."""
    node = state_node("cb", it=instance_type("p5", price=55.04), capacity_type="on-demand", price=0.0)
    record = NodeRecord(
        node="cb",
        nodepool="h100",
        reason=DisruptionReason.EXPIRED,
        instance_type="p5",
        capacity_type="reserved",
        zone="zone-a",
        price_per_hour=0.0,
        pods=(PodMove(pod="ml/train", destination="new:p5"),),
        replacement_type="p5",
        replacement_capacity_type="on-demand",
        replacement_price_per_hour=55.04,
    )
    command = Command(
        reason=DisruptionReason.EXPIRED, method="capacity-block-ending", nodes=(node,), records=(record,)
    )
    launched = [Launched("r1", "p5", "on-demand", price_per_hour=55.04)]
    (row,) = action_rows(command, time=T0, command_id="c", launched=launched)
    assert row.replacement_price_per_hour == pytest.approx(55.04)
    assert row.savings_per_hour == 0.0 and not row.is_saving
    assert row.change_per_hour == pytest.approx(-55.04), "the fleet's $/h rose by the on-demand price"


def test_the_meter_bills_a_reservation_while_offered_and_cuts_its_row_where_a_node_leaves() -> None:
    it = instance_type("p5", cpu=192, memory_gib=2048, price=55.04, gpus=8, gpu_name="h100")
    reservation = Reservation(id="cr-1", total=1, free=0, hourly_price=55.04)
    offer = Offering("zone-a", "reserved", 0.0, available=False, reservation=reservation)
    with_it = replace(it, offerings=(*it.offerings, offer))
    pools = [node_pool("h100", capacity_types=("reserved",))]
    busy = state_node(
        "r1",
        it=with_it,
        capacity_type="reserved",
        pods=[pod("train", gpus=8)],
        labels={wk.CAPACITY_RESERVATION_ID: "cr-1"},
    )
    running, gone = snapshot([busy], pools=pools), snapshot([], pools=pools)
    offered = offered_reservations(running, {"h100": [with_it]})
    meter = UsageMeter(interval=timedelta(minutes=5))
    at = [T0 + timedelta(minutes=m) for m in range(0, 13)]
    rows = meter.observe_reservations(running, offered, at[0])
    assert rows == [], "nothing to bill at the first sight"
    rows += meter.observe_reservations(running, offered, at[2])
    rows += meter.observe_reservations(gone, offered, at[3])  # the node left: cut here
    rows += meter.observe_reservations(gone, offered, at[5])  # the interval: every row up to now
    rows += meter.observe_reservations(gone, offered, at[6])
    rows += meter.observe_reservations(gone, [], at[7])  # no longer offered: billed to the last pass offered
    assert [(r.time, round(r.hours * 60), r.used) for r in rows] == [
        (at[0], 3, 1.0),
        (at[3], 2, 0.0),
        (at[5], 1, 0.0),
    ]
    assert sum(r.idle_cost for r in rows) == pytest.approx(55.04 * 3 / 60)
    assert sum(r.gpu_idle_hours for r in rows) == pytest.approx(8 * 3 / 60)


def test_report_reservations_reads_the_ledger_in_each_format(ledger_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from provisioner.cli.main import app
    from provisioner.finops.ledger import Ledger

    with Ledger(ledger_url) as ledger:
        ledger.record_usage([usage_row()])
        ledger.record_reservations(
            [reservation_row(hours=2.0), reservation_row("cr-2", nodepools=("other",))]
        )
    base = ["report", "reservations", "--ledger", str(ledger_url), "--now", NOW.isoformat()]
    runner = CliRunner()
    result = runner.invoke(app, [*base, "-o", "json", "--pool", "h100"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["id"] for r in doc["reservations"]] == ["cr-1"]
    assert doc["total"]["idleCost"] == pytest.approx(110.08)
    table = runner.invoke(app, base)
    assert table.exit_code == 0, table.output
    assert "Idle reserved GPUs: 24.0 GPU-hours of 48.0" in table.stdout
    written = tmp_path / "reserved.csv"
    assert runner.invoke(app, [*base, "--write", str(written)]).exit_code == 0
    header, *rows = written.read_text().splitlines()
    assert header.startswith("hour,name,kind,instance_type")
    assert len(rows) == 3 + 2 + 1, "per hour and reservation (cr-1 spans 2 h), per reservation, the total"
    refused = runner.invoke(app, [*base, "-o", "html"])
    assert refused.exit_code == 2 and "allowed: table, csv, json" in refused.output


def test_the_recorder_keeps_reservation_rows_while_the_database_is_down(tmp_path: Path) -> None:
    from provisioner.finops.ledger import Ledger
    from provisioner.finops.recorder import LedgerRecorder

    target = tmp_path / "down" / "ledger.sqlite"
    failures: list[str] = []
    recorder = LedgerRecorder(
        str(target), background=False, attempts=1, retry_wait=0, on_failure=failures.append
    )
    recorder.reservations([reservation_row()])
    assert (failures, recorder.pending) == (["reservations"], 1)
    target.parent.mkdir()
    assert recorder.flush() and recorder.written["reservations"] == 1
    recorder.stop()
    with Ledger(target) as ledger:
        assert [r.reservation_id for r in ledger.reservations()] == ["cr-1"]


def test_a_reservations_idle_part_belongs_to_the_team_its_nodeclass_names_else_its_pools_owner() -> None:
    it = instance_type("p5", cpu=192, memory_gib=2048, price=55.04, gpus=8, gpu_name="h100")
    reservation = Reservation(id="cr-1", total=2, free=1, hourly_price=55.04)
    with_it = replace(
        it, offerings=(*it.offerings, Offering("zone-a", "reserved", 0.0, reservation=reservation))
    )
    owned = node_pool("h100", capacity_types=("reserved",))
    owned.metadata.labels[wk.TEAM] = "platform"
    node = state_node(
        "r1",
        it=with_it,
        capacity_type="reserved",
        pods=[pod("train", gpus=8)],
        labels={wk.CAPACITY_RESERVATION_ID: "cr-1"},
    )
    by_pool = offered_reservations(snapshot([node], pools=[owned]), {"h100": [with_it]})
    assert [o.owner for o in by_pool] == ["platform"], "no NodeClass names a team: the pool's owner"
    labelled = aws_node_class()
    labelled.metadata.labels[wk.TEAM] = "ml-infra"
    named = replace(snapshot([node], pools=[owned]), nodeclasses={("AWSNodeClass", "default"): labelled})
    (offered,) = offered_reservations(named, {"h100": [with_it]})
    assert offered.owner == "ml-infra"
    (row,) = reservation_rows(named, [offered], time=T0, hours=1.0)
    assert row.owner == "ml-infra"
    used = usage_row_of(node)
    assert used.reservation_id == "cr-1" and used.price_per_hour == 0.0


def usage_row_of(node: StateNode) -> UsageRow:
    from provisioner.finops.samples import usage_row as row_of

    return row_of(node, time=T0, hours=1.0, teams={})
