"""Karpenter's Existing Nodes, DaemonSet and pod-order cases (issue 30), translated to our builders: a
node no pool owns is capacity, DaemonSet overhead counts only where the DaemonSet can run, and pods
pinned to a domain go before a pod that repels them."""

from __future__ import annotations

import pytest

from provisioner.api import labels as wk
from tests.builders import claim_of, node, pod, req, run, snapshot


def zone_of(results, name: str) -> str:
    claim = claim_of(results, name)
    assert claim is not None, f"{name} got no new node"
    return claim.offering.zone


def unowned(name: str = "managed-1", *, cpu: int = 10):
    """A Ready node of a managed node group: no pool label, no claim."""
    return node(name, cpu=cpu, memory_gib=10, pool=None)


# A node no pool owns ------------------------------------------------------------------------------------


def test_a_pod_goes_to_an_existing_node_no_pool_owns():
    results = run([pod("p", cpu="10m")], snap=snapshot([(unowned(), [])]))
    assert [(p.pod.name, p.node) for p in results.placements] == [("p", "managed-1")]
    assert not results.new_claims


def test_many_pods_go_to_an_existing_node_no_pool_owns():
    pods = [pod(f"p{i}", cpu="10m", memory="10Mi") for i in range(100)]
    results = run(pods, snap=snapshot([(unowned(), [])]))
    assert {p.node for p in results.placements} == {"managed-1"} and len(results.placements) == 100
    assert not results.new_claims


def test_a_pod_with_a_pool_list_still_uses_a_node_no_pool_owns():
    """kube-scheduler places the pod on the unowned node whatever its pool list: a new node would stay
    empty. The pool named `default` gives every pod a list, so this is also Karpenter's plain case."""
    listed = pod("listed", cpu="10m", pools=["default"])
    results = run([listed, pod("plain", cpu="10m")], snap=snapshot([(unowned(), [])]))
    assert sorted((p.pod.name, p.node) for p in results.placements) == [
        ("listed", "managed-1"),
        ("plain", "managed-1"),
    ]
    assert not results.new_claims


def test_a_pod_with_a_pool_list_still_keeps_off_other_pools_nodes_when_an_unowned_node_is_full():
    other = node("other-1", cpu=8, pool="other")
    full = unowned(cpu=1)
    results = run([pod("p", cpu="2", pools=["default"])], snap=snapshot([(other, []), (full, [])]))
    assert not results.placements
    (claim,) = results.new_claims
    assert claim.nodepool.name == "default"


def test_a_pod_whose_selector_the_unowned_node_does_not_meet_gets_a_new_node():
    pinned = pod("p", cpu="10m", node_selector={wk.NODEPOOL: "default"}, pools=["default"])
    results = run([pinned], snap=snapshot([(unowned(), [])]))
    assert not results.placements and len(results.new_claims) == 1


# Pods pinned to a domain go before a pod that repels them -------------------------------------------------

SECURE = {"security": "s2"}


def repeller(name: str = "repels", **kw):
    anti = {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": SECURE}}
    return pod(name, anti_affinity=[anti], **kw)


def zone_pinned(name: str, zone: str, *, how: str = "selector"):
    if how == "selector":
        return pod(name, cpu="2", labels=SECURE, node_selector={wk.ZONE: zone})
    return pod(name, cpu="2", labels=SECURE, required=[[req(wk.ZONE, "In", zone)]])


@pytest.mark.parametrize("how", ["selector", "affinity"])
def test_pods_pinned_to_each_zone_run_and_the_pod_that_repels_them_waits(how):
    """Karpenter's "should not violate pod anti-affinity on zone": the repeller is smaller, yet placing it
    first would take one pinned pod's only zone."""
    pinned = [zone_pinned(f"z{i}", z, how=how) for i, z in enumerate(("zone-a", "zone-b", "zone-c"))]
    results = run([repeller(cpu="1"), *pinned])
    assert [u.pod.name for u in results.unschedulable] == ["repels"]
    assert sorted(zone_of(results, p.name) for p in pinned) == ["zone-a", "zone-b", "zone-c"]


def test_a_pod_that_repels_pinned_pods_takes_the_zone_they_leave_free():
    pinned = [zone_pinned("za", "zone-a"), zone_pinned("zb", "zone-b")]
    results = run([repeller(cpu="4"), *pinned])
    assert not results.unschedulable
    assert zone_of(results, "repels") == "zone-c"


def test_a_repeller_with_flexible_targets_still_goes_first_so_both_run():
    """Neither is pinned: the repeller goes first and its target keeps out of its zone (Karpenter leaves
    the repeller pending here, for want of knowing the target's zone; both running is the better end)."""
    results = run([pod("target", cpu="2", labels=SECURE), repeller(cpu="100m")])
    assert not results.unschedulable
    assert zone_of(results, "target") != zone_of(results, "repels")
