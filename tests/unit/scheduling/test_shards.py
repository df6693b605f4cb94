"""The shard model (provisioner.scheduling.shards): pools to shards and shards to replicas are stable,
balanced and move little when shards or replicas change; a pod spanning shards is taken by one replica
at a time, in its list's order; a replica's snapshot holds only its pools."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provisioner.api import labels as wk
from provisioner.scheduling import shards
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import Snapshot
from provisioner.state.objects import Pod
from provisioner.state.snapshot import StateNode
from testkit.builders.nodes import node_claim
from testkit.builders.pods import gpu_pod, pod
from testkit.builders.pools import node_pool

NOW = datetime(2026, 1, 1, tzinfo=UTC)
pool_names = st.lists(st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20), unique=True)
members = st.lists(st.text("abcdef0123456789", min_size=4, max_size=12), min_size=1, max_size=8, unique=True)


@given(pool_names, st.integers(1, 32))
def test_a_pool_is_in_the_same_shard_whoever_asks(pools: list[str], n: int) -> None:
    assert [shards.shard_of(p, n) for p in pools] == [shards.shard_of(p, n) for p in reversed(pools)][::-1]
    assert all(0 <= shards.shard_of(p, n) < n for p in pools)


@given(pool_names, st.integers(1, 16))
def test_one_more_shard_moves_only_the_pools_the_new_shard_takes(pools: list[str], n: int) -> None:
    for p in pools:
        before, after = shards.shard_of(p, n), shards.shard_of(p, n + 1)
        assert after in (before, n), f"{p} moved from {before} to {after}, not to the new shard"


def test_pools_spread_evenly_over_shards() -> None:
    counts = Counter(shards.shard_of(f"pool-{i}", 8) for i in range(4000))
    assert set(counts) == set(range(8))
    assert max(counts.values()) < 1.15 * 500 and min(counts.values()) > 0.85 * 500


@given(st.integers(1, 64), members)
def test_every_shard_has_one_replica_and_replicas_share_them_evenly(n: int, names: list[str]) -> None:
    owners = shards.assign(n, names)
    assert set(owners) == set(range(n))
    load = Counter(owners.values())
    assert max(load.values()) <= math.ceil(n / len(names))
    assert shards.assign(n, list(reversed(names))) == owners, "the same on every replica"


@given(
    st.integers(1, 64),
    members,
    st.dictionaries(st.integers(-2, 70), st.text("abcdef0123456789xyz", min_size=4)),
)
def test_whatever_the_leases_say_every_shard_has_one_replica_within_its_share(
    n: int, names: list[str], held: dict[int, str]
) -> None:
    owners = shards.assign(n, names, held)
    assert set(owners) == set(range(n)) and set(owners.values()) <= set(names)
    assert max(Counter(owners.values()).values()) <= math.ceil(n / len(names))
    assert shards.assign(n, list(reversed(names)), held) == owners, "the same on every replica"


@settings(max_examples=200)
@given(st.integers(1, 64), members.filter(lambda m: len(m) >= 2), st.data())
def test_a_replica_leaving_moves_only_its_own_shards(n: int, names: list[str], data: st.DataObject) -> None:
    gone = data.draw(st.sampled_from(names))
    before = shards.assign(n, names)
    after = shards.assign(n, [m for m in names if m != gone], held=before)
    assert {s for s in before if before[s] != after[s]} == {s for s, m in before.items() if m == gone}


@settings(max_examples=200)
@given(st.integers(1, 64), members, st.text("ghijkl", min_size=4, max_size=8))
def test_a_replica_joining_moves_only_the_shards_above_the_new_share(
    n: int, names: list[str], new: str
) -> None:
    before = shards.assign(n, names)
    after = shards.assign(n, [*names, new], held=before)
    moved = {s for s in before if before[s] != after[s]}
    share = math.ceil(n / (len(names) + 1))
    load = Counter(before.values())
    assert len(moved) == sum(max(0, k - share) for k in load.values())
    assert all(load[before[s]] > share for s in moved), "only a replica above its new share gives shards up"


def _owns(*names: str) -> Callable[[str], bool]:
    return lambda p: p in names


@pytest.mark.parametrize(
    ("order", "owned", "tried", "want"),
    [
        (("a", "b", "c"), ("a", "b", "c"), (), ("a", "b", "c")),
        (("a", "b", "c"), ("a", "c"), (), ("a",)),
        (("a", "b", "c"), ("b",), (), None),
        (("a", "b", "c"), ("b",), ("a",), ("b",)),
        (("a", "b", "c"), ("a", "c"), ("a", "b"), ("c",)),
        (("a", "b", "c"), ("a", "b", "c"), ("a", "b", "c"), None),
        (("a", "zzz", "b"), ("a", "b"), (), ("a", "b")),
        (("zzz",), ("zzz",), (), ("zzz",)),
    ],
    ids=[
        "all-held",
        "run-stops-at-another-replicas-pool",
        "first-pool-elsewhere",
        "passed-on",
        "second-pass-on",
        "every-pool-tried",
        "unknown-names-skipped",
        "unknown-only-goes-to-its-first-names-holder",
    ],
)
def test_a_pod_is_taken_by_the_holder_of_its_first_untried_pool(
    order: tuple[str, ...], owned: tuple[str, ...], tried: tuple[str, ...], want: tuple[str, ...] | None
) -> None:
    assert shards.route(order, existing={"a", "b", "c"}, owns=_owns(*owned), tried=set(tried)) == want


@given(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True), st.integers(1, 4), st.data())
def test_exactly_one_replica_takes_a_pod_at_each_step_in_list_order(
    order: list[str], n: int, data: st.DataObject
) -> None:
    replicas = [{p for p in "abcdef" if shards.shard_of(p, n) == i} for i in range(n)]
    tried: set[str] = set()
    visited: list[str] = []
    while True:
        takers = [
            r
            for r in replicas
            if shards.route(order, existing=set("abcdef"), owns=r.__contains__, tried=tried)
        ]
        if not takers:
            break
        assert len(takers) == 1, "no two replicas solve the same pod"
        run = shards.route(order, existing=set("abcdef"), owns=takers[0].__contains__, tried=tried)
        assert run
        visited.extend(run)
        tried |= set(run)
    assert visited == list(order), "every pool tried once, in the pod's order"


def test_tried_pools_are_forgotten_only_once_every_pool_refused_the_pod_for_the_ttl() -> None:
    p = pod("p", annotations={shards.TRIED: "a,b", shards.TRIED_AT: NOW.isoformat()})
    later = NOW + shards.TRIED_TTL
    assert shards.still_tried(p, ["a", "b"], NOW + timedelta(seconds=1)) == {"a", "b"}, "nobody takes it yet"
    assert shards.still_tried(p, ["a", "b"], later) == frozenset(), "then it starts again from a"
    assert shards.still_tried(p, ["a", "b", "c"], later) == {"a", "b"}, "c's holder keeps it while pending"
    unreadable = pod("q", annotations={shards.TRIED: "a", shards.TRIED_AT: "never"})
    assert shards.still_tried(unreadable, ["a"], NOW) == frozenset()


def test_passing_on_adds_the_run_to_the_pools_tried() -> None:
    p = pod("p", annotations={shards.TRIED: "a", shards.TRIED_AT: NOW.isoformat()})
    ann = shards.passed_on(("b", "c"), p, NOW + timedelta(seconds=5))
    assert ann[shards.TRIED] == "a,b,c"
    assert shards.tried_pools(pod("p", annotations=ann))[0] == {"a", "b", "c"}


def test_a_replicas_snapshot_holds_its_pools_their_claims_and_the_pods_it_takes() -> None:
    pools = (node_pool("a"), node_pool("b"))
    mine = StateNode(name="c1", claim=node_claim("c1", nodepool="a"))
    theirs = StateNode(name="c2", claim=node_claim("c2", nodepool="b"))
    spans = pod("spans", pools=("a", "b"))
    only_b = pod("only-b", pools=("b",))
    snap = Snapshot(nodes=(mine, theirs), pending_pods=(spans, only_b), nodepools=pools)
    scoped = shards.scope(snap, owns=_owns("a"), defaults=ClusterDefaults(), now=NOW)
    assert [p.name for p in scoped.snapshot.nodepools] == ["a"]
    assert [n.name for n in scoped.snapshot.nodes] == ["c1"]
    (taken,) = scoped.snapshot.pending_pods
    assert taken.name == "spans" and taken.nodepools == ("a",), "solved with its run here, not b"
    assert scoped.runs == {"default/spans": ("a",)}
    whole = shards.scope(snap, owns=_owns("a", "b"), defaults=ClusterDefaults(), now=NOW)
    assert whole.snapshot.pending_pods == snap.pending_pods and not whole.runs
    assert whole.snapshot.pending_pods[0] is spans, "a pod wholly held here is left as it is"


def test_a_pod_pinned_to_a_pool_goes_to_that_pools_holder() -> None:
    pinned = pod("pinned", pools=("a", "b"), node_selector={wk.NODEPOOL: "b"})
    snap = Snapshot(pending_pods=(pinned,), nodepools=(node_pool("a"), node_pool("b")))
    assert not shards.scope(snap, owns=_owns("a"), defaults=ClusterDefaults(), now=NOW).snapshot.pending_pods
    assert shards.scope(snap, owns=_owns("b"), defaults=ClusterDefaults(), now=NOW).snapshot.pending_pods


def test_a_pod_every_pool_refused_is_due_again_after_the_ttl_for_whoever_holds_its_first_pool() -> None:
    refused = pod("p", pools=("a", "b"), annotations={shards.TRIED: "a,b", shards.TRIED_AT: NOW.isoformat()})
    snap = Snapshot(pending_pods=(refused,), nodepools=(node_pool("a"), node_pool("b")))
    now = NOW + timedelta(seconds=10)
    scoped = shards.scope(snap, owns=_owns("a"), defaults=ClusterDefaults(), now=now)
    assert not scoped.snapshot.pending_pods and scoped.retry_at == NOW + shards.TRIED_TTL
    due = shards.scope(snap, owns=_owns("a"), defaults=ClusterDefaults(), now=NOW + shards.TRIED_TTL)
    assert [p.name for p in due.snapshot.pending_pods] == ["p"] and due.retry_at is None


def test_pods_naming_no_pool_go_to_the_holder_of_their_gpu_or_cpu_default_and_a_list_decides_alone() -> None:
    defaults = ClusterDefaults.of(cpu="cpu-pool", gpu="gpu-pool")
    snap = Snapshot(
        pending_pods=(
            pod("plain"),
            gpu_pod("trainer"),
            pod("listed", pools=("cpu-pool",)),
            gpu_pod("listed-gpu", pools=("cpu-pool",)),
        ),
        nodepools=(node_pool("cpu-pool"), node_pool("gpu-pool")),
    )
    cpu = shards.scope(snap, owns=_owns("cpu-pool"), defaults=defaults, now=NOW).snapshot.pending_pods
    gpu = shards.scope(snap, owns=_owns("gpu-pool"), defaults=defaults, now=NOW).snapshot.pending_pods
    assert [p.name for p in cpu] == ["plain", "listed", "listed-gpu"]
    assert [p.name for p in gpu] == ["trainer"]


def _pods(n: int, pools: tuple[str, ...] = ("a", "b")) -> tuple[Pod, ...]:
    return tuple(pod(f"p-{i:04d}", pools=(pools[i % len(pools)],)) for i in range(n))


def test_a_pass_routes_only_the_pods_written_since_the_last_one() -> None:
    cache = shards.RouteCache(held=frozenset({0}))
    pools = (node_pool("a"), node_pool("b"))
    pending = _pods(1000)

    def take(snap: Snapshot) -> list[str]:
        taken, _, _ = shards.take(
            snap.pending_pods, snap, owns=_owns("a"), defaults=ClusterDefaults(), now=NOW, cache=cache
        )
        return [p.name for p in taken]

    first = take(Snapshot(pending_pods=pending, nodepools=pools))
    assert cache.routed == 1000 and len(first) == 500
    assert take(Snapshot(pending_pods=pending, nodepools=pools)) == first and cache.routed == 0
    moved = pod("p-0001", pools=("a",))  # was b's
    changed = (*pending[:1], moved, *pending[2:], pod("p-1000", pools=("b",)))
    assert take(Snapshot(pending_pods=changed, nodepools=pools)) == sorted([*first, "p-0001"])
    assert cache.routed == 2, "the pod rewritten and the new one; not the 999 others"
    cache.held = frozenset({0, 1})
    take(Snapshot(pending_pods=changed, nodepools=pools))
    assert cache.routed == 1001, "held shards changed: every pod again"
    take(Snapshot(pending_pods=changed, nodepools=(*pools, node_pool("c"))))
    assert cache.routed == 1001, "the pools changed: every pod again"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["write", "pass-on", "delete", "node", "pools", "held", "time"]),
            st.integers(0, 7),
            st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True),
        ),
        max_size=25,
    )
)
def test_a_view_made_with_the_cache_is_the_view_made_afresh(steps: list[tuple[str, int, list[str]]]) -> None:
    cache = shards.RouteCache()
    pending = {f"p{i}": pod(f"p{i}", pools=("a", "b")) for i in range(8)}
    nodes: tuple[StateNode, ...] = ()  # the same tuple until a node is written, as a snapshot's
    existing = ["a", "b", "c"]
    held = {"a", "c"}
    now = NOW
    for what, i, names in steps:
        name = f"p{i}"
        if what == "write":
            pending[name] = pod(name, pools=tuple(names))
        elif what == "pass-on":
            at = (now - timedelta(minutes=i)).isoformat()
            tried = {shards.TRIED: ",".join(names), shards.TRIED_AT: at}
            pending[name] = pod(name, pools=tuple(names), annotations=tried)
        elif what == "delete":
            pending.pop(name, None)
        elif what == "node":
            claim = node_claim(f"n{i}", nodepool=names[0])
            nodes = (*(n for n in nodes if n.name != f"n{i}"), StateNode(name=f"n{i}", claim=claim))
        elif what == "pools":
            existing = sorted(set(names) | {"a"})
        elif what == "held":
            held = set(names)
        else:
            now += timedelta(minutes=i)
        snap = Snapshot(
            nodes=nodes,
            pending_pods=tuple(pending[k] for k in sorted(pending)),
            nodepools=tuple(node_pool(p) for p in existing),
        )
        cache.held = frozenset(held)
        fresh = shards.scope(snap, owns=held.__contains__, defaults=ClusterDefaults(), now=now)
        for _ in range(2):
            cached = shards.scope(
                snap, owns=held.__contains__, defaults=ClusterDefaults(), now=now, cache=cache
            )
            assert cached == fresh
