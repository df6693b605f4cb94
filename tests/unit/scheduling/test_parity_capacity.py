"""Karpenter's Existing Nodes, DaemonSet and pod-order cases (issue 30), translated to our builders: a
node no pool owns is capacity, DaemonSet overhead counts only where the DaemonSet can run, and pods
pinned to a domain go before a pod that repels them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.scheduling.results import Results
from provisioner.state.cluster import Snapshot, StateNode
from provisioner.state.objects import DaemonSet, Node, Pod
from testkit.builders import (
    claim_of,
    daemonset,
    instance_type,
    node,
    node_claim,
    pod,
    req,
    run,
    snapshot,
    state_node,
)


def zone_of(results: Results, name: str) -> str:
    claim = claim_of(results, name)
    assert claim is not None, f"{name} got no new node"
    return claim.offering.zone


def unowned(name: str = "managed-1", *, cpu: int = 10) -> Node:
    """A Ready node of a managed node group: no pool label, no claim."""
    return node(name, cpu=cpu, memory_gib=10, pool=None)


# A node no pool owns ------------------------------------------------------------------------------------


def test_a_pod_goes_to_an_existing_node_no_pool_owns() -> None:
    results = run([pod("p", cpu="10m")], snap=snapshot([(unowned(), [])]))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "managed-1")]
    assert not results.new_claims


def test_many_pods_go_to_an_existing_node_no_pool_owns() -> None:
    pods = [pod(f"p{i}", cpu="10m", memory="10Mi") for i in range(100)]
    results = run(pods, snap=snapshot([(unowned(), [])]))
    assert {p.node for p in results.placements} == {"managed-1"} and len(results.placements) == 100
    assert not results.new_claims


def test_a_pod_with_a_pool_list_still_uses_a_node_no_pool_owns() -> None:
    """kube-scheduler places the pod on the unowned node whatever its pool list: a new node would stay
    empty. The pool named `default` gives every pod a list, so this is also Karpenter's plain case."""
    listed = pod("listed", cpu="10m", pools=["default"])
    results = run([listed, pod("plain", cpu="10m")], snap=snapshot([(unowned(), [])]))
    assert sorted((p.pod.name, p.node) for p in results.placements) == [
        ("listed", "managed-1"),
        ("plain", "managed-1"),
    ]
    assert not results.new_claims


def test_a_pod_with_a_pool_list_still_keeps_off_other_pools_nodes_when_an_unowned_node_is_full() -> None:
    other = node("other-1", cpu=8, pool="other")
    full = unowned(cpu=1)
    results = run([pod("p", cpu="2", pools=["default"])], snap=snapshot([(other, []), (full, [])]))
    assert not results.placements
    (claim,) = results.new_claims
    assert claim.nodepool.name == "default"


def test_a_pod_whose_selector_the_unowned_node_does_not_meet_gets_a_new_node() -> None:
    pinned = pod("p", cpu="10m", node_selector={wk.NODEPOOL: "default"}, pools=["default"])
    results = run([pinned], snap=snapshot([(unowned(), [])]))
    assert not results.placements and len(results.new_claims) == 1


# Pods pinned to a domain go before a pod that repels them -------------------------------------------------

SECURE = {"security": "s2"}


