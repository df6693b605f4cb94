"""Every sharded replica watches only what it needs (issue 29), against the strict test API server through
the operator's `WatchScopes`: its shards' pods, and the Nodes and NodeClaims of its shards' pools (and
the Nodes of no pool). The quota admission holder also watches the pods labelled for no shard (it labels
them), every pod of the namespaces quota counts in (a namespaced watch each) and every Node and claim (the
garbage collector's sweep), and every pod behind the admission gate (labelled so), wherever it is. The
scopes follow a Team created, a namespace joining or leaving one, a pool
created or deleted, shards and admission won or lost; admission decides nothing while a namespace it
counts in is still being listed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.clusterapi import ConflictError
from provisioner.controllers.settings import ControllerSettings
from provisioner.kube import client as kc
from provisioner.kube.informers import Informers
from provisioner.kube.scopes import WatchScopes, admission_namespaces
from provisioner.operator import _quota_namespaces
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState
from testkit.builders.nodes import node_claim
from testkit.builders.pools import node_pool_manifest, pools_in_distinct_shards
from testkit.controllers.backends import MemoryBackend
from testkit.controllers.space import Space
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.polling import wait_until

SHARDS = 4
WAIT = 30.0
"""Seconds a step may wait for its lists (generous: the machine may be loaded)."""


def _team(name: str, namespaces: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "provisioner.sh/v1",
        "kind": "Team",
        "metadata": {"name": name},
        "spec": {"namespaces": namespaces},
    }


def _namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def _pod(name: str, namespace: str, shard: str | None, *, gated: bool = False) -> dict[str, Any]:
    doc = gpu_pod(name, namespace=namespace)
    doc["metadata"]["labels"] = {model.SHARD: shard} if shard is not None else {}
    if gated:
        doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    return doc


@pytest.fixture
def watched(kube_client: kc.KubeClient) -> Iterator[tuple[ClusterState, WatchScopes]]:
    state = ClusterState()
    informers = Informers(
        kube_client,
        state,
        resources=[kc.POD, kc.NAMESPACE, kc.TEAM, kc.NODE, kc.NODECLAIM, kc.NODEPOOL],
        selectors=WatchScopes.initial(SHARDS),
        watch_timeout=30,
    )
    informers.start()
    try:
        assert informers.wait_synced(WAIT), "the informers' first lists"
        yield state, WatchScopes(informers, state, shards=SHARDS, wait=WAIT)
    finally:
        informers.stop()


def _seed(client: kc.KubeClient, space: Space) -> tuple[str, str]:
    """Two namespaces of the test's own (`vision`, `web`) and pods in them."""
    vision, web = space.own(space.name("vision")), space.own(space.name("web"))
    for name, ns, shard in [
        ("mine", web, "0"),
        ("theirs", web, "1"),
        ("bare", web, None),
        ("stale", web, "9"),  # a shard of another shard count
        ("v-mine", vision, "0"),
        ("v-theirs", vision, "2"),
    ]:
        client.create(kc.POD, _pod(name, ns, shard), namespace=ns)
    return vision, web


def _ours(state: ClusterState, space: Space) -> set[str]:
    """The pods of the test's namespaces in the state (a real cluster runs others)."""
    return {key for key, pod in list(state.pods.items()) if pod.namespace in space.namespaces}


def test_the_admission_holder_watches_its_shards_the_pods_of_no_shard_and_its_teams_namespaces(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, WatchScopes], space: Space
) -> None:
    state, scopes = watched
    vision, web = _seed(kube_client, space)
    assert scopes(frozenset({0}), False), "listed"
    assert _ours(state, space) == {f"{web}/mine", f"{vision}/v-mine"}, (
        "a shard replica: its shards' pods only"
    )

    assert scopes(frozenset({0}), True), "listed"
    assert _ours(state, space) == {f"{web}/mine", f"{vision}/v-mine", f"{web}/bare", f"{web}/stale"}, (
        "no Team yet"
    )
    assert scopes.counted_namespaces() == frozenset()

    # A Team created: its namespace's pods of every shard come, and admission counts in it.
    kube_client.create(kc.TEAM, _team("cv", [vision]))
    wait_until("the Team in the state", lambda: "cv" in state.teams)
    assert scopes(frozenset({0}), True), "listed"
    assert f"{vision}/v-theirs" in state.pods
    assert scopes.counted_namespaces() == frozenset({vision})
    kube_client.create(kc.POD, _pod("v-new", vision, "3"), namespace=vision)
    wait_until(
        "a new pod of the team's namespace, another shard's, watched", lambda: f"{vision}/v-new" in state.pods
    )
    kube_client.create(kc.POD, _pod("w-new", web, "3"), namespace=web)

    # A namespace joining a team by its label.
    kube_client.patch(kc.NAMESPACE, web, {"metadata": {"labels": {wk.TEAM: "cv"}}})
    wait_until("the label in the state", lambda: state.namespaces.get(web, {}).get(wk.TEAM) == "cv")
    assert scopes(frozenset({0}), True), "listed"
    assert {f"{web}/theirs", f"{web}/w-new"} <= set(state.pods)
    assert scopes.counted_namespaces() == frozenset({vision, web})

    # Leaving it, for a team with no Team object (no quota): its other shards' pods go (none is gated).
    kube_client.patch(kc.NAMESPACE, web, {"metadata": {"labels": {wk.TEAM: "no-quota"}}})
    wait_until("the new label", lambda: state.namespaces.get(web, {}).get(wk.TEAM) == "no-quota")
    assert scopes(frozenset({0}), True), "listed"
    assert f"{web}/theirs" not in state.pods and f"{web}/w-new" not in state.pods
    assert {f"{web}/mine", f"{web}/bare", f"{web}/stale"} <= set(state.pods), (
        "its shards' and no shard's stay"
    )

    # Admission lost: only its shards' pods are left.
    assert scopes(frozenset({0}), False), "listed"
    assert _ours(state, space) == {f"{web}/mine", f"{vision}/v-mine"}
    assert scopes.counted_namespaces() == frozenset()


