"""More of Karpenter's consolidation suite, in our words (issue 30): a pending pod no node can take does
not hold consolidation back, a replacement keeps a zonal spread, and a move that would break a required
anti-affinity is no move."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from provisioner.api import labels as wk
from provisioner.cloudprovider import InstanceType
from provisioner.disruption import plan
from provisioner.disruption.model import DisruptionPlan
from provisioner.scheduling import SolveFn
from provisioner.state.objects import Pod
from provisioner.state.snapshot import StateNode
from tests.unit.disruption.builders import NOW, instance_type, node_pool, pod, snapshot, state_node

ZONES = ("zone-a", "zone-b", "zone-c")
SMALL = instance_type("c.small", cpu=2, memory_gib=8, price=0.10, zones=ZONES)
LARGE = instance_type("c.large", cpu=8, memory_gib=32, price=0.40, zones=ZONES)
APP = {"app": "web"}


def run(
    nodes: list[StateNode],
    *,
    solve: SolveFn,
    pending: Sequence[Pod] = (),
    types: Sequence[InstanceType] = (SMALL, LARGE),
) -> DisruptionPlan:
    pools = [node_pool(budgets=[{"nodes": "100%"}])]
    snap = dataclasses.replace(snapshot(nodes, pools=pools), pending_pods=tuple(pending))
    return plan(snap, instance_types={"default": list(types)}, now=NOW, solve=solve)


def in_zone(name: str, zone: str, *, it: InstanceType, pods: Sequence[Pod]) -> StateNode:
    return state_node(name, it=it, pods=pods, labels={wk.ZONE: zone})


def test_a_pending_pod_that_fits_nowhere_does_not_hold_consolidation_back(solve: SolveFn) -> None:
    """Karpenter's "can delete nodes with a permanently pending pod"."""
    one = state_node("one", it=LARGE, pods=[pod("a", cpu="500m"), pod("b", cpu="500m")])
    two = state_node("two", it=LARGE, pods=[pod("c", cpu="500m")])
    never = pod("never", cpu="100m", node_selector={"non-existent": "node-label"})
    result = run([one, two], solve=solve, pending=[never], types=(LARGE,))
    assert [(c.action, c.node_names) for c in result.commands] == [("delete", ("two",))]


def test_a_replacement_keeps_the_zone_a_spread_needs(solve: SolveFn) -> None:
    """Karpenter's "can replace node maintaining zonal topology spread"."""
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": wk.ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": APP},
        }
    ]
    nodes = [
        in_zone(
            f"n-{zone}",
            zone,
            it=LARGE if zone == "zone-b" else SMALL,
            pods=[pod(f"p-{zone}", cpu="1", labels=APP, spread=spread)],
        )
        for zone in ZONES
    ]
    result = run(nodes, solve=solve)
    (command,) = result.commands
    assert command.node_names == ("n-zone-b",)
    (replacement,) = command.replacements
    assert replacement.instance_type.name == "c.small"
    assert replacement.offering.zone == "zone-b"


def test_no_node_goes_when_its_pod_would_join_one_it_repels(solve: SolveFn) -> None:
    """Karpenter's "won't delete node if it would violate pod anti-affinity": the nodes are already the
    cheapest type, and deleting one would put two pods that repel each other on one host."""
    anti = [{"labelSelector": {"matchLabels": APP}, "topologyKey": wk.HOSTNAME}]
    nodes = [
        in_zone(f"n-{zone}", zone, it=SMALL, pods=[pod(f"p-{zone}", cpu="1", labels=APP, anti_affinity=anti)])
        for zone in ZONES
    ]
    result = run(nodes, solve=solve)
    assert result.commands == []


def drifted(name: str, *, since: datetime, pods: Sequence[Pod] = ()) -> StateNode:
    condition = {"type": "Drifted", "status": "True", "lastTransitionTime": since.isoformat()}
    return state_node(name, it=SMALL, pods=pods, conditions=[condition])


def one_at_a_time(nodes: list[StateNode], *, solve: SolveFn) -> DisruptionPlan:
    pools = [node_pool(budgets=[{"nodes": "1"}])]
    return plan(snapshot(nodes, pools=pools), instance_types={"default": [SMALL]}, now=NOW, solve=solve)


