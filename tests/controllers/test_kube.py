"""The kube layer against a Kubernetes API over HTTP: informers (list, watch, relist on 410), the write
fence, and leader election with two controllers where only the leader writes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from providers.fake import FakeProvider
from provisioner.clock import VirtualClock
from provisioner.clusterapi import NotFoundError, NotLeader
from provisioner.kube import client as kc
from provisioner.kube.api import MIN_WRITE_SECONDS, EventWriter, KubeClusterAPI
from provisioner.kube.client import ApiError
from provisioner.kube.informers import Informers
from provisioner.kube.leader import LeaderElector
from provisioner.state import ClusterState
from testkit.controllers.backends import KubeBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from testkit.typed import present
from tests.controllers.conftest import REAL_CLUSTER
from tests.polling import wait_until


def test_informers_list_then_follow_changes_into_the_cluster_state(kube_client: kc.KubeClient) -> None:
    state = ClusterState()
    kube_client.create(kc.NODE, {"metadata": {"name": "before"}})
    informers = Informers(kube_client, state)
    informers.start()
    try:
        assert informers.wait_synced(10)
        assert "before" in state.nodes
        kube_client.create(kc.NODE, {"metadata": {"name": "after"}})
        kube_client.patch(kc.NODE, "before", {"metadata": {"labels": {"x": "1"}}})
        wait_until(
            "'after' in state.nodes and state.nodes['before'].labels.get('x') == '1'",
            lambda: "after" in state.nodes and state.nodes["before"].labels.get("x") == "1",
        )
        kube_client.delete(kc.NODE, "after")
        wait_until("'after' not in state.nodes", lambda: "after" not in state.nodes)
    finally:
        informers.stop()


@pytest.mark.skipif(bool(REAL_CLUSTER), reason="compacting history needs the fixture's hook")
def test_an_informer_relists_when_its_watch_answers_410_gone(
    kube_server: KubeServer, kube_client: kc.KubeClient
) -> None:
    state = ClusterState()
    informers = Informers(kube_client, state, resources=[kc.NODE], watch_timeout=1)
    informers.start()
    try:
        assert informers.wait_synced(10)
        (informer,) = informers.informers
        kube_server.emulator.compact()  # every version seen so far is now too old
        wait_until("informer.relists >= 2", lambda: informer.relists >= 2)
        kube_client.create(kc.NODE, {"metadata": {"name": "later"}})
        wait_until("'later' in state.nodes", lambda: "later" in state.nodes)
    finally:
        informers.stop()


def test_a_cluster_api_that_is_not_the_leader_refuses_to_write(kube_client: kc.KubeClient) -> None:
    api = KubeClusterAPI(kube_client, may_write=lambda: False)
    with pytest.raises(NotLeader):
        api.patch_node("anything", {"metadata": {"labels": {"a": "b"}}})


@pytest.mark.skipif(bool(REAL_CLUSTER), reason="reads the request the fixture received")
def test_the_leaders_writes_end_by_its_renew_deadline(
    kube_client: kc.KubeClient, kube_server: KubeServer | None
) -> None:
    # Each write carries the time left to the leader's renew deadline as its `timeout` (the API server
    # abandons it then, before the lease can expire), and none starts with less than MIN_WRITE_SECONDS left.
    assert kube_server is not None
    clock = VirtualClock()
    leader = _elector(kube_client, "a", clock)
    api = KubeClusterAPI(
        kube_client, may_write=leader.is_leader, clock=clock, acting_until=leader.acting_until
    )
    kube_client.create(kc.NODE, {"metadata": {"name": "n1"}})
    assert leader.step()
    clock.advance(4)
    api.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    sent = kube_server.emulator.last_request
    assert sent is not None and sent.params.get("timeout") == "6000ms"
    clock.advance(6 - MIN_WRITE_SECONDS / 2)
    assert leader.is_leader(), "still within its renew deadline"
    with pytest.raises(NotLeader):
        api.patch_node("n1", {"metadata": {"labels": {"a": "c"}}})
    assert kube_client.get(kc.NODE, "n1")["metadata"]["labels"]["a"] == "b"


def _elector(client: kc.KubeClient, who: str, clock: VirtualClock) -> LeaderElector:
    return LeaderElector(
        client, identity=who, clock=clock, lease_duration=15, renew_deadline=10, retry_period=2
    )


def test_leader_election_one_holder_takeover_after_expiry_and_stop_on_missed_renewals(
    kube_client: kc.KubeClient,
) -> None:
    clock = VirtualClock()
    a, b = _elector(kube_client, "a", clock), _elector(kube_client, "b", clock)
    assert a.step() and a.is_leader()
    assert not b.step() and not b.is_leader()
    clock.advance(5)
    assert a.step() and not b.step()
    # a stops renewing (network partition): it stops acting at the renew deadline, before the lease expires.
    clock.advance(10)
    assert not a.is_leader()
    assert not b.step(), "the lease has not expired yet"
    clock.advance(6)
    assert b.step() and b.is_leader()
    lease = kube_client.get(kc.LEASE, "provisioner-leader", namespace="default")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert not a.step() and not a.is_leader()


class CountingCluster:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.writes: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kw: Any) -> Any:
            result = attr(*args, **kw)
            if name != "record_event" or self.inner.may_write():
                self.writes.append(name)
            return result

        return counted


def test_with_two_controllers_only_the_leader_writes(kube_client: kc.KubeClient) -> None:
    clock = VirtualClock()
    cloud = FakeProvider(catalog="aws", cluster_name="test", clock=clock.now)
    worlds, electors, counters = [], [], []
    for who in ("a", "b"):
        elector = _elector(kube_client, who, clock)
        backend_holder: dict[str, Any] = {}

        def make_backend(
            c: VirtualClock, e: LeaderElector = elector, h: dict[str, Any] = backend_holder
        ) -> KubeBackend:
            h["b"] = KubeBackend(kube_client, c, may_write=e.is_leader, cleanup=bool(REAL_CLUSTER))
            return cast(KubeBackend, h["b"])

        w = World(make_backend, clock=clock, provider=cloud)
        counter = CountingCluster(w.backend.cluster)
        w.manager = w.new_manager(cluster=counter, is_leader=elector.is_leader)
        worlds.append(w)
        electors.append(elector)
        counters.append(counter)
    a_world, b_world = worlds
    # One cloud; a's world plays the cluster's kubelet and scheduler.
    cloud.on_launch, cloud.on_delete = a_world.kubelet.on_launch, a_world.kubelet.on_delete
    try:
        a_world.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
        # b's kubelet and binder stand idle: a's world plays the cluster's kubelet and scheduler.
        b_world.kubelet.hold = True
        for _ in range(15):
            electors[0].step()
            electors[1].step()
            b_world.backend.settle()
            b_world.manager.step(clock.now())
            a_world.tick()
            if a_world.all_bound():
                break
        assert a_world.all_bound(), a_world.describe()
        assert counters[0].writes, "the leader wrote"
        assert counters[1].writes == [], "the follower wrote nothing"
        assert b_world.state.claims, "the follower sees the claims through its informers"

        # a dies; after the lease expires b takes over and acts (deletes a claim it is asked to).
        for _ in range(20):
            clock.advance(1)
            electors[1].step()
        assert electors[1].is_leader() and not electors[0].is_leader()
        (claim,) = b_world.claims()
        b_world.backend.delete("NodeClaim", claim.name)
        for _ in range(10):
            electors[1].step()
            a_world.kubelet.sync()  # the cluster's kubelets still finish the pods b evicts
            a_world.backend.settle()
            b_world.backend.settle()
            b_world.manager.step(clock.now() + timedelta(seconds=1))
            if claim.name not in b_world.state.claims:
                break
        assert claim.name not in b_world.state.claims
        assert "patch_nodeclaim" in counters[1].writes
        assert not cloud.list(), "b terminated the instance a launched"
    finally:
        for w in worlds:
            w.backend.close()


def test_an_object_our_models_refuse_is_skipped_without_stopping_the_informer(
    kube_client: kc.KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    state = ClusterState()
    informers = Informers(kube_client, state, resources=[kc.NODEPOOL])
    informers.start()
    try:
        assert informers.wait_synced(10)
        # The CRD's schema lets it through (no rule can tell a cron schedule), our models do not.
        bad = node_pool("bad")
        bad["spec"]["disruption"] = {"budgets": [{"nodes": "1", "schedule": "not a cron", "duration": "1h"}]}
        kube_client.create(kc.NODEPOOL, bad)
        kube_client.create(kc.NODEPOOL, node_pool("good"))
        wait_until("'good' in state.nodepools", lambda: "good" in state.nodepools)
        assert "bad" not in state.nodepools
        assert any("ignoring invalid NodePool bad" in r.getMessage() for r in caplog.records)
    finally:
        informers.stop()


def test_the_api_server_refuses_a_nodepool_the_crd_schema_refuses(kube_client: kc.KubeClient) -> None:
    # With the chart's CRDs installed, a real server refuses it too: `kubectl apply` fails, not only
    # `provisioner templates validate`.
    bad = node_pool("bad")
    bad["spec"]["weight"] = 1000
    with pytest.raises(ApiError) as err:
        kube_client.create(kc.NODEPOOL, bad)
    assert err.value.status == 422 and "spec.weight" in str(err.value)


@pytest.mark.skipif(bool(REAL_CLUSTER), reason="injects API failures through the fixture")
def test_a_claim_the_api_server_failed_to_create_is_created_on_the_next_batch(
    kube_server: KubeServer, make_kube_world: Callable[..., World]
) -> None:
    w = make_kube_world()
    kube_server.emulator.fail_next["POST nodeclaims"] = 1
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    for _ in range(3):
        w.tick()
    assert not w.claims(), "the first write failed"
    w.run_until(w.all_bound, max_ticks=10)
    assert len(w.claims()) == 1


def test_the_client_connects_through_a_kubeconfig(kube_server: KubeServer | None, tmp_path: Path) -> None:
    if kube_server is None:
        pytest.skip("the real cluster's kubeconfig is exercised by every other test")
    config = tmp_path / "kubeconfig"
    config.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: test, cluster: {{server: "{kube_server.url}"}}}}]
users: [{{name: test, user: {{token: abc}}}}]
contexts: [{{name: test, context: {{cluster: test, user: test}}}}]
current-context: test
"""
    )
    client = kc.KubeClient.connect(kubeconfig=str(config))
    try:
        client.create(kc.NODE, {"metadata": {"name": "via-kubeconfig"}})
        items, rv = client.list(kc.NODE)
        assert [i["metadata"]["name"] for i in items] == ["via-kubeconfig"] and rv
        last = present(kube_server.emulator.last_request)
        assert last.headers.get("Authorization") == "Bearer abc"
    finally:
        client.close()


