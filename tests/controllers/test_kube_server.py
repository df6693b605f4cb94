"""The strict test API server refuses what a real one refuses and does what a real one does (each case from
the Kubernetes API documentation; see testkit/controllers/kube_rules.py and crd_schema.py)."""

from __future__ import annotations

from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.clusterapi import ConflictError, EvictionBlocked, NotFoundError
from provisioner.kube import client as kc
from provisioner.kube.client import ApiError
from testkit.builders.pods import pdb_manifest, pod_manifest
from testkit.controllers.world import node_class, node_pool
from tests.controllers.conftest import REAL_CLUSTER

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="checks the imitation itself")


def refused(call: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(ApiError) as err:
        call(*args, **kw)
    assert err.value.status == 422, err.value
    return str(err.value)


def a_pod(name: str = "p", **kw: Any) -> dict[str, Any]:
    return pod_manifest(name, cpu="1", memory="1Gi", **kw)


def a_node(name: str = "n1") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "capacity": {"cpu": "8", wk.GPU_RESOURCE: "1"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


@pytest.mark.parametrize("name", ["bad~1", "Upper", "-dash", "a" * 254])
def test_object_names_must_be_rfc_1123_subdomains(kube_client: kc.KubeClient, name: str) -> None:
    assert "metadata.name" in refused(kube_client.create, kc.POD, a_pod(name), namespace="default")


def test_namespace_names_must_be_rfc_1123_labels(kube_client: kc.KubeClient) -> None:
    refused(kube_client.create, kc.NAMESPACE, {"metadata": {"name": "a.b"}})
    kube_client.create(kc.NAMESPACE, {"metadata": {"name": "ab"}})


@pytest.mark.parametrize(
    "labels",
    [{"a/b/c": "x"}, {"-a": "x"}, {"a": "x" * 64}, {"a": "bad value"}, {"UPPER.example/x": "y"}],
)
def test_label_keys_and_values_follow_the_label_syntax(
    kube_client: kc.KubeClient, labels: dict[str, str]
) -> None:
    pod = a_pod()
    pod["metadata"]["labels"] = labels
    assert "metadata.labels" in refused(kube_client.create, kc.POD, pod, namespace="default")


@pytest.mark.parametrize(
    ("resources", "says"),
    [
        ({"requests": {"cpu": "lots"}}, "quantities must match"),
        ({"requests": {"memory": "-1Gi"}}, "greater than or equal to 0"),
        (
            {"requests": {wk.GPU_RESOURCE: "-1"}, "limits": {wk.GPU_RESOURCE: "-1"}},
            "greater than or equal to 0",
        ),
        ({"requests": {wk.GPU_RESOURCE: "0.5"}, "limits": {wk.GPU_RESOURCE: "0.5"}}, "must be an integer"),
        ({"requests": {wk.GPU_RESOURCE: "1"}}, "Limit must be set"),
        ({"requests": {wk.GPU_RESOURCE: "1"}, "limits": {wk.GPU_RESOURCE: "2"}}, "must be equal"),
    ],
)
def test_quantities_and_integer_only_extended_resources(
    kube_client: kc.KubeClient, resources: dict[str, dict[str, str]], says: str
) -> None:
    pod = a_pod()
    pod["spec"]["containers"][0]["resources"] = resources
    assert says in refused(kube_client.create, kc.POD, pod, namespace="default")


def test_pods_need_containers_with_an_image(kube_client: kc.KubeClient) -> None:
    pod = a_pod()
    del pod["spec"]["containers"][0]["image"]
    assert "containers[0].image: Required value" in refused(
        kube_client.create, kc.POD, pod, namespace="default"
    )
    pod["spec"]["containers"] = []
    assert "spec.containers: Required value" in refused(kube_client.create, kc.POD, pod, namespace="default")


def test_a_namespace_must_exist_before_objects_in_it(kube_client: kc.KubeClient) -> None:
    with pytest.raises(NotFoundError):
        kube_client.create(kc.POD, a_pod(namespace="vision"), namespace="vision")
    kube_client.create(kc.NAMESPACE, {"metadata": {"name": "vision"}})
    kube_client.create(kc.POD, a_pod(namespace="vision"), namespace="vision")


def test_a_created_pod_starts_pending_whatever_status_it_was_sent_with(kube_client: kc.KubeClient) -> None:
    pod = a_pod()
    pod["status"] = {"phase": "Running"}
    stored = kube_client.create(kc.POD, pod, namespace="default")
    assert stored["status"] == {"phase": "Pending"}


def test_custom_objects_are_validated_pruned_and_defaulted_by_their_crd_schema(
    kube_client: kc.KubeClient,
) -> None:
    bad = node_pool("bad", weight=1000)
    assert "spec.weight" in refused(kube_client.create, kc.NODEPOOL, bad)
    cel = node_pool("cel")
    cel["spec"]["template"]["spec"]["requirements"].append({"key": "a", "operator": "In", "values": []})
    assert "need at least one value" in refused(kube_client.create, kc.NODEPOOL, cel)
    good = node_pool("good")
    good["spec"]["typo"] = 1
    good["status"] = {"resources": {"nodes": "9"}}
    stored = kube_client.create(kc.NODEPOOL, good)
    assert "typo" not in stored["spec"], "unknown fields are pruned"
    assert "status" not in stored, "a create's status is dropped (status subresource)"
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h", "defaults are filled"


def test_a_stale_resource_version_is_a_conflict_and_a_no_op_write_changes_nothing(
    kube_client: kc.KubeClient,
) -> None:
    stored = kube_client.create(kc.NODEPOOL, node_pool("gpu"))
    rv = stored["metadata"]["resourceVersion"]
    same = kube_client.patch(kc.NODEPOOL, "gpu", {"spec": {"weight": stored["spec"].get("weight")}})
    assert same["metadata"]["resourceVersion"] == rv
    kube_client.patch(kc.NODEPOOL, "gpu", {"spec": {"weight": 5}})
    with pytest.raises(ConflictError):
        kube_client.patch(kc.NODEPOOL, "gpu", {"metadata": {"resourceVersion": rv}, "spec": {"weight": 6}})


def test_generation_counts_spec_changes_and_the_status_subresource_splits_writes(
    kube_client: kc.KubeClient,
) -> None:
    kube_client.create(kc.NODEPOOL, node_pool("gpu"))
    a = kube_client.patch(kc.NODEPOOL, "gpu", {"metadata": {"labels": {"x": "y"}}, "status": {"x": 1}})
    assert a["metadata"]["generation"] == 1 and "status" not in a, "status ignored on the main resource"
    b = kube_client.patch(kc.NODEPOOL, "gpu", {"spec": {"weight": 7}})
    assert b["metadata"]["generation"] == 2
    c = kube_client.patch(
        kc.NODEPOOL, "gpu", {"spec": {"weight": 9}, "status": {"resources": {"nodes": "1"}}}, sub="status"
    )
    assert c["spec"]["weight"] == 7, "spec ignored on /status"
    assert c["status"] == {"resources": {"nodes": "1"}} and c["metadata"]["generation"] == 2


def test_finalizers_hold_a_deletion_and_none_can_be_added_once_it_started(kube_client: kc.KubeClient) -> None:
    kube_client.create(kc.nodeclass("AWSNodeClass"), node_class())
    kube_client.patch(kc.nodeclass("AWSNodeClass"), "default", {"metadata": {"finalizers": ["a/b"]}})
    kube_client.delete(kc.nodeclass("AWSNodeClass"), "default")
    held = kube_client.get(kc.nodeclass("AWSNodeClass"), "default")
    assert held["metadata"]["deletionTimestamp"]
    refused(
        kube_client.patch,
        kc.nodeclass("AWSNodeClass"),
        "default",
        {"metadata": {"finalizers": ["a/b", "c/d"]}},
    )
    kube_client.patch(kc.nodeclass("AWSNodeClass"), "default", {"metadata": {"finalizers": []}})
    with pytest.raises(NotFoundError):
        kube_client.get(kc.nodeclass("AWSNodeClass"), "default")


def _bound_pod(kube_client: kc.KubeClient, name: str = "p", **kw: Any) -> None:
    kube_client.create(kc.POD, a_pod(name, **kw), namespace="default")
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"name": "n1"}}
    kube_client.request("POST", kc.POD.path(namespace="default", name=name, sub="binding"), body=body)


