"""NodePools sharded across replicas: which shard a pool is in, which replica holds which shard, which
replica takes a pending pod, and the snapshot a replica sees of its shards. Pure: the Leases that say who
holds what are `provisioner.kube.shards`'s, the writes the controllers'.

- A pool's shard is its highest-scoring shard index (rendezvous hashing over a stable hash of the names):
  the same on every replica, and going from S to S+1 shards moves only the pools the new shard wins.
- Shards go to the live replicas by rendezvous hashing bounded to ceil(S/R) shards each, so the replicas
  share them evenly; a live replica keeps the shards it holds up to that bound, so one leaving moves only
  its own shards and one joining moves only the shards above the new bound.
- A pod's pools are tried in its order across shards (the second-level step): the replica that holds
  the first pool not yet tried takes it, with the run of consecutive pools it holds from there. When
  none of that run can take it, the replica passes it on by naming the run in the pod's
  `provisioner.sh/nodepools-tried` annotation; the holder of the next pool then takes it, and keeps it
  while it is pending (its claim in flight is one only that replica sees). Once every pool was tried and
  none could take it, the tried pools are forgotten after `TRIED_TTL`: the pod starts again from the
  first pool, which may have gained capacity.
- A pod carries the label `provisioner.sh/shard` (`SHARD`): the shard of the pool it is to be tried on
  next (`next_pool`), or, bound, of its node's pool (`wanted_shard`), so each replica can watch only its
  shards' pods with a label selector (`selector`). The quota admission holder also watches the pods
  whose label names no shard (`unassigned_selector`: it labels them) and every pod of the namespaces
  quota counts in (`quota_namespaces`), and every pod behind the admission gate wherever it is (the
  `GATED` label), so a holder newly elected still sees a waiting pod whose namespace left its team. A
  replica watches the Nodes and NodeClaims of its shards'
  pools by their pool label (`pool_selector`) and the Nodes of no pool (`NO_POOL_SELECTOR`).
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from provisioner.api import labels as wk
from provisioner.api.team import Team, namespace_teams
from provisioner.scheduling import pool_order
from provisioner.state.objects import Pod
from provisioner.state.snapshot import Snapshot, StateNode

TRIED = f"{wk.GROUP}/nodepools-tried"
"""Pod annotation: the pools of its list already tried by the replicas that hold them (comma-separated)."""
TRIED_AT = f"{wk.GROUP}/nodepools-tried-at"
"""Pod annotation: when `TRIED` was last written (RFC 3339)."""
SHARD = f"{wk.GROUP}/shard"
"""Pod label: the shard (its index) whose holder acts on the pod next: of the pool a pending pod is tried
on next, or of the pool of the node a bound pod runs on. Replicas watch their shards' pods by it."""
GATED = f"{wk.GROUP}/admission-gated"
"""Pod label (value "true") on a pod behind the admission gate, while replicas share the pools: the webhook
puts it with the gate, the quota admission holder on a waiting pod that lacks it (gated by hand, or while
the webhook was down), and takes it off when it lifts the gate. The admission holder watches the pods it
selects wherever they are (the label's key is the selector): a holder elected after a waiting pod's namespace left its
team watches no longer that namespace, yet must lift the gate (a pod of no team waits for no quota)."""
TRIED_TTL = timedelta(minutes=3)
"""How long a pod that every pool of its list refused waits before it starts again from the first (the
unavailable-offerings cache holds a stockout as long)."""


