"""The cluster-state objects: what decision code reads from Kubernetes JSON, and the snapshot join."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.state import ClusterState, Pod, Snapshot
from provisioner.state.objects import TaintValue, Toleration, tolerates_all
from testkit.typed import present


def pod_doc(
    name: str = "p",
    *,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "containers": containers
            or [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            **({"initContainers": init} if init else {}),
            **({"overhead": overhead} if overhead else {}),
            **spec,
        },
    }


def container(cpu: str, memory: str = "0", **extra: str) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory, **extra}}}


def test_requests_sum_containers_and_count_one_pod() -> None:
    pod = Pod.from_dict(pod_doc(containers=[container("500m", "1Gi"), container("250m", "512Mi")]))
    assert pod.requests == {"cpu": 750, "memory": 1536 * 2**20, "pods": 1}


def test_an_init_container_larger_than_the_containers_sets_the_request() -> None:
    pod = Pod.from_dict(pod_doc(containers=[container("1")], init=[container("3"), container("2")]))
    assert pod.requests["cpu"] == 3000


def test_sidecar_init_containers_add_to_the_running_containers() -> None:
    sidecar = {**container("500m"), "restartPolicy": "Always"}
    pod = Pod.from_dict(pod_doc(containers=[container("1")], init=[sidecar]))
    assert pod.requests["cpu"] == 1500


def test_pod_overhead_is_added() -> None:
    pod = Pod.from_dict(pod_doc(containers=[container("1")], overhead={"cpu": "250m"}))
    assert pod.requests["cpu"] == 1250


def test_limits_without_requests_count_as_requests() -> None:
    doc = pod_doc(containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}])
    assert Pod.from_dict(doc).gpus == 8


def test_pod_level_resources_replace_the_containers_sum_for_what_they_name() -> None:
    doc = pod_doc(
        containers=[container("1", "1Gi"), container("2", "1Gi", **{wk.GPU_RESOURCE: "1"})],
        resources={"requests": {"cpu": "500m"}, "limits": {"memory": "8Gi"}},
        overhead={"cpu": "100m"},
    )
    pod = Pod.from_dict(doc)
    # cpu and memory from the pod level (a limit alone is the request), the GPU still from the containers.
    assert pod.requests == {"cpu": 600, "memory": 8 * 2**30, wk.GPU_RESOURCE: 1, "pods": 1}
    assert pod.invalid == ""


def test_pod_level_resources_count_over_a_larger_init_container() -> None:
    doc = pod_doc(containers=[container("1")], init=[container("4")], resources={"requests": {"cpu": "2"}})
    assert Pod.from_dict(doc).requests["cpu"] == 2000


@pytest.mark.parametrize(
    ("requests", "name", "says"),
    [
        pytest.param({wk.GPU_RESOURCE: "-1"}, wk.GPU_RESOURCE, "negative", id="negative-gpu"),
        pytest.param({"cpu": "-500m"}, "cpu", "negative", id="negative-cpu"),
        pytest.param({"memory": "lots"}, "memory", "not a Kubernetes quantity", id="malformed"),
    ],
)
def test_a_bad_request_makes_the_pod_invalid_and_is_not_counted(
    requests: dict[str, str], name: str, says: str
) -> None:
    pod = Pod.from_dict(pod_doc(containers=[{"name": "c", "resources": {"requests": requests}}]))
    assert f"spec.containers[0].resources.requests.{name}: " in pod.invalid
    assert says in pod.invalid
    assert name not in pod.requests


def test_every_bad_request_of_a_pod_is_named() -> None:
    doc = pod_doc(
        containers=[container("1", "-1Gi"), {"name": "d", "resources": {"limits": {wk.GPU_RESOURCE: "x"}}}]
    )
    problems = Pod.from_dict(doc).invalid
    assert "spec.containers[0].resources.requests.memory" in problems
    assert f"spec.containers[1].resources.limits.{wk.GPU_RESOURCE}" in problems


def test_pool_list_annotation_is_ordered_and_trimmed() -> None:
    doc = pod_doc()
    doc["metadata"]["annotations"] = {wk.NODEPOOLS: " a100-standard, t4-best-effort ,"}
    assert Pod.from_dict(doc).nodepools == ("a100-standard", "t4-best-effort")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            Toleration(key="nvidia.com/gpu", operator="Exists"),
            TaintValue("nvidia.com/gpu", "NoSchedule"),
            True,
        ),
        (Toleration(key="nvidia.com/gpu", value="x"), TaintValue("nvidia.com/gpu", "NoSchedule", "y"), False),
        (Toleration(operator="Exists"), TaintValue("anything", "NoExecute"), True),
        (Toleration(key="k", operator="Exists", effect="NoExecute"), TaintValue("k", "NoSchedule"), False),
    ],
    ids=["exists", "value-mismatch", "wildcard", "effect-mismatch"],
)
def test_tolerations_follow_kubernetes_rules(
    toleration: Toleration, taint: TaintValue, tolerated: bool
) -> None:
    assert (tolerates_all((toleration,), [taint]) is None) is tolerated


def test_prefer_no_schedule_never_blocks() -> None:
    assert tolerates_all((), [TaintValue("k", "PreferNoSchedule")]) is None


def claim_doc(name: str, provider_id: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "gpu"}},
        "spec": {
            "nodeClassRef": {"kind": "AWSNodeClass", "name": "default"},
            "requirements": [
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]},
                {"key": wk.ZONE, "operator": "In", "values": ["us-east-1a"]},
            ],
        },
        "status": {"providerID": provider_id} if provider_id else {},
    }


def test_snapshot_joins_nodes_to_claims_by_provider_id_and_keeps_claims_in_flight() -> None:
    state = ClusterState()
    state.upsert("NodeClaim", claim_doc("gpu-a", provider_id="fake://z/a"))
    state.upsert("NodeClaim", claim_doc("gpu-b"))
    state.upsert("Node", {"metadata": {"name": "node-a"}, "spec": {"providerID": "fake://z/a"}, "status": {}})
    bound = pod_doc("bound", nodeName="node-a")
    state.upsert("Pod", bound)
    state.upsert("Pod", pod_doc("pending"))

    snap = state.snapshot()

    by_name = {n.name: n for n in snap.nodes}
    assert present(by_name["node-a"].claim).name == "gpu-a"
    assert [p.name for p in by_name["node-a"].pods] == ["bound"]
    assert by_name["gpu-b"].in_flight
    # A claim in flight shows its single-valued requirements as the labels its node will have.
    assert by_name["gpu-b"].labels[wk.ZONE] == "us-east-1a"
    assert [p.name for p in snap.pending_pods] == ["pending"]


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="does not track kind"):
        ClusterState().upsert("ConfigMap", {"metadata": {"name": "x"}})


Entry = tuple[str, bool, str | None, list[str]]
"""One node of a snapshot: its name, whether a Node is there, its claim's name, its pods in order."""


