"""Where the controller tests' cluster lives: the `Backend` protocol the world drives, `MemoryBackend` (the
in-memory cluster state) and `KubeBackend` (a Kubernetes API over HTTP, through the official client), with
what each does for pods, leases, bindings and events, and a restart that keeps what the cluster holds.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from provisioner.api import labels as wk
from provisioner.clock import VirtualClock, isoformat
from provisioner.clusterapi import (
    ClusterAPI,
    ClusterError,
    ConflictError,
    MemoryCluster,
    NotFoundError,
    merge_patch,
)
from provisioner.kube import client as kc
from provisioner.state import ClusterState
from testkit.controllers.space import wait_for_service_account

RESOURCES = {r.kind: r for r in (*kc.WATCHED, kc.EVENT)}


class Backend(Protocol):
    # Read-only members: each backend holds its own kind of ClusterAPI (a mutable protocol member would
    # have to be exactly ClusterAPI).
    @property
    def state(self) -> ClusterState: ...
    @property
    def cluster(self) -> ClusterAPI: ...
    @property
    def clock(self) -> VirtualClock: ...

    def create(self, obj: Mapping[str, Any]) -> None: ...
    def patch(
        self, kind: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None
    ) -> None: ...
    def patch_status(
        self, kind: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> None: ...
    def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None: ...
    def finish_pod(self, namespace: str, name: str) -> None: ...
    def renew_lease(self, node: str) -> None: ...
    def bind(self, namespace: str, name: str, node: str) -> None: ...
    def events(self) -> list[dict[str, Any]]: ...
    def settle(self) -> None: ...
    def close(self) -> None: ...
    def restarted(self) -> Backend: ...


class MemoryBackend:
    """Writes straight into a ClusterState (what the simulator does)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.state = ClusterState()
        self.cluster = MemoryCluster(self.state, clock)
        self.clock = clock

    def _raw(self, kind: str, name: str, namespace: str | None) -> dict[str, Any]:
        s = self.state
        key = f"{namespace or 'default'}/{name}"
        readers: dict[str, Callable[[], Any]] = {
            "Pod": lambda: s.pods.get(key) and s.pods[key].raw,
            "Node": lambda: s.nodes.get(name) and s.nodes[name].raw,
            "NodeClaim": lambda: s.claims.get(name) and s.claims[name].to_dict(),
            "NodePool": lambda: s.nodepools.get(name) and s.nodepools[name].to_dict(),
        }
        found = readers[kind]()
        if not found:
            raise NotFoundError(f"{kind} {key}")
        return copy.deepcopy(dict(found))

    def create(self, obj: Mapping[str, Any]) -> None:
        doc = copy.deepcopy(dict(obj))
        doc["metadata"].setdefault("creationTimestamp", isoformat(self.clock.now()))
        self.state.upsert(doc["kind"], doc)

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None) -> None:
        self.state.upsert(kind, merge_patch(self._raw(kind, name, namespace), patch))

    def patch_status(
        self, kind: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> None:
        self.patch(kind, name, {"status": status}, namespace=namespace)

    def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        if kind == "NodeClaim":
            self.cluster.delete_nodeclaim(name)
            return
        key = f"{namespace or 'default'}/{name}" if RESOURCES[kind].namespaced else name
        self.state.remove(kind, key)

    def finish_pod(self, namespace: str, name: str) -> None:
        self.state.remove("Pod", f"{namespace}/{name}")

    def renew_lease(self, node: str) -> None:
        return None  # no node-lifecycle controller watches the in-memory cluster

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.patch("Pod", name, {"spec": {"nodeName": node}}, namespace=namespace)

    def events(self) -> list[dict[str, Any]]:
        return [
            {"involvedObject": {"kind": e.kind, "name": e.name}, "reason": e.reason, "message": e.message}
            for e in self.cluster.events
        ]

    def settle(self) -> None:
        return None

    def close(self) -> None:
        return None

    def restarted(self) -> MemoryBackend:
        """A controller restart: the in-memory cluster is the API server, so it keeps everything."""
        return self


class KubeBackend:
    """A Kubernetes API over HTTP (the kmock fixture, or a real cluster): informers feed the state."""

    def __init__(
        self,
        client: kc.KubeClient,
        clock: VirtualClock,
        *,
        may_write: Callable[[], bool] = lambda: True,
        cleanup: bool = False,
    ) -> None:
        """`cleanup`: a real cluster (PROVISIONER_TEST_KUBECONFIG) outlives the test; everything the test
        made is deleted at `close()`, and new namespaces are waited on until their `default`
        ServiceAccount exists (a real server refuses pods in a namespace without it)."""
        from provisioner.kube.api import KubeClusterAPI
        from provisioner.kube.informers import Informers

        self.client = client
        self.clock = clock
        self.cleanup = cleanup
        """Delete what the test made when done (a real cluster outlives the test)."""
        self.created: list[tuple[kc.Resource, str, str | None]] = []
        self.namespaces: set[str] = set()
        self.renewed: dict[str, float] = {}
        self.state = ClusterState()
        self.informers = Informers(client, self.state, watch_timeout=30)
        self.informers.start()
        if not self.informers.wait_synced(15):
            raise RuntimeError("informers did not sync")
        self.feeder = self.informers.feeder
        self.cluster = KubeClusterAPI(client, self.feeder, clock=clock, may_write=may_write)
        self.events_before: set[str] = set()
        """Events a real cluster held before this test (uids): `events()` leaves them out."""
        if cleanup:
            self.events_before = {e["metadata"]["uid"] for e in client.list(kc.EVENT)[0]}

    def create(self, obj: Mapping[str, Any]) -> None:
        res = RESOURCES[obj["kind"]]
        ns = (obj["metadata"].get("namespace") or "default") if res.namespaced else None
        if ns is not None:
            self._ensure_namespace(ns)
        stored = self.client.create(res, obj, namespace=ns)
        self.created.append((res, stored["metadata"]["name"], ns))
        if obj.get("status") and (res.kind == "Pod" or res.group == wk.GROUP):
            # A server drops the status a create carries (Pods are reset to Pending, custom objects
            # lose it): a client that means it writes it through the status subresource.
            stored = self.client.patch(
                res, stored["metadata"]["name"], {"status": obj["status"]}, namespace=ns, sub="status"
            )
        self.feeder.upsert(res, stored)

    def _ensure_namespace(self, name: str) -> None:
        # A namespace must exist before anything is created in it. Namespaces are left in place on a
        # real cluster: deleting one takes the namespace controller a while, and a test that makes it
        # again meanwhile would be refused.
        if name in self.namespaces:
            return
        with contextlib.suppress(ConflictError):  # there already
            self.client.create(kc.NAMESPACE, {"metadata": {"name": name}})
        if self.cleanup:  # kube-controller-manager makes the ServiceAccount a pod needs
            wait_for_service_account(self.client, name)
        self.namespaces.add(name)

    def patch(self, kind: str, name: str, patch: Mapping[str, Any], *, namespace: str | None = None) -> None:
        res = RESOURCES[kind]
        self.feeder.upsert(res, self.client.patch(res, name, patch, namespace=namespace))

    def patch_status(
        self, kind: str, name: str, status: Mapping[str, Any], *, namespace: str | None = None
    ) -> None:
        res = RESOURCES[kind]
        self.feeder.upsert(
            res, self.client.patch(res, name, {"status": status}, namespace=namespace, sub="status")
        )

    def delete(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        res = RESOURCES[kind]
        doc = self.client.delete(res, name, namespace=namespace)
        try:  # still there when finalizers hold it, or when a bound pod waits for its kubelet
            self.feeder.upsert(res, self.client.get(res, name, namespace=namespace))
        except NotFoundError:
            self.feeder.remove(res, doc)

    def finish_pod(self, namespace: str, name: str) -> None:
        """What a kubelet does once a Terminating pod's containers stopped: delete it with grace 0."""
        with contextlib.suppress(NotFoundError):
            self.delete_now(kc.POD, name, namespace)

    def renew_lease(self, node: str) -> None:
        """A kubelet's heartbeat: on a real cluster the node-lifecycle controller marks a Node whose Lease
        in kube-node-lease is not renewed for 40 s `Ready=Unknown` and taints it unreachable. The
        imitation has no such controller, so only a real cluster gets them (every 10 s of real time)."""
        if not self.cleanup or time.monotonic() - self.renewed.get(node, -1e9) < 10:
            return
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now}
        try:
            self.client.patch(kc.LEASE, node, {"spec": spec}, namespace="kube-node-lease")
        except NotFoundError:
            lease = {"metadata": {"name": node, "namespace": "kube-node-lease"}, "spec": spec}
            self.client.create(kc.LEASE, lease, namespace="kube-node-lease")
            self.created.append((kc.LEASE, node, "kube-node-lease"))
        self.renewed[node] = time.monotonic()

    def delete_now(self, res: kc.Resource, name: str, namespace: str | None) -> None:
        doc = self.client.delete(res, name, namespace=namespace, body={"gracePeriodSeconds": 0})
        self.feeder.remove(res, doc)

    def bind(self, namespace: str, name: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"kind": "Node", "name": node},
        }
        self.client.request("POST", kc.POD.path(namespace=namespace, name=name, sub="binding"), body=body)
        self.feeder.upsert(kc.POD, self.client.get(kc.POD, name, namespace=namespace))

    def events(self) -> list[dict[str, Any]]:
        """The Events written since this test's cluster began (on a real cluster, since the backend)."""
        items = self.client.request("GET", kc.EVENT.path()).get("items") or []
        return [e for e in items if e["metadata"].get("uid") not in self.events_before]

    def settle(self, quiet: float = 0.03, limit: float = 2.0) -> None:
        """Let watch events already sent reach the state (waits for quiet, never asserts on time)."""
        deadline = time.monotonic() + limit
        last = self.state.generation
        while time.monotonic() < deadline:
            time.sleep(quiet)
            if self.state.generation == last:
                return
            last = self.state.generation

    def close(self) -> None:
        self.informers.stop()
        if not self.cleanup:
            return
        claims, _ = self.client.list(kc.NODECLAIM)
        targets = [(kc.NODECLAIM, c["metadata"]["name"], None) for c in claims] + self.created[::-1]
        for res, name, ns in targets:
            try:
                if res is kc.NODECLAIM:
                    self.client.patch(res, name, {"metadata": {"finalizers": None}})
                # Grace 0: with no kubelet a bound pod would stay Terminating and hold its name.
                body = {"gracePeriodSeconds": 0} if res is kc.POD else None
                self.client.delete(res, name, namespace=ns, body=body)
            except ClusterError:
                pass

    def restarted(self) -> KubeBackend:
        """A controller restart: new informers, a state rebuilt from the API server."""
        self.informers.stop()
        again = KubeBackend(self.client, self.clock, cleanup=self.cleanup)
        again.created = self.created
        again.events_before = self.events_before
        return again
