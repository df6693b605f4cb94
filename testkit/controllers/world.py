"""The world the controller tests run in: a cluster (in memory, or a Kubernetes API over HTTP: the backends
in testkit/controllers/backends.py), the fake cloud behind the caching wrapper, a virtual clock, the
controllers' Manager, and the stand-ins for what a real cluster has besides its API server
(testkit/controllers/standins.py): a kubelet that registers a Node for each launched instance, a binder
that binds pending pods as kube-scheduler would (or marks them Unschedulable), and what
kube-controller-manager does for them. The builders here are the controller tests' manifests.

Time moves only through `tick()`: the clock advances, the kubelet and binder act, the Manager steps.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from providers.fake import FakeProvider
from provisioner.api import NodeClaim
from provisioner.api import labels as wk
from provisioner.clock import VirtualClock
from provisioner.cloudprovider.wrappers import CachingProvider
from provisioner.controllers.manager import Manager
from provisioner.controllers.provider_set import ProviderSet
from provisioner.controllers.settings import ControllerSettings
from provisioner.state.objects import Pod
from testkit.builders.pods import pdb_manifest, pod_manifest
from testkit.builders.pools import aws_node_class_manifest, node_pool_manifest, req
from testkit.controllers.backends import Backend
from testkit.controllers.standins import TestBinder, TestKubelet

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
