"""ClusterState under informer threads: writers add, update and delete nodes, their claims and their pods
while readers take snapshots and read the views as the controllers do. No reader may see a torn view or
a store changing under it.

Each writer changes a node, its claim and its pod together under `ClusterState.lock` (as one moment), so
a consistent reader sees all three or none. The switch interval is made tiny so threads interleave inside
single calls; the test counts rounds, never time.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.state import ClusterState
from testkit.builders import pod_manifest

WRITERS = 3
READERS = 3
ROUNDS = 400
"""Node/claim/pod triples each writer creates, updates and deletes."""
ALIVE = 40
"""Triples each writer keeps at once: the oldest is deleted as a new one is made."""


def node_doc(name: str, *, generation: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "gpu", "round": str(generation)}},
        "spec": {"providerID": f"fake://z/{name}"},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def claim_doc(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": f"claim-{name}", "labels": {wk.NODEPOOL: "gpu"}},
        "spec": {"nodeClassRef": {"kind": "AWSNodeClass", "name": "default"}},
        "status": {"providerID": f"fake://z/{name}", "nodeName": name},
    }


def pod_doc(name: str) -> dict[str, Any]:
    return pod_manifest(f"pod-{name}", namespace="ml", node_name=name)


def writer(state: ClusterState, ident: int) -> None:
    alive: list[str] = []
    for i in range(ROUNDS):
        name = f"w{ident}-{i}"
        with state.lock:
            state.upsert("Node", node_doc(name))
            state.upsert("NodeClaim", claim_doc(name))
            state.upsert("Pod", pod_doc(name))
        alive.append(name)
        # An update of a node that already has its claim and pod (a label change, as a kubelet makes).
        state.upsert("Node", node_doc(alive[0], generation=i))
        if len(alive) > ALIVE:
            gone = alive.pop(0)
            with state.lock:
                state.remove("Pod", f"ml/pod-{gone}")
                state.remove("NodeClaim", f"claim-{gone}")
                state.remove("Node", gone)


def torn_in_snapshot(state: ClusterState) -> Iterator[str]:
    """What a snapshot shows that no single moment had: a node without its claim or pod, or the reverse."""
    snap = state.snapshot()
    for sn in snap.nodes:
        if sn.node is None:
            yield f"claim {sn.name} without its node"
        elif sn.claim is None:
            yield f"node {sn.name} without its claim"
        elif [p.name for p in sn.pods] != [f"pod-{sn.name}"]:
            yield f"node {sn.name} with pods {[p.name for p in sn.pods]}"
    if snap.pending_pods:
        yield f"pods bound to no node: {[p.key for p in snap.pending_pods]}"


def torn_in_views(state: ClusterState) -> Iterator[str]:
    """The other reads: walking the views while they change (as the simulator's stand-ins and the tests
    do), and several objects read as one moment under the lock (as the disruption controller does)."""
    for node in state.nodes.values():
        if node.labels.get(wk.NODEPOOL) != "gpu":
            yield f"node {node.name} without its labels"
    for claim in state.claims.values():
        if not claim.status.provider_id:
            yield f"claim {claim.name} without its provider id"
    for key, pod in state.pods.items():
        if key != pod.key or not pod.node_name:
            yield f"pod {key} without a node"
    with state.lock:
        for claim in state.claims.values():
            claimed = state.nodes.get(claim.status.node_name or "")
            if claimed is None or f"ml/pod-{claimed.name}" not in state.pods:
                yield f"claim {claim.name} without its node or pod"
        if not len(state.nodes) == len(state.claims) == len(state.pods):
            yield f"{len(state.nodes)} nodes, {len(state.claims)} claims, {len(state.pods)} pods"


def hammer(state: ClusterState, read: Callable[[ClusterState], Iterator[str]]) -> tuple[list[str], int]:
    """Writers and readers at once; returns what the readers found and how many reads they made."""
    found: list[str] = []
    reads = [0] * READERS
    done = threading.Event()

    def reader(slot: int) -> None:
        try:
            while True:
                finished = done.is_set()  # read before, so the last pass sees the final state
                found.extend(read(state))
                reads[slot] += 1
                if finished:
                    return
        except Exception as err:  # "dictionary changed size during iteration", KeyError...
            found.append(f"{type(err).__name__}: {err}")

    def write(ident: int) -> None:
        try:
            writer(state, ident)
        except Exception as err:
            found.append(f"writer {type(err).__name__}: {err}")

    writers = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    readers = [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    return found, sum(reads)


@pytest.fixture
def interleaved() -> Iterator[None]:
    """Switch threads every microsecond, so a race shows up within a few hundred rounds."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


@pytest.mark.parametrize("read", [torn_in_snapshot, torn_in_views], ids=["snapshots", "views"])
def test_readers_never_see_a_torn_view_while_informers_write(
    interleaved: None, read: Callable[[ClusterState], Iterator[str]]
) -> None:
    state = ClusterState()

    found, reads = hammer(state, read)

    assert not found, found[:5]
    assert reads >= READERS
    # What the writers left: each its last ALIVE triples, joined.
    snap = state.snapshot()
    assert len(snap.nodes) == WRITERS * ALIVE
    assert all(sn.claim is not None and len(sn.pods) == 1 for sn in snap.nodes)


def test_a_snapshot_is_shared_until_the_next_write() -> None:
    state = ClusterState()
    state.upsert("Node", node_doc("a"))
    first = state.snapshot()

    assert state.snapshot() is first
    state.upsert("Pod", pod_doc("a"))
    second = state.snapshot()
    assert second is not first
    assert [p.name for p in second.nodes[0].pods] == ["pod-a"]
    assert first.nodes[0].pods == ()


def test_views_are_read_only_copies_for_iteration() -> None:
    state = ClusterState()
    state.upsert("Node", node_doc("a"))
    nodes = state.nodes.values()
    state.upsert("Node", node_doc("b"))

    assert [n.name for n in nodes] == ["a"]  # what was read, not a live window
    assert sorted(state.nodes) == ["a", "b"]
    assert "b" in state.nodes and state.nodes["b"].name == "b"
    with pytest.raises(TypeError):
        state.nodes["c"] = state.nodes["a"]  # type: ignore[index]
    assert state.keys_of("Node") == {"a", "b"}