def repeller(name: str = "repels", **kw: Any) -> Pod:
    anti = {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": SECURE}}
    return pod(name, anti_affinity=[anti], **kw)


def zone_pinned(name: str, zone: str, *, how: str = "selector") -> Pod:
    if how == "selector":
        return pod(name, cpu="2", labels=SECURE, node_selector={wk.ZONE: zone})
    return pod(name, cpu="2", labels=SECURE, required=[[req(wk.ZONE, "In", zone)]])


@pytest.mark.parametrize("how", ["selector", "affinity"])
def test_pods_pinned_to_each_zone_run_and_the_pod_that_repels_them_waits(how: str) -> None:
    """Karpenter's "should not violate pod anti-affinity on zone": the repeller is smaller, yet placing it
    first would take one pinned pod's only zone."""
    pinned = [zone_pinned(f"z{i}", z, how=how) for i, z in enumerate(("zone-a", "zone-b", "zone-c"))]
    results = run([repeller(cpu="1"), *pinned])
    assert [u.pod.name for u in results.unschedulable] == ["repels"]
    assert sorted(zone_of(results, p.name) for p in pinned) == ["zone-a", "zone-b", "zone-c"]


def test_a_pod_that_repels_pinned_pods_takes_the_zone_they_leave_free() -> None:
    pinned = [zone_pinned("za", "zone-a"), zone_pinned("zb", "zone-b")]
    results = run([repeller(cpu="4"), *pinned])
    assert not results.unschedulable
    assert zone_of(results, "repels") == "zone-c"


def test_a_repeller_with_flexible_targets_still_goes_first_so_both_run() -> None:
    """Neither is pinned: the repeller goes first and its target keeps out of its zone (Karpenter leaves
    the repeller pending here, for want of knowing the target's zone; both running is the better end)."""
    results = run([pod("target", cpu="2", labels=SECURE), repeller(cpu="100m")])
    assert not results.unschedulable
    assert zone_of(results, "target") != zone_of(results, "repels")


# DaemonSet overhead only where the DaemonSet can run ----------------------------------------------------


def zone_a_daemonset(cpu: str = "3") -> DaemonSet:
    """A DaemonSet whose node affinity keeps it to zone-a, asking most of an m.xlarge."""
    return daemonset("zonal", cpu=cpu, memory="1Gi", required=[[req(wk.ZONE, "In", "zone-a")]])


def in_flight(name: str, *, zone: str, launched: bool = True) -> StateNode:
    """A claim for an m.xlarge (4 CPU) not registered yet: launched in `zone`, or not launched yet and
    free to land in zone-a or `zone`."""
    claim = node_claim(name, ["m.xlarge"], zones=None if launched else ["zone-a", zone])
    if launched:
        status = claim.status.model_copy(update={"instance_type": "m.xlarge", "zone": zone})
        claim = claim.model_copy(update={"status": status})
    return StateNode(name=name, claim=claim)


def test_a_daemonset_that_cannot_run_on_an_existing_node_takes_nothing_from_it() -> None:
    """Karpenter's "should not subtract daemonset overhead that is not strictly compatible with an
    existing node"."""
    there = node("node-b", cpu=1, memory_gib=1, zone="zone-b")
    results = run([pod("p", cpu="1", memory="1Gi")], snap=snapshot([(there, [])], [zone_a_daemonset("100")]))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "node-b")]


def test_a_daemonset_that_cannot_run_in_a_launched_claims_zone_takes_nothing_from_it() -> None:
    snap = snapshot(daemonsets=[zone_a_daemonset()])
    snap = dataclasses.replace(snap, nodes=(in_flight("claim-b", zone="zone-b"),))
    results = run([pod("p", cpu="2", memory="1Gi")], snap=snap)
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "claim-b")]
    assert not results.new_claims


def test_a_daemonset_that_may_run_where_a_claim_may_land_keeps_its_room() -> None:
    snap = snapshot(daemonsets=[zone_a_daemonset()])
    snap = dataclasses.replace(snap, nodes=(in_flight("claim-ab", zone="zone-b", launched=False),))
    results = run([pod("p", cpu="2", memory="1Gi")], snap=snap)
    assert not results.placements, "the claim may land in zone-a, where the DaemonSet takes 3 of its 4 CPUs"
    assert len(results.new_claims) == 1


# Nodes still starting --------------------------------------------------------------------------------------


def with_taints(sn: StateNode, *taints: dict[str, str]) -> StateNode:
    assert sn.node is not None
    raw = dict(sn.node.raw)
    raw["spec"] = {**raw["spec"], "taints": list(taints)}
    return dataclasses.replace(sn, node=type(sn.node).from_dict(raw))


def test_an_initialized_node_is_tried_before_nodes_still_starting() -> None:
    """Karpenter's "should order initialized nodes for scheduling uninitialized nodes"."""
    starting = [state_node(f"a-starting-{i}", initialized=False) for i in range(5)]
    ready = state_node("z-ready")
    results = run([pod("p", cpu="100m")], snap=Snapshot(nodes=(*starting, ready)))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "z-ready")]


NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


@pytest.mark.parametrize(
    ("initialized", "placed"), [(False, True), (True, False)], ids=["starting", "initialized"]
)
def test_a_not_ready_taint_is_ignored_only_while_the_node_starts(initialized: bool, placed: bool) -> None:
    """Karpenter's "should assume pod will schedule to a node with ephemeral taint
    node.kubernetes.io/not-ready:NoExecute when the node is uninitialized"."""
    sn = with_taints(state_node("n", initialized=initialized), NOT_READY)
    results = run([pod("p", cpu="100m")], snap=Snapshot(nodes=(sn,)))
    assert bool(results.placements) is placed
    assert bool(results.new_claims) is not placed


