"""Pods to nodes and back, over the in-memory cluster and over a Kubernetes API on HTTP."""

from __future__ import annotations

from provisioner.api import labels as wk
from provisioner.api.nodeclaim import INITIALIZED, LAUNCHED, REGISTERED
from provisioner.controllers.common import condition_status
from tests.controllers.world import gpu_pod, node_class, node_pool


def test_pending_gpu_pods_become_initialized_nodes_and_are_bound(make_world):
    w = make_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"), gpu_pod("train-1"))
    w.run_until(w.all_bound, max_ticks=30)
    claims = w.claims()
    assert claims, w.describe()
    for claim in claims:
        assert claim.nodepool == "gpu"
        assert wk.TERMINATION_FINALIZER in claim.metadata.finalizers
        for cond in (LAUNCHED, REGISTERED, INITIALIZED):
            assert condition_status(claim, cond) == "True", (claim.name, cond, claim.status.conditions)
        assert claim.status.instance_type and claim.status.instance_type.startswith(("g5", "g6"))
    nodes = list(w.state.nodes.values())
    assert len(nodes) == len(claims)
    for node in nodes:
        assert node.labels[wk.NODEPOOL] == "gpu"
        assert node.labels[wk.INITIALIZED] == "true"
        assert not any(t.key == wk.UNREGISTERED_TAINT for t in node.taints)
    assert len(w.fake.list()) == len(claims)
