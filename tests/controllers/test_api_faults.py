"""Faults from the Kubernetes API server while the controllers work: conflicts, throttling, server
errors and dropped watch streams. Each: the work still converges (every pod on a node, one instance per
claim), and the controller's writes stay bounded (no hot loop on a failing call)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from testkit.controllers.kube_server import KubeServer
from testkit.controllers.world import World, gpu_pod, node_class, node_pool
from tests.controllers.conftest import REAL_CLUSTER

pytestmark = pytest.mark.skipif(bool(REAL_CLUSTER), reason="injects API failures through the fixture")

TICKS = 40
"""Steps of the controller during the fault; a hot loop would write on every one of them, many times."""


def _books_balance(w: World) -> None:
    claims = {c.name for c in w.claims()}
    assert sorted((i.nodeclaim for i in w.fake.list()), key=str) == sorted(claims), "one instance per claim"
    assert w.fake.launched_total == len(claims), "no launch beyond one per claim"


@pytest.mark.parametrize(
    ("call", "status"),
    [
        ("POST nodeclaims", 429),
        ("POST nodeclaims", 503),
        ("PATCH nodeclaims", 409),
        ("PATCH nodeclaims", 500),
        ("PATCH nodes", 409),
        ("PATCH nodes", 429),
        ("POST events", 500),
    ],
    ids=lambda v: str(v).replace(" ", "-"),
)
def test_an_api_server_failing_a_write_for_a_while_is_survived(
    kube_server: KubeServer, make_kube_world: Callable[..., World], call: str, status: int
) -> None:
    w = make_kube_world()
    emulator = kube_server.emulator
    emulator.fail_status[call] = status
    emulator.fail_next[call] = 10_000
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"), gpu_pod("train-1", gpus=2))
    for _ in range(TICKS):
        w.tick()
    tried = emulator.requests.get(call, 0)
    assert 1 <= tried <= 4 * TICKS, f"{call} tried {tried} times in {TICKS} steps"
    emulator.fail_next[call] = 0
    w.run_until(w.all_bound, max_ticks=60)
    _books_balance(w)


def test_dropped_watch_streams_are_reopened_and_nothing_is_missed(
    kube_server: KubeServer, make_kube_world: Callable[..., World]
) -> None:
    w = make_kube_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    for task in list(kube_server.emulator.watches):
        kube_server.call(task.cancel)  # the server drops every open watch
    w.apply(gpu_pod("train-1"))  # written while no watch is open
    w.run_until(w.all_bound, max_ticks=60)
    assert {p.name for p in w.pods()} == {"train-0", "train-1"}
    _books_balance(w)


def test_a_watch_answering_410_gone_relists_and_the_work_goes_on(
    kube_server: KubeServer, make_kube_world: Callable[..., World]
) -> None:
    w = make_kube_world()
    w.apply(node_class(), node_pool("gpu"), gpu_pod("train-0"))
    w.run_until(w.all_bound, max_ticks=30)
    kube_server.call(kube_server.emulator.compact)
    for task in list(kube_server.emulator.watches):
        kube_server.call(task.cancel)
    w.apply(gpu_pod("train-1"))
    w.run_until(w.all_bound, max_ticks=60)
    _books_balance(w)
