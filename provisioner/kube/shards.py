"""Sharded replicas on coordination.k8s.io/v1 Leases: which shards, and whether quota admission, this
replica holds right now.

Every replica renews a membership Lease (`<prefix>-member-<identity>`, labelled `MEMBER_LABEL`), lists
the live ones, and works out the same assignment of the S shard Leases (`<prefix>-shard-<i>`) over the
members (`provisioner.scheduling.shards.assign`), each keeping the shards it holds up to its share. It acquires and renews the shards assigned to it and
stops acting on the others and lets their Leases expire, so a shard changes hands once the Lease of
its old holder expired, after any pass of that holder still under way. Quota
admission, the garbage collector's sweep and the other decisions that span pools are one replica's:
whoever holds `<prefix>-admission` (any replica may win it). It keeps its full share of the shards: it
watches only what those decisions need besides its shards (`provisioner.kube.scopes`), which costs
little, so keeping it out of the assignment only loads the others. Measured (bench/shards.py, 10,000
pods, 40 pools, 8 shards, 4 replicas, median of 3): kept out, it spent 0.5 CPU s and the replica left
with 3 of the 8 shards 4.1 CPU s, the busiest of all; in it, every replica holds 2 and the holder spends about what
the others do (README, "When to add replicas").

With `watch` (`provisioner.kube.scopes.WatchScopes`), each step also scopes this replica's watches of
pods, Nodes and NodeClaims to the shards assigned to it and those it still holds, and while it holds
admission to what the decisions that span pools need besides; a shard won, and admission, are acted on
only once the state holds what they need.

Each Lease is a `LeaderElector`: a replica acts on a shard only while its last renewal is younger than
the renew deadline, shorter than the lease duration, so it stops before anyone else may take the shard.
A replica that dies stops renewing; its member Lease expires, the others assign its shards among
themselves and take each as soon as its Lease expires.

The handover is safe whatever a request's latency. The old holder's writes for a shard each carry the
shard Lease's renew deadline (`acting_until`) as the request's `timeout`, so the API server stores or
abandons every one of them before the Lease can expire. The new holder takes a shard only once its Lease
expired, then lists the NodeClaims at the API server (`on_acquire`) before acting on it: the list
holds every claim the old holder will ever have written.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from provisioner.clock import Clock, parse_time
from provisioner.clusterapi.port import ClusterError
from provisioner.kube import client as kc
from provisioner.kube.leader import LeaderElector
from provisioner.scheduling import shards as model

log = logging.getLogger(__name__)

MEMBER_LABEL = "provisioner.sh/shard-member"
"""On a replica's membership Lease: the prefix of the Leases it shares shards with."""


def lease_name(text: str) -> str:
    """A Lease name (RFC 1123 subdomain) made from free text such as a host name."""
    name = re.sub(r"[^a-z0-9.-]+", "-", text.lower()).strip("-.")
    return name[:253] or "x"


