"""The embedded cluster's NodeClaim writes: a claim is validated once, when created; a patch validates only
the fields it sets and shares the rest with the claim it replaces. What it stores must be what validating
the merged JSON gives, and a value the model refuses must still be refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clock import VirtualClock
from provisioner.clusterapi import MemoryCluster, NotFoundError, merge_patch
from provisioner.clusterapi.in_memory import merged
from provisioner.state import ClusterState

LAUNCHED = {
    "type": "Launched",
    "status": "True",
    "reason": "Launched",
    "lastTransitionTime": "2026-03-02T00:00:15Z",
}


def claim_doc() -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "gpu-1",
            "labels": {wk.NODEPOOL: "gpu"},
            "annotations": {"a": "1"},
            "finalizers": ["provisioner.sh/termination"],
        },
        "spec": {
            "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
            "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]}],
        },
        "status": {"conditions": [LAUNCHED], "capacity": {"cpu": "4"}},
    }


PATCHES = {
    "status-launch": {
        "status": {
            "providerID": "fake://z/gpu-1",
            "instanceType": "p5.48xlarge",
            "pricePerHour": 98.32,
            "allocatable": {"cpu": "3920m", "memory": "15Gi"},
            "conditions": [LAUNCHED, {"type": "Registered", "status": "Unknown", "reason": "Registering"}],
        }
    },
    "status-node-and-time": {"status": {"nodeName": "n1", "lastPodEventTime": "2026-03-02T00:01:00Z"}},
    "status-map-merged-and-key-removed": {"status": {"capacity": {"cpu": None, "pods": "58"}}},
    "status-field-removed": {"status": {"conditions": None}},
    "annotation-added-and-removed": {"metadata": {"annotations": {"a": None, wk.DISRUPTION_REASON: "Empty"}}},
    "finalizers-and-deletion": {"metadata": {"finalizers": [], "deletionTimestamp": "2026-03-02T00:05:00Z"}},
    "spec-taints": {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
    "nothing": {},
}


@pytest.mark.parametrize("patch", list(PATCHES.values()), ids=list(PATCHES))
def test_a_patch_stores_what_validating_the_merged_json_gives(patch) -> None:
    claim = NodeClaim.model_validate(claim_doc())
    whole = NodeClaim.model_validate(merge_patch(claim.to_dict(), patch))
    got = merged(claim, patch)
    assert got.to_dict() == whole.to_dict()
    assert got == whole
    if "spec" not in patch:
        assert got.spec is claim.spec, "the parts the patch leaves are shared, not validated again"


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param(
            {"status": {"conditions": [{"type": "Launched", "status": "Maybe"}]}}, id="bad-condition"
        ),
        pytest.param({"status": {"pricePerHour": "cheap"}}, id="bad-price"),
        pytest.param({"metadata": {"labels": {"bad key!": "x"}}}, id="bad-label"),
        pytest.param({"status": {"unknownField": 1}}, id="unknown-field"),
        pytest.param({"spec": {"nodeClassRef": None}}, id="required-field-removed"),
    ],
)
def test_a_value_the_model_refuses_is_refused_and_the_claim_kept(patch) -> None:
    claim = NodeClaim.model_validate(claim_doc())
    with pytest.raises(ValidationError):
        NodeClaim.model_validate(merge_patch(claim.to_dict(), patch))
    state = ClusterState()
    cluster = MemoryCluster(state, VirtualClock(datetime(2026, 3, 2, tzinfo=UTC)))
    cluster.create_nodeclaim(claim)
    stored = state.claims["gpu-1"]
    with pytest.raises(ValidationError):
        if "status" in patch:
            cluster.patch_nodeclaim_status("gpu-1", patch["status"])
        else:
            cluster.patch_nodeclaim("gpu-1", patch)
    assert state.claims["gpu-1"] is stored


def test_status_patches_through_the_cluster_then_deletion_once_the_finalizer_goes() -> None:
    state = ClusterState()
    clock = VirtualClock(datetime(2026, 3, 2, tzinfo=UTC))
    cluster = MemoryCluster(state, clock)
    cluster.create_nodeclaim(NodeClaim.model_validate(claim_doc()))
    cluster.patch_nodeclaim_status("gpu-1", {"providerID": "fake://z/gpu-1", "nodeName": "n1"})
    claim = state.claims["gpu-1"]
    assert (claim.status.provider_id, claim.status.node_name) == ("fake://z/gpu-1", "n1")
    assert claim.status.conditions[0].last_transition_time == datetime(2026, 3, 2, 0, 0, 15, tzinfo=UTC)
    cluster.delete_nodeclaim("gpu-1")
    assert state.claims["gpu-1"].metadata.deletion_timestamp == clock.now()
    cluster.patch_nodeclaim("gpu-1", {"metadata": {"finalizers": []}})
    assert "gpu-1" not in state.claims
    with pytest.raises(NotFoundError):
        cluster.patch_nodeclaim_status("gpu-1", {"nodeName": "n2"})


def test_a_claim_from_outside_is_validated_in_full() -> None:
    doc = claim_doc()
    doc["metadata"]["labels"]["bad key!"] = "x"
    with pytest.raises(ValueError, match="not a valid label key"):
        ClusterState().upsert("NodeClaim", doc)
