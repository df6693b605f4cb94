"""Existing capacity: how a snapshot's nodes count before a solve (`scheduling.existing`, the one owner of
these adjustments), and `StateNode.requested`, the one definition of what a node's pods request."""

from __future__ import annotations

import dataclasses

from provisioner.scheduling import existing
from provisioner.scheduling.pools import NODES, compile_pools
from provisioner.scheduling.resources import Dims
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Node
from testkit.builders import cpu_types, node, node_pool, pod, run, snapshot


def _deleting(n: Node) -> Node:
    raw = dict(n.raw)
    raw["metadata"] = {**raw["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    return type(n).from_dict(raw)


def test_a_node_being_deleted_counts_toward_its_pools_limits_but_takes_no_pods() -> None:
    pool = node_pool(limits={"nodes": "2", "cpu": "100"})
    gone = _deleting(node("gone", cpu=4))
    live = node("live", cpu=4)
    snap = snapshot([(gone, [pod("old", cpu="1", node_name="gone")]), (live, [])])
    dims = Dims.of([], daemonsets=(), pools=[pool])
    (compiled,) = compile_pools([pool], {pool.name: cpu_types()}, dims=dims, daemonsets=())
    nodes = existing.capacity(snap, {compiled.name: compiled}, dims=dims, daemonsets=())
    assert [n.name for n in nodes] == ["live"], "a deleting node takes no new pods"
    assert compiled.used[NODES] == 2, "but it is still paid for, so it counts toward the limit"
    assert compiled.used[dims.index["cpu"]] == 8000


def test_a_pool_at_its_node_limit_opens_nothing_while_its_node_is_being_deleted() -> None:
    pool = node_pool(limits={"nodes": "1"})
    gone = _deleting(node("gone", cpu=4))
    moved = pod("moved", cpu="1")
    results = run([moved], pool, snap=snapshot([(gone, [pod("moved", cpu="1", node_name="gone")])]))
    assert not results.new_claims
    (unschedulable,) = results.unschedulable
    assert "limit nodes=1 reached: 1 node already" in unschedulable.reasons[0].reason


def test_requested_sums_the_running_pods_once_and_a_replaced_node_sums_again() -> None:
    n = node("n1", cpu=8)
    done = dataclasses.replace(pod("done", cpu="4", node_name="n1"), phase="Succeeded")
    sn = StateNode(name="n1", node=n, pods=(pod("a", cpu="1", node_name="n1"), done))
    assert sn.requested["cpu"] == 1000, "terminal pods request nothing"
    assert sn.requested is sn.requested, "memoised on the frozen instance"
    grown = dataclasses.replace(sn, pods=(*sn.pods, pod("b", cpu="2", node_name="n1")))
    assert grown.requested["cpu"] == 3000
    assert sn.requested["cpu"] == 1000