def _a_teams_pod_waiting(
    kube_client: kc.KubeClient, state: ClusterState, space: Space, *, labelled: bool
) -> str:
    """A namespace of the test in Team `cv` with the pod `waiting` behind the gate (`labelled`: marked
    `model.GATED`, as the webhook or the last holder marks it), the Team in the state; the namespace."""
    vision = space.own(space.name("vision"))
    kube_client.create(kc.TEAM, _team("cv", [vision]))
    waiting = _pod("waiting", vision, "2", gated=True)
    if labelled:
        waiting["metadata"]["labels"][model.GATED] = "true"
    kube_client.create(kc.POD, waiting, namespace=vision)
    wait_until("the Team in the state", lambda: "cv" in state.teams)
    return vision


def test_a_namespace_leaving_its_team_is_watched_while_a_pod_of_it_waits_behind_the_gate(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, WatchScopes], space: Space
) -> None:
    state, scopes = watched
    vision = _a_teams_pod_waiting(kube_client, state, space, labelled=False)
    wait_until("its namespace in the state", lambda: vision in state.namespaces)
    assert scopes(frozenset({0}), True), "listed"
    assert f"{vision}/waiting" in state.pods
    kube_client.delete(kc.TEAM, "cv")
    wait_until("the Team gone", lambda: "cv" not in state.teams)
    assert admission_namespaces(state) == frozenset(), "no team counts in it"
    assert scopes(frozenset({0}), True), "listed"
    assert f"{vision}/waiting" in state.pods, "admission must still see it to lift its gate"
    kube_client.patch(kc.POD, "waiting", {"spec": {"schedulingGates": []}}, namespace=vision)
    wait_until("the gate lifted in the state", lambda: not state.pods[f"{vision}/waiting"].gated)
    assert scopes(frozenset({0}), True), "listed"
    assert f"{vision}/waiting" not in state.pods, "the namespace is not watched any more"


def test_a_holder_elected_after_a_namespace_left_its_team_still_watches_the_pod_waiting_there(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, WatchScopes], space: Space
) -> None:
    # The last holder watched the namespace, then the Team went and the Lease moved before it lifted the
    # gate: this replica never watched the namespace, and the pod is labelled for another shard.
    state, scopes = watched
    vision = _a_teams_pod_waiting(kube_client, state, space, labelled=True)
    kube_client.delete(kc.TEAM, "cv")
    wait_until("the Team gone from the state", lambda: "cv" not in state.teams)
    assert scopes(frozenset({0}), False), "listed"
    assert f"{vision}/waiting" not in state.pods, "a shard replica: its shards' pods only"
    assert scopes(frozenset({0}), True), "listed"
    assert admission_namespaces(state) == frozenset(), "no team counts in it"
    assert f"{vision}/waiting" in state.pods, "elected, it watches every pod behind the gate"
    kube_client.patch(
        kc.POD,
        "waiting",
        {"metadata": {"labels": {model.GATED: None}}, "spec": {"schedulingGates": []}},
        namespace=vision,
    )
    wait_until("the pod admitted, gone from the watch", lambda: f"{vision}/waiting" not in state.pods)


