"""The quota admission holder watches only what admission needs (issue 29): its shards' pods, the pods
labelled for no shard (it labels them), and every pod of the namespaces quota counts in (a namespaced
watch each), following a Team created, a namespace joining or leaving one, and admission won or lost;
admission decides nothing while a namespace it counts in is still being listed. Against the strict test
API server, through the operator's `PodScopes`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.controllers.settings import ControllerSettings
from provisioner.kube import client as kc
from provisioner.kube.informers import Informers
from provisioner.kube.shards import PodScopes, admission_namespaces
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState
from testkit.controllers.backends import MemoryBackend
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
def watched(kube_client: kc.KubeClient) -> Iterator[tuple[ClusterState, PodScopes]]:
    state = ClusterState()
    informers = Informers(
        kube_client,
        state,
        resources=[kc.POD, kc.NAMESPACE, kc.TEAM],
        selectors={kc.POD: model.selector(())},
        watch_timeout=30,
    )
    informers.start()
    try:
        assert informers.wait_synced(WAIT), "the informers' first lists"
        yield state, PodScopes(informers, state, shards=SHARDS, wait=WAIT)
    finally:
        informers.stop()


def _seed(client: kc.KubeClient) -> None:
    for ns in ("vision", "web"):
        client.create(kc.NAMESPACE, _namespace(ns))
    for name, ns, shard in [
        ("mine", "web", "0"),
        ("theirs", "web", "1"),
        ("bare", "web", None),
        ("stale", "web", "9"),  # a shard of another shard count
        ("v-mine", "vision", "0"),
        ("v-theirs", "vision", "2"),
    ]:
        client.create(kc.POD, _pod(name, ns, shard), namespace=ns)


def test_the_admission_holder_watches_its_shards_the_pods_of_no_shard_and_its_teams_namespaces(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, PodScopes]
) -> None:
    state, scopes = watched
    _seed(kube_client)
    assert scopes(frozenset({0}), False), "listed"
    assert set(state.pods) == {"web/mine", "vision/v-mine"}, "a shard replica: its shards' pods only"

    assert scopes(frozenset({0}), True), "listed"
    assert set(state.pods) == {"web/mine", "vision/v-mine", "web/bare", "web/stale"}, "no Team yet"
    assert scopes.counted_namespaces() == frozenset()

    # A Team created: its namespace's pods of every shard come, and admission counts in it.
    kube_client.create(kc.TEAM, _team("cv", ["vision"]))
    wait_until("the Team in the state", lambda: "cv" in state.teams)
    assert scopes(frozenset({0}), True), "listed"
    assert "vision/v-theirs" in state.pods
    assert scopes.counted_namespaces() == frozenset({"vision"})
    kube_client.create(kc.POD, _pod("v-new", "vision", "3"), namespace="vision")
    wait_until(
        "a new pod of the team's namespace, another shard's, watched", lambda: "vision/v-new" in state.pods
    )
    kube_client.create(kc.POD, _pod("w-new", "web", "3"), namespace="web")

    # A namespace joining a team by its label.
    kube_client.patch(kc.NAMESPACE, "web", {"metadata": {"labels": {wk.TEAM: "cv"}}})
    wait_until("the label in the state", lambda: state.namespaces.get("web", {}).get(wk.TEAM) == "cv")
    assert scopes(frozenset({0}), True), "listed"
    assert {"web/theirs", "web/w-new"} <= set(state.pods)
    assert scopes.counted_namespaces() == frozenset({"vision", "web"})

    # Leaving it, for a team with no Team object (no quota): its other shards' pods go (none is gated).
    kube_client.patch(kc.NAMESPACE, "web", {"metadata": {"labels": {wk.TEAM: "no-quota"}}})
    wait_until("the new label", lambda: state.namespaces.get("web", {}).get(wk.TEAM) == "no-quota")
    assert scopes(frozenset({0}), True), "listed"
    assert "web/theirs" not in state.pods and "web/w-new" not in state.pods
    assert {"web/mine", "web/bare", "web/stale"} <= set(state.pods), "its shards' and no shard's stay"

    # Admission lost: only its shards' pods are left.
    assert scopes(frozenset({0}), False), "listed"
    assert set(state.pods) == {"web/mine", "vision/v-mine"}
    assert scopes.counted_namespaces() == frozenset()


def test_a_namespace_leaving_its_team_is_watched_while_a_pod_of_it_waits_behind_the_gate(
    kube_client: kc.KubeClient, watched: tuple[ClusterState, PodScopes]
) -> None:
    state, scopes = watched
    kube_client.create(kc.NAMESPACE, _namespace("vision"))
    kube_client.create(kc.TEAM, _team("cv", ["vision"]))
    kube_client.create(kc.POD, _pod("waiting", "vision", "2", gated=True), namespace="vision")
    wait_until("the Team in the state", lambda: "cv" in state.teams)
    assert scopes(frozenset({0}), True), "listed"
    assert "vision/waiting" in state.pods
    kube_client.delete(kc.TEAM, "cv")
    wait_until("the Team gone", lambda: "cv" not in state.teams)
    assert admission_namespaces(state) == frozenset(), "no team counts in it"
    assert scopes(frozenset({0}), True), "listed"
    assert "vision/waiting" in state.pods, "admission must still see it to lift its gate"
    kube_client.patch(kc.POD, "waiting", {"spec": {"schedulingGates": []}}, namespace="vision")
    wait_until("the gate lifted in the state", lambda: not state.pods["vision/waiting"].gated)
    assert scopes(frozenset({0}), True), "listed"
    assert "vision/waiting" not in state.pods, "the namespace is not watched any more"


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
