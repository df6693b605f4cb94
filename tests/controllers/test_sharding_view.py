"""One sharded replica's view of the ClusterState (provisioner.controllers.sharding): its snapshot holds
its pools only, and its change feeds wake a controller when it takes a shard with nothing written."""

from __future__ import annotations

import pytest

from provisioner.clock import VirtualClock
from provisioner.clusterapi import MemoryCluster, NotLeader
from provisioner.controllers.sharding import ScopedChanges, Sharding
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState
from tests.builders import node_claim, node_pool_manifest


def test_taking_a_shard_wakes_the_controllers_though_nothing_was_written():
    state = ClusterState()
    held: set[int] = set()
    sharding = Sharding(
        shards=2, owned_shards=lambda: frozenset(held), holds_admission=lambda: False, clock=VirtualClock()
    )
    view = sharding.state(state)
    pool = "pool-x"
    feed = view.changes("NodePool")
    state.upsert("NodePool", node_pool_manifest(pool))
    assert feed.take() == {pool}
    assert view.snapshot().nodepools == ()
    held.add(model.shard_of(pool, 2))
    assert feed.take() == {ScopedChanges.EVERYTHING}, "the held shards changed: look again"
    assert feed.take() == set()
    assert [p.name for p in view.snapshot().nodepools] == [pool]


def test_a_claim_of_a_pool_whose_shard_was_lost_is_not_written():
    held = {model.shard_of("pool-x", 2)}
    sharding = Sharding(
        shards=2, owned_shards=lambda: frozenset(held), holds_admission=lambda: False, clock=VirtualClock()
    )
    state = ClusterState()
    cluster = sharding.cluster(MemoryCluster(state, VirtualClock()))
    cluster.create_nodeclaim(node_claim("c1", nodepool="pool-x"))
    held.clear()  # the Lease was not renewed in time, in the middle of a pass
    with pytest.raises(NotLeader):
        cluster.create_nodeclaim(node_claim("c2", nodepool="pool-x"))
    assert sorted(state.claims) == ["c1"]
