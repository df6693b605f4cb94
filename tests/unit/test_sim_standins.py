"""The simulated cluster's stand-ins that look only at what was written since their last sync (the
DaemonSet controller, the GPU operator, the workload controllers): each must still do what a look at the
whole cluster does, whatever happened in between."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clock import VirtualClock
from provisioner.sim.cluster import DaemonSets, Kubelets, SimCluster, Workloads
from provisioner.state import ClusterState, Pod


def cluster() -> SimCluster:
    return SimCluster(ClusterState(), VirtualClock(datetime(2026, 3, 2, tzinfo=UTC)))


def node(name: str, *, taints: list[dict[str, str]] | None = None, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "4"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def daemonset(name: str, **node_selector: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": node_selector,
                    "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}],
                }
            }
        },
    }


def daemon_pods(sim: SimCluster) -> list[tuple[str, str | None]]:
    return sorted((p.key, p.node_name) for p in sim.state.pods.values() if p.is_daemonset_pod)


def test_daemon_pods_follow_nodes_and_daemonsets_through_every_kind_of_change() -> None:
    sim = cluster()
    sim.state.upsert("Node", node("n1", pool="a"))  # there before the controller
    ds = DaemonSets(sim)
    sim.state.upsert("DaemonSet", daemonset("agent"))
    ds.sync()
    assert daemon_pods(sim) == [("kube-system/agent-n1", "n1")]

    sim.create("Node", node("n2", pool="b"))
    ds.sync()
    assert daemon_pods(sim) == [("kube-system/agent-n1", "n1"), ("kube-system/agent-n2", "n2")]

    sim.evict_pod("kube-system", "agent-n2")  # comes back on the next sync
    ds.sync()
    assert ("kube-system/agent-n2", "n2") in daemon_pods(sim)

    sim.delete_node("n1")  # its daemon pod goes
    ds.sync()
    assert daemon_pods(sim) == [("kube-system/agent-n2", "n2")]

    sim.state.upsert("DaemonSet", daemonset("gpu-agent", pool="b"))  # a new DaemonSet reaches every node
    sim.patch_node("n2", {"metadata": {"labels": {"pool": "b"}}})
    ds.sync()
    assert ("kube-system/gpu-agent-n2", "n2") in daemon_pods(sim)

    sim.create("Node", node("n3", pool="c"))
    sim.delete_node("n3")  # written and gone between two syncs: nothing to make, nothing left behind
    ds.sync()
    assert {n for _, n in daemon_pods(sim)} == {"n2"}


def claim(name: str, *, node_name: str | None = None) -> NodeClaim:
    return NodeClaim.model_validate(
        {
            "metadata": {"name": name, "labels": {wk.NODEPOOL: "gpu"}},
            "spec": {
                "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
                "startupTaints": [{"key": "nvidia.com/gpu-driver", "effect": "NoSchedule"}],
            },
            "status": {"nodeName": node_name} if node_name else {},
        }
    )


def test_the_gpu_operator_lifts_start_up_taints_once_the_node_is_registered_in_either_order() -> None:
    sim = cluster()
    kubelets = Kubelets(sim, types={})
    startup = [
        {"key": "nvidia.com/gpu-driver", "effect": "NoSchedule"},
        {"key": "other", "effect": "NoSchedule"},
    ]
    now = sim.clock.now()
    # n1: the claim names the node first, the registration label comes later.
    sim.create_nodeclaim(claim("c1"))
    sim.create("Node", node("n1", taints=startup))
    sim.patch_nodeclaim_status("c1", {"nodeName": "n1"})
    kubelets.sync(now)
    assert len(sim.state.nodes["n1"].taints) == 2, "not registered yet"
    sim.patch_node("n1", {"metadata": {"labels": {wk.REGISTERED: "true"}}})
    # n2: registered first, claimed later.
    sim.create("Node", node("n2", taints=startup, **{wk.REGISTERED: "true"}))
    kubelets.sync(now)
    assert [t.key for t in sim.state.nodes["n1"].taints] == ["other"]
    assert len(sim.state.nodes["n2"].taints) == 2, "no claim names it yet"
    sim.create_nodeclaim(claim("c2", node_name="n2"))
    kubelets.sync(now)
    assert [t.key for t in sim.state.nodes["n2"].taints] == ["other"]


def test_workloads_create_again_the_pods_removed_since_the_last_sync_and_only_those() -> None:
    sim = cluster()
    workloads = Workloads(sim)
    owned = {"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "web", "controller": True}]}}
    pods = [
        Pod.from_dict(
            {
                "metadata": {"name": f"web-{i}", "namespace": "default", **owned["metadata"]},
                "spec": {"containers": [{"name": "c"}]},
            }
        )
        for i in range(3)
    ]
    bare = Pod.from_dict({"metadata": {"name": "bare", "namespace": "default"}, "spec": {"containers": []}})
    workloads.add([*pods, bare])
    sim.evict_pod("default", "web-1")
    sim.evict_pod("default", "bare")
    workloads.remove(["default/web-2"])
    workloads.sync(sim.clock.now())
    assert sorted(sim.state.pods.keys()) == ["default/web-0", "default/web-1"]
    assert workloads.recreated == 1
    workloads.sync(sim.clock.now())
    assert workloads.recreated == 1


def test_the_simulated_api_server_keeps_the_events_a_run_prints_and_drops_the_routine_ones() -> None:
    sim = cluster()
    for reason in ("Nominated", "Disrupting", "Admitted", "FailedProvisioning", "Interrupted"):
        sim.record_event(kind="Pod", name="p", namespace="ml", reason=reason, message=reason)
    assert [e.reason for e in sim.events] == ["FailedProvisioning", "Interrupted"]