def test_the_admission_holder_marks_a_pod_while_it_waits_and_unmarks_it_when_admitted() -> None:
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    team = _team("cv", ["vision"])
    team["spec"]["quotas"] = [{"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: "1"}, "overQuota": False}]
    first, second = _pod("a", "vision", None, gated=True), _pod("b", "vision", None, gated=True)
    second["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"  # after the first
    w.apply(node_class(), node_pool("gpu"), _namespace("vision"), team, first, second)
    w.manager.admission.gated_label = True
    w.manager.admission.reconcile(w.clock.now())
    a, b = w.state.pods["vision/a"], w.state.pods["vision/b"]
    assert not a.gated and model.GATED not in a.labels, "admitted: not marked"
    assert b.gated and b.labels.get(model.GATED) == "true", "waiting for quota: marked"
    w.backend.delete("Team", "cv")
    w.manager.admission.reconcile(w.clock.now())
    b = w.state.pods["vision/b"]
    assert not b.gated and model.GATED not in b.labels, "its team gone, admitted and unmarked"


def test_a_gated_pod_whose_team_is_not_seen_yet_is_not_admitted_as_a_pod_of_no_team(
    kube_client: kc.KubeClient,
) -> None:
    # The pod's watch event came before its Team's: in this replica's state the namespace is of no team.
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    w.apply(node_class(), node_pool("gpu"), _namespace("vision"), _pod("a", "vision", None, gated=True))
    w.manager.admission.quota_namespaces = _quota_namespaces(kube_client)  # the API server's word
    with contextlib.suppress(ConflictError):  # made by an earlier test, on a cluster the tests share
        kube_client.create(kc.NAMESPACE, _namespace("vision"))
    kube_client.create(kc.TEAM, _team("cv", ["vision"]))
    w.manager.admission.reconcile(w.clock.now())
    assert w.state.pods["vision/a"].gated, "a Team claims its namespace at the API server"
    kube_client.delete(kc.TEAM, "cv")
    w.manager.admission.reconcile(w.clock.now())
    assert not w.state.pods["vision/a"].gated, "of no team there either: admitted, no quota applies"


def test_admission_decides_nothing_while_a_namespace_it_counts_in_is_still_being_listed() -> None:
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    quota = [{"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: "2"}}]
    team = _team("cv", ["vision"])
    team["spec"]["quotas"] = quota
    w.apply(node_class(), node_pool("gpu"), _namespace("vision"), team, _pod("a", "vision", "0", gated=True))
    listed: frozenset[str] = frozenset()
    w.manager.admission.counted_namespaces = lambda: listed
    w.manager.admission.reconcile(w.clock.now())
    assert w.state.pods["vision/a"].gated, "its team's other pods may not be in the state yet"
    listed = frozenset({"vision"})
    w.manager.admission.reconcile(w.clock.now())
    assert not w.state.pods["vision/a"].gated, "admitted once the namespace is listed"


def _node(name: str, pool: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: pool} if pool else {}},
    }


def test_a_shard_replica_watches_its_pools_nodes_and_claims_and_the_admission_holder_every_one(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, WatchScopes]
) -> None:
    state, scopes = watched
    a, b = pools_in_distinct_shards(2, SHARDS)
    sa, sb = model.shard_of(a, SHARDS), model.shard_of(b, SHARDS)
    for pool in (a, b):
        kube_client.create(kc.NODEPOOL, node_pool_manifest(pool))
        kube_client.create(kc.NODECLAIM, node_claim(f"claim-{pool}", nodepool=pool).to_dict())
        kube_client.create(kc.NODE, _node(f"node-{pool}", pool))
    kube_client.create(kc.NODE, _node("static", None))
    made = {f"node-{a}", f"node-{b}", "static"}

    def nodes() -> set[str]:
        """The test's Nodes in the state (a real cluster has its own, of no pool)."""
        return set(state.nodes) & made

    wait_until("both pools in the state", lambda: {a, b} <= set(state.nodepools))

    assert scopes(frozenset({sa}), False), "listed"
    assert set(state.claims) == {f"claim-{a}"}
    assert nodes() == {f"node-{a}", "static"}, "its pools' Nodes, and the Nodes of no pool"

    # The shard moves to another replica (here: this one takes the other shard instead).
    assert scopes(frozenset({sb}), False), "listed"
    assert set(state.claims) == {f"claim-{b}"}
    assert nodes() == {f"node-{b}", "static"}

    # A pool deleted while its claim and Node are still there: they stay watched.
    kube_client.delete(kc.NODEPOOL, b)
    wait_until("the pool gone from the state", lambda: b not in state.nodepools)
    assert scopes(frozenset({sb}), False), "listed"
    assert set(state.claims) == {f"claim-{b}"}
    # A pool created in a shard held: its claims come at the next step.
    c = next(f"new-{i}" for i in range(1000) if model.shard_of(f"new-{i}", SHARDS) == sb)
    kube_client.create(kc.NODEPOOL, node_pool_manifest(c))
    kube_client.create(kc.NODECLAIM, node_claim(f"claim-{c}", nodepool=c).to_dict())
    wait_until("the new pool in the state", lambda: c in state.nodepools)
    assert scopes(frozenset({sb}), False), "listed"
    assert set(state.claims) == {f"claim-{b}", f"claim-{c}"}

    # Quota admission (and the garbage collector's sweep): every claim and every Node.
    assert scopes(frozenset({sb}), True), "listed"
    assert set(state.claims) == {f"claim-{p}" for p in (a, b, c)}
    assert nodes() == {f"node-{a}", f"node-{b}", "static"}
    assert scopes(frozenset(), False), "listed"
    assert not state.claims and nodes() == {"static"}
