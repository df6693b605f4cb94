"""Consolidation as Karpenter's own suite defines it (issues 11 and 30): multi-node consolidation never
swaps N nodes for N of the same type, capacity launched for pods still on their way is left alone, and no
command moves pods onto capacity in flight (a node not initialized, room a pending pod is about to take)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType
from provisioner.disruption import plan
from provisioner.disruption.model import Blocker, BlockerKind, Command, DisruptionPlan
from provisioner.scheduling import SolveFn
from provisioner.state.cluster import StateNode
from provisioner.state.objects import Pod
from testkit import builders
from tests.unit.disruption.builders import NOW, instance_type, node_pool, pod, snapshot, state_node

CHEAP = instance_type("c.small", cpu=2, memory_gib=8, price=0.10)
BIG = instance_type("c.large", cpu=8, memory_gib=32, price=0.40)


def run(
    nodes: list[StateNode],
    *,
    solve: SolveFn,
    pending: Sequence[Pod] = (),
    types: Sequence[InstanceType] = (CHEAP, BIG),
) -> DisruptionPlan:
    pools = [node_pool(budgets=[{"nodes": "100%"}])]
    snap = dataclasses.replace(snapshot(nodes, pools=pools), pending_pods=tuple(pending))
    return plan(snap, instance_types={"default": list(types)}, now=NOW, solve=solve)


def test_two_cheap_nodes_are_not_merged_into_one_of_the_same_type_the_emptier_one_is_deleted(
    solve: SolveFn,
) -> None:
    one = state_node("one", it=CHEAP, pods=[pod("a", cpu="300m")])
    two = state_node("two", it=CHEAP, pods=[pod("b", cpu="300m"), pod("c", cpu="300m")])
    result = run([one, two], solve=solve)
    (command,) = result.commands
    assert command.action == "delete", [c.instance_type.name for c in command.replacements]
    assert command.node_names == ("one",)


def test_nodes_merge_into_one_cheaper_type_than_any_of_them(solve: SolveFn) -> None:
    nodes = [state_node(f"big{i}", it=BIG, pods=[pod(f"p{i}", cpu="500m")]) for i in range(2)]
    result = run(nodes, solve=solve)
    (command,) = result.commands
    assert sorted(command.node_names) == ["big0", "big1"]
    assert [c.instance_type.name for c in command.replacements] == ["c.small"]


def test_an_empty_node_launched_for_a_pending_pod_is_not_deleted_before_the_pod_binds(solve: SolveFn) -> None:
    fresh = state_node("fresh", it=BIG)
    waiting = pod("waiting", cpu="4")
    result = run([fresh], solve=solve, pending=[waiting])
    assert result.commands == []
    (blocker,) = [b for b in result.blockers if b.node == "fresh"]
    assert "ml/waiting" in blocker.detail


def test_an_empty_node_no_pending_pod_can_use_is_deleted(solve: SolveFn) -> None:
    fresh = state_node("fresh", it=CHEAP)
    too_big = pod("too-big", cpu="6")
    result = run([fresh], solve=solve, pending=[too_big])
    assert [c.node_names for c in result.commands] == [("fresh",)]


def test_an_underused_node_a_pending_pod_is_about_to_use_is_not_consolidated(solve: SolveFn) -> None:
    node = state_node("n", it=BIG, pods=[pod("running", cpu="500m")])
    result = run([node], solve=solve, pending=[pod("next", cpu="3")])
    assert result.commands == []


# Capacity in flight is no destination (issue 30) ----------------------------------------------------------


def blocker_of(result: DisruptionPlan, node: str) -> Blocker:
    (found,) = [b for b in result.blockers if b.node == node and b.method != "candidates"]
    return found


def test_no_node_is_deleted_when_its_pods_would_go_to_an_uninitialized_node(solve: SolveFn) -> None:
    """Karpenter's "won't delete node if it would require pods to schedule on an uninitialized node"."""
    starting = state_node("starting", it=CHEAP, initialized=False, pods=[pod("a", cpu="300m")])
    ready = state_node("ready", it=CHEAP, pods=[pod("b", cpu="300m")])
    result = run([starting, ready], solve=solve)
    assert result.commands == []
    assert blocker_of(result, "ready").kind == BlockerKind.NOT_CHEAPER, "no room but on the starting node"