def test_an_empty_drifted_node_goes_before_a_busy_one(solve: SolveFn) -> None:
    """Karpenter's "should drift empty nodes before non-empty nodes", with a budget of one node."""
    busy = drifted("busy", since=NOW - timedelta(hours=2), pods=[pod("a", cpu="1")])
    empty = drifted("empty", since=NOW - timedelta(hours=1))
    result = one_at_a_time([busy, empty], solve=solve)
    assert [(c.method, c.node_names) for c in result.commands] == [("drift", ("empty",))]


def test_the_node_that_drifted_first_is_replaced_first(solve: SolveFn) -> None:
    """Karpenter's "should drift one non-empty node at a time, starting with the earliest drift"."""
    late = drifted("late", since=NOW - timedelta(minutes=5), pods=[pod("a", cpu="1500m")])
    early = drifted("early", since=NOW - timedelta(hours=1), pods=[pod("b", cpu="1500m")])
    result = one_at_a_time([late, early], solve=solve)
    assert [(c.method, c.node_names) for c in result.commands] == [("drift", ("early",))]


def test_drift_moves_on_to_the_next_node_when_the_first_cannot_reschedule_its_pods(solve: SolveFn) -> None:
    """Karpenter's "should continue to the next drifted node if the first cannot reschedule all pods"."""
    stuck = drifted("stuck", since=NOW - timedelta(hours=1), pods=[pod("huge", cpu="1900m", memory="7Gi")])
    movable = drifted("movable", since=NOW - timedelta(minutes=5), pods=[pod("b", cpu="500m")])
    tiny = instance_type("c.tiny", cpu=1, memory_gib=2, price=0.05, zones=ZONES)
    pools = [node_pool(budgets=[{"nodes": "1"}])]
    result = plan(
        snapshot([stuck, movable], pools=pools), instance_types={"default": [tiny]}, now=NOW, solve=solve
    )
    assert [(c.method, c.node_names) for c in result.commands] == [("drift", ("movable",))]


def test_three_nodes_spot_and_on_demand_merge_into_one(solve: SolveFn) -> None:
    """Karpenter's "can merge 3 nodes into 1 if the candidates have both spot and on-demand"."""
    big = instance_type("c.large", cpu=8, memory_gib=32, price=0.40, spot_price=0.30, zones=ZONES)
    small = instance_type("c.small", cpu=2, memory_gib=8, price=0.10, spot_price=0.05, zones=ZONES)
    nodes = [
        state_node(f"n{i}", it=big, capacity_type=ct, pods=[pod(f"p{i}", cpu="300m")])
        for i, ct in enumerate(("on-demand", "on-demand", "spot"))
    ]
    pools = [node_pool(capacity_types=["on-demand", "spot"], budgets=[{"nodes": "100%"}])]
    result = plan(
        snapshot(nodes, pools=pools), instance_types={"default": [big, small]}, now=NOW, solve=solve
    )
    (command,) = result.commands
    assert sorted(command.node_names) == ["n0", "n1", "n2"]
    assert [c.instance_type.name for c in command.replacements] == ["c.small"]


def test_a_terminating_pods_do_not_disrupt_does_not_hold_its_node(solve: SolveFn) -> None:
    """Karpenter's "should consider candidates that have do-not-disrupt terminating pods": only an active
    pod is protected; a pod on its way out holds nothing."""
    raw = pod("leaving", cpu="300m", annotations={wk.DO_NOT_DISRUPT: "true"}).raw
    leaving = type(pod("x")).from_dict(
        {**raw, "metadata": {**raw["metadata"], "deletionTimestamp": NOW.isoformat()}}
    )
    node = state_node("n", it=SMALL, pods=[leaving])
    result = run([node], solve=solve)
    assert [(c.method, c.node_names) for c in result.commands] == [("emptiness", ("n",))]


def test_an_active_pods_do_not_disrupt_still_holds_its_node(solve: SolveFn) -> None:
    node = state_node(
        "n", it=SMALL, pods=[pod("staying", cpu="300m", annotations={wk.DO_NOT_DISRUPT: "true"})]
    )
    assert run([node], solve=solve).commands == []
