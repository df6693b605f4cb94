"""The best possible beside what a run paid: `simulate --best-possible` solves each interval's optimum
(HiGHS), the ledger keeps it, `report costs` and the scale-down report say "paid $X, best possible $Y,
realized Z% of the possible saving"."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from provisioner.finops.ledger import Ledger
from provisioner.finops.reports import best
from provisioner.finops.rows import BestRow
from testkit.builders import NOW as T0
from testkit.builders import usage_row
from tests.e2e import test_timeline as timeline


def test_paid_and_best_cover_the_same_solved_hours_and_the_share_is_of_the_possible_saving() -> None:
    rows = [
        BestRow(T0, 1.0, 10.0, "optimal", 3),
        BestRow(T0 + timedelta(hours=1), 1.0, None, "time limit reached", 3),
    ]
    usage = [usage_row("a", time=T0, hours=2.0, price_per_hour=14.0)]
    found = best.compare(rows, usage, realized=6.0, since=T0, now=T0 + timedelta(hours=2))
    assert found is not None
    assert (found.paid, found.best, found.solved_hours, found.hours) == (14.0, 10.0, 1.0, 2.0)
    assert found.realized_share == pytest.approx(6.0 / (14.0 + 6.0 - 10.0))
    assert found.sentence().startswith(
        "paid $14.00, best possible $10.00, realized 60% of the possible saving"
    )
    assert "1.0 h of 2.0 h" in found.sentence()
    assert (
        best.compare(rows, usage, realized=0.0, since=T0 + timedelta(hours=3), now=T0 + timedelta(hours=4))
        is None
    )


def test_nothing_left_to_save_has_no_share() -> None:
    found = best.compare(
        [BestRow(T0, 1.0, 14.0, "optimal", 1)],
        [usage_row("a", time=T0, hours=1.0, price_per_hour=14.0)],
        realized=0.0,
        since=T0,
        now=T0 + timedelta(hours=1),
    )
    assert found is not None and found.realized_share is None
    assert found.sentence().endswith("nothing more to save")


def test_simulate_best_possible_is_in_the_json_the_ledger_and_report_costs(tmp_path: Path) -> None:
    text = timeline.scenario(
        duration="2h",
        timeline="    - at: 1h\n      delete:\n        - {kind: Job, namespace: ml, name: big}\n",
    )
    text += timeline.gpu_pool(types="[g6.xlarge, g6.12xlarge]", policy="WhenEmptyOrUnderutilized")
    text += timeline.workload("Job", "big", count=1, gpus=3, cpu="8")
    text += timeline.workload("Deployment", "small", count=1, gpus=1)
    ledger = tmp_path / "l.sqlite"
    page = tmp_path / "report.html"
    doc = timeline.run_json(
        timeline.write(tmp_path, text), "--best-possible", "--ledger", ledger, "--report", page
    )
    found = doc["bestPossible"]
    assert found["solvedHours"] == pytest.approx(found["hours"]) and found["hours"] == pytest.approx(2.0)
    assert 0 < found["bestPossible"] <= found["paid"] + 1e-6, "no run goes under the optimum"
    assert found["paid"] == pytest.approx(doc["cost"], abs=0.01)
    with Ledger(ledger) as opened:
        rows = opened.best()
    assert sum(r.hours for r in rows) == pytest.approx(2.0)
    assert {r.status for r in rows} == {"optimal"}
    shown = timeline.cli("report", "costs", "--ledger", ledger)
    assert shown.returncode == 0, shown.stderr
    assert (
        f"paid ${found['paid']:,.2f}, best possible ${found['bestPossible']:,.2f}, realized" in shown.stdout
    )
    html = page.read_text()
    section = html.split("Paid beside the best possible", 1)[1].split("<h2>", 1)[0]
    assert "realized" in section and "<svg" in section and "best possible" in section
    as_json = json.loads(timeline.cli("report", "costs", "--ledger", ledger, "-o", "json").stdout)
    assert as_json["bestPossible"]["bestPossible"] == pytest.approx(found["bestPossible"], abs=1e-3)


def test_without_the_flag_a_run_has_no_best_possible(tmp_path: Path) -> None:
    text = timeline.scenario(duration="1h") + timeline.gpu_pool(types="[g6.xlarge]")
    doc = timeline.run_json(timeline.write(tmp_path, text + timeline.workload("Job", "j", count=1, gpus=1)))
    assert "bestPossible" not in doc
