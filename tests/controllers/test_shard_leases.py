"""Shard Leases (provisioner.kube.shards) against the Kubernetes API, on a virtual clock: replicas split
the shards evenly and never hold one at once, a replica that stops renewing loses its shards to the
others once its Leases expire (and stops acting on them before that), one joining takes its share, and
quota admission has exactly one holder."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from provisioner.clock import VirtualClock
from provisioner.clusterapi import ClusterError
from provisioner.kube import client as kc
from provisioner.kube.shards import ShardLeases, lease_name

SHARDS = 8


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def make(
    kube_client: kc.KubeClient, clock: VirtualClock, request: pytest.FixtureRequest
) -> Iterator[Callable[[str], ShardLeases]]:
    made: list[ShardLeases] = []
    # A namespace per test on a real cluster would be cleaner; Lease names carry the test's name instead.
    prefix = lease_name(f"t-{request.node.name}")[:40].strip("-")

    def factory(identity: str) -> ShardLeases:
        leases = ShardLeases(kube_client, identity=identity, clock=clock, shards=SHARDS, prefix=prefix)
        made.append(leases)
        return leases

    yield factory
    for leases in made:
        for lease in [*leases.shard_leases, leases.admission, leases.member]:
            with contextlib.suppress(Exception):
                kube_client.delete(kc.LEASE, lease.name, namespace="default")


def settle(*replicas: ShardLeases, rounds: int = 3) -> None:
    for _ in range(rounds):
        for r in replicas:
            r.step()


def start(clock: VirtualClock, *replicas: ShardLeases) -> None:
    """Replicas starting together: the first to step takes every shard, gives the others' share up, and
    they take it once its Leases expire."""
    run_for(clock, replicas[0].shard_leases[0].lease_duration + 2, *replicas)


def run_for(clock: VirtualClock, seconds: float, *replicas: ShardLeases) -> None:
    """Replicas stepping every retry period (2 s) for `seconds`."""
    settle(*replicas, rounds=1)
    for _ in range(int(seconds // 2)):
        clock.advance(2)
        settle(*replicas, rounds=1)


def test_replicas_split_the_shards_evenly_and_never_share_one(
    make: Callable[[str], ShardLeases], clock: VirtualClock
) -> None:
    a, b = make("replica-a"), make("replica-b")
    start(clock, a, b)
    assert len(a.owned_shards()) == len(b.owned_shards()) == SHARDS // 2
    assert not a.owned_shards() & b.owned_shards()
    assert a.holds_admission() != b.holds_admission(), "quota admission has one holder"


def test_a_replica_that_stops_renewing_loses_its_shards_to_the_others(
    make: Callable[[str], ShardLeases], clock: VirtualClock
) -> None:
    a, b, c = make("replica-a"), make("replica-b"), make("replica-c")
    start(clock, a, b, c)
    lost = c.owned_shards()
    assert lost
    clock.advance(a.shard_leases[0].renew_deadline)
    assert not c.owned_shards(), "past its renew deadline a replica stops acting, before the Lease expires"
    settle(a, b)  # c is gone: its Leases are not renewed, not yet expired
    assert not (a.owned_shards() | b.owned_shards()) & lost, "no shard taken before its Lease expired"
    run_for(clock, a.shard_leases[0].lease_duration, a, b)
    assert a.owned_shards() | b.owned_shards() == set(range(SHARDS))
    assert not a.owned_shards() & b.owned_shards()


def test_a_replica_joining_takes_its_share_once_the_old_holders_leases_expire(
    make: Callable[[str], ShardLeases], clock: VirtualClock
) -> None:
    a = make("replica-a")
    settle(a)
    assert a.owned_shards() == set(range(SHARDS))
    b = make("replica-b")
    settle(a, b)
    assert len(a.owned_shards()) == SHARDS // 2, "a stops acting on b's share at once"
    assert not b.owned_shards(), "b waits: a pass of a's may still be writing for those pools"
    run_for(clock, a.shard_leases[0].lease_duration + 2, a, b)
    assert len(b.owned_shards()) == SHARDS // 2
    assert a.owned_shards() | b.owned_shards() == set(range(SHARDS))
    assert not a.owned_shards() & b.owned_shards()


def test_released_leases_let_the_others_take_over_at_once(
    make: Callable[[str], ShardLeases], clock: VirtualClock
) -> None:
    a, b = make("replica-a"), make("replica-b")
    start(clock, a, b)
    a.release()
    settle(b)
    assert b.owned_shards() == set(range(SHARDS)) and b.holds_admission()


def test_won_shards_are_acted_on_only_once_the_replica_has_caught_up(
    kube_client: kc.KubeClient, clock: VirtualClock
) -> None:
    seen: list[frozenset[int]] = []
    leases = ShardLeases(kube_client, identity="replica-a", clock=clock, shards=SHARDS, prefix="t-catch-up")
    leases.on_acquire = lambda: seen.append(leases.owned_shards())
    leases.step()
    assert seen == [frozenset()], "caught up before acting on any shard it won"
    assert leases.owned_shards() == set(range(SHARDS))
    leases.step()
    assert len(seen) == 1, "renewing is not winning"
    leases.release()


def test_won_shards_whose_catch_up_failed_are_not_acted_on_until_one_succeeds(
    kube_client: kc.KubeClient, clock: VirtualClock
) -> None:
    # Acting on what the watch delivered so far would solve the dead replica's pods again.
    failures = [True]

    def catch_up() -> None:
        if failures.pop(0):
            raise ClusterError("list NodeClaims: timed out")

    leases = ShardLeases(kube_client, identity="replica-a", clock=clock, shards=SHARDS, prefix="t-catch-up-2")
    leases.on_acquire = catch_up
    leases.step()
    assert leases.owned_shards() == set(), "won, but not acted on"
    assert not any(leases.owns_pool(f"p{i}") for i in range(8))
    failures.append(False)
    leases.step()
    assert leases.owned_shards() == set(range(SHARDS)), "caught up at the next step"
    leases.step()
    assert failures == [] and leases.owned_shards() == set(range(SHARDS)), "renewing is not winning"
    leases.release()
