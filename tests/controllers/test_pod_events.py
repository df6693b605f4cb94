"""Pod events on NodeClaims (the disruption controller's collaborator): the `Empty` condition follows the
claim's workload pods, `lastPodEventTime` moves only when they change, and a claim seen for the first time
is only remembered, since a restart is not a pod event."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provisioner.api.nodeclaim import EMPTY
from provisioner.clock import isoformat
from provisioner.controllers.conditions import condition_status
from provisioner.controllers.pod_events import PodEvents
from testkit.controllers.world import MemoryBackend, World, gpu_pod, node_class, node_pool


@pytest.fixture
def world() -> Iterator[World]:
    w = World(MemoryBackend)
    w.apply(node_class(), node_pool(capacity_types=("on-demand",)), gpu_pod("job", gpus=4, owner="Job"))
    w.run_until(w.all_bound, max_ticks=30)
    yield w
    w.backend.close()


def observe(w: World, events: PodEvents) -> None:
    events.observe(w.state.snapshot(), w.clock.now())


def test_a_claim_seen_first_is_remembered_not_counted_as_a_pod_event(world: World) -> None:
    w = world
    events = PodEvents(cluster=w.backend.cluster)

    observe(w, events)

    (claim,) = w.claims()
    assert condition_status(claim, EMPTY) == "False"
    assert claim.status.last_pod_event_time is None


def test_the_last_pod_leaving_moves_the_event_time_and_empties_the_claim(world: World) -> None:
    w = world
    events = PodEvents(cluster=w.backend.cluster)
    observe(w, events)
    w.tick(30)
    w.backend.delete("Pod", "job", namespace="default")

    observe(w, events)

    (claim,) = w.claims()
    assert condition_status(claim, EMPTY) == "True"
    assert claim.status.last_pod_event_time == isoformat(w.clock.now())


def test_nothing_is_written_while_the_pods_stay_the_same(world: World) -> None:
    w = world
    events = PodEvents(cluster=w.backend.cluster)
    observe(w, events)
    before = w.state.generation
    w.tick(30)

    observe(w, events)

    assert w.state.generation == before
