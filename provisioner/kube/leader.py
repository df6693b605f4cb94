"""Leader election on a coordination.k8s.io/v1 Lease.

Only the leader acts. `is_leader()` is true only while the last successful renewal is younger than the
renew deadline, so a leader that cannot reach the API server stops acting before its lease expires and
another replica can take over (the lease duration is longer than the renew deadline). Updates carry the
resourceVersion read, so two candidates racing for an expired lease cannot both win.

client-go's leader election says it gives no fencing: a write the old leader started may land after a
new leader took over. Here every write carries `acting_until` (the last renewal plus the renew deadline)
as its deadline, which the API server enforces (`provisioner.kube.api`), so no write of a leader lands
after its lease can have expired, with clocks skewed by less than lease duration minus renew deadline.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from provisioner.clock import Clock, micro_isoformat, parse_time
from provisioner.clusterapi.port import ClusterError, ConflictError, NotFoundError
from provisioner.kube import client as kc

log = logging.getLogger(__name__)


class LeaderElector:
    def __init__(
        self,
        client: kc.KubeClient,
        *,
        identity: str,
        clock: Clock,
        name: str = "provisioner-leader",
        namespace: str = "default",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if renew_deadline >= lease_duration:
            raise ValueError("renew_deadline must be shorter than lease_duration")
        self.client = client
        self.identity = identity
        self.clock = clock
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.labels = dict(labels or {})
        """Set on the Lease when this elector creates it (sharded replicas find each other by them)."""
        self._leader = False
        self._renewed_at = None  # type: Any
        self._lock = threading.Lock()
        self.transitions = 0

    def is_leader(self) -> bool:
        with self._lock:
            if not self._leader or self._renewed_at is None:
                return False
            if self.clock.now() - self._renewed_at >= timedelta(seconds=self.renew_deadline):
                # Renewals stopped working: stop acting now, before anyone else may take the lease.
                self._leader = False
                log.warning("leader lease %s not renewed in time; stopped acting", self.name)
                return False
            return True

    def acting_until(self) -> datetime | None:
        """When this replica's right to act on the lease ends (its last renewal plus the renew deadline:
        every write it makes must have ended by then, `provisioner.kube.api`); None when it does not
        lead now."""
        if not self.is_leader():
            return None
        with self._lock:
            renewed: datetime | None = self._renewed_at
        return None if renewed is None else renewed + timedelta(seconds=self.renew_deadline)

    def stop(self, why: str) -> None:
        """Stop acting now without giving the lease up: it expires unless renewed by a later `step`."""
        self._lose(why)

    def _lose(self, why: str) -> None:
        with self._lock:
            if self._leader:
                log.warning("lost leader lease %s: %s", self.name, why)
            self._leader = False

    def step(self) -> bool:
        """Acquire or renew once. Returns whether we lead after it."""
        now = self.clock.now()
        stamp = micro_isoformat(now)
        try:
            try:
                lease = self.client.get(kc.LEASE, self.name, namespace=self.namespace)
            except NotFoundError:
                meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
                if self.labels:
                    meta["labels"] = self.labels
                body = {
                    "metadata": meta,
                    "spec": {
                        "holderIdentity": self.identity,
                        "leaseDurationSeconds": int(self.lease_duration),
                        "acquireTime": stamp,
                        "renewTime": stamp,
                        "leaseTransitions": 0,
                    },
                }
                self.client.create(kc.LEASE, body, namespace=self.namespace)
                return self._won(now, new=True)
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity")
            renewed = parse_time(spec.get("renewTime"))
            duration = timedelta(seconds=int(spec.get("leaseDurationSeconds") or self.lease_duration))
            expired = renewed is None or renewed + duration <= now
            if holder and holder != self.identity and not expired:
                self._lose(f"held by {holder}")
                return False
            patch: dict[str, Any] = {
                "metadata": {"resourceVersion": (lease.get("metadata") or {}).get("resourceVersion")},
                "spec": {"holderIdentity": self.identity, "renewTime": stamp},
            }
            if holder != self.identity:
                patch["spec"]["acquireTime"] = stamp
                patch["spec"]["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                patch["spec"]["leaseDurationSeconds"] = int(self.lease_duration)
            if not patch["metadata"]["resourceVersion"]:
                del patch["metadata"]
            self.client.patch(kc.LEASE, self.name, patch, namespace=self.namespace)
            return self._won(now, new=holder != self.identity)
        except ConflictError:
            self._lose("another candidate updated the lease first")
            return False
        except ClusterError as err:
            log.warning("leader election %s: %s", self.name, err)
            # Keep acting only until the renew deadline passes (is_leader checks it).
            return self.is_leader()

    def _won(self, now: Any, *, new: bool) -> bool:
        with self._lock:
            if new or not self._leader:
                self.transitions += 1
                log.info("became leader (%s) of lease %s/%s", self.identity, self.namespace, self.name)
            self._leader = True
            self._renewed_at = now
        return True

    def release(self) -> None:
        """Give the lease up on clean shutdown so another replica takes over without waiting."""
        if not self.is_leader():
            return
        self._lose("released")
        try:
            self.client.patch(
                kc.LEASE,
                self.name,
                {"spec": {"holderIdentity": None, "renewTime": None}},
                namespace=self.namespace,
            )
        except ClusterError as err:
            log.warning("could not release lease %s: %s", self.name, err)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_period)
