"""Facts with one owner: the table of tracked kinds, the pools new capacity may come from, a claim's
start-up taints and its parsed allocatable. Each test holds a reader to the owner's answer."""

from datetime import UTC, datetime
from typing import Any

import pytest

from provisioner.api import KINDS, crds, kinds
from provisioner.api import labels as wk
from provisioner.api.common import Taint
from provisioner.api.nodepool import live
from provisioner.kube import client as kc
from provisioner.state import ClusterState
from provisioner.state.cluster import snapshot_kinds
from testkit.builders import aws_node_class_manifest, node_claim, node_pool, node_pool_manifest


def test_every_model_of_ours_is_a_tracked_kind_of_our_group() -> None:
    for kind in KINDS:
        assert kinds.BY_KIND[kind].group == wk.GROUP
    ours = {r.kind for r in kinds.TRACKED if r.group == wk.GROUP}
    assert ours == set(KINDS)


def test_the_crds_use_the_tracked_plural_of_their_kind() -> None:
    for kind in crds.kinds():
        assert kinds.BY_KIND[kind.kind].plural == kind.plural


def test_the_informers_watch_exactly_the_tracked_kinds() -> None:
    assert kc.WATCHED == kinds.TRACKED


def test_the_nodeclass_kinds_are_the_tracked_rows_marked_nodeclass() -> None:
    assert tuple(kinds.NODECLASS_KINDS) == ("AWSNodeClass", "GCPNodeClass")
    assert all(kinds.BY_KIND[k].nodeclass for k in kinds.NODECLASS_KINDS)


def test_the_snapshot_kinds_are_tracked() -> None:
    assert set(snapshot_kinds()) <= set(kinds.BY_KIND)


def test_the_state_refuses_a_kind_the_table_does_not_track() -> None:
    with pytest.raises(ValueError, match="does not track kind 'Deployment'"):
        ClusterState().upsert("Deployment", {"metadata": {"name": "d"}})


@pytest.mark.parametrize("kind", [r.kind for r in kinds.TRACKED], ids=str)
def test_the_state_accepts_every_tracked_kind(kind: str) -> None:
    docs: dict[str, dict[str, Any]] = {
        "Pod": {"metadata": {"name": "p", "namespace": "ml"}, "spec": {"containers": []}},
        "Node": {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1"}}},
        "Namespace": {"metadata": {"name": "ml"}},
        "DaemonSet": {"metadata": {"name": "d", "namespace": "ml"}, "spec": {"template": {"spec": {}}}},
        "PodDisruptionBudget": {"metadata": {"name": "b", "namespace": "ml"}, "spec": {}},
        "NodeClaim": node_claim("c").model_dump(by_alias=True, mode="json"),
        "NodePool": node_pool_manifest("pool"),
        "AWSNodeClass": aws_node_class_manifest("a"),
        "GCPNodeClass": {
            "kind": "GCPNodeClass",
            "metadata": {"name": "g"},
            "spec": {"project": "p", "image": "projects/cos-cloud/global/images/family/cos-stable"},
        },
        "Team": {"kind": "Team", "metadata": {"name": "t"}, "spec": {"namespaces": ["ml"]}},
        "Department": {"kind": "Department", "metadata": {"name": "d"}, "spec": {}},
        "PodTemplate": {"metadata": {"name": "pt", "namespace": "ml"}, "template": {"spec": {}}},
        "ProvisioningRequest": {
            "metadata": {"name": "r", "namespace": "ml"},
            "spec": {
                "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                "podSets": [{"count": 1, "podTemplateRef": {"name": "pt"}}],
            },
        },
    }
    state = ClusterState()
    state.upsert(kind, docs[kind])
    assert state.keys_of(kind)


def test_a_pool_being_deleted_offers_no_new_capacity() -> None:
    pool = node_pool("gone")
    deleted = pool.metadata.model_copy(update={"deletion_timestamp": datetime(2026, 1, 1, tzinfo=UTC)})
    gone = pool.model_copy(update={"metadata": deleted})
    kept = node_pool("kept")
    assert live([gone, kept]) == [kept]


def test_a_startup_taint_is_matched_by_key_and_effect() -> None:
    claim = node_claim("c")
    spec = claim.spec.model_copy(update={"startup_taints": [Taint(key="gpu", effect="NoSchedule")]})
    assert spec.is_startup_taint("gpu", "NoSchedule")
    assert not spec.is_startup_taint("gpu", "NoExecute")
    assert not spec.is_startup_taint("other", "NoSchedule")


def test_a_claims_allocatable_parses_to_base_units() -> None:
    claim = node_claim("c")
    status = claim.status.model_copy(
        update={"allocatable": {"cpu": "1500m", "memory": "1Gi"}, "capacity": {}}
    )
    assert status.allocatable_amounts() == {"cpu": 1500, "memory": 2**30}
    assert status.capacity_amounts() == {}
