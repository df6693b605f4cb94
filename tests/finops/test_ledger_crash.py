"""What a crash between a disruption and its ledger row costs the books: nothing. The rows ride on the
deleted NodeClaim (annotation `provisioner.sh/ledger-actions`) until they are stored, so a controller
killed before handing them to the recorder, or right after they were committed, leaves exactly one row per
node removed after its restart; and a database that stays down holds the finalizer only `ledger_hold`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event

from provisioner.api import labels as wk
from provisioner.controllers.settings import ControllerSettings
from provisioner.finops.ledger import Ledger
from provisioner.finops.recorder import LedgerRecorder
from provisioner.finops.rows import ActionRow, actions_from_json, actions_to_json
from testkit.builders import action_row as action
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool
from testkit.typed import present


class Killed(BaseException):
    """The process died (a BaseException, so nothing in the controllers catches it)."""


class DiesAtActions(LedgerRecorder):
    """A recorder whose process is killed when disruption hands it action rows: `before` the rows are
    taken (nothing queued, nothing stored) or `after` they are committed."""

    def __init__(self, ledger: Ledger, *, when: str) -> None:
        super().__init__(ledger, background=False)
        self.when = when

    def actions(self, rows: Sequence[ActionRow]) -> None:
        if self.when == "before":
            raise Killed("killed before the ledger rows were handed in")
        super().actions(rows)
        raise Killed("killed right after the ledger rows were committed")


def _emptied_node_consolidated(w: World, recorder: LedgerRecorder) -> str:
    """A job ends on the one node; disruption deletes its claim (and dies handing in the row)."""
    pool = node_pool("gpu")
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    w.apply(node_class(), pool, gpu_pod("train-0", owner="Job"))
    w.run_until(w.all_bound, max_ticks=30)
    (claim,) = w.claims()
    node = claim.status.node_name
    w.manager = w.new_manager(recorder=recorder, disruption=True)
    w.backend.delete("Pod", "train-0", namespace="default")
    with pytest.raises(Killed):
        w.run_until(lambda: False, max_ticks=60, seconds=5)
    return present(node)


@pytest.mark.parametrize("when", ["before", "after"], ids=["before-hand-in", "after-commit"])
def test_a_crash_around_the_ledger_write_leaves_exactly_one_row_per_node_removed(
    tmp_path: Path, when: str
) -> None:
    w = World(MemoryBackend)
    try:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            node = _emptied_node_consolidated(w, DiesAtActions(ledger, when=when))
            (claim,) = w.claims()
            assert claim.metadata.deletion_timestamp is not None, "the action was taken"
            assert wk.LEDGER_ACTIONS in claim.metadata.annotations, "its row rides on the claim"
            assert len(ledger.actions()) == (0 if when == "before" else 1)
            w.restart()
            recorder = LedgerRecorder(ledger, background=False)
            w.manager = w.new_manager(recorder=recorder, disruption=True)
            w.run_until(lambda: not w.claims(), max_ticks=30, seconds=5)
            rows = ledger.actions()
        assert [(r.node, r.method) for r in rows] == [(node, "emptiness")]
    finally:
        w.backend.close()


def test_a_ledger_that_stays_down_holds_the_finalizer_only_for_ledger_hold(tmp_path: Path) -> None:
    w = World(
        MemoryBackend, settings=ControllerSettings(cluster_name="test", ledger_hold=timedelta(minutes=2))
    )
    try:
        down = LedgerRecorder(str(tmp_path / "down" / "l.sqlite"), background=False, attempts=1, retry_wait=0)
        pool = node_pool("gpu")
        pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
        w.apply(node_class(), pool, gpu_pod("train-0", owner="Job"))
        w.run_until(w.all_bound, max_ticks=30)
        w.manager = w.new_manager(recorder=down, disruption=True)
        w.backend.delete("Pod", "train-0", namespace="default")
        w.run_until(lambda: any(c.metadata.deletion_timestamp for c in w.claims()), max_ticks=30, seconds=5)
        deleted_at = w.clock.now()
        w.run_until(lambda: not w.claims(), max_ticks=60, seconds=5)
        assert w.clock.now() - deleted_at >= timedelta(minutes=2), "held while the rows could be stored"
        assert down.pending == 1, "the row waits in the queue for the database"
    finally:
        w.backend.close()


def test_action_rows_survive_the_trip_through_the_annotation() -> None:
    rows = [action("n1"), action("n2")]
    assert actions_from_json(actions_to_json(rows)) == rows
    with pytest.raises(ValueError, match="not a list of ledger action rows"):
        actions_from_json('[{"node": 1}]')


class Interrupted(Exception):
    """The process stopped in the middle of the ledger's first upgrade."""


def test_an_upgrade_interrupted_half_way_leaves_a_ledger_the_next_open_upgrades(tmp_path: Path) -> None:
    target = tmp_path / "l.sqlite"
    first = Ledger(target, migrate=False)

    def stop_at_the_indexes(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("CREATE INDEX"):
            raise Interrupted(statement)

    event.listen(first.engine, "before_cursor_execute", stop_at_the_indexes)
    with pytest.raises(Interrupted):
        first.migrate()
    first.close()
    with Ledger(target) as again:
        again.record_actions([action("n1")])
        assert [a.node for a in again.actions()] == ["n1"]
