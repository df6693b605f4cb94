"""Node repair over memory and the strict API server: an unhealthy node is replaced after its
condition's toleration, with an Event, a metric and a ledger row that is no saving; a pool with more than
20% of its nodes unhealthy repairs none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from provisioner.api import labels as wk
from provisioner.clock import isoformat
from provisioner.finops.ledger import Ledger
from provisioner.finops.recorder import LedgerRecorder
from testkit.controllers.world import World, gpu_pod, node_class, node_pool


def _sick(w: World, node_name: str, **status: str) -> None:
    """The node's kubelet stopped posting: Ready goes Unknown now (as the node-lifecycle controller sets)."""
    node = w.state.nodes[node_name]
    conditions = [c for c in node.raw["status"]["conditions"] if c["type"] != "Ready"]
    conditions.append(
        {
            "type": "Ready",
            "status": status.get("ready", "Unknown"),
            "reason": "NodeStatusUnknown",
            "lastTransitionTime": isoformat(w.clock.now()),
        }
    )
    w.backend.patch_status("Node", node_name, {"conditions": conditions})
    w.backend.settle()


def _nodes_of(w: World, count: int) -> list[str]:
    w.apply(node_class(), node_pool("gpu"))
    w.keep(*(gpu_pod(f"train-{i}") for i in range(count)))
    w.run_until(lambda: w.all_bound() and len(w.pods()) == count, max_ticks=30)
    return sorted(w.state.nodes)


def test_a_node_not_ready_past_its_toleration_is_replaced_with_an_event_and_a_metric(
    make_world: Callable[..., World],
) -> None:
    w = make_world()
    (sick,) = _nodes_of(w, 1)
    claim = w.state.nodes[sick].labels[wk.NODECLAIM]
    _sick(w, sick)
    for _ in range(29):
        w.tick(60)
        # The binder keeps the pod where it is: nothing here evicts for a NotReady node (that is the
        # node-lifecycle controller's taint-based eviction, after 5 minutes, on a real cluster).
    assert claim in w.state.claims and w.state.claims[claim].metadata.deletion_timestamp is None
    w.run_until(lambda: claim not in w.state.claims, max_ticks=5, seconds=60)
    repaired = [e for e in w.events("NodeRepair") if e["involvedObject"]["name"] == claim]
    assert repaired and "Ready=Unknown for 30m" in repaired[0]["message"], w.events()
    assert w.metric("provisioner_node_repairs_total", nodepool="gpu", condition="Ready") == 1
    # Its pod is provisioned again, on a new node.
    w.run_until(lambda: w.all_bound() and all(p.node_name != sick for p in w.pods()), max_ticks=30)


def test_gpus_the_device_plugin_withdrew_get_the_node_repaired(make_world: Callable[..., World]) -> None:
    w = make_world()
    (sick,) = _nodes_of(w, 1)
    node = w.state.nodes[sick]
    have = node.capacity[wk.GPU_RESOURCE]
    allocatable = dict(node.raw["status"]["allocatable"])
    allocatable[wk.GPU_RESOURCE] = str(have - 1)  # an XID error: the plugin marks one GPU unhealthy
    w.backend.patch_status("Node", sick, {"allocatable": allocatable})
    w.backend.settle()
    w.tick(60)
    claim = node.labels[wk.NODECLAIM]
    w.run_until(lambda: claim not in w.state.claims, max_ticks=15, seconds=60)
    assert w.metric("provisioner_node_repairs_total", nodepool="gpu", condition="GPUsWithdrawn") == 1


def test_no_repair_when_more_than_a_fifth_of_the_pool_is_unhealthy(make_world: Callable[..., World]) -> None:
    w = make_world()
    nodes = _nodes_of(w, 3)
    for name in nodes[:2]:  # 2 of 3: an outage, not a broken node
        _sick(w, name)
    for _ in range(40):
        w.tick(60)
    assert all(c.metadata.deletion_timestamp is None for c in w.claims())
    blocked = w.events("RepairBlocked")
    assert len(blocked) == 1 and "2 of 3 nodes of pool gpu are unhealthy" in blocked[0]["message"]


@pytest.mark.parametrize("make_world", ["memory"], indirect=True)
def test_a_repair_is_a_ledger_row_with_reason_repair_and_no_saving(
    make_world: Callable[..., World], tmp_path: Path
) -> None:
    w = make_world()
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        w.manager = w.new_manager(recorder=LedgerRecorder(ledger, background=False))
        (sick,) = _nodes_of(w, 1)
        _sick(w, sick)
        claim = w.state.nodes[sick].labels[wk.NODECLAIM]
        w.run_until(lambda: claim not in w.state.claims, max_ticks=40, seconds=60)
        (row,) = [a for a in ledger.actions() if a.node == sick]
        assert (row.reason, row.method, row.action) == ("repair", "repair", "delete")
        assert row.savings_per_hour == 0.0 and row.price_per_hour > 0
