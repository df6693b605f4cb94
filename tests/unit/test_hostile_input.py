"""Hostile objects as they arrive from the API server (property-based): NodePools, NodeClasses, Pods and
Nodes with huge, negative or malformed quantities, unknown fields, deep nesting, wrong types and large
lists. Whatever arrives, the informers' feed into the cluster state never raises: the object is either
taken or skipped with a warning naming its kind, name and field, and the objects beside it are kept."""

from __future__ import annotations

import copy
import logging
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.kube import client as kc
from provisioner.kube.informers import StateFeeder
from provisioner.state import ClusterState
from tests.controllers.world import gpu_pod, node_class, node_pool

QUANTITIES = [
    "-1",
    "-5Gi",
    "1e999",
    "99999999999999999999999999999Ei",
    "NaN",
    "Infinity",
    "0x10",
    "1.5.5",
    "",
    " ",
    "1Qi",
    "1e-999",
    "١٢",  # Arabic-Indic digits: str.isdigit() says yes, int() says yes, Kubernetes says no
]


def _deep(depth: int) -> Any:
    out: Any = "x"
    for _ in range(depth):
        out = {"a": out}
    return out


HOSTILE = st.one_of(
    st.sampled_from(QUANTITIES),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.booleans(),
    st.text(max_size=30),
    # Built afresh per example: a mutation must not leak into the next one.
    st.builds(lambda: _deep(300)),
    st.builds(lambda: ["x"] * 5000),
    st.builds(lambda: [{"key": "k"} for _ in range(2000)]),
    st.dictionaries(st.text(max_size=8), st.integers(), max_size=3),
    st.lists(st.integers(), max_size=3),
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document a value could be replaced."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        items: Any = doc.items()
    elif isinstance(doc, list):
        items = enumerate(doc)
    else:
        return out
    for k, v in items:
        if prefix == () and k in ("apiVersion", "kind", "metadata"):
            out.extend(_paths(v, (*prefix, k)) if k == "metadata" else [])
            continue
        if prefix == ("metadata",) and k in ("name", "namespace"):
            continue  # the API server guarantees these
        out.append((*prefix, k))
        out.extend(_paths(v, (*prefix, k)))
    return out


def _node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"provisioner.sh/nodepool": "gpu"}},
        "spec": {"providerID": "fake://z/n1", "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "capacity": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod() -> dict[str, Any]:
    doc = gpu_pod("p1")
    doc["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    doc["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}]
            }
        }
    }
    doc["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    return doc


BASES = {
    "Pod": (kc.POD, _pod),
    "Node": (kc.NODE, _node),
    "NodePool": (kc.NODEPOOL, lambda: node_pool("gpu", limits={"nvidia.com/gpu": "8", "cpu": "100"})),
    "AWSNodeClass": (kc.AWSNODECLASS, node_class),
}


@st.composite
def hostile_objects(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(sorted(BASES)))
    doc = BASES[kind][1]()
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(HOSTILE)  # an unknown field
        else:
            parent[path[-1]] = draw(HOSTILE)
    return kind, doc


def _other(kind: str) -> dict[str, Any]:
    doc = BASES[kind][1]()
    doc["metadata"]["name"] = "the-good-one"
    return doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_objects())
def test_no_object_from_the_api_breaks_the_feed_or_its_neighbours(obj: tuple[str, dict[str, Any]]) -> None:
    kind, doc = obj
    res = BASES[kind][0]
    state = ClusterState()
    feeder = StateFeeder(state)
    good = _other(kind)
    # As a relist (one bad item among good ones) and as a watch event.
    feeder.replace_all(res, [copy.deepcopy(doc), good])
    feeder.upsert(res, copy.deepcopy(doc))
    assert "the-good-one" in {k.rsplit("/", 1)[-1] for k in state.keys_of(kind)}
    snap = state.snapshot()  # the decision code's view builds from whatever was taken
    assert snap is not None


def test_a_refused_object_is_named_with_its_field_in_the_warning(caplog) -> None:
    doc = node_pool("gpu", limits={"nvidia.com/gpu": "-5Gi"})
    doc["spec"]["weight"] = "heavy"
    feeder = StateFeeder(ClusterState())
    with caplog.at_level(logging.WARNING):
        feeder.upsert(kc.NODEPOOL, doc)
    (record,) = [r for r in caplog.records if "ignoring invalid" in r.getMessage()]
    message = record.getMessage()
    assert "NodePool gpu" in message
    assert "spec.weight" in message
