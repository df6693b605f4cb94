"""One sharded replica's view of the ClusterState (provisioner.controllers.sharding): its snapshot holds
its pools only, its change feeds wake a controller when it takes a shard with nothing written, and its
writes are fenced by what it holds at the moment of each write (a pool's shard, quota admission)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from provisioner.clock import VirtualClock
from provisioner.clusterapi import MemoryCluster, NotLeader
from provisioner.controllers.settings import ControllerSettings
from provisioner.controllers.sharding import ScopedChanges, Sharding
from provisioner.scheduling import shards as model
from provisioner.state import ClusterState
from testkit.builders.nodes import node_claim
from testkit.builders.pools import node_pool_manifest
from testkit.controllers.backends import MemoryBackend
from testkit.controllers.world import World, gpu_pod, node_class, node_pool


def test_taking_a_shard_wakes_the_controllers_though_nothing_was_written() -> None:
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


def test_a_claim_of_a_pool_whose_shard_was_lost_is_not_written() -> None:
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


def test_quota_admission_whose_lease_lapses_mid_pass_lifts_no_more_gates() -> None:
    """Its renewals starved, a holder's pass goes on while a new holder decides from its own picture:
    each write is fenced, so the two never both admit into the same room."""
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    quota = [{"nodePool": "gpu", "resources": {"nvidia.com/gpu": "2"}, "overQuota": False}]
    team = {"kind": "Team", "metadata": {"name": "cv"}, "spec": {"namespaces": ["vision"], "quotas": quota}}
    pods = [gpu_pod(name, namespace="vision") for name in ("a", "b")]
    for doc in pods:
        doc["spec"]["schedulingGates"] = [{"name": "provisioner.sh/admission"}]
    w.apply(node_class(), node_pool("gpu"), team, *pods)
    answers = iter([True])  # held at the first write, lapsed from then on
    sharding = Sharding(
        shards=2,
        owned_shards=frozenset,
        holds_admission=lambda: next(answers, False),
        clock=w.clock,
    )
    w.manager.admission.cluster = sharding.admission_cluster(w.backend.cluster)
    plan = w.manager.admission.reconcile(w.clock.now())
    assert plan is not None and len(plan.admitted) == 2, "both fit the quota"
    assert [p.gated for p in (w.state.pods["vision/a"], w.state.pods["vision/b"])] == [False, True]
    with pytest.raises(NotLeader):  # nor a ProvisioningRequest's quota word (RequestQuota)
        w.manager.admission.cluster.patch_provisioning_request("vision", "r", {"metadata": {}})


def test_a_shard_taken_over_mid_pass_is_not_solved_without_the_claims_its_catch_up_brought() -> None:
    # Issue 29: the dead replica's claim is in the API server but not yet in the survivor's state. The
    # survivor's Lease thread wins the shard and catches up (the claim into the state, then the shard
    # counts as held) exactly while its provisioning pass reads the state: that pass must not see the
    # shard's pod without the claim, or it writes a second claim for it beside the dead replica's.
    w = World(MemoryBackend, settings=ControllerSettings(cluster_name="test", batch_idle=timedelta(0)))
    pool = "pool-x"
    shard = model.shard_of(pool, 2)
    w.apply(node_class(), node_pool(pool), gpu_pod("a", node_selector={"provisioner.sh/nodepool": pool}))
    w.binder.sync()

    def sharding(held: set[int]) -> Sharding:
        return Sharding(
            shards=2, owned_shards=lambda: frozenset(held), holds_admission=lambda: True, clock=w.clock
        )

    dead = w.new_manager(sharding=sharding({shard}))
    dead.provisioning.reconcile(w.clock.now())
    (written,) = w.claims()
    doc = written.model_dump(by_alias=True, mode="json", exclude_none=True)
    w.state.remove("NodeClaim", written.name)  # not yet through the survivor's watch

    held: set[int] = set()
    survivor = w.new_manager(sharding=sharding(held))
    survivor.provisioning.reconcile(w.clock.now())
    assert w.claims() == [], "not its shard yet"
    read = w.state.snapshot

    def read_then_take_over() -> Any:
        snap = read()
        del w.state.snapshot  # once
        w.state.upsert("NodeClaim", doc)  # ShardLeases.on_acquire: the catch-up, then the shard is held
        held.add(shard)
        return snap

    w.state.snapshot = read_then_take_over  # type: ignore[method-assign]
    survivor.provisioning.trigger()  # a pass that reads the state (a busy replica's are)
    for _ in range(3):
        w.clock.advance(1)
        survivor.provisioning.reconcile(w.clock.now())
    assert [c.name for c in w.claims()] == [written.name], "the pod waits for the dead replica's claim"
    assert survivor.provisioning.last_results is not None
    assert len(survivor.provisioning.last_results.placements) == 1, "placed on that claim in flight"
