"""KubeClusterAPI: the ClusterAPI over a real API server.

Every write is fenced by `may_write` (the leader elector's "do I still hold the lease?"), so a controller
that lost its lease cannot write even from a reconcile already under way. A fence checked when a write
starts does not bound when it lands, though: a request can wait at the API server (etcd, priority and
fairness queues) past the Lease's expiry, and land after another replica took over and counted what it
saw. So a write also carries a deadline, the Lease's renew deadline (`acting_until`, or the one the
caller set with `writes_until`): it is sent as the request's `timeout`, which kube-apiserver enforces
(a write not stored by then is abandoned, answered 504), and is not started with less than
`MIN_WRITE_SECONDS` left. The renew deadline is shorter than the lease duration, so whatever the
latency, a write ends before anyone else may hold the Lease (clocks skewed by less than the difference,
as client-go's leader election assumes). The object the server returns
is fed into ClusterState through the informers' StateFeeder, so the next reconcile sees its own write.

Events are written at once by default (the tests read them after a step). `provisioner run` starts an
`EventWriter` instead: Events go out from a thread of their own, in order, as client-go's recorder does,
so a batch of 10,000 pods' `Nominated` Events (one API call each) never holds up the reconcile that
launches their nodes. A full queue drops the newest Event, with a warning: an Event is a note, not state.
Either way an Event the same as one recorded before is counted on it, not written again (`kube/events.py`).
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from provisioner import crashpoints
from provisioner.api import NodeClaim
from provisioner.clock import Clock, RealClock, isoformat
from provisioner.clusterapi.port import NotFoundError, NotLeader, write_deadline
from provisioner.kube import client as kc
from provisioner.kube import events
from provisioner.kube.informers import StateFeeder

log = logging.getLogger(__name__)

COMPONENT = "provisioner"

MIN_WRITE_SECONDS = 0.5
"""A write is not started with less time than this left before its deadline: it would only time out."""


class EventWriter:
    """Writes Events from a thread of its own, in the order they were recorded (see the module)."""

    def __init__(self, client: kc.KubeClient, *, max_pending: int = 50_000) -> None:
        self.client = client
        self._queue: queue.Queue[events.Recorded | None] = queue.Queue(max_pending)
        self._thread = threading.Thread(target=self._loop, name="events", daemon=True)
        self.dropped = 0

    def start(self) -> EventWriter:
        self._thread.start()
        return self

    def put(self, event: events.Recorded) -> None:
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1
            log.warning("event queue full: dropped event %s (%d dropped)", event.body["reason"], self.dropped)

    def stop(self, *, timeout: float = 10.0) -> None:
        """Write what is queued (within `timeout`), then stop."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            events.write(self.client, item)


