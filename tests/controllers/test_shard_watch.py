"""Sharded replicas watch only their shards' pods (issue 29): the `provisioner.sh/shard` pod label, who
writes it (the webhook at creation, the admission holder for pods without it, a replica passing a pod
on or seeing it bound to another shard's node), the pod informer's label selector and its rescoping,
and the check of a node's pods from the API server before disruption acts on a node."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

from provisioner.api import labels as wk
from provisioner.clock import VirtualClock
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import Sharding, ShardLabels
from provisioner.controllers.webhook import review
from provisioner.kube import client as kc
from provisioner.kube.informers import Informers
from provisioner.scheduling import shards as model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState
from provisioner.state.objects import Pod
from testkit.builders.pools import node_pool_manifest, pools_in_distinct_shards
from testkit.controllers.backends import MemoryBackend
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.polling import wait_until

SHARDS = 4


A, B = pools_in_distinct_shards(2, SHARDS)
SA, SB = str(model.shard_of(A, SHARDS)), str(model.shard_of(B, SHARDS))


def _pod(name: str, *, pools: str = "", labels: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    doc = gpu_pod(name, annotations={"provisioner.sh/nodepools": pools} if pools else None, **kw)
    doc["metadata"]["labels"] = {**doc["metadata"].get("labels", {}), **(labels or {})}
    return doc


# ---- the informer's label selector ------------------------------------------------------------------


def test_a_pod_informer_takes_only_the_pods_its_selector_matches_and_follows_a_new_selector(
    kube_client: kc.KubeClient,
) -> None:
    state = ClusterState()
    informers = Informers(
        kube_client, state, resources=[kc.POD], selectors={kc.POD: model.selector([0])}, watch_timeout=30
    )
    pods = informers.of(kc.POD)
    for name, shard in [("zero", "0"), ("one", "1"), ("two", "2")]:
        kube_client.create(kc.POD, _pod(name, labels={model.SHARD: shard}), namespace="default")
    kube_client.create(kc.POD, _pod("unlabelled"), namespace="default")
    informers.start()
    try:
        assert informers.wait_synced(30)
        wait_until("the shard-0 pod listed", lambda: set(state.pods) == {"default/zero"})
        # Relabelled into the selector: it comes (ADDED); out of it: it goes (DELETED).
        kube_client.patch(kc.POD, "one", {"metadata": {"labels": {model.SHARD: "0"}}}, namespace="default")
        wait_until("the pod relabelled to shard 0 watched", lambda: "default/one" in state.pods)
        kube_client.patch(kc.POD, "zero", {"metadata": {"labels": {model.SHARD: "3"}}}, namespace="default")
        wait_until("the pod relabelled away dropped", lambda: "default/zero" not in state.pods)
        # The replica takes shard 2 and gives up shard 0: the watch starts again with the new selector.
        assert pods.rescope(model.selector([2]), wait=30), "listed with the new selector"
        assert set(state.pods) == {"default/two"}
        kube_client.create(kc.POD, _pod("late", labels={model.SHARD: "2"}), namespace="default")
        wait_until("a new pod of shard 2 watched", lambda: "default/late" in state.pods)
        kube_client.create(kc.POD, _pod("other", labels={model.SHARD: "1"}), namespace="default")
        # Every pod (quota admission): the unlabelled one too.
        assert pods.rescope(None, wait=30)
        assert set(state.pods) == {
            f"default/{n}" for n in ("zero", "one", "two", "unlabelled", "late", "other")
        }
    finally:
        informers.stop()


def test_the_test_server_refuses_a_selector_it_cannot_parse(kube_client: kc.KubeClient) -> None:
    from provisioner.kube.client import ApiError

    try:
        kube_client.list(kc.POD, label_selector="a in (b")
    except ApiError as err:
        assert err.status == 400
    else:
        raise AssertionError("a selector that does not parse was taken")


# ---- who writes the label ---------------------------------------------------------------------------


def _review(doc: dict[str, Any], state: ClusterState) -> list[dict[str, Any]]:
    request = {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": doc}}
    response = review(request, state, shards=SHARDS, now=VirtualClock().now())["response"]
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def test_the_webhook_labels_a_new_pod_with_its_first_pools_shard() -> None:
    state = ClusterState()
    for name in (A, B):
        state.upsert("NodePool", node_pool_manifest(name))
    plain = _pod("p", pools=f"{B},{A}")
    del plain["metadata"]["labels"]
    assert _review(plain, state) == [{"op": "add", "path": "/metadata/labels", "value": {model.SHARD: SB}}]
    labelled = _pod("q", pools=f"{A},{B}", labels={model.SHARD: SB})
    assert _review(labelled, state) == [
        {"op": "add", "path": "/metadata/labels/provisioner.sh~1shard", "value": SA}
    ], "a label naming another shard is set right"
    assert (
        review(
            {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": plain}}, state
        )["response"].get("patch")
        is None
    ), "not sharded: no label"


def test_the_webhook_marks_a_teams_pod_it_gates_for_the_admission_holders_watch() -> None:
    state = ClusterState()
    state.upsert("NodePool", node_pool_manifest(A))
    state.upsert("Team", {"metadata": {"name": "cv"}, "spec": {"namespaces": ["vision"]}})
    gated = {"op": "add", "path": "/metadata/labels/provisioner.sh~1admission-gated", "value": "true"}
    team_pod = _pod("p", pools=A, namespace="vision")
    assert _review(team_pod, state)[-1] == gated, "gated: marked"
    by_hand = _pod("q", pools=A, namespace="vision")
    by_hand["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    assert _review(by_hand, state)[-1] == gated, "gated by hand: marked all the same"
    assert gated not in _review(_pod("r", pools=A), state), "of no team: not gated, not marked"
    request = {"request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": team_pod}}
    patch = json.loads(base64.b64decode(review(request, state)["response"]["patch"]))
    assert [op["path"] for op in patch] == ["/spec/schedulingGates"], "not sharded: the gate only"


def _world() -> World:
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    w.apply(node_class(), node_pool(A), node_pool(B))
    return w


def _labeller(w: World, held: set[int], admits: bool) -> ShardLabels:
    sharding = Sharding(
        shards=SHARDS, owned_shards=lambda: frozenset(held), holds_admission=lambda: admits, clock=w.clock
    )
    return ShardLabels(
        state=w.state,
        cluster=w.backend.cluster,
        providers=w.manager.providers,
        settings=w.settings,
        metrics=w.manager.metrics,
        clock=w.clock,
        sharding=sharding,
    )


def _label(w: World, name: str) -> str | None:
    return w.state.pods[f"default/{name}"].labels.get(model.SHARD)


def test_the_admission_holder_labels_pods_created_without_the_label_and_only_it() -> None:
    w = _world()
    w.apply(_pod("bare", pools=f"{A},{B}"))
    _labeller(w, {int(SB)}, admits=False).reconcile(w.clock.now())
    assert _label(w, "bare") is None, "a shard replica leaves pods it does not hold alone"
    _labeller(w, set(), admits=True).reconcile(w.clock.now())
    assert _label(w, "bare") == SA


def test_a_replica_relabels_its_pods_whose_next_pool_is_in_another_shard() -> None:
    w = _world()
    w.apply(
        _pod("moved", pools=B, labels={model.SHARD: SA}), _pod("stays", pools=A, labels={model.SHARD: SA})
    )
    other = _labeller(w, {int(SB)}, admits=False)
    other.reconcile(w.clock.now())
    assert _label(w, "moved") == SA, "labelled for a shard the replica does not hold: not its to change"
    _labeller(w, {int(SA)}, admits=False).reconcile(w.clock.now())
    assert (_label(w, "moved"), _label(w, "stays")) == (SB, SA)


def test_a_pod_bound_to_a_node_of_another_shards_pool_is_relabelled_to_that_shard() -> None:
    w = _world()
    w.apply(_pod("p", pools=A, labels={model.SHARD: SA}))
    w.run_until(lambda: bool(w.state.nodes), max_ticks=30)
    (node,) = w.state.nodes.values()
    w.backend.cluster.patch_node(node.name, {"metadata": {"labels": {"provisioner.sh/nodepool": B}}})
    w.apply(_pod("q", pools=A, labels={model.SHARD: SA}, node_name=node.name))
    labeller = _labeller(w, {int(SA)}, admits=False)
    labeller.reconcile(w.clock.now())
    assert _label(w, "q") == SB, "its node's owner must see it"


def test_passing_a_pod_on_labels_it_with_the_next_pools_shard() -> None:
    w = _world()
    w.apply(_pod("p", pools=f"{A},{B}", labels={model.SHARD: SA}, gpus=64))  # no pool has such a node
    held = {int(SA)}
    sharding = Sharding(
        shards=SHARDS, owned_shards=lambda: frozenset(held), holds_admission=lambda: True, clock=w.clock
    )
    w.manager = w.new_manager(sharding=sharding)
    w.run_until(lambda: _label(w, "p") == SB, max_ticks=10)
    pod = w.state.pods["default/p"]
    assert pod.annotations.get(model.TRIED) == A
    assert _label(w, "p") == SB


# ---- disruption checks a node's pods at the API server ------------------------------------------------


def test_a_pod_the_replica_did_not_watch_blocks_an_empty_verdict() -> None:
    w = _world()
    pool = node_pool(A)
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    w.apply(pool, _pod("p", pools=A, labels={model.SHARD: SA}, owner="Job"))
    w.run_until(w.all_bound, max_ticks=30)
    (node,) = w.state.nodes.values()
    # Another shard's pod bound to the node and not relabelled yet: this replica's watch does not
    # bring it, but the API server has it on the node.
    hidden = _pod("hidden", pools=B, node_name=node.name, owner="Job", labels={model.SHARD: SB})
    server_pods = {node.name: [hidden]}
    sharding = Sharding(
        shards=SHARDS,
        owned_shards=lambda: frozenset({int(SA)}),
        holds_admission=lambda: False,
        clock=w.clock,
        node_pods=lambda name: server_pods.get(name, []),
    )
    w.manager = w.new_manager(disruption=True, sharding=sharding)
    w.backend.delete("Pod", "p", namespace="default")  # empty, as this replica sees it
    for _ in range(12):  # past the validation delay, more than once
        w.tick(5)
    assert len(w.claims()) == 1, "the node with a pod on it is not consolidated"
    server_pods.clear()  # the pod finished
    w.run_until(lambda: not w.claims(), max_ticks=30, seconds=5)
    assert w.claims() == [], "truly empty: consolidated"


def test_a_pods_shard_follows_its_next_pool_and_once_bound_its_nodes_pool() -> None:
    state = ClusterState()
    for name in (A, B):
        state.upsert("NodePool", node_pool_manifest(name))
    snap = state.snapshot()
    lists, existing = model.PoolLists.of(snap, ClusterDefaults()), frozenset((A, B))
    now = VirtualClock().now()
    stamp = now.isoformat().replace("+00:00", "Z")

    def shard(tried: str = "", node_pool: str | None = None, **kw: Any) -> str | None:
        annotations = {"provisioner.sh/nodepools": f"{A},{B}"}
        if tried:
            annotations |= {model.TRIED: tried, model.TRIED_AT: stamp}
        pod = Pod.from_dict(gpu_pod("p", annotations=annotations, **kw))
        return model.wanted_shard(pod, lists, existing, SHARDS, now, node_pool)

    assert shard() == SA, "its first pool"
    assert shard(tried=A) == SB, "passed on: the next one"
    assert shard(tried=f"{A},{B}") == SA, "every pool refused it: where it starts again"
    assert shard(node_pool=B, node_name="n1") == SB, "bound: its node's pool"
    assert shard(node_pool=None, node_name="n1") is None, "a node of no pool (or unknown): left as it is"
    assert (
        model.wanted_shard(
            Pod.from_dict(gpu_pod("q")),
            model.PoolLists.of(ClusterState().snapshot(), ClusterDefaults()),
            frozenset(),
            SHARDS,
            now,
            None,
        )
        is None
    ), "no pool at all"


def test_a_pod_bound_to_a_node_this_replica_does_not_watch_gets_that_nodes_shard_from_the_api_server() -> (
    None
):
    w = _world()
    # Bound by kube-scheduler to another shard's Node, which this replica's Node watch does not bring.
    w.apply(_pod("q", pools=A, labels={model.SHARD: SA}, node_name="elsewhere"))
    read: list[str] = []

    def node_labels(name: str) -> dict[str, str] | None:
        read.append(name)
        return {"provisioner.sh/nodepool": B} if name == "elsewhere" else None

    labeller = _labeller(w, {int(SA)}, admits=False)
    labeller.sharding.node_labels = node_labels
    labeller.reconcile(w.clock.now())
    assert _label(w, "q") == SB, "the other shard's holder must see it"
    assert read == ["elsewhere"]