def _picture(snap: Snapshot) -> tuple[list[Entry], list[str], list[str], list[str], dict[str, Any]]:
    """What a snapshot says: each node's claim and pods (in order), the claims in flight, the pending, the
    pods bound to a Node not there; and the parts besides (pools, daemonsets, namespaces)."""
    return (
        [
            (n.name, n.node is not None, n.claim.name if n.claim else None, [p.key for p in n.pods])
            for n in snap.nodes
        ],
        [p.key for p in snap.pending_pods],
        [p.key for p in snap.unplaced_pods],
        [d.name for d in snap.daemonsets],
        dict(snap.namespaces),
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 8), st.integers(0, 3), st.integers(0, 2), st.integers(0, 3)), max_size=40
    )
)
def test_a_snapshot_kept_up_change_by_change_equals_one_built_from_scratch(
    changes: list[tuple[int, int, int, int]],
) -> None:
    """The snapshot is kept up from the changes since the last one (the pods by node, the nodes and claims
    written, the other kinds): after every change it must say exactly what a state filled with the same
    objects at once says (the same nodes, claims joined by provider id then by node name, the last claim
    winning a shared id, pods in the same order, claims in flight, pending pods, pods bound to a Node
    not there, the rest)."""
    state = ClusterState()
    objects: dict[tuple[str, str], dict[str, Any]] = {}

    def put(kind: str, key: str, doc: dict[str, Any]) -> None:
        state.upsert(kind, doc)
        objects[(kind, key)] = doc

    def drop(kind: str, key: str) -> None:
        state.remove(kind, key)
        objects.pop((kind, key), None)

    for op, i, j, k in changes:
        node = f"node-{j}"
        if op == 0:  # a pod bound to a node (running or finished) or pending
            bound: dict[str, Any] = {"nodeName": node} if k != 1 else {}
            doc = pod_doc(f"p{i}", **bound)
            doc["status"] = {"phase": "Succeeded" if k == 2 else "Running"}
            put("Pod", f"ml/p{i}", doc)
        elif op == 1:
            drop("Pod", f"ml/p{i}")
        elif op == 2:  # a Node, labelled differently each time so it is a new object; its provider id moves
            doc = {
                "metadata": {"name": node, "labels": {"v": str(i)}},
                "spec": {"providerID": f"fake://z/{(j + k) % 3}"} if k != 3 else {},
            }
            put("Node", node, doc)
        elif op == 3:
            drop("Node", node)
        elif op == 4:  # a claim, launched onto node j or in flight
            put("NodeClaim", f"c{j}", claim_doc(f"c{j}", provider_id=f"fake://z/{j}" if k % 2 else None))
        elif op == 5:
            drop("NodeClaim", f"c{j}")
        elif op == 6:  # a second claim with the same provider id, or naming a node, or named as a node
            doc = claim_doc(node if k == 3 else f"d{i % 2}", provider_id=f"fake://z/{j}" if k == 0 else None)
            if k == 1:
                doc["status"]["nodeName"] = node
            put("NodeClaim", doc["metadata"]["name"], doc)
        elif op == 7:
            drop("NodeClaim", f"d{i % 2}")
        else:  # the kinds besides: a daemonset, a namespace
            put("Namespace", f"ns{i % 2}", {"metadata": {"name": f"ns{i % 2}", "labels": {"v": str(k)}}})
            if k == 0:
                drop("Namespace", "ns0")
            ds = {
                "metadata": {"name": f"ds{j}", "namespace": "kube-system"},
                "spec": {"template": {"spec": {}}},
            }
            put("DaemonSet", f"kube-system/ds{j}", ds)
        fresh = ClusterState()
        for (kind, _), doc in objects.items():
            fresh.upsert(kind, doc)
        kept_up = _picture(state.snapshot())
        assert kept_up == _picture(fresh.snapshot())
        assert kept_up[0] == _joined_from_scratch(state)
        assert kept_up[2] == sorted(
            p.key
            for p in state.pods.values()
            if p.node_name and p.node_name not in state.nodes and not p.is_terminal
        )