class KubeClusterAPI:
    """ClusterAPI implemented with KubeClient."""

    def __init__(
        self,
        client: kc.KubeClient,
        feeder: StateFeeder | None = None,
        *,
        may_write: Callable[[], bool] = lambda: True,
        clock: Clock | None = None,
        event_namespace: str = "default",
        event_writer: EventWriter | None = None,
        acting_until: Callable[[], datetime | None] | None = None,
    ) -> None:
        self.client = client
        self.feeder = feeder
        self.may_write = may_write
        self.clock = clock or RealClock()
        self.event_namespace = event_namespace
        self.event_writer = event_writer
        """Where Events go when given (in the background); None: written at once."""
        self.acting_until = acting_until
        """When this replica's right to write ends (its Lease's renew deadline; None then: it has none):
        every write's deadline. None: writes are bounded only by the caller's `writes_until`."""
        self.events = events.EventCorrelator()

    def _fence(self, what: str) -> float | None:
        """Refuse a write this replica may not make now; else the seconds it may take (None: unbounded)."""
        if not self.may_write():
            raise NotLeader(f"not the leader: refusing to {what}")
        deadline = write_deadline()
        if self.acting_until is not None:
            mine = self.acting_until()
            if mine is None:
                raise NotLeader(f"not the leader: refusing to {what}")
            deadline = mine if deadline is None else min(deadline, mine)
        if deadline is None:
            return None
        left = (deadline - self.clock.now()).total_seconds()
        if left < MIN_WRITE_SECONDS:
            raise NotLeader(f"refusing to {what}: the Lease's renew deadline is {left:.1f} s away")
        return left

    def _feed(self, res: kc.Resource, obj: Mapping[str, Any]) -> None:
        if self.feeder is None or not obj.get("metadata"):
            return
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.feeder.remove(res, obj)
        else:
            self.feeder.upsert(res, obj)

    def _feed_deleted(
        self, res: kc.Resource, doc: Mapping[str, Any], name: str, namespace: str | None = None
    ) -> None:
        """A DELETE answers the object: still there with a deletionTimestamp (finalizers, graceful pods),
        or its last state when it is gone."""
        if self.feeder is None:
            return
        meta = doc.get("metadata") or {}
        if (meta.get("deletionTimestamp") and meta.get("finalizers")) or (
            meta.get("deletionTimestamp")
            and res.kind == "Pod"
            and doc.get("status", {}).get("phase")
            not in (
                "Succeeded",
                "Failed",
            )
        ):
            self.feeder.upsert(res, doc)
        else:
            self.feeder.remove(res, doc if meta else {"metadata": {"name": name, "namespace": namespace}})

    # NodeClaims

    def create_nodeclaim(self, claim: NodeClaim) -> NodeClaim:
        timeout = self._fence(f"create NodeClaim {claim.name}")
        body = claim.to_dict()
        body.pop("status", None)
        doc = self.client.create(kc.NODECLAIM, body, timeout=timeout)
        if not doc.get("metadata"):
            # Some servers answer an empty body; read the object back so the state has it.
            doc = self.client.get(kc.NODECLAIM, claim.name)
        self._feed(kc.NODECLAIM, doc)
        crashpoints.reached("claim-written")
        return NodeClaim.model_validate(doc)

    def patch_nodeclaim(self, name: str, patch: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch NodeClaim {name}")
        self._feed(kc.NODECLAIM, self.client.patch(kc.NODECLAIM, name, patch, timeout=timeout))
        if "finalizers" in (patch.get("metadata") or {}):
            crashpoints.reached("finalizer-removed")

    def refresh(self, kind: str, name: str) -> None:
        res = kc.NODECLAIM if kind == "NodeClaim" else kc.NODE
        self._feed(res, self.client.get(res, name))

    def patch_nodeclaim_status(self, name: str, status: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch NodeClaim {name} status")
        self._feed(
            kc.NODECLAIM,
            self.client.patch(kc.NODECLAIM, name, {"status": status}, sub="status", timeout=timeout),
        )
        crashpoints.reached("status-written")

    def delete_nodeclaim(self, name: str) -> None:
        timeout = self._fence(f"delete NodeClaim {name}")
        self._feed_deleted(kc.NODECLAIM, self.client.delete(kc.NODECLAIM, name, timeout=timeout), name)
        crashpoints.reached("claim-deleted")

    # Nodes and pods

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch Node {name}")
        self._feed(kc.NODE, self.client.patch(kc.NODE, name, patch, timeout=timeout))
        crashpoints.reached("node-patched")

    def delete_node(self, name: str) -> None:
        timeout = self._fence(f"delete Node {name}")
        self._feed_deleted(kc.NODE, self.client.delete(kc.NODE, name, timeout=timeout), name)
        crashpoints.reached("node-deleted")

    def evict_pod(self, namespace: str, name: str) -> None:
        timeout = self._fence(f"evict Pod {namespace}/{name}")
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        path = kc.POD.path(namespace=namespace, name=name, sub="eviction")
        self.client.request("POST", path, body=body, timeout=timeout)
        if self.feeder is not None:
            self.feeder.remove(kc.POD, {"metadata": {"name": name, "namespace": namespace}})
        crashpoints.reached("drain-started")

    def delete_pod(self, namespace: str, name: str) -> None:
        timeout = self._fence(f"delete Pod {namespace}/{name}")
        doc = self.client.delete(kc.POD, name, namespace=namespace, timeout=timeout)
        self._feed_deleted(kc.POD, doc, name, namespace)

    def patch_pod(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch Pod {namespace}/{name}")
        self._feed(kc.POD, self.client.patch(kc.POD, name, patch, namespace=namespace, timeout=timeout))

    def patch_pod_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch Pod {namespace}/{name} status")
        self._feed(
            kc.POD,
            self.client.patch(
                kc.POD, name, {"status": status}, namespace=namespace, sub="status", timeout=timeout
            ),
        )

    # NodePools, Teams, Departments and Events

    def patch_nodepool_status(self, name: str, status: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch NodePool {name} status")
        self._feed(
            kc.NODEPOOL,
            self.client.patch(kc.NODEPOOL, name, {"status": status}, sub="status", timeout=timeout),
        )

    def patch_quota_status(self, kind: str, name: str, status: Mapping[str, Any]) -> None:
        res = kc.TEAM if kind == "Team" else kc.DEPARTMENT
        timeout = self._fence(f"patch {kind} {name} status")
        self._feed(res, self.client.patch(res, name, {"status": status}, sub="status", timeout=timeout))

    def patch_provisioning_request(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch ProvisioningRequest {namespace}/{name}")
        self._feed(
            kc.PROVISIONING_REQUEST,
            self.client.patch(kc.PROVISIONING_REQUEST, name, patch, namespace=namespace, timeout=timeout),
        )

    def patch_provisioning_request_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        timeout = self._fence(f"patch ProvisioningRequest {namespace}/{name} status")
        self._feed(
            kc.PROVISIONING_REQUEST,
            self.client.patch(
                kc.PROVISIONING_REQUEST,
                name,
                {"status": status},
                namespace=namespace,
                sub="status",
                timeout=timeout,
            ),
        )

    def record_event(
        self,
        *,
        kind: str,
        name: str,
        namespace: str | None = None,
        reason: str,
        message: str,
        type: str = "Normal",
    ) -> None:
        if not self.may_write():
            return
        ns = namespace or self.event_namespace
        now = isoformat(self.clock.now())
        api_version = {"Pod": "v1", "Node": "v1"}.get(kind, "provisioner.sh/v1")
        body = {
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "involvedObject": {
                "kind": kind,
                "name": name,
                "apiVersion": api_version,
                **({"namespace": namespace} if namespace else {}),
            },
            "reason": reason,
            "message": message[:1024],
            "type": type,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        event = self.events.observe(ns, body)
        if self.event_writer is not None:
            self.event_writer.put(event)
        else:
            events.write(self.client, event)


__all__ = ["EventWriter", "KubeClusterAPI", "NotFoundError"]
