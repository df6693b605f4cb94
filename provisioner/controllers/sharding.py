"""One sharded replica's part of the controllers: the ClusterState its pool controllers read (its pools,
their nodes and claims, the pending pods it takes: `provisioner.scheduling.shards.scope`), and the pass
on of a pod none of its pools could take (the `provisioner.sh/nodepools-tried` annotation).

Which shards this replica holds, and whether it holds quota admission, come from outside (the Leases:
`provisioner.kube.shards.ShardLeases`) as callables, read at every snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from provisioner.api import NodeClaim
from provisioner.clock import Clock
from provisioner.clusterapi import ClusterAPI, ClusterError, NotLeader
from provisioner.scheduling import Unschedulable
from provisioner.scheduling import shards as model
from provisioner.scheduling.pool_order import ClusterDefaults
from provisioner.state import ClusterState, Snapshot
from provisioner.state.cluster import Changes
from provisioner.state.objects import Pod

log = logging.getLogger(__name__)

GLOBAL_CONTROLLERS = frozenset({"interruption", "admission", "provisioningrequests", "gc"})
"""Controllers whose decisions span pools: run only by the replica holding quota admission, on the
whole cluster (the garbage collector then sees every claim, so it never takes another shard's instance
for an orphan)."""


@dataclass(kw_only=True, eq=False)
class Sharding:
    """What a replica holds (`owned_shards`, `holds_admission`) and the views built from it."""

    shards: int
    owned_shards: Callable[[], frozenset[int]]
    holds_admission: Callable[[], bool]
    clock: Clock
    defaults: ClusterDefaults = field(default_factory=ClusterDefaults)
    _pool_shards: dict[str, int] = field(default_factory=dict, init=False)
    _last: tuple[Snapshot, frozenset[int], int, model.Scoped] | None = field(default=None, init=False)

    def holds_any(self) -> bool:
        return self.holds_admission() or bool(self.owned_shards())

    def _owns(self, held: frozenset[int]) -> Callable[[str], bool]:
        def owns(pool: str) -> bool:
            shard = self._pool_shards.get(pool)
            if shard is None:
                shard = self._pool_shards[pool] = model.shard_of(pool, self.shards)
            return shard in held

        return owns

    def scoped(self, snap: Snapshot, held: frozenset[int]) -> model.Scoped:
        """`snap` as a replica holding the shards `held` sees it now; the same object while nothing it
        depends on changed. `held` must be read before `snap` was taken (`ShardedState.snapshot`)."""
        now = self.clock.now()
        # Tried pools expire with time: look again every few seconds even when nothing was written.
        tick = int(now.timestamp() // 5)
        last = self._last
        if last is not None and last[0] is snap and last[1] == held and last[2] == tick:
            return last[3]
        scoped = model.scope(snap, owns=self._owns(held), defaults=self.defaults, now=now)
        self._last = (snap, held, tick, scoped)
        return scoped

    @property
    def retry_at(self) -> datetime | None:
        """`Scoped.retry_at` of the last view made."""
        return self._last[3].retry_at if self._last is not None else None

    def take(self, pods: Sequence[Pod], state: ClusterState) -> list[Pod]:
        """Of pods that are not in the cluster (a ProvisioningRequest's), the ones this replica takes."""
        held = self.owned_shards()  # before the snapshot: see ShardedState.snapshot
        taken, _, _ = model.take(
            pods, state.snapshot(), owns=self._owns(held), defaults=self.defaults, now=self.clock.now()
        )
        return taken

    def state(self, state: ClusterState) -> ClusterState:
        """`state` as this replica's pool controllers read it."""
        return ShardedState(state, self)  # type: ignore[return-value]

    def cluster(self, cluster: ClusterAPI) -> ClusterAPI:
        """`cluster` as this replica's pool controllers write through it."""
        return ShardedCluster(cluster, self)

    def owns_now(self, pool: str) -> bool:
        """Whether this replica holds the pool's shard at this moment."""
        return self._owns(self.owned_shards())(pool)

    def pass_on(self, cluster: ClusterAPI, unschedulable: Sequence[Unschedulable], now: datetime) -> None:
        """Name the pools tried on each pod they could not take whose list goes on in other shards, so
        the holder of the next pool takes it."""
        last = self._last
        runs = last[3].runs if last is not None else {}
        for u in unschedulable:
            run = runs.get(u.pod.key)
            if run is None:
                continue
            annotations = model.passed_on(run, u.pod, now)
            try:
                cluster.patch_pod(u.pod.namespace, u.pod.name, {"metadata": {"annotations": annotations}})
            except ClusterError as err:
                log.warning("could not pass pod %s on from pools %s: %s", u.pod.key, ",".join(run), err)
                continue
            log.info("pod %s passed on: pools %s cannot take it", u.pod.key, ",".join(run))


class ShardedState:
    """A ClusterState whose `snapshot()` is one replica's part of it, and whose change feeds also report
    what changes that part without a write (`ScopedChanges`); everything else is the state's."""

    def __init__(self, state: ClusterState, sharding: Sharding) -> None:
        self._state = state
        self._sharding = sharding

    def snapshot(self) -> Snapshot:
        # The held shards first, then the state. A shard counts as held only once the claims its last
        # holder wrote are in the state (`ShardLeases.on_acquire` catches up before it is acted on), so
        # a state read after the shards holds them. Read the other way round, a shard won between the
        # two reads would show its pending pods without its in-flight claims, and they would be solved
        # again: a second claim per pod beside the dead replica's.
        held = self._sharding.owned_shards()
        return self._sharding.scoped(self._state.snapshot(), held).snapshot

    def changes(self, kind: str) -> ScopedChanges:
        return ScopedChanges(self._state.changes(kind), self._sharding)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)


class ScopedChanges:
    """A change feed (`ClusterState.changes`) that also reports `EVERYTHING` when this replica's part of
    the cluster changed with nothing written: it took or gave up a shard, or a pod every pool refused is
    due to start again. Controllers that sleep while nothing is written then look again."""

    EVERYTHING = "*"

    def __init__(self, feed: Changes, sharding: Sharding) -> None:
        self._feed = feed
        self._sharding = sharding
        self._held = sharding.owned_shards()

    def take(self) -> set[str]:
        keys = self._feed.take()
        held = self._sharding.owned_shards()
        retry_at = self._sharding.retry_at
        if held != self._held or (retry_at is not None and self._sharding.clock.now() >= retry_at):
            self._held = held
            keys = keys | {self.EVERYTHING}
        return keys


class ShardedCluster:
    """A ClusterAPI that writes a NodeClaim only while this replica holds its pool's shard, checked at
    the write: a pass that began before the shard was lost (its Lease not renewed in time, under load)
    writes no claim the shard's new holder may be solving too. Everything else is the cluster's."""

    def __init__(self, cluster: ClusterAPI, sharding: Sharding) -> None:
        self._cluster = cluster
        self._sharding = sharding

    def create_nodeclaim(self, claim: NodeClaim) -> NodeClaim:
        pool = claim.nodepool
        if pool is not None and not self._sharding.owns_now(pool):
            raise NotLeader(f"NodeClaim {claim.name}: this replica no longer holds pool {pool}'s shard")
        return self._cluster.create_nodeclaim(claim)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)
