"""The world the controller tests run in: a cluster (in memory, or a Kubernetes API over HTTP), the fake
cloud behind the caching wrapper, a virtual clock, the controllers' Manager, and the stand-ins for what a
real cluster has besides its API server (testkit/controllers/standins.py): a kubelet that registers a Node
for each launched instance, a binder that binds pending pods as kube-scheduler would (or marks them
Unschedulable), and what kube-controller-manager does for them.

Time moves only through `tick()`: the clock advances, the kubelet and binder act, the Manager steps.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from providers.fake import FakeProvider
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clock import VirtualClock, isoformat
from provisioner.cloudprovider.wrappers import CachingProvider
from provisioner.clusterapi import (
    ClusterAPI,
    ClusterError,
    ConflictError,
    MemoryCluster,
    NotFoundError,
    merge_patch,
)
from provisioner.controllers.manager import Manager
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import ControllerSettings
from provisioner.kube import client as kc
from provisioner.state import ClusterState
from provisioner.state.objects import Pod
from testkit.builders import aws_node_class_manifest, node_pool_manifest, pdb_manifest, pod_manifest, req
from testkit.controllers.standins import TestBinder, TestKubelet, cluster_controllers

__all__ = [
    "Backend",
    "KubeBackend",
    "MemoryBackend",
    "TestBinder",
    "TestKubelet",
    "World",
    "cluster_controllers",
]

_ids = itertools.count(1)

# Builders -----------------------------------------------------------------------------------------------


def node_class(name: str = "default") -> dict[str, Any]:
    return aws_node_class_manifest(name)


def node_pool(
    name: str = "gpu",
    *,
    gpu_names: Sequence[str] | None = ("a10g",),
    capacity_types: Sequence[str] = ("spot", "on-demand"),
    instance_types: Sequence[str] | None = None,
    zones: Sequence[str] | None = None,
    weight: int | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    startup_taints: Sequence[Mapping[str, str]] = (),
    limits: Mapping[str, str] | None = None,
    termination_grace_period: str | None = None,
    node_class_name: str = "default",
) -> dict[str, Any]:
    """A GPU pool (a10g, spot or on-demand) for the team `ml`, as the controller tests apply it."""
    reqs = [req(wk.CAPACITY_TYPE, "In", *capacity_types)]
    if gpu_names:
        reqs.append(req(wk.GPU_NAME, "In", *gpu_names))
    if instance_types:
        reqs.append(req(wk.INSTANCE_TYPE, "In", *instance_types))
    if zones:
        reqs.append(req(wk.ZONE, "In", *zones))
    return node_pool_manifest(
        name,
        requirements=reqs,
        labels={"team": "ml"},
        node_class_ref={"group": "provisioner.sh", "kind": "AWSNodeClass", "name": node_class_name},
        weight=weight,
        taints=taints,
        startup_taints=startup_taints,
        limits=limits,
        termination_grace_period=termination_grace_period,
    )


def pod(
    name: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    owner: str | None = "ReplicaSet",
    **kw: Any,
) -> dict[str, Any]:
    """A training pod (`app: train`, owned by a ReplicaSet), as the controller tests apply it."""
    return pod_manifest(name, labels=labels or {"app": "train"}, owner=owner, owner_name="owner", **kw)


def gpu_pod(
    name: str | None = None,
    *,
    gpus: int = 1,
    gpu_name: str | None = "a10g",
    cpu: str = "2",
    memory: str = "8Gi",
    **kw: Any,
) -> dict[str, Any]:
    """A training pod asking for one a10g."""
    return pod(name, gpus=gpus, gpu_name=gpu_name, cpu=cpu, memory=memory, **kw)


def pdb(name: str, *, match_labels: Mapping[str, str], max_unavailable: int = 0) -> dict[str, Any]:
    return pdb_manifest(name, match=match_labels, max_unavailable=max_unavailable)


# Backends -----------------------------------------------------------------------------------------------

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
            path = f"/api/v1/namespaces/{name}/serviceaccounts/default"
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.client.request("GET", path)
                    break
                except NotFoundError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
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
        return list(self.client.request("GET", kc.EVENT.path()).get("items") or [])

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
        return again


# The world ----------------------------------------------------------------------------------------------


class World:
    def __init__(
        self,
        backend_factory: Callable[[VirtualClock], Backend],
        *,
        settings: ControllerSettings | None = None,
        start: datetime | None = None,
        provider: Any = None,
        clock: VirtualClock | None = None,
    ) -> None:
        self.clock = clock or VirtualClock(start or datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
        self.backend = backend_factory(self.clock)
        try:
            self._build(settings, provider)
        except BaseException:
            self.backend.close()  # its informers and, on a real cluster, what it made would leak
            raise

    def _build(self, settings: ControllerSettings | None, provider: Any) -> None:
        self.state = self.backend.state
        self.settings = settings or ControllerSettings(cluster_name="test")
        self.fake = provider or FakeProvider(
            catalog="aws", cluster_name=self.settings.cluster_name, clock=self.clock.now
        )
        if isinstance(self.fake, FakeProvider):
            self.kubelet = TestKubelet(self.backend, self.clock, {t.name: t for t in self.fake.catalog})
            self.fake.on_launch = self.kubelet.on_launch
            self.fake.on_delete = self.kubelet.on_delete
        else:
            self.kubelet = TestKubelet(self.backend, self.clock, {}, poll=self.fake)
        self.provider = CachingProvider(self.fake, clock=self.clock.now)
        self.binder = TestBinder(self.backend)
        self._kept: list[dict[str, Any]] = []
        self.manager = self.new_manager()

    def restart(self) -> None:
        """The controller process died and starts again: fresh state, cache and controllers; the cloud
        and the API server keep what they had."""
        self.backend = self.backend.restarted()
        self.state = self.backend.state
        self.kubelet.backend = self.backend
        self.binder = TestBinder(self.backend)
        self.provider = CachingProvider(self.fake, clock=self.clock.now)
        self.manager = self.new_manager()

    def metric(self, name: str, **labels: str) -> float:
        return self.manager.metrics.registry.get_sample_value(name, labels) or 0.0

    def new_manager(self, **kw: Any) -> Manager:
        return Manager(
            state=self.state,
            cluster=kw.pop("cluster", self.backend.cluster),
            providers=ProviderSet.every_kind(self.provider),
            clock=self.clock,
            settings=self.settings,
            **kw,
        )

    def keep(self, *pods: Mapping[str, Any]) -> None:
        """Create pods and recreate each when it goes (evicted), as its ReplicaSet would."""
        for p in pods:
            self._kept.append(dict(p))
            self.backend.create(p)

    def _recreate_kept(self) -> None:
        for i, doc in enumerate(self._kept):
            meta = doc["metadata"]
            if f"{meta['namespace']}/{meta['name']}" in self.state.pods:
                continue
            base = meta["name"].split(".")[0]
            again = copy.deepcopy(doc)
            again["metadata"]["name"] = f"{base}.{next(_ids)}"
            again.pop("status", None)
            self._kept[i] = again
            self.backend.create(again)

    def apply(self, *objs: Mapping[str, Any]) -> None:
        for obj in objs:
            self.backend.create(obj)

    def tick(self, seconds: float = 1.0) -> None:
        self.clock.advance(timedelta(seconds=seconds))
        self._recreate_kept()
        self.kubelet.sync()
        self.binder.sync()
        self.backend.settle()
        self.manager.step(self.clock.now())
        self.backend.settle()

    def run_until(self, done: Callable[[], bool], *, max_ticks: int = 60, seconds: float = 1.0) -> int:
        for n in range(max_ticks):
            if done():
                return n
            self.tick(seconds)
        if done():
            return max_ticks
        raise AssertionError(f"not done after {max_ticks} ticks of {seconds}s: {self.describe()}")

    # Reading the world

    def claims(self) -> list[NodeClaim]:
        return sorted(self.state.claims.values(), key=lambda c: c.name)

    def pods(self) -> list[Pod]:
        return sorted(self.state.pods.values(), key=lambda p: p.key)

    def all_bound(self) -> bool:
        pods = self.pods()
        return bool(pods) and all(p.node_name for p in pods)

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.backend.events() if reason is None or e.get("reason") == reason]

    def describe(self) -> str:
        claims = [
            (c.name, c.status.provider_id, [f"{x.type}={x.status.value}" for x in c.status.conditions])
            for c in self.claims()
        ]
        return f"claims={claims} nodes={sorted(self.state.nodes)} pods={[(p.key, p.node_name) for p in self.pods()]}"