def test_the_background_event_writer_sends_events_in_order_and_stop_sends_what_is_queued(
    kube_client: kc.KubeClient,
) -> None:
    writer = EventWriter(kube_client).start()
    api = KubeClusterAPI(kube_client, event_writer=writer)
    names = [f"queued-{i:02d}" for i in range(20)]
    for name in names:
        api.record_event(kind="Pod", name=name, namespace="default", reason="Nominated", message="m")
    writer.stop()
    events, _ = kube_client.list(kc.EVENT)
    ours = [e for e in events if e["involvedObject"]["name"] in names]
    ours.sort(key=lambda e: int(e["metadata"]["resourceVersion"]))
    assert [e["involvedObject"]["name"] for e in ours] == names


def test_a_full_event_queue_drops_the_newest_event(kube_client: kc.KubeClient) -> None:
    writer = EventWriter(kube_client, max_pending=1)  # not started: nothing leaves the queue
    api = KubeClusterAPI(kube_client, event_writer=writer)
    api.record_event(kind="Pod", name="first", namespace="default", reason="Nominated", message="m")
    api.record_event(kind="Pod", name="second", namespace="default", reason="Nominated", message="m")
    assert writer.dropped == 1


def test_a_world_that_fails_to_build_closes_what_it_made(kube_client: kc.KubeClient) -> None:
    # On a real cluster a World(...) that raised left its informers running and its objects behind, and
    # every later test met `already exists`.
    made: list[KubeBackend] = []

    def factory(clock: VirtualClock) -> KubeBackend:
        made.append(KubeBackend(kube_client, clock, cleanup=True))
        made[0].create(node_class())
        return made[0]

    with pytest.raises(AttributeError):
        World(factory, settings=object())  # type: ignore[arg-type]
    assert made[0].informers.stop_event.is_set()
    with pytest.raises(NotFoundError):
        kube_client.get(kc.nodeclass("AWSNodeClass"), "default")
