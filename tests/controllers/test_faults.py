"""Faults from the cloud for ten minutes, then none: the controller's call rate stays bounded (no hot
loop), it says what happened (Event or metric), and once the fault clears every pod gets a node with one
launch per claim and no instance without a claim."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from provisioner.api import labels as wk
from provisioner.cloudprovider import (
    CloudProviderError,
    CreateError,
    Instance,
    InsufficientCapacity,
    OfferingKey,
    TransientError,
)
from provisioner.controllers.settings import ControllerSettings
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool

OUTAGE = 600
"""Seconds of fault, ticked one second at a time: a hot loop would call the cloud ~600 times."""
MAX_CREATES = 60
"""At most one create per ten seconds on average over the outage."""


def _world() -> World:
    return World(
        MemoryBackend, settings=ControllerSettings(cluster_name="test", gc_grace=timedelta(seconds=30))
    )


def _all_a10g(w: World, capacity_type: str) -> list[OfferingKey]:
    return [
        OfferingKey(t.name, o.zone, o.capacity_type)
        for t in w.fake.catalog
        if t.labels.get(wk.GPU_NAME) == "a10g"
        for o in t.offerings
        if o.capacity_type == capacity_type
    ]


FAULTS: dict[str, Callable[[World], CloudProviderError]] = {
    "throttling": lambda w: TransientError("RequestLimitExceeded: request rate exceeded"),
    "cloud-5xx": lambda w: TransientError("InternalError (500): we encountered an internal error"),
    "timeout": lambda w: TransientError("read timeout on endpoint URL"),
    "quota": lambda w: InsufficientCapacity(
        _all_a10g(w, "spot") + _all_a10g(w, "on-demand"), "QUOTA_EXCEEDED: GPUS_ALL_REGIONS", kind="quota"
    ),
    "create-error": lambda w: CreateError("InvalidParameterValue: the AMI is not authorized"),
}
EVIDENCE = {
    "throttling": ("metric", "TransientError"),
    "cloud-5xx": ("metric", "TransientError"),
    "timeout": ("metric", "TransientError"),
    "quota": ("event", "InsufficientCapacity"),
    "create-error": ("event", "CreateError"),
}


def _creates(w: World) -> int:
    return sum(1 for c in w.fake.calls if c[0] == "create")


def _books_balance(w: World) -> None:
    claims = {c.name for c in w.claims()}
    instances = [i.nodeclaim for i in w.fake.list()]
    assert sorted(instances, key=str) == sorted(claims), "one instance per claim, none without a claim"
    assert w.fake.launched_total == len(instances), "no launch beyond one per claim"


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_cloud_outage_is_survived_without_a_hot_loop_or_a_leak(fault: str) -> None:
    w = _world()
    w.fake.fail_next_create(FAULTS[fault](w), times=10_000)
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"), gpu_pod("b"))
    for _ in range(OUTAGE):
        w.tick()
    assert 1 <= _creates(w) <= MAX_CREATES, _creates(w)
    kind, reason = EVIDENCE[fault]
    if kind == "event":
        assert w.events(reason), f"an Event says {reason}"
    else:
        assert w.metric("provisioner_launch_failures_total", reason=reason) >= 1
    assert not w.fake.list()
    w.fake.clear_failures()
    # A quota error keeps its offerings away for the cache's quota TTL (15 minutes), the rest retry sooner.
    w.run_until(w.all_bound, max_ticks=1200)
    _books_balance(w)


def test_a_stockout_of_every_offering_is_survived_without_a_hot_loop() -> None:
    w = _world()
    w.fake.mark_unavailable(capacity_type="spot")
    w.fake.mark_unavailable(capacity_type="on-demand")
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    for _ in range(OUTAGE):
        w.tick()
    assert 1 <= _creates(w) <= MAX_CREATES, _creates(w)
    assert w.metric("provisioner_launch_failures_total", reason="InsufficientCapacity") >= 1
    w.fake.mark_available()
    w.run_until(w.all_bound, max_ticks=900)
    _books_balance(w)


def test_slow_cloud_answers_do_not_launch_twice() -> None:
    """A create slow enough that the next tick comes before it returns (the memory world ticks inside
    it) is still one launch: the claim is the idempotency token."""
    w = _world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("a"))
    inner = w.fake.create

    def slow_create(*args: Any, **kw: Any) -> Instance:
        instance = inner(*args, **kw)
        w.clock.advance(timedelta(seconds=90))  # the answer took a minute and a half
        return instance

    w.fake.create = slow_create  # type: ignore[method-assign]
    w.run_until(w.all_bound, max_ticks=60)
    for _ in range(60):
        w.tick()
    _books_balance(w)
