"""A shard handed over while its old holder's write is still in flight (issue 29): the old holder's
NodeClaim create is held at the API server until its shard Lease has expired and the new holder has
acquired the shard, listed the claims and launched; then the held create is let go. The pool's limit
must hold: the old holder's write carries its Lease's renew deadline as the request's `timeout`, so the
API server abandons it (504) before the Lease can expire, and the new holder's list, made after the
expiry, is complete."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.clusterapi import ClusterAPI, ClusterError
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import Sharding
from provisioner.kube import client as kc
from provisioner.kube.api import KubeClusterAPI
from provisioner.kube.shards import ShardLeases
from provisioner.operator import catch_up
from testkit.builders.nodes import node_claim
from testkit.controllers.backends import KubeBackend
from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.controllers.conftest import REAL_CLUSTER

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="holds a request at the test server")

POOL = "fenced"
LIMIT = {"nvidia.com/gpu": "8"}
"""One p5.48xlarge (8 GPUs): a second claim takes the pool past its limit."""


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


def sharding(leases: ShardLeases, w: World) -> Sharding:
    """A replica's view of its Leases, as `provisioner run --shards` wires it."""
    return Sharding(
        shards=leases.shards,
        owned_shards=leases.owned_shards,
        holds_admission=leases.holds_admission,
        clock=w.clock,
        acting_until=leases.acting_until,
    )


@pytest.fixture
def handover(
    make_kube_world: Callable[..., World], kube_client: kc.KubeClient, kube_server: KubeServer
) -> Iterator[Handover]:
    w = make_kube_world(settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    w.apply(
        node_class(),
        node_pool(
            POOL,
            gpu_names=("h100",),
            capacity_types=("on-demand",),
            instance_types=["p5.48xlarge"],
            limits=LIMIT,
        ),
    )
    yield Handover(w, kube_client, kube_server)


def test_a_claim_create_in_flight_at_the_handover_never_takes_the_pool_past_its_limit(
    handover: Handover, kube_server: KubeServer
) -> None:
    w = handover.w
    w.apply(
        gpu_pod(
            "train-0", gpus=8, gpu_name="h100", cpu="32", memory="256Gi", node_selector={wk.NODEPOOL: POOL}
        )
    )
    held = kube_server.emulator.hold("POST nodeclaims")
    outcome: list[Any] = []

    def old_holder_launches() -> None:
        try:
            outcome.append(
                handover.old_writes.create_nodeclaim(node_claim("old-holder", ["p5.48xlarge"], nodepool=POOL))
            )
        except Exception as err:  # the test asserts on what reached the server, not on this
            outcome.append(err)

    writer = threading.Thread(target=old_holder_launches, name="old-holder-write", daemon=True)
    writer.start()
    try:
        held.wait_arrived()
        # The old holder dies with its create at the server; its Lease expires, the new holder takes the
        # shard (listing the claims: the held one is not there) and launches for the pending pod.
        w.clock.advance(timedelta(seconds=handover.old.shard_leases[0].lease_duration + 1))
        handover.new_holder_runs_until(lambda: bool(handover.claims_at_server()))
        assert handover.new.owned_shards() == {0}
    finally:
        held.release()  # the old holder's create lands now, unless it was abandoned
    writer.join(60)
    assert not writer.is_alive(), "the old holder's create did not return within 60 s of its release"
    assert held.answered.wait(60), "the server did not answer the held create"
    claims = handover.claims_at_server()
    assert len(claims) == 1, f"pool {POOL} limited to 8 GPUs (one p5.48xlarge) holds claims {claims}"
    assert held.status == 504, "the server abandoned the old holder's create at its deadline"
    assert isinstance(outcome[0], ClusterError)