def _joined_from_scratch(state: ClusterState) -> list[Entry]:
    """The snapshot's nodes as the rule says, worked out directly: each Node with the last claim (in the
    claims' order) whose provider id is the Node's, else whose status names it; then each claim no Node
    joins; by name, a Node first."""
    by_provider: dict[str, NodeClaim] = {}
    by_name: dict[str, NodeClaim] = {}
    for claim in state.claims.values():
        if claim.status.provider_id:
            by_provider[claim.status.provider_id] = claim
        if claim.status.node_name:
            by_name[claim.status.node_name] = claim
    out: list[tuple[tuple[str, int], Entry]] = []
    joined: set[str] = set()
    for node in state.nodes.values():
        joining = by_provider.get(node.provider_id or "") or by_name.get(node.name)
        joined |= {joining.name} if joining else set()
        pods = [p for p in state.pods.values() if p.node_name == node.name and not p.is_terminal]
        out.append(
            ((node.name, 0), (node.name, True, joining.name if joining else None, [p.key for p in pods]))
        )
    out += [((c.name, 1), (c.name, False, c.name, [])) for c in state.claims.values() if c.name not in joined]
    return [entry for _, entry in sorted(out, key=lambda e: e[0])]


def test_a_change_feed_hands_out_the_keys_written_since_its_last_take() -> None:
    state = ClusterState()
    pods, other_pods, nodes = state.changes("Pod"), state.changes("Pod"), state.changes("Node")
    state.upsert("Pod", pod_doc("a"))
    state.upsert("Pod", pod_doc("b"))
    state.remove("Pod", "ml/a")
    state.upsert("Node", {"metadata": {"name": "n1"}})
    assert pods.take() == {"ml/a", "ml/b"}
    assert pods.take() == set()
    state.upsert("Pod", pod_doc("b", nodeName="n1"))
    assert pods.take() == {"ml/b"}
    assert other_pods.take() == {"ml/a", "ml/b"}, "each feed keeps its own keys"
    assert nodes.take() == {"n1"}
    with pytest.raises(ValueError):
        state.upsert("Pod", {"metadata": {"name": "bad", "namespace": "ml"}, "spec": {"nodeName": 5}})
    assert pods.take() == set(), "a refused object is not a change"


def test_a_huge_whole_gpu_request_is_counted_not_a_crash() -> None:
    pod = Pod.from_dict(pod_doc(containers=[container("1", **{"nvidia.com/gpu": "1e40"})]))
    assert pod.requests["nvidia.com/gpu"] == 10**40
    assert not pod.invalid


def test_a_store_view_gets_a_stored_object_or_the_default() -> None:
    state = ClusterState()
    state.upsert("Pod", pod_doc("a"))
    stored = state.pods["ml/a"]
    assert state.pods.get("ml/a") is stored
    assert state.pods.get("ml/a", None) is stored
    assert state.pods.get("ml/b") is None
    assert state.pods.get("ml/b", stored) is stored
    state.remove("Pod", "ml/a")
    assert state.pods.get("ml/a") is None
