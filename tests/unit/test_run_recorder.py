"""The simulator's ledger recorder (`sim.records.RunRecorder`): the usage rows it keeps for the run's result
must be what the ledger gives back, and what it leaves out of the ledger only what no one reads there."""

from __future__ import annotations

from datetime import timedelta

import pytest

from provisioner.finops.ledger import Ledger
from provisioner.sim.records import RunRecorder
from testkit.builders.common import NOW as T0
from testkit.builders.rows import blocker_row, usage_row


@pytest.mark.parametrize("save_usage", [True, False], ids=["saved", "kept-only"])
def test_the_kept_usage_rows_are_what_the_ledger_gives_back(save_usage: bool) -> None:
    later = T0 + timedelta(minutes=5)
    # Handed in out of time order, with rows of one time in several batches: the ledger orders them by
    # time, then by when they were written.
    batches = [
        [usage_row("b", time=later), usage_row("a", time=T0)],
        [usage_row("c", time=T0, teams=("ml", "web")), usage_row("d", time=later, hours=0.5)],
        [usage_row("e", time=T0, workloads=("web/api",))],
    ]
    with Ledger("sqlite://") as ledger:
        recorder = RunRecorder(ledger, save_usage=True)
        for rows in batches:
            recorder.usage(rows)
        expected = ledger.usage()
    with Ledger("sqlite://") as ledger:
        recorder = RunRecorder(ledger, save_usage=save_usage)
        for rows in batches:
            recorder.usage(rows)
        assert [r.node for r in expected] == ["a", "c", "e", "b", "d"]
        assert [repr(r) for r in recorder.usage_rows()] == [repr(r) for r in expected]
        assert len(ledger.usage()) == (5 if save_usage else 0)


def test_blocker_rows_reach_the_ledger_only_when_kept() -> None:
    for keep in (True, False):
        with Ledger("sqlite://") as ledger:
            RunRecorder(ledger, keep_blockers=keep).blockers([blocker_row("n1", time=T0)])
            assert len(ledger.blockers()) == (1 if keep else 0)
