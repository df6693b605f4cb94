"""Stand-ins for what a real cluster runs besides the API server, for the controller tests: a kubelet
that registers a Node for each launched instance (kwok-style: no real kubelet anywhere), a binder that
binds pending pods as kube-scheduler would, and `cluster_controllers` (what kube-controller-manager's
node-lifecycle controller and the kubelets do: the `not-ready` taint off Ready Nodes, Terminating pods
finished, and on a real cluster each Node's Lease renewed, so it is not marked unreachable). On a real cluster (PROVISIONER_TEST_KUBECONFIG) they run the same: nothing assumes a kubelet.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from providers.fake.kwok import node_for_instance, node_name_for
from provisioner.api import quantities
from provisioner.clock import Clock, isoformat
from provisioner.cloudprovider import Instance, InstanceType
from provisioner.clusterapi import ClusterError, ConflictError, NotFoundError, guarded, node_rv
from provisioner.state.objects import Node, Pod, tolerates_all

if TYPE_CHECKING:
    from testkit.controllers.backends import Backend

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def cluster_controllers(backend: Backend, namespaces: Collection[str] | None = None) -> None:
    """What kube-controller-manager's node-lifecycle controller and the kubelets do on a real cluster:
    each Node's Lease is renewed (on a real cluster), the `not-ready` taint TaintNodesByCondition puts on
    a new Node comes off once it is Ready, and a Terminating pod is finished (its kubelet stops the
    containers, then deletes it with grace 0): of `namespaces` only, when given (a real cluster's own
    pods have their kubelets)."""
    for node in list(backend.state.nodes.values()):
        if not node.deleting:
            with contextlib.suppress(ClusterError):
                backend.renew_lease(node.name)
        if node.ready and any(t.key == NOT_READY_TAINT for t in node.taints):
            kept = [t.to_dict() for t in node.taints if t.key != NOT_READY_TAINT]
            with contextlib.suppress(ClusterError):  # a conflict or an injected fault: next tick
                backend.patch("Node", node.name, guarded(node_rv(node), {"spec": {"taints": kept}}))
    for pod in [p for p in list(backend.state.pods.values()) if p.deleting]:
        if namespaces is not None and pod.namespace not in namespaces:
            continue
        with contextlib.suppress(ClusterError):
            backend.finish_pod(pod.namespace, pod.name)


@dataclass
class TestKubelet:
    __test__ = False
    """Registers a Ready Node for each launched instance (with its capacity and GPUs), unless told not to."""

    backend: Backend
    clock: Clock
    types: Mapping[str, InstanceType]
    never_register: set[str] = field(default_factory=set)
    """Claim names whose instance never gets a Node."""
    no_devices: set[str] = field(default_factory=set)
    """Claim names whose Node never advertises its GPUs."""
    all_without_devices: bool = False
    hold: bool = False
    """While True, launched instances wait (no Node yet)."""
    launched: list[Instance] = field(default_factory=list)
    deleted: list[Instance] = field(default_factory=list)
    registered: set[str] = field(default_factory=set)
    poll: Any = None
    """A cloud without launch hooks (AWS on moto): its instances are found by listing it."""

    def _poll(self) -> None:
        live = {i.provider_id: i for i in self.poll.list() if i.state in ("pending", "running")}
        for inst in live.values():
            if all(x.provider_id != inst.provider_id for x in self.launched):
                self.launched.append(inst)
                if inst.instance_type not in self.types:
                    for nc in list(self.backend.state.nodeclasses.values()):
                        self.types = {**self.types, **{t.name: t for t in self.poll.instance_types(nc)}}
        for inst in self.launched:
            if inst.provider_id not in live and all(d.provider_id != inst.provider_id for d in self.deleted):
                self.deleted.append(inst)

    def on_launch(self, instance: Instance, instance_type: InstanceType) -> None:
        self.launched.append(instance)

    def on_delete(self, instance: Instance) -> None:
        self.deleted.append(instance)

    def sync(self) -> None:
        if self.poll is not None:
            self._poll()
        for inst in [] if self.hold else self.launched:
            if inst.provider_id in self.registered or inst.nodeclaim in self.never_register:
                continue
            if any(d.provider_id == inst.provider_id for d in self.deleted):
                continue
            devices = not self.all_without_devices and inst.nodeclaim not in self.no_devices
            node = node_for_instance(
                inst, self.types.get(inst.instance_type), devices=devices, now=self.clock.now()
            )
            self.backend.create(node)
            self.registered.add(inst.provider_id)
        cluster_controllers(self.backend)
        for inst in self.deleted:
            name = node_name_for(inst)
            if name in self.backend.state.nodes:
                with contextlib.suppress(NotFoundError):
                    self.backend.delete("Node", name)
        self.deleted = [d for d in self.deleted if node_name_for(d) in self.backend.state.nodes]


def _fits(pod: Pod, node: Node, bound: Sequence[Pod]) -> bool:
    if not node.ready or node.unschedulable or node.deleting:
        return False
    if tolerates_all(pod.tolerations, [t for t in node.taints if t.effect in ("NoSchedule", "NoExecute")]):
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    if pod.required_node_terms and not any(
        all(r.matches(node.labels) for r in term) for term in pod.required_node_terms
    ):
        return False
    used: dict[str, int] = {}
    for p in bound:
        used = quantities.add(used, p.requests)
    return quantities.fits(pod.requests, quantities.subtract(node.allocatable, used))


@dataclass
class TestBinder:
    __test__ = False
    """Binds pending pods to a node they fit, else marks them PodScheduled=False/Unschedulable."""

    backend: Backend
    namespaces: frozenset[str] | None = None
    """Bind only the pods of these namespaces (None: every pod; on a real cluster, kube-scheduler has the
    others)."""

    def sync(self) -> list[str]:
        bound: list[str] = []
        state = self.backend.state
        by_node: dict[str, list[Pod]] = {}
        for p in state.pods.values():
            if p.node_name:
                by_node.setdefault(p.node_name, []).append(p)
        for p in sorted(state.pods.values(), key=lambda p: p.key):
            # kube-scheduler leaves a pod with scheduling gates alone: not bound, not Unschedulable.
            if p.node_name or p.deleting or p.is_terminal or p.scheduling_gates:
                continue
            if self.namespaces is not None and p.namespace not in self.namespaces:
                continue
            target = next(
                (
                    n
                    for n in sorted(state.nodes.values(), key=lambda n: n.name)
                    if _fits(p, n, by_node.get(n.name, []))
                ),
                None,
            )
            if target is not None:
                try:
                    self.backend.bind(p.namespace, p.name, target.name)
                except ConflictError:
                    continue  # on a real cluster kube-scheduler bound it first

                self.backend.patch_status(
                    "Pod",
                    p.name,
                    {
                        "phase": "Running",
                        "startTime": isoformat(self.backend.clock.now()),
                        "conditions": p.conditions_with({"type": "PodScheduled", "status": "True"}),
                    },
                    namespace=p.namespace,
                )
                by_node.setdefault(target.name, []).append(p)
                bound.append(p.key)
            elif not p.unschedulable:
                self.backend.patch_status(
                    "Pod",
                    p.name,
                    {
                        "conditions": p.conditions_with(
                            {
                                "type": "PodScheduled",
                                "status": "False",
                                "reason": "Unschedulable",
                                "message": "0/N nodes are available",
                            }
                        )
                    },
                    namespace=p.namespace,
                )
        return bound