def test_a_bound_pod_stays_terminating_until_its_kubelet_finishes_it(kube_client: kc.KubeClient) -> None:
    _bound_pod(kube_client)
    kube_client.delete(kc.POD, "p", namespace="default")
    terminating = kube_client.get(kc.POD, "p", namespace="default")
    assert terminating["metadata"]["deletionTimestamp"]
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30
    kube_client.delete(kc.POD, "p", namespace="default", body={"gracePeriodSeconds": 0})
    with pytest.raises(NotFoundError):
        kube_client.get(kc.POD, "p", namespace="default")
    kube_client.create(kc.POD, a_pod("unbound"), namespace="default")
    kube_client.delete(kc.POD, "unbound", namespace="default")
    with pytest.raises(NotFoundError):
        kube_client.get(kc.POD, "unbound", namespace="default")


def test_scheduling_gates_can_only_be_removed_and_gated_pods_only_narrowed(
    kube_client: kc.KubeClient,
) -> None:
    pod = a_pod()
    pod["spec"]["schedulingGates"] = [{"name": "a/one"}, {"name": "a/two"}]
    kube_client.create(kc.POD, pod, namespace="default")
    gates = {"spec": {"schedulingGates": [{"name": "a/one"}, {"name": "a/three"}]}}
    assert "schedulingGates" in refused(kube_client.patch, kc.POD, "p", gates, namespace="default")
    kube_client.patch(kc.POD, "p", {"spec": {"nodeSelector": {"pool": "x"}}}, namespace="default")
    kube_client.patch(kc.POD, "p", {"spec": {"schedulingGates": None}}, namespace="default")
    changed = {"spec": {"nodeSelector": {"pool": "y"}}}
    refused(kube_client.patch, kc.POD, "p", changed, namespace="default")
    refused(kube_client.patch, kc.POD, "p", {"spec": {"nodeName": "n1"}}, namespace="default")


