"""Karpenter's Existing Nodes, DaemonSet and pod-order cases (issue 30), translated to our builders: a
node no pool owns is capacity, DaemonSet overhead counts only where the DaemonSet can run, and pods
pinned to a domain go before a pod that repels them."""

from __future__ import annotations

from provisioner.api import labels as wk
from tests.builders import cpu_types, node, node_pool, pod, run, snapshot


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
