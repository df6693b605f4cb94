"""One sharded replica's view of the ClusterState (provisioner.controllers.sharding): its snapshot holds
its pools only, and its change feeds wake a controller when it takes a shard with nothing written."""

from __future__ import annotations

from provisioner.clock import VirtualClock
from provisioner.controllers.sharding import ScopedChanges, Sharding
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState
from tests.builders import node_pool_manifest


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
