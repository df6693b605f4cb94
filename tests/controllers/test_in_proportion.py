"""Controllers in proportion to change: a pass over a settled cluster in which nothing was written reads
no object of it (no walk over the snapshot's nodes or pending pods, no copy of a store), and a write is
seen by each controller that must act on it.

The objects a pass visits are counted through our own seam: the state's snapshot hands out its nodes and
pending pods in tuples that count what is iterated, and its stores in views that count what is copied.
The Manager steps alone between the counts (no kubelet or binder stand-in runs), so only the clock moves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api.nodeclaim import EMPTY, INITIALIZED
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.nodepool import NodePoolStatusController
from provisioner.state import ClusterState, Snapshot
from provisioner.state.cluster import StoreView
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool
from testkit.typed import present

VIEWS = ("pods", "nodes", "claims", "nodepools", "pending")


class Counter:
    """How many objects the state handed out in bulk since the last `reset`."""

    def __init__(self) -> None:
        self.visits = 0

    def reset(self) -> None:
        self.visits = 0


class CountedTuple(tuple[Any, ...]):
    counter: Counter

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            self.counter.visits += 1
            yield item


class CountedView(StoreView[Any, Any]):
    counter: Counter

    def keys(self) -> Any:
        out = super().keys()
        self.counter.visits += len(out)
        return out

    def values(self) -> Any:
        out = super().values()
        self.counter.visits += len(out)
        return out

    def items(self) -> Any:
        out = super().items()
        self.counter.visits += len(out)
        return out


def counted(state: ClusterState) -> Counter:
    """Count every object the state's snapshots and views hand out in bulk from now on."""
    counter = Counter()
    tuples = type("Counted", (CountedTuple,), {"counter": counter})
    views = type("CountedStore", (CountedView,), {"counter": counter})
    for name in VIEWS:
        view = getattr(state, name)
        setattr(state, name, views(view._data, view._lock))
    snapshot = state.snapshot

    def counting_snapshot() -> Snapshot:
        snap = snapshot()
        return dataclasses.replace(snap, nodes=tuples(snap.nodes), pending_pods=tuples(snap.pending_pods))

    state.snapshot = counting_snapshot  # type: ignore[method-assign]
    return counter


@pytest.fixture
def settled() -> Iterator[World]:
    """Three nodes, each running one training pod, launched and initialized; the disruption controller on."""
    w = World(MemoryBackend)
    w.manager = w.new_manager(disruption=True)
    w.apply(node_class(), node_pool(capacity_types=("on-demand",)))
    w.apply(*(gpu_pod(f"job-{i}", gpus=4, owner="Job") for i in range(3)))
    w.run_until(lambda: w.all_bound() and all(condition_status(c, INITIALIZED) == "True" for c in w.claims()))
    # The controllers' own writes of the last passes are read once more, by garbage collection at its next
    # run (every 30 s).
    for _ in range(35):
        step(w)
    yield w
    w.backend.close()


def step(w: World, seconds: float = 1.0) -> None:
    """One Manager pass, the clock moved on; nothing else acts."""
    w.clock.advance(timedelta(seconds=seconds))
    w.manager.step(w.clock.now())


def test_a_pass_with_nothing_written_reads_no_object(settled: World) -> None:
    w = settled
    assert w.manager.disruption is not None
    counter = counted(w.state)
    generation = w.state.generation
    quiet = 0
    for _ in range(90):
        evaluations = w.manager.disruption._evaluations
        counter.reset()
        step(w)
        # Disruption evaluates at least once a minute for what time alone changes (consolidateAfter, budget
        # windows): that pass plans. Every other pass reads nothing.
        if w.manager.disruption._evaluations == evaluations:
            assert counter.visits == 0
            quiet += 1
    assert w.state.generation == generation, "a quiet cluster is not written"
    assert quiet >= 85


def test_without_the_skipping_a_pass_would_read_every_node(settled: World) -> None:
    """The seam counts what it should: a fresh Manager's first pass walks the cluster."""
    w = settled
    w.manager = w.new_manager(disruption=True)
    counter = counted(w.state)

    step(w)

    assert counter.visits >= len(w.state.nodes) * 5


def test_a_written_pod_is_seen_by_each_controller_that_must_act_on_it(settled: World) -> None:
    w = settled
    counted(w.state)
    names = {c.name for c in w.claims()}
    for _ in range(5):
        step(w)

    # A pod kube-scheduler could not place: provisioning solves it, lifecycle launches its claim,
    # NodePool status counts the new node.
    w.apply(gpu_pod("late", gpus=4, owner="Job"))
    w.binder.sync()  # kube-scheduler's stand-in finds no room and marks it Unschedulable
    for _ in range(15):
        step(w)
    (new,) = [c for c in w.claims() if c.name not in names]
    assert new.status.provider_id, "launched"
    pool = w.state.nodepools["gpu"]
    assert pool.status is not None and pool.status.resources["nodes"] == "4"

    # A node's last pod gone: disruption's pod-event bookkeeping marks its claim Empty.
    (first, *_) = sorted(names)
    node = present(w.state.claims[first].status.node_name)
    (job,) = [p for p in w.state.pods_on(node) if not p.is_daemonset_pod]
    w.backend.delete("Pod", job.name, namespace=job.namespace)
    step(w)
    assert condition_status(w.state.claims[first], EMPTY) == "True"

    # A claim deleted: termination drains and deletes its instance.
    other = sorted(names)[1]
    w.backend.delete("NodeClaim", other)
    for _ in range(5):
        step(w)
    assert other not in w.state.claims


def test_a_controller_serving_other_pools_is_not_woken_by_this_ones_writes(settled: World) -> None:
    w = settled
    mine = w.manager.nodepools
    shard = NodePoolStatusController(
        state=w.state,
        cluster=mine.cluster,
        providers=mine.providers,
        settings=mine.settings,
        metrics=mine.metrics,
        clock=mine.clock,
        owns=lambda pool: pool != "gpu",
    )
    shard.reconcile(w.clock.now())  # its first pass reads everything
    (claim, *_) = w.claims()
    counter = counted(w.state)
    w.backend.cluster.patch_nodeclaim(claim.name, {"metadata": {"annotations": {"touched": "yes"}}})

    shard.reconcile(w.clock.now())
    assert counter.visits == 0
    mine.reconcile(w.clock.now())
    assert counter.visits > 0, "the controller serving the pool is woken"