@pytest.mark.parametrize("bound", [True, False], ids=["daemon-pod-bound", "daemon-pod-not-yet"])
def test_a_starting_node_keeps_room_for_daemonset_pods_not_running_there_yet(bound: bool) -> None:
    """Karpenter's "should track daemonset usage separately so we know how many DS resources are remaining
    to be scheduled": 16 CPUs less 100m overhead, a 1-CPU DaemonSet; a 14.9-CPU pod fits only beside the
    DaemonSet's pod, bound or still to come, never in its room."""
    agent = daemonset("agent", cpu="1", memory="1Gi")
    it = instance_type("m.4xlarge", cpu=16, memory_gib=64)
    running = [
        pod("agent-n", namespace="kube-system", cpu="1", memory="1Gi", owner="DaemonSet", owner_name="agent")
    ]
    sn = state_node("n", it=it, initialized=False, pods=running if bound else ())
    fits = run(
        [pod("p", cpu="14900m", memory="1Gi")], types=[it], snap=Snapshot(nodes=(sn,), daemonsets=(agent,))
    )
    assert [p.node for p in fits.placements] == ["n"]
    too_big = run(
        [pod("p", cpu="15", memory="1Gi")], types=[it], snap=Snapshot(nodes=(sn,), daemonsets=(agent,))
    )
    assert not too_big.placements


def test_a_daemonset_kept_to_another_pool_takes_nothing_from_a_claim_in_flight() -> None:
    other_pool = daemonset("other", cpu="3", memory="1Gi", node_selector={wk.NODEPOOL: "other"})
    snap = dataclasses.replace(
        snapshot(daemonsets=[other_pool]), nodes=(in_flight("claim-ab", zone="zone-b", launched=False),)
    )
    results = run([pod("p", cpu="2", memory="1Gi")], snap=snap)
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "claim-ab")]


def test_pinned_pods_that_repel_a_flexible_pod_go_first_and_it_waits() -> None:
    """Karpenter's "should not violate pod anti-affinity on zone (inverse)": the pinned pods carry the
    anti-affinity, so they go first and every zone repels the target."""
    anti = {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": SECURE}}
    pinned = [
        pod(f"z{i}", cpu="2", node_selector={wk.ZONE: zone}, anti_affinity=[anti])
        for i, zone in enumerate(("zone-a", "zone-b", "zone-c"))
    ]
    results = run([pod("target", cpu="100m", labels=SECURE), *pinned])
    assert [u.pod.name for u in results.unschedulable] == ["target"]


def not_registered(sn: StateNode, *claim_taints: dict[str, str]) -> StateNode:
    """`sn` as it is between its kubelet's registration and ours: the Node carries the kubelet's labels
    (not its pool's) and the unregistered taint; its claim is launched, not Registered, with its taints."""
    assert sn.node is not None and sn.claim is not None
    raw = dict(sn.node.raw)
    labels = {k: v for k, v in raw["metadata"]["labels"].items() if k != wk.NODEPOOL}
    raw["metadata"] = {**raw["metadata"], "labels": labels}
    raw["spec"] = {**raw["spec"], "taints": [{"key": wk.UNREGISTERED_TAINT, "effect": "NoExecute"}]}
    claim = sn.claim.model_dump(by_alias=True, mode="json", exclude_none=True)
    claim["status"]["conditions"] = [c for c in claim["status"]["conditions"] if c["type"] == "Launched"]
    claim["spec"]["taints"] = list(claim_taints)
    return dataclasses.replace(
        sn, node=type(sn.node).from_dict(raw), claim=type(sn.claim).model_validate(claim)
    )


def test_a_node_not_registered_yet_takes_the_pods_of_its_pool_as_registration_will_label_it() -> None:
    """Issue 29: a replica that solves pods whose claim launched before it looked (a new holder of the
    claim's shard, a restart) places them on the claim's Node still registering, not on a second node."""
    sn = not_registered(state_node("n", initialized=False))
    pinned = pod("p", cpu="100m", node_selector={wk.NODEPOOL: "default"})
    results = run([pinned], snap=Snapshot(nodes=(sn,)))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "n")]
    assert not results.new_claims


def test_a_node_not_registered_yet_repels_the_pods_its_claims_taints_will() -> None:
    sn = not_registered(
        state_node("n", initialized=False), {"key": "team", "value": "a", "effect": "NoSchedule"}
    )
    results = run([pod("p", cpu="100m")], snap=Snapshot(nodes=(sn,)))
    assert not results.placements and len(results.new_claims) == 1, "registration gives it the taint"
