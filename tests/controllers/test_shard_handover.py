"""A shard handed over while its old holder's write is still in flight (issue 29): the old holder's
NodeClaim create is held at the API server until its shard Lease has expired and the new holder has
acquired the shard, listed the claims and launched; then the held create is let go. The pool's limit
must hold: the old holder's write carries its Lease's renew deadline as the request's `timeout`, so the
API server abandons it (504) before the Lease can expire, and the new holder's list, made after the
expiry, is complete."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.clusterapi import ClusterAPI, ClusterError, NotLeader
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import Sharding
from provisioner.kube import client as kc
from provisioner.kube.api import MIN_WRITE_SECONDS, KubeClusterAPI
from provisioner.kube.shards import ShardLeases
from provisioner.operator import catch_up
from testkit.builders.nodes import node_claim
from testkit.controllers.backends import KubeBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.controllers.conftest import REAL_CLUSTER

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="holds a request at the test server")

POOL = "fenced"


class Handover:
    """Two replicas on one shard: `old` (Leases and its pool controllers' fenced writes only) holds it
    first, `new` (a whole replica: Leases, state, controllers) takes it once `old`'s Lease expired."""

    def __init__(self, w: World, client: kc.KubeClient, server: KubeServer) -> None:
        self.w = w
        self.client = client
        self.server = server
        server.emulator.clock = lambda: w.clock.now().timestamp()  # request deadlines on the test's clock

        def leases(identity: str, **kw: Any) -> ShardLeases:
            return ShardLeases(client, identity=identity, clock=w.clock, shards=1, prefix="t-handover", **kw)

        self.old = leases("replica-old")
        backend = w.backend
        assert isinstance(backend, KubeBackend)
        self.new = leases("replica-new", on_acquire=lambda: catch_up(client, backend.informers))
        self.old.step()
        self.new.step()
        assert self.old.owned_shards() == {0} and not self.new.owned_shards()
        self.old_writes: ClusterAPI = sharding(self.old, w).cluster(KubeClusterAPI(client, clock=w.clock))
        w.manager = w.new_manager(sharding=sharding(self.new, w))

    def claims_at_server(self) -> list[str]:
        items, _ = self.client.list(kc.NODECLAIM, label_selector=f"{wk.NODEPOOL}={POOL}")
        return sorted(i["metadata"]["name"] for i in items)

    def new_holder_runs_until(self, done: Callable[[], bool]) -> None:
        def stepped() -> bool:
            self.new.step()
            return done()

        self.w.run_until(stepped, max_ticks=30)

    def shard_moves_and_new_holder_launches(self) -> None:
        """The old holder's shard Lease expires unrenewed; the new holder takes the shard and runs until a
        claim of the pool is at the server."""
        self.w.clock.advance(timedelta(seconds=self.old.shard_leases[0].lease_duration + 1))
        self.new_holder_runs_until(lambda: bool(self.claims_at_server()))


def sharding(leases: ShardLeases, w: World) -> Sharding:
    """A replica's view of its Leases, as `provisioner run --shards` wires it."""
    return Sharding(
        shards=leases.shards,
        owned_shards=leases.owned_shards,
        holds_admission=leases.holds_admission,
        clock=w.clock,
        acting_until=leases.acting_until,
    )


class InFlight:
    """A NodeClaim create of the old holder's, made from a thread of its own and held at the server
    until `land`."""

    def __init__(self, handover: Handover, name: str, *, enforced: bool = True) -> None:
        self.held = handover.server.emulator.hold("POST nodeclaims", enforced=enforced)
        self.outcome: list[Any] = []
        claim = node_claim(name, ["p5.48xlarge"], nodepool=POOL)
        self.thread = threading.Thread(target=self._write, args=(handover, claim), daemon=True)
        self.thread.start()
        self.held.wait_arrived()

    def _write(self, handover: Handover, claim: Any) -> None:
        try:
            self.outcome.append(handover.old_writes.create_nodeclaim(claim))
        except Exception as err:  # the tests assert on what reached the server, and on this
            self.outcome.append(err)

    def land(self) -> int | None:
        """Let the request go on at the server; what the server answered it."""
        self.held.release()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the old holder's create did not return within 60 s of its release"
        assert self.held.answered.wait(60), "the server did not answer the held create"
        return self.held.status


def pending(name: str) -> dict[str, Any]:
    return gpu_pod(name, gpus=8, gpu_name="h100", cpu="32", memory="256Gi", node_selector={wk.NODEPOOL: POOL})


@pytest.fixture
def make_handover(
    make_kube_world: Callable[..., World], kube_client: kc.KubeClient, kube_server: KubeServer
) -> Callable[[int], Handover]:
    """A handover over pool POOL limited to `gpus` (8: one p5.48xlarge)."""

    def factory(gpus: int) -> Handover:
        w = make_kube_world(settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
        w.apply(
            node_class(),
            node_pool(
                POOL,
                gpu_names=("h100",),
                capacity_types=("on-demand",),
                instance_types=["p5.48xlarge"],
                limits={"nvidia.com/gpu": str(gpus)},
            ),
        )
        return Handover(w, kube_client, kube_server)

    return factory


def test_a_claim_create_in_flight_at_the_handover_never_takes_the_pool_past_its_limit(
    make_handover: Callable[[int], Handover],
) -> None:
    handover = make_handover(8)
    w = handover.w
    w.apply(pending("train-0"))
    in_flight = InFlight(handover, "old-holder")
    try:
        # The old holder dies with its create at the server; its Lease expires, the new holder takes the
        # shard (listing the claims: the held one is not there) and launches for the pending pod.
        handover.shard_moves_and_new_holder_launches()
        assert handover.new.owned_shards() == {0}
    finally:
        status = in_flight.land()  # the old holder's create lands now, unless it was abandoned
    claims = handover.claims_at_server()
    assert len(claims) == 1, f"pool {POOL} limited to 8 GPUs (one p5.48xlarge) holds claims {claims}"
    assert status == 504, "the server abandoned the old holder's create at its deadline"
    assert isinstance(in_flight.outcome[0], ClusterError)


def test_a_claim_landing_later_still_is_counted_and_the_pool_launches_no_more(
    make_handover: Callable[[int], Handover],
) -> None:
    # A server that serves a request past its deadline (no real one does): the old holder's claim lands
    # after the new holder launched. It is counted as soon as it is seen: the pool, now at its limit of
    # two nodes, takes no third.
    handover = make_handover(16)
    w = handover.w
    w.apply(pending("train-0"))
    in_flight = InFlight(handover, "old-holder", enforced=False)
    try:
        handover.shard_moves_and_new_holder_launches()
    finally:
        assert in_flight.land() == 201
    w.apply(pending("train-1"))
    handover.new_holder_runs_until(lambda: "old-holder" in w.state.claims)
    for _ in range(5):  # passes that would launch for train-1 if the late claim did not count
        handover.new_holder_runs_until(lambda: True)
        w.tick()
    claims = handover.claims_at_server()
    assert len(claims) == 2, f"pool {POOL} limited to 16 GPUs (two p5.48xlarge) holds claims {claims}"


def test_the_old_holder_starts_no_write_its_lease_could_outlive(
    make_handover: Callable[[int], Handover], kube_server: KubeServer
) -> None:
    handover = make_handover(8)
    lease = handover.old.shard_leases[0]
    posts = kube_server.emulator.requests.get("POST nodeclaims", 0)
    handover.w.clock.advance(timedelta(seconds=lease.renew_deadline - MIN_WRITE_SECONDS / 2))
    assert handover.old.owned_shards() == {0}, "still within its renew deadline"
    with pytest.raises(NotLeader):
        handover.old_writes.create_nodeclaim(node_claim("too-late", ["p5.48xlarge"], nodepool=POOL))
    assert kube_server.emulator.requests.get("POST nodeclaims", 0) == posts, "no request was sent"
    handover.old.step()  # renewed: the whole renew deadline is ahead again
    handover.old_writes.create_nodeclaim(node_claim("in-time", ["p5.48xlarge"], nodepool=POOL))
    sent = kube_server.emulator.last_request
    assert sent is not None and sent.params.get("timeout") == f"{int(lease.renew_deadline * 1000)}ms"
    assert handover.claims_at_server() == ["in-time"]


def test_a_gate_lift_in_flight_at_the_admission_handover_never_takes_a_team_past_its_quota(
    make_kube_world: Callable[..., World], kube_client: kc.KubeClient, kube_server: KubeServer
) -> None:
    # Quota admission is one replica's, by the admission Lease: the same window as a shard's. The old
    # holder lifts the gate of pod b (room for one GPU); its patch waits at the server while its Lease
    # expires and the new holder admits pod a (higher priority) into that room. Then the patch goes on.
    w = make_kube_world(settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    quota = {"nodePool": "gpu", "resources": {wk.GPU_RESOURCE: "1"}, "overQuota": False}
    team = {"namespaces": ["vision"], "quotas": [quota]}
    w.apply(
        node_class(),
        node_pool("gpu"),
        {"apiVersion": wk.API_VERSION, "kind": "Team", "metadata": {"name": "vision"}, "spec": team},
    )
    w.apply(gated("a", priority=100), gated("b"))
    handover = Handover(w, kube_client, kube_server)
    assert handover.old.holds_admission() and not handover.new.holds_admission()
    old_admits = sharding(handover.old, w).admission_cluster(KubeClusterAPI(kube_client, clock=w.clock))
    held = kube_server.emulator.hold("PATCH pods")
    outcome: list[Any] = []

    def lift() -> None:
        try:
            old_admits.patch_pod(
                "vision", "b", {"spec": {"schedulingGates": [], "nodeSelector": {wk.NODEPOOL: "gpu"}}}
            )
        except Exception as err:  # the test asserts on what reached the server
            outcome.append(err)

    writer = threading.Thread(target=lift, daemon=True)
    writer.start()
    try:
        held.wait_arrived()
        w.clock.advance(timedelta(seconds=handover.old.admission.lease_duration + 1))
        handover.new_holder_runs_until(lambda: ungated(kube_client) == ["a"])
        assert handover.new.holds_admission()
    finally:
        held.release()
    writer.join(60)
    assert not writer.is_alive() and held.answered.wait(60), "the held patch was not answered"
    assert ungated(kube_client) == ["a"], "team vision's quota is one GPU: only pod a is admitted"
    assert held.status == 504 and isinstance(outcome[0], ClusterError)


def gated(name: str, *, priority: int = 0) -> dict[str, Any]:
    """A pod of team vision as the webhook lets it in: behind the admission gate."""
    doc = gpu_pod(name, namespace="vision")
    doc["spec"]["schedulingGates"] = [{"name": wk.ADMISSION_GATE}]
    doc["spec"]["priority"] = priority
    return doc


def ungated(client: kc.KubeClient) -> list[str]:
    """The pods of namespace vision admitted (their admission gate lifted), at the API server."""
    items, _ = client.list(kc.POD, namespace="vision")
    return sorted(
        p["metadata"]["name"]
        for p in items
        if not any(g.get("name") == wk.ADMISSION_GATE for g in p["spec"].get("schedulingGates") or ())
    )