def test_pods_move_onto_the_one_initialized_node_among_many_starting(solve: SolveFn) -> None:
    """Karpenter's "should consider initialized nodes before uninitialized nodes"."""
    big = instance_type("c.3", cpu=3, memory_gib=3, price=0.30)
    small = instance_type("c.1", cpu=1, memory_gib=1, price=0.10)
    nodes = [
        state_node(f"n{i:02}", it=big, initialized=i == 37, pods=[pod(f"p{i}", cpu="2", memory="2Gi")])
        for i in range(60)
    ]
    nodes.append(state_node("small", it=small, pods=[pod("mover", cpu="1", memory="1Gi")]))
    result = run(nodes, solve=solve, types=(big, small))
    (command,) = result.commands
    assert command.node_names == ("small",)
    assert [m.destination for r in command.records for m in r.pods] == ["n37"]


def test_no_pods_are_moved_into_room_a_pending_pod_is_about_to_take(solve: SolveFn) -> None:
    """The node launched for `waiting` has room for it or for the moved pod, not both: moving the pod
    there would strand `waiting` and launch a third node."""
    busy = state_node("busy", it=CHEAP, pods=[pod("a", cpu="1200m")])
    launched = state_node("launched", it=CHEAP)
    waiting = pod("waiting", cpu="1200m")
    result = run([busy, launched], solve=solve, pending=[waiting], types=(CHEAP,))
    assert result.commands == []
    blocker = blocker_of(result, "busy")
    assert blocker.kind == BlockerKind.AWAITED and "ml/waiting" in blocker.detail


def test_pods_still_move_onto_a_settled_node_with_room_for_them_and_the_pending_pod(solve: SolveFn) -> None:
    busy = state_node("busy", it=CHEAP, pods=[pod("a", cpu="300m")])
    roomy = state_node("roomy", it=BIG, pods=[pod("b", cpu="300m")])
    result = run([busy, roomy], solve=solve, pending=[pod("waiting", cpu="1800m")], types=(CHEAP,))
    assert [c.node_names for c in result.commands] == [("busy",)]


def test_no_pods_are_moved_onto_a_node_within_its_pools_consolidate_after(solve: SolveFn) -> None:
    """Karpenter's "should not consolidate pods onto a destination node that is under its consolidateAfter
    window": deleting `one` would move its pod onto `two`, where a pod arrived a minute ago."""
    pools = [node_pool(consolidate_after="5m", budgets=[{"nodes": "100%"}])]
    one = state_node("one", it=CHEAP, pods=[pod("a", cpu="300m")])
    recent = NOW - timedelta(minutes=1)
    two = state_node(
        "two", it=CHEAP, pods=[pod("b", cpu="300m"), pod("c", cpu="300m")], last_pod_event=recent
    )
    snap = snapshot([one, two], pools=pools)
    types = {"default": [CHEAP, BIG]}
    result = plan(snap, instance_types=types, now=NOW, solve=solve)
    assert result.commands == []
    later = plan(snap, instance_types=types, now=NOW + timedelta(minutes=5), solve=solve)
    assert [c.node_names for c in later.commands] == [("one",)]


# What a node's pods are, for emptiness ----------------------------------------------------------------------


def terminating(p: Pod) -> Pod:
    raw = dict(p.raw)
    raw["metadata"] = {**raw["metadata"], "deletionTimestamp": NOW.isoformat()}
    return type(p).from_dict(raw)


def test_a_node_whose_deployment_pods_are_terminating_is_empty(solve: SolveFn) -> None:
    """Karpenter's "will consider a node with terminating Deployment pods as empty"."""
    pods = [terminating(pod(f"p{i}", cpu="100m")) for i in range(3)]
    result = run([state_node("n", it=CHEAP, pods=pods)], solve=solve)
    assert [(c.node_names, c.reason) for c in result.commands] == [(("n",), "Empty")]


def test_a_node_with_a_terminating_stateful_set_pod_is_not_empty(solve: SolveFn) -> None:
    """Karpenter's "will not consider a node with a terminating StatefulSet pod as empty": its replacement
    comes back under the same name only once it is gone, so it still needs a home."""
    sts = terminating(pod("db-0", cpu="100m", owner="StatefulSet"))
    result = run([state_node("n", it=CHEAP, pods=[sts])], solve=solve, types=(CHEAP,))
    assert not [c for c in result.commands if c.reason == "Empty"]


def test_an_empty_node_launched_for_the_pods_of_a_deleting_node_is_kept(solve: SolveFn) -> None:
    """Karpenter's "should not consolidate a node that is launched for pods on a deleting node": the pods
    are still bound to the node being deleted, on their way to the new one."""
    leaving = state_node(
        "leaving", it=CHEAP, deleting=True, pods=[pod("a", cpu="900m"), pod("b", cpu="900m")]
    )
    fresh = state_node("fresh", it=CHEAP)
    result = run([leaving, fresh], solve=solve)
    assert result.commands == []
    (blocker,) = [b for b in result.blockers if b.node == "fresh"]
    assert blocker.kind == BlockerKind.AWAITED and "ml/a" in blocker.detail