def test_a_new_node_carries_the_not_ready_taint(kube_client: kc.KubeClient) -> None:
    stored = kube_client.create(kc.NODE, a_node())
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in stored["spec"]["taints"]
    assert stored["status"]["capacity"][wk.GPU_RESOURCE] == "1", "a Node keeps the status it registers with"
    bad = a_node("n2")
    bad["status"]["capacity"][wk.GPU_RESOURCE] = "1.5"
    assert "must be an integer" in refused(kube_client.create, kc.NODE, bad)


def test_eviction_honours_pod_disruption_budgets_and_leaves_the_pod_terminating(
    kube_client: kc.KubeClient,
) -> None:
    _bound_pod(kube_client, "guarded", labels={"app": "db"})
    _bound_pod(kube_client, "free", labels={"app": "web"})
    kube_client.create(
        kc.PDB, pdb_manifest("db", match={"app": "db"}, max_unavailable=0), namespace="default"
    )
    for name, status in (("guarded", 429), ("free", 201)):
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"},
        }
        path = kc.POD.path(namespace="default", name=name, sub="eviction")
        if status == 429:  # the client's EvictionBlocked
            with pytest.raises(EvictionBlocked):
                kube_client.request("POST", path, body=body)
        else:
            kube_client.request("POST", path, body=body)
    assert kube_client.get(kc.POD, "free", namespace="default")["metadata"]["deletionTimestamp"]
    assert "deletionTimestamp" not in kube_client.get(kc.POD, "guarded", namespace="default")["metadata"]


def _lease(name: str = "l", **spec: Any) -> dict[str, Any]:
    base = {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "renewTime": "2026-01-01T00:00:00.000000Z",
        "leaseTransitions": 0,
    }
    return {"metadata": {"name": name}, "spec": {**base, **spec}}


@pytest.mark.parametrize(
    ("spec", "status"),
    [
        ({"leaseDurationSeconds": 0}, 422),
        ({"leaseTransitions": -1}, 422),
        ({"renewTime": "2026-01-01T00:00:00Z"}, 400),
        ({"acquireTime": "yesterday"}, 400),
        ({"holderIdentity": 7}, 400),
        ({"leaseDurationSeconds": "15"}, 400),
    ],
    ids=[
        "zero-duration",
        "negative-transitions",
        "time-without-micros",
        "not-a-time",
        "holder-not-text",
        "duration-text",
    ],
)
def test_a_lease_is_refused_as_coordination_k8s_io_refuses_it(
    kube_client: kc.KubeClient, spec: dict[str, Any], status: int
) -> None:
    with pytest.raises(ApiError) as err:
        kube_client.create(kc.LEASE, _lease(**spec), namespace="default")
    assert err.value.status == status
    kube_client.create(kc.LEASE, _lease("ok"), namespace="default")
    with pytest.raises(ApiError) as err:
        kube_client.patch(kc.LEASE, "ok", {"spec": spec}, namespace="default")
    assert err.value.status == status


def test_two_candidates_updating_one_lease_from_the_same_version_conflict(kube_client: kc.KubeClient) -> None:
    held = kube_client.create(kc.LEASE, _lease("race"), namespace="default")
    version = held["metadata"]["resourceVersion"]
    renew = {"holderIdentity": "b", "renewTime": "2026-01-01T00:00:05.000000Z"}
    kube_client.patch(
        kc.LEASE, "race", {"metadata": {"resourceVersion": version}, "spec": renew}, namespace="default"
    )
    with pytest.raises(ConflictError):
        kube_client.patch(
            kc.LEASE,
            "race",
            {"metadata": {"resourceVersion": version}, "spec": {**renew, "holderIdentity": "c"}},
            namespace="default",
        )
    assert kube_client.get(kc.LEASE, "race", namespace="default")["spec"]["holderIdentity"] == "b"


def test_a_requests_timeout_must_be_a_duration(kube_client: kc.KubeClient) -> None:
    # kube-apiserver reads `timeout` as a Go duration (filters.WithRequestDeadline); 400 otherwise.
    assert kube_client.request("GET", kc.NODE.path(), query={"timeout": "1m30.5s"})["items"] == []
    with pytest.raises(ApiError) as err:
        kube_client.request("GET", kc.NODE.path(), query={"timeout": "soon"})
    assert err.value.status == 400