def _score(key: str, candidate: str) -> int:
    # A stable hash (Python's own is salted per process): every replica must score alike.
    digest = hashlib.blake2b(f"{key}\0{candidate}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@functools.lru_cache(maxsize=4096)
def shard_of(pool: str, shards: int) -> int:
    """The shard a pool is in, 0 <= shard < `shards` (remembered: every pod label and route asks)."""
    if shards < 1:
        raise ValueError(f"shards: {shards} is not allowed; at least 1")
    return max(range(shards), key=lambda i: _score(pool, str(i)))


def assign(shards: int, members: Iterable[str], held: Mapping[int, str] | None = None) -> dict[int, str]:
    """Shard -> the member (replica identity) that should hold it, each member holding at most
    ceil(shards/members). First each member keeps the shards it `held` (their Leases' live holders), its
    best-scoring first, up to that cap; then the other (shard, member) pairs are taken best score first, a
    pair only while its shard is free and its member below the cap. The same on every replica that reads
    the same Leases. Empty with no member."""
    names = sorted(set(members))
    if not names:
        return {}
    cap = math.ceil(shards / len(names))
    load = dict.fromkeys(names, 0)
    out: dict[int, str] = {}

    def take(pairs: Iterable[tuple[int, int, str]]) -> None:
        for _, shard, member in sorted(pairs, reverse=True):
            if shard not in out and load[member] < cap:
                out[shard] = member
                load[member] += 1

    key = "shard-{}".format
    take((_score(key(s), m), s, m) for s, m in (held or {}).items() if m in load and 0 <= s < shards)
    take((_score(key(s), m), s, m) for s in range(shards) if s not in out for m in names)
    return out


def selector(held: Collection[int]) -> str:
    """The label selector of the pods of the shards `held` (none held: one no pod matches)."""
    if not held:
        return f"{SHARD} in (none)"
    return f"{SHARD} in ({','.join(str(s) for s in sorted(held))})"


def unassigned_selector(shards: int) -> str:
    """The label selector of the pods whose `SHARD` label names no shard of `shards` (or that have none):
    the ones the quota admission holder labels."""
    return f"{SHARD} notin ({','.join(str(s) for s in range(shards))})"


def pool_selector(pools: Collection[str]) -> str:
    """The label selector of the Nodes and NodeClaims of `pools` (by their `provisioner.sh/nodepool`
    label; none: one nothing matches)."""
    if not pools:
        return f"{wk.NODEPOOL} in (x),{wk.NODEPOOL} notin (x)"
    return f"{wk.NODEPOOL} in ({','.join(sorted(pools))})"


NO_POOL_SELECTOR = f"!{wk.NODEPOOL}"
"""The label selector of the Nodes of no pool (capacity no replica owns: every replica places pods on it)."""


def held_pools(pools: Iterable[str], held: Collection[int], shards: int) -> frozenset[str]:
    """Of the pool names `pools`, those in the shards `held`."""
    return frozenset(p for p in pools if shard_of(p, shards) in held)


def quota_namespaces(teams: Collection[Team], namespaces: Mapping[str, Mapping[str, str]]) -> frozenset[str]:
    """The namespaces whose pods quota counts: each existing one (of `namespaces`: name -> labels) that
    belongs to a Team (`namespace_teams`; a team's quota counts its pods in every pool, so the
    admission holder watches these whole)."""
    names = {t.name for t in teams}
    if not names:
        return frozenset()
    return frozenset(
        ns for ns, team in namespace_teams(teams, namespaces).items() if team in names and ns in namespaces
    )


def next_pool(pod: Pod, lists: PoolLists, existing: Collection[str], now: datetime) -> str | None:
    """The pool a pending pod is tried on next (its holder takes it, `route`): the first existing pool of
    its list not yet tried; when every one was, the first (where it starts again once the tried pools
    expire); a list naming no existing pool, its first name. None: no pool at all."""
    order = lists.order(pod)
    pools = [p for p in order if p in existing]
    if not pools:
        return order[0] if order else None
    tried = still_tried(pod, pools, now)
    return next((p for p in pools if p not in tried), pools[0])


def wanted_shard(
    pod: Pod, lists: PoolLists, existing: Collection[str], shards: int, now: datetime, node_pool: str | None
) -> str | None:
    """The `SHARD` label value the pod should carry: bound, its node's pool's shard (`node_pool`: None for
    a node of no pool, or not known: keep what it has); pending, its next pool's (`next_pool`)."""
    pool = node_pool if pod.node_name else next_pool(pod, lists, existing, now)
    return None if pool is None else str(shard_of(pool, shards))


def tried_pools(pod: Pod) -> tuple[frozenset[str], datetime | None]:
    """The pools a pod was passed on from, and when that was last written (None: unreadable)."""
    names = frozenset(n.strip() for n in pod.annotations.get(TRIED, "").split(",") if n.strip())
    try:
        at = datetime.fromisoformat(pod.annotations.get(TRIED_AT, "").replace("Z", "+00:00"))
    except ValueError:
        return names, None
    return names, at if at.tzinfo is not None else None


def still_tried(pod: Pod, pools: Collection[str], now: datetime) -> frozenset[str]:
    """The pod's tried pools, forgotten when they are all of `pools` (its existing pools: no replica
    takes it) and were written `TRIED_TTL` ago or more (or when)."""
    tried, at = tried_pools(pod)
    if tried and all(p in tried for p in pools) and (at is None or now - at >= TRIED_TTL):
        return frozenset()
    return tried


@dataclass(frozen=True, slots=True)
class PoolLists:
    """What a pod's pool order depends on besides the pod, worked out once per snapshot."""

    teams: Mapping[str, tuple[str, ...]]
    defaults: pool_order.ClusterDefaults
    default_names: frozenset[str]
    by_weight: tuple[str, ...]

    @classmethod
    def of(cls, snap: Snapshot, defaults: pool_order.ClusterDefaults) -> PoolLists:
        return cls(
            teams=pool_order.team_lists(snap),
            defaults=defaults,
            default_names=pool_order.default_pool_names(snap.nodepools),
            by_weight=tuple(p.name for p in pool_order.by_weight(snap.nodepools)),
        )

    def order(self, pod: Pod) -> tuple[str, ...]:
        """A pod's pools in the order tried, as the solver resolves it (`pool_order.resolve`); a pod
        pinned to one pool by its node selector (quota admission pins admitted pods) has that pool."""
        pinned = pod.node_selector.get(wk.NODEPOOL)
        if pinned:
            return (pinned,)
        order = pool_order.resolve(
            pod, team_default=self.teams, defaults=self.defaults, pool_names=self.default_names
        )
        return order.pools if order.pools is not None else self.by_weight


def route(
    order: Sequence[str],
    *,
    existing: Collection[str],
    owns: Callable[[str], bool],
    tried: Collection[str] = frozenset(),
) -> tuple[str, ...] | None:
    """The pools of `order` this replica solves the pod with, or None when another replica takes it:
    from the first existing pool not yet tried, the consecutive pools (of those) this replica holds.
    A pod whose list names no existing pool goes to the holder of its first name (to be told so).
    Every existing pool tried: nobody, until the tried pools expire."""
    pools = [p for p in order if p in existing]
    if not pools:
        return tuple(order) if order and owns(order[0]) else None
    left = [p for p in pools if p not in tried]
    if not left or not owns(left[0]):
        return None
    run: list[str] = []
    for name in left:
        if not owns(name):
            break
        run.append(name)
    return tuple(run)


@dataclass(frozen=True, slots=True)
class Scoped:
    """A replica's view of the cluster: `snapshot` holds only its pools, their nodes and claims (nodes
    of no pool too: capacity nobody owns), and the pending pods it takes."""

    snapshot: Snapshot
    runs: Mapping[str, tuple[str, ...]]
    """Pod key -> the pools it is solved with here, for the pods whose list goes on beyond them (a
    failure passes them on)."""
    retry_at: datetime | None = None
    """When the first pod that every pool refused starts again from its first pool (nothing is written
    then: whoever holds that pool must look again by the clock)."""


def scope(
    snap: Snapshot,
    *,
    owns: Callable[[str], bool],
    defaults: pool_order.ClusterDefaults,
    now: datetime,
    cache: RouteCache | None = None,
) -> Scoped:
    """The part of `snap` a replica holding the pools `owns` accepts acts on. A pod whose list goes on
    beyond this replica's run is given that run as its list (so the solver cannot skip a pool another
    replica holds), and named in `runs`. With `cache` (`RouteCache`), only the pods that changed since
    the last call are routed."""
    pending, runs, retry_at = take(
        snap.pending_pods, snap, owns=owns, defaults=defaults, now=now, cache=cache
    )
    nodes = cache.owned_nodes(snap.nodes, owns) if cache is not None else _owned_nodes(snap.nodes, owns)
    return Scoped(
        snapshot=replace(
            snap,
            nodes=nodes,
            pending_pods=tuple(pending),
            nodepools=tuple(p for p in snap.nodepools if owns(p.name)),
        ),
        runs=runs,
        retry_at=retry_at,
    )


_Taken = tuple[list[Pod], dict[str, tuple[str, ...]], datetime | None]
_Route = tuple[tuple[str, ...], tuple[str, ...] | None]
"""A pod's pool order, and the run of it this replica solves it with (None: another replica takes it)."""


@dataclass(eq=False, slots=True)
class RouteCache:
    """What `take` decided in its last call, for a replica that routes its pending pods on every pass:
    kept while what a route depends on besides the pod is the same (the shards held, the pools and the
    pool lists: `PoolLists`), so a pass routes only the pods written since the one before, not every
    pending pod.
    A pod seen again as the same object is taken (or not) as before; pods of one template share one
    decision across passes. A pod that was passed on (`TRIED`) is routed at every call: its route
    depends on the clock (`TRIED_TTL`)."""

    held: object = None
    """What `owns` answers from (the shards held): the caller sets it before each call."""
    routed: int = 0
    """How many pods the last call routed (not taken from the cache): in proportion to what changed."""
    _context: tuple[object, ...] = ()
    _pods: dict[str, tuple[Pod, Pod | None, tuple[str, ...] | None]] = field(default_factory=dict)
    """Pod key -> (the pod as given, as taken or None, its run when not its whole list), of the pods
    seen lately (those gone are forgotten once they are as many as the pods)."""
    _memo: dict[tuple[object, ...], _Route] = field(default_factory=dict)
    _last: tuple[Sequence[Pod], _Taken] | None = None
    """The last call's pods and answer, when no pod of them was passed on."""
    _nodes: tuple[tuple[StateNode, ...], tuple[StateNode, ...]] | None = None
    """The last nodes `scope` was given, and those of them of the pools held (or of no pool)."""

    def _begin(self, lists: PoolLists, existing: frozenset[str]) -> None:
        context = (self.held, lists, existing)
        if context != self._context:
            self._context = context
            self._pods.clear()
            self._memo.clear()
            self._last = None
            self._nodes = None

    def owned_nodes(self, nodes: tuple[StateNode, ...], owns: Callable[[str], bool]) -> tuple[StateNode, ...]:
        """`_owned_nodes`, the same answer while the snapshot's nodes are (only Nodes and NodeClaims
        written change them; the pods arriving do not)."""
        last = self._nodes
        if last is None or last[0] is not nodes:
            last = self._nodes = (nodes, _owned_nodes(nodes, owns))
        return last[1]


def take(
    pods: Sequence[Pod],
    snap: Snapshot,
    *,
    owns: Callable[[str], bool],
    defaults: pool_order.ClusterDefaults,
    now: datetime,
    cache: RouteCache | None = None,
) -> _Taken:
    """The pods of `pods` this replica takes (`route`), each with the run of pools it is solved with
    here as its list when that run is not its whole list; pod key -> run for those; and when the
    first pod every pool refused starts again (`Scoped.retry_at`). With `cache`, a pod routed by the
    last call and not changed since is not routed again (`RouteCache`)."""
    existing = frozenset(p.name for p in snap.nodepools)
    lists = PoolLists.of(snap, defaults)
    if cache is not None:
        cache._begin(lists, existing)
        last = cache._last
        if last is not None and last[0] is pods:
            cache.routed = 0
            return last[1]
    taken: list[Pod] = []
    runs: dict[str, tuple[str, ...]] = {}
    # Pods of one template route alike: decided once per distinct input, not once per pod (and, with a
    # cache, once per context: a passed-on pod's decision depends on `now`, so only within this call).
    memo: dict[tuple[object, ...], _Route] = cache._memo if cache is not None else {}
    memo_now: dict[tuple[object, ...], _Route] = {}
    passed_on = False
    seen = cache._pods if cache is not None else {}
    routed = 0
    retry_at: datetime | None = None
    for pod in pods:
        pod_key = pod.key
        entry = seen.get(pod_key)
        if entry is not None and entry[0] is pod:
            if entry[1] is not None:
                taken.append(entry[1])
                if entry[2] is not None:
                    runs[pod_key] = entry[2]
            continue
        routed += 1
        ann = pod.annotations
        pinned = pod.node_selector.get(wk.NODEPOOL)
        passed = ann.get(TRIED)
        key = (
            pod.namespace,
            ann.get(wk.NODEPOOLS),
            pinned,
            # Whether it asks for GPUs matters only to a pod naming no pool (reading its requests was a
            # quarter of a replica's CPU with 10,000 pods pending).
            None if pinned or pod.nodepools else pool_order.asks_for_gpus(pod) > 0,
            passed,
            ann.get(TRIED_AT),
        )
        decided = memo if passed is None else memo_now
        hit = decided.get(key)
        if hit is None:
            order = lists.order(pod)
            pools = [p for p in order if p in existing]
            tried = still_tried(pod, pools, now)
            hit = decided[key] = (order, route(order, existing=existing, owns=owns, tried=tried))
            at = tried_pools(pod)[1]
            if pools and at is not None and tried.issuperset(pools):
                retry_at = min(retry_at or at + TRIED_TTL, at + TRIED_TTL)
        order, run = hit
        out: Pod | None = None
        partial: tuple[str, ...] | None = None
        if run is not None:
            out = pod
            if tuple(order) != run:
                out = replace(pod, annotations={**pod.annotations, wk.NODEPOOLS: ",".join(run)})
                partial = runs[pod_key] = run
            taken.append(out)
        if passed is not None:
            passed_on = True
            seen.pop(pod_key, None)
        elif cache is not None:
            seen[pod_key] = (pod, out, partial)
    answer = (taken, runs, retry_at)
    if cache is not None:
        if len(seen) > 2 * len(pods) + 64:  # pods gone since: forget them (the rest are kept as is)
            cache._pods = {p.key: seen[p.key] for p in pods if p.key in seen}
        cache.routed = routed
        cache._last = None if passed_on else (pods, answer)
    return answer


def _owned_nodes(nodes: Iterable[StateNode], owns: Callable[[str], bool]) -> tuple[StateNode, ...]:
    """The nodes of the pools `owns` accepts, and those of no pool."""
    return tuple(n for n in nodes if (pool := n.nodepool) is None or owns(pool))


def passed_on(run: Sequence[str], pod: Pod, now: datetime) -> dict[str, str]:
    """The annotations that pass a pod on after the pools of `run` could not take it."""
    before = tried_pools(pod)[0]
    tried = [*sorted(before), *(p for p in run if p not in before)]
    stamp = now.isoformat().replace("+00:00", "Z")
    return {TRIED: ",".join(tried), TRIED_AT: stamp}
