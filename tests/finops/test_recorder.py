"""The ledger recorder: rows kept and retried while the database is down, failures counted, writing in a
thread of its own; and only the leading replica's controllers hand it rows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from provisioner.finops.ledger import Ledger
from provisioner.finops.recorder import LedgerRecorder
from testkit.builders.common import NOW as T0
from testkit.builders.rows import action_row as action
from testkit.builders.rows import blocker_row, usage_row
from testkit.controllers.backends import MemoryBackend
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.polling import wait_until


def test_in_the_background_rows_wait_for_the_database_and_are_all_written_when_it_is_back(
    tmp_path: Path,
) -> None:
    target = tmp_path / "down" / "ledger.sqlite"
    failures: list[str] = []
    recorder = LedgerRecorder(
        str(target), attempts=2, retry_wait=0, backoff=0.05, max_backoff=0.1, on_failure=failures.append
    )
    recorder.start()
    try:
        recorder.actions([action("n1")])
        recorder.usage([usage_row("n1")])
        wait_until("a failed write counted", lambda: len(failures) >= 2)
        assert recorder.pending == 2, "nothing is lost while the database is down"
        target.parent.mkdir()
        wait_until("every row written", lambda: recorder.pending == 0)
    finally:
        recorder.stop()
    with Ledger(target) as ledger:
        assert [a.node for a in ledger.actions()] == ["n1"]
        assert [u.node for u in ledger.usage()] == ["n1"]
    assert set(failures) <= {"actions", "usage"}


def test_too_many_waiting_rows_drop_the_oldest_and_say_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dropped: list[tuple[str, int]] = []
    recorder = LedgerRecorder(
        str(tmp_path / "down" / "l.sqlite"),
        background=False,
        attempts=1,
        retry_wait=0,
        max_pending=2,
        on_dropped=lambda table, n: dropped.append((table, n)),
    )
    recorder.usage([usage_row("a"), usage_row("b")])
    recorder.actions([action("c")])
    assert dropped == [("usage", 2)] and recorder.pending == 1
    assert "usage rows dropped" in caplog.text


def test_an_action_written_twice_is_stored_once(tmp_path: Path) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        recorder = LedgerRecorder(ledger, background=False)
        recorder.actions([action("n1", time=T0)])
        recorder.actions([action("n1", time=T0)])
        assert recorder.written["actions"] == 1 and len(ledger.actions()) == 1


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "left-out"])
def test_blocker_rows_are_left_out_only_when_asked(tmp_path: Path, keep: bool) -> None:
    with Ledger(tmp_path / "l.sqlite") as ledger:
        recorder = LedgerRecorder(ledger, background=False, keep_blockers=keep)
        recorder.blockers([blocker_row("n1", time=T0)])
        recorder.actions([action("n2", time=T0)])
        recorder.usage([usage_row("n3", time=T0)])
        assert [b.node for b in ledger.blockers()] == (["n1"] if keep else [])
        assert [a.node for a in ledger.actions()] == ["n2"] and [u.node for u in ledger.usage()] == ["n3"]


@pytest.mark.parametrize("leading", [True, False], ids=["leader", "follower"])
def test_only_the_leader_writes_the_ledger(tmp_path: Path, leading: bool) -> None:
    world = World(MemoryBackend)
    try:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            recorder = LedgerRecorder(ledger, background=False)
            world.manager = world.new_manager(recorder=recorder, disruption=True, is_leader=lambda: leading)
            world.apply(node_class(), node_pool("gpu"), gpu_pod("train-0", owner="Job"))
            for _ in range(30):
                world.tick(20)
            assert world.manager.usage is not None
            if leading:
                world.manager.usage.flush(world.clock.now())
            rows = ledger.usage()
        if leading:
            assert rows and sum(r.hours for r in rows) > timedelta(minutes=1).total_seconds() / 3600
        else:
            assert rows == [] and not world.claims(), "a follower neither acts nor writes"
    finally:
        world.backend.close()