class ShardLeases:
    """This replica's shard Leases, membership Lease and (when won) the admission Lease."""

    def __init__(
        self,
        client: kc.KubeClient,
        *,
        identity: str,
        clock: Clock,
        shards: int,
        namespace: str = "default",
        prefix: str = "provisioner",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_acquire: Callable[[], None] | None = None,
        watch: Callable[[frozenset[int], bool], bool] | None = None,
    ) -> None:
        if shards < 1:
            raise ValueError(f"shards: {shards} is not allowed; at least 1")
        self.client = client
        self.identity = identity
        self.clock = clock
        self.shards = shards
        self.namespace = namespace
        self.prefix = prefix
        self.retry_period = retry_period

        def elector(name: str, labels: dict[str, str] | None = None) -> LeaderElector:
            return LeaderElector(
                client,
                identity=identity,
                clock=clock,
                name=name,
                namespace=namespace,
                lease_duration=lease_duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                labels=labels,
            )

        self.member = elector(f"{prefix}-member-{lease_name(identity)}", labels={MEMBER_LABEL: prefix})
        self.admission = elector(f"{prefix}-admission")
        self.shard_leases = [elector(f"{prefix}-shard-{i}") for i in range(shards)]
        self._shard_lease = {lease.name: i for i, lease in enumerate(self.shard_leases)}
        self.on_acquire = on_acquire
        """Called when this replica wins shards, before it acts on them: brings its picture of the
        cluster up to what their last holder wrote (a consistent list of the NodeClaims), which its
        watches may not have delivered yet."""
        self.watch = watch
        """Called at every step with the shards whose pods, Nodes and NodeClaims this replica must watch,
        and whether it holds the admission Lease (then it also watches what admission and the garbage
        collector need); True once its state holds them (a list with each new selector fed it). Shards won are not acted on, nor admission,
        before that."""
        self._admission_ready = watch is None
        """Whether the state holds the pods quota admission needs."""
        self._warming: frozenset[int] = frozenset()
        self._behind: frozenset[int] = frozenset()
        """Shards held whose catch-up failed: not acted on until one succeeds."""
        self.members: tuple[str, ...] = ()
        """The live replicas as last listed."""
        self.holders: dict[int, str] = {}
        """Each shard's live holder as last listed: a live replica keeps its shards (`model.assign`)."""
        self._pool_shards: dict[str, int] = {}

    def step(self) -> None:
        """Renew membership, work out this replica's shards, acquire or renew them (acting on one it won
        only after `on_acquire`), stop acting on the others."""
        self.member.step()
        try:
            self.members, self.holders = self._live_leases()
        except ClusterError as err:
            # Keep the last assignment: the shard Leases' own deadlines bound how long it is acted on.
            log.warning("sharding: cannot list the replicas' Leases: %s", err)
        assigned = model.assign(self.shards, self.members, self.holders)
        mine = {s for s, m in assigned.items() if m == self.identity}
        # Shards acted on: held and caught up (a shard whose catch-up failed is won again below).
        before = self._held() - self._behind
        # Held back from the start: a shard won below is not acted on before the catch-up.
        self._warming = frozenset(mine) - before
        for i, lease in enumerate(self.shard_leases):
            if i in mine:
                lease.step()
            elif lease.is_leader():
                # Stop acting on it now, and let the Lease expire rather than release it: a controller
                # pass already under way may still write for its pools, and the new holder takes the
                # shard only once the Lease has expired, after any such pass.
                lease.stop("assigned to another replica")
        self.admission.step()
        won = self._held() - before
        self._behind = frozenset()
        if self.watch is not None:
            # The objects of the shards assigned here (watched before their Leases are won, so they are
            # in the state when they are) and of those still held; with quota admission, what it needs.
            admits = self.admission.is_leader()
            try:
                ready = self.watch(frozenset(mine) | self._held(), admits)
            except Exception:
                log.exception("sharding: cannot scope the watches")
                ready = False
            self._admission_ready = admits and ready
            if not ready and won:
                log.info(
                    "sharding: the objects of shards %s are still being listed; not acting yet", sorted(won)
                )
                self._behind = won
        if won - self._behind and self.on_acquire is not None:
            try:
                # The claims their last holder wrote just before it died may still be on their way
                # through this replica's watch.
                self.on_acquire()
            except Exception:
                # Acting without them would solve their pods again: hold the shards back, try next step.
                log.exception(
                    "sharding: catching up on shards %s failed; not acting on them yet", sorted(won)
                )
                self._behind = won
        self._warming = self._behind

    def _live_leases(self) -> tuple[tuple[str, ...], dict[int, str]]:
        """The live replicas (member Leases not expired), and each shard's live holder (its Lease not
        expired): one list of the namespace's Leases."""
        doc = self.client.request("GET", kc.LEASE.path(namespace=self.namespace))
        now = self.clock.now()
        live = {self.identity} if self.member.is_leader() else set()
        holders: dict[int, str] = {}
        for lease in doc.get("items") or []:
            meta = lease.get("metadata") or {}
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            renewed = parse_time(spec.get("renewTime"))
            duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
            if not holder or renewed is None or renewed + duration <= now:
                continue
            if (meta.get("labels") or {}).get(MEMBER_LABEL) == self.prefix:
                live.add(holder)
            elif (shard := self._shard_lease.get(meta.get("name") or "")) is not None:
                holders[shard] = holder
        return tuple(sorted(live)), holders

    def _held(self) -> frozenset[int]:
        return frozenset(i for i, lease in enumerate(self.shard_leases) if lease.is_leader())

    def owned_shards(self) -> frozenset[int]:
        """The shards this replica acts on now."""
        return self._held() - self._warming

    def owns_pool(self, pool: str) -> bool:
        """Whether this replica may act on the pool now (holds its shard's Lease)."""
        shard = self._pool_shards.get(pool)
        if shard is None:
            shard = self._pool_shards[pool] = model.shard_of(pool, self.shards)
        return shard not in self._warming and self.shard_leases[shard].is_leader()

    def acting_until(self, shard: int | None) -> datetime | None:
        """When this replica's right to write for `shard` (None: quota admission) ends, the renew
        deadline of its Lease; None when it does not act on it now. Its writes for the shard carry it
        as their deadline (`provisioner.controllers.sharding`)."""
        if shard is None:
            return self.admission.acting_until() if self.holds_admission() else None
        if shard in self._warming:
            return None
        return self.shard_leases[shard].acting_until()

    def holds_admission(self) -> bool:
        """Whether this replica decides quota admission now: it holds the Lease, and (with
        `watch`) its state holds what admission needs."""
        return self.admission.is_leader() and self._admission_ready

    def holds_any(self) -> bool:
        """Whether this replica may write at all (a shard or admission)."""
        return self.holds_admission() or bool(self.owned_shards())

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.step()
            except Exception:  # a bug here must not stop renewals for good
                log.exception("sharding step failed")
            stop.wait(self.retry_period)

    def release(self) -> None:
        """On clean shutdown: give every Lease up so the others take over without waiting."""
        for lease in [*self.shard_leases, self.admission, self.member]:
            lease.release()