def test_a_node_is_deleted_when_a_node_no_pool_owns_can_take_its_pods(solve: SolveFn) -> None:
    """Karpenter's "can delete nodes, when non-Karpenter capacity can fit pods" (the pool is named
    `default`, which gives every pod a pool list)."""
    unmanaged = StateNode(name="unmanaged", node=builders.node("unmanaged", cpu=32, memory_gib=64, pool=None))
    ours = state_node("ours", it=CHEAP, pods=[pod(f"p{i}", cpu="300m") for i in range(3)])
    result = run([ours, unmanaged], solve=solve)
    (command,) = result.commands
    assert command.node_names == ("ours",) and command.replacements == ()
    assert {m.destination for r in command.records for m in r.pods} == {"unmanaged"}


# Forceful and return moves follow consolidation's destination rules (issue 30) ---------------------------


def moves(command: Command) -> dict[str, str | None]:
    return {m.pod: m.destination for r in command.records for m in r.pods}


def test_a_drifted_nodes_pods_do_not_take_the_room_a_pending_pod_is_about_to_use(solve: SolveFn) -> None:
    """Drift still replaces the node, but its pod goes to the replacement, not into the room on the node
    launched for `waiting` (that would strand `waiting` and launch a third node)."""
    stale = state_node(
        "stale", it=CHEAP, pods=[pod("a", cpu="1200m")], conditions=[{"type": "Drifted", "status": "True"}]
    )
    launched = state_node("launched", it=CHEAP)
    result = run([stale, launched], solve=solve, pending=[pod("waiting", cpu="1200m")], types=(CHEAP,))
    (command,) = result.commands
    assert (command.method, command.node_names) == ("drift", ("stale",))
    assert len(command.replacements) == 1
    assert "launched" not in moves(command).values()


def test_an_expired_nodes_pods_do_not_take_the_room_a_pending_pod_is_about_to_use(solve: SolveFn) -> None:
    old = state_node("old", it=CHEAP, pods=[pod("a", cpu="1200m")], created=NOW - timedelta(hours=800))
    launched = state_node("launched", it=CHEAP)
    result = run([old, launched], solve=solve, pending=[pod("waiting", cpu="1200m")], types=(CHEAP,))
    (command,) = [c for c in result.commands if c.method == "expiration"]
    assert command.node_names == ("old",)
    assert len(command.replacements) == 1
    assert "launched" not in moves(command).values()


def test_a_drifted_nodes_pods_still_move_onto_a_settled_node_with_room_for_both(solve: SolveFn) -> None:
    stale = state_node(
        "stale", it=CHEAP, pods=[pod("a", cpu="300m")], conditions=[{"type": "Drifted", "status": "True"}]
    )
    roomy = state_node("roomy", it=BIG)
    result = run([stale, roomy], solve=solve, pending=[pod("waiting", cpu="1800m")], types=(CHEAP,))
    (command,) = [c for c in result.commands if c.method == "drift"]
    assert command.replacements == ()
    assert set(moves(command).values()) == {"roomy"}


def test_pods_returning_to_their_preferred_pool_do_not_take_the_room_a_pending_pod_is_about_to_use(
    solve: SolveFn,
) -> None:
    """The preferred pool's node launched for `waiting` has room for it or for the returning pod, not
    both: the pod returns onto a new node of that pool instead."""
    first = node_pool("preferred", weight=50, budgets=[{"nodes": "100%"}])
    second = node_pool("fallback", weight=10, budgets=[{"nodes": "100%"}])
    returning = pod("a", cpu="1200m", annotations={wk.NODEPOOLS: "preferred,fallback"})
    low = state_node("low", pool="fallback", it=CHEAP, pods=[returning])
    launched = state_node("launched", pool="preferred", it=CHEAP)
    waiting = pod("waiting", cpu="1200m", annotations={wk.NODEPOOLS: "preferred"})
    snap = dataclasses.replace(snapshot([low, launched], pools=[first, second]), pending_pods=(waiting,))
    types = {"preferred": [CHEAP], "fallback": [CHEAP]}
    result = plan(snap, instance_types=types, now=NOW, solve=solve)
    (command,) = [c for c in result.commands if c.method == "return-to-preferred"]
    assert [c.nodepool.name for c in command.replacements] == ["preferred"]
    assert "launched" not in moves(command).values()
